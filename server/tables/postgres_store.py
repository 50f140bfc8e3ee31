"""The event store for scale: PostgreSQL through asyncpg, one writer task, group commit.

Theory of operation. Callers queue append and snapshot requests and await a future. One
writer task takes the first request, then whatever else arrives within ``max_delay`` seconds
(up to ``max_batch`` requests), and commits them in one transaction on its own connection:

1. ``BEGIN`` and a transaction-level advisory lock on every table the batch appends to, in
   one round trip (a simple query), in a fixed order (so writers in other processes neither
   pass the check together nor deadlock);
2. read the last ``seq`` of all those tables in one query (a new statement, so under READ
   COMMITTED it sees every transaction that held the lock before us) from ``tables.last_seq``,
   which every append keeps up to date, or with ``max(seq)`` over ``events`` for a table that
   has no summary row; with a fence (below) the same statement reads the lease rows;
3. walk the requests in queue order, in Python (``plan_appends``): a request whose
   ``after_seq`` is not its table's last ``seq`` (counting the requests before it in the
   batch) fails alone with ``SeqConflict``; the others get their seqs;
4. write everything with one statement per kind of row: ``INSERT ... SELECT FROM unnest(...)``
   for the events, the table summaries and the snapshots, one ``UPDATE ... FROM unnest(...)``
   for the summaries that only move on; a batch of moves alone (events and summaries that
   move on) in one statement, the insert as a data-modifying CTE of the update.

A batch of moves is thus four round trips (BEGIN and locks, heads and fences, writes,
COMMIT); it was seven with a fence and six without.

Only after ``COMMIT`` returns are the futures resolved: an acknowledged append is durable.

``tables.last_seq`` can only lag behind ``events`` if something wrote events without going
through this store (a hand-written ``INSERT``). So before a request is refused, or accepted
without any event to insert, its table's last ``seq`` is read again from ``events``; and a
request accepted against a lagging seq inserts a ``seq`` that exists (streams have no gaps),
which the primary key refuses with a unique violation: the writer then redoes the batch
request by request, each in its own savepoint with seqs read from ``events``, so only the
loser fails, with ``SeqConflict``. The same holds for a writer that does not take the locks.

Fencing. With several worker processes sharing the database (``ramino serve --worker``), each
table is served by the worker holding its lease (a row of ``leases``: kind ``table``, the table
id, the owner's name and an ``epoch`` that grows at every change of owner; see
``server.net.leases``). Such a worker sets ``fence``: its name and the epoch of each table
lease it holds. Then, in the same transaction as the seq check, the writer reads the lease rows
of the batch's tables ``FOR SHARE`` and refuses, alone and with ``LeaseLost``, each append whose
table's row does not name this owner at the held epoch. A worker taking a table over changes
that row first (it waits for a writer holding it ``FOR SHARE``, and a writer waits for an
uncommitted takeover), and only then reads the table's log: so either the stale owner's append
committed before the takeover and is in what the new owner reads, or it is refused; a stale
owner can never append, even at a fresh seq.

Reads use the connection pool directly. A batch holds at most ``max_batch`` advisory locks;
PostgreSQL's lock table (``max_locks_per_transaction`` x connections) must have room for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from server.tables.errors import LeaseLost, SeqConflict, StoreClosed
from server.tables.store import (
    BatchPlan,
    NewEvent,
    Snapshot,
    StoredEvent,
    StoreStats,
    TableSummary,
    Tail,
    plan_appends,
    seats_json,
)

__all__ = ["Fence", "PostgresStore"]

SCHEMA_VERSION = 2
MAX_BATCH = 128
"""Requests in one transaction at most, by default: bounds the commit time (under 10 ms at 1,000
busy tables; docs/performance.md) at some cost in peak throughput."""

# First key of the two-key advisory locks this store takes ("Rami", "Ramh"), so that they
# cannot collide with other users of advisory locks in the same database.
_TABLE_LOCKS = 0x52616D69
_SCHEMA_LOCK = 0x52616D68

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    table_id text NOT NULL,
    seq bigint NOT NULL,
    at double precision NOT NULL,
    command_id text NOT NULL DEFAULT '',
    payload bytea NOT NULL,
    PRIMARY KEY (table_id, seq)
);
CREATE INDEX IF NOT EXISTS events_by_command ON events (table_id, command_id)
    WHERE command_id <> '';
CREATE TABLE IF NOT EXISTS snapshots (
    table_id text PRIMARY KEY,
    seq bigint NOT NULL,
    payload bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS tables (
    table_id text PRIMARY KEY,
    variant text NOT NULL,
    status text NOT NULL,
    seats text[] NOT NULL,
    last_seq bigint NOT NULL,
    updated_at double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS refusals (
    table_id text NOT NULL,
    command_id text NOT NULL,
    payload bytea NOT NULL,
    PRIMARY KEY (table_id, command_id)
);
CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    kind text NOT NULL,
    key text NOT NULL,
    owner text NOT NULL,
    epoch bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (kind, key)
);
"""

# Version 2: parked leases and moves looked up by owner, the host of each table and the quota
# claims (the quotas workers share).
_SCHEMA_2 = """
CREATE INDEX IF NOT EXISTS leases_by_owner ON leases (kind, owner);
ALTER TABLE tables ADD COLUMN IF NOT EXISTS host text NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS tables_open_seats ON tables USING gin (seats)
    WHERE status IN ('waiting', 'playing');
CREATE INDEX IF NOT EXISTS tables_waiting_host ON tables (host) WHERE status = 'waiting';
CREATE TABLE IF NOT EXISTS quota_claims (
    account text NOT NULL,
    kind text NOT NULL,
    table_id text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (account, kind, table_id)
);
"""

# The table leases of a batch's tables, held while the batch commits (see "Fencing").
_FENCES = """
SELECT key, owner, epoch FROM leases WHERE kind = 'table' AND key = ANY($1::text[])
ORDER BY key FOR SHARE
"""

_LOCK_TABLES = "SELECT count(pg_advisory_xact_lock($1, key)) FROM unnest($2::int4[]) AS key"

# BEGIN and the locks of a batch's tables in one round trip (a simple query: no parameters,
# so the keys, 32-bit integers this module computes, are written into the text).
_BEGIN_AND_LOCK = (
    "BEGIN; SELECT count(pg_advisory_xact_lock({space}, key)) FROM unnest('{{{keys}}}'::int4[])"
    " AS key"
)

# The seq every append keeps in ``tables``; max(seq) for a table that has no summary row.
_HEADS = """
SELECT u.table_id,
       COALESCE(t.last_seq, (SELECT max(e.seq) FROM events AS e WHERE e.table_id = u.table_id), 0)
FROM unnest($1::text[]) AS u (table_id) LEFT JOIN tables AS t ON t.table_id = u.table_id
"""

# ``_FENCES`` and ``_HEADS`` in one statement (both read after the locks were taken): each
# table's last seq, and the owner and epoch of its lease row (NULL without one), locked FOR SHARE.
_FENCED_HEADS = """
WITH fences AS MATERIALIZED (
    SELECT key, owner, epoch FROM leases WHERE kind = 'table' AND key = ANY($1::text[])
    ORDER BY key FOR SHARE
)
SELECT u.table_id,
       COALESCE(t.last_seq, (SELECT max(e.seq) FROM events AS e WHERE e.table_id = u.table_id), 0),
       f.owner, f.epoch
FROM unnest($1::text[]) AS u (table_id)
LEFT JOIN tables AS t ON t.table_id = u.table_id
LEFT JOIN fences AS f ON f.key = u.table_id
"""

# The truth: the last row of each table in ``events``.
_LAST_SEQS = """
SELECT t.table_id,
       COALESCE((SELECT max(e.seq) FROM events AS e WHERE e.table_id = t.table_id), 0)
FROM unnest($1::text[]) AS t (table_id)
"""

_LAST_SEQ = "SELECT COALESCE(max(seq), 0) FROM events WHERE table_id = $1"

_INSERT_EVENTS = """
INSERT INTO events (table_id, seq, at, command_id, payload)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::float8[], $4::text[], $5::bytea[])
"""

# Seats travel as JSON text because unnest would flatten an array of arrays.
_UPSERT_TABLES = """
INSERT INTO tables (table_id, variant, status, seats, last_seq, updated_at, host)
SELECT s.table_id, s.variant, s.status, ARRAY(SELECT jsonb_array_elements_text(s.seats::jsonb)),
       s.last_seq, s.updated_at, s.host
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::float8[],
            $7::text[])
    AS s (table_id, variant, status, seats, last_seq, updated_at, host)
ON CONFLICT (table_id) DO UPDATE SET
    variant = excluded.variant, status = excluded.status, seats = excluded.seats,
    last_seq = excluded.last_seq, updated_at = excluded.updated_at, host = excluded.host
"""

# ``_INSERT_EVENTS`` and ``_UPDATE_TABLES`` in one statement (a move's usual rows).
_INSERT_EVENTS_AND_UPDATE_TABLES = """
WITH inserted AS (
    INSERT INTO events (table_id, seq, at, command_id, payload)
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::float8[], $4::text[], $5::bytea[])
)
UPDATE tables AS t SET last_seq = u.last_seq, updated_at = u.updated_at
FROM unnest($6::text[], $7::bigint[], $8::float8[]) AS u (table_id, last_seq, updated_at)
WHERE t.table_id = u.table_id
"""

_UPDATE_TABLES = """
UPDATE tables AS t SET last_seq = u.last_seq, updated_at = u.updated_at
FROM unnest($1::text[], $2::bigint[], $3::float8[]) AS u (table_id, last_seq, updated_at)
WHERE t.table_id = u.table_id
"""

_UPSERT_SNAPSHOTS = """
INSERT INTO snapshots (table_id, seq, payload)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[])
ON CONFLICT (table_id) DO UPDATE SET seq = excluded.seq, payload = excluded.payload
"""


# Loading many tables at once (a worker taking them over): one row per table, its snapshot and
# the events from the snapshot's own on as arrays (the pair of queries this replaced, snapshots
# then events by a join on unnest, was 2-5x slower and returned one row per event).
_TAILS = """
SELECT u.table_id, s.seq, s.payload, t.seqs, t.ats, t.payloads
FROM unnest($1::text[]) AS u (table_id)
LEFT JOIN snapshots AS s ON s.table_id = u.table_id
CROSS JOIN LATERAL (
    SELECT array_agg(e.seq ORDER BY e.seq), array_agg(e.at ORDER BY e.seq),
           array_agg(e.payload ORDER BY e.seq)
    FROM events AS e WHERE e.table_id = u.table_id AND e.seq >= COALESCE(s.seq, 0)
) AS t (seqs, ats, payloads)
"""


@functools.lru_cache(maxsize=65536)
def _table_lock_key(table_id: str) -> int:
    """The second advisory-lock key of a table: a stable 32-bit hash of its id."""
    digest = hashlib.blake2b(table_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


@dataclass
class Fence:
    """Who writes (a worker's name) and the epoch of each table lease it holds: an append to
    a table not in ``epochs``, or whose lease row has another owner or epoch, is refused with
    ``LeaseLost``."""

    owner: str
    epochs: dict[str, int]


@dataclass(slots=True)
class _Append:
    table_id: str
    after_seq: int
    events: Sequence[NewEvent]
    command_id: str
    summary: TableSummary | None
    future: asyncio.Future[int]


@dataclass(slots=True)
class _Snapshot:
    table_id: str
    seq: int
    payload: bytes
    future: asyncio.Future[int]


_Request = _Append | _Snapshot
_Outcome = tuple[_Request, BaseException | None, int]


class PostgresStore:
    """An ``EventStore`` in a PostgreSQL database; build it with ``await PostgresStore.open(url)``.

    ``stats`` counts transactions, requests and commit times like ``SqliteStore.stats``.
    """

    def __init__(self, url: str, pool: Any, max_delay: float, max_batch: int) -> None:
        self.url = url
        self.max_delay = max_delay
        self.max_batch = max(1, int(max_batch))
        self.stats = StoreStats()
        self._pool = pool
        self._closed = False
        self._pending: deque[_Request] = deque()
        self._arrived = asyncio.Event()
        self._full = asyncio.Event()
        self._connection: Any = None
        self.fence: Fence | None = None
        """Set by a worker sharing the database with others (see "Fencing")."""
        self._writer = asyncio.create_task(self._write_loop(), name="postgres-writer")
        self._writer.add_done_callback(self._fail_pending)

    @classmethod
    async def open(
        cls, url: str, max_delay: float = 0.0, max_batch: float = MAX_BATCH
    ) -> PostgresStore:
        """Open the store in the database at ``url``, creating its tables if they are missing.

        ``max_delay`` is how long the writer waits for more appends to share a transaction;
        ``max_batch`` caps the requests in one transaction.
        """
        pool = await asyncpg.create_pool(url, min_size=1, max_size=10)
        try:
            async with pool.acquire() as connection, connection.transaction():
                # Concurrent CREATE ... IF NOT EXISTS can still collide: one process at a time.
                await connection.execute("SELECT pg_advisory_xact_lock($1, 0)", _SCHEMA_LOCK)
                # DDL only when the schema is not current: it locks the tables (ALTER TABLE
                # even exclusively), and other processes (workers) may be writing.
                version = None
                if await connection.fetchval("SELECT to_regclass('meta') IS NOT NULL"):
                    version = await connection.fetchval(
                        "SELECT value FROM meta WHERE key = 'schema_version'"
                    )
                if version != str(SCHEMA_VERSION):
                    await connection.execute(_SCHEMA)
                    await connection.execute(_SCHEMA_2)
                    await connection.execute(
                        "INSERT INTO meta (key, value) VALUES ('schema_version', $1)"
                        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        str(SCHEMA_VERSION),
                    )
        except BaseException:
            pool.terminate()
            raise
        return cls(url, pool, max_delay, int(max_batch))

    # Writing ---------------------------------------------------------------------------------

    async def append(
        self,
        table_id: str,
        after_seq: int,
        events: Sequence[NewEvent],
        command_id: str = "",
        summary: TableSummary | None = None,
    ) -> int:
        """See ``EventStore.append``."""
        future = self._future()
        self._submit(_Append(table_id, after_seq, tuple(events), command_id, summary, future))
        return await future

    async def save_snapshot(self, table_id: str, seq: int, payload: bytes) -> None:
        """See ``EventStore.save_snapshot``."""
        future = self._future()
        self._submit(_Snapshot(table_id, seq, payload, future))
        await future

    def _future(self) -> asyncio.Future[int]:
        if self._closed:
            raise StoreClosed("the event store is closed")
        return asyncio.get_running_loop().create_future()

    def _submit(self, request: _Request) -> None:
        self._pending.append(request)
        self._arrived.set()
        if len(self._pending) >= self.max_batch:
            self._full.set()

    async def _write_loop(self) -> None:
        while True:
            while not self._pending:
                if self._closed:
                    return
                self._arrived.clear()
                await self._arrived.wait()
            if len(self._pending) < self.max_batch and not self._closed:
                self._full.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.max_delay):
                        await self._full.wait()
            size = min(len(self._pending), self.max_batch)
            batch = [self._pending.popleft() for _ in range(size)]
            await self._commit(batch)

    def _fail_pending(self, writer: asyncio.Task[None]) -> None:
        """If the writer ever stops, nobody may be left waiting for it."""
        error = StoreClosed("the event store's writer stopped")
        while self._pending:
            _settle(self._pending.popleft().future, error, 0)

    async def _commit(self, batch: list[_Request]) -> None:
        started = time.perf_counter()
        try:
            outcomes = await self._write(batch)
        except asyncio.CancelledError:
            for request in batch:
                request.future.cancel()
            raise
        except Exception as error:  # the whole transaction failed: nothing was written
            for request in batch:
                _settle(request.future, error, 0)
            return
        self.stats.committed(time.perf_counter() - started, len(batch))
        for request, outcome, value in outcomes:
            _settle(request.future, outcome, value)

    async def _write(self, batch: list[_Request]) -> list[_Outcome]:
        """Commit ``batch`` in one transaction; return each request's outcome."""
        if self._connection is None or self._connection.is_closed():
            self._connection = await asyncpg.connect(self.url)
        connection = self._connection
        try:
            try:
                return await _in_one_transaction(connection, batch, self.fence)
            except asyncpg.UniqueViolationError:
                async with connection.transaction():
                    await _lock_tables(connection, batch)
                    return await _apply_one_by_one(connection, batch, self.fence)
        except asyncpg.PostgresError:
            raise  # the server rolled the transaction back; the connection is fine
        except BaseException:
            # A broken or interrupted connection: start the next batch on a fresh one.
            self._connection = None
            connection.terminate()
            raise

    # Reading ---------------------------------------------------------------------------------

    def _readable_pool(self) -> Any:
        if self._closed:
            raise StoreClosed("the event store is closed")
        return self._pool

    async def read(self, table_id: str, after_seq: int = 0) -> list[StoredEvent]:
        """See ``EventStore.read``."""
        rows = await self._readable_pool().fetch(
            "SELECT seq, at, command_id, payload FROM events"
            " WHERE table_id = $1 AND seq > $2 ORDER BY seq",
            table_id,
            after_seq,
        )
        return [
            StoredEvent(table_id, int(seq), float(at), str(command_id), bytes(payload))
            for seq, at, command_id, payload in rows
        ]

    async def last_seq(self, table_id: str) -> int:
        """See ``EventStore.last_seq``."""
        return int(await self._readable_pool().fetchval(_LAST_SEQ, table_id))

    async def command_seqs(self, table_id: str, command_id: str) -> tuple[int, int] | None:
        """See ``EventStore.command_seqs``."""
        if not command_id:
            return None
        # The repeated ``command_id <> ''`` lets a generic plan use the partial index.
        row = await self._readable_pool().fetchrow(
            "SELECT min(seq), max(seq) FROM events"
            " WHERE table_id = $1 AND command_id = $2 AND command_id <> ''",
            table_id,
            command_id,
        )
        return None if row[0] is None else (int(row[0]), int(row[1]))

    async def save_refusal(self, table_id: str, command_id: str, payload: bytes) -> None:
        """See ``EventStore.save_refusal``: one autocommitted insert (a refusal changes no
        table, so it need not share the appends' transactions)."""
        await self._readable_pool().execute(
            "INSERT INTO refusals (table_id, command_id, payload) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING",
            table_id,
            command_id,
            payload,
        )

    async def refusal(self, table_id: str, command_id: str) -> bytes | None:
        """See ``EventStore.refusal``."""
        row = await self._readable_pool().fetchrow(
            "SELECT payload FROM refusals WHERE table_id = $1 AND command_id = $2",
            table_id,
            command_id,
        )
        return None if row is None else bytes(row[0])

    async def latest_snapshot(self, table_id: str) -> Snapshot | None:
        """See ``EventStore.latest_snapshot``."""
        row = await self._readable_pool().fetchrow(
            "SELECT seq, payload FROM snapshots WHERE table_id = $1", table_id
        )
        return None if row is None else Snapshot(table_id, int(row[0]), bytes(row[1]))

    async def read_tails(self, table_ids: Sequence[str]) -> dict[str, Tail]:
        """What loads each of ``table_ids``: its latest snapshot and the events from the
        snapshot's own on (all of them without one), in one query whose rows are one table
        each (the events as arrays). A table with no events is missing."""
        rows = await self._readable_pool().fetch(_TAILS, list(table_ids))
        return {
            str(table_id): Tail(
                None if snapshot_seq is None else Snapshot(str(table_id), snapshot_seq, payload),
                seqs,
                ats,
                payloads,
            )
            for table_id, snapshot_seq, payload, seqs, ats, payloads in rows
            if seqs is not None
        }

    async def tables(self) -> list[TableSummary]:
        """See ``EventStore.tables``."""
        rows = await self._readable_pool().fetch(
            "SELECT table_id, variant, status, seats, last_seq, updated_at FROM tables"
            " ORDER BY updated_at DESC, table_id"
        )
        return [
            TableSummary(
                str(table_id),
                str(variant),
                str(status),
                tuple(str(seat) for seat in seats),
                int(last_seq),
                float(updated_at),
            )
            for table_id, variant, status, seats, last_seq, updated_at in rows
        ]

    async def close(self) -> None:
        """See ``EventStore.close``: pending appends are committed first."""
        if self._closed:
            return
        self._closed = True
        self._arrived.set()
        self._full.set()
        try:
            await self._writer
        finally:
            if self._connection is not None:
                connection, self._connection = self._connection, None
                await connection.close()
            await self._pool.close()


async def _in_one_transaction(
    connection: Any, batch: Sequence[_Request], fence: Fence | None
) -> list[_Outcome]:
    """``_apply`` of ``batch`` in a transaction of its own, its tables locked: BEGIN and the
    locks go in one round trip (asyncpg's ``transaction()`` sends BEGIN alone). A database
    error rolls the transaction back (and is raised); any other error leaves the connection
    to the caller, which drops it."""
    keys = ",".join(map(str, _lock_keys(batch)))
    await connection.execute(_BEGIN_AND_LOCK.format(space=_TABLE_LOCKS, keys=keys))
    try:
        outcomes = await _apply(connection, batch, fence=fence)
    except asyncpg.PostgresError:
        await connection.execute("ROLLBACK")
        raise
    await connection.execute("COMMIT")
    return outcomes


def _lock_keys(batch: Sequence[_Request]) -> list[int]:
    """The advisory-lock keys of the tables ``batch`` appends to, ascending."""
    return sorted({_table_lock_key(r.table_id) for r in batch if type(r) is _Append})


async def _lock_tables(connection: Any, batch: Sequence[_Request]) -> None:
    """Take the advisory lock of every table ``batch`` appends to, in ascending key order."""
    keys = _lock_keys(batch)
    if keys:
        await connection.execute(_LOCK_TABLES, _TABLE_LOCKS, keys)


async def _apply(
    connection: Any,
    batch: Sequence[_Request],
    from_events: bool = False,
    fence: Fence | None = None,
) -> list[_Outcome]:
    """Check and write ``batch`` with one statement per kind of row; the caller holds the
    locks. The tables' last seqs come from ``tables.last_seq``, or with ``from_events`` from
    ``events`` alone. With a ``fence``, appends to tables whose lease it does not hold are
    refused with ``LeaseLost``."""
    appends = [request for request in batch if type(request) is _Append]
    lost: dict[str, LeaseLost] = {}
    heads: dict[str, int] = {}
    if appends:
        table_ids = sorted({request.table_id for request in appends})
        if fence is not None and not from_events:  # the fence and the heads in one round trip
            rows = await connection.fetch(_FENCED_HEADS, table_ids)
            heads = {str(table_id): int(head) for table_id, head, _, _ in rows}
            leases = {str(key): (str(owner), int(epoch)) for key, _, owner, epoch in rows if owner}
            lost = _fence_lost(fence, table_ids, leases)
        else:
            if fence is not None:
                lost = await _check_fence(connection, fence, table_ids)
            heads = dict(await connection.fetch(_LAST_SEQS if from_events else _HEADS, table_ids))
        if lost:
            appends = [request for request in appends if request.table_id not in lost]
    plan = plan_appends(appends, dict(heads))
    if not from_events:
        # Before refusing a request, or accepting one that inserts nothing (so the primary key
        # cannot object), make sure its table's seq did not come from a lagging summary row.
        doubtful = sorted(
            {
                request.table_id
                for request, outcome in zip(appends, plan.outcomes)
                if isinstance(outcome, SeqConflict) or not request.events
            }
        )
        if doubtful:
            truth = dict(await connection.fetch(_LAST_SEQS, doubtful))
            if any(truth[table_id] != heads[table_id] for table_id in doubtful):
                heads.update(truth)
                plan = plan_appends(appends, dict(heads))
    await _write_plan(connection, plan)
    snapshots = {
        request.table_id: (request.seq, request.payload)
        for request in batch
        if type(request) is _Snapshot
    }
    if snapshots:
        await connection.execute(
            _UPSERT_SNAPSHOTS,
            list(snapshots),
            [seq for seq, _ in snapshots.values()],
            [payload for _, payload in snapshots.values()],
        )
    outcomes: list[_Outcome] = []
    planned = iter(plan.outcomes)
    for request in batch:
        if isinstance(request, _Append):
            refused = lost.get(request.table_id)
            if refused is not None:
                outcomes.append((request, refused, 0))
                continue
            outcome = next(planned)
            if isinstance(outcome, SeqConflict):
                outcomes.append((request, outcome, 0))
            else:
                outcomes.append((request, None, outcome))
        else:
            outcomes.append((request, None, request.seq))
    return outcomes


async def _check_fence(
    connection: Any, fence: Fence, table_ids: Sequence[str]
) -> dict[str, LeaseLost]:
    """Of ``table_ids``, those whose lease ``fence`` does not hold (row locked ``FOR SHARE``
    until the transaction ends), each with the error that refuses its appends."""
    rows = {
        str(key): (str(owner), int(epoch))
        for key, owner, epoch in await connection.fetch(_FENCES, table_ids)
    }
    return _fence_lost(fence, table_ids, rows)


def _fence_lost(
    fence: Fence, table_ids: Sequence[str], rows: dict[str, tuple[str, int]]
) -> dict[str, LeaseLost]:
    """Of ``table_ids``, those whose lease row (``rows``: table -> owner, epoch) does not
    name ``fence``'s owner at the epoch it holds, each with its ``LeaseLost``."""
    lost: dict[str, LeaseLost] = {}
    for table_id in table_ids:
        held = fence.epochs.get(table_id)
        row = rows.get(table_id)
        if held is None or row != (fence.owner, held):
            holder = f"{row[0]} (epoch {row[1]})" if row is not None else "nobody"
            lost[table_id] = LeaseLost(
                f"table {table_id!r}: {fence.owner} (epoch {held}) no longer holds its lease;"
                f" held by {holder}",
                table_id,
            )
    return lost


async def _write_plan(connection: Any, plan: BatchPlan) -> None:
    """Write the rows of ``plan``, one statement per kind of row."""
    events = [list(column) for column in zip(*plan.events)]
    summaries = plan.summaries
    touched = plan.touched
    moved = [
        list(touched),
        [last for last, _ in touched.values()],
        [at for _, at in touched.values()],
    ]
    if events and touched and not summaries:
        await connection.execute(_INSERT_EVENTS_AND_UPDATE_TABLES, *events, *moved)
        return
    if events:
        await connection.execute(_INSERT_EVENTS, *events)
    if summaries:
        await connection.execute(
            _UPSERT_TABLES,
            list(summaries),
            [summary.variant for summary, _, _ in summaries.values()],
            [summary.status for summary, _, _ in summaries.values()],
            [seats_json(summary.seats) for summary, _, _ in summaries.values()],
            [last for _, last, _ in summaries.values()],
            [at for _, _, at in summaries.values()],
            [summary.host for summary, _, _ in summaries.values()],
        )
    if touched:
        await connection.execute(_UPDATE_TABLES, *moved)


async def _apply_one_by_one(
    connection: Any, batch: Sequence[_Request], fence: Fence | None = None
) -> list[_Outcome]:
    """The slow path after a unique violation: each request in its own savepoint, checked
    against the seqs in ``events``."""
    outcomes: list[_Outcome] = []
    for request in batch:
        try:
            async with connection.transaction():
                outcomes.extend(await _apply(connection, [request], from_events=True, fence=fence))
        except asyncpg.UniqueViolationError as error:
            current = int(await connection.fetchval(_LAST_SEQ, request.table_id))
            conflict = SeqConflict(
                f"table {request.table_id!r}: that seq is already taken ({error})", current
            )
            outcomes.append((request, conflict, 0))
    return outcomes


def _settle(future: asyncio.Future[int], error: BaseException | None, value: int) -> None:
    if future.done():  # the caller gave up waiting
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
