"""The memory report (``RAMINO_TRACEMALLOC``, SIGUSR1) and SQLite's share of the memory."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.net.memory import MemoryReporter, sqlite_memory_bytes, start_tracing, traced_bytes
from server.tables.store import NewEvent, open_store
from tests.net.test_metrics import scrape

ROOT = Path(__file__).resolve().parents[2]

MIB = 2**20


def _hold() -> list[bytes]:
    return [bytes(1000) for _ in range(4000)]  # about 4 MB, allocated on this line


HOLD_LINE = f"{__file__}:{_hold.__code__.co_firstlineno + 1}"


@pytest.fixture
def tracing() -> Iterator[None]:
    was = tracemalloc.is_tracing()
    yield
    if not was:
        tracemalloc.stop()


def test_tracing_starts_only_when_the_variable_asks_for_it(tracing: None) -> None:
    if tracemalloc.is_tracing():
        pytest.skip("this process already traces")
    assert 0 == start_tracing({})
    assert 0 == start_tracing({"RAMINO_TRACEMALLOC": "0"})
    assert not tracemalloc.is_tracing()
    assert traced_bytes() is None
    assert "python traced off" in MemoryReporter().report()
    assert 2 == start_tracing({"RAMINO_TRACEMALLOC": "2"})
    assert tracemalloc.is_tracing()
    assert tracemalloc.get_traceback_limit() == 2
    with pytest.raises(ValueError, match="invalid literal"):
        start_tracing({"RAMINO_TRACEMALLOC": "many"})


def test_a_second_report_names_the_line_that_grew_and_by_how_much(tracing: None) -> None:
    start_tracing({"RAMINO_TRACEMALLOC": "1"})
    reporter = MemoryReporter(limit=5)
    first = reporter.report()
    assert first.startswith("memory: rss ")
    kept = _hold()
    second = reporter.report().splitlines()
    assert second[1].endswith(HOLD_LINE), second  # the biggest growth comes first
    growth_kib = float(second[1].split("(")[1].split(" KiB")[0])
    assert 3900 <= growth_kib <= 4400  # 4,000 blocks of ~1,033 bytes
    del kept


async def test_the_sqlite_store_memory_is_bounded_by_its_cache(tmp_path: Path) -> None:
    """Each of the store's two connections caches at most ``cache_kib``: writing 12 MiB of
    events to a store with 1 MiB caches leaves SQLite holding about 2 MiB more, not 12."""
    before = sqlite_memory_bytes()
    if before is None:
        pytest.skip("sqlite3_memory_used is out of reach here")
    store = await open_store(f"sqlite:///{tmp_path / 'events.db'}?cache_kib=1024")
    try:
        payload = bytes(3000)
        for table in range(64):
            for seq in range(64):  # 64 tables x 64 events x 3,000 bytes = 12 MiB
                await store.append(f"t{table}", seq, [NewEvent(payload, 1.0)])
        for table in range(64):
            assert 64 == len(await store.read(f"t{table}", after_seq=0))  # the reader's cache
        held = sqlite_memory_bytes()
        assert held is not None
        # Two caches of 1 MiB, plus page headers, schemas and statements (well under 1 MiB).
        assert held - before < 3 * MIB, (held - before) / MIB
    finally:
        await store.close()


async def test_ramino_serve_traces_on_request_and_reports_on_sigusr1(tmp_path: Path) -> None:
    """With ``RAMINO_TRACEMALLOC=1``: the server says it traces, ``/metrics`` has Python's and
    SQLite's bytes, and each SIGUSR1 logs a memory report."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server.cli",
        "serve",
        "--port",
        "0",
        "--store",
        f"sqlite:///{tmp_path / 'events.db'}",
        "--metrics",
        "127.0.0.1:0",
        "--log-level",
        "warning",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "RAMINO_TRACEMALLOC": "1"},
    )
    assert process.stdout is not None
    assert process.stderr is not None
    announced: list[str] = []
    try:
        async with asyncio.timeout(60):
            while not any("SIGUSR1" in line for line in announced):
                line = (await process.stdout.readline()).decode()
                assert line, f"ramino serve ended early: {announced}"
                announced.append(line)
            port = next(
                int(found.group(1))
                for line in announced
                if (found := re.search(r"metrics on http://127\.0\.0\.1:(\d+)/", line))
            )
            _, seen = await scrape(port)
            process.send_signal(signal.SIGUSR1)
            report = ""
            while "memory: rss" not in report:
                line = (await process.stderr.readline()).decode()
                assert line, "ramino serve ended before reporting"
                report = line
            process.send_signal(signal.SIGTERM)
            assert 0 == await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert any("tracing Python's allocations (1 frame(s))" in line for line in announced)
    assert "gauge" == seen.families["ramino_python_traced_bytes"]
    assert "gauge" == seen.families["ramino_sqlite_memory_bytes"]
    assert seen.value("ramino_python_traced_bytes") > 0
    assert "python traced" in report
    assert "blocks:" in report  # the top lines
