"""The load player against a real server on Mosquitto: what it sends and what it counts."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from server.net.accounts import random_password
from tests.net.conftest import MosquittoBroker, serving

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "race"


async def test_an_answer_to_a_claim_window_that_closed_meanwhile_is_stale_not_a_failure(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """protocol §12: a command carries the seq the client decided from; if the table moved on
    (here the server closed the claim window when its time ran out), the reply is
    ``table/stale_seq`` with the present, which the load player expects. Sent with the newer
    seq its track had reached, the same answer is judged against the new state: refused with
    ``rules/not_your_turn`` (or another rule), the failure the soaks used to count."""
    password = random_password()
    for number in (1, 2, 3):
        await mosquitto.add_user(f"{PREFIX}{number}", password)
    async with serving(mosquitto, tmp_path, claim_seconds=0.5):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.loadtest.claim_race",
            mosquitto.url,
            PREFIX,
            password,
            "7",
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(120):
                output, errors = await process.communicate()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert 0 == process.returncode, errors.decode(errors="replace")
    found = json.loads(output.decode().strip().splitlines()[-1])
    assert found["moved_on_seq"] > found["window_seq"]
    assert "table/stale_seq" == found["decided_code"]
    assert found["decided_synced"]
    assert [] == found["failures"]
    assert found["old_way_code"].startswith("rules/")
