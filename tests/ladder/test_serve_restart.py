"""A server running a ladder killed with SIGKILL while an external bot sits at a ladder table:
the next start closes that table, cancels the unfinished match, and pairs the bot again only
once it has sent ``ladder_join`` to the new server (Mosquitto, which stays up, carries both).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec

from protocol.messages import LadderJoin
from protocol.transport import Message
from server.ladder.serving import RESTARTED
from server.net.serve import ServeConfig, running
from server.tables.replay import read_rows
from server.tables.table import empty_table, fold
from tests.ladder.conftest import enter
from tests.net.conftest import MosquittoBroker, client_for, ensure_users, serve_process

ROOT = Path(__file__).resolve().parents[2]
WAIT = 120.0
BOT = "ext:silentbot"


@contextlib.asynccontextmanager
async def _serve(broker: MosquittoBroker, store: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """``ramino serve --ladder main`` as a subprocess in its own process group (its ladder's
    match workers with it), once it says it is serving; the group is SIGKILLed at the end."""
    process = await serve_process(
        broker,
        store,
        "--ladder",
        "main",
        "--ladder-pools",
        "gin-2",
        "--ladder-move-seconds",
        "600",
        new_session=True,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(WAIT):
            while b"serving on" not in (line := await process.stdout.readline()):
                assert line, "ramino serve exited before serving"
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


class _Seated:
    """Set once the bot's inbox gets an update of a table (the ladder seated it): its id."""

    def __init__(self) -> None:
        self.table = ""
        self.event = asyncio.Event()

    def __call__(self, message: Message) -> None:
        decoded = msgspec.msgpack.decode(message.payload) if message.payload else None
        if isinstance(decoded, dict) and decoded.get("type") == "update":
            self.table = self.table or str(decoded["table"])
            self.event.set()


async def test_a_killed_ladder_server_leaves_no_table_open_and_no_bot_paired_unasked(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    await ensure_users(mosquitto, ["silentbot"])
    url = f"sqlite:///{tmp_path / 'events.db'}"
    await enter(url, ["random@1", "greedy@1"])
    seated = _Seated()
    bot = client_for(mosquitto, "silentbot", tap=seated)
    await bot.connect()
    try:
        async with _serve(mosquitto, url) as process:
            await bot.request(LadderJoin(pools=("gin-2",)))
            async with asyncio.timeout(WAIT):
                await seated.event.wait()  # seated at a ladder table, which waits for it
            os.killpg(process.pid, signal.SIGKILL)
        config = ServeConfig(
            broker=mosquitto.url,
            store=url,
            server_user=mosquitto.server_user,
            server_password=mosquitto.server_password,
            ladder="main",
            ladder_pools="gin-2",
            mqtt5=True,
        )
        async with running(config) as server:
            assert server.ladder is not None
            ladder = server.ladder.ladder
            state = ladder.state
            cut = [m for m in state.scheduled.values() if BOT in m.entrants]
            assert 1 == len(cut)
            assert RESTARTED == state.cancelled[cut[0].match_id].reason
            rows = await read_rows(server.store, seated.table)
            table = empty_table(seated.table)
            for row in rows:
                table = fold(table, row.record, row.seq)
            assert table.closed
            assert "table_closed" == msgspec.to_builtins(rows[-1].record.event)["type"]
            # The built-in entrants play on; the bot, not joined again, is not paired.
            before = len(state.scheduled)
            async with asyncio.timeout(WAIT):
                await ladder.wait_until(lambda now: len(now.results) >= 3)
            after = list(state.scheduled.values())[before:]
            assert after
            assert all(BOT not in match.entrants for match in after)
            # Once it joins again, it is paired.
            await bot.request(LadderJoin(pools=("gin-2",)))
            async with asyncio.timeout(WAIT):
                await ladder.wait_until(
                    lambda now: any(
                        BOT in m.entrants for m in list(now.scheduled.values())[before:]
                    )
                )
    finally:
        await bot.close()
