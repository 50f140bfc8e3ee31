"""Hand evaluation shared by ``heuristic`` and ``mc``: deadwood, draw potential and danger.

Theory of operation. A hand is judged by what it would leave unmatched now (``deadwood``) and by
how much the next draw is expected to lower that (``potential``): for every card still unseen,
the deadwood after drawing it and throwing the best card, averaged. Cards that join no meld
still count, since a low card can replace a high one. That one-step look-ahead values pairs,
near-runs and low cards by the cards that can still complete them (a pair whose other two suits
are gone is worth nothing). The same pass counts the draws after which a knock, or gin, is
allowed (``knock chance``, ``gin_chance``).

``Knowledge`` turns a seat's view and memory into probabilities: how likely an opponent holds a
card (known cards picked from the pile: certain; cards seen elsewhere: impossible; the rest:
spread over the unseen pool, lowered for cards near his discards and raised near his picks), and
so how likely he would take a card we discard (``danger``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bots import gin_compiled
from bots.policies.tracking import HandMemory, meld_partners, unseen_cards
from protocol.cards import JOKER, Card, card_face, face_rank, face_suit, is_joker
from server.engine import Rules, View
from server.engine.melds import AceMode
from server.engine.solver import deadwood, discard_deadwoods

__all__ = [
    "GinEvaluator",
    "Knowledge",
    "face_counts",
    "fast_joins_meld",
    "is_plain_deck",
    "related",
]


def is_plain_deck(rules: Rules) -> bool:
    """One deck, no jokers, aces low: the fast paths apply (every Gin Rummy hand)."""
    return rules.decks == 1 and rules.jokers == 0 and rules.ace is AceMode.LOW


def fast_joins_meld(faces: set[int], card: Card) -> bool:
    """Whether ``card`` forms a meld with the faces ``faces`` (one deck, no jokers, ace low)."""
    face = card_face(card)
    rank, suit = face % 13, face // 13
    same = sum(1 for other in range(4) if other != suit and other * 13 + rank in faces)
    if same >= 2:
        return True
    base = suit * 13
    below1 = rank >= 1 and base + rank - 1 in faces
    below2 = rank >= 2 and base + rank - 2 in faces
    above1 = rank <= 11 and base + rank + 1 in faces
    above2 = rank <= 10 and base + rank + 2 in faces
    return (below1 and (below2 or above1)) or (above1 and above2)


def related(first: Card, second: Card) -> bool:
    """Whether two natural cards could share a meld (same rank, or same suit two ranks apart)."""
    if is_joker(first) or is_joker(second):
        return False
    a, b = card_face(first), card_face(second)
    if face_rank(a) == face_rank(b):
        return a != b
    return face_suit(a) == face_suit(b) and abs(face_rank(a) - face_rank(b)) <= 2


_RELATED: tuple[tuple[int, ...], ...] = tuple(
    tuple(other for other in range(52) if related(face, other)) for face in range(52)
)
"""For each natural face, the faces ``related`` to it."""


@dataclass
class Knowledge:
    """What one seat knows and believes about the hidden cards of a hand."""

    rules: Rules
    seen: View
    memory: HandMemory
    unseen: list[Card]
    """Cards in the stock or in other hands, not known to be in a particular hand."""
    holders: dict[Card, float]
    """For every unseen or known card: the probability that some opponent holds it."""
    known: set[Card]
    """Cards known to be in an opponent's hand."""
    _by_face: dict[int, float] | None = field(default=None, init=False, repr=False)
    """For each face: the probability that some opponent holds a card of it (``danger``'s,
    worked out on its first call; ``holders`` does not change after ``build``)."""

    @classmethod
    def build(cls, rules: Rules, seen: View, memory: HandMemory) -> Knowledge:
        """Knowledge from a view and the seat's memory."""
        unseen = unseen_cards(rules, seen, memory)
        known = memory.all_known()
        others = sum(size for seat, size in enumerate(seen.hand_sizes) if seat != seen.seat) - len(
            known
        )
        base = min(1.0, max(0, others) / len(unseen)) if unseen else 0.0
        holders: dict[Card, float] = dict.fromkeys(unseen, base)
        signals: list[tuple[Card, float]] = []
        for seat, cards in memory.discarded.items():
            if seat != seen.seat:
                signals.extend((card, 0.6) for card in cards)
        for cards in memory.declined.values():
            signals.extend((card, 0.75) for card in cards)
        for cards in memory.taken.values():
            signals.extend((card, 1.6) for card in cards)
        if signals:
            # Each unseen card's factor is the product of the weights of the signals related
            # to it, taken in signal order.
            by_face: dict[int, list[Card]] = {}
            for card in unseen:
                if not is_joker(card):
                    by_face.setdefault(card_face(card), []).append(card)
            factors: dict[Card, float] = {}
            for signal, weight in signals:
                if is_joker(signal):
                    continue
                for face in _RELATED[card_face(signal)]:
                    for card in by_face.get(face, ()):
                        factors[card] = factors.get(card, 1.0) * weight
            for card, factor in factors.items():
                if factor != 1.0:
                    holders[card] = min(1.0, base * factor)
        for card in known:
            holders[card] = 1.0
        return cls(rules, seen, memory, unseen, holders, known)

    def danger(self, card: Card) -> float:
        """About how likely an opponent can meld ``card`` with two cards he holds."""
        if is_joker(card):
            return 1.0
        holders = self.holders
        if not holders:
            return 0.0
        by_face = self._by_face
        if by_face is None:
            by_face = self._by_face = {}
            for held, chance in holders.items():
                face = card_face(held)
                by_face[face] = 1 - (1 - by_face.get(face, 0.0)) * (1 - chance)
        missing = 1.0
        for first, second in meld_partners(card):
            missing *= 1 - by_face.get(first, 0.0) * by_face.get(second, 0.0)
        return 1 - missing


class GinEvaluator:
    """Deadwood and one-draw potential of Gin Rummy hands (one deck, no jokers, ace low)."""

    def __init__(self, rules: Rules, unseen: Sequence[Card], limit: int = 10) -> None:
        self.rules = rules
        self.limit = limit
        self.meld_rules = rules.meld_rules
        self.values = rules.values
        self.unseen = tuple(unseen)
        self._cache: dict[tuple[Card, ...], tuple[int, float, float, float]] = {}
        self._compiled: gin_compiled.Judge | None = None
        """The compiled judgement, where it applies (one deck, no jokers, aces low)."""
        if gin_compiled.AVAILABLE and is_plain_deck(rules):
            self._compiled = gin_compiled.Judge(
                [card_face(card) for card in self.unseen], self.values, limit
            )

    def deadwood(self, hand: Iterable[Card]) -> int:
        """Least deadwood of ``hand``."""
        return deadwood(tuple(hand), self.meld_rules, self.values)

    def gin_chance(self, hand: Sequence[Card]) -> float:
        """The share of next draws (from the unseen cards) after which ``hand`` (10 cards)
        can go gin: no deadwood left after the best discard (``judge``'s last figure)."""
        return self.judge(hand)[3]

    def judge(self, hand: Sequence[Card]) -> tuple[int, float, float, float]:
        """``(deadwood, potential, knock chance, gin chance)`` of a 10-card ``hand``:
        potential is the expected fall of the deadwood after one draw from the unseen cards
        and the best discard; knock chance and gin chance the shares of those draws after
        which a knock, and gin, are allowed. One pass over the unseen cards finds all three."""
        key = tuple(sorted(hand))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if self._compiled is not None:
            result = self._compiled([card_face(card) for card in key])
            self._cache[key] = result
            return result
        meld_rules, values, limit = self.meld_rules, self.values, self.limit
        after = discard_deadwoods(key, meld_rules, values)
        now = deadwood(key, meld_rules, values)
        drop = now - min(after.values()) if after else 0
        faces = {card_face(card) for card in key}
        total = 0.0
        knocks = gins = 0
        for card in self.unseen:
            value = values[card_face(card)]
            if fast_joins_meld(faces, card):
                best = min(discard_deadwoods((*key, card), meld_rules, values).values())
                gain = now - best
            else:
                gain = drop - value
            if gain > 0:
                total += gain
                if now - gain <= limit:
                    knocks += 1
                if now == gain:
                    gins += 1
            elif now <= limit:
                knocks += 1
                if now == 0:
                    gins += 1
        count = len(self.unseen)
        result = (
            (now, total / count, knocks / count, gins / count) if count else (now, 0.0, 0.0, 0.0)
        )
        self._cache[key] = result
        return result


def face_counts(cards: Iterable[Card]) -> list[int]:
    """How many of ``cards`` show each face (index 52: jokers)."""
    counts = [0] * (JOKER + 1)
    for card in cards:
        counts[card_face(card)] += 1
    return counts
