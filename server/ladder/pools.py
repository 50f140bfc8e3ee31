"""Pools: a variant and a player count (with the preset's default options), each rated apart.

A pool is named ``VARIANT-PLAYERS`` (``gin-2``, ``knock-4``, ``rummy500-3``, ``ramino-4``). Its
games are single hands: a match is one deal played in every seat rotation, so a match is
short, and many matches rate an entrant faster than a few whole games would.
"""

from __future__ import annotations

from dataclasses import dataclass

from server.engine import Rules, make_rules
from server.engine.errors import EngineError
from server.ladder.errors import LadderError

__all__ = ["DEFAULT_POOLS", "Pool", "parse_pool", "parse_pools"]

DEFAULT_POOLS: tuple[str, ...] = ("gin-2", "knock-2", "rummy500-3", "ramino-4")


@dataclass(frozen=True, slots=True)
class Pool:
    """Where entrants are rated: one preset at one player count."""

    name: str
    variant: str
    players: int

    def rules(self) -> Rules:
        """The rules of every game of the pool (the preset's defaults)."""
        return make_rules(self.variant, {}, self.players)


def parse_pool(name: str) -> Pool:
    """The pool called ``VARIANT-PLAYERS``.

    Raises:
        LadderError: not of that form, or a variant or player count the engine refuses
            (``ladder/bad_pool``).
    """
    variant, dash, count = name.strip().rpartition("-")
    if not dash or not count.isdigit() or not variant:
        raise LadderError(
            f"a pool is VARIANT-PLAYERS (gin-2, rummy500-3), got {name!r}", "ladder/bad_pool"
        )
    pool = Pool(f"{variant}-{int(count)}", variant, int(count))
    try:
        pool.rules()
    except EngineError as error:
        raise LadderError(f"pool {name!r}: {error.message}", "ladder/bad_pool") from None
    return pool


def parse_pools(text: str | tuple[str, ...]) -> tuple[Pool, ...]:
    """Comma-separated pool names (or a tuple of them), without repeats.

    Raises:
        LadderError: a bad pool name, or none at all (``ladder/bad_pool``).
    """
    names = text.split(",") if isinstance(text, str) else list(text)
    pools = tuple(dict.fromkeys(parse_pool(name) for name in names if name.strip()))
    if not pools:
        raise LadderError("no pool given", "ladder/bad_pool")
    return pools
