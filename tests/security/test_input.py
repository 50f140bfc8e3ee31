"""Hostile input from a client: requests nested thousands of levels deep, numbers that are no
card, and a flood of refused commands from a client without a seat. Each gets its coded reply,
the server logs no traceback, and what the flood leaves in the store is bounded. The last tests
run the engine and the codec on such input without a broker."""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from protocol import topics
from protocol.cards import format_card, format_face, parse_card
from protocol.client import Client
from protocol.codec import decode_inbox, encode, request_id
from protocol.game import Command as GameCommand
from protocol.game import Discard, DrawStock, Knock, LayOff, Meld, MeldSpec, SwapJoker
from protocol.messages import Hello, Reply, Request
from protocol.transport import Transport, parse_broker_url
from server.engine import (
    RuleError,
    chance,
    chance_pending,
    decide,
    evolve,
    is_over,
    legal_actions,
    new_game,
)
from server.engine.game import Phase, awaiting
from server.net.serve import Running
from tests.net.conftest import BrokerUnderTest, client_for, ensure_users, serving
from tests.net.players import start_table

REPLY_SECONDS = 10.0


@dataclass
class Raw:
    """A client that publishes raw bytes on its own command topics and reads its inbox."""

    name: str
    transport: Transport

    def send(self, payload: bytes, table: str = "") -> None:
        topic = topics.table_command(table, self.name) if table else topics.lobby_command(self.name)
        self.transport.publish(topic, payload, qos=1)

    async def reply(self) -> Reply:
        """The next reply in the inbox."""
        async with asyncio.timeout(REPLY_SECONDS):
            while True:
                message = await self.transport.receive()
                decoded = decode_inbox(message.payload)
                if isinstance(decoded, Reply):
                    return decoded

    async def ask(self, payload: bytes, table: str = "") -> Reply:
        self.send(payload, table)
        return await self.reply()


@dataclass
class Scene:
    """A server, a basic table where alice and bob play, and mallory's raw connection."""

    server: Running
    folder: Path
    table: str
    players: dict[str, Client]
    mallory: Raw


@pytest.fixture
async def scene(broker: BrokerUnderTest, tmp_path: Path) -> AsyncIterator[Scene]:
    await ensure_users(broker, ["alice", "bob", "mallory"])
    async with serving(broker, tmp_path) as server:
        players = {name: client_for(broker, name) for name in ("alice", "bob")}
        for client in players.values():
            await client.connect()
        transport = Transport("mallory", broker.password("mallory"))
        transport.subscribe(topics.inbox("mallory"))
        await transport.connect(parse_broker_url(broker.url))
        try:
            table = await start_table(list(players.values()), "basic")
            yield Scene(server, tmp_path, table, players, Raw("mallory", transport))
        finally:
            await transport.close()
            for client in players.values():
                await client.close()


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        f"{record.name}: {record.getMessage()}"
        for record in caplog.records
        if record.exc_info or record.levelno >= logging.ERROR
    ]


def _nested(depth: int, leaf: bytes = b"\xa1x") -> bytes:
    """msgpack of ``leaf`` inside ``depth`` one-element arrays."""
    return b"\x91" * depth + leaf


def _map(*pairs: tuple[str, bytes]) -> bytes:
    """A msgpack map of fewer than 16 str keys and values already encoded."""
    body = b"".join(encode(key) + value for key, value in pairs)
    return bytes((0x80 | len(pairs),)) + body


RESYNC = encode({"type": "resync"})


async def test_requests_nested_thousands_deep_get_a_coded_reply(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    """Nesting far deeper than any message is ``protocol/invalid`` when it is msgpack (with the
    id when one can be read beside it), ``protocol/malformed`` when it is not; no traceback."""
    caplog.set_level(logging.WARNING)
    cases = [
        (_map(("id", _nested(1_000)), ("cmd", RESYNC)), "", "protocol/invalid"),
        (_map(("id", _nested(12_000)), ("cmd", RESYNC)), "", "protocol/invalid"),
        (_map(("id", encode("deep-cmd")), ("cmd", _nested(5_000))), "deep-cmd", "protocol/invalid"),
        (
            _map(("cmd", RESYNC), ("extra", _nested(5_000, b"\x80")), ("id", encode("deep-key"))),
            "deep-key",
            "protocol/invalid",
        ),
        (_nested(5_000, b"\x01"), "", "protocol/invalid"),
        (_map(("id", encode("cut")), ("cmd", _nested(5_000, b""))), "", "protocol/malformed"),
        (_nested(5_000, b"\xc1"), "", "protocol/malformed"),
    ]
    seq = scene.server.service.actors[scene.table].table.seq
    for payload, command_id, code in cases:
        assert len(payload) < 16 * 1024
        reply = await scene.mallory.ask(payload, scene.table)
        assert (False, command_id, code) == (reply.ok, reply.id, reply.code), reply.message
        assert reply.message
    hello = await scene.mallory.ask(encode(Request(id="after", cmd=Hello())))
    assert (True, "after") == (hello.ok, hello.id)
    assert seq == scene.server.service.actors[scene.table].table.seq
    assert [] == _tracebacks(caplog)


async def test_discarding_a_number_that_is_no_card_is_refused_as_not_held(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    """On one's turn, after drawing, a discard of -1, 60 or 2**63-1 (no card of any deck) is
    ``rules/card_not_held`` like any card not held, and changes nothing."""
    caplog.set_level(logging.WARNING)
    actor = scene.server.service.actors[scene.table]
    game = actor.table.game
    assert game is not None
    mover = scene.players[actor.table.seats[game.turn]]
    assert (await mover.request(DrawStock(), scene.table)).ok
    seq = actor.table.seq
    for card in (-1, 60, 63, 2**63 - 1, -(2**63), 2**64 - 1):
        reply = await mover.request(Discard(card=card), scene.table, check=False)
        assert (False, "rules/card_not_held") == (reply.ok, reply.code), (card, reply.message)
        assert reply.message
    assert seq == actor.table.seq
    assert [] == _tracebacks(caplog)


def _stored_refusals(folder: Path, client: str) -> int:
    with sqlite3.connect(f"file:{folder / 'events.db'}?mode=ro", uri=True) as database:
        (count,) = database.execute(
            "SELECT COUNT(*) FROM refusals WHERE command_id LIKE ?", (f"{client}/%",)
        ).fetchone()
    return int(count)


async def test_a_flood_of_refused_commands_from_an_outsider_stores_nothing(scene: Scene) -> None:
    """Commands a client without a seat may send at will add no row to the store; a seated
    player's refused command is still stored, and its retry is refused the same way."""
    flood = 300
    for number in range(flood):
        request = Request(id=f"f{number}", cmd=DrawStock())
        reply = await scene.mallory.ask(encode(request), scene.table)
        assert (False, f"f{number}", "table/not_seated") == (reply.ok, reply.id, reply.code)
    assert 0 == _stored_refusals(scene.folder, "mallory")
    actor = scene.server.service.actors[scene.table]
    game = actor.table.game
    assert game is not None
    waiting = scene.players[actor.table.seats[1 - game.turn]]
    first = await waiting.request(DrawStock(), scene.table, command_id="early", check=False)
    assert (False, "rules/not_your_turn") == (first.ok, first.code)
    assert 1 == _stored_refusals(scene.folder, waiting.username)
    again = await waiting.request(DrawStock(), scene.table, command_id="early", check=False)
    assert (first.ok, first.code, first.seq) == (again.ok, again.code, again.seq)


# Without a broker: the engine and the codec on the same input ---------------------------------

NO_CARDS = (-1, -(2**63), 53, 60, 63, 64 * 7 + 60, 2**63 - 1, 2**64 - 1)
"""Numbers the wire lets through as a ``Card`` or ``Face`` (msgpack ints) that are none."""


def _commands_with(number: int, hand: tuple[int, ...]) -> list[GameCommand]:
    real = hand[:3]
    return [
        Discard(number),
        Knock(number),
        LayOff(number, 0, 0),
        LayOff(hand[0], 0, number),
        SwapJoker(number, 0),
        Meld((MeldSpec((number, *real[1:]), (0, 1, 2)),)),
        Meld((MeldSpec(real, (number,) * len(real)),)),
        Knock(hand[0], (MeldSpec((number,), (number,)),)),
    ]


@pytest.mark.parametrize("variant", ["basic", "gin", "ramino", "rummy500", "wrotham"])
def test_numbers_that_are_no_card_get_a_rules_code_from_the_engine(variant: str) -> None:
    """Every command naming a number that is no card, or no face, is refused with a ``rules/*``
    code in every phase a seat meets (never an exception of another kind)."""
    rng = random.Random(variant)
    state = new_game(variant, seats=2 if variant != "wrotham" else 3)
    phases: set[Phase] = set()
    for _step in range(30):
        if is_over(state):
            break
        if chance_pending(state):
            state = evolve(state, chance(state, rng))
            continue
        for seat in range(state.players):
            for number in NO_CARDS:
                for command in _commands_with(number, state.hands[seat]):
                    with pytest.raises(RuleError) as refused:
                        decide(state, seat, command)
                    assert refused.value.code.startswith("rules/"), (command, refused.value)
                    assert refused.value.message
        phases.add(state.phase)
        seat = awaiting(state)[0]
        for event in decide(state, seat, rng.choice(legal_actions(state, seat))):
            state = evolve(state, event)
    assert {Phase.DRAW, Phase.PLAY} <= phases


def test_card_notation_writes_a_number_that_is_no_card_as_such() -> None:
    """``#N`` for what is no card or face (the text of a refusal), the notation otherwise."""
    written = [format_card(number) for number in (-1, 60, 2**63 - 1)]
    assert ["#-1", "#60", f"#{2**63 - 1}"] == written
    assert ["#53", "#-1", "JK", "7H"] == [format_face(face) for face in (53, -1, 52, 32)]
    assert "7H2" == format_card(parse_card("7H2"))


def _random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.randrange(-(2**63), 2**64)
    if kind == 1:
        return rng.choice([None, True, False, rng.random()])
    if kind == 2:
        return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.choice([0, 3, 40])))
    if kind == 3:
        return rng.randbytes(rng.choice([0, 3, 300]))
    if kind == 4:
        return msgspec.msgpack.Ext(rng.randrange(128), rng.randbytes(rng.choice([1, 4, 20])))
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.choice([0, 2, 20]))]
    if kind == 6:
        return {str(rng.random()): _random_value(rng, depth + 1) for _ in range(rng.choice([0, 3]))}
    return {"id": rng.choice(["", "a", "x" * 70]), "cmd": _random_value(rng, depth + 1)}


def test_the_id_reader_agrees_with_msgpack_on_what_is_msgpack_and_on_the_id() -> None:
    """The reader used where the decoder gives up on depth: on 3,000 payloads (encoded values,
    some with bytes changed, cut or added) it tells msgpack from not as msgspec does, and reads
    the same top-level ``id``."""
    rng = random.Random(15)
    untyped = msgspec.msgpack.Decoder()
    for _ in range(3_000):
        payload = bytearray(msgspec.msgpack.encode(_random_value(rng)))
        if rng.random() < 0.5:
            spot = rng.randrange(len(payload))
            change = rng.randrange(3)
            if change == 0:
                payload[spot] = rng.randrange(256)
            elif change == 1:
                del payload[spot:]
            else:
                payload.append(rng.randrange(256))
        try:
            value = untyped.decode(payload)
        except msgspec.DecodeError:
            assert request_id(bytes(payload)) is None, bytes(payload[:40])
            continue
        expected = value.get("id") if isinstance(value, dict) else None
        assert (expected if isinstance(expected, str) else None) == request_id(bytes(payload))
    deep = b"\x83\xa3cmd" + b"\x91" * 9_000 + b"\x80\xa2id\xa4deep\xa1x\xc0"
    assert "deep" == request_id(deep)
    assert request_id(deep[:-1]) is None
