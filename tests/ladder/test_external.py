"""External bots on a ladder inside ``ramino serve``: examples/ladder_bot.py as a process.

The server runs in this process on its embedded broker (guest mode) with a SQLite store and
the ladder ``main`` on the pool ``gin-2`` (``random@1`` and ``greedy@1`` entered beforehand, so
the default entrants are not). Two external entrants join over MQTT: the example bot (a
separate Python process that imports nothing of this project), and a silent bot that joins and
then never answers. What is checked:

- the example bot gets rated results (two at least), none forfeited;
- the silent bot forfeits every seat (its move timer runs out ``max_timeouts`` times in a row),
  each such match ranks it last and counts as forfeited, and after ``max_forfeits`` of them in
  a row it is suspended: not active, ``EntrantSuspended`` in the log, shown by
  ``ladder_status``, and a new ``ladder_join`` is refused with ``ladder/suspended``;
- no card of another seat or of the stock reaches the example bot's inbox before the hand
  ends (a second connection with the bot's own account reads the same inbox; the secrecy
  check of the network tests compares it with the truth folded from each table's log), and
  nothing is published to an inbox of a built-in seat (no account could read it).
"""

from __future__ import annotations

import ast
import asyncio
import os
import secrets
import subprocess
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import pytest

from protocol import topics
from protocol.client import Client, RequestFailed
from protocol.messages import LadderEntry, LadderJoin, LadderStatus
from protocol.transport import Transport
from server.net.accounts import random_password
from server.net.serve import ServeConfig, running
from tests.ladder.conftest import enter
from tests.net.players import Inbox, card_leaks, states_by_seq

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ladder_bot.py"
WAIT = 300.0
"""Longest the whole scenario may take on a loaded machine (it takes well under a minute)."""
MAX_FORFEITS = 2
GOOD, SILENT = "ext:goodbot", "ext:silentbot"
T = TypeVar("T")


async def _unless_the_bot_exits(bot: asyncio.subprocess.Process, waiting: Awaitable[T]) -> T:
    """``waiting``'s result; an AssertionError with the bot's output if the bot exits first
    (it runs until stopped: an exit is its own failure, not a slow ladder)."""
    job = asyncio.ensure_future(waiting)
    exited = asyncio.ensure_future(bot.wait())
    try:
        await asyncio.wait({job, exited}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not job.done():
            job.cancel()
        exited.cancel()
    if job.done() and not job.cancelled():
        return job.result()
    assert bot.stdout is not None
    assert bot.stderr is not None
    out, err = await bot.stdout.read(), await bot.stderr.read()
    raise AssertionError(
        f"the example bot exited ({bot.returncode}) first:\n{out.decode()}{err.decode()}"
    )


async def test_an_external_bot_is_rated_a_silent_one_is_suspended_and_nothing_leaks(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ladder.db'}"
    await enter(url, ["random@1", "greedy@1"])
    config = ServeConfig(
        broker="embedded",
        port=0,
        store=url,
        guests=":memory:",
        ladder="main",
        ladder_pools="gin-2",
        ladder_concurrency=2,
        ladder_move_seconds=4.0,
        ladder_max_timeouts=2,
        ladder_max_forfeits=MAX_FORFEITS,
    )
    # Never a leading dash, which the bot's argparse would take for an option.
    password = random_password()
    async with running(config) as server:
        assert server.ladder is not None
        ladder = server.ladder.ladder
        inbox = Inbox("goodbot")
        # The bot's own account, a second connection: it receives everything the bot does.
        spy = Transport("goodbot", password, tap=inbox)
        spy.subscribe(topics.inbox("goodbot"), qos=1)
        await spy.connect((server.address,))
        # Every inbox, read with the server's account: a built-in seat has none.
        inboxes = Inbox("every inbox")
        watcher = Transport(
            config.server_user, server.server_password, client_id="inbox-watcher", tap=inboxes
        )
        watcher.subscribe(f"{topics.PREFIX}/inbox/+", qos=0)
        await watcher.connect((server.address,))
        bot = await asyncio.create_subprocess_exec(
            sys.executable,
            str(EXAMPLE),
            "--port",
            str(server.address.port),
            "--user",
            "goodbot",
            "--password",
            password,
            "--seed",
            "7",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": ""},
            cwd=tmp_path,  # nothing of this project is importable from there
        )
        silent = Client("silentbot", secrets.token_urlsafe(12), broker=server.address)
        await silent.connect()
        try:
            joined = await silent.request(LadderJoin(ladder="main", pools=("gin-2",)))
            assert isinstance(joined.result, LadderEntry)
            assert (SILENT, ("gin-2",), True) == (
                joined.result.entrant,
                joined.result.pools,
                joined.result.active,
            )

            def good_rated(state: object) -> bool:
                return ladder.state.matches_of("gin-2", GOOD) >= 2

            def silent_suspended(state: object) -> bool:
                return SILENT in ladder.state.suspended

            async with asyncio.timeout(WAIT):
                await _unless_the_bot_exits(bot, ladder.wait_until(good_rated))
                await _unless_the_bot_exits(bot, ladder.wait_until(silent_suspended))

            state = ladder.state
            good = [result for result in state.order if GOOD in result.entrants]
            assert len(good) >= 2
            for result in good:
                index = result.entrants.index(GOOD)
                assert not (result.forfeits and result.forfeits[index])
                # A 2-player match is both rotations of one deal: two games.
                assert 2 == result.games
            quiet = [result for result in state.order if SILENT in result.entrants]
            # Suspended after exactly MAX_FORFEITS matches, each forfeited and ranked last
            # (rank 2 of 2: a forfeiting entrant ranks below the other, whatever the points).
            assert MAX_FORFEITS == len(quiet)
            for result in quiet:
                index = result.entrants.index(SILENT)
                assert result.forfeits[index]
                assert 2 == result.ranks[index]
                assert 1 == result.ranks[1 - index] or result.forfeits[1 - index]
            suspension = state.suspended[SILENT]
            assert MAX_FORFEITS == suspension.failures
            assert not state.active[SILENT]

            status = await silent.request(LadderStatus())
            assert isinstance(status.result, LadderEntry)
            assert not status.result.active
            assert suspension.until == status.result.suspended_until
            with pytest.raises(RequestFailed) as refused:
                await silent.request(LadderJoin())
            assert "ladder/suspended" == refused.value.code
        finally:
            if bot.returncode is None:
                bot.terminate()
            async with asyncio.timeout(30):
                out, err = await bot.communicate()
            await silent.close()
            await spy.close()
            await watcher.close()
        assert b"joined as ext:goodbot" in out, err.decode()
        readers = {message.topic.rsplit("/", 1)[1] for message in inboxes.messages}
        assert {"goodbot", "silentbot"} <= readers
        assert not {reader for reader in readers if "@" in reader}

        # Secrecy: every ladder table the bot sat at, checked against its log.
        checked = 0
        for summary in await server.store.tables():
            if "goodbot" not in summary.seats:
                continue
            truths = await states_by_seq(server.store, summary.table_id)
            seat = summary.seats.index("goodbot")
            assert [] == card_leaks(inbox, seat, truths, summary.table_id)
            checked += 1
        assert checked >= 4  # two matches at least, two tables each
        assert any(message.payload for message in inbox.messages)


def test_the_example_bot_imports_nothing_of_this_project() -> None:
    """examples/ladder_bot.py is what a bot author outside this repository writes: aiomqtt,
    msgpack and the standard library only."""
    tree = ast.parse(EXAMPLE.read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"aiomqtt", "msgpack"}


def test_docs_show_the_example_bot_as_it_is() -> None:
    """docs/ladder.md ("Bot authors") shows examples/ladder_bot.py's ``run`` verbatim."""
    text = (ROOT / "docs" / "ladder.md").read_text()
    shown = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert shown.startswith("async def run(")
    assert shown in EXAMPLE.read_text()
    assert len([line for line in shown.splitlines() if line.strip()]) <= 60
