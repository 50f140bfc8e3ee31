"""One worker of several: ``ramino serve --worker NAME`` on a PostgreSQL store.

Theory of operation. Every worker connects to the same broker and store. What it serves is
what it holds a lease for (``server.net.leases``): the lobby shards (it subscribes to
``ramino/v1/lobby/{shard}/+`` for each) and the tables (``ramino/v1/table/{id}/cmd/+`` for
each); it reads the presence topics and the retained lobby listings of every table (the lobby
lists them all). Two tasks run:

- the **renewer**, every ``ttl / 3`` seconds: renews the worker's membership, shard and table
  leases in three statements; a table whose lease could not be renewed (another worker took
  it after it expired: this process was paused or cut off for over ``ttl`` seconds) is
  dropped: its topic unsubscribed, its actor stopped; its queued commands are not answered
  here (their appends are refused, ``LeaseLost``) but by the new owner, to which the clients
  send them again;
- the **balancer**, every ``ttl / 3`` seconds and whenever another worker releases leases
  (``NOTIFY``): takes free shards up to its fair share (``ceil(shards / live workers)``) and
  lets go of those above it, and adopts tables whose lease expired (their worker died), up to
  its fair share of them: it bumps their epoch, subscribes to their commands (a command to a
  table not loaded yet loads it at once), then, in the background, loads them from their
  snapshots and logs a chunk at a time (starting their timers), republishes their retained
  snapshots and listings, and sends each seated player an ``Update`` with the table's
  present.

A table created by a lobby command is leased by the worker that creates it, before its first
event is written. An append by a worker that lost the table's lease is refused by the store
(fencing); the worker then drops the table at once. On a clean stop (SIGTERM) the worker stops
reading, finishes the commands under way, and releases its leases (``expires_at = now()``, then
``NOTIFY``): the others take over at once. The worker holding shard 0 publishes the retained
server status (the open tables of the whole store); the others publish none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

import asyncpg

from protocol import topics
from server.net.gateway import Gateway
from server.net.leases import CHANNEL, Leases, chunks, fair_share, pairs
from server.tables.errors import StoreError
from server.tables.postgres_store import Fence, PostgresStore
from server.tables.service import TableService, TablesRead

__all__ = ["DEFAULT_TTL", "Worker", "WorkerError"]

_log = logging.getLogger(__name__)

DEFAULT_TTL = 5.0
"""Seconds a lease lasts without renewal (``--lease-ttl``): a killed worker's tables are taken
over within about ``4/3`` of it."""

SUBSCRIBE_CHUNK = 500
"""Topics in one SUBSCRIBE or UNSUBSCRIBE packet at most."""
READ_CHUNK = 1000
"""Tables read in one query when taking tables over (the next chunk is read while the last is
built)."""
LOAD_CHUNK = 10
"""Tables built and republished together when taking tables over, between two looks at the
clock."""
LOAD_SLICE = 0.01
"""Seconds of building tables after which the event loop is let go once (the folds keep it
busy: short slices let commands and the lease renewals in between)."""


class WorkerError(StoreError):
    """A worker cannot start as asked (its name is held by a live worker, no PostgreSQL)."""

    default_code = "store/worker"


def table_filter(table_id: str) -> str:
    """The command topics of ``table_id``, as one subscription."""
    return topics.table_command(table_id, "+")


def lobby_filter(shard: int) -> str:
    """The lobby topics of ``shard``, as one subscription."""
    return topics.lobby_command("+", shard)


class Worker:
    """See the module docstring. ``start`` starts the gateway too; ``stop`` stops both and
    the service."""

    def __init__(
        self,
        name: str,
        url: str,
        store: PostgresStore,
        gateway: Gateway,
        service: TableService,
        shards: int = 1,
        ttl: float = DEFAULT_TTL,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name
        self.url = url
        self.store = store
        self.gateway = gateway
        self.service = service
        self.shard_count = max(1, shards)
        self.ttl = ttl
        self.announce = announce or (lambda line: None)
        self.tables: dict[str, int] = {}
        """Table id -> the epoch of its lease, for every table this worker serves (the store's
        fence reads it)."""
        self.shards: dict[int, int] = {}
        """Shard -> the epoch of its lease."""
        self.epoch = 0
        """The epoch of this worker's membership lease."""
        self.leases: Leases | None = None
        self._listener: asyncpg.Connection | None = None
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._balancing = asyncio.Lock()
        self._published: int | None = None
        self._unloads: set[asyncio.Task[None]] = set()
        self._loads: set[asyncio.Task[None]] = set()
        """Adopted tables being loaded in the background."""
        self.adopted = 0
        """Tables adopted so far (taken over from a worker that died or stopped)."""

    # Life -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join: take the membership lease, start the gateway, take shards and orphan tables.

        Raises:
            WorkerError: a live worker already has this name.
        """
        self.leases = leases = await Leases.open(self.url, self.name, self.ttl)
        epoch = await leases.take("worker", self.name)
        if epoch is None:
            await leases.close()
            raise WorkerError(
                f"a worker named {self.name!r} is already running on this store (or stopped "
                f"less than {self.ttl:g} s ago without releasing its leases); choose another "
                "--worker name or wait"
            )
        self.epoch = epoch
        self.store.fence = Fence(self.name, self.tables)
        gateway = self.gateway
        gateway.worker = self
        gateway.shards = self.shard_count
        gateway.set_started_at(await leases.started_at(time.time()))
        self.service.on_unload = self._unloaded
        await gateway.start()
        self._listener = await asyncpg.connect(self.url)
        await self._listener.add_listener(CHANNEL, self._notified)
        # Renewing runs from the start: taking many tables over may outlast a lease.
        self._tasks = [
            asyncio.create_task(self._renew_loop(), name=f"worker-{self.name}-renew"),
        ]
        await self._balance()
        await leases.notify()  # the others make room: they hand shards over
        self._tasks.append(
            asyncio.create_task(self._balance_loop(), name=f"worker-{self.name}-balance")
        )

    async def stop(self) -> None:
        """Stop reading, finish the commands under way, release every lease (the others take
        over at once), and close the lease connections."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for task in list(self._loads):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        leases = self.leases
        others = []
        if leases is not None:
            with contextlib.suppress(Exception):
                others = [name for name in await leases.live_workers() if name != self.name]
        self.gateway.offline_on_stop = not others
        await self.gateway.stop()
        await self.service.stop()
        if self._unloads:
            await asyncio.wait(self._unloads)
        if leases is None:
            return
        try:
            await leases.release("table", dict(self.tables), notify=False)
            await leases.release("shard", {str(k): v for k, v in self.shards.items()}, False)
            await leases.release("worker", {self.name: self.epoch})
        except Exception:  # the leases will expire by themselves
            _log.exception("releasing the leases failed")
        self.tables.clear()
        self.shards.clear()
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close()
        await leases.close()

    # What the gateway asks -------------------------------------------------------------------

    def serves_table(self, table_id: str) -> bool:
        """Whether this worker holds ``table_id``'s lease."""
        return table_id in self.tables

    def serves_shard(self, shard: int) -> bool:
        """Whether this worker holds lobby shard ``shard``."""
        return shard in self.shards

    async def claim(self, table_id: str) -> bool:
        """Take the lease of a table about to be created here (``True``: held, subscribed)."""
        if table_id in self.tables:
            return True
        assert self.leases is not None
        epoch = await self.leases.take("table", table_id)
        if epoch is None:
            return False
        self.tables[table_id] = epoch
        self.gateway.transport.subscribe(table_filter(table_id), qos=0)
        return True

    def lost(self, table_id: str) -> None:
        """An append to ``table_id`` was refused for its lease: stop serving it now."""
        if table_id in self.tables:
            self.tables.pop(table_id)
            task = asyncio.create_task(self._drop([table_id]), name=f"drop-{table_id}")
            self._unloads.add(task)
            task.add_done_callback(self._unloads.discard)

    # Renewing -------------------------------------------------------------------------------

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                await self._renew()
            except Exception:  # the database may be back next time
                _log.exception("renewing the leases failed")

    async def _renew(self) -> None:
        leases = self.leases
        assert leases is not None
        if not await leases.renew("worker", {self.name: self.epoch}):
            epoch = await leases.take("worker", self.name)
            self.epoch = epoch or self.epoch
        held_shards = {str(shard): epoch for shard, epoch in self.shards.items()}
        kept = await leases.renew("shard", held_shards)
        for shard in [shard for shard in self.shards if str(shard) not in kept]:
            self._let_shard_go(shard, "lost")
        held = dict(self.tables)
        kept = await leases.renew("table", held)
        gone = [table_id for table_id in held if table_id not in kept and table_id in self.tables]
        if gone:
            _log.warning("lost the leases of %d table(s); another worker serves them", len(gone))
            for table_id in gone:
                self.tables.pop(table_id, None)
            await self._drop(gone)

    # Balancing ------------------------------------------------------------------------------

    def _notified(self, *args: object) -> None:
        self._wake.set()

    async def _balance_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ttl / 3):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self._balance()
            except Exception:
                _log.exception("taking over shards or tables failed")

    async def _balance(self) -> None:
        async with self._balancing:
            leases = self.leases
            assert leases is not None
            live = max(1, len(await leases.live_workers()))
            share = fair_share(self.shard_count, live)
            if len(self.shards) > share:
                extra = sorted(self.shards)[share:]
                released = {str(shard): self.shards[shard] for shard in extra}
                for shard in extra:
                    self._let_shard_go(shard, "handed over")
                await leases.release("shard", released)
            elif len(self.shards) < share:
                owners = await leases.shard_owners()
                for shard in range(self.shard_count):
                    if len(self.shards) >= share:
                        break
                    if shard in self.shards or shard in owners:
                        continue
                    epoch = await leases.take("shard", str(shard))
                    if epoch is not None:
                        self.shards[shard] = epoch
                        self.gateway.transport.subscribe(lobby_filter(shard), qos=0)
                        self.announce(f"ramino: worker {self.name} serves lobby shard {shard}")
            orphans = await leases.orphans()
            if orphans:
                taken = await leases.adopt_tables(fair_share(orphans, live))
                if taken:
                    await self._adopt(taken)
            if 0 in self.shards:
                count = await leases.open_tables()
                if count != self._published:
                    self._published = count
                    self.gateway.publish_worker_status(count)
            else:
                self._published = None

    def _let_shard_go(self, shard: int, why: str) -> None:
        self.shards.pop(shard, None)
        self.gateway.transport.unsubscribe(lobby_filter(shard))
        self.announce(f"ramino: worker {self.name} {why} lobby shard {shard}")

    async def _adopt(self, taken: dict[str, int]) -> None:
        """Serve the tables ``taken`` (their leases are ours): subscribe to their commands at
        once (a command to a table not loaded yet loads it), then, in the background, load
        them a chunk at a time and republish each (see ``Gateway.adopted``)."""
        self.tables.update(taken)  # the fence first: recovered timers may append at once
        started = time.perf_counter()
        table_ids = list(taken)
        for chunk in chunks(table_ids, SUBSCRIBE_CHUNK):
            self.gateway.transport.subscribe(*map(table_filter, chunk), qos=0)
        self.announce(
            f"ramino: worker {self.name} serves {len(table_ids)} adopted table(s) after "
            f"{time.perf_counter() - started:.2f} s"
        )
        task = asyncio.create_task(self._load(table_ids, started), name=f"adopt-{self.name}")
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _load(self, table_ids: list[str], started: float) -> None:
        """Load adopted tables, starting their timers, and republish them: ``READ_CHUNK``
        tables a query, the next chunk read while the last is built ``LOAD_CHUNK`` at a time
        (a table that fails to load is loaded by its next command)."""
        service = self.service
        cpu = time.process_time()
        batches = list(chunks(table_ids, READ_CHUNK))

        def read(index: int) -> asyncio.Future[TablesRead] | None:
            if index >= len(batches):
                return None
            mine = [table_id for table_id in batches[index] if table_id in self.tables]
            return asyncio.ensure_future(service.read(mine))

        reading = read(0)
        try:
            for index, batch in enumerate(batches):
                assert reading is not None
                try:
                    done = await reading
                except Exception:  # the database may be back for the next chunk
                    _log.exception("reading %d adopted table(s) failed", len(batch))
                    reading = read(index + 1)
                    continue
                reading = read(index + 1)
                try:
                    slice_start = time.perf_counter()
                    for chunk in chunks(batch, LOAD_CHUNK):
                        mine = [table_id for table_id in chunk if table_id in self.tables]
                        for actor in service.adopt_read(done, mine):
                            if actor.table.table_id in self.tables:
                                self.gateway.adopted(actor)
                        if time.perf_counter() - slice_start >= LOAD_SLICE:
                            # Commands and renewals run in between: a renewal takes a few
                            # turns of the loop, and must not wait for many slices.
                            await asyncio.sleep(0)
                            slice_start = time.perf_counter()
                finally:
                    service.release(done)
        finally:
            if reading is not None:
                reading.cancel()
                with contextlib.suppress(BaseException):
                    await reading
        # Counted with those a command loaded first.
        adopted = sum(1 for table_id in table_ids if table_id in service.actors)
        self.adopted += adopted
        self.announce(
            f"ramino: worker {self.name} took over {adopted} table(s) in "
            f"{time.perf_counter() - started:.2f} s ({time.process_time() - cpu:.2f} s of CPU)"
        )

    async def _drop(self, table_ids: list[str]) -> None:
        """Stop serving ``table_ids`` (no longer ours): unsubscribe, stop their actors."""
        for chunk in chunks(table_ids, SUBSCRIBE_CHUNK):
            self.gateway.transport.unsubscribe(*map(table_filter, chunk))
        for table_id in table_ids:
            await self.service.drop(table_id)
            self.gateway.forget(table_id)

    def _unloaded(self, table_id: str) -> None:
        """A finished table left memory: forget it, and delete its lease (nobody adopts it)."""
        self.gateway.unloaded(table_id)
        epoch = self.tables.pop(table_id, None)
        if epoch is None:
            return
        self.gateway.transport.unsubscribe(table_filter(table_id))
        task = asyncio.create_task(self._forget_lease(table_id, epoch))
        self._unloads.add(task)
        task.add_done_callback(self._unloads.discard)

    async def _forget_lease(self, table_id: str, epoch: int) -> None:
        assert self.leases is not None
        try:
            await self.leases.drop("table", pairs({table_id: epoch}, [table_id]))
        except Exception:  # it expires; an adopter loads it and unloads it again
            _log.exception("deleting the lease of a finished table failed")
