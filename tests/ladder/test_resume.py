"""``kill -9`` of ``ramino ladder run`` mid-run: the next start resumes, no match is counted
twice or lost.

The ladder runs as a subprocess in its own process group (its match workers with it) and
prints one JSON line per result once the result is durable; after ``KILL_AFTER`` lines the
test SIGKILLs the whole group, checks the store with a fresh connection, starts the ladder
again with the same arguments and lets it finish.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from server.ladder.events import (
    EntrantAdded,
    LadderEvent,
    MatchCancelled,
    MatchResult,
    MatchScheduled,
    decode_event,
)
from server.ladder.ratings import refit
from server.tables.store import open_store

ROOT = Path(__file__).resolve().parents[2]
MATCHES = 12
KILL_AFTER = 4
TIMEOUT = 240.0


def _command(url: str, matches: int = MATCHES) -> list[str]:
    return [
        sys.executable,
        "-m",
        "server.cli",
        "ladder",
        "run",
        "--store",
        url,
        "--ladder",
        "crash",
        "--pools",
        "knock-2,rummy500-3",
        "--matches",
        str(matches),
        "--concurrency",
        "2",
        "--seed",
        "kill",
        "--json",
    ]


def _text(path: Path) -> str:
    return path.read_text(errors="replace")


async def _log(url: str) -> list[LadderEvent]:
    store = await open_store(url)
    try:
        return [decode_event(row.payload) for row in await store.read("ladder:crash")]
    finally:
        await store.close()


async def _run_and_kill(url: str, errors: Path) -> list[str]:
    """Start the ladder, wait for ``KILL_AFTER`` results, SIGKILL its process group."""
    with errors.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *_command(url),
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    assert process.stdout is not None
    printed: list[str] = []
    try:
        async with asyncio.timeout(TIMEOUT):
            while len(printed) < KILL_AFTER:
                line = await process.stdout.readline()
                if not line:
                    pytest.fail(f"the ladder stopped early:\n{_text(errors)}")
                printed.append(json.loads(line)["match_id"])
        os.killpg(process.pid, signal.SIGKILL)
        async with asyncio.timeout(TIMEOUT):
            await process.wait()
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    assert -signal.SIGKILL == process.returncode
    return printed


async def _run_to_end(url: str, errors: Path) -> None:
    with errors.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *_command(url),
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        async with asyncio.timeout(TIMEOUT):
            status = await process.wait()
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    assert 0 == status, _text(errors)


async def test_sigkill_mid_run_resumes_without_double_or_lost_matches(
    store_url: str, tmp_path: Path
) -> None:
    """Every result printed before the kill is in the store; after the restart the ladder
    holds exactly ``MATCHES`` results, one per match id, every scheduled match has a result
    (none is lost), the results of the first run are unchanged, and the stored ratings still
    equal a refit of the whole history."""
    printed = await _run_and_kill(store_url, tmp_path / "first.err")
    before = await _log(store_url)
    stored = {e.match_id: e for e in before if isinstance(e, MatchResult)}
    assert set(printed) <= set(stored)
    assert len(stored) < MATCHES
    pending = {
        e.match_id for e in before if isinstance(e, MatchScheduled) and e.match_id not in stored
    }

    await _run_to_end(store_url, tmp_path / "second.err")
    after = await _log(store_url)
    assert before == after[: len(before)]
    scheduled = [e.match_id for e in after if isinstance(e, MatchScheduled)]
    results = [e for e in after if isinstance(e, MatchResult)]
    cancelled = [e.match_id for e in after if isinstance(e, MatchCancelled)]
    assert len(scheduled) == len(set(scheduled))
    assert MATCHES == len(results)
    assert len(results) == len({result.match_id for result in results})
    assert not cancelled
    assert sorted(scheduled) == sorted(result.match_id for result in results)
    assert pending <= {result.match_id for result in results}
    assert 5 == sum(1 for e in after if isinstance(e, EntrantAdded))
    fitted = refit(results)
    last: dict[tuple[str, str], tuple[float, float]] = {}
    for result in results:
        for index, name in enumerate(result.entrants):
            last[(result.pool, name)] = (result.mu[index], result.sigma[index])
    assert {key: (r.mu, r.sigma) for key, r in fitted.items()} == last


async def test_sigterm_stops_cleanly_and_the_next_start_finishes(
    sqlite_url: str, tmp_path: Path
) -> None:
    """SIGTERM stops an endless run with status 0 and says so; what it was playing stays
    pending and a bounded run afterwards plays it, so every scheduled match gets its result."""
    errors = tmp_path / "term.err"
    with errors.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *_command(sqlite_url, matches=0),
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(TIMEOUT):
            for _ in range(2):
                line = await process.stdout.readline()
                if not line:
                    pytest.fail(f"the ladder stopped early:\n{_text(errors)}")
            process.send_signal(signal.SIGTERM)
            await process.stdout.read()
            status = await process.wait()
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    assert 0 == status, _text(errors)
    assert "ladder stopped" in _text(errors)
    before = await _log(sqlite_url)
    done = sum(1 for e in before if isinstance(e, MatchResult))
    assert done >= 2
    await _run_to_end(sqlite_url, tmp_path / "after.err")
    after = await _log(sqlite_url)
    scheduled = sorted(e.match_id for e in after if isinstance(e, MatchScheduled))
    results = sorted(e.match_id for e in after if isinstance(e, MatchResult))
    assert scheduled == results
    assert max(MATCHES, done) == len(results)
