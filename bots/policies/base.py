"""The policy interface every bot implements."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from server.engine import Command, Rules, View

__all__ = ["Policy", "find_policy"]


class Policy(Protocol):
    """Chooses one of the legal actions from what a seat can see."""

    name: str

    def choose(
        self, rules: Rules, seen: View, actions: Sequence[Command], rng: random.Random
    ) -> Command:
        """Return one element of ``actions`` (never empty)."""
        ...


def find_policy(name: str) -> Policy:
    """The policy called ``name``.

    Raises:
        KeyError: no such policy.
    """
    from bots.policies.greedy import GreedyPolicy
    from bots.policies.random_policy import RandomPolicy

    policies: dict[str, Policy] = {"random": RandomPolicy(), "greedy": GreedyPolicy()}
    try:
        return policies[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(policies))}") from None
