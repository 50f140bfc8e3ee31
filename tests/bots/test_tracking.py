"""Card tracking: picks, discards and declines, from events or from successive views; and
the worlds sampled from what was tracked."""

from __future__ import annotations

import random
from collections import Counter

from bots.policies.determinize import sample_world
from bots.policies.evaluation import Knowledge
from bots.policies.tracking import CardTracker
from server.engine import (
    Command,
    Discard,
    DrawStock,
    Pass,
    State,
    TakeDiscard,
    decide,
    evolve,
    make_deck,
    make_rules,
    parse_card,
    parse_cards,
    redact,
    view,
)
from tests.engine.helpers import deal

GIN = make_rules("gin", {}, 2)
WATCHER = 0


def _hand() -> State:
    """A Gin hand dealt by seat 0: seat 1 holds 7H 8H (9H would make a run), seat 0 holds TH
    (a neighbour of 9H) and QC (far from everything seat 1 shows). Upcard 5D, then KD, 9H."""
    return deal(
        GIN,
        ["2C 4C 6C 8C TH QC 2D 4D 6D 8D", "7H 8H KS QS JS 3S AH 2H 5S 9S"],
        "5D",
        stock="KD 9H 3D",
    )


def _script(state: State, with_events: bool) -> tuple[State, CardTracker]:
    """Play the scripted turns; seat 0's tracker sees the events or only its own views."""
    tracker = CardTracker()
    moves: list[tuple[int, Command]] = [
        (1, Pass()),  # seat 1 declines the first upcard 5D
        (0, Pass()),
        (1, DrawStock()),  # KD
        (1, Discard(parse_card("KD"))),
        (0, DrawStock()),  # 9H
        (0, Discard(parse_card("9H"))),
        (1, TakeDiscard()),  # seat 1 picks 9H
        (1, Discard(parse_card("5S"))),
    ]
    for seat, command in moves:
        if seat == WATCHER:
            seen = view(state, seat)
            tracker.sync(seen)
            tracker.note_command(seen, command)
        for event in decide(state, seat, command):
            if with_events:
                tracker.observe(WATCHER, redact(state, event, WATCHER))
            state = evolve(state, event)
    tracker.sync(view(state, WATCHER))
    return state, tracker


def _check_memory(tracker: CardTracker, state: State) -> None:
    memory = tracker.memory(WATCHER, state.hand_number)
    assert [parse_card("9H")] == memory.known(1)
    assert parse_cards("KD 5S") == tuple(memory.discarded[1])
    assert parse_card("5D") in memory.declined[1]


def test_events_tell_what_the_opponent_took_discarded_and_declined() -> None:
    """From the redacted events: 9H picked (so held), KD and 5S thrown, 5D passed."""
    state, tracker = _script(_hand(), with_events=True)
    _check_memory(tracker, state)


def test_views_alone_tell_the_same_with_two_players() -> None:
    """Without events, diffing the pile between seat 0's turns finds the same facts."""
    state, tracker = _script(_hand(), with_events=False)
    _check_memory(tracker, state)


def test_a_new_hand_starts_a_new_memory() -> None:
    """Memories are per hand: another hand number starts empty."""
    state, tracker = _script(_hand(), with_events=True)
    assert [] == tracker.memory(WATCHER, state.hand_number + 1).known(1)


def test_danger_is_higher_next_to_a_card_the_opponent_picked() -> None:
    """TH (next to the 9H seat 1 picked) is riskier to throw than QC."""
    state, tracker = _script(_hand(), with_events=True)
    seen = view(state, WATCHER)
    knowledge = Knowledge.build(GIN, seen, tracker.sync(seen))
    assert knowledge.danger(parse_card("TH")) > knowledge.danger(parse_card("QC"))
    assert 1.0 == knowledge.holders[parse_card("9H")]


def test_sampled_worlds_are_consistent_with_what_was_seen() -> None:
    """Each world keeps seat 0's hand, the pile, the hand sizes and the stock size, puts the
    picked 9H in seat 1's hand and deals every card exactly once."""
    state, tracker = _script(_hand(), with_events=True)
    seen = view(state, WATCHER)
    knowledge = Knowledge.build(GIN, seen, tracker.sync(seen))
    rng = random.Random(3)
    for _ in range(20):
        world = sample_world(knowledge, rng)
        assert world is not None
        assert state.hands[WATCHER] == world.hands[WATCHER]
        assert parse_card("9H") in world.hands[1]
        assert len(state.hands[1]) == len(world.hands[1])
        assert len(state.stock) == len(world.stock)
        assert state.pile == world.pile
        everything = Counter([*world.stock, *world.pile, *world.hands[0], *world.hands[1]])
        assert Counter(make_deck(1)) == everything
