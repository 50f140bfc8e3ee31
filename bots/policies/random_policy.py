"""``random``: uniform over the legal actions."""

from __future__ import annotations

import random
from collections.abc import Sequence

from bots.policies.base import ALL_VARIANTS
from server.engine import Command, Event, Rules, View

__all__ = ["RandomPolicy"]


class RandomPolicy:
    """Picks any legal action with equal probability."""

    name = "random"
    variants = ALL_VARIANTS

    def observe(self, seat: int, event: Event) -> None:
        """Ignored."""

    def choose(
        self, rules: Rules, seen: View, actions: Sequence[Command], rng: random.Random
    ) -> Command:
        """A uniformly random legal action."""
        return rng.choice(actions)
