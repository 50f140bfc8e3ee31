"""Event store throughput: the group-commit stores, raw batched inserts, and the table service.

Run with ``python -m bench.store [--quick] [--postgres URL|none] [--seconds S]``. One run prints
three tables, every figure measured in that run:

1. The store layer alone. 1, 100 and 1,000 concurrent table tasks each append to their own
   table, one append at a time (awaiting each, as a table actor does), through the stores'
   group-commit writers: SQLite (a file in a temporary folder) and PostgreSQL (a throw-away
   database, dropped at the end). The appends are real: a ``TableActor`` plays whole games into
   an in-memory capturing store, and each task replays that stream of appends (encoded records,
   the command id, the table summary) from its own starting point. Each case runs for a warm-up
   and then ``--seconds`` of measurement on a fresh file or database. Reported: events/s,
   appends/s, transactions, appends per transaction, the append latency the caller sees
   (p50/p99) and the store's own ``commit_seconds`` (p50/p99), and how busy the writer was.
   Back to back, a table's latency is simply tables / throughput (Little's law), so two more
   cases offer 1,000 tables a realistic load: Poisson appends at 1 and 10 a second per table.
2. The reference, run right after each back-to-back store case: the same rows written by
   hand, with batches of the average size the store reached in that case. SQLite: one plain
   ``sqlite3`` connection (WAL, ``synchronous=FULL``, the store's schema) doing
   ``BEGIN IMMEDIATE; executemany; COMMIT``. PostgreSQL: one asyncpg connection doing
   ``INSERT ... SELECT FROM unnest(...)`` in a transaction. Each reference is run twice:
   events only, and events plus the table-summary rows the store also writes with every
   append (the like-for-like reference the target is judged against).
3. The whole table service: ``--tables`` tables of random legal play, each driven through its
   ``TableActor`` (command ids, stale-seq checks, persist before publish, snapshots, rematches),
   on each store. Reported: moves/s, commands/s, events/s, the command round trip (p50/p99) and
   the share of time the driver itself spent picking moves (``legal_actions``).

Targets, at 1,000 tables: the store reaches at least 70% of the like-for-like raw batched rate,
and the append p99 the caller sees is under 10 ms (the store's commit p99 is judged too); that
case runs ``--repeats`` times, each right before its raw reference, and the medians are judged. A
missed target is followed by a look at where the time goes: raw runs that add the store's SQL
step by step; then a short ``cProfile`` of that case (the event loop thread and, for SQLite,
the writer thread). ``--no-profile`` skips it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime
import hashlib
import io
import json
import math
import os
import platform
import pstats
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import asyncpg

from bench.engine import cpu_model
from server.engine import Command, is_over, legal_actions, to_move
from server.tables.actor import TableActor
from server.tables.postgres_store import MAX_BATCH as POSTGRES_MAX_BATCH
from server.tables.postgres_store import PostgresStore
from server.tables.records import Record
from server.tables.sqlite_store import MAX_BATCH as SQLITE_MAX_BATCH
from server.tables.sqlite_store import SqliteStore
from server.tables.store import (
    EventStore,
    NewEvent,
    Snapshot,
    StoredEvent,
    StoreStats,
    TableSummary,
    open_store,
)
from server.tables.table import (
    CreateTable,
    Rematch,
    Sit,
    StartGame,
    TableCommand,
    TableState,
    empty_table,
)

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
CONCURRENCY = (1, 100, 1_000)
TARGET_TABLES = 1_000
TARGET_RATIO = 0.70
TARGET_P99_SECONDS = 0.010
PACES = (1.0, 10.0)
"""Appends/s per table of the paced cases at ``TARGET_TABLES``: a brisk human table, a bot table."""
CAPTURE_GAMES: tuple[tuple[str, int], ...] = (("basic", 2), ("gin", 2), ("ramino", 4))
"""The games played into the capturing store to make the append stream (variant, players)."""


# --- the append stream: what a table actor really appends ----------------------------------------


@dataclass(frozen=True, slots=True)
class Append:
    """One captured ``EventStore.append`` call, minus the table and seq."""

    events: tuple[NewEvent, ...]
    command_id: str
    summary: TableSummary | None


class CapturingStore:
    """An in-memory ``EventStore`` that keeps every append, to replay later against real ones."""

    def __init__(self) -> None:
        self.appends: list[Append] = []
        self._last: dict[str, int] = {}

    async def append(
        self,
        table_id: str,
        after_seq: int,
        events: Sequence[NewEvent],
        command_id: str = "",
        summary: TableSummary | None = None,
    ) -> int:
        """Keep the append; it always succeeds."""
        self.appends.append(Append(tuple(events), command_id, summary))
        self._last[table_id] = after_seq + len(events)
        return self._last[table_id]

    async def read(self, table_id: str, after_seq: int = 0) -> list[StoredEvent]:
        """Nothing is kept to read back."""
        return []

    async def last_seq(self, table_id: str) -> int:
        """The last seq appended to ``table_id``."""
        return self._last.get(table_id, 0)

    async def command_seqs(self, table_id: str, command_id: str) -> tuple[int, int] | None:
        """Every command id is new."""
        return None

    async def save_snapshot(self, table_id: str, seq: int, payload: bytes) -> None:
        """Snapshots are not part of the append stream."""

    async def save_refusal(self, table_id: str, command_id: str, payload: bytes) -> None:
        """Refusals are not part of the append stream."""

    async def refusal(self, table_id: str, command_id: str) -> bytes | None:
        """None is kept."""
        return None

    async def latest_snapshot(self, table_id: str) -> Snapshot | None:
        """There are none."""
        return None

    async def tables(self) -> list[TableSummary]:
        """Not tracked."""
        return []

    async def close(self) -> None:
        """Nothing to release."""


class NullOutbox:
    """Publishes nowhere: the benchmark measures the path up to publication."""

    async def publish(
        self, before: TableState, seq: int, record: Record, after: TableState
    ) -> None:
        """Drop the record."""

    async def flush(self, table: TableState) -> None:
        """Nothing to flush."""


@dataclass
class Window:
    """What the tasks of one case count while ``recording`` is set; ``stop`` ends them."""

    stop: bool = False
    recording: bool = False
    latencies: list[float] = field(default_factory=list)
    events: int = 0
    appends: int = 0
    moves: int = 0
    commands: int = 0
    driver_seconds: float = 0.0


async def submit(
    window: Window,
    actor: TableActor,
    sender: str,
    command: Command | TableCommand,
    rng: random.Random,
    move: bool,
) -> None:
    """Send one command the way a client does (fresh id, last seq seen) and count it.

    Raises:
        RuntimeError: the table refused it (a bug in the driver).
    """
    before = actor.table.seq
    command_id = f"{rng.getrandbits(64):016x}"
    started = time.perf_counter()
    reply = await actor.submit(sender, command, command_id, before)
    elapsed = time.perf_counter() - started
    if not reply.ok:
        raise RuntimeError(f"{actor.table.table_id}: {command!r} refused: {reply}")
    if window.recording:
        window.latencies.append(elapsed)
        window.commands += 1
        window.moves += move
        window.events += actor.table.seq - before


async def play_table(
    actor: TableActor,
    variant: str,
    players: int,
    rng: random.Random,
    window: Window,
    games: int | None = None,
) -> None:
    """Create, fill and start a table, then play random legal moves, game after game.

    Stops when ``window.stop`` is set or after ``games`` games.
    """
    names = [f"{actor.table.table_id}-p{seat}" for seat in range(players)]
    await submit(window, actor, names[0], CreateTable(variant=variant, seats=players), rng, False)
    for name in names:
        await submit(window, actor, name, Sit(), rng, False)
    await submit(window, actor, names[0], StartGame(), rng, False)
    played = 0
    while not window.stop:
        game = actor.table.game
        assert game is not None
        if is_over(game):
            played += 1
            if games is not None and played >= games:
                return
            await submit(window, actor, names[0], Rematch(), rng, False)
            continue
        started = time.perf_counter()
        seat = to_move(game)
        command = rng.choice(legal_actions(game, seat))
        if window.recording:
            window.driver_seconds += time.perf_counter() - started
        await submit(window, actor, names[seat], command, rng, True)


async def capture_appends(seed: int) -> list[Append]:
    """The appends table actors make while playing one game of each ``CAPTURE_GAMES``."""
    store = CapturingStore()
    rng = random.Random(seed)
    for index, (variant, players) in enumerate(CAPTURE_GAMES):
        actor = TableActor(
            empty_table(f"capture{index}"),
            store,
            NullOutbox(),
            rng=random.Random(rng.random()),
            snapshot_every=0,
        )
        actor.start()
        await play_table(actor, variant, players, random.Random(rng.random()), Window(), games=1)
        await actor.stop()
    return store.appends


def describe_stream(stream: Sequence[Append]) -> str:
    """Events per append and payload sizes of the captured stream."""
    sizes = [len(event.payload) for append in stream for event in append.events]
    per_append = Counter(len(append.events) for append in stream)
    spread = ", ".join(f"{count}: {n / len(stream):.1%}" for count, n in sorted(per_append.items()))
    return (
        f"{len(stream):,} appends, {len(sizes):,} events ({len(sizes) / len(stream):.3f}/append;"
        f" events per append {spread}); payload bytes mean {sum(sizes) / len(sizes):.1f},"
        f" p50 {percentile(sizes, 0.5):.0f}, p99 {percentile(sizes, 0.99):.0f}, max {max(sizes)};"
        f" every append carries a 16-character command id and a table summary"
    )


# --- measuring ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (nearest rank); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return float(ordered[rank - 1])


def store_stats(store: EventStore) -> StoreStats:
    """The counters of a real store."""
    assert isinstance(store, SqliteStore | PostgresStore)
    return store.stats


@dataclass
class Measured:
    """The store's counters over one measurement window."""

    seconds: float
    transactions: int
    requests: int
    commit_seconds: list[float]
    checkpoint_seconds: list[float]
    """The SQLite writer's WAL checkpoints, run between commits (none for PostgreSQL)."""

    @property
    def batch(self) -> float:
        """Requests per transaction."""
        return self.requests / self.transactions if self.transactions else 0.0


async def measure(window: Window, stats: StoreStats, warmup: float, seconds: float) -> Measured:
    """Let the tasks warm up, then record for ``seconds``; return the store's counters."""
    await asyncio.sleep(warmup)
    transactions, requests, commits, checkpoints = (
        stats.transactions,
        stats.appends,
        len(stats.commit_seconds),
        len(stats.checkpoint_seconds),
    )
    window.recording = True
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    window.recording = False
    elapsed = time.perf_counter() - started
    return Measured(
        elapsed,
        stats.transactions - transactions,
        stats.appends - requests,
        stats.commit_seconds[commits:],
        stats.checkpoint_seconds[checkpoints:],
    )


@dataclass
class StoreResult:
    """One case of table 1."""

    store: str
    tables: int
    pace: float
    """Appends per second each table offers (Poisson arrivals); 0: back to back."""
    window: Window
    measured: Measured
    run: str = ""
    """Which of the repeated runs of the case this is (``2/3``), if it is repeated."""

    @property
    def offered(self) -> str:
        """The load offered, in appends/s (``max``: every table appends back to back)."""
        return f"{self.tables * self.pace:,.0f}/s" if self.pace else "max"

    @property
    def events_per_s(self) -> float:
        """Events appended per second."""
        return self.window.events / self.measured.seconds

    @property
    def appends_per_s(self) -> float:
        """Appends answered per second."""
        return self.window.appends / self.measured.seconds

    @property
    def append_p99(self) -> float:
        """The append latency the caller sees, 99th percentile (s)."""
        return percentile(self.window.latencies, 0.99)

    @property
    def commit_p99(self) -> float:
        """The store's own commit time, 99th percentile (s)."""
        return percentile(self.measured.commit_seconds, 0.99)


async def store_case(
    url: str,
    name: str,
    tables: int,
    stream: Sequence[Append],
    warmup: float,
    seconds: float,
    pace: float = 0.0,
) -> StoreResult:
    """``tables`` tasks appending the stream to their own tables through a fresh store.

    With ``pace`` each table appends at Poisson times, ``pace`` a second on average (but never
    two at once: a table waits for its last append); without, back to back.
    """
    store = await open_store(url)
    window = Window()
    starts = random.Random(tables).choices(range(len(stream)), k=tables)
    loop = asyncio.get_running_loop()

    async def table_task(index: int) -> None:
        table_id = f"t{index:05d}"
        seq = 0
        position = starts[index]
        arrivals = random.Random(index)
        due = loop.time()
        while not window.stop:
            if pace:
                due += arrivals.expovariate(pace)
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                if window.stop:
                    return
            append = stream[position]
            position = (position + 1) % len(stream)
            started = time.perf_counter()
            seq = await store.append(
                table_id, seq, append.events, append.command_id, append.summary
            )
            if window.recording:
                window.latencies.append(time.perf_counter() - started)
                window.appends += 1
                window.events += len(append.events)

    try:
        async with asyncio.TaskGroup() as group:
            for index in range(tables):
                group.create_task(table_task(index))
            try:
                measured = await measure(window, store_stats(store), warmup, seconds)
            finally:
                window.stop = True
    finally:
        await store.close()
    return StoreResult(name, tables, pace, window, measured)


# --- the raw references ------------------------------------------------------------------------


@dataclass
class RawResult:
    """One raw reference run."""

    events: int
    batches: int
    seconds: float

    @property
    def events_per_s(self) -> float:
        """Events written per second."""
        return self.events / self.seconds


@dataclass
class Pair:
    """A back-to-back store case and the raw runs made right after it."""

    result: StoreResult
    events_only: RawResult
    like_for_like: RawResult
    """The events and the summary rows, as the store writes them."""

    @property
    def ratio(self) -> float:
        """Store events/s over like-for-like raw events/s."""
        return self.result.events_per_s / self.like_for_like.events_per_s


def batch_sizes(average: float) -> Iterator[int]:
    """Whole batch sizes whose running mean is ``average`` (at least 1)."""
    average = max(1.0, average)
    index = 0
    while True:
        yield math.floor((index + 1) * average) - math.floor(index * average)
        index += 1


RawRow = tuple[str, int, float, str, bytes]
SummaryRow = tuple[str, str, str, str, int, float]
RawAppend = tuple[str, list[RawRow], SummaryRow | None]
"""One append's rows: the table, its event rows and its summary row."""


class RawBatches:
    """The rows a store case wrote, cut into batches: tables round-robin, each its own stream."""

    def __init__(self, stream: Sequence[Append], tables: int, average: float) -> None:
        self.stream = stream
        self.tables = tables
        self.positions = random.Random(tables).choices(range(len(stream)), k=tables)
        self.seqs = [0] * tables
        self.sizes = batch_sizes(average)
        self.turn = 0

    def next_appends(self) -> list[RawAppend]:
        """The appends of the next batch, each with its rows."""
        appends: list[RawAppend] = []
        for _ in range(next(self.sizes)):
            table = self.turn % self.tables
            self.turn += 1
            append = self.stream[self.positions[table]]
            self.positions[table] = (self.positions[table] + 1) % len(self.stream)
            table_id = f"t{table:05d}"
            seq = self.seqs[table]
            events: list[RawRow] = []
            for event in append.events:
                seq += 1
                events.append((table_id, seq, event.at, append.command_id, event.payload))
            self.seqs[table] = seq
            summary = append.summary
            row: SummaryRow | None = None
            if summary is not None and append.events:
                row = (
                    table_id,
                    summary.variant,
                    summary.status,
                    json.dumps(list(summary.seats)),
                    seq,
                    append.events[-1].at,
                )
            appends.append((table_id, events, row))
        return appends

    def next(self) -> tuple[list[RawRow], list[SummaryRow]]:
        """The event rows and the summary rows (one per append) of the next batch."""
        events: list[RawRow] = []
        summaries: list[SummaryRow] = []
        for _, rows, summary in self.next_appends():
            events.extend(rows)
            if summary is not None:
                summaries.append(summary)
        return events, summaries


_SQLITE_INSERT_EVENTS = (
    "INSERT INTO events (table_id, seq, at, command_id, payload) VALUES (?, ?, ?, ?, ?)"
)
_SQLITE_UPSERT_TABLES = (
    "INSERT OR REPLACE INTO tables (table_id, variant, status, seats, last_seq, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)

SQLITE_LADDER: tuple[tuple[str, frozenset[str]], ...] = (
    ("events: one executemany per batch", frozenset()),
    ("+ summaries: one executemany per batch", frozenset({"summaries"})),
    (
        "+ PRAGMA data_version per batch (the store's SQL)",
        frozenset({"summaries", "check"}),
    ),
)
"""Raw SQLite runs that add, one by one, what the store's transaction does."""


def raw_sqlite(
    path: str,
    stream: Sequence[Append],
    tables: int,
    average: float,
    warmup: float,
    seconds: float,
    steps: frozenset[str],
) -> RawResult:
    """Plain ``sqlite3`` batches into the store's schema at ``path``: ``warmup``, then ``seconds``.

    ``steps``: ``summaries`` writes the summary rows too; ``check`` adds the store's seq check
    when its cache of last seqs is warm: one ``PRAGMA data_version`` per batch.
    """
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    batches = RawBatches(stream, tables, average)
    summaries, check = "summaries" in steps, "check" in steps

    def write_batch() -> int:
        connection.execute("BEGIN IMMEDIATE")
        if check:
            connection.execute("PRAGMA data_version").fetchone()
        rows, summary_rows = batches.next()
        connection.executemany(_SQLITE_INSERT_EVENTS, rows)
        if summaries:
            connection.executemany(_SQLITE_UPSERT_TABLES, summary_rows)
        connection.execute("COMMIT")
        return len(rows)

    try:
        deadline = time.perf_counter() + warmup
        while time.perf_counter() < deadline:  # the WAL grows to its working size
            write_batch()
        events = count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            events += write_batch()
            count += 1
        return RawResult(events, count, time.perf_counter() - started)
    finally:
        connection.close()


_RAW_INSERT_EVENTS = """
INSERT INTO events (table_id, seq, at, command_id, payload)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::float8[], $4::text[], $5::bytea[])
"""

_RAW_UPSERT_TABLES = """
INSERT INTO tables (table_id, variant, status, seats, last_seq, updated_at)
SELECT s.table_id, s.variant, s.status, ARRAY(SELECT jsonb_array_elements_text(s.seats::jsonb)),
       s.last_seq, s.updated_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::float8[])
    AS s (table_id, variant, status, seats, last_seq, updated_at)
ON CONFLICT (table_id) DO UPDATE SET
    variant = excluded.variant, status = excluded.status, seats = excluded.seats,
    last_seq = excluded.last_seq, updated_at = excluded.updated_at
"""


_TABLE_LOCKS = 0x52616D69
"""The first key of the store's per-table advisory locks."""

_RAW_LOCK_TABLES = "SELECT count(pg_advisory_xact_lock($1, key)) FROM unnest($2::int4[]) AS key"

_RAW_LAST_SEQS = """
SELECT u.table_id,
       COALESCE(t.last_seq, (SELECT max(e.seq) FROM events AS e WHERE e.table_id = u.table_id), 0)
FROM unnest($1::text[]) AS u (table_id) LEFT JOIN tables AS t ON t.table_id = u.table_id
"""

POSTGRES_LADDER: tuple[tuple[str, frozenset[str]], ...] = (
    ("events: one INSERT ... unnest per batch", frozenset()),
    ("+ summaries: one upsert ... unnest per batch", frozenset({"summaries"})),
    ("+ advisory lock on the batch's tables", frozenset({"summaries", "lock"})),
    (
        "+ last seqs from tables.last_seq (the store's SQL)",
        frozenset({"summaries", "lock", "heads"}),
    ),
)
"""Raw PostgreSQL runs that add, one by one, the statements of the store's transaction."""


def table_lock_key(table_id: str) -> int:
    """The store's second advisory-lock key of a table: a 32-bit hash of its id."""
    digest = hashlib.blake2b(table_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


async def raw_postgres(
    url: str,
    stream: Sequence[Append],
    tables: int,
    average: float,
    warmup: float,
    seconds: float,
    steps: frozenset[str],
) -> RawResult:
    """asyncpg ``INSERT ... SELECT FROM unnest`` batches into the store's schema.

    Writes for ``warmup`` seconds, then measures ``seconds``. ``steps``: ``summaries`` upserts
    the summary rows too; ``lock`` first takes the store's advisory lock on every table of the
    batch and ``heads`` reads their last seqs, in one statement each, as the store does.
    """
    connection = await asyncpg.connect(url)
    batches = RawBatches(stream, tables, average)
    with_summaries, lock, heads = ("summaries" in steps, "lock" in steps, "heads" in steps)

    async def write_batch() -> int:
        rows, summaries = batches.next()
        async with connection.transaction():
            table_ids = sorted({row[0] for row in rows})
            if lock:
                keys = sorted({table_lock_key(table_id) for table_id in table_ids})
                await connection.execute(_RAW_LOCK_TABLES, _TABLE_LOCKS, keys)
            if heads:
                await connection.fetch(_RAW_LAST_SEQS, table_ids)
            await connection.execute(_RAW_INSERT_EVENTS, *(list(c) for c in zip(*rows)))
            if with_summaries:
                # one row per table, the last one, as ON CONFLICT may touch a row once
                latest = {row[0]: row for row in summaries}
                columns = zip(*latest.values())
                await connection.execute(_RAW_UPSERT_TABLES, *(list(c) for c in columns))
        return len(rows)

    try:
        deadline = time.perf_counter() + warmup
        while time.perf_counter() < deadline:
            await write_batch()
        events = count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            events += await write_batch()
            count += 1
        return RawResult(events, count, time.perf_counter() - started)
    finally:
        await connection.close()


# --- the table service -------------------------------------------------------------------------


@dataclass
class ServiceResult:
    """One case of table 3."""

    store: str
    tables: int
    window: Window
    measured: Measured

    @property
    def moves_per_s(self) -> float:
        """Game moves answered per second."""
        return self.window.moves / self.measured.seconds


async def service_case(
    url: str,
    name: str,
    tables: int,
    variant: str,
    players: int,
    seed: int,
    warmup: float,
    seconds: float,
) -> ServiceResult:
    """``tables`` tables of random play through their actors on a fresh store."""
    store = await open_store(url)
    window = Window()
    rng = random.Random(seed)
    actors = [
        TableActor(
            empty_table(f"s{index:05d}"), store, NullOutbox(), rng=random.Random(rng.random())
        )
        for index in range(tables)
    ]
    for actor in actors:
        actor.start()
    try:
        async with asyncio.TaskGroup() as group:
            for actor in actors:
                driver = random.Random(rng.random())
                group.create_task(play_table(actor, variant, players, driver, window))
            try:
                measured = await measure(window, store_stats(store), warmup, seconds)
            finally:
                window.stop = True
        for actor in actors:
            await actor.stop()
    finally:
        await store.close()
    return ServiceResult(name, tables, window, measured)


# --- stores to measure -------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def sqlite_database() -> AsyncIterator[str]:
    """The URL of a store file in a fresh temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="ramino-bench-") as folder:
        yield f"sqlite:///{os.path.join(folder, 'events.db')}"


@contextlib.asynccontextmanager
async def postgres_database(admin_url: str) -> AsyncIterator[str]:
    """The URL of a new, empty database on the server of ``admin_url``, dropped afterwards."""
    name = f"ramino_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    base, _, _ = admin_url.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        admin = await asyncpg.connect(admin_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def fresh_database(store: str, admin_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    """A fresh, empty database of kind ``store`` (``sqlite`` or ``postgres``)."""
    return sqlite_database() if store == "sqlite" else postgres_database(admin_url)


def sqlite_path(url: str) -> str:
    """The file a ``sqlite:///`` URL of ``sqlite_database`` names."""
    return url.removeprefix("sqlite://")


async def postgres_settings(admin_url: str) -> str | None:
    """The server version and durability settings, or None if the server does not answer."""
    try:
        connection = await asyncpg.connect(admin_url, timeout=5)
    except Exception as error:  # any failure to connect means: no PostgreSQL rows
        print(f"PostgreSQL at {admin_url} is not reachable ({error}): its rows are skipped")
        return None
    try:
        names = ("server_version", "synchronous_commit", "fsync", "wal_sync_method", "commit_delay")
        values = [f"{name} {await connection.fetchval(f'SHOW {name}')}" for name in names]
    finally:
        await connection.close()
    return ", ".join(values)


# --- profiling a missed case -------------------------------------------------------------------


def top_functions(profile: cProfile.Profile, title: str, top: int) -> None:
    """Print the ``top`` functions of ``profile`` by own time."""
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    print(f"-- {title}: {stats.total_tt:.2f} s profiled (top {top} by own time) --")  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    print("\n".join(line for line in lines[start:] if line.strip()))


async def profile_case(
    store: str, admin_url: str, tables: int, stream: Sequence[Append], seconds: float
) -> None:
    """Run one store case under ``cProfile``: the event loop thread and the SQLite writer."""
    loop_profile = cProfile.Profile()
    writer_profile = cProfile.Profile()

    def hook(frame: FrameType, event: str, argument: Any) -> None:
        sys.setprofile(None)
        if threading.current_thread().name == "sqlite-writer":
            writer_profile.enable()

    async with fresh_database(store, admin_url) as url:
        threading.setprofile(hook)
        loop_profile.enable()
        try:
            result = await store_case(url, store, tables, stream, seconds / 3, seconds)
        finally:
            loop_profile.disable()
            threading.setprofile(None)
    print(
        f"profiled run: {result.events_per_s:,.0f} events/s, "
        f"{result.measured.batch:.0f} appends/transaction, "
        f"writer busy {sum(result.measured.commit_seconds) / result.measured.seconds:.0%}"
        " (profiling slows everything)"
    )
    top_functions(loop_profile, "event loop thread", 18)
    if store == "sqlite":
        top_functions(writer_profile, "sqlite-writer thread", 12)


# --- the report --------------------------------------------------------------------------------


def spread(values: Sequence[float], form: str, scale: float = 1.0) -> str:
    """The median of ``values`` and, for several, their range: ``0.79 (0.75-0.81)``."""
    median = form.format(statistics.median(values) * scale)
    if len(values) < 2:
        return median
    return f"{median} ({form.format(min(values) * scale)}-{form.format(max(values) * scale)})"


def verdict(ok: bool) -> str:
    """PASS or MISS."""
    return "PASS" if ok else "MISS"


def milliseconds(seconds: float) -> str:
    """``seconds`` in ms, two decimals."""
    return f"{seconds * 1000:.2f}"


def filesystem(path: str) -> str:
    """The device and file system type ``path`` lives on (Linux), else ``unknown``."""
    best = ("", "unknown", "")
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                device, mount, kind, *_ = line.split()
                if path.startswith(mount) and len(mount) >= len(best[2]):
                    best = (device, kind, mount)
    except OSError:
        pass
    return f"{best[1]} on {best[0]}" if best[0] else "unknown"


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def print_store_table(results: Sequence[StoreResult]) -> None:
    """Table 1."""
    print(
        f"{'store':9}{'tables':>7}{'run':>5}{'offered':>9}{'events/s':>10}{'appends/s':>10}"
        f"{'txns':>8}{'appends/txn':>12}{'append p50':>11}{'p99 ms':>8}{'commit p50':>11}"
        f"{'p99 ms':>8}{'checkpoints':>12}{'p99 ms':>8}{'writer busy':>12}"
    )
    for result in results:
        measured = result.measured
        busy = (sum(measured.commit_seconds) + sum(measured.checkpoint_seconds)) / measured.seconds
        checkpoint_p99 = (
            milliseconds(percentile(measured.checkpoint_seconds, 0.99))
            if measured.checkpoint_seconds
            else "-"
        )
        print(
            f"{result.store:9}{result.tables:>7,}{result.run:>5}{result.offered:>9}"
            f"{result.events_per_s:>10,.0f}"
            f"{result.appends_per_s:>10,.0f}{measured.transactions:>8,}{measured.batch:>12.1f}"
            f"{milliseconds(percentile(result.window.latencies, 0.5)):>11}"
            f"{milliseconds(result.append_p99):>8}"
            f"{milliseconds(percentile(measured.commit_seconds, 0.5)):>11}"
            f"{milliseconds(result.commit_p99):>8}{len(measured.checkpoint_seconds):>12,}"
            f"{checkpoint_p99:>8}{busy:>12.0%}"
        )


async def main_async(arguments: argparse.Namespace) -> None:
    """Run every case and print the tables."""
    started = time.perf_counter()
    print(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"python {platform.python_implementation()} {sys.version.split()[0]}, ", end="")
    print(f"sqlite {sqlite3.sqlite_version}, asyncpg {asyncpg.__version__}")
    print(f"machine: {platform.platform()}, {cpu_model()}, {os.cpu_count()} logical CPUs")
    temp = tempfile.gettempdir()
    print(f"SQLite files in {temp} ({filesystem(temp)})")
    print(f"command: python -m bench.store {' '.join(sys.argv[1:])}".rstrip())
    print(f"load average at start: {load()}")
    admin_url = arguments.postgres
    stores = ["sqlite"]
    if admin_url != "none":
        settings = await postgres_settings(admin_url)
        if settings is not None:
            print(f"PostgreSQL at {admin_url}: {settings}")
            stores.append("postgres")
    print(
        f"each case: a fresh file or database, {arguments.warmup:g} s warm-up, "
        f"{arguments.seconds:g} s measured; store options: defaults (max_delay 0, max_batch"
        f" {SQLITE_MAX_BATCH} for SQLite, {POSTGRES_MAX_BATCH} for PostgreSQL)"
    )
    stream = await capture_appends(arguments.seed)
    print(f"append stream ({', '.join(f'{v} {p}p' for v, p in CAPTURE_GAMES)}):")
    print(f"  {describe_stream(stream)}")

    print()
    print("== 1 and 2. The store layer, each case followed by its raw reference ==")
    cases = [(tables, 0.0) for tables in arguments.concurrency]
    cases += [(TARGET_TABLES, pace) for pace in arguments.paces]
    results: list[StoreResult] = []
    pairs: list[Pair] = []
    for store in stores:
        for tables, pace in cases:
            repeats = arguments.repeats if tables == TARGET_TABLES and not pace else 1
            for repeat in range(repeats):
                async with fresh_database(store, admin_url) as url:
                    result = await store_case(
                        url, store, tables, stream, arguments.warmup, arguments.seconds, pace
                    )
                result.run = f"{repeat + 1}/{repeats}" if repeats > 1 else ""
                results.append(result)
                progress = (
                    f"  {store} {tables:,} tables{f' run {result.run}' if result.run else ''}, "
                    f"offered {result.offered}: "
                    f"{result.events_per_s:,.0f} events/s, "
                    f"append p99 {milliseconds(result.append_p99)} ms"
                )
                if not pace:
                    raw = [
                        await raw_reference(
                            store,
                            admin_url,
                            stream,
                            tables,
                            result.measured.batch,
                            arguments.warmup,
                            arguments.seconds,
                            steps,
                        )
                        for _, steps in SQLITE_LADDER[:2]
                    ]
                    pairs.append(Pair(result, raw[0], raw[1]))
                    progress += f"; raw +summaries {raw[1].events_per_s:,.0f} events/s"
                print(progress, flush=True)

    print()
    print("== 1. The store layer: concurrent tables, one append at a time each ==")
    print_store_table(results)
    print(
        "(offered: appends/s the tables offer, Poisson; max: each table appends back to back, "
        "so latency = tables / throughput; append: the caller's await, queueing included; "
        "commit: the store's commit_seconds, BEGIN to COMMIT; checkpoints: the SQLite writer's "
        "WAL checkpoints between commits; writer busy: commits and checkpoints / window)"
    )

    print()
    print("== 2. The reference: the same rows, raw batches of the store's average size ==")
    print(
        f"{'store':9}{'tables':>7}{'run':>5}{'batch':>7}{'raw events-only':>16}"
        f"{'raw +summaries':>15}{'store':>10}{'store/raw':>10}{'store/raw events-only':>22}"
    )
    for pair in pairs:
        result = pair.result
        print(
            f"{result.store:9}{result.tables:>7,}{result.run:>5}{result.measured.batch:>7.1f}"
            f"{pair.events_only.events_per_s:>16,.0f}{pair.like_for_like.events_per_s:>15,.0f}"
            f"{result.events_per_s:>10,.0f}{pair.ratio:>10.2f}"
            f"{result.events_per_s / pair.events_only.events_per_s:>22.2f}"
        )
    print(
        "(events/s; each raw run right after its store case; batch: appends per transaction, "
        "as the store reached; +summaries: the table-summary row written with every append, as "
        "the store does: the like-for-like reference of store/raw)"
    )

    print()
    print(
        f"== 3. The table service: {arguments.tables} tables of random {arguments.variant} "
        f"({arguments.players} players) through TableActor =="
    )
    print(
        f"{'store':9}{'tables':>7}{'moves/s':>9}{'commands/s':>11}{'events/s':>9}{'txns':>7}"
        f"{'appends/txn':>12}{'command p50':>12}{'p99 ms':>8}{'driver share':>13}"
    )
    for store in stores:
        async with fresh_database(store, admin_url) as url:
            service = await service_case(
                url,
                store,
                arguments.tables,
                arguments.variant,
                arguments.players,
                arguments.seed,
                arguments.warmup,
                arguments.seconds,
            )
        window, measured = service.window, service.measured
        print(
            f"{store:9}{service.tables:>7,}{service.moves_per_s:>9,.0f}"
            f"{window.commands / measured.seconds:>11,.0f}"
            f"{window.events / measured.seconds:>9,.0f}{measured.transactions:>7,}"
            f"{measured.batch:>12.1f}{milliseconds(percentile(window.latencies, 0.5)):>12}"
            f"{milliseconds(percentile(window.latencies, 0.99)):>8}"
            f"{window.driver_seconds / measured.seconds:>13.0%}",
            flush=True,
        )
    print(
        "(every command carries a fresh id (so the actor looks it up first) and the last seq; "
        "appends/txn counts snapshots too; driver share: time the driver spent picking moves "
        "(legal_actions), in the same thread)"
    )

    print()
    print(
        f"== Targets at {TARGET_TABLES:,} tables: store/raw >= {TARGET_RATIO:.0%}, "
        f"p99 < {TARGET_P99_SECONDS * 1000:.0f} ms =="
    )
    missed: list[StoreResult] = []
    for store in stores:
        target = [pair for pair in pairs if pair.result.store == store]
        target = [pair for pair in target if pair.result.tables == TARGET_TABLES]
        if target:
            median = sorted(target, key=lambda pair: pair.ratio)[len(target) // 2]
            ratios = [pair.ratio for pair in target]
            appends = [pair.result.append_p99 for pair in target]
            commits = [pair.result.commit_p99 for pair in target]
            checks = [
                (f"store/raw {spread(ratios, '{:.2f}')}", median.ratio >= TARGET_RATIO),
                (
                    f"append p99 {spread(appends, '{:.1f}', 1000)} ms",
                    statistics.median(appends) < TARGET_P99_SECONDS,
                ),
                (
                    f"commit p99 {spread(commits, '{:.1f}', 1000)} ms",
                    statistics.median(commits) < TARGET_P99_SECONDS,
                ),
            ]
            line = "; ".join(f"{label} {verdict(ok)}" for label, ok in checks)
            print(f"{store:9}offered {'max':>8}: {line}")
            if not all(ok for _, ok in checks):
                missed.append(median.result)
        for result in results:
            if result.store != store or result.tables != TARGET_TABLES or not result.pace:
                continue
            line = "; ".join(
                f"{label} p99 {milliseconds(value)} ms {verdict(value < TARGET_P99_SECONDS)}"
                for label, value in (("append", result.append_p99), ("commit", result.commit_p99))
            )
            print(f"{store:9}offered {result.offered:>8}: {line}")
    if len(pairs) > len(stores) * len(arguments.concurrency):
        print(f"(back to back: the median of {arguments.repeats} runs, min-max in brackets)")
    if missed and arguments.profile:
        for result in missed:
            print()
            seconds = arguments.profile_seconds
            print(f"== Where the time goes: {result.store}, {TARGET_TABLES:,} tables ==")
            await ladder(result, admin_url, stream, arguments.warmup, arguments.seconds)
            print(f"cProfile, {seconds:g} s:")
            await profile_case(result.store, admin_url, TARGET_TABLES, stream, seconds)
    print()
    print(f"load average at end: {load()}; total {time.perf_counter() - started:.0f} s")


async def raw_reference(
    store: str,
    admin_url: str,
    stream: Sequence[Append],
    tables: int,
    average: float,
    warmup: float,
    seconds: float,
    steps: frozenset[str],
) -> RawResult:
    """One raw run on a fresh database holding the store's schema."""
    async with fresh_database(store, admin_url) as url:
        await (await open_store(url)).close()  # the store creates its own schema
        if store == "sqlite":
            return await asyncio.to_thread(
                raw_sqlite, sqlite_path(url), stream, tables, average, warmup, seconds, steps
            )
        return await raw_postgres(url, stream, tables, average, warmup, seconds, steps)


async def ladder(
    result: StoreResult, admin_url: str, stream: Sequence[Append], warmup: float, seconds: float
) -> None:
    """Raw runs adding the store's SQL step by step, then the store."""
    average = result.measured.batch
    steps = SQLITE_LADDER if result.store == "sqlite" else POSTGRES_LADDER
    print(f"raw {result.store}, batches of {average:.1f} appends, adding the store's work:")
    print(f"{'':52}{'events/s':>10}{'us/append':>10}")
    for label, step in steps:
        raw = await raw_reference(
            result.store, admin_url, stream, result.tables, average, warmup, seconds, step
        )
        appends = raw.batches * average
        print(f"{label:52}{raw.events_per_s:>10,.0f}{raw.seconds / appends * 1e6:>10.1f}")
    rest = "writer thread, futures" if result.store == "sqlite" else "writer task, futures"
    print(
        f"{f'+ {rest}, asyncio (the store, run {result.run or 1})':52}"
        f"{result.events_per_s:>10,.0f}{1e6 / result.appends_per_s:>10.1f}"
    )


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short cases, for a smoke test")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("RAMINO_BENCH_POSTGRES", DEFAULT_POSTGRES),
        metavar="URL",
        help="a database URL on the server to create throw-away databases on ('none': skip)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per case")
    parser.add_argument("--warmup", type=float, help="seconds before measuring (default S/5)")
    parser.add_argument("--tables", type=int, default=200, help="tables in the service table")
    parser.add_argument("--variant", default="basic", help="preset played in the service table")
    parser.add_argument("--players", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of the back-to-back 1,000-table case"
    )
    parser.add_argument(
        "--no-profile", dest="profile", action="store_false", help="do not profile a missed case"
    )
    arguments = parser.parse_args()
    arguments.concurrency = CONCURRENCY
    arguments.paces = PACES
    if arguments.quick:
        arguments.seconds = min(arguments.seconds, 1.0)
        arguments.tables = min(arguments.tables, 50)
        arguments.repeats = 1
    if arguments.warmup is None:
        arguments.warmup = min(2.0, arguments.seconds / 5)
    arguments.profile_seconds = min(arguments.seconds, 3.0)
    asyncio.run(main_async(arguments))


if __name__ == "__main__":
    main()
