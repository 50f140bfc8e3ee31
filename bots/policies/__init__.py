"""Bot policies: pure functions of (rules, view, legal actions, rng) -> action (docs/bots.md)."""

from __future__ import annotations

from bots.policies.base import (
    ALL_VARIANTS,
    POLICY_NAMES,
    Policy,
    checked_policy,
    find_policy,
    supports,
)
from bots.policies.greedy import GreedyPolicy
from bots.policies.heuristic import HeuristicPolicy
from bots.policies.mc import MonteCarloPolicy
from bots.policies.random_policy import RandomPolicy
from bots.policies.simple import SimplePolicy

__all__ = [
    "ALL_VARIANTS",
    "POLICY_NAMES",
    "GreedyPolicy",
    "HeuristicPolicy",
    "MonteCarloPolicy",
    "Policy",
    "RandomPolicy",
    "SimplePolicy",
    "checked_policy",
    "find_policy",
    "supports",
]
