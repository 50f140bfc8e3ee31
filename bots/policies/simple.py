"""``simple``: a port of the EAAI Gin Rummy challenge's ``SimpleGinRummyPlayer`` (Todd Neller),
the common yardstick of published Gin Rummy results, and the same spirit in other variants.

The original plays by four rules, kept here for Gin Rummy:

- draw the face-up card only if it becomes part of a meld, else draw face down;
- discard a card that leaves the least deadwood, at random among ties, never the face-up card
  just drawn, and never repeat a (card drawn, card discarded) pair already played this hand;
- knock as soon as the deadwood allows (gin when it is 0);
- ignore what the opponent does.

Differences forced by the engine: a knock is one command here (the knock discard is the one the
rules above choose; the engine lays out the melds with the least deadwood, where the original
takes one of the best meld sets at random); at the wall the upcard may be taken only to knock,
which the draw rule then decides. Big gin is never looked for (EAAI has none).

Other variants: draw the upcard when it joins a meld in hand; lay down every meld and lay off
every card as soon as allowed (the opening with the least deadwood left in Ramino); swap jokers;
discard as above; in Knock Rummy knock once the deadwood is at most 10; claim a "Rummy!" call
(the cards go straight onto the table), never ``bussare``; take only the upcard, never deeper.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from bots.policies.base import ALL_VARIANTS
from protocol.cards import Card
from server.engine import (
    Claim,
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
)
from server.engine.melds import enumerate_melds
from server.engine.solver import deadwood, discard_deadwoods

__all__ = ["SimplePolicy", "joins_meld"]

_KNOCK_RUMMY_LIMIT = 10
"""Knock Rummy has no knock limit; ``simple`` knocks there at the Gin Rummy limit."""


def joins_meld(hand: Sequence[Card], card: Card, rules: Rules) -> bool:
    """Whether ``card`` would be part of some meld formed with cards of ``hand``."""
    return any(card in meld.cards for meld in enumerate_melds((*hand, card), rules.meld_rules))


class _Memory:
    """One seat's memory of the current hand: the hand before its draw, the card drawn and the
    (drawn, discarded) pairs already played."""

    def __init__(self, hand_number: int) -> None:
        self.hand_number = hand_number
        self.before_draw: tuple[Card, ...] | None = None
        self.pairs: set[tuple[Card, Card]] = set()


class SimplePolicy:
    """EAAI's ``SimpleGinRummyPlayer``: meld-only upcard draws, least-deadwood discards,
    knock at once."""

    name = "simple"
    variants = ALL_VARIANTS

    def __init__(self) -> None:
        self._memories: dict[int, _Memory] = {}

    def observe(self, seat: int, event: Event) -> None:
        """Ignored: the simple player ignores its opponent."""

    def _memory(self, seen: View) -> _Memory:
        memory = self._memories.get(seen.seat)
        if memory is None or memory.hand_number != seen.hand_number:
            memory = self._memories[seen.seat] = _Memory(seen.hand_number)
        return memory

    def choose(
        self, rules: Rules, seen: View, actions: Sequence[Command], rng: random.Random
    ) -> Command:
        """The simple player's choice among ``actions``."""
        memory = self._memory(seen)
        first = actions[0]
        if isinstance(first, Claim) or seen.claim_kind:
            return self._claim(seen, actions)
        if isinstance(first, DrawStock | TakeDiscard) or (
            isinstance(first, Pass) and seen.phase in ("draw", "first_upcard")
        ):
            memory.before_draw = seen.hand
            return self._draw(rules, seen, actions)
        lay_downs = self._lay_down(rules, seen, actions)
        if lay_downs is not None:
            return lay_downs
        return self._discard(rules, seen, actions, rng, memory)

    @staticmethod
    def _claim(seen: View, actions: Sequence[Command]) -> Command:
        if seen.claim_kind == "rummy":
            claims = [action for action in actions if isinstance(action, Claim)]
            if claims:
                return min(claims, key=lambda claim: claim.count)
        return next((action for action in actions if isinstance(action, Pass)), actions[0])

    @staticmethod
    def _draw(rules: Rules, seen: View, actions: Sequence[Command]) -> Command:
        take = next(
            (a for a in actions if isinstance(a, TakeDiscard) and a.count == 1),
            None,
        )
        if take is not None and seen.pile and joins_meld(seen.hand, seen.pile[-1], rules):
            return take
        for action in actions:
            if isinstance(action, DrawStock | Pass):
                return action
        return take if take is not None else actions[0]

    @staticmethod
    def _lay_down(rules: Rules, seen: View, actions: Sequence[Command]) -> Command | None:
        """The first lay-down to make now: a swap, the best meld, a lay-off; ``None``: none."""
        for action in actions:
            if isinstance(action, SwapJoker):
                return action
        melds = [action for action in actions if isinstance(action, MeldCommand)]
        if melds:

            def left(action: MeldCommand) -> tuple[int, int]:
                used = {card for spec in action.melds for card in spec.cards}
                rest = [card for card in seen.hand if card not in used]
                return deadwood(rest, rules.meld_rules, rules.values), -len(used)

            return min(melds, key=left)
        for action in actions:
            if isinstance(action, LayOff):
                return action
        return None

    def _discard(
        self,
        rules: Rules,
        seen: View,
        actions: Sequence[Command],
        rng: random.Random,
        memory: _Memory,
    ) -> Command:
        discards = {action.card: action for action in actions if isinstance(action, Discard)}
        knocks = {action.card: action for action in actions if isinstance(action, Knock)}
        taken = seen.taken[0] if seen.taken else None
        drawn = taken
        if drawn is None and memory.before_draw is not None:
            new = set(seen.hand) - set(memory.before_draw)
            drawn = min(new) if len(new) == 1 else None
        allowed = [card for card in (*discards, *knocks) if card >= 0 and card != taken]
        if not allowed:
            return actions[0]
        left = discard_deadwoods(seen.hand, rules.meld_rules, rules.values)
        fresh = [card for card in allowed if (drawn, card) not in memory.pairs]
        candidates = sorted(set(fresh or allowed))
        least = min(left[card] for card in candidates)
        choice = rng.choice([card for card in candidates if left[card] == least])
        if drawn is not None:
            memory.pairs.add((drawn, choice))
        if choice in knocks and (
            rules.knocking == "gin" or left[choice] <= _KNOCK_RUMMY_LIMIT or choice not in discards
        ):
            return knocks[choice]
        if choice in discards:
            return discards[choice]
        return knocks[choice]
