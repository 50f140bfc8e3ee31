"""What ``simple`` and ``heuristic`` do in positions where the right move is clear."""

from __future__ import annotations

import random

import msgspec
import pytest

from bots.policies.heuristic import (
    GinParameters,
    GinTurn,
    HeuristicPolicy,
    opponent_alarm,
    undercut_risk,
)
from bots.policies.mc import MonteCarloPolicy
from bots.policies.simple import SimplePolicy
from protocol.cards import is_joker
from server.engine import (
    Command,
    Discard,
    DrawStock,
    Knock,
    MeldCommand,
    Pass,
    State,
    TakeDiscard,
    decide,
    evolve,
    legal_actions,
    make_rules,
    parse_card,
    redact,
    view,
)
from server.engine.solver import discard_deadwoods
from tests.bots.test_tracking import _hand, _script
from tests.engine.helpers import deal

GIN = make_rules("gin", {}, 2)


def _choose(policy: SimplePolicy | HeuristicPolicy, state: State, seat: int) -> Command:
    actions = legal_actions(state, seat)
    return policy.choose(state.rules, view(state, seat), actions, random.Random(0))


def _play(state: State, seat: int, command: Command) -> State:
    for event in decide(state, seat, command):
        state = evolve(state, event)
    return state


def test_simple_takes_the_upcard_only_when_it_joins_a_meld() -> None:
    """Seat 1 holds 7H 8H: it takes a 9H upcard and passes a 5D one."""
    hands = ["2C 4C 6C 8C TH QC 2D 4D 6D 8D", "7H 8H KS QS JS 3S AH 2H 5S 9S"]
    with_run = deal(GIN, hands, "9H", stock="KD 5D 3D")
    without = deal(GIN, hands, "5D", stock="KD 9H 3D")
    assert TakeDiscard() == _choose(SimplePolicy(), with_run, 1)
    assert Pass() == _choose(SimplePolicy(), without, 1)


def test_simple_discards_least_deadwood_but_never_the_card_just_taken() -> None:
    """After taking 9H (it made 7H 8H 9H) simple throws a card that leaves least deadwood."""
    state = deal(
        GIN,
        ["2C 4C 6C 8C TH QC 2D 4D 6D 8D", "7H 8H KS QS JS 3S AH 2H 5S 9S"],
        "9H",
        stock="KD 5D 3D",
    )
    policy = SimplePolicy()
    state = _play(state, 1, _choose(policy, state, 1))
    command = _choose(policy, state, 1)
    assert isinstance(command, Discard)
    left = discard_deadwoods(state.hands[1], GIN.meld_rules, GIN.values)
    allowed = {card: value for card, value in left.items() if card != parse_card("9H")}
    assert command.card != parse_card("9H")
    assert min(allowed.values()) == left[command.card]


def test_simple_and_heuristic_knock_with_gin() -> None:
    """Drawing the card that completes gin, both knock (heuristic: gin always)."""
    hands = ["2C 3C 4C 6D 7D 8D 9S TS JS KH", "AC AD AH 5S 6S 7S 9C TC JC QH"]
    state = deal(GIN, hands, "2S", stock="QC 3H 4H")
    state = _play(state, 1, Pass())
    state = _play(state, 0, Pass())
    state = _play(state, 1, DrawStock())  # QC: 9C TC JC QC, gin after throwing QH
    for policy in (SimplePolicy(), HeuristicPolicy()):
        command = _choose(policy, state, 1)
        assert Knock(card=parse_card("QH")) == command


def test_heuristic_does_not_feed_the_card_next_to_an_opponent_pick() -> None:
    """Seat 1 picked 9H; with TH and QC both loose tens, heuristic keeps TH."""
    state, tracker = _script(_hand(), with_events=True)
    policy = HeuristicPolicy()
    policy.tracker = tracker
    state = _play(state, 0, DrawStock())
    command = _choose(policy, state, 0)
    assert isinstance(command, Discard)
    assert parse_card("TH") != command.card


def test_undercut_risk_grows_with_deadwood_and_as_the_stock_runs_down() -> None:
    """The knock model: more deadwood or fewer stock cards, more risk."""
    assert undercut_risk(10, 25) < undercut_risk(10, 5)
    assert undercut_risk(2, 10) < undercut_risk(9, 10)
    assert 0.0 == undercut_risk(0, 30)


def test_heuristic_opens_in_ramino() -> None:
    """Holding a 30-point opening after the draw, heuristic lays it down."""
    rules = make_rules("ramino", {}, 2)
    hands = [
        "KH QH JH TH 9C 9D 9S 2C 5D 7S JK AC 4H",
        "2D 3D 6C 8C 8H 3S 4S 5C 6H 7D TC QS KC",
    ]
    state = deal(rules, hands, "2H", stock="KS 3C 4C", dealer=1)
    state = _play(state, 0, DrawStock())
    assert isinstance(_choose(HeuristicPolicy(), state, 0), MeldCommand)


def test_heuristic_keeps_a_joker_it_cannot_meld_yet() -> None:
    """Unable to open, heuristic throws a natural card, not its joker."""
    rules = make_rules("ramino", {}, 2)
    hands = [
        "AH 4C 7C TC KC 2D 5D 8D JD 3H 6H 9H JK",
        "2C 3D 6C 8C 8H 3S 4S 5C 6D 7D TD QS AC",
    ]
    state = deal(rules, hands, "QC", stock="2S 3C 4D", dealer=1)
    state = _play(state, 0, DrawStock())
    command = _choose(HeuristicPolicy(), state, 0)
    assert isinstance(command, Discard)
    assert not is_joker(command.card)


def _knock_position(opponent_throws: str, policy: HeuristicPolicy | MonteCarloPolicy) -> State:
    """Seat 1 draws 9H and could knock with 9 deadwood (throwing KH) after seat 0 drew and
    threw ``opponent_throws``; ``policy`` saw seat 1's views and every event from seat 1."""
    state = deal(
        GIN,
        ["2C 4C 6C 8C TH QC 2D 4D 6D 8D", "AC AD AH 5S 6S 7S 9C TC JC KH"],
        "3H",
        stock=f"QS {opponent_throws} 9H",
    )
    moves: list[tuple[int, Command]] = [
        (1, Pass()),
        (0, Pass()),
        (1, DrawStock()),  # QS
        (1, Discard(parse_card("QS"))),
        (0, DrawStock()),
        (0, Discard(parse_card(opponent_throws))),
        (1, DrawStock()),  # 9H
    ]
    tracker = policy.tracker if isinstance(policy, HeuristicPolicy) else policy.heuristic.tracker
    for seat, command in moves:
        if seat == 1:
            seen = view(state, 1)
            tracker.sync(seen)
            tracker.note_command(seen, command)
        for event in decide(state, seat, command):
            policy.observe(1, redact(state, event, 1))
            state = evolve(state, event)
    return state


def _knock_choice(
    policy: HeuristicPolicy | MonteCarloPolicy, opponent_throws: str, stock: int
) -> Command:
    """Seat 1's choice in ``_knock_position`` as if ``stock`` cards were left."""
    state = _knock_position(opponent_throws, policy)
    seen = msgspec.structs.replace(view(state, 1), stock_size=stock)
    return policy.choose(state.rules, seen, legal_actions(state, 1), random.Random(0))


_NO_GIN_WAIT = GinParameters(gin_wait=0.0)
"""The knock rule without waiting for gin (``_knock_position`` has live gin cards)."""


def test_heuristic_knocks_early_but_not_late_with_nine_deadwood() -> None:
    """Early (27 cards left) the undercut risk of 9 deadwood is small: knock; with 6 left it is
    too high: play on."""
    assert Knock(card=parse_card("KH")) == _knock_choice(HeuristicPolicy(_NO_GIN_WAIT), "KS", 27)
    assert isinstance(_knock_choice(HeuristicPolicy(_NO_GIN_WAIT), "KS", 6), Discard)


def test_heuristic_knocks_less_after_the_opponent_throws_low_cards() -> None:
    """With 25 cards left, 9 deadwood is a knock when the opponent last threw a king, not when
    he threw an ace (his loose cards are then low: an undercut is likelier)."""
    assert Knock(card=parse_card("KH")) == _knock_choice(HeuristicPolicy(_NO_GIN_WAIT), "KS", 25)
    assert isinstance(_knock_choice(HeuristicPolicy(_NO_GIN_WAIT), "AS", 25), Discard)


def test_heuristic_waits_for_gin_instead_of_knocking() -> None:
    """Early, 9 deadwood in one loose card (9H) and five unseen cards that would go gin (AS, 4S,
    8S, 8C, QC of 38): the knock gives up a gin chance of 0.13, so the heuristic plays on
    (throwing KH and keeping 9H for the gin draw); without ``gin_wait`` it knocks."""
    policy = HeuristicPolicy()
    state = _knock_position("KS", policy)
    seen = view(state, 1)
    turn = GinTurn(GIN, seen, legal_actions(state, 1), policy.tracker.sync(seen), policy.gin)
    kept = [card for card in seen.hand if card != parse_card("KH")]
    assert 5 / 38 == pytest.approx(turn.evaluator.gin_chance(kept))
    assert Discard(card=parse_card("KH")) == _knock_choice(HeuristicPolicy(), "KS", 27)
    assert isinstance(_knock_choice(HeuristicPolicy(_NO_GIN_WAIT), "KS", 27), Knock)


def test_opponent_alarm_grows_as_his_last_discard_gets_lower() -> None:
    """No discard yet: 0; after a king 0.1; after an ace 1."""
    alarms = []
    for throws in ("KS", "AS"):
        policy = HeuristicPolicy()
        state = _knock_position(throws, policy)
        seen = view(state, 1)
        alarms.append(opponent_alarm(GIN, seen, policy.tracker.sync(seen)))
    fresh = deal(GIN, ["2C 4C 6C 8C TH QC 2D 4D 6D 8D", "AC AD AH 5S 6S 7S 9C TC JC KH"], "3H")
    first = view(fresh, 1)
    assert [0.1, 1.0] == pytest.approx(alarms)
    assert 0.0 == opponent_alarm(GIN, first, HeuristicPolicy().tracker.sync(first))


def test_mc_leaves_whether_to_knock_to_the_heuristic() -> None:
    """``mc`` knocks where the heuristic knocks (it only searches which knock) and plays on
    where the heuristic plays on."""
    for gin in (_NO_GIN_WAIT, GinParameters()):
        early, late = MonteCarloPolicy(budget_ms=50), MonteCarloPolicy(budget_ms=50)
        early.heuristic.gin = late.heuristic.gin = gin
        knocks = isinstance(_knock_choice(HeuristicPolicy(gin), "KS", 27), Knock)
        assert knocks == isinstance(_knock_choice(early, "KS", 27), Knock)
        assert isinstance(_knock_choice(late, "KS", 6), Discard)


def test_mc_weighs_knocking_against_playing_on_only_when_asked() -> None:
    """With ``play_on`` the late knock is searched against the best discard: the choice is the
    knock or a discard, and legal."""
    policy = MonteCarloPolicy(
        budget_ms=50, samples=8, min_samples=4, search=frozenset({"knock", "play_on", "wall"})
    )
    command = _knock_choice(policy, "KS", 6)
    assert command in legal_actions(_knock_position("KS", HeuristicPolicy()), 1)
    assert isinstance(command, Discard) or Knock(card=parse_card("KH")) == command
