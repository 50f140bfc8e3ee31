"""What each seat (or a spectator) may see: ``view`` of a state and ``redact`` of an event.

This is the only way hidden information (hands, the stock order) leaves the engine. A hidden
card is written as ``HIDDEN`` (-1), so a redacted event keeps its shape and sizes.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import msgspec

from server.engine.actions import Claimed, Dealt, Drew, Event, HandEnded, StockRebuilt
from server.engine.cards import Card, Face
from server.engine.game import State, deal_layout, to_move
from server.engine.scoring import format_amount

__all__ = ["HIDDEN", "MeldView", "View", "redact", "view", "visible_cards"]

HIDDEN: Card = -1
"""Stands for a card the viewer may not see."""


class MeldView(msgspec.Struct, frozen=True):
    """A table meld: its cards, what each stands for, and who laid each."""

    kind: str
    cards: tuple[Card, ...]
    faces: tuple[Face, ...]
    owners: tuple[int, ...]


class View(msgspec.Struct, frozen=True):
    """A state as one seat (``seat`` >= 0) or a spectator (``seat`` = -1) sees it."""

    variant: str
    options: dict[str, object]
    players: int
    seat: int
    phase: str
    hand_number: int
    dealer: int
    turn: int
    to_move: int
    scores: tuple[str, ...]
    active: tuple[bool, ...]
    hand: tuple[Card, ...]
    """The viewer's own cards (empty for a spectator)."""
    hand_sizes: tuple[int, ...]
    stock_size: int
    pile: tuple[Card, ...]
    """The whole discard pile, upcard last (every discard was seen by everyone)."""
    melds: tuple[MeldView, ...]
    taken: tuple[Card, ...]
    """Cards the seat to move took from the pile this turn."""
    melds_this_turn: int
    stock_reuses: int
    melded: tuple[bool, ...]
    """Seats that have melded this hand (in Ramino: that have opened)."""
    required: Card
    """A card the seat to move must lay down before his turn can end (-1: none)."""
    claim_kind: str
    """``rummy`` or ``bussare`` while a claim window is open, else empty."""
    claim_seats: tuple[int, ...]
    claim_answers: tuple[int, ...]
    """Parallel to ``claim_seats``: 0 waiting, -1 passed, n > 0 claimed n cards."""
    knock_limit: int
    """Gin Rummy: the most deadwood a knock may leave this hand."""
    upcard_passes: int
    """Gin Rummy: how many players declined the first upcard."""
    hands_won: tuple[int, ...]
    """Gin Rummy: hands each seat has won (boxes)."""
    forfeited: tuple[bool, ...]
    """Seats the server plays for after repeated timeouts."""
    winners: tuple[int, ...]
    last_result: HandEnded | None


def view(state: State, seat: int | None = None) -> View:
    """The state as ``seat`` sees it (``None``: a spectator): only his own hand is shown."""
    own = -1 if seat is None else seat
    return View(
        variant=state.rules.preset,
        options=dict(state.rules.options),
        players=state.players,
        seat=own,
        phase=state.phase.value,
        hand_number=state.hand_number,
        dealer=state.dealer,
        turn=state.turn,
        to_move=to_move(state),
        scores=_formatted_scores(state.scores),
        active=state.active,
        hand=state.hands[own] if own >= 0 else (),
        hand_sizes=tuple(len(hand) for hand in state.hands),
        stock_size=len(state.stock),
        pile=state.pile,
        melds=tuple(
            MeldView(m.meld.kind.value, m.meld.cards, m.meld.faces, m.owners) for m in state.melds
        ),
        taken=state.taken,
        melds_this_turn=state.melds_this_turn,
        stock_reuses=state.reuses,
        melded=state.melded,
        required=state.required,
        claim_kind=state.claim_kind,
        claim_seats=state.claim_seats,
        claim_answers=state.claim_answers,
        knock_limit=state.knock_limit,
        upcard_passes=state.upcard_passes,
        hands_won=state.hands_won,
        forfeited=state.forfeited,
        winners=state.winners,
        last_result=state.last_result,
    )


@functools.lru_cache(maxsize=256)
def _formatted_scores(scores: tuple[Fraction, ...]) -> tuple[str, ...]:
    return tuple(format_amount(score) for score in scores)


def redact(state: State, event: Event, seat: int | None = None) -> Event:
    """``event`` as ``seat`` (``None``: a spectator) may see it; hidden cards become ``HIDDEN``.

    ``state`` is the state the event applies to (a deal's layout depends on the seats).

    A deal shows the viewer his own cards and the upcard; a stock draw (also the two stock
    cards of a ``bussare`` claim) shows the card only to the drawer; a rebuilt stock shows only
    its size. Everything else is public.
    """
    match event:
        case Dealt():
            return _redact_deal(state, event, seat)
        case Drew(seat=drawer) if drawer != seat:
            return Drew(seat=drawer, card=HIDDEN)
        case StockRebuilt(order=order, shuffled=shuffled):
            return StockRebuilt(order=(HIDDEN,) * len(order), shuffled=shuffled)
        case Claimed(seat=claimer, cards=cards, stock_cards=stock_cards) if (
            stock_cards and claimer != seat
        ):
            return Claimed(seat=claimer, cards=cards, stock_cards=(HIDDEN,) * len(stock_cards))
    return event


def _redact_deal(state: State, event: Dealt, seat: int | None) -> Dealt:
    """Mask every card of the pack but the viewer's own and the upcard."""
    owners, upcard_index = deal_layout(state, event)
    order = tuple(
        card if index == upcard_index or (seat is not None and owner == seat) else HIDDEN
        for index, (card, owner) in enumerate(zip(event.order, owners))
    )
    return Dealt(hand=event.hand, dealer=event.dealer, order=order, cuts=event.cuts)


def visible_cards(seen: View) -> frozenset[Card]:
    """Every physical card a view shows of the current hand (for secrecy checks).

    ``last_result`` is left out: it reveals the previous, finished hand.
    """
    cards: set[Card] = set(seen.hand) | set(seen.pile) | set(seen.taken)
    for meld in seen.melds:
        cards.update(meld.cards)
    cards.discard(HIDDEN)
    return frozenset(cards)
