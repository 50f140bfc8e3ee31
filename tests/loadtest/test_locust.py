"""A short headless Locust run of loadtest/locustfile.py against ``ramino serve`` on Mosquitto.

Locust runs in a subprocess (it patches the standard library with gevent as it is imported);
the server runs in this test's event loop, so that its event store is the truth every message
the load players received is checked against: whole games finished, no unexpected error, and
no card of another seat (or of the stock) in any message.
"""

from __future__ import annotations

import asyncio
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec
import pytest

from loadtest.recording import read_recording
from protocol.transport import Message
from server.net.accounts import random_password
from server.net.gateway import Limits
from tests.net.conftest import MosquittoBroker, serving
from tests.net.players import Inbox, Truth, card_leaks, states_by_seq

ROOT = Path(__file__).resolve().parents[2]
USERS = 24
RUN_SECONDS = 18
PREFIX = "ci"


def _by_table_and_seat(
    name: str, messages: list[tuple[str, bytes]]
) -> dict[tuple[str, int], Inbox]:
    """The messages of one player, split by the table they are about and the seat it held
    there when each arrived (from the updates and resyncs it got)."""
    seats: dict[str, int] = {}
    parts: dict[tuple[str, int], Inbox] = defaultdict(lambda: Inbox(name))
    for topic, payload in messages:
        decoded = msgspec.msgpack.decode(payload) if payload else None
        if not isinstance(decoded, dict):
            continue
        table = decoded.get("table", "")
        if decoded.get("type") == "update":
            seats[table] = int(decoded["seat"])
        result = decoded.get("result")
        if isinstance(result, dict) and result.get("type") == "synced":
            seats[table] = int(result["seat"])
        if isinstance(table, str) and table:
            parts[(table, seats.get(table, -1))].messages.append(Message(topic, payload))
    return parts


async def _run_module(seconds: float, *arguments: str) -> tuple[int, str]:
    """``python -m ARGUMENTS`` from the checkout, killed after ``seconds``: its exit status and
    its output (stdout and stderr together)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        *arguments,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(seconds):
            output, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, output.decode(errors="replace")


async def _run_locust(arguments: list[str]) -> tuple[int, str]:
    return await _run_module(RUN_SECONDS + 60, "locust", *arguments)


async def test_a_short_run_plays_whole_games_without_errors_or_leaks(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    password = random_password()
    for number in range(1, USERS + 1):
        await mosquitto.add_user(f"{PREFIX}0-{number}", password)
    record, summary_file = tmp_path / "received", tmp_path / "summary.json"
    async with serving(mosquitto, tmp_path, limits=Limits()) as server:
        status, output = await _run_locust(
            [
                "-f",
                str(ROOT / "loadtest" / "locustfile.py"),
                "--headless",
                "--only-summary",
                "-u",
                str(USERS),
                "-r",
                str(USERS),
                "-t",
                f"{RUN_SECONDS}s",
                "--stop-timeout",
                "3",
                "--host",
                mosquitto.url,
                "--ramino-prefix",
                PREFIX,
                "--ramino-password",
                password,
                "--ramino-variants",
                "basic,gin,knock",
                "--ramino-drop-every",
                "6",
                "--ramino-record",
                str(record),
                "--ramino-summary",
                str(summary_file),
                "SteadyPlayer",
                "ReconnectPlayer",
                "ChatPlayer",
                "HostilePlayer",
            ]
        )
        summary: dict[str, Any] = json.loads(summary_file.read_text())
        truths: dict[str, dict[int, Truth]] = {}
        leaks: list[str] = []
        checked = 0
        for path in sorted(record.glob("*.msgpack")):
            parts = _by_table_and_seat(path.stem, read_recording(path))
            for (table, seat), inbox in parts.items():
                if table not in truths:
                    truths[table] = await states_by_seq(server.store, table)
                leaks += card_leaks(inbox, seat if seat >= 0 else None, truths[table], table)
                checked += len(inbox.messages)
    assert 0 == status, output
    assert summary["games_finished"] > 0, output
    assert 0 == summary["failures"], (summary["errors_by_code"], output)
    assert summary["passed"], output
    assert summary["resyncs"] > 0, output  # the reconnect storms made players catch up
    # One player process did all the work: it used some CPU, at most about one core (gevent).
    assert 0 < summary["generator_cpu"] < 150, output
    assert summary["generator_saturated"] == (
        max(summary["generator_cpu"], summary["generator_cpu_peak"]) > 90
    ), output
    assert checked > 1000
    assert [] == leaks


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


async def _ramino_loadtest(*arguments: str) -> tuple[int, str]:
    """``ramino loadtest ARGUMENTS`` in a subprocess: its exit status and output."""
    return await _run_module(90, "server.cli", "loadtest", *arguments)


async def test_ramino_loadtest_exits_1_when_the_p99_threshold_is_missed() -> None:
    # A p99 of 0 ms cannot be met over a broker: the run must fail on that threshold alone.
    # A CPU limit of 0% for the load generator: any run counts as saturated, which is reported
    # and does not change the verdict.
    status, output = await _ramino_loadtest(
        "--local",
        "--scenario",
        "steady",
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "8s",
        "--variants",
        "gin",
        "--p99-ms",
        "0",
        "--generator-cpu-limit",
        "0",
    )
    assert 1 == status, output
    assert "(threshold 0 ms: MISSED)" in output
    assert "error rate 0.0000% (threshold 1.00%: ok)" in output
    assert "ramino loadtest: scenario steady: FAIL" in output
    assert "(limit 0%: SATURATED)" in output
    assert "LOAD GENERATOR SATURATED)" in output


@pytest.mark.parametrize("processes", [0, 2])
async def test_the_timeline_counts_the_commands_of_every_player_process(
    tmp_path: Path, processes: int
) -> None:
    # With --processes 2 the master runs no player of its own: every command time in its
    # timeline came from a worker's reports.
    timeline, prefix = tmp_path / "timeline.csv", tmp_path / "run"
    status, output = await _ramino_loadtest(
        "--local",
        "--scenario",
        "steady",
        "-u",
        "6",
        "-r",
        "6",
        "-t",
        "8s",
        "--variants",
        "gin",
        "--processes",
        str(processes),
        "--timeline",
        str(timeline),
        "--timeline-every",
        "2",
        "--csv",
        str(prefix),
    )
    assert 0 == status, output
    rows, stats = _csv_rows(timeline), _csv_rows(Path(f"{prefix}_stats.csv"))
    commands = sum(int(row["Request Count"]) for row in stats if row["Type"] == "command")
    counted = sum(int(row["commands"]) for row in rows)
    assert len(rows) >= 3, rows  # a row every 2 s of an 8-s run
    # The rows hold the commands whose times reached the writer before the last row (with
    # workers, whose reports come every 3 s, the last seconds of a short run may be missing)
    # and none twice (a double count would be near twice the run's; Locust's final figures are
    # taken as the players stop, so a few commands may fall on either side).
    assert 0 < counted < commands * 1.1, (rows, commands)
    assert any(row["p99_ms"] for row in rows), rows
    assert max(int(row["users"]) for row in rows) == 6, rows
    # --local gives the timeline the server's /metrics: its memory in every row it could read.
    assert all(float(row["server_rss_mib"]) > 0 for row in rows if row["server_rss_mib"]), rows
    assert any(row["server_rss_mib"] for row in rows), rows
