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

Rebalancing (a worker joins or comes back). A worker below ``tables // live`` while another
is above ``ceil(tables / live)`` asks it for some of its tables (``_ask``, at most
``MOVE_CHUNK`` a pass), make before break: it subscribes to their command topics first and
keeps what arrives for them (``keep``), then writes its request (``Leases.request_moves``) and
sends a ``NOTIFY``. The holder (``_give``) gives what it holds above its fair share, tables
with no command under way first: it stops serving them (their commands are the asker's now),
waits for the requests under way there, stops their actors, and hands the leases over
(``Leases.give``: the asker's name, the next epoch) and notifies. The asker (``_receive``) runs
the kept commands in order (those already carried out are answered from the log) and loads
the tables. No command is dropped in between, so nobody waits for a resend.

Lock order. Every statement changing several lease rows locks them in key order, as the
store's appends read them ``FOR SHARE``: a renewal and an append cannot deadlock.

Finished tables out of memory. One server reads every table topic and loads a finished table
back on its next command. A worker instead **parks** a finished table that leaves memory
(``--finished-ttl``): its lease becomes a ``parked`` row of this worker (``Leases.park``) and
its command topic stays subscribed, with no actor. A command there wakes it (``wake``: the
parked row becomes a table lease again, then the command loads the table as usual), so a late
``rematch``, ``join`` or ``resync`` is answered as by one server. The balancer takes the
parked tables of workers whose membership expired (``Leases.adopt_parked``) and subscribes to
them; a worker started under a name takes that name's parked tables back. A parked table is a
subscription and a row, no task and no memory beyond its id.
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
from server.net.leases import CHANNEL, Leases, chunks, fair_share
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
MOVE_CHUNK = 10
"""Tables a worker below its fair share asks for in one balancer pass at most."""
MOVE_SECONDS = 10.0
"""Longest a worker keeps the commands of tables it asked for before giving up on them."""
FORGET_EVERY = 60.0
"""Seconds between two deletions of departed workers' membership rows
(:meth:`~server.net.leases.Leases.forget_departed`)."""
PARKED_CHUNK = 5000
"""Parked tables of stopped workers taken in one balancer pass at most."""
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
        self._forgotten_at = 0.0
        """When this worker last deleted departed workers' rows (``time.monotonic``)."""
        self._unloads: set[asyncio.Task[None]] = set()
        self._loads: set[asyncio.Task[None]] = set()
        """Adopted tables being loaded in the background."""
        self.adopted = 0
        """Tables adopted so far (taken over from a worker that died or stopped)."""
        self.parked: set[str] = set()
        """Finished tables out of memory whose parked lease this worker holds: it reads
        their command topics, and a command there wakes them (``wake``)."""
        self.incoming: dict[str, float] = {}
        """Tables this worker asked for (subscribed, not yet handed over) -> when it gives up
        waiting (``time.monotonic``)."""
        self._kept: dict[str, list[tuple[str, bytes]]] = {}
        """The commands that arrived for the ``incoming`` tables, in order."""
        self._moving: set[str] = set()
        """Tables this worker is handing over: their commands are left to the asker."""
        self.moved_in = 0
        self.moved_out = 0
        """Tables handed over to this worker, and by it, when another joined."""
        self._parking: dict[str, asyncio.Task[None]] = {}
        self._waking: dict[str, asyncio.Future[bool]] = {}

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
        # Parked tables left by an earlier run under this name (the others take them only
        # once its membership expired, and it is current again).
        await self._watch_parked(await leases.parked())
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
            await leases.withdraw(list(self.incoming))
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
        """Whether this worker holds ``table_id``'s lease (and is not handing it over)."""
        return table_id in self.tables and table_id not in self._moving

    def keep(self, table_id: str, topic: str, payload: bytes) -> None:
        """A command for a table this worker does not serve: kept if the table is on its way
        here (run once it arrives), else dropped (another worker answers it)."""
        kept = self._kept.get(table_id)
        if kept is not None:
            kept.append((topic, payload))

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

    async def claim_places(
        self, table_id: str, wanted: list[tuple[str, str, int]]
    ) -> tuple[str, str] | None:
        """See ``Leases.claim_places``: quotas counted over the tables of every worker."""
        assert self.leases is not None
        return await self.leases.claim_places(table_id, wanted)

    async def release_places(self, table_id: str, claimed: list[tuple[str, str]]) -> None:
        """See ``Leases.release_places``."""
        assert self.leases is not None
        await self.leases.release_places(table_id, claimed)

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
            # Its membership had expired: the others may have taken its parked tables.
            mine = await leases.parked()
            self._unpark([table_id for table_id in self.parked if table_id not in mine])
            await self._watch_parked(mine)
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
            parked = await leases.adopt_parked(PARKED_CHUNK)
            if parked:
                await self._watch_parked(parked)
                self.announce(
                    f"ramino: worker {self.name} watches {len(parked)} finished table(s) of "
                    "stopped workers"
                )
            if not orphans:  # failover first
                await self._give(leases, live)
                await self._receive(leases)
                await self._ask(leases, live)
            if 0 in self.shards:  # one worker keeps the books
                if time.monotonic() - self._forgotten_at > FORGET_EVERY:
                    self._forgotten_at = time.monotonic()
                    gone = await leases.forget_departed()
                    if gone:
                        _log.info("forgot %d departed worker(s): %s", len(gone), sorted(gone))
                count = await leases.open_tables()
                if count != self._published:
                    self._published = count
                    self.gateway.publish_worker_status(count)
            else:
                self._published = None

    # Rebalancing: make before break --------------------------------------------------------

    async def _ask(self, leases: Leases, live: int) -> None:
        """Below the fair share of tables while a worker is above it (one joined): subscribe to
        some of its tables, keep their commands, and ask for them (``Leases.request_moves``)."""
        if self.incoming:
            return  # one request at a time
        counts = await leases.table_counts()
        total = sum(counts.values())
        want = total // live - counts.get(self.name, 0)
        most = max(counts.items(), key=lambda item: item[1], default=("", 0))
        if want <= 0 or most[0] == self.name or most[1] <= fair_share(total, live):
            return
        picked = await leases.ask(most[0], min(want, MOVE_CHUNK, most[1] - fair_share(total, live)))
        if not picked:
            return
        # Subscribed before asking: the broker has the subscription before the other worker
        # reads the request (two round trips to the database later) and stops serving them.
        deadline = time.monotonic() + MOVE_SECONDS
        for table_id in picked:
            self.incoming[table_id] = deadline
            self._kept[table_id] = []
        self.gateway.transport.subscribe(*map(table_filter, picked), qos=0)
        asked = await leases.request_moves(picked, MOVE_SECONDS)
        self._give_up([table_id for table_id in picked if table_id not in asked])
        if asked:
            await leases.notify()

    async def _give(self, leases: Leases, live: int) -> None:
        """Hand over the tables other workers asked for, down to this worker's fair share,
        those between two commands first: stop reading them (the asker has their commands),
        let the commands under way finish, then give the leases to the asker."""
        asked = {t: asker for t, asker in (await leases.asked()).items() if t in self.tables}
        if not asked:
            return
        counts = await leases.table_counts()
        spare = len(self.tables) - fair_share(sum(counts.values()), live)
        actors = self.service.actors

        def busy(table_id: str) -> bool:
            actor = actors.get(table_id)
            running = actor is not None and not actor.quiet
            return running or self.gateway.running_at(table_id)

        given = sorted(asked, key=busy)[: max(0, spare)]
        refused = [table_id for table_id in asked if table_id not in given]
        if refused:
            await leases.refuse(refused)
        if not given:
            return
        self._moving.update(given)
        handed: set[str] = set()
        try:
            for table_id in given:
                await self.gateway.finish(table_id)  # answered here, as on a SIGTERM
                await self.service.drop(table_id)
            by_asker: dict[str, dict[str, int]] = {}
            for table_id in given:
                by_asker.setdefault(asked[table_id], {})[table_id] = self.tables[table_id]
            for asker, held in by_asker.items():
                handed |= await leases.give(held, asker)
        except Exception:  # the database may be back next pass; these stay here
            _log.exception("handing %d table(s) over failed", len(given))
        finally:
            self._moving.difference_update(given)
        kept = [table_id for table_id in given if table_id not in handed]
        if kept:  # withdrawn meanwhile: served here again, timers included
            for actor in await self.service.adopt(kept):
                self.gateway.adopted(actor, handed=True)
        given = [table_id for table_id in given if table_id in handed]
        if not given:
            return
        for table_id in given:
            self.tables.pop(table_id, None)
            self.gateway.forget(table_id)
        for chunk in chunks(given, SUBSCRIBE_CHUNK):
            self.gateway.transport.unsubscribe(*map(table_filter, chunk))
        self.moved_out += len(given)
        self.announce(f"ramino: worker {self.name} handed over {len(given)} table(s)")
        await leases.notify()

    async def _receive(self, leases: Leases) -> None:
        """Serve the tables asked for whose leases were handed over: run the commands kept
        for them, in order, and load them (timers start); give up on those not handed over
        in time."""
        if not self.incoming:
            return
        held = await leases.held_among(list(self.incoming))
        now = time.monotonic()
        late = [t for t, deadline in self.incoming.items() if t not in held and deadline < now]
        if late:
            withdrawn = await leases.withdraw(late)
            # Those not withdrawn were handed over (or refused) in between.
            held.update(await leases.held_among([t for t in late if t not in withdrawn]))
            self._give_up([t for t in late if t not in held])
        if not held:
            return
        self.tables.update(held)
        for table_id in held:
            self.incoming.pop(table_id, None)
            for topic, payload in self._kept.pop(table_id, []):
                self.gateway.admit(topic, payload)
        for actor in await self.service.adopt(list(held)):
            if actor.table.table_id in self.tables:
                self.gateway.adopted(actor, handed=True)
        self.moved_in += len(held)
        self.announce(f"ramino: worker {self.name} took {len(held)} handed-over table(s)")

    def _give_up(self, table_ids: list[str]) -> None:
        """Stop waiting for the tables ``table_ids`` asked for."""
        for table_id in table_ids:
            self.incoming.pop(table_id, None)
            self._kept.pop(table_id, None)
        gone = [t for t in table_ids if t not in self.tables and t not in self.parked]
        for chunk in chunks(gone, SUBSCRIBE_CHUNK):
            self.gateway.transport.unsubscribe(*map(table_filter, chunk))

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
        """A finished table left memory: forget it, and park its lease (the command topic
        stays subscribed: a command there wakes it, see ``wake``)."""
        self.gateway.unloaded(table_id)
        epoch = self.tables.pop(table_id, None)
        if epoch is None:
            return
        self.parked.add(table_id)
        task = asyncio.create_task(self._park(table_id, epoch), name=f"park-{table_id}")
        self._parking[table_id] = task
        self._unloads.add(task)
        task.add_done_callback(self._unloads.discard)

    async def _park(self, table_id: str, epoch: int) -> None:
        assert self.leases is not None
        try:
            kept = await self.leases.park({table_id: epoch})
        except Exception:  # it expires; an adopter loads it, unloads it and parks it
            _log.exception("parking the lease of a finished table failed")
            kept = set()
        finally:
            self._parking.pop(table_id, None)
        if table_id not in kept:
            self._unpark([table_id])

    def _unpark(self, table_ids: list[str]) -> None:
        """No longer watch the parked tables ``table_ids`` (another worker has them)."""
        gone = [table_id for table_id in table_ids if table_id in self.parked]
        for table_id in gone:
            self.parked.discard(table_id)
        for chunk in chunks([t for t in gone if t not in self.tables], SUBSCRIBE_CHUNK):
            self.gateway.transport.unsubscribe(*map(table_filter, chunk))

    def watches(self, table_id: str) -> bool:
        """Whether ``table_id`` is a parked table of this worker (a command wakes it)."""
        return table_id in self.parked

    async def wake(self, table_id: str) -> bool:
        """Serve ``table_id`` if this worker holds its lease or has it parked (taking the lease
        again: the command then loads the table); ``False`` when another worker serves it."""
        if table_id in self.tables:
            return table_id not in self._moving
        if table_id not in self.parked:
            return False
        waking = self._waking.get(table_id)
        if waking is None:
            waking = asyncio.ensure_future(self._wake_table(table_id))
            self._waking[table_id] = waking
            waking.add_done_callback(lambda _: self._waking.pop(table_id, None))
        return await asyncio.shield(waking)

    async def _wake_table(self, table_id: str) -> bool:
        parking = self._parking.get(table_id)
        if parking is not None:  # unloaded a moment ago: parked first, then woken
            await asyncio.wait({parking})
        if table_id not in self.parked:
            return table_id in self.tables
        assert self.leases is not None
        epoch = await self.leases.wake(table_id)
        if epoch is None:
            self._unpark([table_id])
            return False
        self.parked.discard(table_id)
        self.tables[table_id] = epoch
        return True

    async def _watch_parked(self, table_ids: set[str]) -> None:
        """Subscribe to the command topics of the parked tables ``table_ids`` (ours now)."""
        fresh = sorted(table_ids - self.parked - set(self.tables))
        self.parked.update(fresh)
        for chunk in chunks(fresh, SUBSCRIBE_CHUNK):
            self.gateway.transport.subscribe(*map(table_filter, chunk), qos=0)
