"""Tests for the position notation: round trips, hand-written positions and refused texts."""

from __future__ import annotations

import dataclasses
import doctest
import random
from collections.abc import Callable, Iterator
from fractions import Fraction

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.cards import JOKER, card_face, format_cards, make_face, parse_card, parse_cards
from protocol.game import (
    Command,
    Discard,
    Discarded,
    Event,
    GameEnded,
    HandEnded,
    Knock,
    Knocked,
    LaidOff,
    LayOff,
    MeldSpec,
    Pass,
    TakeDiscard,
    UpcardPassed,
)
from server.engine import position
from server.engine.errors import NotationError
from server.engine.game import (
    Phase,
    State,
    advance,
    chance,
    decide,
    evolve,
    is_over,
    legal_actions,
    new_game,
    to_move,
)
from server.engine.position import from_position, to_position
from server.engine.solver import discard_deadwoods
from server.engine.variants import VARIANTS, rules_replace

BAD_POSITION = "notation/bad_position"
IMPOSSIBLE_POSITION = "notation/impossible_position"

# Basic rummy, two players: seat 0 dealt, seat 1 is to draw; the stock is the rest of the pack.
DRAW_POSITION = (
    "ramino1 basic 2 draw hand=1 dealer=0 turn=1 scores=0,0 active=11"
    " hands=2C.3C.4C.5D.6D.7D.8S.9S.TS.JH/AH.2H.3H.4S.5S.6S.7C.8C.9C.TD"
    " stock=* pile=KD melds=-"
)

# Classic ramino, two players: seat 0 has drawn and may lay off 6C on meld 0 before discarding.
PLAY_POSITION = (
    "ramino1 ramino_classic 2 play hand=1 dealer=1 turn=0 scores=0,0 active=11"
    " hands=6C.QD.KD/2S.3S.9H.TH.KC stock=* pile=4H.5D"
    " melds=1:7C.1:8C.1:9C|0:JK=7D.0:7H.1:7S taken=- melded=11 laid_before=11"
    " melds_this_turn=0 laid_this_turn=no reuses=0 idle_turns=3 winners=- last_result=-"
)

# Gin Rummy, before the first deal: exactly what ``new_game("gin", seats=2)`` gives.
NEW_GIN_POSITION = (
    "ramino1 gin 2 deal hand=0 dealer=- turn=- scores=0,0 active=11 hands=-/- stock=- pile=-"
    " melds=-"
)

# Gin Rummy, just dealt: seat 1, the non-dealer, is offered the first upcard TC.
FIRST_UPCARD_POSITION = (
    "ramino1 gin 2 first_upcard hand=1 dealer=0 turn=1 scores=0,0 active=11"
    " hands=2C.3C.4C.5D.6D.7D.8S.9S.TS.JH/AH.2H.3H.4S.5S.6S.7C.8C.9C.TD"
    " stock=* pile=TC melds=-"
)

# Gin Rummy: seat 0 has drawn and may knock discarding 4D (deadwood AH, 1); seat 1 would lay off
# 5C and 7C on his melds and keep 2D and 3S (5).
GIN_KNOCK_POSITION = (
    "ramino1 gin 2 play hand=1 dealer=1 turn=0 scores=0,0 active=11"
    " hands=2C.3C.4C.7D.7H.7S.JS.QS.KS.4D.AH/5C.7C.8H.9H.TH.KH.KD.KC.2D.3S"
    " stock=* pile=9D melds=-"
)

# The result of that knock, as ``last_result=`` writes it.
GIN_KNOCK_RESULT = (
    "hand:1;winner:0;ended_by:0;reason:knock;rummy:no"
    ";hands:2C.3C.4C.7D.AH.7H.7S.JS.QS.KS/5C.7C.KC.2D.KD.8H.9H.TH.KH.3S"
    ";counts:1,5;points:4,0;totals:4,0;eliminated:-"
    ";shown:2C.3C.4C|7D.7H.7S|JS.QS.KS/KC.KD.KH|8H.9H.TH;laid_off:5C.7C"
)

# The position right after that knock, written by hand.
AFTER_KNOCK_POSITION = (
    "ramino1 gin 2 deal hand=1 dealer=1 turn=- scores=4,0 active=11"
    " hands=2C.3C.4C.7D.AH.7H.7S.JS.QS.KS/5C.7C.KC.2D.KD.8H.9H.TH.KH.3S"
    f" stock=* pile=9D.4D melds=- hands_won=1,0 last_result={GIN_KNOCK_RESULT}"
)

OPTION_SETS: list[tuple[str, dict[str, object]]] = [
    (
        "basic",
        {
            "going_rummy": "plus10",
            "ace": "around",
            "stock_exhausted": "shuffle",
            "max_stock_reuses": 1,
            "dealer": "lowest_card",
        },
    ),
    (
        "basic",
        {
            "scoring": "pay_winner",
            "must_discard_to_go_out": True,
            "layoff_requires_own_meld": True,
            "melds_per_turn": "unlimited",
        },
    ),
    ("block", {"scoring": "penalty", "target": 50, "ace": "high_or_low"}),
    ("ramino_classic", {"decks": 2, "jokers": 2, "joker_swap": True, "going_rummy": "none"}),
    ("rummy500", {"floating": True, "values": "5_10_15", "top_discard_must_be_used": True}),
    ("ramino", {"bussare": True, "open_to_take_upcard": True, "chiudere_in_mano": False}),
    ("wrotham", {"joker_value": 25, "deals": 4}),
    ("basic", {"idle_turn_cap": 4, "deals": 2, "max_stock_reuses": "unlimited"}),
]


def _playout(state: State, rng: random.Random, max_steps: int) -> Iterator[State]:
    """Every state of a random game from ``state`` (after each event), for ``max_steps`` moves."""
    yield state
    for _ in range(max_steps):
        if is_over(state):
            return
        events = advance(state, rng, lambda state, seat: rng.choice(legal_actions(state, seat)))
        for event in events:
            state = evolve(state, event)
            yield state


def _knocking_chooser(rng: random.Random, knock_chance: float) -> Callable[[State, int], Command]:
    """A random player who knocks more than chance would (random play rarely can).

    He goes gin whenever he can (nine times in ten), takes any other legal knock with
    probability ``knock_chance``, mostly discards the card that leaves the least deadwood, and
    otherwise picks any legal action.
    """

    def choose(state: State, seat: int) -> Command:
        actions = legal_actions(state, seat)
        knocks = [action for action in actions if isinstance(action, Knock)]
        discards = [action for action in actions if isinstance(action, Discard)]
        if knocks or discards:
            rules = state.rules
            left = discard_deadwoods(state.hands[seat], rules.meld_rules, rules.values)
            gins = [knock for knock in knocks if knock.card < 0 or left[knock.card] == 0]
            if gins and rng.random() < 0.9:
                return rng.choice(gins)
            if knocks and rng.random() < knock_chance:
                return rng.choice(knocks)
            if discards and rng.random() < 0.8:
                return min(discards, key=lambda discard: (left[discard.card], discard.card))
        return rng.choice(actions)

    return choose


def _knocking_playout(
    state: State, rng: random.Random, max_steps: int, knock_chance: float = 0.3
) -> Iterator[tuple[State, Event | None]]:
    """Every state of a game played by ``_knocking_chooser`` players, with the event that led
    to it (``None`` for the first)."""
    yield state, None
    choose = _knocking_chooser(rng, knock_chance)
    for _ in range(max_steps):
        if is_over(state):
            return
        for event in advance(state, rng, choose):
            state = evolve(state, event)
            yield state, event


def _preset_player_counts() -> list[tuple[str, int]]:
    return [
        (name, players)
        for name, preset in VARIANTS.items()
        for players in sorted({2, preset.max_players})
    ]


# Round trips -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("preset", "players"), _preset_player_counts())
@settings(max_examples=2, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_every_state_of_a_random_game_round_trips(preset: str, players: int, seed: int) -> None:
    """Each state met while playing a random game of a preset reads back equal to itself."""
    states = _playout(new_game(preset, seats=players), random.Random(seed), max_steps=1500)
    for state in states:
        assert state == from_position(to_position(state))


@pytest.mark.parametrize(("preset", "options"), OPTION_SETS)
@settings(max_examples=2, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_states_under_table_options_round_trip(
    preset: str, options: dict[str, object], seed: int
) -> None:
    """States of random games at tables that set options read back equal, rules included."""
    start = new_game(preset, options, seats=3)
    for state in _playout(start, random.Random(seed), max_steps=600):
        assert state == from_position(to_position(state))


GIN_OPTIONS: dict[str, object] = {
    "deals": 1,
    "undercut_on_tie": False,
    "big_gin_bonus": 0,
    "oklahoma": True,
}

KNOCK_TABLES: list[tuple[str, int, dict[str, object]]] = [
    ("knock", 2, {}),
    ("knock", 3, {}),
    ("knock", 4, {}),
    ("knock", 5, {}),
    ("knock", 3, {"tie_goes_to": "opponent", "literal_bonus": True, "rummy_bonus": 10}),
    ("gin", 2, {}),
    ("gin", 2, GIN_OPTIONS),
]


@pytest.mark.parametrize(("preset", "players", "options"), KNOCK_TABLES)
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_states_of_knocking_games_round_trip(
    preset: str, players: int, options: dict[str, object], seed: int
) -> None:
    """Every state of a Knock or Gin Rummy game whose players knock often reads back equal."""
    start = new_game(preset, options, seats=players)
    for state, _ in _knocking_playout(start, random.Random(seed), max_steps=2000):
        assert state == from_position(to_position(state))


@pytest.mark.parametrize(("options", "games"), [({}, 12), (GIN_OPTIONS, 30)])
def test_gin_games_round_trip_through_knocks_gins_undercuts_and_walls(
    options: dict[str, object], games: int
) -> None:
    """Gin Rummy games from fixed seeds meet every way a hand ends and a finished game; each
    state on the way, game-over states with their bonuses included, reads back equal."""
    reasons: set[str] = set()
    seen: set[tuple[str, object]] = set()
    for seed in range(games):
        start = new_game("gin", options, seats=2)
        for state, event in _knocking_playout(start, random.Random(seed), max_steps=3000):
            assert state == from_position(to_position(state))
            seen.update(
                {
                    ("phase", state.phase),
                    ("upcard_passes", state.upcard_passes),
                    ("knock_limit", state.knock_limit),
                    ("must_knock", state.must_knock),
                }
            )
            if isinstance(event, HandEnded):
                reasons.add(event.reason)
                if event.reason in {"knock", "undercut", "tie"}:
                    assert event.shown[0] or event.shown[1]
            if isinstance(event, GameEnded):
                assert state.last_result is not None
                seen.add(("bonus", state.scores != state.last_result.totals))
        assert is_over(state)
    assert {"knock", "gin", "wall"} <= reasons
    expected = {
        ("phase", Phase.FIRST_UPCARD),
        ("upcard_passes", 1),
        ("upcard_passes", 2),
        ("bonus", True),
    }
    assert expected <= seen
    if options.get("oklahoma"):
        assert len({value for name, value in seen if name == "knock_limit"}) > 3
    else:
        assert "undercut" in reasons
        assert ("must_knock", True) in seen


@pytest.mark.parametrize(
    ("preset", "players"),
    [
        (name, players)
        for name, preset in VARIANTS.items()
        for players in range(preset.min_players, preset.max_players + 1)
    ],
)
def test_a_new_game_round_trips_for_every_preset_and_player_count(
    preset: str, players: int
) -> None:
    """A game before its first deal, and just after it, reads back equal."""
    state = new_game(preset, seats=players)
    dealt = evolve(state, chance(state, random.Random(players)))
    assert state == from_position(to_position(state))
    assert dealt == from_position(to_position(dealt))


def test_fractional_scores_and_the_previous_result_round_trip() -> None:
    """Exact fractions in the scores and a previous hand's result survive the text."""
    previous = HandEnded(
        hand=1,
        winner=-1,
        reason="idle_cap",
        rummy=False,
        hands=(parse_cards("2C 3C"), parse_cards("KD QD JD")),
        counts=(5, 30),
        points=("25/2", "-3"),
        totals=("25/2", "-3"),
        eliminated=(1,),
    )
    state = dataclasses.replace(
        from_position(DRAW_POSITION),
        scores=(Fraction(25, 2), Fraction(-3)),
        last_result=previous,
    )
    text = to_position(state)
    assert "scores=25/2,-3" in text.split()
    assert (
        "last_result=hand:1;winner:-;ended_by:-;reason:idle_cap;rummy:no;hands:2C.3C/KD.QD.JD;"
        "counts:5,30;points:25/2,-3;totals:25/2,-3;eliminated:1;shown:-;laid_off:-"
    ) in text.split()
    assert state == from_position(text)


def test_table_options_are_written_in_their_text_form() -> None:
    """The variant field is the preset and the table's options, sorted, as text values."""
    state = new_game(
        "basic",
        {
            "going_rummy": "plus10",
            "max_stock_reuses": "unlimited",
            "layoff_requires_own_meld": True,
        },
        seats=3,
    )
    expected = [
        "ramino1",
        "basic:going_rummy=plus10,layoff_requires_own_meld=true,max_stock_reuses=unlimited",
        "3",
        "deal",
    ]
    assert expected == to_position(state).split()[:4]


def test_a_written_position_is_one_line_of_every_field_in_order() -> None:
    """``to_position`` writes every field, the labelled ones in the documented order."""
    fields = to_position(from_position(PLAY_POSITION)).split(" ")
    expected = [
        "hand",
        "dealer",
        "turn",
        "scores",
        "active",
        "hands",
        "stock",
        "pile",
        "melds",
        "taken",
        "required",
        "melded",
        "laid_before",
        "melds_this_turn",
        "laid_this_turn",
        "reuses",
        "idle_turns",
        "resume",
        "claim",
        "upcard_passes",
        "knock_limit",
        "must_knock",
        "hands_won",
        "forfeited",
        "winners",
        "last_result",
    ]
    assert expected == [field.partition("=")[0] for field in fields[4:]]


def test_the_notation_has_a_field_for_every_state_field() -> None:
    """A field added to ``State`` must get its place in the notation (and a new version)."""
    expected = {
        "rules",
        "phase",
        "hand_number",
        "dealer",
        "turn",
        "scores",
        "active",
        "hands",
        "stock",
        "pile",
        "melds",
        "melded",
        "laid_before",
        "taken",
        "required",
        "resume",
        "melds_this_turn",
        "laid_this_turn",
        "reuses",
        "idle_turns",
        "claim_kind",
        "claim_seats",
        "claim_answers",
        "claim_depths",
        "upcard_passes",
        "knock_limit",
        "must_knock",
        "hands_won",
        "forfeited",
        "winners",
        "last_result",
    }
    assert expected == {field.name for field in dataclasses.fields(State)}


def test_the_result_part_of_the_notation_has_a_part_for_every_hand_result_field() -> None:
    """A field added to ``HandEnded`` must get its part in ``last_result=``."""
    expected = {
        "hand",
        "winner",
        "ended_by",
        "reason",
        "rummy",
        "hands",
        "counts",
        "points",
        "totals",
        "eliminated",
        "shown",
        "laid_off",
    }
    assert expected == set(HandEnded.__struct_fields__)


def test_rules_not_made_by_make_rules_cannot_be_written() -> None:
    """A state whose rules were changed by hand is refused rather than written wrongly."""
    state = new_game("basic", seats=2)
    changed = dataclasses.replace(state, rules=rules_replace(state.rules, hand_size=3))
    with pytest.raises(NotationError) as caught:
        to_position(changed)
    assert "notation/unwritable_position" == caught.value.code


# Hand-written positions --------------------------------------------------------------------------


def test_a_hand_written_position_loads_its_hands_pile_and_turn() -> None:
    """The draw position shows the written hands (sorted), upcard, seat to move and stock."""
    state = from_position(DRAW_POSITION)
    assert "2C 3C 4C 5D 6D 7D JH 8S 9S TS" == format_cards(state.hands[0])
    assert "7C 8C 9C TD AH 2H 3H 4S 5S 6S" == format_cards(state.hands[1])
    assert (Phase.DRAW, 1, 1, 0) == (state.phase, to_move(state), state.hand_number, state.dealer)
    assert parse_cards("KD") == state.pile
    assert 52 - 21 == len(state.stock)
    assert parse_cards("AC 5C") == state.stock[:2]


def test_a_hand_written_position_loads_melds_with_jokers_and_owners() -> None:
    """Melds keep each card's declared face and the seat that laid it, in canonical order."""
    state = from_position(PLAY_POSITION)
    run, group = state.melds
    assert parse_cards("7C 8C 9C") == run.meld.cards
    assert (1, 1, 1) == run.owners
    assert (make_face(7, 1), make_face(7, 2), make_face(7, 3)) == group.meld.faces
    assert JOKER == card_face(group.meld.cards[0])
    assert (0, 0, 1) == group.owners
    assert (3, (True, True)) == (state.idle_turns, state.melded)


def test_meld_cards_written_out_of_order_are_put_in_canonical_order() -> None:
    """A run written 9-7-8 loads as 7-8-9, each card keeping its owner."""
    text = PLAY_POSITION.replace("1:7C.1:8C.1:9C", "1:9C.0:7C.1:8C")
    run = from_position(text).melds[0]
    assert parse_cards("7C 8C 9C") == run.meld.cards
    assert (0, 1, 1) == run.owners


def test_left_out_trailing_fields_take_the_values_of_a_fresh_turn() -> None:
    """Without the fields from ``taken=`` on: nothing taken, flags off, counters 0, no result,
    no hands won, and the table's knock limit."""
    state = from_position(DRAW_POSITION)
    expected = ((), (False, False), (False, False), 0, False, 0, 0, 0, 10, False, (0, 0), (), None)
    actual = (
        state.taken,
        state.melded,
        state.laid_before,
        state.melds_this_turn,
        state.laid_this_turn,
        state.reuses,
        state.idle_turns,
        state.upcard_passes,
        state.knock_limit,
        state.must_knock,
        state.hands_won,
        state.winners,
        state.last_result,
    )
    assert expected == actual


def test_a_star_ends_the_stock_with_the_rest_of_the_pack() -> None:
    """Cards written before ``*`` are drawn first; the rest follow in pack order."""
    state = from_position(DRAW_POSITION.replace("stock=*", "stock=QS.AC.*"))
    assert parse_cards("QS AC 5C 6C") == state.stock[:4]
    assert 31 == len(state.stock)


def test_cards_and_options_are_read_case_insensitively() -> None:
    """Lower-case cards and option values read as their canonical form."""
    lower = DRAW_POSITION.replace("pile=KD", "pile=kd").replace("basic", "basic:ace=AROUND")
    state = from_position(lower)
    assert parse_cards("KD") == state.pile
    assert (("ace", "around"),) == state.rules.options


def test_an_open_claim_window_loads_with_its_seats_answers_and_depths() -> None:
    """A Rummy 500 claim window written by hand loads, and reads back the same."""
    text = (
        "ramino1 rummy500 3 claim hand=1 dealer=0 turn=1 scores=0,0,0 active=111"
        " hands=2C.3C.4C.5D.6D.7D.8S/AH.2H.3H.4S.5S.6S.7C/9C.TD.JD.QD.KD.9S.TS"
        " stock=* pile=KH.5H melds=- required=- resume=-"
        " claim=kind:rummy;seats:2,0;answers:0,-1;depths:1"
    )
    state = from_position(text)
    expected = ("rummy", (2, 0), (0, -1), (1,), Phase.CLAIM)
    actual = (
        state.claim_kind,
        state.claim_seats,
        state.claim_answers,
        state.claim_depths,
        state.phase,
    )
    assert expected == actual
    assert state == from_position(to_position(state))


def test_play_continues_from_a_loaded_position() -> None:
    """From the play position seat 0 lays off 6C, then discards, and the turn passes."""
    state = from_position(PLAY_POSITION)
    lay_off = LayOff(card=parse_card("6C"), target=0, face=make_face(6, 0))
    assert lay_off in legal_actions(state, 0)
    events = decide(state, 0, lay_off)
    assert (LaidOff(seat=0, card=parse_card("6C"), target=0, face=make_face(6, 0)),) == events
    state = evolve(state, events[0])
    assert parse_cards("6C 7C 8C 9C") == state.melds[0].meld.cards
    assert (0, 1, 1, 1) == state.melds[0].owners
    events = decide(state, 0, Discard(card=parse_card("QD")))
    assert (Discarded(seat=0, card=parse_card("QD")),) == events
    state = evolve(state, events[0])
    assert (Phase.DRAW, 1, parse_cards("KD")) == (state.phase, to_move(state), state.hands[0])


def test_going_out_from_a_loaded_position_records_a_result_that_round_trips() -> None:
    """Discarding the last card ends the hand; the ended state reads back with its result."""
    text = PLAY_POSITION.replace("hands=6C.QD.KD/", "hands=KD/")
    state = from_position(text)
    for event in decide(state, 0, Discard(card=parse_card("KD"))):
        state = evolve(state, event)
    assert state.last_result is not None
    assert (0, "out", ("34", "0")) == (
        state.last_result.winner,
        state.last_result.reason,
        state.last_result.points,
    )
    assert (Phase.DEAL, (Fraction(34), Fraction(0))) == (state.phase, state.scores)
    assert state == from_position(to_position(state))


# Hand-written Knock and Gin Rummy positions -----------------------------------------------------


def test_a_gin_table_before_its_first_deal_is_written_with_no_knock_limit() -> None:
    """Before the first deal the knock limit is ``-``; the short position reads as a new game."""
    state = new_game("gin", seats=2)
    assert state == from_position(NEW_GIN_POSITION)
    text = to_position(state).split()
    assert {"knock_limit=-", "upcard_passes=0", "must_knock=no", "hands_won=0,0"} <= set(text)


def test_the_first_upcard_is_offered_to_each_seat_and_the_passes_round_trip() -> None:
    """In ``first_upcard`` the non-dealer, then the dealer, may take the upcard or pass; after two
    passes the non-dealer must draw from the stock. Each step reads back, and the position after
    one pass can be written by hand."""
    state = from_position(FIRST_UPCARD_POSITION)
    expected = (Phase.FIRST_UPCARD, 1, 0, 10, (0, 0))
    actual = (state.phase, to_move(state), state.upcard_passes, state.knock_limit, state.hands_won)
    assert expected == actual
    assert [TakeDiscard(), Pass()] == legal_actions(state, 1)
    assert "first_upcard" == to_position(state).split()[3]
    (event,) = decide(state, 1, Pass())
    assert UpcardPassed(seat=1) == event
    state = evolve(state, event)
    assert "upcard_passes=1" in to_position(state).split()
    assert state == from_position(to_position(state))
    written = FIRST_UPCARD_POSITION.replace("turn=1", "turn=0") + " upcard_passes=1"
    assert state == from_position(written)
    state = evolve(state, decide(state, 0, Pass())[0])
    assert (Phase.DRAW, 1, 2) == (state.phase, to_move(state), state.upcard_passes)
    assert "upcard_passes=2" in to_position(state).split()
    assert state == from_position(to_position(state))


def test_an_oklahoma_knock_limit_is_written_and_read() -> None:
    """With ``oklahoma`` the first upcard sets the knock limit; the position keeps it."""
    state = new_game("gin", {"oklahoma": True}, seats=2)
    dealt = evolve(state, chance(state, random.Random(3)))
    assert f"knock_limit={dealt.knock_limit}" in to_position(dealt).split()
    assert dealt == from_position(to_position(dealt))
    written = FIRST_UPCARD_POSITION.replace("gin", "gin:oklahoma=true").replace(
        "pile=TC", "pile=3D"
    )
    assert 10 == from_position(written).knock_limit
    assert 3 == from_position(written + " knock_limit=3").knock_limit


def test_a_gin_knock_records_the_shown_melds_and_lay_offs_in_the_result() -> None:
    """Knocking ends the hand; the written result carries what each seat showed and the cards
    laid off, and reads back; the same position written by hand loads equal."""
    state = from_position(GIN_KNOCK_POSITION)
    knock = Knock(card=parse_card("4D"))
    assert knock in legal_actions(state, 0)
    events = decide(state, 0, knock)
    assert [Knocked, HandEnded] == [type(event) for event in events]
    for event in events:
        state = evolve(state, event)
    text = to_position(state).split()
    assert f"last_result={GIN_KNOCK_RESULT}" in text
    assert {"scores=4,0", "hands_won=1,0", "pile=9D.4D"} <= set(text)
    assert state == from_position(to_position(state))
    assert state == from_position(AFTER_KNOCK_POSITION)
    assert state.last_result is not None
    run = MeldSpec(
        parse_cards("2C 3C 4C"), tuple(card_face(card) for card in parse_cards("2C 3C 4C"))
    )
    assert run == state.last_result.shown[0][0]
    assert parse_cards("5C 7C") == state.last_result.laid_off


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        ("gin", "winner:1;ended_by:0;reason:undercut;"),
        ("gin:undercut_on_tie=false", "winner:-;ended_by:0;reason:tie;"),
    ],
)
def test_a_knock_tied_in_deadwood_round_trips_as_an_undercut_or_a_tie(
    variant: str, expected: str
) -> None:
    """Knocking with 4 against 4 after lay-offs is an undercut, or without ``undercut_on_tie``
    a tie that no one wins (``winner:-``)."""
    text = GIN_KNOCK_POSITION.replace("2D.3S", "AD.3S").replace("gin", variant, 1)
    state = from_position(text)
    for event in decide(state, 0, Knock(card=parse_card("AH"))):
        state = evolve(state, event)
    written = to_position(state)
    assert f"hand:1;{expected}" in written
    assert state == from_position(written)


def test_a_gin_game_over_keeps_its_final_totals_with_the_bonuses() -> None:
    """A knock reaching 100 ends the game: the scores are the totals with four boxes, the game
    bonus and the shutout doubling, while the result keeps the hand's own totals."""
    text = GIN_KNOCK_POSITION.replace("scores=0,0", "scores=98,0") + " hands_won=3,0"
    state = from_position(text)
    events = decide(state, 0, Knock(card=parse_card("4D")))
    assert GameEnded(winners=(0,), totals=("604", "0")) == events[-1]
    for event in events:
        state = evolve(state, event)
    written = to_position(state).split()
    assert {"game_over", "scores=604,0", "hands_won=4,0", "winners=0"} <= set(written)
    assert state.last_result is not None
    assert ("102", "0") == state.last_result.totals
    assert state == from_position(to_position(state))


def _at_the_wall(text: str) -> State:
    """The position ``text`` with all but two stock cards moved under the pile: the wall."""
    state = from_position(text)
    return dataclasses.replace(state, stock=state.stock[:2], pile=state.stock[2:] + state.pile)


def test_taking_the_upcard_at_the_wall_must_end_in_a_knock_and_round_trips() -> None:
    """At the wall, seat 1 may take TC only to knock with it; the state says ``must_knock=yes``."""
    state = _at_the_wall(FIRST_UPCARD_POSITION.replace("first_upcard", "draw"))
    assert [TakeDiscard(), Pass()] == legal_actions(state, 1)
    state = evolve(state, decide(state, 1, TakeDiscard())[0])
    assert state.must_knock
    assert "must_knock=yes" in to_position(state).split()
    assert state == from_position(to_position(state))
    assert all(isinstance(action, Knock) for action in legal_actions(state, 1))


def test_passing_at_the_wall_voids_the_hand_and_round_trips() -> None:
    """Passing at the wall ends the hand with no winner and nothing shown."""
    state = _at_the_wall(FIRST_UPCARD_POSITION.replace("first_upcard", "draw"))
    for event in decide(state, 1, Pass()):
        state = evolve(state, event)
    written = to_position(state)
    assert "winner:-;ended_by:-;reason:wall;" in written
    assert written.endswith(";shown:-;laid_off:-")
    assert state == from_position(written)


def test_result_parts_may_be_left_out_and_shown_melds_are_put_in_canonical_order() -> None:
    """``eliminated``, ``shown`` and ``laid_off`` may each be left out; a shown meld written
    out of order loads in ``check_meld`` order, and the melds keep the order written."""
    expected = from_position(AFTER_KNOCK_POSITION)
    assert expected == from_position(AFTER_KNOCK_POSITION.replace(";eliminated:-", ""))
    shuffled = AFTER_KNOCK_POSITION.replace("2C.3C.4C|", "4C.2C.3C|").replace(
        "KC.KD.KH|", "KH.KC.KD|"
    )
    assert expected == from_position(shuffled)
    bare = from_position(AFTER_KNOCK_POSITION.split(";shown:")[0])
    assert expected.last_result is not None
    assert msgspec.structs.replace(expected.last_result, shown=(), laid_off=()) == bare.last_result
    reordered = from_position(
        AFTER_KNOCK_POSITION.replace("|7D.7H.7S|JS.QS.KS/", "|JS.QS.KS|7D.7H.7S/")
    )
    assert reordered.last_result is not None
    assert parse_cards("JS QS KS") == reordered.last_result.shown[0][1].cards


def test_shown_melds_with_a_joker_and_a_seat_with_none_round_trip() -> None:
    """A joker in a shown meld is written with its declared face; ``-`` marks a seat that
    showed no meld."""
    joker_set = MeldSpec((JOKER, *parse_cards("7H 7S")), (make_face(7, 1), *parse_cards("7H 7S")))
    result = HandEnded(
        hand=2,
        winner=0,
        reason="knock",
        rummy=False,
        hands=((JOKER, *parse_cards("7H 7S 2C")), parse_cards("KD QC")),
        counts=(2, 20),
        points=("18", "0"),
        totals=("18", "0"),
        shown=((joker_set,), ()),
    )
    state = dataclasses.replace(from_position(PLAY_POSITION), last_result=result)
    text = to_position(state)
    assert text.endswith(";eliminated:-;shown:JK=7D.7H.7S/-;laid_off:-")
    assert state == from_position(text)


# Refused texts -----------------------------------------------------------------------------------


def _swap(old: str, new: str, base: str = DRAW_POSITION) -> str:
    assert old in base
    return base.replace(old, new, 1)


MALFORMED: list[tuple[str, str]] = [
    ("", "version"),
    (DRAW_POSITION.replace("ramino1", "ramino9"), "version"),
    ("ramino1 basic 2", "position"),
    (_swap("basic", "canasta"), "variant"),
    (_swap("basic", "basic:going_rummy=triple"), "variant"),
    (_swap("basic", "basic:jokers=2"), "variant"),
    (_swap("basic", "basic:going_rummy"), "variant"),
    (_swap("basic", "basic:going_rummy=none,going_rummy=double"), "variant"),
    (_swap("basic", "basic:stock_exhausted=block,max_stock_reuses=2"), "variant"),
    (_swap(" 2 draw", " 7 draw"), "players"),
    (_swap(" 2 draw", " two draw"), "players"),
    (_swap("draw", "think"), "phase"),
    (_swap("hand=1", "hand=x"), "hand"),
    (_swap("dealer=0", "dealer=2"), "dealer"),
    (_swap("turn=1", "turn=-1"), "turn"),
    (_swap("scores=0,0", "scores=0"), "scores"),
    (_swap("scores=0,0", "scores=0,1.5"), "scores"),
    (_swap("scores=0,0", "scores=0,1/0"), "scores"),
    (_swap("active=11", "active=1x"), "active"),
    (_swap("active=11", "active=111"), "active"),
    (_swap("hands=2C.3C", "hands=-/2C.3C"), "hands"),
    (_swap("hands=2C", "hands=ZZ"), "hands"),
    (_swap("pile=KD", "pile=KD.2C"), "pile"),
    (_swap("pile=KD", "pile=KD2"), "pile"),
    (_swap("pile=KD", "pile=JK"), "pile"),
    (_swap("stock=*", "stock=-"), "stock"),
    (_swap("stock=*", "stock="), "stock"),
    (_swap("stock=* pile=KD", "pile=KD stock=*"), "stock"),
    (_swap("melds=-", "melds=0:QH.0:KS.0:QC"), "melds"),
    (_swap("melds=-", "melds=QH.QS.QC"), "melds"),
    (_swap("melds=-", "melds=2:QH.0:QS.0:QC"), "melds"),
    (_swap("melds=-", "melds=0:QH.0:QS.0:JK=QC"), "melds"),
    (_swap("melds=", "melds=0:QH.0:QS.0:JK2|", PLAY_POSITION), "melds"),
    (_swap("melds=-", "melds=0:QH.0:QS.0:QC=QD"), "melds"),
    (_swap("melds=-", "melds=0:QH.0:QS"), "melds"),
    (DRAW_POSITION + " colour=red", "position"),
    (DRAW_POSITION + " taken=KD", "taken"),
    (DRAW_POSITION + " taken=5C", "taken"),
    (DRAW_POSITION + " melded=1", "melded"),
    (DRAW_POSITION + " laid_this_turn=maybe", "laid_this_turn"),
    (DRAW_POSITION + " reuses=-1", "reuses"),
    (DRAW_POSITION + " winners=0,2", "winners"),
    (DRAW_POSITION + " idle_turns=1 reuses=1", "position"),
    (DRAW_POSITION + " last_result=hand:1", "last_result"),
    (DRAW_POSITION + " required=KD.QD", "required"),
    (DRAW_POSITION + " resume=2", "resume"),
    (DRAW_POSITION + " claim=kind:rummy", "claim"),
    (DRAW_POSITION + " claim=kind:rummy;seats:1;answers:0,0;depths:1", "claim.answers"),
    (DRAW_POSITION + " claim=kind:rummy;seats:3;answers:0;depths:1", "claim.seats"),
    (DRAW_POSITION + " claim=kind:rummy;seats:1;answers:-2;depths:1", "claim.answers"),
    (
        DRAW_POSITION + " last_result=winner:0;hand:1;reason:out;rummy:no;hands:-/2C;"
        "counts:0,2;points:2,0;totals:2,0",
        "last_result",
    ),
    (
        DRAW_POSITION + " last_result=hand:1;winner:5;reason:out;rummy:no;hands:-/2C;"
        "counts:0,2;points:2,0;totals:2,0",
        "last_result.winner",
    ),
    (
        DRAW_POSITION + " last_result=hand:1;winner:0;reason:Out!;rummy:no;hands:-/2C;"
        "counts:0,2;points:2,0;totals:2,0",
        "last_result.reason",
    ),
    (
        DRAW_POSITION + " last_result=hand:1;winner:0;reason:out;rummy:no;hands:-/2C;"
        "counts:0,2;points:2,0;totals:2,x",
        "last_result.totals",
    ),
    (
        DRAW_POSITION + " last_result=hand:1;winner:0;reason:out;rummy:no;hands:-/2C;"
        "counts:0;points:2,0;totals:2,0",
        "last_result.counts",
    ),
    (
        DRAW_POSITION + " last_result=hand:1;winner:0;reason:out;rummy:maybe;hands:-/2C;"
        "counts:0,2;points:2,0;totals:2,0",
        "last_result.rummy",
    ),
    (
        DRAW_POSITION + " last_result=hand:1;winner:0;reason:out;rummy:no;hands:-/2C.2C;"
        "counts:0,4;points:4,0;totals:4,0",
        "last_result.hands",
    ),
]


def _result(old: str, new: str) -> str:
    """``AFTER_KNOCK_POSITION`` with one change in its ``last_result=``."""
    assert old in GIN_KNOCK_RESULT
    return AFTER_KNOCK_POSITION.replace(GIN_KNOCK_RESULT, GIN_KNOCK_RESULT.replace(old, new, 1))


_SHOWN = "shown:2C.3C.4C|7D.7H.7S|JS.QS.KS/KC.KD.KH|8H.9H.TH"

MALFORMED += [
    (DRAW_POSITION + " upcard_passes=x", "upcard_passes"),
    (DRAW_POSITION + " upcard_passes=-1", "upcard_passes"),
    (DRAW_POSITION + " upcard_passes=3", "upcard_passes"),
    (DRAW_POSITION + " knock_limit=-1", "knock_limit"),
    (DRAW_POSITION + " knock_limit=-", "knock_limit"),
    (DRAW_POSITION + " knock_limit=ten", "knock_limit"),
    (NEW_GIN_POSITION + " knock_limit=10", "knock_limit"),
    (DRAW_POSITION + " must_knock=1", "must_knock"),
    (DRAW_POSITION + " hands_won=1", "hands_won"),
    (DRAW_POSITION + " hands_won=1,2,0", "hands_won"),
    (DRAW_POSITION + " hands_won=1,x", "hands_won"),
    (DRAW_POSITION + " hands_won=1,-1", "hands_won"),
    (DRAW_POSITION + " hands_won=-", "hands_won"),
    (DRAW_POSITION + " forfeited=2", "forfeited"),
    (DRAW_POSITION + " forfeited=1", "forfeited"),
    (DRAW_POSITION + " hands_won=0,0 must_knock=no", "position"),
    (DRAW_POSITION + " winners=0 upcard_passes=1", "position"),
    (DRAW_POSITION + " knock_limit=5 claim=-", "position"),
    (_result(_SHOWN, "shown:2C.3C.4C|7D.7H.7S|JS.QS.KS"), "last_result.shown"),
    (_result(_SHOWN, _SHOWN + "/-"), "last_result.shown"),
    (_result("2C.3C.4C|7D.7H.7S", "2C.3C.7D|4C.7H.7S"), "last_result.shown"),
    (_result("2C.3C.4C|7D", "2C.3C.4C||7D"), "last_result.shown"),
    (_result("2C.3C.4C|7D", "2C.3C.ZZ|7D"), "last_result.shown"),
    (_result("7D.7H.7S|", "JK.7H.7S|"), "last_result.shown"),
    (_result("7D.7H.7S|", "7D=ZZ.7H.7S|"), "last_result.shown"),
    (_result("7D.7H.7S|", "7D.7H.7S|7D.7H.7S|"), "last_result.shown"),
    (_result(_SHOWN, "shown:KC.KD.KH|8H.9H.TH/2C.3C.4C|7D.7H.7S|JS.QS.KS"), "last_result.shown"),
    (_result(_SHOWN, "shown:"), "last_result.shown"),
    (_result("laid_off:5C.7C", "laid_off:9D"), "last_result.laid_off"),
    (_result("laid_off:5C.7C", "laid_off:5C.2C"), "last_result.laid_off"),
    (_result("laid_off:5C.7C", "laid_off:5C.5C"), "last_result.laid_off"),
    (_result("laid_off:5C.7C", "laid_off:5C.ZZ"), "last_result.laid_off"),
    (_result(_SHOWN, "shown:-"), "last_result.laid_off"),
    (_result(";laid_off:5C.7C", ";laid_off:5C.7C;laid_off:-"), "last_result"),
    (_result(_SHOWN + ";laid_off:5C.7C", "laid_off:5C.7C;" + _SHOWN), "last_result"),
    (_result(";eliminated:-", ";shown:-;eliminated:-"), "last_result"),
    (_result("reason:knock", "reason:Knock!"), "last_result.reason"),
    (_result("winner:0", "winner:-1"), "last_result.winner"),
]


@pytest.mark.parametrize(("text", "field"), MALFORMED)
def test_a_malformed_or_inconsistent_position_is_refused_naming_the_field(
    text: str, field: str
) -> None:
    """Each bad text raises ``NotationError`` coded ``notation/bad_position`` naming its field."""
    with pytest.raises(NotationError) as caught:
        from_position(text)
    assert BAD_POSITION == caught.value.code
    assert f"position field {field!r}" in caught.value.message


def _load_or_error_code(text: str) -> State | str:
    """The state ``text`` loads as, or the code of the ``NotationError`` refusing it."""
    try:
        return from_position(text)
    except NotationError as error:
        return error.code


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_arbitrary_text_either_loads_or_is_refused_with_the_position_code(text: str) -> None:
    """No text makes ``from_position`` fail with anything but the notation error."""
    outcome = _load_or_error_code(text)
    assert isinstance(outcome, State) or outcome in {BAD_POSITION, IMPOSSIBLE_POSITION}


@settings(max_examples=300, deadline=None)
@given(
    index=st.integers(min_value=0, max_value=len(PLAY_POSITION) - 1),
    replacement=st.sampled_from(list("-=.,:;|/*0123456789JKQTCDHS abx")) | st.just(""),
)
def test_a_damaged_position_either_loads_or_is_refused_with_the_position_code(
    index: int, replacement: str
) -> None:
    """Changing one character of a valid position never breaks the reader in another way."""
    text = PLAY_POSITION[:index] + replacement + PLAY_POSITION[index + 1 :]
    outcome = _load_or_error_code(text)
    if isinstance(outcome, State):
        assert outcome == from_position(to_position(outcome))
    else:
        assert outcome in {BAD_POSITION, IMPOSSIBLE_POSITION}


@settings(max_examples=200, deadline=None)
@given(
    index=st.integers(min_value=0, max_value=len(AFTER_KNOCK_POSITION) - 1),
    replacement=st.sampled_from(list("-=.,:;|/*0123456789JKQTCDHS abx")) | st.just(""),
)
def test_a_damaged_knock_result_either_loads_or_is_refused_with_the_position_code(
    index: int, replacement: str
) -> None:
    """Changing one character of a position with a knock's result breaks the reader no other
    way."""
    text = AFTER_KNOCK_POSITION[:index] + replacement + AFTER_KNOCK_POSITION[index + 1 :]
    outcome = _load_or_error_code(text)
    if isinstance(outcome, State):
        assert outcome == from_position(to_position(outcome))
    else:
        assert outcome in {BAD_POSITION, IMPOSSIBLE_POSITION}


def test_the_module_examples_hold() -> None:
    """The doctest examples in the module's docstrings run as written."""
    results = doctest.testmod(position)
    assert (0, True) == (results.failed, results.attempted > 0)


# Basic rummy: seat 1 has drawn and laid 5S-6S-7S and 7C-8C-9C this turn.
_TWO_MELDS = (
    "ramino1 {variant} 2 play hand=1 dealer=0 turn=1 scores=0,0 active=11"
    " hands=2C.3C.4C.5D.6D.7D.8S.9S.TS.JH/AH.2H.3H.4S stock=* pile=KD"
    " melds=1:5S.1:6S.1:7S|1:7C.1:8C.1:9C taken=- required=- melded=01 laid_before=00"
    " melds_this_turn={melds} laid_this_turn={laid}"
)

IMPOSSIBLE: list[tuple[str, str]] = [
    (_TWO_MELDS.format(variant="basic", melds=2, laid="yes"), "melds_this_turn"),
    (PLAY_POSITION.replace("laid_before=11", "laid_before=01"), "laid_before"),
    (
        _TWO_MELDS.format(variant="basic:melds_per_turn=unlimited", melds=2, laid="no"),
        "laid_this_turn",
    ),
    (DRAW_POSITION + " taken=JH", "taken"),
    (DRAW_POSITION + " required=JH", "required"),
    (DRAW_POSITION + " melds_this_turn=1", "melds_this_turn"),
    (DRAW_POSITION + " laid_this_turn=yes", "laid_this_turn"),
    (DRAW_POSITION + " resume=0", "resume"),
    (DRAW_POSITION.replace("turn=1", "turn=-"), "turn"),
    (DRAW_POSITION.replace("active=11", "active=10"), "turn"),
    (DRAW_POSITION + " melded=10", "melded"),
    (DRAW_POSITION + " idle_turns=61", "idle_turns"),
    (DRAW_POSITION.replace("basic", "basic:max_stock_reuses=1") + " reuses=2", "reuses"),
    (DRAW_POSITION + " winners=0", "winners"),
    (DRAW_POSITION.replace(" draw ", " game_over ").replace("turn=1", "turn=-"), "winners"),
    (PLAY_POSITION.replace(" winners=-", " must_knock=yes winners=-"), "must_knock"),
    (DRAW_POSITION.replace("basic", "knock").replace(".9C.TD", ".9C"), "hands"),
    (FIRST_UPCARD_POSITION.replace(".JH/", "/"), "hands"),
]


@pytest.mark.parametrize(("text", "field"), IMPOSSIBLE)
def test_a_position_live_play_cannot_reach_is_refused_naming_the_field(
    text: str, field: str
) -> None:
    """Each text reads but could never arise in a game (more melds this turn than the table
    allows, turn bookkeeping while no one has drawn, a seat marked as having melded with no
    card on the table, counters past the end of the hand, wrong hand sizes in Knock and Gin):
    ``NotationError`` coded ``notation/impossible_position`` naming the field."""
    with pytest.raises(NotationError) as caught:
        from_position(text)
    assert (IMPOSSIBLE_POSITION, f"position field {field!r}") == (
        caught.value.code,
        caught.value.message[: len(f"position field {field!r}")],
    )


def test_the_same_positions_made_possible_are_read() -> None:
    """Controls for the refusals above: two melds in a turn where the table allows any number,
    and seat 1's turn bookkeeping once he has drawn, are read without complaint."""
    unlimited = _TWO_MELDS.format(variant="basic:melds_per_turn=unlimited", melds=2, laid="yes")
    drawn = DRAW_POSITION.replace(" draw ", " play ") + " taken=KD"
    drawn = drawn.replace("pile=KD", "pile=QD").replace(".9C.TD", ".9C.TD.KD")
    states = [from_position(unlimited), from_position(drawn)]
    assert [2, 0] == [state.melds_this_turn for state in states]
