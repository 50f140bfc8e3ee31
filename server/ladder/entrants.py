"""Entrants: who plays on a ladder, by ``name@version``.

A built-in entrant is a policy of ``bots/policies`` at a fixed configuration: the registry below
maps each ``name@version`` to the ``find_policy`` spec it plays, and a version never changes
meaning once it has been rated. A policy whose play changes gets a new version
(``heuristic@2``), rated from scratch beside the old one.

An external entrant is an MQTT account that joined the ladder with the ``ladder_join`` lobby
command (docs/ladder.md, "Bot authors"): it is called ``ext:USERNAME``, its ``spec`` lists the
pools it plays, and its games are played at ``ramino serve`` tables
(``server.ladder.tables``).
"""

from __future__ import annotations

from dataclasses import dataclass

from bots.policies.base import find_policy
from server.ladder.errors import LadderError

__all__ = [
    "BUILTINS",
    "DEFAULT_ENTRANTS",
    "EXTERNAL_PREFIX",
    "Entrant",
    "builtin",
    "external",
    "plays",
]

EXTERNAL_PREFIX = "ext:"
"""An external entrant is ``ext:`` and its MQTT username."""


@dataclass(frozen=True, slots=True)
class Entrant:
    """One entrant: its ladder name, kind and what it plays with."""

    name: str
    kind: str
    """``builtin`` (played by the ladder itself) or ``external`` (an MQTT account)."""
    spec: str
    """For a built-in entrant, the ``find_policy`` spec of its policy; for an external one,
    the pools it plays, comma-separated."""

    @property
    def account(self) -> str:
        """The name it sits under at a table: an external entrant's MQTT username, else the
        entrant's name (a name no MQTT account can have: it holds ``@``)."""
        if self.kind == "external":
            return self.name.removeprefix(EXTERNAL_PREFIX)
        return self.name

    @property
    def pools(self) -> tuple[str, ...]:
        """The pools an external entrant plays (empty for a built-in one)."""
        if self.kind != "external":
            return ()
        return tuple(pool for pool in self.spec.split(",") if pool)


BUILTINS: dict[str, str] = {
    "random@1": "random",
    "greedy@1": "greedy",
    "simple@1": "simple",
    "heuristic@1": "heuristic",
    "mc@1": "mc:200",
    "mc@2": "mc:200:v2",
    "mc@3": "mc:200:v3",
    "mc@4": "mc:200:v4",
}
"""Built-in entrant -> the policy spec it plays (``mc@1``: 200 ms per searched decision;
``mc@2``: version 2, which plays to win the hand, 200 ms of process time per searched
decision; ``mc@3``: version 3, which plays for the hand's points margin, as ladder matches
break split wins by points; ``mc@4``: version 4, version 3 with its Gin knock rule fitted to
playouts)."""

DEFAULT_ENTRANTS: tuple[str, ...] = ("random@1", "greedy@1", "simple@1", "heuristic@1", "mc@4")
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


def external(username: str, pools: tuple[str, ...]) -> Entrant:
    """The external entrant of the MQTT account ``username``, playing ``pools``."""
    return Entrant(f"{EXTERNAL_PREFIX}{username}", "external", ",".join(pools))


def plays(entrant: Entrant, variant: str, pool: str = "") -> bool:
    """Whether ``entrant`` plays the preset ``variant`` (an external entrant: the pool
    ``pool``)."""
    if entrant.kind == "external":
        return pool in entrant.pools
    if entrant.kind != "builtin":
        return False
    return variant in find_policy(entrant.spec).variants
