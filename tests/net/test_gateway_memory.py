"""What the gateway keeps per table is let go when the table leaves the server's memory (a
soak of thousands of short-lived tables must not grow the server)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from protocol import topics
from protocol.codec import decode_inbox, encode
from protocol.messages import CreateTable, Reply, Request
from server.net.gateway import Gateway
from server.tables.service import TableService
from server.tables.store import open_store
from server.tables.timers import ManualClock

WAIT = 30.0
WAITING_TTL = 1800.0
FINISHED_TTL = 300.0


class _Transport:
    """Keeps what the gateway publishes on inboxes."""

    def __init__(self) -> None:
        self.deliver: Any = None
        self.inbox: asyncio.Queue[bytes] = asyncio.Queue()

    def subscribe(self, *names: str, qos: int = 1) -> None:
        """Nothing to subscribe to."""

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> None:
        """Keep the host's inbox messages."""
        if topic == topics.inbox("host"):
            self.inbox.put_nowait(payload)


async def test_an_unloaded_table_leaves_nothing_in_the_gateway(tmp_path: Path) -> None:
    """A waiting table expires (closed), then leaves memory: the gateway forgets its listing,
    the key its listing was built from, and its batches of updates."""
    store = await open_store(f"sqlite:///{tmp_path / 'events.db'}")
    clock = ManualClock()
    transport = _Transport()
    gateway = Gateway(cast(Any, transport), clock=clock)
    service = TableService(
        store, gateway, clock=clock, waiting_ttl=WAITING_TTL, finished_ttl=FINISHED_TTL
    )
    gateway.service = service
    await gateway.start()
    try:
        request = Request(id="1", cmd=CreateTable(variant="basic", seats=2))
        gateway.handle(topics.lobby_command("host"), encode(request))
        async with asyncio.timeout(WAIT):
            while True:
                reply = decode_inbox(await transport.inbox.get())
                if isinstance(reply, Reply) and reply.id == "1":
                    break
        assert reply.ok
        table_id = reply.table
        kept = (gateway._listings, gateway._listing_keys, gateway._batches)
        assert all(table_id in each for each in kept)
        async with asyncio.timeout(WAIT):
            await clock.wait_for_sleeper(until=clock.now() + WAITING_TTL)
        clock.advance(WAITING_TTL)  # expired: closed
        async with asyncio.timeout(WAIT):
            # Created, host seated (seq 2), then closed (seq 3).
            await service.actors[table_id].wait_for_seq(3)
        assert "closed" == service.actors[table_id].table.status
        async with asyncio.timeout(WAIT):
            await clock.wait_for_sleeper(until=clock.now() + FINISHED_TTL)
        clock.advance(FINISHED_TTL)  # idle: leaves memory
        async with asyncio.timeout(WAIT):
            await service.wait_unloaded(table_id)
        assert not any(table_id in each for each in kept)
    finally:
        await service.stop()
        await gateway.stop()
        await store.close()
