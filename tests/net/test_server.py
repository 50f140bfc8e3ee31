"""The server over real brokers: whole games of every preset with SDK clients, secrecy of
everything delivered, presence and resync."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from protocol import topics
from protocol.codec import decode_snapshot, encode
from protocol.game import DrawStock
from protocol.messages import Request
from protocol.transport import Message
from server.engine import VARIANTS
from server.tables.timers import ManualClock
from tests.net.conftest import BrokerUnderTest, client_for, ensure_users, serving
from tests.net.players import (
    Inbox,
    card_leaks,
    play_seat,
    public_topics,
    start_table,
    states_by_seq,
)

PLAYERS = ["alice", "bob", "carol", "dave"]


def _seats(variant: str) -> int:
    """One more than the fewest players (two for two-player games), to have an onlooker seat."""
    preset = VARIANTS[variant]
    return min(preset.max_players, max(preset.min_players, 3))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
async def test_every_preset_plays_to_the_end_and_nobody_sees_a_hidden_card(
    broker: BrokerUnderTest, tmp_path: Path, variant: str
) -> None:
    """Greedy SDK bots finish a game; no message any of them, or a spectator, received shows a
    card of another seat's hand or of the stock."""
    seats = _seats(variant)
    names = PLAYERS[:seats]
    await ensure_users(broker, [*names, "eve"])
    inboxes = [Inbox(name) for name in names]
    watcher = Inbox("eve (spectator)")
    async with serving(broker, tmp_path) as server:
        clients = [client_for(broker, name, tap=inbox) for name, inbox in zip(names, inboxes)]
        spectator = client_for(broker, "eve", tap=watcher)
        for client in [*clients, spectator]:
            await client.connect()
        try:
            table = await start_table(clients, variant)
            spectator.transport.subscribe(*public_topics(table))
            finals = await asyncio.gather(
                *(play_seat(client, table, seed) for seed, client in enumerate(clients))
            )
        finally:
            for client in [*clients, spectator]:
                await client.close()
        states = await states_by_seq(server.store, table)
    last = states[max(states)].state
    assert "finished" == last.status
    assert {final.seq for final in finals} == {last.seq}
    assert all(final.view is not None and final.view.winners for final in finals)
    leaks = [
        leak
        for seat, inbox in enumerate(inboxes)
        for leak in card_leaks(inbox, seat, states, table)
    ]
    leaks += card_leaks(watcher, None, states, table)
    assert [] == leaks
    # Everyone did follow the game (the checks above are not vacuous).
    assert all(len(inbox.messages) > len(states) // 4 for inbox in [*inboxes, watcher])


async def test_others_inbox_and_command_topics_are_closed(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """A snoop subscribed to a player's inbox receives nothing, and a command it publishes on
    that player's topic does not reach the table."""
    await ensure_users(broker, ["alice", "bob", "carol"])
    snooped = Inbox("carol snooping")
    async with serving(broker, tmp_path) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        carol = client_for(broker, "carol", tap=snooped)
        for client in (alice, bob, carol):
            await client.connect()
        try:
            carol.transport.subscribe(topics.inbox("alice"), topics.inbox("bob"))
            table = await start_table([alice, bob], "gin")
            seq = server.service.actors[table].table.seq
            forged = Request(id="forged-1", cmd=DrawStock(), seq=seq)
            carol.transport.publish(topics.table_command(table, "alice"), encode(forged))
            carol.transport.publish(topics.table_command(table, "bob"), encode(forged))
            # A marker through the same connection and server: once carol has its reply, the
            # forged commands (published before it) would have been handled.
            await carol.hello()
            await alice.hello()
        finally:
            for client in (alice, bob, carol):
                await client.close()
        assert seq == server.service.actors[table].table.seq
    others = {topics.inbox("alice"), topics.inbox("bob")}
    assert [] == [message.topic for message in snooped.messages if message.topic in others]
    assert any(message.topic == topics.inbox("carol") for message in snooped.messages)


async def test_a_dropped_client_resyncs_and_finishes(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """Killing a client's connection mid-hand: it reconnects, resyncs and the game finishes."""
    await ensure_users(broker, ["alice", "bob"])
    async with serving(broker, tmp_path) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        for client in (alice, bob):
            await client.connect()
            client.transport.set_reconnect_delay(0.05)
        try:
            table = await start_table([alice, bob], "knock")
            bob_game = asyncio.create_task(play_seat(bob, table, 2))
            first = await play_seat(alice, table, 1, stop_at_seq=12)
            assert "playing" == first.status
            alice.transport.drop()
            finals = await asyncio.gather(play_seat(alice, table, 1), bob_game)
        finally:
            for client in (alice, bob):
                await client.close()
        assert alice.table(table).resyncs >= 1
        assert "finished" == server.service.actors[table].table.status
        assert {final.seq for final in finals} == {server.service.actors[table].table.seq}


async def test_a_vanished_player_is_played_for_after_the_grace_period(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """A client whose connection dies (its will says offline) keeps its seat for the grace
    period; then the server plays its turn; back online, it plays again."""
    await ensure_users(broker, ["alice", "bob"])
    clock = ManualClock()
    async with serving(broker, tmp_path, clock=clock, grace_seconds=20) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        for client in (alice, bob):
            await client.connect()
        try:
            table = await start_table([alice, bob], "basic")
            actor = server.service.actors[table]
            assert actor.table.game is not None
            to_move = actor.table.seats[actor.table.game.turn]
            mover = alice if to_move == "alice" else bob
            waiting = bob if mover is alice else alice
            seq = actor.table.seq
            mover.transport.kill()
            async with asyncio.timeout(10):
                # The will reaches the server, which arms the seat's timer at the grace's end.
                await clock.wait_for_sleeper(clock.time + 20)
            assert actor.absent(to_move)
            clock.advance(19)
            assert seq == actor.table.seq  # still within the grace period
            clock.advance(1)
            async with asyncio.timeout(10):
                update = await waiting.table(table).next_update()
                while update.seq <= seq:
                    update = await waiting.table(table).next_update()
            assert update.seq > seq
        finally:
            await waiting.close()
            await mover.close()


async def test_the_retained_snapshot_serves_a_late_spectator(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """A spectator arriving mid-game gets the retained public snapshot, with no hand in it."""
    await ensure_users(broker, ["alice", "bob", "carol"])
    async with serving(broker, tmp_path) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        late = Inbox("carol")
        carol = client_for(broker, "carol", tap=late)
        for client in (alice, bob):
            await client.connect()
        try:
            table = await start_table([alice, bob], "gin")
            seq = server.service.actors[table].table.seq
            await carol.connect()
            carol.transport.subscribe(topics.table_state(table))
            async with asyncio.timeout(10):
                while not any(
                    message.topic == topics.table_state(table) for message in late.messages
                ):
                    await carol.hello()
        finally:
            for client in (alice, bob, carol):
                await client.close()
    snapshot = decode_snapshot(
        next(
            message.payload
            for message in late.messages
            if message.topic == topics.table_state(table)
        )
    )
    assert seq == snapshot.seq
    assert snapshot.view is not None
    assert () == snapshot.view.hand
    assert (10, 10) == snapshot.view.hand_sizes


async def test_the_retained_snapshot_catches_up_after_a_burst_of_moves(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """Snapshots are published at most once a second, but the last state always follows."""
    await ensure_users(broker, ["alice", "bob", "carol"])
    seen = Inbox("carol")
    async with serving(broker, tmp_path) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        carol = client_for(broker, "carol", tap=seen)
        for client in (alice, bob, carol):
            await client.connect()
        try:
            table = await start_table([alice, bob], "basic")
            carol.transport.subscribe(topics.table_state(table))
            bob_moves = asyncio.create_task(play_seat(bob, table, 2, stop_at_seq=30))
            await play_seat(alice, table, 1, stop_at_seq=30)
            await bob_moves
            final = server.service.actors[table].table.seq
            state = topics.table_state(table)
            caught_up = asyncio.Event()

            def watch(message: Message) -> None:
                seen(message)
                if message.topic == state and decode_snapshot(message.payload).seq == final:
                    caught_up.set()

            carol.transport.tap = watch
            for message in list(seen.messages):  # it may have come already
                if message.topic == state and decode_snapshot(message.payload).seq == final:
                    caught_up.set()
            async with asyncio.timeout(10):
                await caught_up.wait()
        finally:
            for client in (alice, bob, carol):
                await client.close()
    snapshots = [decode_snapshot(m.payload).seq for m in seen.messages if m.topic == state]
    assert final == snapshots[-1]
    assert len(snapshots) < final - 12  # fewer snapshots than moves
