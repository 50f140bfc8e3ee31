"""Bot policies: pure functions of (rules, view, legal actions, rng) -> action."""

from __future__ import annotations

from bots.policies.base import Policy, find_policy
from bots.policies.greedy import GreedyPolicy
from bots.policies.random_policy import RandomPolicy

__all__ = ["GreedyPolicy", "Policy", "RandomPolicy", "find_policy"]
