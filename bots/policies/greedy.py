"""``greedy``: meld as soon as possible, lay off whatever fits, shed high useless cards."""

from __future__ import annotations

import random
from collections.abc import Sequence

from bots.policies.base import ALL_VARIANTS
from protocol.cards import face_rank, face_suit
from server.engine import (
    Command,
    Discard,
    DrawStock,
    Event,
    Knock,
    LayOff,
    MeldCommand,
    Pass,
    Rules,
    SwapJoker,
    TakeDiscard,
    View,
    card_face,
    is_joker,
)
from server.engine.melds import enumerate_melds
from server.engine.solver import deadwood

__all__ = ["GreedyPolicy"]


def _usefulness(card: int, hand: Sequence[int]) -> int:
    """How many other cards in ``hand`` could form a meld with ``card`` (same rank or near)."""
    if is_joker(card):
        return 10
    face = card_face(card)
    rank, suit = face_rank(face), face_suit(face)
    score = 0
    for other in hand:
        if other == card or is_joker(other):
            continue
        other_face = card_face(other)
        if face_rank(other_face) == rank:
            score += 2
        elif face_suit(other_face) == suit and abs(face_rank(other_face) - rank) <= 2:
            score += 3 - abs(face_rank(other_face) - rank)
    return score


class GreedyPolicy:
    """Melds the biggest meld it can, lays off, and discards its least useful high card."""

    name = "greedy"
    variants = ALL_VARIANTS

    def observe(self, seat: int, event: Event) -> None:
        """Ignored: greedy looks only at its own hand."""

    def choose(
        self, rules: Rules, seen: View, actions: Sequence[Command], rng: random.Random
    ) -> Command:
        """The greedy choice among ``actions``."""
        melds = [action for action in actions if isinstance(action, MeldCommand)]
        if melds:
            return max(melds, key=lambda action: sum(len(spec.cards) for spec in action.melds))
        for action in actions:
            if isinstance(action, LayOff | SwapJoker):
                return action
        if any(isinstance(action, DrawStock | TakeDiscard | Pass) for action in actions):
            return self._draw(rules, seen, actions)
        knocks = [action for action in actions if isinstance(action, Knock)]
        discards = [action for action in actions if isinstance(action, Discard)]
        if knocks and (not discards or self._worth_knocking(rules, seen, knocks)):
            return min(knocks, key=lambda knock: self._after_discard(rules, seen, knock.card))
        hand = seen.hand
        values = rules.values

        def badness(action: Discard) -> tuple[int, int]:
            card = action.card
            return (values[card_face(card)] - 4 * _usefulness(card, hand), card)

        return max(discards, key=badness)

    @staticmethod
    def _after_discard(rules: Rules, seen: View, card: int) -> int:
        hand = [held for held in seen.hand if held != card]
        return deadwood(hand, rules.meld_rules, rules.values)

    def _worth_knocking(self, rules: Rules, seen: View, knocks: Sequence[Knock]) -> bool:
        """Gin: knock whenever allowed; Knock Rummy: once at most 5 points stay unmatched."""
        if rules.knocking == "gin":
            return True
        return min(self._after_discard(rules, seen, knock.card) for knock in knocks) <= 5

    @staticmethod
    def _draw(rules: Rules, seen: View, actions: Sequence[Command]) -> Command:
        take = next((a for a in actions if isinstance(a, TakeDiscard)), None)
        if take is not None and seen.pile:
            upcard = seen.pile[-1]
            with_upcard = (*seen.hand, upcard)
            if any(upcard in meld.cards for meld in enumerate_melds(with_upcard, rules.meld_rules)):
                return take
        for action in actions:
            if isinstance(action, DrawStock):
                return action
        return take if take is not None else actions[0]
