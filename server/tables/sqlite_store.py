"""The default event store: one SQLite file, WAL, ``synchronous=FULL``, group commit.

Theory of operation. One writer thread owns the only writing connection. Callers put append
requests on a queue (what one pass of an event loop submits goes in one put) and await a
future. The writer takes the first request, then whatever else
is queued (and, with ``max_delay`` > 0, whatever arrives within that many seconds), up to
``max_batch`` requests, and commits them in one ``BEGIN IMMEDIATE`` transaction. Requests that
arrive while a commit is syncing wait for the next one, so under load transactions grow by
themselves while a lone append is not delayed.

Inside the transaction the writer first learns the last ``seq`` of every table the batch
appends to, then checks the appends in queue order in Python (``plan_appends``): an append
whose ``after_seq`` is not its table's last ``seq`` (counting the appends before it in the
batch) fails alone with ``SeqConflict``, the others get their seqs, and everything is written
with one ``executemany`` per kind of row. The last seqs come from a cache the writer keeps of
what it committed; ``PRAGMA data_version`` tells whether another connection (another process)
has committed since, and then the cache is dropped and the seqs are read again. Tables not in
the cache are read with ``max(seq)``. Should a row still break a key (a writer that skips these
checks), the transaction is redone request by request, each in its own savepoint, so only the
offending request fails.

Only after ``COMMIT`` returns, with the WAL synced, are the callers answered, with one
``call_soon_threadsafe`` per batch (and event loop): an acknowledged append survives
``kill -9``.

The writer checkpoints the WAL itself, after answering a batch, instead of letting SQLite do
it inside the ``COMMIT`` that crosses ``wal_autocheckpoint`` pages: that commit's callers would
wait for the checkpoint's copy and its sync of the database file, several times a lone commit
(docs/performance.md). It runs a ``PASSIVE`` checkpoint every so many commits, as many as
write about ``CHECKPOINT_FRAMES`` WAL frames at the rate the last checkpoint saw, so the WAL
stays as small as SQLite's default would keep it. Requests that arrive meanwhile wait for the
next commit, as they would behind a slow commit.

Reads go to a second connection on a reader thread; WAL lets them run while the writer works.
Several processes may share the file: ``BEGIN IMMEDIATE`` serialises their writers and the
``seq`` check inside the transaction reads the committed truth, so they cannot both append
the same ``seq``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from server.tables.errors import SeqConflict, StoreClosed
from server.tables.store import (
    BatchPlan,
    NewEvent,
    Snapshot,
    StoredEvent,
    StoreStats,
    TableSummary,
    plan_appends,
    seats_json,
)

__all__ = ["SqliteStore"]

T = TypeVar("T")

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    table_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at REAL NOT NULL,
    command_id TEXT NOT NULL DEFAULT '',
    payload BLOB NOT NULL,
    PRIMARY KEY (table_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_by_command ON events (table_id, command_id)
    WHERE command_id <> '';
CREATE TABLE IF NOT EXISTS snapshots (
    table_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    payload BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tables (
    table_id TEXT PRIMARY KEY,
    variant TEXT NOT NULL,
    status TEXT NOT NULL,
    seats TEXT NOT NULL,
    last_seq INTEGER NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS refusals (
    table_id TEXT NOT NULL,
    command_id TEXT NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (table_id, command_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
"""


def _connect(path: str, cache_kib: int) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("PRAGMA busy_timeout=30000")
    connection.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
    return connection


MAX_BATCH = 64
"""Requests in one transaction at most, by default. A commit costs about the flush plus a page
write per table it touches, so the cap bounds the commit time (under 10 ms at 1,000 busy tables;
docs/performance.md) for a few per cent of peak throughput."""
CACHE_KIB = 65_536
"""Page cache of each connection (KiB). SQLite's default of 2 MiB holds the tail pages of a
few hundred tables only: past that every append reads its pages back from the file."""

CHECKPOINT_FRAMES = 1000
"""WAL frames (pages) between checkpoints, about: SQLite's own ``wal_autocheckpoint`` default."""

_HEADS_CACHED = 100_000
"""The most tables whose last seq the writer remembers (beyond that it starts over)."""

_INSERT_EVENTS = (
    "INSERT INTO events (table_id, seq, at, command_id, payload) VALUES (?, ?, ?, ?, ?)"
)
_REPLACE_TABLES = (
    "INSERT OR REPLACE INTO tables (table_id, variant, status, seats, last_seq, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
_UPDATE_TABLES = "UPDATE tables SET last_seq = ?, updated_at = ? WHERE table_id = ?"
_REPLACE_SNAPSHOTS = "INSERT OR REPLACE INTO snapshots (table_id, seq, payload) VALUES (?, ?, ?)"
_INSERT_REFUSALS = "INSERT OR IGNORE INTO refusals (table_id, command_id, payload) VALUES (?, ?, ?)"
_LAST_SEQ = "SELECT MAX(seq) FROM events WHERE table_id = ?"


@dataclass(slots=True)
class _Append:
    table_id: str
    after_seq: int
    events: Sequence[NewEvent]
    command_id: str
    summary: TableSummary | None
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[int]


@dataclass(slots=True)
class _Snapshot:
    table_id: str
    seq: int
    payload: bytes
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[int]


@dataclass(slots=True)
class _Refusal:
    table_id: str
    command_id: str
    payload: bytes
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[int]


_Request = _Append | _Snapshot | _Refusal
_Answer = tuple[asyncio.Future[int], BaseException | None, int]


class SqliteStore:
    """An ``EventStore`` in one SQLite file. Build it with ``await SqliteStore.open(path)``."""

    def __init__(
        self, path: str, max_delay: float, max_batch: int, cache_kib: int = CACHE_KIB
    ) -> None:
        self.path = path
        self.max_delay = max_delay
        self.max_batch = int(max_batch)
        self.stats = StoreStats()
        self._requests: queue.SimpleQueue[list[_Request] | None] = queue.SimpleQueue()
        # Requests of the current pass of each event loop, handed over at its end in one put.
        self._outgoing: dict[asyncio.AbstractEventLoop, list[_Request]] = {}
        self._closed = False
        # The writer's cache of last seqs, trusted while PRAGMA data_version stays this value.
        self._heads: dict[str, int] = {}
        self._data_version: int | None = None
        self._writer_connection = _connect(path, cache_kib)
        self._writer_connection.execute("PRAGMA wal_autocheckpoint=0")  # the writer does it
        self._commits_to_checkpoint = 16  # until the first checkpoint tells the rate
        self._commits_since_checkpoint = 0
        self._writer_connection.executescript(_SCHEMA)
        self._writer_connection.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        self._reader_connection = _connect(path, cache_kib)
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-reader")
        self._writer = threading.Thread(target=self._write_loop, name="sqlite-writer", daemon=True)
        self._writer.start()

    @classmethod
    async def open(
        cls,
        path: str,
        max_delay: float = 0.0,
        max_batch: float = MAX_BATCH,
        cache_kib: float = CACHE_KIB,
    ) -> SqliteStore:
        """Open (creating if needed) the store in file ``path``.

        ``max_delay`` is how long the writer waits for more appends to share a transaction;
        ``max_batch`` caps the requests in one transaction; ``cache_kib`` is the page cache of
        each of its two connections.
        """
        return await asyncio.to_thread(cls, path, max_delay, int(max_batch), int(cache_kib))

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
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self._submit(_Append(table_id, after_seq, events, command_id, summary, loop, future))
        return await future

    async def save_snapshot(self, table_id: str, seq: int, payload: bytes) -> None:
        """See ``EventStore.save_snapshot``."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._submit(_Snapshot(table_id, seq, payload, loop, future))
        await future

    async def save_refusal(self, table_id: str, command_id: str, payload: bytes) -> None:
        """See ``EventStore.save_refusal``."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._submit(_Refusal(table_id, command_id, payload, loop, future))
        await future

    async def refusal(self, table_id: str, command_id: str) -> bytes | None:
        """See ``EventStore.refusal``."""

        def query(connection: sqlite3.Connection) -> bytes | None:
            row = connection.execute(
                "SELECT payload FROM refusals WHERE table_id = ? AND command_id = ?",
                (table_id, command_id),
            ).fetchone()
            return None if row is None else bytes(row[0])

        return await self._read(query)

    def _submit(self, request: _Request) -> None:
        if self._closed:
            raise StoreClosed("the event store is closed")
        pending = self._outgoing.get(request.loop)
        if pending is None:
            # One wake-up of the writer per pass of the loop, not one per request.
            self._outgoing[request.loop] = [request]
            request.loop.call_soon(self._hand_over, request.loop)
        else:
            pending.append(request)

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        pending = self._outgoing.pop(loop, None)
        if pending:
            self._requests.put(pending)

    def _write_loop(self) -> None:
        connection = self._writer_connection
        carried: list[_Request] = []  # queued before anything still in the queue
        stop = False
        while True:
            if not carried:
                if stop:
                    return
                first = self._requests.get()
                if first is None:  # close() asks the writer to stop
                    return
                carried = first
            batch, carried = carried[: self.max_batch], carried[self.max_batch :]
            deadline = time.monotonic() + self.max_delay
            while len(batch) < self.max_batch and not stop:
                remaining = deadline - time.monotonic()
                try:
                    more = (
                        self._requests.get(timeout=remaining)
                        if remaining > 0
                        else self._requests.get_nowait()
                    )
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                room = self.max_batch - len(batch)
                batch.extend(more[:room])
                carried.extend(more[room:])
            self._commit(connection, batch)

    def _commit(self, connection: sqlite3.Connection, batch: list[_Request]) -> None:
        started = time.perf_counter()
        try:
            try:
                connection.execute("BEGIN IMMEDIATE")
                answers, heads = self._write(connection, batch)
                connection.execute("COMMIT")
            except sqlite3.IntegrityError:
                # Only a writer that skips the seq check can break a key: find the culprit.
                connection.execute("ROLLBACK")
                self._heads.clear()
                connection.execute("BEGIN IMMEDIATE")
                answers, heads = self._write_one_by_one(connection, batch)
                connection.execute("COMMIT")
        except BaseException as error:  # the whole transaction failed: nothing was written
            self._heads.clear()
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            _answer([(request.loop, (request.future, error, 0)) for request in batch])
            return
        if len(self._heads) + len(heads) > _HEADS_CACHED:
            self._heads.clear()
        self._heads.update(heads)
        self.stats.committed(time.perf_counter() - started, len(batch))
        _answer(answers)
        self._commits_since_checkpoint += 1
        if self._commits_since_checkpoint >= self._commits_to_checkpoint:
            self._checkpoint(connection)

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        """Copy the WAL back into the database file, and plan the next checkpoint."""
        started = time.perf_counter()
        try:
            _, frames, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error:  # busy or broken: the next commit's checkpoint tries again
            return
        self.stats.checkpoint_seconds.append(time.perf_counter() - started)
        per_commit = max(frames, 1) / self._commits_since_checkpoint
        self._commits_to_checkpoint = max(1, round(CHECKPOINT_FRAMES / per_commit))
        self._commits_since_checkpoint = 0

    def _last_seqs(self, connection: sqlite3.Connection, table_ids: set[str]) -> dict[str, int]:
        """The last seq of each of ``table_ids``; the caller holds the write lock."""
        (version,) = connection.execute("PRAGMA data_version").fetchone()
        if version != self._data_version:  # another connection has committed since our last
            self._heads.clear()
            self._data_version = version
        cached = self._heads
        heads: dict[str, int] = {}
        for table_id in table_ids:
            last = cached.get(table_id)
            if last is None:
                (last,) = connection.execute(_LAST_SEQ, (table_id,)).fetchone()
            heads[table_id] = last or 0
        return heads

    def _write(
        self, connection: sqlite3.Connection, batch: list[_Request]
    ) -> tuple[list[tuple[asyncio.AbstractEventLoop, _Answer]], dict[str, int]]:
        """Check and write ``batch`` with one statement per kind of row; return the answers
        and the last seqs it leaves its tables at."""
        appends: list[_Append] = []
        snapshots: list[tuple[str, int, bytes]] = []
        refusals: list[tuple[str, str, bytes]] = []
        for request in batch:
            if type(request) is _Append:
                appends.append(request)
            elif type(request) is _Snapshot:
                snapshots.append((request.table_id, request.seq, request.payload))
            elif type(request) is _Refusal:
                refusals.append((request.table_id, request.command_id, request.payload))
        heads = self._last_seqs(connection, {request.table_id for request in appends})
        plan = plan_appends(appends, heads)
        _write_plan(connection, plan)
        if snapshots:
            connection.executemany(_REPLACE_SNAPSHOTS, snapshots)
        if refusals:
            connection.executemany(_INSERT_REFUSALS, refusals)
        answers: list[tuple[asyncio.AbstractEventLoop, _Answer]] = []
        outcomes = iter(plan.outcomes)
        for request in batch:
            if type(request) is _Append:
                outcome = next(outcomes)
                if isinstance(outcome, SeqConflict):
                    answers.append((request.loop, (request.future, outcome, 0)))
                else:
                    answers.append((request.loop, (request.future, None, outcome)))
            elif type(request) is _Snapshot:
                answers.append((request.loop, (request.future, None, request.seq)))
            else:
                answers.append((request.loop, (request.future, None, 0)))
        return answers, heads

    def _write_one_by_one(
        self, connection: sqlite3.Connection, batch: list[_Request]
    ) -> tuple[list[tuple[asyncio.AbstractEventLoop, _Answer]], dict[str, int]]:
        """The slow path after a broken key: each request in its own savepoint."""
        answers: list[tuple[asyncio.AbstractEventLoop, _Answer]] = []
        heads: dict[str, int] = {}
        for request in batch:
            connection.execute("SAVEPOINT request")
            try:
                answer, request_heads = self._write(connection, [request])
            except sqlite3.IntegrityError as error:
                connection.execute("ROLLBACK TO request")
                conflict = SeqConflict(
                    f"table {request.table_id!r}: that seq is already taken ({error})", -1
                )
                answers.append((request.loop, (request.future, conflict, 0)))
            else:
                answers.extend(answer)
                heads.update(request_heads)
            finally:
                connection.execute("RELEASE request")
        return answers, heads

    # Reading ---------------------------------------------------------------------------------

    async def _read(self, function: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreClosed("the event store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader, function, self._reader_connection)

    async def read(self, table_id: str, after_seq: int = 0) -> list[StoredEvent]:
        """See ``EventStore.read``."""

        def query(connection: sqlite3.Connection) -> list[StoredEvent]:
            cursor = connection.execute(
                "SELECT seq, at, command_id, payload FROM events"
                " WHERE table_id = ? AND seq > ? ORDER BY seq",
                (table_id, after_seq),
            )
            return [
                StoredEvent(table_id, seq, at, command_id, bytes(payload))
                for seq, at, command_id, payload in cursor
            ]

        return await self._read(query)

    async def last_seq(self, table_id: str) -> int:
        """See ``EventStore.last_seq``."""

        def query(connection: sqlite3.Connection) -> int:
            row = connection.execute(
                "SELECT MAX(seq) FROM events WHERE table_id = ?", (table_id,)
            ).fetchone()
            return int(row[0] or 0)

        return await self._read(query)

    async def command_seqs(self, table_id: str, command_id: str) -> tuple[int, int] | None:
        """See ``EventStore.command_seqs``."""

        def query(connection: sqlite3.Connection) -> tuple[int, int] | None:
            row = connection.execute(
                "SELECT MIN(seq), MAX(seq) FROM events WHERE table_id = ? AND command_id = ?",
                (table_id, command_id),
            ).fetchone()
            return None if row[0] is None else (int(row[0]), int(row[1]))

        if not command_id:
            return None
        return await self._read(query)

    async def latest_snapshot(self, table_id: str) -> Snapshot | None:
        """See ``EventStore.latest_snapshot``."""

        def query(connection: sqlite3.Connection) -> Snapshot | None:
            row = connection.execute(
                "SELECT seq, payload FROM snapshots WHERE table_id = ?", (table_id,)
            ).fetchone()
            return None if row is None else Snapshot(table_id, int(row[0]), bytes(row[1]))

        return await self._read(query)

    async def tables(self) -> list[TableSummary]:
        """See ``EventStore.tables``."""

        def query(connection: sqlite3.Connection) -> list[TableSummary]:
            cursor = connection.execute(
                "SELECT table_id, variant, status, seats, last_seq, updated_at FROM tables"
                " ORDER BY updated_at DESC, table_id"
            )
            return [
                TableSummary(
                    table_id, variant, status, tuple(json.loads(seats)), last_seq, updated_at
                )
                for table_id, variant, status, seats, last_seq, updated_at in cursor
            ]

        return await self._read(query)

    async def close(self) -> None:
        """See ``EventStore.close``: pending appends are committed first."""
        if self._closed:
            return
        self._closed = True
        for loop in list(self._outgoing):  # what this pass submitted goes before the stop
            self._hand_over(loop)
        self._requests.put(None)
        await asyncio.to_thread(self._writer.join)
        self._reader.shutdown(wait=True)
        self._writer_connection.close()
        self._reader_connection.close()


def _write_plan(connection: sqlite3.Connection, plan: BatchPlan) -> None:
    """Write the rows of ``plan``: events, whole summaries, then the tables that moved on."""
    if plan.events:
        connection.executemany(_INSERT_EVENTS, plan.events)
    if plan.summaries:
        connection.executemany(
            _REPLACE_TABLES,
            [
                (table_id, summary.variant, summary.status, seats_json(summary.seats), last, at)
                for table_id, (summary, last, at) in plan.summaries.items()
            ],
        )
    if plan.touched:
        connection.executemany(
            _UPDATE_TABLES,
            [(last, at, table_id) for table_id, (last, at) in plan.touched.items()],
        )


def _answer(answers: list[tuple[asyncio.AbstractEventLoop, _Answer]]) -> None:
    """Hand the answers to their event loops: one wake-up per loop, not one per request."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Answer]] = {}
    for loop, answer in answers:
        settled = by_loop.get(loop)
        if settled is None:
            by_loop[loop] = [answer]
        else:
            settled.append(answer)
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            loop.call_soon_threadsafe(_settle, settled)


def _settle(answers: list[_Answer]) -> None:
    for future, error, value in answers:
        if future.done():  # the caller gave up waiting
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
