"""The event store interface every backend implements, and ``open_store`` to pick one by URL.

A table's whole life is its event stream: rows ``(table_id, seq)`` with ``seq`` counting from 1
without gaps, each holding one encoded event, the server time it was appended and the id of
the client command that produced it (empty for events the server produced by itself: deals,
timers). Appends are optimistic: the writer says which ``seq`` it saw last, and the append
fails with ``SeqConflict`` if anyone else has appended since, so two writers can never both
take the same ``seq``. Snapshots are a cache of the folded state at some ``seq``.

Backends group-commit: appends from every table that arrive within a few milliseconds share
one transaction, and each caller is answered only after that transaction is durable.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from server.tables.errors import SeqConflict, StoreConfigError

__all__ = [
    "EventStore",
    "NewEvent",
    "Snapshot",
    "StoreStats",
    "StoredEvent",
    "TableSummary",
    "Tail",
    "open_store",
    "store_options",
]


class NewEvent(msgspec.Struct, frozen=True):
    """An event to append: its encoded form and the server time it happened."""

    payload: bytes
    at: float


class StoredEvent(msgspec.Struct, frozen=True):
    """One row of a table's stream."""

    table_id: str
    seq: int
    at: float
    command_id: str
    payload: bytes


class Snapshot(msgspec.Struct, frozen=True):
    """The encoded state of a table after event ``seq``."""

    table_id: str
    seq: int
    payload: bytes


class Tail(msgspec.Struct, frozen=True):
    """What loading a table reads: its latest snapshot (if any) and the events from the
    snapshot's own event on (all of them without a snapshot), as parallel lists."""

    snapshot: Snapshot | None
    seqs: list[int]
    ats: list[float]
    payloads: list[bytes]


@dataclass
class StoreStats:
    """Counters a store keeps for benchmarks: transactions, requests and commit times (s)."""

    transactions: int = 0
    appends: int = 0
    commit_seconds: list[float] = field(default_factory=list)
    checkpoint_seconds: list[float] = field(default_factory=list)
    """WAL checkpoints the SQLite writer ran between commits (none for PostgreSQL)."""
    observer: Callable[[float, int], None] | None = None
    """Told of each commit: its duration (s) and its appends (the server's metrics)."""

    def committed(self, seconds: float, appends: int) -> None:
        """Count a transaction of ``appends`` appends that took ``seconds`` to commit."""
        self.transactions += 1
        self.appends += appends
        self.commit_seconds.append(seconds)
        if self.observer is not None:
            self.observer(seconds, appends)


class TableSummary(msgspec.Struct, frozen=True):
    """What ``ramino tables`` lists about a table; written with the append that changes it."""

    table_id: str
    variant: str
    status: str
    seats: tuple[str, ...]
    last_seq: int = 0
    updated_at: float = 0.0
    host: str = ""
    """Who created the table (kept by the PostgreSQL store: workers count quotas on it)."""


class EventStore(Protocol):
    """Durable, append-only storage of table event streams."""

    async def append(
        self,
        table_id: str,
        after_seq: int,
        events: Sequence[NewEvent],
        command_id: str = "",
        summary: TableSummary | None = None,
    ) -> int:
        """Append ``events`` as ``after_seq + 1, ...``; return the new last ``seq``.

        The events and the summary are durable when this returns.

        Raises:
            SeqConflict: the table's last ``seq`` is not ``after_seq``.
            StoreClosed: the store was closed.
        """
        ...

    async def read(self, table_id: str, after_seq: int = 0) -> list[StoredEvent]:
        """Every event of ``table_id`` after ``after_seq``, in order."""
        ...

    async def last_seq(self, table_id: str) -> int:
        """The table's last ``seq`` (0 for a table with no events)."""
        ...

    async def command_seqs(self, table_id: str, command_id: str) -> tuple[int, int] | None:
        """The first and last ``seq`` of the events command ``command_id`` produced, if any."""
        ...

    async def save_snapshot(self, table_id: str, seq: int, payload: bytes) -> None:
        """Store the encoded state after ``seq`` (replacing older snapshots of the table)."""
        ...

    async def save_refusal(self, table_id: str, command_id: str, payload: bytes) -> None:
        """Remember the encoded reply that refused command ``command_id`` (durable on return;
        the first one is kept), so a retry gets the same answer, also after a restart."""
        ...

    async def refusal(self, table_id: str, command_id: str) -> bytes | None:
        """The reply that refused command ``command_id``, if one was saved."""
        ...

    async def latest_snapshot(self, table_id: str) -> Snapshot | None:
        """The most recent snapshot of ``table_id``, if any."""
        ...

    async def tables(self) -> list[TableSummary]:
        """Every table with its latest summary, most recently active first."""
        ...

    async def close(self) -> None:
        """Finish pending writes and release the backend."""
        ...


# For the backends: checking a group-commit batch against the tables' last seqs -----------------


class AppendRequest(Protocol):
    """What a backend's queued append carries (its own class adds how to answer the caller)."""

    @property
    def table_id(self) -> str: ...
    @property
    def after_seq(self) -> int: ...
    @property
    def events(self) -> Sequence[NewEvent]: ...
    @property
    def command_id(self) -> str: ...
    @property
    def summary(self) -> TableSummary | None: ...


EventRow = tuple[str, int, float, str, bytes]
"""``(table_id, seq, at, command_id, payload)``: one row of ``events``."""


@dataclass(slots=True)
class BatchPlan:
    """The rows a batch of appends writes, and each append's answer, as ``plan_appends`` made.

    ``summaries`` and ``touched`` name disjoint tables: a table whose summary the batch writes
    is in ``summaries`` only (with the seq and time the batch leaves it at).
    """

    outcomes: list[int | SeqConflict]
    """Per append, in order: its new last seq, or the conflict that refuses it."""
    events: list[EventRow]
    summaries: dict[str, tuple[TableSummary, int, float]]
    """table_id -> (summary, last_seq, updated_at): the ``tables`` row to write whole."""
    touched: dict[str, tuple[int, float]]
    """table_id -> (last_seq, updated_at): ``tables`` rows that only move on."""
    conflicts: int = 0


def plan_appends(appends: Sequence[AppendRequest], heads: dict[str, int]) -> BatchPlan:
    """Check ``appends`` in order against ``heads`` (table_id -> last seq) and lay out the rows.

    An append whose ``after_seq`` is not its table's last seq, counting the appends before it
    in the batch, is refused alone with ``SeqConflict``; the others get consecutive seqs.
    ``heads`` must hold every table of ``appends`` and is left at the seqs the batch reaches.
    """
    outcomes: list[int | SeqConflict] = []
    rows: list[EventRow] = []
    summaries: dict[str, tuple[TableSummary, int, float]] = {}
    touched: dict[str, tuple[int, float]] = {}
    conflicts = 0
    for request in appends:
        table_id = request.table_id
        current = heads[table_id]
        if request.after_seq != current:
            outcomes.append(
                SeqConflict(
                    f"table {table_id!r} is at seq {current}, not {request.after_seq}", current
                )
            )
            conflicts += 1
            continue
        seq = current
        command_id = request.command_id
        events = request.events
        for event in events:
            seq += 1
            rows.append((table_id, seq, event.at, command_id, event.payload))
        heads[table_id] = seq
        summary = request.summary
        if summary is not None:
            summaries[table_id] = (summary, seq, events[-1].at if events else summary.updated_at)
            touched.pop(table_id, None)
        elif events:
            written = summaries.get(table_id)
            if written is not None:
                summaries[table_id] = (written[0], seq, events[-1].at)
            else:
                touched[table_id] = (seq, events[-1].at)
        outcomes.append(seq)
    return BatchPlan(outcomes, rows, summaries, touched, conflicts)


@functools.lru_cache(maxsize=4096)
def seats_json(seats: tuple[str, ...]) -> str:
    """``seats`` as the JSON array the stores keep (cached: a table's seats rarely change)."""
    return json.dumps(list(seats))


STORE_OPTIONS = ("max_batch", "max_delay", "cache_kib")
"""Options a store URL may carry in its query (``?max_batch=128&max_delay=0.002``): the
writer's, and SQLite's page cache per connection (``cache_kib``)."""


def store_options(url: str) -> tuple[str, dict[str, float]]:
    """``url`` without the writer options of its query, and those options.

    >>> store_options("sqlite:///ramino.db?max_batch=32")
    ('sqlite:///ramino.db', {'max_batch': 32.0})

    Raises:
        StoreConfigError: an option is not a positive number.
    """
    base, question, query = url.partition("?")
    if not question:
        return url, {}
    options: dict[str, float] = {}
    kept: list[str] = []
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key not in STORE_OPTIONS:
            kept.append(pair)
            continue
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if number < 0 or (key in ("max_batch", "cache_kib") and number < 1):
            raise StoreConfigError(f"store option {key}={value!r}: a positive number is needed")
        options[key] = number
    return (f"{base}?{'&'.join(kept)}" if kept else base), options


async def open_store(url: str, **options: float) -> EventStore:
    """Open the store at ``url``: ``sqlite:///PATH`` (or a bare path) or ``postgresql://...``;
    its query may set the writer's ``max_batch`` and ``max_delay``, and SQLite's ``cache_kib``
    (``options`` win).

    Raises:
        StoreConfigError: the URL names no supported backend, or a bad option.
    """
    url, from_url = store_options(url)
    options = {**from_url, **options}
    if url.startswith(("postgresql://", "postgres://")):
        from server.tables.postgres_store import PostgresStore

        if "cache_kib" in options:
            raise StoreConfigError("store option cache_kib: SQLite only")
        return await PostgresStore.open(url, **options)
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        if path.startswith("/") and path[1:2] == "/":
            path = path[1:]  # sqlite:////abs/path
        elif path.startswith("/"):
            path = path[1:] or ":memory:"  # sqlite:///relative/path
    elif "://" in url:
        raise StoreConfigError(f"unsupported store URL {url!r}: use sqlite:/// or postgresql://")
    else:
        path = url
    from server.tables.sqlite_store import SqliteStore

    return await SqliteStore.open(path, **options)
