"""The table service: every table of a store, one actor each, found by id.

It is what a transport drives: ``submit`` routes a command to its table's actor (starting the
actor on first use), ``create`` opens a new table, and ``start`` recovers every table that is
not finished when the server starts, timers included.

Finished and closed tables leave memory: once such a table has been idle for ``finished_ttl``
seconds its actor says so (``TableActor.on_idle``), the service drops it and stops its tasks,
and tells ``on_unload``. The table stays in the store and is loaded back on the next command,
join or resync. Waiting tables idle for ``waiting_ttl`` seconds are closed by their actor.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from server.engine import Command
from server.tables.actor import Outbox, Reply, TableActor, build_table, read_tails
from server.tables.store import EventStore, Tail
from server.tables.table import CreateTable, TableCommand, empty_table
from server.tables.timers import NO_TIMER_METRICS, Clock, SystemClock

__all__ = ["TableService", "TablesRead"]

_FINISHED = frozenset({"finished", "closed"})


@dataclass(eq=False)
class TablesRead:
    """What ``TableService.read`` read for many tables, and those of them whose actor came or
    went since the read began (``spoiled``: not to be built from it)."""

    tails: dict[str, Tail]
    spoiled: set[str]


class TableService:
    """All tables of one store; see the module docstring."""

    def __init__(
        self,
        store: EventStore,
        outbox: Outbox,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        claim_seconds: float = 10.0,
        grace_seconds: float = 30.0,
        waiting_ttl: float = 0.0,
        finished_ttl: float = 0.0,
    ) -> None:
        self.store = store
        self.outbox = outbox
        self.clock = clock or SystemClock()
        self.rng: random.Random = rng if rng is not None else secrets.SystemRandom()
        """Where the deals come from: the OS CSPRNG unless a seeded generator is given."""
        self.claim_seconds = claim_seconds
        self.grace_seconds = grace_seconds
        self.waiting_ttl = waiting_ttl
        """Seconds a waiting table lives without activity (0: forever)."""
        self.finished_ttl = finished_ttl
        """Seconds a finished or closed table stays in memory without activity (0: forever)."""
        self.on_unload: Callable[[str], None] | None = None
        """Told the id of each table that left memory."""
        self.actors: dict[str, TableActor] = {}
        self._loading: dict[str, asyncio.Future[TableActor]] = {}
        self.metrics = NO_TIMER_METRICS
        self._unloading: dict[str, asyncio.Task[None]] = {}
        self._unloaded = asyncio.Condition()
        self._reads: set[TablesRead] = set()

    async def start(self) -> list[str]:
        """Load and start every table that is not finished; return their ids."""
        resumed = []
        for summary in await self.store.tables():
            if summary.status in _FINISHED:
                continue
            await self._actor(summary.table_id)
            resumed.append(summary.table_id)
        return resumed

    async def adopt(self, table_ids: list[str], chunk: int = 1000) -> list[TableActor]:
        """Load and start the tables ``table_ids`` (another process served them), ``chunk``
        at a time in one query each; their actors. Tables with no events are skipped."""
        actors: list[TableActor] = []
        for start in range(0, len(table_ids), chunk):
            part = table_ids[start : start + chunk]
            read = await self.read(part)
            try:
                actors.extend(self.adopt_read(read, part))
            finally:
                self.release(read)
        return actors

    async def read(self, table_ids: Sequence[str]) -> TablesRead:
        """Read what loads ``table_ids`` (``read_tails``), for ``adopt_read``; ``release`` it
        after. A table not yet served here is kept in memory."""
        read = TablesRead({}, set())
        self._reads.add(read)
        try:
            wanted = [table_id for table_id in table_ids if table_id not in self.actors]
            read.tails = await read_tails(self.store, wanted)
        except BaseException:
            self._reads.discard(read)
            raise
        return read

    def adopt_read(self, read: TablesRead, table_ids: Sequence[str]) -> list[TableActor]:
        """Build and start the actors of ``table_ids`` from ``read`` (no I/O: the caller picks
        how many to build between two awaits); the actors of those of ``table_ids`` that are
        served here, old or new. A table loaded, unloaded or dropped since ``read`` began is
        not built from it (what was read may be older than its log)."""
        actors: list[TableActor] = []
        for table_id in table_ids:
            actor = self.actors.get(table_id)
            if actor is None:
                tail = read.tails.get(table_id)
                if (
                    tail is None
                    or table_id in read.spoiled
                    or table_id in self._loading
                    or table_id in self._unloading
                ):
                    continue
                table, last_at = build_table(table_id, tail)
                actor = TableActor(
                    table,
                    self.store,
                    self.outbox,
                    clock=self.clock,
                    rng=self._table_rng(),
                    claim_seconds=self.claim_seconds,
                    last_at=last_at,
                    grace_seconds=self.grace_seconds,
                    waiting_ttl=self.waiting_ttl,
                    finished_ttl=self.finished_ttl,
                    on_idle=self._idle,
                    active_at=last_at,
                )
                actor.metrics = self.metrics
                actor.start()
                self.actors[table_id] = actor
            actors.append(actor)
        return actors

    def release(self, read: TablesRead) -> None:
        """``read`` is no longer used: stop tracking what spoils it."""
        self._reads.discard(read)

    def _spoil(self, table_id: str) -> None:
        """``table_id``'s actor comes or goes: what any ``read`` under way holds of it is not
        to be used."""
        for read in self._reads:
            read.spoiled.add(table_id)

    async def drop(self, table_id: str) -> None:
        """Stop ``table_id``'s actor and forget it (another process serves the table now;
        ``on_unload`` is not told)."""
        self._spoil(table_id)
        loading = self._loading.get(table_id)
        if loading is not None:
            await asyncio.wait({loading})
        actor = self.actors.pop(table_id, None)
        if actor is not None:
            await actor.stop()

    async def stop(self) -> None:
        """Stop every actor (their queued commands finish first)."""
        for actor in list(self.actors.values()):
            await actor.stop()
        self.actors.clear()
        if self._unloading:
            await asyncio.wait(list(self._unloading.values()))

    async def wait_unloaded(self, table_id: str) -> None:
        """Return once ``table_id`` holds no actor and none is stopping (tests and tools; wrap
        in a timeout)."""
        async with self._unloaded:
            await self._unloaded.wait_for(
                lambda: table_id not in self.actors and table_id not in self._unloading
            )

    def _idle(self, actor: TableActor) -> None:
        """``actor``'s finished table has been idle long enough: drop it (if nothing is queued
        there) and stop its tasks."""
        table_id = actor.table.table_id
        if self.actors.get(table_id) is not actor or not actor.quiet:
            return
        del self.actors[table_id]
        self._spoil(table_id)
        task = asyncio.create_task(self._unload(table_id, actor), name=f"unload-{table_id}")
        self._unloading[table_id] = task

    async def _unload(self, table_id: str, actor: TableActor) -> None:
        try:
            await actor.stop()
        finally:
            del self._unloading[table_id]
            if self.on_unload is not None:
                self.on_unload(table_id)
            async with self._unloaded:
                self._unloaded.notify_all()

    async def create(
        self, host: str, command: CreateTable, command_id: str = "", table_id: str = ""
    ) -> tuple[str, Reply]:
        """Open a new table (a fresh id unless one is given) and return its id and the reply."""
        table_id = table_id or secrets.token_hex(6)
        actor = await self._actor(table_id)
        reply = await actor.submit(host, command, command_id)
        if actor.table.created is None and self.actors.get(table_id) is actor:
            del self.actors[table_id]  # refused: no table was made
            self._spoil(table_id)
            await actor.stop()
        return table_id, reply

    async def actor(self, table_id: str) -> TableActor | None:
        """The actor of ``table_id``, loaded on first use; ``None`` if there is no such table."""
        actor = self.actors.get(table_id)
        if actor is None:
            if await self.store.last_seq(table_id) == 0:
                return None
            actor = await self._actor(table_id)
        return actor

    async def submit(
        self,
        table_id: str,
        sender: str,
        command: Command | TableCommand,
        command_id: str = "",
        last_seq: int | None = None,
    ) -> Reply:
        """Run ``command`` at ``table_id``; an unknown table answers ``table/unknown``."""
        actor = self.actors.get(table_id)
        if actor is None:
            if await self.store.last_seq(table_id) == 0:
                return Reply(
                    False,
                    command_id,
                    0,
                    code="table/unknown",
                    message=f"there is no table {table_id!r}",
                )
            actor = await self._actor(table_id)
        return await actor.submit(sender, command, command_id, last_seq)

    async def _actor(self, table_id: str) -> TableActor:
        """The one actor of ``table_id`` (two callers never load a table twice)."""
        actor = self.actors.get(table_id)
        if actor is not None:
            return actor
        loading = self._loading.get(table_id)
        if loading is None:
            self._spoil(table_id)
            loading = asyncio.ensure_future(self._load(table_id))
            self._loading[table_id] = loading
            loading.add_done_callback(lambda _: self._loading.pop(table_id, None))
        return await asyncio.shield(loading)

    def _table_rng(self) -> random.Random:
        """A new table's generator: the OS CSPRNG itself (it has no state to share), or, from
        a seeded generator, one seeded from it (tests and simulations deal the same each run)."""
        if isinstance(self.rng, random.SystemRandom):
            return self.rng
        return random.Random(self.rng.getrandbits(128))

    async def _load(self, table_id: str) -> TableActor:
        unloading = self._unloading.get(table_id)
        if unloading is not None:  # its last actor first stops
            await asyncio.wait({unloading})
        actor = self.actors.get(table_id)
        if actor is None:
            if await self.store.last_seq(table_id) > 0:
                actor = await TableActor.load(
                    self.store,
                    table_id,
                    self.outbox,
                    clock=self.clock,
                    rng=self._table_rng(),
                    claim_seconds=self.claim_seconds,
                    grace_seconds=self.grace_seconds,
                    waiting_ttl=self.waiting_ttl,
                    finished_ttl=self.finished_ttl,
                    on_idle=self._idle,
                )
            else:
                actor = TableActor(
                    empty_table(table_id),
                    self.store,
                    self.outbox,
                    clock=self.clock,
                    rng=self._table_rng(),
                    claim_seconds=self.claim_seconds,
                    grace_seconds=self.grace_seconds,
                    waiting_ttl=self.waiting_ttl,
                    finished_ttl=self.finished_ttl,
                    on_idle=self._idle,
                )
            actor.metrics = self.metrics
            actor.start()
            self.actors[table_id] = actor
        return actor
