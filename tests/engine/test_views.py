"""Views and redaction: each seat sees its own cards and the public table, nothing else."""

from __future__ import annotations

import random

import pytest

from server.engine import (
    HIDDEN,
    VARIANTS,
    Dealt,
    DrawStock,
    Drew,
    Event,
    State,
    StockRebuilt,
    chance,
    decide,
    evolve,
    new_game,
    redact,
    view,
)
from server.engine.game import deal_layout
from server.engine.views import seat_view
from server.simulation import play_random_game


def test_a_seat_view_shows_its_own_hand_and_only_sizes_of_the_others() -> None:
    """``view`` gives a seat its cards, other seats' hand sizes and the stock size only."""
    state = new_game("basic", {}, 3)
    state = evolve(state, chance(state, random.Random(1)))
    seen = view(state, 1)
    assert state.hands[1] == seen.hand
    assert (7, 7, 7) == seen.hand_sizes
    assert len(state.stock) == seen.stock_size
    assert not set(seen.hand) & (set(state.hands[0]) | set(state.hands[2]))


def test_a_spectator_view_shows_no_hand() -> None:
    """A spectator (seat ``None``) sees the table but no hand."""
    state = new_game("basic", {}, 2)
    state = evolve(state, chance(state, random.Random(2)))
    seen = view(state)
    assert ((), -1) == (seen.hand, seen.seat)
    assert state.pile == seen.pile


def test_a_redacted_deal_shows_a_seat_its_own_cards_and_the_upcard_only() -> None:
    """In a seat's copy of the deal every other card of the pack is hidden."""
    state = new_game("basic", {}, 3)
    dealt = chance(state, random.Random(3))
    assert isinstance(dealt, Dealt)
    after = evolve(state, dealt)
    owners, upcard_index = deal_layout(state, dealt)
    for seat in range(3):
        seen = redact(state, dealt, seat)
        assert isinstance(seen, Dealt)
        shown = {card for card in seen.order if card != HIDDEN}
        assert set(after.hands[seat]) | {dealt.order[upcard_index]} == shown
    spectator = redact(state, dealt, None)
    assert isinstance(spectator, Dealt)
    assert [dealt.order[upcard_index]] == [card for card in spectator.order if card != HIDDEN]
    assert len(dealt.order) == len(spectator.order)
    assert owners.count(0) == 7


def test_a_stock_draw_is_hidden_from_everyone_but_the_drawer() -> None:
    """Others see that a card was drawn, not which."""
    state = new_game("basic", {}, 3)
    state = evolve(state, chance(state, random.Random(4)))
    seat = state.turn
    (drew,) = decide(state, seat, DrawStock())
    assert isinstance(drew, Drew)
    assert drew == redact(state, drew, seat)
    for other in {0, 1, 2} - {seat}:
        assert Drew(seat=seat, card=HIDDEN) == redact(state, drew, other)
    assert Drew(seat=seat, card=HIDDEN) == redact(state, drew, None)


def test_a_rebuilt_stock_shows_only_its_size() -> None:
    """The order of a rebuilt stock is hidden from every seat."""
    event = StockRebuilt(order=(1, 2, 3), shuffled=True)
    state = new_game("basic", {}, 2)
    assert StockRebuilt(order=(HIDDEN,) * 3, shuffled=True) == redact(state, event, 0)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_seat_view_made_from_the_spectator_view_is_the_seats_own_view(variant: str) -> None:
    """``seat_view`` (the server's one view per state, copied per seat) equals ``view`` for
    every seat at every state of a random game: no other hand, nothing more or less."""
    players = VARIANTS[variant].max_players
    checked = 0

    def check(before: State, event: Event, after: State) -> None:
        nonlocal checked
        spectator = view(after)
        for seat in range(players):
            assert view(after, seat) == seat_view(spectator, after, seat)
        checked += 1

    game = new_game(variant, {}, players)
    play_random_game(game, random.Random(f"views-{variant}"), check=False, on_event=check)
    assert checked > 20
