"""The default event store: one SQLite file, WAL, ``synchronous=FULL``, group commit.

Theory of operation. One writer thread owns the only writing connection. Callers put append
requests on a queue and await a future. The writer takes the first request, then whatever else
is queued (and, with ``max_delay`` > 0, whatever arrives within that many seconds), up to
``max_batch`` requests, and commits them in one ``BEGIN IMMEDIATE`` transaction. Requests that
arrive while a commit is syncing wait for the next one, so under load transactions grow by
themselves while a lone append is not delayed. Each request runs inside its own savepoint, so
a request that conflicts (its ``after_seq`` is not the table's last ``seq``) is rolled back
alone and fails with ``SeqConflict`` while the others commit. Only after ``COMMIT`` returns,
with the WAL synced, are the futures resolved: an acknowledged append survives ``kill -9``.

Reads go to a second connection on a reader thread; WAL lets them run while the writer works.
Several processes may share the file: ``BEGIN IMMEDIATE`` serialises their writers and the
``seq`` check inside the transaction reads the committed truth, so they cannot both append
the same ``seq``.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from server.tables.errors import SeqConflict, StoreClosed
from server.tables.store import NewEvent, Snapshot, StoredEvent, StoreStats, TableSummary

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


def _connect(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("PRAGMA busy_timeout=30000")
    return connection


@dataclass
class _Append:
    table_id: str
    after_seq: int
    events: Sequence[NewEvent]
    command_id: str
    summary: TableSummary | None
    done: Callable[[BaseException | None, int], None]


@dataclass
class _Snapshot:
    table_id: str
    seq: int
    payload: bytes
    done: Callable[[BaseException | None, int], None]


@dataclass
class _Refusal:
    table_id: str
    command_id: str
    payload: bytes
    done: Callable[[BaseException | None, int], None]


_STOP = object()
_Done = Callable[[BaseException | None, int], None]


class SqliteStore:
    """An ``EventStore`` in one SQLite file. Build it with ``await SqliteStore.open(path)``."""

    def __init__(self, path: str, max_delay: float, max_batch: int) -> None:
        self.path = path
        self.max_delay = max_delay
        self.max_batch = int(max_batch)
        self.stats = StoreStats()
        self._requests: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._closed = False
        self._writer_connection = _connect(path)
        self._writer_connection.executescript(_SCHEMA)
        self._writer_connection.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        self._reader_connection = _connect(path)
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-reader")
        self._writer = threading.Thread(target=self._write_loop, name="sqlite-writer", daemon=True)
        self._writer.start()

    @classmethod
    async def open(cls, path: str, max_delay: float = 0.0, max_batch: float = 512) -> SqliteStore:
        """Open (creating if needed) the store in file ``path``.

        ``max_delay`` is how long the writer waits for more appends to share a transaction;
        ``max_batch`` caps the requests in one transaction.
        """
        return await asyncio.to_thread(cls, path, max_delay, int(max_batch))

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
        self._submit(_Append(table_id, after_seq, events, command_id, summary, future.done))
        return await future.result

    async def save_snapshot(self, table_id: str, seq: int, payload: bytes) -> None:
        """See ``EventStore.save_snapshot``."""
        future = self._future()
        self._submit(_Snapshot(table_id, seq, payload, future.done))
        await future.result

    async def save_refusal(self, table_id: str, command_id: str, payload: bytes) -> None:
        """See ``EventStore.save_refusal``."""
        future = self._future()
        self._submit(_Refusal(table_id, command_id, payload, future.done))
        await future.result

    async def refusal(self, table_id: str, command_id: str) -> bytes | None:
        """See ``EventStore.refusal``."""

        def query(connection: sqlite3.Connection) -> bytes | None:
            row = connection.execute(
                "SELECT payload FROM refusals WHERE table_id = ? AND command_id = ?",
                (table_id, command_id),
            ).fetchone()
            return None if row is None else bytes(row[0])

        return await self._read(query)

    def _submit(self, request: object) -> None:
        if self._closed:
            raise StoreClosed("the event store is closed")
        self._requests.put(request)

    @staticmethod
    def _future() -> _Waiter:
        return _Waiter(asyncio.get_running_loop())

    def _write_loop(self) -> None:
        connection = self._writer_connection
        while True:
            first = self._requests.get()
            if first is _STOP:
                return
            batch = [first]
            deadline = time.monotonic() + self.max_delay
            stop = False
            while len(batch) < self.max_batch:
                remaining = deadline - time.monotonic()
                try:
                    request = (
                        self._requests.get(timeout=remaining)
                        if remaining > 0
                        else self._requests.get_nowait()
                    )
                except queue.Empty:
                    break
                if request is _STOP:
                    stop = True
                    break
                batch.append(request)
            self._commit(connection, batch)
            if stop:
                return

    def _commit(self, connection: sqlite3.Connection, batch: list[object]) -> None:
        outcomes: list[tuple[_Done, BaseException | None, int]] = []
        started = time.perf_counter()
        try:
            connection.execute("BEGIN IMMEDIATE")
            for index, request in enumerate(batch):
                savepoint = f"r{index}"
                connection.execute(f"SAVEPOINT {savepoint}")
                try:
                    if isinstance(request, _Append):
                        result = self._apply_append(connection, request)
                        outcomes.append((request.done, None, result))
                    elif isinstance(request, _Snapshot):
                        connection.execute(
                            "INSERT OR REPLACE INTO snapshots (table_id, seq, payload)"
                            " VALUES (?, ?, ?)",
                            (request.table_id, request.seq, request.payload),
                        )
                        outcomes.append((request.done, None, request.seq))
                    elif isinstance(request, _Refusal):
                        connection.execute(
                            "INSERT OR IGNORE INTO refusals (table_id, command_id, payload)"
                            " VALUES (?, ?, ?)",
                            (request.table_id, request.command_id, request.payload),
                        )
                        outcomes.append((request.done, None, 0))
                    connection.execute(f"RELEASE {savepoint}")
                except (SeqConflict, sqlite3.IntegrityError) as error:
                    connection.execute(f"ROLLBACK TO {savepoint}")
                    connection.execute(f"RELEASE {savepoint}")
                    assert isinstance(request, _Append | _Snapshot | _Refusal)
                    outcomes.append((request.done, _as_conflict(error, request), 0))
            connection.execute("COMMIT")
        except BaseException as error:  # the whole transaction failed: nothing was written
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            for request in batch:
                assert isinstance(request, _Append | _Snapshot | _Refusal)
                request.done(error, 0)
            return
        self.stats.transactions += 1
        self.stats.appends += len(batch)
        self.stats.commit_seconds.append(time.perf_counter() - started)
        for done, failure, result in outcomes:
            done(failure, result)

    @staticmethod
    def _apply_append(connection: sqlite3.Connection, request: _Append) -> int:
        row = connection.execute(
            "SELECT MAX(seq) FROM events WHERE table_id = ?", (request.table_id,)
        ).fetchone()
        current = row[0] or 0
        if current != request.after_seq:
            raise SeqConflict(
                f"table {request.table_id!r} is at seq {current}, not {request.after_seq}",
                current,
            )
        seq = request.after_seq
        rows = []
        for event in request.events:
            seq += 1
            rows.append((request.table_id, seq, event.at, request.command_id, event.payload))
        connection.executemany(
            "INSERT INTO events (table_id, seq, at, command_id, payload) VALUES (?, ?, ?, ?, ?)",
            rows,
        )
        summary = request.summary
        if summary is not None:
            connection.execute(
                "INSERT OR REPLACE INTO tables"
                " (table_id, variant, status, seats, last_seq, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    request.table_id,
                    summary.variant,
                    summary.status,
                    json.dumps(list(summary.seats)),
                    seq,
                    request.events[-1].at if request.events else summary.updated_at,
                ),
            )
        elif request.events:
            connection.execute(
                "UPDATE tables SET last_seq = ?, updated_at = ? WHERE table_id = ?",
                (seq, request.events[-1].at, request.table_id),
            )
        return seq

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
        self._requests.put(_STOP)
        await asyncio.to_thread(self._writer.join)
        self._reader.shutdown(wait=True)
        self._writer_connection.close()
        self._reader_connection.close()


class _Waiter:
    """A future resolved from the writer thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.result: asyncio.Future[int] = loop.create_future()

    def done(self, error: BaseException | None, value: int) -> None:
        self._loop.call_soon_threadsafe(self._settle, error, value)

    def _settle(self, error: BaseException | None, value: int) -> None:
        if self.result.done():
            return
        if error is not None:
            self.result.set_exception(error)
        else:
            self.result.set_result(value)


def _as_conflict(error: Exception, request: Any) -> BaseException:
    if isinstance(error, SeqConflict):
        return error
    return SeqConflict(f"table {request.table_id!r}: that seq is already taken ({error})", -1)
