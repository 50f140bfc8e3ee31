"""``ramino serve`` killed with SIGKILL mid-game and started again: the clients (whose broker,
Mosquitto, stays up) retry their unanswered commands, resync, and finish; every command the
server acknowledged is in the log."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec

from protocol.transport import Message
from tests.net.conftest import MosquittoBroker, client_for, ensure_users, serve_process
from tests.net.players import logged_table, play_seat, start_table

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 30.0


@contextlib.asynccontextmanager
async def ramino_serve(
    broker: MosquittoBroker, store: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``ramino serve`` as a subprocess, once it says it is serving; SIGKILLed if still alive."""
    process = await serve_process(broker, store)
    assert process.stdout is not None
    try:
        async with asyncio.timeout(START_SECONDS):
            while b"serving on" not in (line := await process.stdout.readline()):
                assert line, "ramino serve exited before serving"
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


class Acks:
    """The ids of the commands the server acknowledged to a client (an inbox tap), and the
    moment the table reaches a seq."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.seq = 0
        self.reached: dict[int, asyncio.Event] = {}

    def __call__(self, message: Message) -> None:
        decoded = msgspec.msgpack.decode(message.payload) if message.payload else None
        if not isinstance(decoded, dict):
            return
        if (
            decoded.get("type") == "reply"
            and decoded.get("ok")
            and decoded.get("table")
            and decoded.get("result") is None  # a resync's reply: it writes nothing
        ):
            self.ids.add(str(decoded["id"]))
        if decoded.get("type") == "update":
            self.seq = max(self.seq, int(decoded["seq"]))
            for seq, event in self.reached.items():
                if self.seq >= seq:
                    event.set()

    async def wait_for(self, seq: int) -> None:
        event = self.reached.setdefault(seq, asyncio.Event())
        if self.seq >= seq:
            event.set()
        await event.wait()


async def test_a_killed_server_restarts_and_every_game_finishes(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    await ensure_users(mosquitto, ["alice", "bob"])
    store = f"sqlite:///{tmp_path / 'events.db'}"
    acks = {name: Acks() for name in ("alice", "bob")}
    clients = [client_for(mosquitto, name, request_timeout=1.0, tap=acks[name]) for name in acks]
    for client in clients:
        client.attempts = 60
    first = ramino_serve(mosquitto, store)
    process = await first.__aenter__()
    try:
        for client in clients:
            await client.connect()
        table = await start_table(clients, "basic")
        games = asyncio.gather(
            *(play_seat(client, table, seed) for seed, client in enumerate(clients))
        )
        for kill_at in (30, 90):
            async with asyncio.timeout(60):
                await acks["alice"].wait_for(kill_at)
            process.send_signal(signal.SIGKILL)
            await first.__aexit__(None, None, None)
            first = ramino_serve(mosquitto, store)
            process = await first.__aenter__()
        finals = await games
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(START_SECONDS):
            assert 0 == await process.wait()
    finally:
        await first.__aexit__(None, None, None)
        for client in clients:
            await client.close()
    rows, state = await logged_table(store, table)
    assert "finished" == state.status
    assert {final.seq for final in finals} == {state.seq}
    logged = {row.command_id for row in rows}
    # The log keeps each request id under its sender's name.
    acknowledged = {f"{name}/{id_}" for name, ack in acks.items() for id_ in ack.ids}
    assert len(acknowledged) > 30
    assert set() == acknowledged - logged
    assert sum(client.table(table).resyncs for client in clients) >= 1
