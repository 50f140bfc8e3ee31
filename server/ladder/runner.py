"""Match runners: what plays a scheduled match and returns its outcome.

``MatchRunner`` is the seam between the ladder (scheduling, results, ratings) and whatever
plays the games. ``ProcessRunner`` plays built-in entrants with the engine in worker processes
(one match per worker at a time: ``concurrency`` workers play that many matches at once);
``InlineRunner`` plays them in the calling thread (tests, one-shot tools). A runner for
external entrants will create ``ramino serve`` tables over MQTT, seat the bots there, and read
the outcome from the table logs; the ladder itself will not change.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Protocol

from server.ladder.entrants import Entrant
from server.ladder.errors import LadderError
from server.ladder.matches import MatchOutcome, play_match
from server.ladder.pools import Pool, parse_pool

__all__ = ["InlineRunner", "MatchRunner", "ProcessRunner"]


class MatchRunner(Protocol):
    """Plays matches."""

    async def play(self, pool: Pool, entrants: Sequence[Entrant], seed: str) -> MatchOutcome:
        """Play the duplicate match of ``seed`` with ``entrants[i]`` as entrant index ``i``."""
        ...

    async def close(self) -> None:
        """Release what the runner holds (worker processes)."""
        ...


def _specs(entrants: Sequence[Entrant]) -> list[str]:
    for entrant in entrants:
        if entrant.kind != "builtin":
            raise LadderError(
                f"entrant {entrant.name!r} is {entrant.kind}: only built-in entrants play yet",
                "ladder/unsupported_entrant",
            )
    return [entrant.spec for entrant in entrants]


def _play(pool_name: str, specs: list[str], seed: str) -> MatchOutcome:
    pool = parse_pool(pool_name)
    return play_match(pool.rules(), specs, seed)


class InlineRunner:
    """Plays each match in the calling thread (the event loop waits for it)."""

    async def play(self, pool: Pool, entrants: Sequence[Entrant], seed: str) -> MatchOutcome:
        """Play the match now."""
        return _play(pool.name, _specs(entrants), seed)

    async def close(self) -> None:
        """Nothing to release."""


class ProcessRunner:
    """Plays matches in ``workers`` worker processes (started with ``spawn``: the ladder's
    process has store threads, which a ``fork`` would copy in an unknown state)."""

    def __init__(self, workers: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(max_workers=max(1, workers), mp_context=context)

    async def play(self, pool: Pool, entrants: Sequence[Entrant], seed: str) -> MatchOutcome:
        """Play the match in a worker."""
        specs = _specs(entrants)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, _play, pool.name, specs, seed)

    async def close(self) -> None:
        """Stop the workers (a match still playing is dropped: it stays pending)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
