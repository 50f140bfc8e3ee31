"""Tests for the position notation: round trips, hand-written positions and refused texts."""

from __future__ import annotations

import dataclasses
import doctest
import random
from collections.abc import Iterator
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.engine import position
from server.engine.actions import Discard, Discarded, HandEnded, LaidOff, LayOff
from server.engine.cards import JOKER, card_face, format_cards, make_face, parse_card, parse_cards
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
from server.engine.variants import VARIANTS, rules_replace

BAD_POSITION = "notation/bad_position"

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
        "last_result=hand:1;winner:-;reason:idle_cap;rummy:no;hands:2C.3C/KD.QD.JD;"
        "counts:5,30;points:25/2,-3;totals:25/2,-3;eliminated:1"
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
        "winners",
        "last_result",
    }
    assert expected == {field.name for field in dataclasses.fields(State)}


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
    """Without the fields from ``taken=`` on: nothing taken, flags off, counters 0, no result."""
    state = from_position(DRAW_POSITION)
    expected = ((), (False, False), (False, False), 0, False, 0, 0, (), None)
    actual = (
        state.taken,
        state.melded,
        state.laid_before,
        state.melds_this_turn,
        state.laid_this_turn,
        state.reuses,
        state.idle_turns,
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
    assert isinstance(outcome, State) or BAD_POSITION == outcome


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
        assert BAD_POSITION == outcome


def test_the_module_examples_hold() -> None:
    """The doctest examples in the module's docstrings run as written."""
    results = doctest.testmod(position)
    assert (0, True) == (results.failed, results.attempted > 0)
