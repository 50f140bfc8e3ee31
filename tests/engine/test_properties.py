"""Properties of the engine checked over many generated cases (Hypothesis)."""

from __future__ import annotations

import contextlib
import random

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from server.engine import (
    Event,
    GameEnded,
    apply,
    format_card,
    format_cards,
    make_deck,
    new_game,
    parse_card,
    parse_cards,
)
from server.simulation import play_random_game

cards = st.integers(min_value=0, max_value=52).flatmap(
    lambda face: st.integers(min_value=0, max_value=5 if face == 52 else 3).map(
        lambda copy: copy << 6 | face
    )
)


@given(cards)
def test_card_notation_round_trips(card: int) -> None:
    """Formatting then parsing any physical card gives it back."""
    assert card == parse_card(format_card(card))


@given(st.lists(cards, max_size=20))
def test_card_list_notation_round_trips(hand: list[int]) -> None:
    """A list of cards survives formatting and parsing in order."""
    assert tuple(hand) == parse_cards(format_cards(hand))


@given(st.integers(1, 3), st.integers(0, 6))
def test_a_pack_holds_each_physical_card_once(decks: int, jokers: int) -> None:
    """``make_deck`` gives 52 per deck plus the jokers, all distinct."""
    pack = make_deck(decks, jokers)
    assert 52 * decks + jokers == len(set(pack)) == len(pack)


variants = st.sampled_from(
    [("basic", 2), ("basic", 5), ("block", 4), ("wrotham", 3), ("ramino_classic", 6)]
)


@settings(max_examples=12, deadline=None)
@given(variants, st.integers(0, 2**32))
def test_random_games_keep_every_invariant(variant: tuple[str, int], seed: int) -> None:
    """Cards are conserved, no view or event leaks a hidden card and replay gives the state."""
    name, players = variant
    outcome = play_random_game(new_game(name, {}, players), random.Random(seed))
    assert [] == outcome.violations
    assert isinstance(outcome.events[-1], GameEnded)


@settings(max_examples=8, deadline=None)
@given(variants, st.integers(0, 2**32))
def test_the_event_log_alone_rebuilds_the_game(variant: tuple[str, int], seed: int) -> None:
    """Folding the msgpack-encoded log into a new game gives the final state."""
    name, players = variant
    outcome = play_random_game(new_game(name, {}, players), random.Random(seed), check=False)
    log = msgspec.msgpack.encode(outcome.events)
    events = msgspec.msgpack.decode(log, type=list[Event])
    assert outcome.final == apply(new_game(name, {}, players), events)


@given(st.binary(max_size=200))
def test_decoding_arbitrary_bytes_as_an_event_succeeds_or_raises_a_decode_error(
    data: bytes,
) -> None:
    """Garbage never crashes the event codec with anything but its own error."""
    with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
        msgspec.msgpack.decode(data, type=Event)
