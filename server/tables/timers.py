"""Clocks and timers: the move timer and claim windows, with an injectable clock.

A table's deadline is derived from its state and the time of its last event, never stored:
after a restart the same deadline comes out of the log. When it passes, the server plays for
the seat as RULES.md says (``auto_turn``): draw from the stock, meld nothing, discard the
highest-value card that was not just taken from the pile; in a claim window it passes for
every seat that has not answered.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol

from server.engine import (
    Command,
    Discard,
    DrawStock,
    Knock,
    LayOff,
    MeldCommand,
    Pass,
    State,
    card_face,
    is_over,
    legal_actions,
)
from server.engine.game import Phase, awaiting

__all__ = [
    "NO_TIMER_METRICS",
    "Clock",
    "ManualClock",
    "SystemClock",
    "TimerMetrics",
    "auto_command",
    "deadline",
]


class Clock(Protocol):
    """Where the server reads the time and waits for it (injected, so tests control it)."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep_until(self, when: float) -> None:
        """Return once ``now() >= when``."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        """Seconds since the epoch."""
        return time.time()

    async def sleep_until(self, when: float) -> None:
        """Sleep until ``when``."""
        delay = when - self.now()
        if delay > 0:
            await asyncio.sleep(delay)


@dataclass
class ManualClock:
    """A clock that moves only when told to (``advance``); sleepers wake as it passes them."""

    time: float = 1_000_000.0
    _sleepers: list[tuple[float, asyncio.Future[None]]] = field(default_factory=list)
    _arrivals: asyncio.Event | None = None

    def now(self) -> float:
        """The clock's time."""
        return self.time

    async def sleep_until(self, when: float) -> None:
        """Wait until the clock has been advanced to ``when``."""
        if when <= self.time:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((when, future))
        if self._arrivals is not None:
            self._arrivals.set()
        await future

    async def wait_for_sleeper(self, until: float | None = None) -> None:
        """Return once some task sleeps on this clock (until ``until``, if given): a timer is
        armed. Tests wrap it in a timeout."""
        while not any(
            not future.done() and (until is None or when == until)
            for when, future in self._sleepers
        ):
            self._arrivals = asyncio.Event()
            await self._arrivals.wait()

    def advance(self, seconds: float) -> None:
        """Move the time on and wake every sleeper whose time has come."""
        self.time += seconds
        waiting = []
        for when, future in self._sleepers:
            if when <= self.time:
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((when, future))
        self._sleepers = waiting

    @property
    def sleepers(self) -> int:
        """How many tasks wait on this clock (tests wait for a timer to be armed)."""
        return sum(1 for _, future in self._sleepers if not future.done())


class TimerMetrics(Protocol):
    """Where a table tells that its timer ran out and the server acted (the server's metrics)."""

    def timer_fired(self, kind: str) -> None:
        """``kind``: ``turn`` (a move played for a seat), ``claim`` (a claim window closed) or
        ``ready`` (the pause between hands ended)."""
        ...


class _NoTimerMetrics:
    def timer_fired(self, kind: str) -> None:
        """Nothing is counted."""


NO_TIMER_METRICS: TimerMetrics = _NoTimerMetrics()


def deadline(
    game: State | None, last_at: float, move_seconds: float, claim_seconds: float
) -> float | None:
    """When the server plays for the awaited seat(s), or ``None`` when no timer runs.

    The move timer counts from the table's last event; a claim window closes
    ``claim_seconds`` after it opened (its opening is the last event until someone answers).
    """
    if game is None or is_over(game) or not awaiting(game):
        return None
    if game.phase is Phase.CLAIM:
        return last_at + claim_seconds if claim_seconds > 0 else None
    return last_at + move_seconds if move_seconds > 0 else None


def auto_command(game: State, seat: int) -> Command:
    """The move the server makes for ``seat`` when its time is up (RULES.md "Timers").

    Draw from the stock (pass where there is no stock to draw from, and in claim windows and
    on the first upcard), discard the highest-value card that was not just taken, and lay down
    or knock only where the rules force it (a card that must be used, a knock at the wall).
    """
    actions = legal_actions(game, seat)
    if not actions:
        raise AssertionError(f"seat {seat} has nothing to do")  # pragma: no cover
    if game.phase in (Phase.CLAIM, Phase.FIRST_UPCARD, Phase.DRAW):
        # Draw from the stock; where there is none (or in a window) pass; else what is left.
        return _first_of(actions, (DrawStock, Pass))
    discards = [action for action in actions if isinstance(action, Discard)]
    if discards:
        values = game.rules.values
        return max(discards, key=lambda action: (values[card_face(action.card)], action.card))
    # No discard is possible: a card taken must be laid down, or a knock is forced.
    return _first_of(actions, (MeldCommand, LayOff, Knock))


def _first_of(actions: list[Command], kinds: tuple[type, ...]) -> Command:
    """The first action of the first kind in ``kinds`` that has one, else the first action."""
    for kind in kinds:
        for action in actions:
            if isinstance(action, kind):
                return action
    return actions[0]
