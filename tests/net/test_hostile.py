"""Hostile input over a real broker: every bad message gets its coded error (or is dropped by
the limits), the server stays up and no table changes."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from protocol import topics
from protocol.client import Client
from protocol.codec import decode_inbox, encode
from protocol.game import Discard, DrawStock
from protocol.messages import Hello, ListVariants, Reply, Request, Resync
from protocol.transport import Transport, parse_broker_url
from server.net.gateway import Limits
from server.net.serve import Running
from tests.net.conftest import BrokerUnderTest, client_for, ensure_users, serving
from tests.net.players import play_seat, start_table

pytestmark = pytest.mark.asyncio


@dataclass
class RawClient:
    """A client that publishes raw bytes on its own command topics and reads its inbox."""

    name: str
    transport: Transport

    def send(self, payload: bytes, table: str = "") -> None:
        topic = topics.table_command(table, self.name) if table else topics.lobby_command(self.name)
        self.transport.publish(topic, payload)

    async def replies_until(self, marker: str, request: bytes) -> list[Reply]:
        """Send ``request`` (whose id is ``marker``), again whenever 0.2 s pass without a
        reply, until its reply comes: the replies received before it. The server handles one
        client's commands in the order they arrive, so every earlier command has then been
        answered or dropped."""
        replies: list[Reply] = []
        async with asyncio.timeout(10):
            while True:
                self.send(request)
                try:
                    while True:
                        async with asyncio.timeout(0.2):
                            reply = await self.reply()
                        if reply.id == marker:
                            return replies
                        replies.append(reply)
                except TimeoutError:
                    continue  # no reply for 0.2 s: the request was dropped, send it again

    async def reply(self) -> Reply:
        """The next reply in the inbox."""
        async with asyncio.timeout(10):
            while True:
                message = await self.transport.receive()
                decoded = decode_inbox(message.payload)
                if isinstance(decoded, Reply):
                    return decoded


@dataclass
class World:
    """A server, a gin table where alice and bob sit, and mallory's raw connection."""

    server: Running
    broker: BrokerUnderTest
    mallory: RawClient
    table: str
    players: list[Client]


@pytest.fixture
async def world(broker: BrokerUnderTest, tmp_path: Path) -> AsyncIterator[World]:
    await ensure_users(broker, ["alice", "bob", "mallory"])
    async with serving(broker, tmp_path, limits=Limits(rate=50, burst=100)) as server:
        players = [client_for(broker, "alice"), client_for(broker, "bob")]
        for client in players:
            await client.connect()
        transport = Transport("mallory", broker.password("mallory"))
        transport.subscribe(topics.inbox("mallory"))
        await transport.connect(parse_broker_url(broker.url))
        try:
            table = await start_table(players, "gin")
            yield World(server, broker, RawClient("mallory", transport), table, players)
        finally:
            await transport.close()
            for client in players:
                await client.close()


async def test_malformed_payloads_get_coded_errors(world: World) -> None:
    actor = world.server.service.actors[world.table]
    seq = actor.table.seq
    rng = random.Random(7)
    request = msgspec.msgpack.encode
    cases = [
        (bytes(rng.getrandbits(8) for _ in range(64)), {"protocol/malformed", "protocol/invalid"}),
        (b"\xc1", {"protocol/malformed"}),
        (request({"id": 5, "cmd": {"type": "hello"}}), {"protocol/invalid"}),
        (request({"id": "x", "cmd": {"type": "fly"}}), {"protocol/invalid"}),
        (request({"id": "x", "cmd": {"type": "discard", "card": "7H"}}), {"protocol/invalid"}),
        (request([1, 2, 3]), {"protocol/invalid"}),
        (request({"id": "x" * 100, "cmd": {"type": "hello"}}), {"protocol/invalid"}),
        (request({"id": "x", "cmd": {"type": "chat", "text": "y" * 10_000}}), {"protocol/invalid"}),
        (os.urandom(20_000), {"limit/payload"}),
    ]
    for payload, codes in cases:
        world.mallory.send(payload, world.table)
        reply = await world.mallory.reply()
        assert not reply.ok
        assert reply.code in codes, (payload[:20], reply)
        assert reply.message
    assert seq == actor.table.seq


async def test_bad_commands_get_coded_errors_and_change_nothing(world: World) -> None:
    actor = world.server.service.actors[world.table]
    seq = actor.table.seq
    table = world.table
    cases = [
        (Request(id="a", cmd=Hello()), table, "protocol/wrong_topic"),
        (Request(id="b", cmd=Resync()), "", "protocol/wrong_topic"),
        (Request(id="c", cmd=DrawStock()), "no-such-table", "table/unknown"),
        (Request(id="d", cmd=DrawStock()), table, "table/not_seated"),
        (Request(id="e", cmd=DrawStock(), seq=seq - 1), table, "table/stale_seq"),
        (Request(id="f", cmd=Hello(versions=(99,))), "", "protocol/version"),
    ]
    for request, where, code in cases:
        world.mallory.send(encode(request), where)
        reply = await world.mallory.reply()
        assert (request.id, False, code) == (reply.id, reply.ok, reply.code), reply.message
    assert seq == actor.table.seq


async def test_illegal_and_out_of_turn_moves_and_replayed_ids(world: World) -> None:
    """Out of turn, a card not held, a repeated id: coded errors, or the first reply again."""
    actor = world.server.service.actors[world.table]
    game = actor.table.game
    assert game is not None
    alice, bob = world.players
    turn = game.turn
    mover, waiter = (alice, bob) if actor.table.seats[turn] == "alice" else (bob, alice)
    table = world.table
    seq = actor.table.seq
    out_of_turn = await waiter.request(DrawStock(), table, check=False)
    assert (False, "rules/not_your_turn") == (out_of_turn.ok, out_of_turn.code)
    held = set(game.hands[turn])
    not_held = next(card for card in range(52) if card not in held)
    illegal = await mover.request(Discard(card=not_held), table, check=False)
    assert not illegal.ok
    assert illegal.code.startswith("rules/"), illegal.code
    assert seq == actor.table.seq
    # One move sent twice with the same id: it is played once; both replies are the same.
    move = mover.table(table).last
    assert move is not None
    assert move.legal
    first = await mover.request(move.legal[0], table, command_id="once")
    again = await mover.request(move.legal[0], table, command_id="once")
    assert first.ok
    assert again.ok
    assert first.seq == again.seq == actor.table.seq


async def test_a_flood_is_cut_at_the_door_and_the_other_table_plays_on(world: World) -> None:
    """Thousands of commands from one client: the server answers no more of them than its rate
    allows (the rest are refused, or dropped by the broker's own publish rate before they reach
    it), meanwhile the game at the table finishes, and the server still answers everyone."""
    flood = 3_000
    gateway = world.server.gateway
    handled = gateway.handled
    started = time.monotonic()
    payload = encode(Request(id="flood", cmd=ListVariants()))
    game = asyncio.gather(
        *(play_seat(client, world.table, seed) for seed, client in enumerate(world.players))
    )
    for _ in range(flood):
        world.mallory.send(payload)
    finals = await game
    assert {"finished"} == {final.status for final in finals}
    replies = await world.mallory.replies_until(
        "end", encode(Request(id="end", cmd=ListVariants()))
    )
    # The server's bucket (burst 100, 50 a second) is all that may get an answer; one refusal
    # with limit/rate tells mallory, the rest of what reached the server is dropped unread.
    allowed = 100 + 50 * (time.monotonic() - started)
    answered = [reply for reply in replies if reply.id == "flood" and reply.ok]
    assert 0 < len(answered) <= allowed
    assert {"limit/rate"} == {
        reply.code for reply in replies if reply.id == "flood" and not reply.ok
    }
    assert gateway.handled > handled  # the players were answered throughout
    assert 1 == (await world.players[0].hello()).version
