"""``ramino bots`` over Mosquitto and ``ramino demo`` end to end, as subprocesses."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from server.tables.replay import read_rows
from server.tables.store import open_store
from server.tables.table import empty_table, fold
from tests.net.conftest import MosquittoBroker, ensure_users, serving

ROOT = Path(__file__).resolve().parents[2]
RUN_SECONDS = 120.0


async def _ramino(*args: str, cwd: Path = ROOT) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server.cli",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        async with asyncio.timeout(RUN_SECONDS):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_ramino_bots_play_over_mosquitto(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    """Four knock bots (two tables) play a game each through Mosquitto with their accounts."""
    names = [f"rb-{index}" for index in range(1, 5)]
    for name in names:
        if name not in mosquitto.users:
            await mosquitto.add_user(name, "bots-pw")
    await ensure_users(mosquitto, names)
    async with serving(mosquitto, tmp_path) as server:
        status, out, err = await _ramino(
            "bots",
            "--broker",
            mosquitto.url,
            "--count",
            "4",
            "--variant",
            "knock",
            "--games",
            "1",
            "--prefix",
            "rb",
            "--password",
            "bots-pw",
        )
        assert 0 == status, err
        assert "2 games finished" in out
        assert "0 errors" in out
        finished = [
            actor.table
            for actor in server.service.actors.values()
            if actor.table.status == "finished"
        ]
    assert 2 == len(finished)
    assert all(set(table.seats) <= set(names) for table in finished)


async def test_ramino_demo_runs_twice_and_leaves_replayable_tables(tmp_path: Path) -> None:
    """The demo plays its tables to the end on the embedded broker, twice in a row on the same
    store, and prints how to replay them."""
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    for _ in range(2):
        status, out, err = await _ramino(
            "demo", "--port", "0", "--think-ms", "0", "--store", store, cwd=tmp_path
        )
        assert 0 == status, err
        assert "Done. 6 games finished" in out
        assert "ramino replay --store" in out
    events = await open_store(store)
    try:
        summaries = await events.tables()
        assert 12 == len(summaries)
        assert {"finished"} == {summary.status for summary in summaries}
        rows = await read_rows(events, summaries[0].table_id)
    finally:
        await events.close()
    state = empty_table(summaries[0].table_id)
    for row in rows:
        state = fold(state, row.record, row.seq)
    assert "finished" == state.status
