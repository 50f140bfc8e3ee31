"""Card tracking: what a seat has seen of the current hand, and what it infers from it.

Theory of operation. Everything public is in the ``View`` (the whole discard pile, the table
melds, hand sizes), so the tracker only has to remember what a view does not repeat: which cards
each opponent *took* from the pile (and still holds), which he *discarded* and which upcards he
*declined*. Those say what he collects and what he does not.

Two sources feed it. ``observe`` takes the events (redacted for the seat) when a host passes
them; that is exact. Without events, ``sync`` compares each view with the pile the seat left
behind after its own last command: a card of that pile missing now was taken by the next seat,
new cards on top were discarded by the seats in turn order (exact with two players, a best guess
with more). A new hand (another ``hand_number``) starts a new memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.cards import HIDDEN, Card, card_face, face_rank, face_suit, is_joker, make_deck
from server.engine import (
    Claimed,
    Command,
    Dealt,
    Discard,
    Discarded,
    Drew,
    Event,
    Knock,
    Knocked,
    LaidOff,
    Melded,
    Pass,
    Rules,
    StockRebuilt,
    SwappedJoker,
    TookDiscard,
    UpcardPassed,
    View,
)

__all__ = ["CardTracker", "HandMemory", "meld_partners", "unseen_cards"]


@dataclass
class HandMemory:
    """What one seat remembers of one hand."""

    seat: int
    hand_number: int
    taken: dict[int, list[Card]] = field(default_factory=dict)
    """Cards each other seat took from the pile (or claimed) and has not laid down or
    discarded since: known to be in his hand."""
    discarded: dict[int, list[Card]] = field(default_factory=dict)
    """Cards each seat discarded this hand."""
    declined: dict[int, list[Card]] = field(default_factory=dict)
    """Upcards each other seat could have taken and did not."""
    pile: list[Card] | None = None
    """The pile as the events left it (``None``: not known since the deal; a view resets it)."""
    events: bool = False
    """Whether events were observed this hand (then views are not diffed)."""
    expected_pile: tuple[Card, ...] | None = None
    """The pile right after this seat's last command (for diffing the next view)."""

    def known(self, seat: int) -> list[Card]:
        """Cards known to be in ``seat``'s hand."""
        return self.taken.get(seat, [])

    def all_known(self) -> set[Card]:
        """Cards known to be in some other seat's hand."""
        return {card for cards in self.taken.values() for card in cards}

    def _take(self, seat: int, cards: Iterable[Card]) -> None:
        if seat != self.seat:
            self.taken.setdefault(seat, []).extend(card for card in cards if card != HIDDEN)

    def _release(self, seat: int, cards: Iterable[Card]) -> None:
        held = self.taken.get(seat)
        if not held:
            return
        for card in cards:
            if card in held:
                held.remove(card)

    def _decline(self, seat: int) -> None:
        if seat != self.seat and self.pile:
            self.declined.setdefault(seat, []).append(self.pile[-1])


def meld_partners(card: Card) -> list[tuple[int, int]]:
    """Pairs of faces that make a three-card meld with ``card`` (sets, then runs; ace low)."""
    if is_joker(card):
        return []
    face = card_face(card)
    rank, suit = face_rank(face), face_suit(face)
    pairs: list[tuple[int, int]] = []
    others = [other * 13 + rank - 1 for other in range(4) if other != suit]
    pairs.extend((others[i], others[j]) for i in range(3) for j in range(i + 1, 3))
    for low, high in ((-2, -1), (-1, 1), (1, 2)):
        first, second = rank + low, rank + high
        if 1 <= first <= 13 and 1 <= second <= 13:
            pairs.append((suit * 13 + first - 1, suit * 13 + second - 1))
    return pairs


class CardTracker:
    """Per-seat memories of the current hand, fed by views and (optionally) events."""

    def __init__(self) -> None:
        self._memories: dict[int, HandMemory] = {}

    def memory(self, seat: int, hand_number: int) -> HandMemory:
        """The memory of ``seat`` for hand ``hand_number`` (a new one for a new hand)."""
        memory = self._memories.get(seat)
        if memory is None or memory.hand_number != hand_number:
            memory = HandMemory(seat, hand_number)
            self._memories[seat] = memory
        return memory

    # Events ----------------------------------------------------------------------------------

    def observe(self, seat: int, event: Event) -> None:
        """Update ``seat``'s memory with ``event`` (as ``seat`` sees it)."""
        if isinstance(event, Dealt):
            self.memory(seat, event.hand).events = True
            return
        found = self._memories.get(seat)
        if found is None:
            return
        memory = found
        memory.events = True
        pile = memory.pile
        match event:
            case Drew(seat=drawer):
                memory._decline(drawer)
            case UpcardPassed(seat=passer):
                memory._decline(passer)
            case TookDiscard(seat=taker, cards=cards) | Claimed(seat=taker, cards=cards):
                if pile is not None:
                    del pile[len(pile) - len(cards) :]
                memory._take(taker, cards)
            case Discarded(seat=discarder, card=card):
                if pile is not None:
                    pile.append(card)
                memory.discarded.setdefault(discarder, []).append(card)
                memory._release(discarder, (card,))
            case Knocked(seat=knocker, card=card):
                if pile is not None and card >= 0:
                    pile.append(card)
                memory._release(knocker, (card,))
            case Melded(seat=melder, melds=specs):
                memory._release(melder, (card for spec in specs for card in spec.cards))
            case LaidOff(seat=layer, card=card):
                memory._release(layer, (card,))
            case SwappedJoker(seat=swapper, card=card, joker=joker):
                memory._release(swapper, (card,))
                memory._take(swapper, (joker,))
            case StockRebuilt():
                memory.pile = []

    # Views -----------------------------------------------------------------------------------

    def sync(self, seen: View) -> HandMemory:
        """Bring ``seen.seat``'s memory up to date with the view ``seen`` and return it."""
        memory = self.memory(seen.seat, seen.hand_number)
        if not memory.events:
            self._diff(memory, seen)
        memory.pile = list(seen.pile)
        held = set(seen.hand)
        for cards in memory.taken.values():
            cards[:] = [card for card in cards if card not in held]
        return memory

    def _diff(self, memory: HandMemory, seen: View) -> None:
        """Infer takes, discards and declines from the pile since this seat's last command."""
        if seen.phase == "first_upcard" and seen.upcard_passes and seen.pile:
            other = (seen.seat + 1) % seen.players
            if seen.pile[-1] not in memory.declined.get(other, []):
                memory.declined.setdefault(other, []).append(seen.pile[-1])
        before = memory.expected_pile
        if before is None:
            return
        memory.expected_pile = None
        now = seen.pile
        common = 0
        for old, new in zip(before, now):
            if old != new:
                break
            common += 1
        order = _seats_after(seen, memory.seat)
        if not order:
            return
        gone = before[common:]
        if gone:
            memory._take(order[0], gone)
        elif before:
            memory.declined.setdefault(order[0], []).append(before[-1])
        for index, card in enumerate(now[common:]):
            seat = order[min(index, len(order) - 1)]
            memory.discarded.setdefault(seat, []).append(card)
            memory._release(seat, (card,))

    def note_command(self, seen: View, command: Command) -> None:
        """Remember the pile left behind when ``command`` (chosen by ``seen.seat``) ends its
        turn, so the next view can be diffed against it."""
        memory = self.memory(seen.seat, seen.hand_number)
        match command:
            case Discard(card=card) | Knock(card=card) if card >= 0:
                memory.expected_pile = (*seen.pile, card)
            case Pass() if seen.phase == "first_upcard":
                memory.expected_pile = seen.pile


def _seats_after(seen: View, seat: int) -> list[int]:
    """The other active seats in turn order after ``seat``."""
    players = seen.players
    return [
        (seat + step) % players
        for step in range(1, players)
        if seen.active[(seat + step) % players]
    ]


def unseen_cards(rules: Rules, seen: View, memory: HandMemory) -> list[Card]:
    """Every physical card this seat has not seen in play and knows no one holds: the stock
    and the other hands, less the cards known to be in them."""
    visible: set[Card] = set(seen.hand) | set(seen.pile)
    for meld in seen.melds:
        visible.update(meld.cards)
    visible |= memory.all_known()
    return [card for card in make_deck(rules.decks, rules.jokers) if card not in visible]
