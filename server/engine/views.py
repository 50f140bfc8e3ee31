"""What each seat (or a spectator) may see: ``view`` of a state and ``redact`` of an event.

This is the only way hidden information (hands, the stock order) leaves the engine. A hidden
card is written as ``HIDDEN`` (-1), so a redacted event keeps its shape and sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

import msgspec

from protocol.cards import HIDDEN, Card
from protocol.game import Claimed, Dealt, Drew, Event, MeldView, StockRebuilt, View
from server.engine.game import State, TableMeld, deal_layout, to_move
from server.engine.scoring import format_amount

__all__ = ["HIDDEN", "MeldView", "View", "redact", "seat_view", "view", "visible_cards"]


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
        scores=_kept(state.scores, _format_scores),
        active=state.active,
        hand=state.hands[own] if own >= 0 else (),
        hand_sizes=tuple(len(hand) for hand in state.hands),
        stock_size=len(state.stock),
        pile=state.pile,
        melds=_kept(state.melds, _meld_views),
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


def seat_view(spectator: View, state: State, seat: int) -> View:
    """``view(state, seat)``, made from the spectator's ``view(state)`` of the same state: only
    the seat and its hand differ (one view built per state, then one cheap copy per seat)."""
    return msgspec.structs.replace(spectator, seat=seat, hand=state.hands[seat])


T = TypeVar("T")
R = TypeVar("R")

_KEPT_AT_MOST = 4096
"""Parts of views remembered by the identity of what they are made from (see ``_kept``)."""
_kept_parts: dict[int, tuple[object, Any]] = {}


def _kept(source: T, make: Callable[[T], R]) -> R:
    """``make(source)``, remembered while ``source`` itself (not an equal object) comes back:
    a state's scores and melds are shared by the states that follow it until they change,
    and a view is made of each state. The entry holds ``source``, so its id is not
    reused while it is kept."""
    key = id(source)
    entry = _kept_parts.get(key)
    if entry is not None and entry[0] is source:
        made: R = entry[1]
        return made
    made = make(source)
    if len(_kept_parts) >= _KEPT_AT_MOST:
        _kept_parts.clear()
    _kept_parts[key] = (source, made)
    return made


def _format_scores(scores: tuple[Fraction, ...]) -> tuple[str, ...]:
    return tuple(format_amount(score) for score in scores)


def _meld_views(melds: tuple[TableMeld, ...]) -> tuple[MeldView, ...]:
    return tuple(MeldView(m.meld.kind.value, m.meld.cards, m.meld.faces, m.owners) for m in melds)


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
