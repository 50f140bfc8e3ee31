"""The ladder service: reads its log, schedules matches, records results and ratings.

Theory of operation. ``Ladder.open`` folds the stream ``ladder:NAME`` of the store into a
``LadderState``. Every change is an append of events after the last ``seq`` the ladder saw
(optimistic, as the tables do): a second process writing the same ladder makes the append
fail with ``ladder/concurrent_writer`` instead of both counting a match.

``run`` keeps up to ``concurrency`` matches playing. A match is first *scheduled*
(``MatchScheduled``, durable before any card is dealt), then played by the runner, then its
``MatchResult`` is appended with the ratings after it, computed from the ratings folded so
far. So a kill at any moment leaves each match either not scheduled, scheduled and pending, or
recorded: on the next start the pending ones are played again from their seed (or cancelled
if an entrant has left), and nothing is counted twice or lost. Every ``refit_every`` results a
batch refit recomputes all ratings from the history and records how far the incremental ones
were (``Refitted``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from server.ladder.entrants import DEFAULT_ENTRANTS, Entrant, builtin, external, plays
from server.ladder.errors import LadderError
from server.ladder.events import (
    Configured,
    EntrantAdded,
    EntrantRemoved,
    EntrantSuspended,
    LadderEvent,
    MatchCancelled,
    MatchResult,
    MatchScheduled,
    Refitted,
    decode_event,
    encode_event,
    stream_id,
)
from server.ladder.matches import MatchOutcome
from server.ladder.pairing import PairingSettings, choose_entrants
from server.ladder.pools import Pool, parse_pool
from server.ladder.ratings import refit, update
from server.ladder.runner import MatchRunner
from server.ladder.state import DAY, LadderState
from server.tables.errors import SeqConflict
from server.tables.store import EventStore, NewEvent

__all__ = ["Ladder", "RunSettings", "max_refit_difference"]

log = logging.getLogger(__name__)

MAX_FAILURES = 3
"""Matches failing in a row (a runner's error, not a result) that stop a run."""

MAX_FORFEITS = 3
"""Matches an external entrant may forfeit in a row before it is suspended (default)."""

SUSPEND_SECONDS = 3600.0
"""How long a suspension lasts by default."""


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What ``Ladder.run`` plays."""

    pools: tuple[Pool, ...]
    matches: int = 0
    """Stop once the ladder holds this many results (0: run until cancelled)."""
    concurrency: int = 1
    seed: str = "ladder"
    pairing: PairingSettings = field(default_factory=PairingSettings)
    refit_every: int = 100
    """Results between two batch refits (0: never)."""


def max_refit_difference(state: LadderState) -> float:
    """The largest gap between a folded rating and the batch refit of the whole history."""
    fitted = refit(state.order)
    largest = 0.0
    for pool, standings in state.standings.items():
        for name, standing in standings.items():
            again = fitted[(pool, name)]
            largest = max(
                largest,
                abs(again.mu - standing.rating.mu),
                abs(again.sigma - standing.rating.sigma),
            )
    return largest


class Ladder:
    """One ladder over an event store. Build it with ``await Ladder.open(store, name)``."""

    def __init__(
        self, store: EventStore, name: str, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.name = name
        self.stream = stream_id(name)
        self.clock = clock
        self.state = LadderState()
        self.refit_every = 100
        self.max_forfeits = MAX_FORFEITS
        """Matches forfeited in a row that suspend an external entrant (0: never)."""
        self.suspend_seconds = SUSPEND_SECONDS
        self.available: Callable[[Entrant], bool] | None = None
        """Whether an entrant can be paired now (an external one: its account is online);
        ``None``: every active entrant can."""
        self.in_play: Counter[str] = Counter()
        """Entrant -> matches of it being played by ``run`` now."""
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._changed = asyncio.Condition()

    @classmethod
    async def open(
        cls, store: EventStore, name: str = "main", clock: Callable[[], float] = time.time
    ) -> Ladder:
        """The ladder ``name`` of ``store`` with its log folded.

        Raises:
            LadderError: a bad ladder name, or a log that does not fold.
        """
        if not name or not all(char.isalnum() or char in "-_" for char in name):
            raise LadderError(
                f"a ladder name is letters, digits, - and _, got {name!r}", "ladder/bad_name"
            )
        ladder = cls(store, name, clock)
        await ladder.refresh()
        return ladder

    async def refresh(self) -> None:
        """Fold whatever was appended since the last read."""
        for row in await self.store.read(self.stream, self.state.seq):
            self.state.apply(decode_event(row.payload), row.seq)

    async def append(self, *events: LadderEvent) -> None:
        """Append ``events`` durably, then fold them.

        Raises:
            LadderError: another process appended to this ladder meanwhile
                (``ladder/concurrent_writer``).
        """
        async with self._lock:  # the run and the lobby's requests append in turn
            at = self.clock()
            rows = [NewEvent(encode_event(event), at) for event in events]
            try:
                seq = await self.store.append(self.stream, self.state.seq, rows)
            except SeqConflict:
                raise LadderError(
                    f"another process is writing ladder {self.name!r}",
                    "ladder/concurrent_writer",
                ) from None
            first = seq - len(events) + 1
            for offset, event in enumerate(events):
                self.state.apply(event, first + offset)
        async with self._changed:
            self._changed.notify_all()

    async def wait_until(self, predicate: Callable[[LadderState], bool]) -> None:
        """Return once ``predicate(state)`` holds, checked after each append of this process
        (tests and tools; wrap in a timeout)."""
        async with self._changed:
            await self._changed.wait_for(lambda: predicate(self.state))

    def wake(self) -> None:
        """Something changed that may let a match be made (an entrant joined or came back):
        an idle ``run`` tries again now."""
        self._wake.set()

    # Entrants ----------------------------------------------------------------------------

    async def add_entrant(self, name: str) -> Entrant:
        """Enter the built-in entrant ``name`` (again, if it had been removed).

        Raises:
            LadderError: unknown entrant, or one already active (``ladder/duplicate_entrant``).
        """
        entrant = builtin(name)
        if self.state.active.get(name):
            raise LadderError(f"{name!r} is already on the ladder", "ladder/duplicate_entrant")
        await self.append(EntrantAdded(entrant.name, entrant.kind, entrant.spec, self.clock()))
        return entrant

    async def remove_entrant(self, name: str, reason: str = "removed by the operator") -> None:
        """Stop pairing ``name``; its results and ratings stay.

        Raises:
            LadderError: no such active entrant (``ladder/unknown_entrant``).
        """
        if not self.state.active.get(name):
            raise LadderError(f"{name!r} is not an active entrant", "ladder/unknown_entrant")
        await self.append(EntrantRemoved(name, reason, self.clock()))

    async def join_external(
        self, username: str, pools: tuple[str, ...], offered: tuple[str, ...]
    ) -> Entrant:
        """Enter (or enter again) the MQTT account ``username`` as ``ext:USERNAME`` in
        ``pools`` (all of ``offered`` when empty). Joining again with the same pools while
        active changes nothing.

        Raises:
            LadderError: a pool the ladder does not run (``ladder/bad_pool``), or a suspended
                entrant before its suspension is over (``ladder/suspended``).
        """
        wanted = tuple(dict.fromkeys(pools)) or offered
        unknown = [pool for pool in wanted if pool not in offered]
        if unknown:
            raise LadderError(
                f"this ladder runs {', '.join(offered)}; not {', '.join(unknown)}",
                "ladder/bad_pool",
            )
        entrant = external(username, wanted)
        suspended = self.state.suspended.get(entrant.name)
        if suspended is not None and suspended.until > self.clock():
            raise LadderError(
                f"{entrant.name} is suspended until {suspended.until:.0f} (Unix time):"
                f" {suspended.reason}",
                "ladder/suspended",
            )
        known = self.state.entrants.get(entrant.name)
        if not (self.state.active.get(entrant.name) and known == entrant):
            await self.append(EntrantAdded(entrant.name, entrant.kind, entrant.spec, self.clock()))
        self.wake()
        return entrant

    async def leave_external(self, username: str) -> Entrant:
        """Stop pairing ``ext:USERNAME`` (a match it is playing is played to the end).

        Raises:
            LadderError: not an active entrant (``ladder/not_joined``).
        """
        name = external(username, ()).name
        if not self.state.active.get(name):
            raise LadderError(f"{name} has not joined this ladder", "ladder/not_joined")
        await self.append(EntrantRemoved(name, "left", self.clock()))
        return self.state.entrants[name]

    def can_pair(self, name: str) -> bool:
        """Whether the active entrant ``name`` may be put in a new match now: an external
        entrant plays one match at a time, and only while ``available``."""
        entrant = self.state.entrants[name]
        if entrant.kind == "external" and self.in_play[name]:
            return False
        return self.available is None or self.available(entrant)

    def eligible(self, pool: Pool) -> list[str]:
        """The active entrants that play ``pool``'s variant and can be paired now, in entry
        order."""
        return [
            name
            for name, entrant in self.state.entrants.items()
            if self.state.active.get(name)
            and plays(entrant, pool.variant, pool.name)
            and self.can_pair(name)
        ]

    # Running -----------------------------------------------------------------------------

    async def configure(self, settings: RunSettings) -> None:
        """Record the run's settings when they differ from the last ones, and enter the
        default built-in entrants on a ladder that has none."""
        pairing = settings.pairing
        config = Configured(
            pools=tuple(pool.name for pool in settings.pools),
            seed=settings.seed,
            pair_cap_per_day=pairing.pair_cap_per_day,
            min_matches=pairing.min_matches,
            exploration=pairing.exploration,
            concurrency=settings.concurrency,
            at=0.0,
        )
        last = self.state.config
        if last is None or msgspec.structs.replace(last, at=0.0) != config:
            await self.append(msgspec.structs.replace(config, at=self.clock()))
        if not self.state.entrants:
            now = self.clock()
            await self.append(
                *(
                    EntrantAdded(entrant.name, entrant.kind, entrant.spec, now)
                    for entrant in map(builtin, DEFAULT_ENTRANTS)
                )
            )

    async def schedule(
        self, pool: Pool, settings: RunSettings, rng: random.Random
    ) -> MatchScheduled | None:
        """Pair and schedule the next match of ``pool`` (None if no table can be made)."""
        now = self.clock()
        chosen = choose_entrants(
            self.state,
            pool.name,
            pool.players,
            self.eligible(pool),
            settings.pairing,
            rng,
            now,
        )
        if chosen is None:
            return None
        match_id = f"m{len(self.state.scheduled) + 1}"
        match = MatchScheduled(match_id, pool.name, chosen, f"{settings.seed}:{match_id}", now)
        await self.append(match)
        return match

    async def record(self, match: MatchScheduled, outcome: MatchOutcome) -> MatchResult:
        """Append the result of ``match`` with the ratings it leads to."""
        before = [self.state.rating(match.pool, name) for name in match.entrants]
        after = update(before, outcome.ranks)
        forfeits = tuple(outcome.forfeits) if any(outcome.forfeits) else ()
        result = MatchResult(
            match_id=match.match_id,
            pool=match.pool,
            entrants=match.entrants,
            games=len(outcome.games),
            wins=tuple(float(win) for win in outcome.wins),
            points=tuple(float(point) for point in outcome.points),
            ranks=outcome.ranks,
            mu=tuple(rating.mu for rating in after),
            sigma=tuple(rating.sigma for rating in after),
            seconds=round(outcome.seconds, 4),
            at=self.clock(),
            forfeits=forfeits,
        )
        await self.append(result)
        for name in match.entrants:
            failing = self.state.failing[name]
            if self.max_forfeits and failing >= self.max_forfeits:
                now = self.clock()
                reason = f"forfeited {failing} matches in a row"
                await self.append(
                    EntrantSuspended(name, reason, failing, now + self.suspend_seconds, now)
                )
        if self.refit_every and len(self.state.results) % self.refit_every == 0:
            await self.append(
                Refitted(len(self.state.results), max_refit_difference(self.state), self.clock())
            )
        return result

    async def run(
        self,
        settings: RunSettings,
        runner: MatchRunner,
        on_result: Callable[[MatchResult], None] | None = None,
    ) -> int:
        """Play until the ladder holds ``settings.matches`` results (forever with 0); return
        the results recorded by this call.

        Pending matches of an earlier run are played first (or cancelled when one of their
        entrants has left). When no pool can make a table under the daily caps and nothing is
        playing, a bounded run stops; an endless one waits for the next UTC day. A match whose
        runner fails is cancelled (and logged); ``MAX_FAILURES`` in a row stop the run.

        Raises:
            LadderError: matches keep failing (``ladder/runner_failed``), or another process
                writes the ladder (``ladder/concurrent_writer``).
        """
        self.refit_every = settings.refit_every
        await self.configure(settings)
        pools = {pool.name: pool for pool in settings.pools}
        rng = random.Random(f"{settings.seed}:{self.state.seq}")
        queue: list[MatchScheduled] = []
        for match in self.state.pending():
            if match.pool not in pools:
                pools[match.pool] = parse_pool(match.pool)
            if not all(self.state.active.get(name) for name in match.entrants):
                reason = "an entrant has left"
            elif not all(self.can_pair(name) for name in match.entrants):
                reason = "an external entrant is not connected"
            else:
                queue.append(match)
                continue
            await self.append(MatchCancelled(match.match_id, reason, self.clock()))
        cycle = itertools.cycle(settings.pools)
        playing: dict[asyncio.Task[MatchOutcome], MatchScheduled] = {}
        recorded = 0
        failures = 0

        def wanted() -> bool:
            return settings.matches <= 0 or (
                len(self.state.results) + len(playing) < settings.matches
            )

        try:
            while True:
                while len(playing) < max(1, settings.concurrency) and wanted():
                    upcoming = queue.pop(0) if queue else await self._next(cycle, settings, rng)
                    if upcoming is None:
                        break
                    entrants = [self.state.entrants[name] for name in upcoming.entrants]
                    task = asyncio.create_task(
                        runner.play(pools[upcoming.pool], entrants, upcoming.seed)
                    )
                    playing[task] = upcoming
                    self.in_play.update(upcoming.entrants)
                if not playing:
                    if settings.matches > 0 and len(self.state.results) >= settings.matches:
                        return recorded
                    if settings.matches > 0 and self.available is None:
                        log.warning("ladder %s: no match can be made; stopping", self.name)
                        return recorded
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(min(60.0, DAY - self.clock() % DAY)):
                            await self._wake.wait()
                    continue
                self._wake.clear()
                woken = asyncio.ensure_future(self._wake.wait())
                try:
                    done, _ = await asyncio.wait(
                        [*playing, woken], return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    woken.cancel()
                for task in [task for task in playing if task in done]:
                    match = playing.pop(task)
                    self.in_play.subtract(match.entrants)
                    try:
                        outcome = task.result()
                    except Exception as error:  # a runner's failure must not stop the ladder
                        log.exception("ladder %s: match %s failed", self.name, match.match_id)
                        reason = f"the match failed: {type(error).__name__}: {error}"[:500]
                        await self.append(MatchCancelled(match.match_id, reason, self.clock()))
                        failures += 1
                        if failures >= MAX_FAILURES:
                            raise LadderError(
                                f"{failures} matches failed in a row; the last: {reason}",
                                "ladder/runner_failed",
                            ) from error
                        continue
                    failures = 0
                    result = await self.record(match, outcome)
                    recorded += 1
                    if on_result is not None:
                        on_result(result)
        finally:
            for task in playing:
                task.cancel()
            for task, match in playing.items():
                self.in_play.subtract(match.entrants)
                with contextlib.suppress(BaseException):
                    await task

    async def _next(
        self, cycle: itertools.cycle[Pool], settings: RunSettings, rng: random.Random
    ) -> MatchScheduled | None:
        for _ in range(len(settings.pools)):
            match = await self.schedule(next(cycle), settings, rng)
            if match is not None:
                return match
        return None
