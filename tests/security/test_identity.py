"""Identity attacks: taking over another client's connection, and logging in as someone else.

A CONNECT that reuses a connected client's id without valid credentials is refused and leaves
that client alone (both brokers). On the embedded broker in guest mode the first password a
name logs in with binds the name: an impostor with another password is refused, also after a
restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from pathlib import Path

import pytest

from protocol.client import Client
from protocol.transport import TransportError
from server.net.accounts import random_password
from server.net.embedded import SERVER_USER, EmbeddedBroker
from server.net.guests import Admission, Guests
from server.net.serve import ServeConfig, running
from server.tables.timers import ManualClock
from tests.net.conftest import (
    HOST,
    BrokerUnderTest,
    client_for,
    connack_code,
    connect_packet,
    ensure_users,
    serving,
)
from tests.net.players import start_table

ACCEPTED = 0
SERVER_UNAVAILABLE = 3
REFUSED = {4, 5}
"""CONNACK return codes of MQTT 3.1.1: bad user name or password, not authorised."""


def _text(value: str) -> bytes:
    data = value.encode()
    return struct.pack("!H", len(data)) + data


def anonymous_connect(client_id: str) -> bytes:
    """An MQTT 3.1.1 CONNECT with ``client_id``, a clean session and no username or password."""
    body = _text("MQTT") + bytes((4, 0x02)) + struct.pack("!H", 60) + _text(client_id)
    assert len(body) < 128
    return bytes((0x10, len(body))) + body


async def refused_takeover(broker: BrokerUnderTest, client_id: str) -> int:
    """Send an anonymous CONNECT with ``client_id``; the CONNACK's return code (-1: none)."""
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    try:
        writer.write(anonymous_connect(client_id))
        await writer.drain()
        async with asyncio.timeout(10):
            connack = await reader.readexactly(4)
            # The broker closes the refused connection.
            assert b"" == await reader.read(1)
        return connack[3]
    except asyncio.IncompleteReadError:
        return -1
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def test_a_refused_connect_with_a_client_id_in_use_leaves_that_client_alone(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """The victim keeps getting replies after an anonymous CONNECT with its client id, and
    when its connection later dies its will still marks it absent."""
    await ensure_users(broker, ["alice", "bob"])
    clock = ManualClock()
    async with serving(broker, tmp_path, clock=clock, grace_seconds=20) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        for client in (alice, bob):
            client.attempts = 1  # a lost reply is not hidden by a retry
            await client.connect()
        try:
            table = await start_table([alice, bob], "basic")
            actor = server.service.actors[table]
            assert actor.table.game is not None
            to_move = actor.table.seats[actor.table.game.turn]
            victim = alice if to_move == "alice" else bob
            code = await refused_takeover(broker, victim.transport.client_id)
            assert code in REFUSED
            welcome = await victim.hello()
            assert 1 == welcome.version
            synced = await victim.table(table).resync()
            assert synced.view is not None
            assert not actor.absent(to_move)
            victim.transport.kill()
            async with asyncio.timeout(10):
                # The will reaches the server, which arms the seat's timer at the grace's end.
                await clock.wait_for_sleeper(clock.time + 20)
            assert actor.absent(to_move)
        finally:
            for client in (alice, bob):
                await client.close()


async def test_another_user_cannot_take_a_connected_clients_id(
    embedded_broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """On the embedded broker a client id belongs to its user while connected: bob, with his
    own valid password, is refused alice's, and alice keeps getting replies."""
    broker = embedded_broker
    async with serving(broker, tmp_path):
        alice = client_for(broker, "alice")
        alice.attempts = 1
        await alice.connect()
        try:
            reader, writer = await asyncio.open_connection(broker.host, broker.port)
            try:
                packet = connect_packet(
                    "bob", broker.password("bob"), client_id=alice.transport.client_id
                )
                writer.write(packet)
                async with asyncio.timeout(10):
                    connack = await reader.readexactly(4)
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()  # closed before the loop ends: no ResourceWarning
            assert connack[3] in REFUSED
            assert 1 == (await alice.hello()).version
        finally:
            await alice.close()


# Guest names (embedded broker without accounts) ---------------------------------------------


async def test_a_guest_name_is_bound_to_the_first_password_it_logs_in_with() -> None:
    """alice's first login binds her name: another password is refused, hers still works; a
    login without a password binds nothing."""
    async with EmbeddedBroker(port=0, server_password=random_password()) as broker:
        codes = [
            await connack_code(HOST, broker.port, "alice", "alice-password"),
            await connack_code(HOST, broker.port, "alice", "impostor-password"),
            await connack_code(HOST, broker.port, "alice", ""),
            await connack_code(HOST, broker.port, "alice", "alice-password"),
            await connack_code(HOST, broker.port, "bob", ""),
            await connack_code(HOST, broker.port, SERVER_USER, "alice-password"),
        ]
    assert ACCEPTED == codes[0]
    assert codes[1] in REFUSED
    assert codes[2] in REFUSED
    assert ACCEPTED == codes[3]
    assert codes[4] in REFUSED
    assert codes[5] in REFUSED


async def test_an_impostor_cannot_take_a_seated_guests_name(tmp_path: Path) -> None:
    """On ``ramino serve``'s default broker (guests) an impostor connecting as alice, who sits
    at a table, is refused: no resync of her hand, no move in her name."""
    config = ServeConfig(
        broker="embedded", port=0, store=f"sqlite:///{tmp_path / 'events.db'}", grace_seconds=5
    )
    async with running(config) as server:
        url = server.address.url
        alice, bob = Client("alice", broker=url), Client("bob", "bob-password", broker=url)
        for client in (alice, bob):
            await client.connect()
        try:
            table = await start_table([alice, bob], "gin")
            impostor = Client("alice", "a-guess", broker=url, request_timeout=1.0, attempts=1)
            with pytest.raises(TransportError):
                await impostor.connect()
            await impostor.close()
            synced = await alice.table(table).resync()
            assert synced.view is not None
        finally:
            for client in (alice, bob):
                await client.close()


async def test_guest_names_outlive_a_restart(tmp_path: Path) -> None:
    """The bindings are kept next to the store: after a restart the impostor is still refused
    and alice still gets in. The file holds hashes only, readable by its owner only."""
    config = ServeConfig(broker="embedded", port=0, store=f"sqlite:///{tmp_path / 'events.db'}")
    async with running(config) as server:
        assert ACCEPTED == await connack_code(HOST, server.address.port, "alice", "alice-password")
    file = tmp_path / "events.db.guests"
    assert 0o600 == file.stat().st_mode & 0o777
    text = file.read_text()
    assert text.startswith("alice:$7$")
    assert "alice-password" not in text
    async with running(config) as server:
        impostor = await connack_code(HOST, server.address.port, "alice", "impostor-password")
        alice = await connack_code(HOST, server.address.port, "alice", "alice-password")
    assert impostor in REFUSED
    assert ACCEPTED == alice


async def test_new_guest_names_are_refused_when_the_list_is_full() -> None:
    """A flood of new names stops at the limit (CONNACK 3, server unavailable); names bound
    before still log in, and a binding unused past its lifetime frees its slot."""
    now = [1_000_000.0]
    guests = Guests(limit=2, idle_seconds=3600.0, clock=lambda: now[0])
    async with EmbeddedBroker(port=0, server_password=random_password(), guests=guests) as broker:
        first = [
            await connack_code(HOST, broker.port, f"flood-{number}", "password")
            for number in range(4)
        ]
        known = await connack_code(HOST, broker.port, "flood-0", "password")
        now[0] += 1800.0
        assert ACCEPTED == await connack_code(HOST, broker.port, "flood-1", "password")
        now[0] += 1801.0  # flood-0 unused for over an hour, flood-1 for half an hour
        late = await connack_code(HOST, broker.port, "late", "password")
        taken = await connack_code(HOST, broker.port, "flood-0", "another")
    assert [ACCEPTED, ACCEPTED, SERVER_UNAVAILABLE, SERVER_UNAVAILABLE] == first
    assert ACCEPTED == known
    assert ACCEPTED == late
    assert SERVER_UNAVAILABLE == taken  # flood-0 was free, but late took the slot
    assert ["flood-1", "late"] == guests.names()


def test_the_guests_file_reads_back_what_it_wrote_without_expired_names(tmp_path: Path) -> None:
    """Saved bindings load again with their passwords; one unused for too long is dropped."""
    now = [1_000_000.0]
    path = tmp_path / "guests"
    guests = Guests(path, idle_seconds=3600.0, clock=lambda: now[0])
    assert Admission.ACCEPTED == guests.admit("old", "old-password")
    now[0] += 3000.0
    assert Admission.ACCEPTED == guests.admit("alice", "alice-password")
    guests.save()
    now[0] += 1000.0
    loaded = Guests.load(path, idle_seconds=3600.0, clock=lambda: now[0])
    assert ["alice"] == loaded.names()
    assert Admission.REFUSED == loaded.admit("alice", "impostor-password")
    assert Admission.ACCEPTED == loaded.admit("alice", "alice-password")
    assert Admission.ACCEPTED == loaded.admit("old", "someone-else")
