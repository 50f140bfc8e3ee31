"""``kill -9`` at random moments loses no acknowledged command and leaves every log foldable.

A worker process (``crash_worker``) plays many tables through ``TableActor`` against a real
store and prints each acknowledged command; the test kills it with SIGKILL after a random
number of acknowledgements, again and again, and after every kill checks the store with a
fresh connection. At the end a last worker plays every table to the end of its game.

The seed is printed; set ``RAMINO_CRASH_SEED`` to replay a run's choices (the moment a kill
lands still depends on timing).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from server.engine import is_over
from server.tables.actor import TableActor, load_table
from server.tables.records import DeckCommitted, DeckRevealed, decode_record
from server.tables.store import EventStore, StoredEvent, open_store
from server.tables.table import CreateTable, TableState, empty_table, fold
from tests.tables.crash_worker import NullOutbox, Worker

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("RAMINO_CRASH_SEED", "20240917"))
TABLES = 20
KILLS = 20
WORKER_TIMEOUT = 60.0
"""Longest wait for one worker to reach its kill point (or to finish every table)."""


@dataclass(frozen=True)
class Ack:
    """A command the worker printed as acknowledged."""

    table_id: str
    command_id: str
    first_seq: int
    seq: int


@dataclass
class Ledger:
    """What the test knows across kills: acknowledgements and the logs already checked."""

    acks: list[Ack] = field(default_factory=list)
    logs: dict[str, list[bytes]] = field(default_factory=dict)
    """Payloads of each table's log as last checked (a log only ever grows)."""
    snapshots: set[str] = field(default_factory=set)
    """Tables seen with a snapshot that had a tail after it."""


def _parse(lines: Iterable[bytes]) -> list[Ack]:
    acks = []
    for line in lines:
        if line.startswith(b"ack ") and line.endswith(b"\n"):
            _, table_id, command_id, first, seq = line.decode().split()
            acks.append(Ack(table_id, command_id, int(first), int(seq)))
    return acks


async def _start(url: str, run: int, mode: str, errors: IO[bytes]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.tables.crash_worker",
        url,
        str(SEED),
        str(run),
        str(TABLES),
        mode,
        cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=errors,
    )


def _failure(errors_path: Path, what: str) -> str:
    return f"{what}; worker stderr:\n{errors_path.read_text(errors='replace')}"


async def _run_until_killed(url: str, run: int, target: int, errors_path: Path) -> list[Ack]:
    """Start a worker, let ``target`` commands be acknowledged, SIGKILL it; every ack seen."""
    with errors_path.open("wb") as errors:
        process = await _start(url, run, "play", errors)
    assert process.stdout is not None
    lines: list[bytes] = []
    try:
        async with asyncio.timeout(WORKER_TIMEOUT):
            ready = await process.stdout.readline()
            if not ready.startswith(b"ready "):
                pytest.fail(_failure(errors_path, f"worker {run} did not start: {ready!r}"))
            while len(lines) < target:
                line = await process.stdout.readline()
                if not line:
                    pytest.fail(_failure(errors_path, f"worker {run} stopped after {lines[-1:]}"))
                lines.append(line)
        process.send_signal(signal.SIGKILL)
        async with asyncio.timeout(WORKER_TIMEOUT):
            lines.extend((await process.stdout.read()).splitlines(keepends=True))
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    expected_status = -signal.SIGKILL
    assert expected_status == process.returncode, _failure(errors_path, "not killed")
    return _parse(lines)


async def _finish(url: str, run: int, errors_path: Path) -> list[Ack]:
    """Run a worker that plays every unfinished table to its end; its acks."""
    with errors_path.open("wb") as errors:
        process = await _start(url, run, "finish", errors)
    try:
        async with asyncio.timeout(WORKER_TIMEOUT):
            output, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert 0 == process.returncode, _failure(errors_path, "the finishing worker failed")
    lines = output.splitlines(keepends=True)
    expected_last = b"done\n"
    assert expected_last == lines[-1]
    return _parse(lines)


def _replay(table_id: str, rows: list[StoredEvent]) -> TableState:
    table = empty_table(table_id)
    for row in rows:
        table = fold(table, decode_record(row.payload), row.seq)
    return table


async def _check_table(
    store: EventStore, table_id: str, rows: list[StoredEvent], ledger: Ledger
) -> TableState | None:
    """Check one table's log against what was seen before; its replay if it changed."""
    expected_seqs = list(range(1, len(rows) + 1))
    assert expected_seqs == [row.seq for row in rows], table_id
    payloads = [row.payload for row in rows]
    before = ledger.logs.get(table_id, [])
    assert before == payloads[: len(before)], f"{table_id}: a checked row changed or vanished"
    if before == payloads:
        return None
    ledger.logs[table_id] = payloads
    replayed = _replay(table_id, rows)
    assert len(rows) == replayed.seq
    snapshot = await store.latest_snapshot(table_id)
    if snapshot is not None:
        assert snapshot.seq <= len(rows), f"{table_id}: snapshot after the log's end"
        if snapshot.seq < len(rows):
            ledger.snapshots.add(table_id)
    loaded = await load_table(store, table_id)
    assert replayed == loaded, f"{table_id}: snapshot + tail differs from the replay"
    return replayed


async def _check_store(url: str, ledger: Ledger, new_acks: list[Ack]) -> None:
    """Check every table and every acknowledgement so far, with a fresh connection."""
    store = await open_store(url)
    try:
        for ack in new_acks:
            expected = (ack.first_seq, ack.seq)
            assert expected == await store.command_seqs(ack.table_id, ack.command_id), ack
        summaries = {summary.table_id: summary for summary in await store.tables()}
        commands: dict[tuple[str, str], tuple[int, int]] = {}
        for table_id, summary in summaries.items():
            rows = await store.read(table_id)
            for row in rows:
                first, _ = commands.get((table_id, row.command_id), (row.seq, row.seq))
                commands[table_id, row.command_id] = (first, row.seq)
            replayed = await _check_table(store, table_id, rows, ledger)
            if replayed is not None:
                expected_summary = (replayed.status, replayed.seats, len(rows))
                assert expected_summary == (summary.status, summary.seats, summary.last_seq)
        for ack in ledger.acks:
            expected = (ack.first_seq, ack.seq)
            assert expected == commands.get((ack.table_id, ack.command_id)), ack
        assert set(ledger.logs) == set(summaries), "a table vanished"
    finally:
        await store.close()


def _kill_points(rng: random.Random) -> list[int]:
    """How many acknowledgements each run waits for: some none or few, most a game's worth."""
    return [rng.randint(0, 3) if run % 4 == 0 else rng.randint(10, 400) for run in range(KILLS)]


async def test_killed_workers_lose_no_acknowledged_command_and_leave_foldable_logs(
    store_url: str, tmp_path: Path
) -> None:
    """SIGKILL at random moments: acks survive, logs fold, snapshots agree, games end."""
    started = time.monotonic()
    rng = random.Random(SEED)
    kind = store_url.partition(":")[0]
    print(f"\n{kind}: crash test seed {SEED} (RAMINO_CRASH_SEED)")
    ledger = Ledger()
    errors_path = tmp_path / "worker.err"
    for run, target in enumerate(_kill_points(rng)):
        acks = await _run_until_killed(store_url, run, target, errors_path)
        assert target <= len(acks)
        ledger.acks.extend(acks)
        await _check_store(store_url, ledger, acks)
    acks = await _finish(store_url, KILLS, errors_path)
    ledger.acks.extend(acks)
    await _check_store(store_url, ledger, acks)
    store = await open_store(store_url)
    try:
        tables = [await load_table(store, table_id) for table_id in sorted(ledger.logs)]
    finally:
        await store.close()
    unfinished = [
        table.table_id for table in tables if table.game is None or not is_over(table.game)
    ]
    assert [] == unfinished
    assert TABLES <= len(tables)
    variants = Counter(table.created.variant for table in tables if table.created is not None)
    rematched = sum(table.game_number > 1 for table in tables)
    print(
        f"{kind}: {KILLS} kills, {len(ledger.acks)} acknowledged commands"
        f" ({len(acks)} by the finishing worker), {len(tables)} tables {dict(variants)}"
        f" ({rematched} with a rematch, {len(ledger.snapshots)} seen with snapshot + tail),"
        f" {time.monotonic() - started:.1f} s"
    )


async def test_every_hand_of_a_finished_game_has_its_deck_revealed(sqlite_url: str) -> None:
    """Each ``DeckCommitted`` of a game played to its end is followed by its ``DeckRevealed``."""
    store = await open_store(sqlite_url)
    try:
        actor = TableActor(empty_table("t"), store, NullOutbox(), rng=random.Random(SEED))
        actor.start()
        worker = Worker(store, SEED, 0, random.Random(SEED))
        with contextlib.redirect_stdout(io.StringIO()):  # the worker prints each ack
            await worker.submit(actor, "p0", CreateTable("knock", {"deals": 2}, seats=2))
            while await worker.step(actor):
                if actor.table.game is not None and is_over(actor.table.game):
                    break
        await actor.stop()
        events = [decode_record(row.payload).event for row in await store.read("t")]
    finally:
        await store.close()
    committed = [(e.game, e.hand) for e in events if isinstance(e, DeckCommitted)]
    revealed = [(e.game, e.hand) for e in events if isinstance(e, DeckRevealed)]
    expected_hands = [(1, 1), (1, 2)]
    assert expected_hands == committed
    assert committed == revealed
