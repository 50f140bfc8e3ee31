"""The event stores (SQLite file and PostgreSQL) keep the same promises."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from server.tables.errors import SeqConflict, StoreClosed, StoreConfigError
from server.tables.sqlite_store import SqliteStore
from server.tables.store import EventStore, NewEvent, TableSummary, open_store, store_options


def _events(*payloads: bytes, at: float = 1.0) -> list[NewEvent]:
    return [NewEvent(payload=payload, at=at + index) for index, payload in enumerate(payloads)]


async def test_appended_events_read_back_in_order_with_their_seq(store: EventStore) -> None:
    """Events get consecutive seqs from 1 and read back with time, command id and payload."""
    last = await store.append("t1", 0, _events(b"a", b"b"), command_id="c1")
    last = await store.append("t1", last, _events(b"c", at=5.0))
    rows = await store.read("t1")
    expected = [(1, 1.0, "c1", b"a"), (2, 2.0, "c1", b"b"), (3, 5.0, "", b"c")]
    assert expected == [(row.seq, row.at, row.command_id, row.payload) for row in rows]
    assert 3 == last == await store.last_seq("t1")
    assert [3] == [row.seq for row in await store.read("t1", after_seq=2)]


async def test_an_append_after_an_old_seq_is_refused_and_changes_nothing(
    store: EventStore,
) -> None:
    """A writer that did not see the latest event gets SeqConflict with the current seq."""
    await store.append("t1", 0, _events(b"a", b"b"))
    with pytest.raises(SeqConflict) as caught:
        await store.append("t1", 1, _events(b"x"))
    assert 2 == caught.value.current
    assert "store/seq_conflict" == caught.value.code
    assert [b"a", b"b"] == [row.payload for row in await store.read("t1")]


async def test_an_append_past_the_end_is_refused(store: EventStore) -> None:
    """No gap can open in a stream: after_seq must be the last seq exactly."""
    with pytest.raises(SeqConflict):
        await store.append("t1", 3, _events(b"a"))
    assert 0 == await store.last_seq("t1")


async def test_racing_writers_for_one_seq_produce_exactly_one_winner(store: EventStore) -> None:
    """Of many concurrent appends after the same seq, one commits and the rest conflict."""
    await store.append("t1", 0, _events(b"first"))
    results = await asyncio.gather(
        *(store.append("t1", 1, _events(bytes([n]))) for n in range(20)),
        return_exceptions=True,
    )
    winners = [result for result in results if result == 2]
    conflicts = [result for result in results if isinstance(result, SeqConflict)]
    assert (1, 19) == (len(winners), len(conflicts))
    assert [1, 2] == [row.seq for row in await store.read("t1")]


async def test_concurrent_tables_append_independently(store: EventStore) -> None:
    """Appends to 200 tables at once all succeed and each stream holds its own events."""

    async def play(table: int) -> int:
        last = 0
        for move in range(5):
            last = await store.append(f"t{table}", last, _events(f"{table}:{move}".encode()))
        return last

    results = await asyncio.gather(*(play(table) for table in range(200)))
    assert [5] * 200 == results
    rows = await store.read("t137")
    assert [f"137:{move}".encode() for move in range(5)] == [row.payload for row in rows]


async def test_a_command_id_finds_the_events_it_produced(store: EventStore) -> None:
    """The seqs a command produced are found by its id; an unknown id finds nothing."""
    await store.append("t1", 0, _events(b"a"), command_id="join")
    await store.append("t1", 1, _events(b"b", b"c"), command_id="move-1")
    assert (2, 3) == await store.command_seqs("t1", "move-1")
    assert await store.command_seqs("t1", "move-2") is None
    assert await store.command_seqs("t2", "move-1") is None


async def test_the_latest_snapshot_replaces_older_ones(store: EventStore) -> None:
    """A table keeps its most recent snapshot."""
    assert await store.latest_snapshot("t1") is None
    await store.save_snapshot("t1", 10, b"ten")
    await store.save_snapshot("t1", 20, b"twenty")
    snapshot = await store.latest_snapshot("t1")
    assert snapshot is not None
    assert (20, b"twenty") == (snapshot.seq, snapshot.payload)


async def test_table_summaries_list_the_most_recent_first(store: EventStore) -> None:
    """Summaries written with appends list tables with their last seq, newest first."""
    old = TableSummary("old", "basic", "playing", ("ann", "bob"))
    new = TableSummary("new", "gin", "waiting", ("cy",))
    await store.append("old", 0, _events(b"a", at=10.0), summary=old)
    await store.append("new", 0, _events(b"a", at=20.0), summary=new)
    await store.append("old", 1, _events(b"b", at=30.0))
    listed = await store.tables()
    expected = [
        ("old", "basic", "playing", ("ann", "bob"), 2, 30.0),
        ("new", "gin", "waiting", ("cy",), 1, 20.0),
    ]
    assert expected == [
        (t.table_id, t.variant, t.status, t.seats, t.last_seq, t.updated_at) for t in listed
    ]


async def test_events_survive_closing_and_reopening(store_url: str) -> None:
    """What an append acknowledged is there after the store is reopened."""
    first = await open_store(store_url)
    await first.append("t1", 0, _events(b"a", b"b"))
    await first.close()
    second = await open_store(store_url)
    try:
        assert [b"a", b"b"] == [row.payload for row in await second.read("t1")]
    finally:
        await second.close()


async def test_a_closed_store_refuses_appends(store_url: str) -> None:
    """After close, appends fail with a coded error instead of hanging."""
    opened = await open_store(store_url)
    await opened.close()
    with pytest.raises(StoreClosed):
        await opened.append("t1", 0, _events(b"a"))


async def test_appends_queued_together_are_checked_in_order(store: EventStore) -> None:
    """Appends that share a transaction build on each other in queue order; a stale one
    among them fails alone."""
    summary = TableSummary("t1", "basic", "playing", ("ann", "bob"))
    results = await asyncio.gather(
        store.append("t1", 0, _events(b"a"), summary=summary),
        store.append("t1", 1, _events(b"b", b"c")),
        store.append("t2", 0, _events(b"x")),
        store.append("t1", 1, _events(b"stale")),
        store.append("t1", 3, _events(b"d", at=9.0)),
        return_exceptions=True,
    )
    assert [1, 3, 1] == list(results[:3])
    assert isinstance(results[3], SeqConflict)
    assert 4 == results[4]
    assert [b"a", b"b", b"c", b"d"] == [row.payload for row in await store.read("t1")]
    listed = {table.table_id: (table.last_seq, table.updated_at) for table in await store.tables()}
    assert {"t1": (4, 9.0)} == listed


async def test_an_append_without_events_writes_its_summary_and_keeps_the_seq(
    store: EventStore,
) -> None:
    """An empty append checks the seq like any other, writes the summary and returns the seq."""
    await store.append("t1", 0, _events(b"a"))
    summary = TableSummary("t1", "gin", "waiting", ("cy",), updated_at=7.0)
    assert 1 == await store.append("t1", 1, [], summary=summary)
    with pytest.raises(SeqConflict):
        await store.append("t1", 0, [], summary=summary)
    listed = await store.tables()
    assert [("t1", "gin", "waiting", ("cy",), 1, 7.0)] == [
        (t.table_id, t.variant, t.status, t.seats, t.last_seq, t.updated_at) for t in listed
    ]


async def test_two_stores_on_one_database_see_each_others_appends(store_url: str) -> None:
    """A second writer's appends move the seq for the first: it accepts the new seq and refuses
    the one it last wrote itself."""
    first = await open_store(store_url)
    second = await open_store(store_url)
    try:
        summary = TableSummary("t1", "basic", "playing", ("ann", "bob"))
        assert 1 == await first.append("t1", 0, _events(b"a"), summary=summary)
        assert 2 == await second.append("t1", 1, _events(b"b"), summary=summary)
        with pytest.raises(SeqConflict) as caught:
            await first.append("t1", 1, _events(b"stale"), summary=summary)
        assert 2 == caught.value.current
        assert 3 == await first.append("t1", 2, _events(b"c"), summary=summary)
        assert 4 == await second.append("t1", 3, _events(b"d"))
        assert [b"a", b"b", b"c", b"d"] == [row.payload for row in await first.read("t1")]
    finally:
        await first.close()
        await second.close()


async def _insert_behind_the_store(url: str, table_id: str, seq: int, payload: bytes) -> None:
    """Write an event row directly, as a hand-written INSERT would (no summary update)."""
    if url.startswith("sqlite://"):
        import sqlite3

        path = url.removeprefix("sqlite://")
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
            connection.execute(
                "INSERT INTO events (table_id, seq, at, command_id, payload)"
                " VALUES (?, ?, 0, '', ?)",
                (table_id, seq, payload),
            )
        return
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        await connection.execute(
            "INSERT INTO events (table_id, seq, at, command_id, payload)"
            " VALUES ($1, $2, 0, '', $3)",
            table_id,
            seq,
            payload,
        )
    finally:
        await connection.close()


async def test_rows_written_behind_the_stores_back_still_decide_the_seq(
    store: EventStore, store_url: str
) -> None:
    """An event inserted by hand (its table summary left behind) is the table's last seq: an
    append after the older seq fails alone, one after the new seq succeeds."""
    summary = TableSummary("t1", "basic", "playing", ("ann", "bob"))
    await store.append("t1", 0, _events(b"a"), summary=summary)
    await store.append("t2", 0, _events(b"x"), summary=summary)
    await _insert_behind_the_store(store_url, "t1", 2, b"by hand")
    results = await asyncio.gather(
        store.append("t1", 1, _events(b"stale"), summary=summary),
        store.append("t2", 1, _events(b"y"), summary=summary),
        return_exceptions=True,
    )
    assert isinstance(results[0], SeqConflict)
    assert 2 == results[1]
    with pytest.raises(SeqConflict):
        await store.append("t1", 1, [], summary=summary)
    assert 3 == await store.append("t1", 2, _events(b"c"), summary=summary)
    assert [b"a", b"by hand", b"c"] == [row.payload for row in await store.read("t1")]
    assert [b"x", b"y"] == [row.payload for row in await store.read("t2")]


async def test_sqlite_a_broken_key_fails_only_its_request(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should a batch break the primary key after all (here: the writer is told stale seqs),
    it is redone request by request and only the request that takes an existing seq fails."""
    from server.tables.sqlite_store import SqliteStore

    store = await open_store(sqlite_url)
    try:
        await store.append("t1", 0, _events(b"a"))
        assert isinstance(store, SqliteStore)
        real = SqliteStore._last_seqs

        def stale(self: SqliteStore, connection: object, table_ids: set[str]) -> dict[str, int]:
            heads = real(self, connection, table_ids)  # type: ignore[arg-type]
            return {table_id: 0 if table_id == "t1" else last for table_id, last in heads.items()}

        monkeypatch.setattr(SqliteStore, "_last_seqs", stale)
        results = await asyncio.gather(
            store.append("t1", 0, _events(b"again")),
            store.append("t2", 0, _events(b"x")),
            return_exceptions=True,
        )
        monkeypatch.undo()
        assert isinstance(results[0], SeqConflict)
        assert 1 == results[1]
        assert [b"a"] == [row.payload for row in await store.read("t1")]
        assert 2 == await store.append("t1", 1, _events(b"b"))
    finally:
        await store.close()


def test_a_store_url_carries_writer_options() -> None:
    """``max_batch``/``max_delay`` leave the URL; other query parameters stay; nonsense fails."""
    assert store_options("sqlite:///r.db?max_batch=32&max_delay=0.002") == (
        "sqlite:///r.db",
        {"max_batch": 32.0, "max_delay": 0.002},
    )
    assert store_options("postgresql://h/db?sslmode=disable&max_batch=200") == (
        "postgresql://h/db?sslmode=disable",
        {"max_batch": 200.0},
    )
    assert store_options("sqlite:///r.db") == ("sqlite:///r.db", {})
    for bad in ("max_batch=0", "max_batch=many", "max_delay=-1"):
        with pytest.raises(StoreConfigError):
            store_options(f"sqlite:///r.db?{bad}")


async def test_the_sqlite_cache_size_rides_in_the_url_and_only_for_sqlite(tmp_path: Path) -> None:
    assert store_options("sqlite:///r.db?cache_kib=4096") == ("sqlite:///r.db", {"cache_kib": 4096})
    with pytest.raises(StoreConfigError):
        store_options("sqlite:///r.db?cache_kib=0")
    with pytest.raises(StoreConfigError, match="SQLite only"):
        await open_store("postgresql://127.0.0.1:1/none?cache_kib=4096")
    store = await open_store(f"sqlite:///{tmp_path}/cache.db?cache_kib=2048")
    try:
        assert isinstance(store, SqliteStore)
        pragma = "PRAGMA cache_size"
        assert (-2048,) == store._writer_connection.execute(pragma).fetchone()
        assert (-2048,) == store._reader_connection.execute(pragma).fetchone()
    finally:
        await store.close()


async def test_the_url_options_reach_the_writer(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/options.db?max_batch=7")
    try:
        assert isinstance(store, SqliteStore)
        assert 7 == store.max_batch
    finally:
        await store.close()


async def test_sqlite_the_writer_keeps_the_wal_small_between_commits(tmp_path: Path) -> None:
    """The writer checkpoints the WAL itself (SQLite's own checkpoint inside a COMMIT is off),
    often enough that the WAL stays near ``CHECKPOINT_FRAMES`` pages, and nothing is lost."""
    from server.tables.sqlite_store import CHECKPOINT_FRAMES

    path = tmp_path / "checkpoints.db"
    store = await SqliteStore.open(str(path))
    payload = bytes(600)
    try:

        async def table(index: int) -> int:
            last = 0
            for _ in range(12):
                last = await store.append(f"t{index}", last, _events(payload, payload))
            return last

        lasts = await asyncio.gather(*(table(index) for index in range(300)))
        assert {24} == set(lasts)
        assert store.stats.checkpoint_seconds  # the writer ran its checkpoints
        (page_size,) = store._writer_connection.execute("PRAGMA page_size").fetchone()
        largest_commit = 64 * 4  # generous: two event rows and a summary per append
        wal = path.with_name(path.name + "-wal").stat().st_size
        assert wal <= (CHECKPOINT_FRAMES * 2 + largest_commit) * (page_size + 24)
        assert 24 == len(await store.read("t299"))
    finally:
        await store.close()
