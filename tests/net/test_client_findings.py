"""What a client written from the documents alone found, over both brokers: retained state that
went stale, a retained command that ran, refused ``null`` options, an unmatched refusal, a second
status on stop and rate refusals in ordinary play."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec

from protocol import topics
from protocol.codec import decode_inbox, decode_listing, decode_snapshot, decode_status, encode
from protocol.game import DrawStock, PlayerSat
from protocol.messages import (
    MAX_ID,
    Created,
    CreateTable,
    Hello,
    Reply,
    Request,
    Synced,
    Update,
)
from protocol.transport import Message, Transport, parse_broker_url
from server.cli import build_parser
from server.engine import view
from server.net.gateway import Limits
from tests.net.conftest import DEPLOY, ROOT, BrokerUnderTest, client_for, ensure_users, serving
from tests.net.players import play_seat, start_table

WAIT = 10.0
"""Seconds any awaited message gets."""


@contextlib.asynccontextmanager
async def raw(broker: BrokerUnderTest, name: str, *subscriptions: str) -> AsyncIterator[Transport]:
    """A bare MQTT connection of ``name``, subscribed to ``subscriptions``."""
    transport = Transport(name, broker.password(name))
    await transport.connect(parse_broker_url(broker.url))
    transport.subscribe(*subscriptions)
    try:
        yield transport
    finally:
        await transport.close()


async def retained(broker: BrokerUnderTest, name: str, topic: str) -> bytes:
    """The retained payload a fresh subscriber of ``topic`` gets first."""
    async with raw(broker, name, topic) as transport, asyncio.timeout(WAIT):
        while True:
            message = await transport.receive()
            if message.topic == topic and message.retain:
                return message.payload


async def reply_to(transport: Transport, topic: str, payload: bytes) -> Reply:
    """Publish ``payload`` on ``topic`` and return the next reply in the sender's inbox."""
    transport.publish(topic, payload, qos=1)
    async with asyncio.timeout(WAIT):
        while True:
            message = await transport.receive()
            if message.topic == topics.inbox(transport.username):
                received = decode_inbox(message.payload)
                if isinstance(received, Reply):
                    return received


async def test_the_retained_snapshot_and_listing_are_the_final_state_after_a_game(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """Once a game is over and the republish pause has passed, a fresh subscriber gets the
    finished table: no older state, kept for the pause, overwrites it."""
    await ensure_users(broker, ["alice", "bob", "carol"])
    async with serving(broker, tmp_path) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        for client in (alice, bob):
            await client.connect()
        try:
            table = await start_table([alice, bob], "knock")
            await asyncio.gather(play_seat(alice, table, 1), play_seat(bob, table, 2))
            async with asyncio.timeout(WAIT):
                await server.gateway.settled(table)
            await alice.hello()  # the server's publications before it have reached the broker
        finally:
            for client in (alice, bob):
                await client.close()
        state = server.service.actors[table].table
        snapshot = decode_snapshot(await retained(broker, "carol", topics.table_state(table)))
        listing = decode_listing(await retained(broker, "carol", topics.lobby_listing(table)))
    assert ("finished", state.seq) == (snapshot.table.status, snapshot.seq)
    assert "finished" == listing.status


async def test_the_retained_snapshot_is_current_after_a_burst_of_moves(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """Mid-game too, after a burst of moves the retained snapshot is the table's state."""
    await ensure_users(broker, ["alice", "bob", "carol"])
    async with serving(broker, tmp_path) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        for client in (alice, bob):
            await client.connect()
        try:
            table = await start_table([alice, bob], "basic")
            await asyncio.gather(
                play_seat(alice, table, 1, stop_at_seq=25), play_seat(bob, table, 2, stop_at_seq=25)
            )
            async with asyncio.timeout(WAIT):
                await server.gateway.settled(table)
            await alice.hello()
            state = server.service.actors[table].table
            snapshot = decode_snapshot(await retained(broker, "carol", topics.table_state(table)))
            listing = decode_listing(await retained(broker, "carol", topics.lobby_listing(table)))
        finally:
            for client in (alice, bob):
                await client.close()
    assert (state.status, state.seq) == (snapshot.table.status, snapshot.seq)
    assert state.status == listing.status
    # Whose command is awaited, for a client that wonders whether it missed its turn.
    assert state.game is not None
    assert snapshot.view is not None
    assert view(state.game).to_move == snapshot.view.to_move


async def test_a_retained_command_is_not_run(broker: BrokerUnderTest, tmp_path: Path) -> None:
    """A command published with the retain flag is ignored: the table does not move, and a
    later command of the same client still runs."""
    await ensure_users(broker, ["alice", "bob"])
    async with serving(broker, tmp_path) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        for client in (alice, bob):
            await client.connect()
        try:
            table = await start_table([alice, bob], "basic")
            actor = server.service.actors[table]
            game = actor.table.game
            assert game is not None
            mover = (alice, bob)[game.turn]
            seq = actor.table.seq
            command = encode(Request(id="retained-draw", cmd=DrawStock(), seq=seq))
            mover.transport.publish(
                topics.table_command(table, mover.username), command, qos=1, retain=True
            )
            # Commands of one client are taken in order: once this one is answered, the
            # retained one has been seen.
            synced = await mover.table(table).resync()
            assert seq == synced.seq == actor.table.seq
            reply = await mover.table(table).act(DrawStock())
        finally:
            for client in (alice, bob):
                await client.close()
    assert reply.ok
    assert seq + 1 == reply.seq


async def test_null_and_unlimited_options_are_accepted(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """An ``int_or_unlimited`` option takes nil, as ``VariantInfo.defaults`` sends it."""
    await ensure_users(broker, ["alice"])
    async with serving(broker, tmp_path):
        alice = client_for(broker, "alice")
        await alice.connect()
        try:
            variants = await alice.variants()
            knock = next(info for info in variants.variants if info.name == "knock")
            assert knock.defaults["deals"] is None
            nil = await alice.create_table("knock", options={"deals": None})
            word = await alice.create_table("knock", options={"deals": "unlimited"})
            listed = {listing.table: listing for listing in await alice.tables()}
        finally:
            await alice.close()
    assert listed[nil.table].options["deals"] is None
    assert "unlimited" == listed[word.table].options["deals"]


async def test_an_over_long_id_is_echoed_cut_to_the_limit(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """A request id over the limit is refused with its first ``MAX_ID`` characters as the id."""
    await ensure_users(broker, ["alice"])
    long_id = "a" * MAX_ID + "b"
    payload = msgspec.msgpack.encode({"id": long_id, "cmd": {"type": "hello", "versions": [1]}})
    async with (
        serving(broker, tmp_path),
        raw(broker, "alice", topics.inbox("alice")) as alice,
    ):
        topic = topics.lobby_command("alice", 0)
        refused = await reply_to(alice, topic, payload)
        fine = await reply_to(alice, topic, encode(Request(id="x" * MAX_ID, cmd=Hello())))
    assert (False, "protocol/invalid", "a" * MAX_ID) == (refused.ok, refused.code, refused.id)
    assert (True, "x" * MAX_ID) == (fine.ok, fine.id)


async def test_a_clean_stop_leaves_one_offline_status(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """On a clean stop the server says it is offline, with its real start time, and its will
    (for a crash) is not published after it."""
    await ensure_users(broker, ["alice", "bob"])
    statuses: list[Message] = []
    async with raw(broker, "alice", topics.server_status()) as watcher:
        watcher.tap = statuses.append
        async with serving(broker, tmp_path) as server:
            started_at = server.gateway.status(True).started_at
            async with asyncio.timeout(WAIT):
                while not any(decode_status(m.payload).online for m in statuses):
                    await watcher.receive()
        async with asyncio.timeout(WAIT):
            while decode_status(statuses[-1].payload).online:
                await watcher.receive()
        # A will comes when the broker sees the connection gone, long before a new client
        # has connected and subscribed.
        final = decode_status(await retained(broker, "bob", topics.server_status()))
        await asyncio.wait_for(watcher.connected.wait(), WAIT)
    live = [decode_status(m.payload) for m in statuses if not m.retain]
    assert [True, False] == [status.online for status in live]
    assert (False, started_at) == (final.online, final.started_at)


async def test_answering_the_server_is_never_refused_for_rate(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """Bots that answer every update at once play a whole Rummy 500 game (claim windows: every
    seat may answer one update) under a tiny rate limit without one ``limit/rate``: each update
    gives its receiver back what answering it takes."""
    names = ["alice", "bob", "carol"]
    await ensure_users(broker, names)
    refusals: list[str] = []

    def watch(message: Message) -> None:
        if message.topic.startswith(topics.inbox("")[:-1]):
            received = decode_inbox(message.payload)
            if isinstance(received, Reply) and received.code.startswith("limit/"):
                refusals.append(received.code)

    async with serving(broker, tmp_path, limits=Limits(rate=1.0, burst=10)) as server:
        clients = [client_for(broker, name, tap=watch) for name in names]
        for client in clients:
            await client.connect()
        try:
            table = await start_table(clients, "rummy500")
            finals = await asyncio.gather(
                *(play_seat(client, table, seed) for seed, client in enumerate(clients))
            )
        finally:
            for client in clients:
                await client.close()
        refused = server.gateway.refused
    assert all(final.status == "finished" for final in finals)
    assert ([], 0) == (refusals, refused)


async def test_a_stale_seq_refusal_carries_synced(broker: BrokerUnderTest, tmp_path: Path) -> None:
    """A ``table/stale_seq`` refusal brings the present as a ``synced`` result (§12)."""
    await ensure_users(broker, ["alice", "bob"])
    async with serving(broker, tmp_path) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        for client in (alice, bob):
            await client.connect()
        try:
            table = await start_table([alice, bob], "basic")
            state = server.service.actors[table].table
            assert state.game is not None
            mover = state.game.turn
            client = (alice, bob)[mover]
            reply = await client.request(DrawStock(), table, seq=state.seq - 1, check=False)
        finally:
            for client in (alice, bob):
                await client.close()
    assert (False, "table/stale_seq", state.seq) == (reply.ok, reply.code, reply.seq)
    assert isinstance(reply.result, Synced)
    assert (state.seq, mover) == (reply.result.seq, reply.result.seat)
    assert DrawStock() in reply.result.legal


def test_the_accounts_file_has_one_name_everywhere() -> None:
    """``ramino accounts``' default file is the one Mosquitto's config reads, and every
    document names that file."""
    conf = (DEPLOY / "mosquitto.conf").read_text()
    name = next(line.split()[1] for line in conf.splitlines() if line.startswith("password_file "))
    default = build_parser().parse_args(["accounts", "list"]).file
    assert f"deploy/mosquitto/{name}" == default
    for document in (ROOT / "docs" / "operations.md", DEPLOY / "README.md"):
        text = document.read_text()
        assert "mosquitto/passwd" not in text
        assert f"chown mosquitto: {name}" in text or f"chown mosquitto: {default}" in text


def test_every_serve_option_is_in_the_operations_table() -> None:
    """docs/operations.md lists every option of ``ramino serve``."""
    parser = build_parser()
    subcommands = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    serve = subcommands.choices["serve"]
    options = {
        flag
        for action in serve._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help"
    }
    table = (ROOT / "docs" / "operations.md").read_text().split("## 0. Running the server")[1]
    table = table.split("### Mosquitto")[0]
    missing = sorted(flag for flag in options if f"`{flag}`" not in table)
    assert [] == missing


async def test_a_gin_view_carries_the_knock_limit_passes_and_hands_won(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """The Gin fields of the view are filled in (docs/variants.md said the view had none)."""
    await ensure_users(broker, ["alice", "bob"])
    async with serving(broker, tmp_path):
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        for client in (alice, bob):
            await client.connect()
        try:
            table = await start_table([alice, bob], "gin")
            synced = await alice.table(table).resync()
        finally:
            for client in (alice, bob):
                await client.close()
    assert synced.view is not None
    # Fresh deal, no option set: the default limit of 10, nobody passed, no hand won yet.
    shown = (synced.view.knock_limit, synced.view.upcard_passes, synced.view.hands_won)
    assert (10, 0, (0, 0)) == shown
    paragraph = (ROOT / "docs" / "variants.md").read_text()
    assert "The view has no field for" not in paragraph
    assert all(f"`{name}`" in paragraph for name in ("upcard_passes", "hands_won"))


async def test_the_creators_first_update_comes_before_the_created_reply(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """As docs/protocol.md now warns: ``create_table`` with ``sit`` sends the creator the
    table's first update (seq 2, ``player_sat``) before the reply that names the table."""
    await ensure_users(broker, ["alice"])
    request = Request(id="create-1", cmd=CreateTable(variant="gin"))
    inbox: list[Reply | Update] = []
    async with serving(broker, tmp_path), raw(broker, "alice", topics.inbox("alice")) as alice:
        alice.publish(topics.lobby_command("alice", 0), encode(request), qos=1)
        async with asyncio.timeout(WAIT):
            while not inbox or not isinstance(inbox[-1], Reply):
                message = await alice.receive()
                if message.topic == topics.inbox("alice"):
                    inbox.append(decode_inbox(message.payload))
    update, reply = inbox
    assert isinstance(update, Update)
    assert isinstance(reply, Reply)
    assert isinstance(reply.result, Created)
    assert (reply.result.table, 2) == (update.table, update.seq)
    assert [PlayerSat(0, "alice")] == [logged.event for logged in update.events]
    assert reply.seq == update.seq
    text = (ROOT / "docs" / "protocol.md").read_text()
    assert "An update for a table you do not know yet" in text
    assert "no-progress timeout" in text
