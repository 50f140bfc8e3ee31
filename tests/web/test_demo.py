"""``ramino demo --web`` (what ``make demo`` runs): the page's address is printed, the page is
served there, and once the bots' tables are done the demo (page and broker) stays up until
Ctrl-C, then exits 0."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 120.0


async def _line(stream: asyncio.StreamReader, pattern: str, seen: list[str]) -> re.Match[str]:
    while True:
        line = (await stream.readline()).decode()
        assert line, f"the demo ended before printing {pattern!r}: {''.join(seen)}"
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        body: bytes = response.read()
        return body


async def test_demo_prints_the_page_serves_it_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server.cli",
        "demo",
        "--web",
        "127.0.0.1:0",
        "--port",
        "0",
        "--think-ms",
        "0",
        "--store",
        f"sqlite:///{tmp_path / 'demo.db'}",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(SECONDS):
            found = await _line(process.stdout, r"Play in a browser: open (http://\S+)", seen)
            page = await asyncio.to_thread(_get, found.group(1))
            assert b"<title>Ramino</title>" in page
            await _line(process.stdout, r"Done\. 6 games finished", seen)
            found = await _line(
                process.stdout, r"broker, which serves until Ctrl-C: (mqtt://\S+);", seen
            )
            broker = found.group(1)
            await _line(process.stdout, re.escape(f"--broker {broker} --user me"), seen)
            await _line(process.stdout, r"a house bot takes the other seat", seen)
            await _line(process.stdout, r"The web page stays up at http://\S+ ; Ctrl-C stops", seen)
            # As it says: a client that creates a table there plays a game against a house bot.
            client = await asyncio.create_subprocess_exec(
                sys.executable,
                str(ROOT / "examples" / "random_client.py"),
                "--broker",
                broker,
                "--user",
                "me",
                "--password",
                "any",
                "--create",
                "knock",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            played, _ = await client.communicate()
            assert 0 == client.returncode, played.decode()
            assert re.search(r"^winners \S", played.decode(), re.MULTILINE), played.decode()
            process.send_signal(signal.SIGINT)
            stopping = r"^Stopping: the web page, the broker and the server\."
            await _line(process.stdout, stopping, seen)
            assert 0 == await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
