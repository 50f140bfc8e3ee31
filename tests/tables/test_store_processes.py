"""Writers in separate processes racing on one table never share or skip a seq."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import pytest

from server.tables.store import open_store
from tests.tables.append_worker import payload_of

ROOT = Path(__file__).resolve().parents[2]
WORKERS = ("p0", "p1", "p2")
ATTEMPTS = 200
TIMEOUT = 120.0


async def _start(url: str, table_id: str, name: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.tables.append_worker",
        url,
        table_id,
        name,
        str(ATTEMPTS),
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _race(url: str, table_id: str) -> dict[str, list[str]]:
    """Run every worker at once; return the lines each printed after ``ready``."""
    processes = {name: await _start(url, table_id, name) for name in WORKERS}
    try:
        async with asyncio.timeout(TIMEOUT):
            for name, process in processes.items():
                assert process.stdout is not None
                line = await process.stdout.readline()
                if line != b"ready\n":
                    _, error = await process.communicate()
                    pytest.fail(f"worker {name} did not start: {line!r} {error.decode()}")
            for process in processes.values():
                assert process.stdin is not None
                process.stdin.write(b"go\n")
                await process.stdin.drain()
            outputs = await asyncio.gather(*(p.communicate() for p in processes.values()))
        printed: dict[str, list[str]] = {}
        for (name, process), (output, error) in zip(processes.items(), outputs):
            assert 0 == process.returncode, f"worker {name} failed: {error.decode()}"
            printed[name] = output.decode().splitlines()
        return printed
    finally:
        for process in processes.values():
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_writers_in_separate_processes_each_win_distinct_seqs_without_gaps(
    store_url: str,
) -> None:
    """Processes racing to append to one table get every seq from 1 exactly once, no gap."""
    printed = await _race(store_url, "shared")
    acknowledged: dict[bytes, int] = {}
    for name, lines in printed.items():
        acks = [line.split() for line in lines if line.startswith("ack ")]
        expected_attempts = list(range(ATTEMPTS))
        assert expected_attempts == [int(attempt) for _, attempt, _ in acks]
        acknowledged.update({payload_of(name, int(attempt)): int(seq) for _, attempt, seq in acks})
    store = await open_store(store_url)
    try:
        rows = await store.read("shared")
    finally:
        await store.close()
    total = len(WORKERS) * ATTEMPTS
    expected_seqs = list(range(1, total + 1))
    assert expected_seqs == [row.seq for row in rows]
    expected_counts = dict.fromkeys(acknowledged, 1)
    assert expected_counts == dict(Counter(row.payload for row in rows))
    assert acknowledged == {row.payload: row.seq for row in rows}
