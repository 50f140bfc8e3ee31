"""Entrants: who plays on a ladder, by ``name@version``.

A built-in entrant is a policy of ``bots/policies`` at a fixed configuration: the registry below
maps each ``name@version`` to the ``find_policy`` spec it plays, and a version never changes
meaning once it has been rated. A policy whose play changes gets a new version
(``heuristic@2``), rated from scratch beside the old one.

External entrants (bots of other people, connecting over MQTT) are not there yet: they will be
``kind="external"`` entrants played through the table service (see ``server.ladder.runner``).
"""

from __future__ import annotations

from dataclasses import dataclass

from bots.policies.base import find_policy
from server.ladder.errors import LadderError

__all__ = ["BUILTINS", "DEFAULT_ENTRANTS", "Entrant", "builtin", "plays"]


@dataclass(frozen=True, slots=True)
class Entrant:
    """One entrant: its ladder name, kind and what it plays with."""

    name: str
    kind: str
    """``builtin`` (played by the ladder itself)."""
    spec: str
    """For a built-in entrant, the ``find_policy`` spec of its policy."""


BUILTINS: dict[str, str] = {
    "random@1": "random",
    "greedy@1": "greedy",
    "simple@1": "simple",
    "heuristic@1": "heuristic",
    "mc@1": "mc:200",
    "mc@2": "mc:200:v2",
}
"""Built-in entrant -> the policy spec it plays (``mc@1``: 200 ms per searched decision;
``mc@2``: version 2, which plays to win the hand, 200 ms of process time per searched
decision)."""

DEFAULT_ENTRANTS: tuple[str, ...] = ("random@1", "greedy@1", "simple@1", "heuristic@1", "mc@1")
"""What ``ramino ladder run`` enters on a ladder that has no entrant yet."""


def builtin(name: str) -> Entrant:
    """The built-in entrant called ``name``.

    Raises:
        LadderError: no such built-in entrant (``ladder/unknown_entrant``).
    """
    spec = BUILTINS.get(name)
    if spec is None:
        known = ", ".join(BUILTINS)
        raise LadderError(
            f"unknown built-in entrant {name!r}; known: {known}", "ladder/unknown_entrant"
        )
    return Entrant(name, "builtin", spec)


def plays(entrant: Entrant, variant: str) -> bool:
    """Whether ``entrant`` plays the preset ``variant``."""
    if entrant.kind != "builtin":
        return False
    return variant in find_policy(entrant.spec).variants
