"""The policy interface every bot implements, and the registry of policies by name.

A policy chooses one of the legal actions from what its seat can see::

    policy = find_policy("heuristic")
    command = policy.choose(rules, view(state, seat), legal_actions(state, seat), rng)

``choose`` never reads hidden cards: everything it knows comes from the ``View`` (its hand, the
discard pile, the table melds, the cards taken this turn, hand sizes, scores) and, for the
policies that track cards, from its own memory of earlier views. A policy instance may keep such
memory *per seat*, keyed by the seat of the view and the hand number, so one instance can play
several seats and a new hand starts from a clean slate. ``find_policy`` returns a fresh instance
each call.

``observe(seat, event)`` is an optional hook: a host that sees the events (the duel tool, a
network client) may pass each one, redacted for ``seat``, to sharpen the tracking. Policies work
without it; they then infer what they can from successive views.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol

from protocol.errors import CodedError
from server.engine import VARIANTS, Command, Event, Rules, View

__all__ = [
    "ALL_VARIANTS",
    "POLICY_NAMES",
    "Policy",
    "checked_policy",
    "find_policy",
    "supports",
]

ALL_VARIANTS: frozenset[str] = frozenset(VARIANTS)
"""Every preset; the ``variants`` of a policy that plays them all."""


class Policy(Protocol):
    """Chooses one of the legal actions from what a seat can see."""

    name: str
    variants: frozenset[str]
    """The presets this policy plays (``ALL_VARIANTS`` for most)."""

    def choose(
        self, rules: Rules, seen: View, actions: Sequence[Command], rng: random.Random
    ) -> Command:
        """Return one element of ``actions`` (never empty)."""
        ...

    def observe(self, seat: int, event: Event) -> None:
        """Take note of ``event`` as ``seat`` sees it (optional tracking; may do nothing)."""
        ...


def supports(policy: Policy, rules: Rules) -> bool:
    """Whether ``policy`` plays the preset of ``rules``."""
    return rules.preset in policy.variants


def _registry() -> dict[str, Callable[[], Policy]]:
    from bots.policies.greedy import GreedyPolicy
    from bots.policies.heuristic import HeuristicPolicy
    from bots.policies.mc import MonteCarloPolicy
    from bots.policies.random_policy import RandomPolicy
    from bots.policies.simple import SimplePolicy

    return {
        "random": RandomPolicy,
        "greedy": GreedyPolicy,
        "simple": SimplePolicy,
        "heuristic": HeuristicPolicy,
        "mc": MonteCarloPolicy,
    }


POLICY_NAMES: tuple[str, ...] = ("random", "greedy", "simple", "heuristic", "mc")
"""Every registered policy, weakest first."""


def find_policy(name: str) -> Policy:
    """A new instance of the policy called ``name``; ``mc:MS`` is ``mc`` with a budget of MS
    milliseconds per decision, ``mc:MS:v2`` its version 2 (``mc.version2``: it plays to
    win the hand), ``mc:MS:v3`` its version 3 (``mc.version3``: it plays for the points
    margin of the hand, weighing waiting for gin) and ``mc:MS:v4`` its version 4
    (``mc.version4``: version 3 with a knock rule fitted to playouts).

    Raises:
        KeyError: no such policy.
    """
    base, _, argument = name.partition(":")
    factories = _registry()
    try:
        factory = factories[base]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}") from None
    if not argument:
        return factory()
    if base != "mc":
        raise KeyError(f"policy {base!r} takes no argument, got {name!r}")
    from bots.policies.mc import MonteCarloPolicy, version2, version3, version4

    budget_text, _, version = argument.partition(":")
    if version not in ("", "v1", "v2", "v3", "v4"):
        raise KeyError(f"mc versions are v1, v2, v3 and v4 (mc:200:v4), got {name!r}")
    try:
        budget = float(budget_text)
    except ValueError:
        raise KeyError(f"mc takes a budget in milliseconds (mc:200), got {name!r}") from None
    if not budget > 0:
        raise KeyError(f"mc takes a positive budget in milliseconds (mc:200), got {name!r}")
    if version == "v2":
        return version2(budget)
    if version == "v3":
        return version3(budget)
    if version == "v4":
        return version4(budget)
    return MonteCarloPolicy(budget_ms=budget)


def checked_policy(name: str, rules: Rules, error: type[CodedError]) -> Policy:
    """``find_policy(name)`` for a command line that will seat it at ``rules``' tables.

    Raises:
        CodedError: an ``error`` coded ``AREA/unknown_policy`` (no such policy) or
            ``AREA/unsupported_variant`` (it does not play the preset), AREA being the
            namespace of ``error.default_code`` (``duel``, ``watch``).
    """
    area = error.default_code.partition("/")[0]
    try:
        policy = find_policy(name)
    except KeyError as failure:
        raise error(str(failure.args[0]), f"{area}/unknown_policy") from None
    if not supports(policy, rules):
        raise error(
            f"policy {name!r} does not play {rules.preset!r}", f"{area}/unsupported_variant"
        )
    return policy
