"""The SDK keeps asking for a resync until the server answers: a seat whose resync went
unanswered (the server restarting, a broker node lost) would otherwise wait for ever for a turn
it already has."""

from __future__ import annotations

import asyncio
from pathlib import Path

from protocol import topics
from protocol.codec import decode_request
from protocol.messages import Resync
from protocol.transport import Message, Transport, parse_broker_url
from tests.net.conftest import MosquittoBroker, client_for, ensure_users, serving
from tests.net.players import start_table

WAIT = 60.0


async def test_an_unanswered_resync_is_asked_again_until_the_server_answers(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    await ensure_users(mosquitto, ["alice", "bob"])
    alice = client_for(mosquitto, "alice", request_timeout=0.5)
    bob = client_for(mosquitto, "bob", request_timeout=0.5)
    alice.attempts = 1  # each resync() is one request: the asking again is the session's
    for client in (alice, bob):
        await client.connect()
    try:
        async with serving(mosquitto, tmp_path):
            table = await start_table([alice, bob], "gin")
            session = alice.table(table)
            async with asyncio.timeout(WAIT):
                started = await session.next_update()
                while not started.view:
                    started = await session.next_update()
        # No server now: alice's resyncs go unanswered. A listener with the server's account
        # counts them on her command topic.
        asked = 0
        twice = asyncio.Event()

        def count(message: Message) -> None:
            nonlocal asked
            if isinstance(decode_request(message.payload).cmd, Resync):
                asked += 1
                if asked >= 2:
                    twice.set()

        listener = Transport(mosquitto.server_user, mosquitto.server_password, tap=count)
        listener.subscribe(topics.table_command(table, "alice"))
        await listener.connect(parse_broker_url(mosquitto.url))
        try:
            session.need_resync()
            async with asyncio.timeout(WAIT):
                await twice.wait()  # the first went unanswered and she asked again
            async with serving(mosquitto, tmp_path):  # the same store: the table comes back
                async with asyncio.timeout(WAIT):
                    update = await session.next_update()
        finally:
            await listener.close()
        assert started.seq == update.seq
        assert 1 == session.resyncs
        assert update.view is not None
        assert started.view.hand == update.view.hand
    finally:
        for client in (alice, bob):
            await client.close()


async def test_a_server_that_reconnects_says_so_and_its_players_resync(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """The server's connection is taken over (a connection with its client id): it reconnects,
    republishes its status online with a new ``reconnected_at``, and the SDK resyncs every
    table, since what the server published meanwhile may be lost."""
    await ensure_users(mosquitto, ["alice", "bob"])
    alice = client_for(mosquitto, "alice")
    bob = client_for(mosquitto, "bob")
    for client in (alice, bob):
        await client.connect()
    try:
        async with serving(mosquitto, tmp_path) as server:
            table = await start_table([alice, bob], "gin")
            sessions = [client.table(table) for client in (alice, bob)]
            async with asyncio.timeout(WAIT):
                while alice.server_link is None or not sessions[0].seq:
                    await sessions[0].next_update()
            assert alice.server_link is not None
            link_before = alice.server_link
            transport = server.gateway.transport
            transport.set_reconnect_delay(0.05)
            intruder = Transport(
                mosquitto.server_user, mosquitto.server_password, client_id=transport.client_id
            )
            await intruder.connect(parse_broker_url(mosquitto.url))
            await intruder.close()
            async with asyncio.timeout(WAIT):
                for session in sessions:
                    while not session.resyncs:
                        await session.next_update()
            assert alice.server_link is not None
            assert link_before[0] == alice.server_link[0]  # the same server
            assert alice.server_link[1] > link_before[1]  # reconnected since
            assert [1, 1] == [session.resyncs for session in sessions]
            assert 2 == transport.connections
    finally:
        for client in (alice, bob):
            await client.close()
