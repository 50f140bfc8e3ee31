"""Per-account quotas and table lifetimes against a hostile client, over both real brokers.

The rules (docs/operations.md, "Quotas and table lifetimes"; docs/protocol.md §13-14): one
account may have at most ``max_waiting_tables`` tables waiting for players that it created and
sit at at most ``max_open_tables`` open (waiting or playing) tables; beyond that
``create_table``, ``sit`` and ``rematch`` are refused with ``limit/tables``, a message naming the
limit, and nothing changes. A waiting table with no activity for ``waiting_ttl`` seconds gets
``table_closed`` ("expired: no activity while waiting for players") and leaves the lobby; a
finished table idle for ``finished_ttl`` seconds leaves the server's memory and its listing
leaves the lobby, but a resync still gets its final state. ``ServerStatus.tables`` counts the
open tables and is republished at most once a second when it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol import topics
from protocol.client import Client, RequestFailed
from protocol.codec import decode_listing, decode_status
from protocol.game import TableClosed
from protocol.messages import CreateTable, ServerStatus, Sit
from protocol.transport import Message, Transport, parse_broker_url
from server.engine import to_move
from server.net.gateway import Limits
from server.net.serve import Running, ServeConfig
from server.tables.timers import Clock, ManualClock
from tests.net.conftest import BrokerUnderTest, client_for, ensure_users, serving
from tests.net.players import Inbox, play_seat, start_table

WAIT = 10.0
WAITING_TTL = 1800.0
FINISHED_TTL = 300.0
REASON = "expired: no activity while waiting for players"
FLOOD = 30
"""Create requests the attacker sends at once."""


def _serving(
    broker: BrokerUnderTest,
    folder: Path,
    clock: Clock | None = None,
    max_waiting_tables: int = 10,
    max_open_tables: int = 50,
) -> contextlib.AbstractAsyncContextManager[Running]:
    """``ramino serve`` in this process on ``broker`` with the given quotas, the default table
    lifetimes (30 and 5 minutes) and a rate limit out of the way."""
    limits = Limits(
        rate=10_000,
        burst=10_000,
        max_waiting_tables=max_waiting_tables,
        max_open_tables=max_open_tables,
    )
    return serving(
        broker, folder, clock, limits, waiting_ttl=WAITING_TTL, finished_ttl=FINISHED_TTL
    )


@contextlib.asynccontextmanager
async def _clients(broker: BrokerUnderTest, *names: str) -> AsyncIterator[list[Client]]:
    await ensure_users(broker, list(names))
    clients = [client_for(broker, name) for name in names]
    try:
        for client in clients:
            await client.connect()
        yield clients
    finally:
        for client in clients:
            await client.close()


async def test_a_create_flood_gets_only_the_waiting_table_quota(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """30 creates at once from one account make 5 tables; the other 25 are refused with
    ``limit/tables`` and the limit in the message. A retried accepted create still answers
    its table; once one of the tables plays, one more may be created."""
    async with (
        _serving(broker, tmp_path, max_waiting_tables=5) as server,
        _clients(broker, "alice", "bob") as (alice, bob),
    ):
        ids = [f"flood-{number}" for number in range(FLOOD)]
        replies = await asyncio.gather(
            *(
                alice.request(CreateTable(variant="gin"), check=False, command_id=command_id)
                for command_id in ids
            )
        )
        accepted = [reply for reply in replies if reply.ok]
        refused = [reply for reply in replies if not reply.ok]
        assert 5 == len(accepted)
        assert {"limit/tables"} == {reply.code for reply in refused}
        assert all("at most 5 tables waiting" in reply.message for reply in refused)
        listed = [listing for listing in await bob.tables() if listing.host == "alice"]
        assert sorted(reply.table for reply in accepted) == sorted(t.table for t in listed)
        original = dict(zip(ids, replies, strict=True))
        first = next(command_id for command_id in ids if original[command_id].ok)
        retried = await alice.request(CreateTable(variant="gin"), command_id=first)
        assert original[first].table == retried.table
        # One of them starts: it no longer waits, so alice may open one more, and only one.
        await bob.table(accepted[0].table).sit()
        await alice.table(accepted[0].table).start()
        assert (await alice.create_table("gin")).table
        with pytest.raises(RequestFailed) as over:
            await alice.create_table("gin")
        assert "limit/tables" == over.value.code
        assert 6 == len(server.service.actors)


async def test_one_account_sits_at_no_more_than_the_open_table_quota(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """With ``max_open_tables`` 3, bob's fourth ``sit`` and a create that would seat him are
    refused (``limit/tables``, nothing appended); standing up from one table frees a place."""
    async with (
        _serving(broker, tmp_path, max_open_tables=3) as server,
        _clients(broker, "alice", "bob") as (alice, bob),
    ):
        tables = [(await alice.create_table("gin", sit=False)).table for _ in range(4)]
        for table in tables[:3]:
            await bob.table(table).sit()
        seq = server.service.actors[tables[3]].table.seq
        sit = await bob.request(Sit(), tables[3], check=False)
        assert (False, "limit/tables") == (sit.ok, sit.code)
        assert "at most 3 open tables" in sit.message
        assert seq == server.service.actors[tables[3]].table.seq
        with pytest.raises(RequestFailed) as create:
            await bob.create_table("gin")
        assert "limit/tables" == create.value.code
        await bob.table(tables[0]).stand()
        await bob.table(tables[3]).sit()
        assert ("bob", "") == server.service.actors[tables[3]].table.seats


async def test_an_idle_waiting_table_expires_and_leaves_the_lobby(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """An attacker's tables nobody joins are closed after 30 minutes: the host gets
    ``table_closed`` with the documented reason, the retained listing is cleared, a late sit is
    refused with ``table/closed``, the host may create tables again and the status counts 0."""
    clock = ManualClock()
    lobby = Inbox("eve")
    async with (
        _serving(broker, tmp_path, clock=clock, max_waiting_tables=2) as server,
        _clients(broker, "alice", "bob") as (alice, bob),
    ):
        bob.transport.tap = lobby
        bob.transport.subscribe(topics.lobby_listing("+"))
        created_at = clock.now()
        tables = [(await alice.create_table("gin")).table for _ in range(2)]
        with pytest.raises(RequestFailed):
            await alice.create_table("gin")
        async with asyncio.timeout(WAIT):
            await clock.wait_for_sleeper(until=created_at + WAITING_TTL)
        clock.advance(WAITING_TTL)
        for table in tables:
            async with asyncio.timeout(WAIT):
                update = await alice.table(table).next_update()
                while update.status != "closed":
                    update = await alice.table(table).next_update()
            assert [TableClosed(reason=REASON)] == [logged.event for logged in update.events]
        late = await bob.request(Sit(), tables[0], check=False)
        assert (False, "table/closed") == (late.ok, late.code)
        assert [] == [t for t in await bob.tables() if t.table in tables]
        assert (await alice.create_table("gin")).table
        await bob.hello()  # the listings published before this reply have arrived
        for table in tables:
            mine = [m for m in lobby.messages if m.topic == topics.lobby_listing(table)]
            assert b"" == mine[-1].payload
        assert 1 == server.gateway.status(True).tables


async def test_a_finished_table_leaves_memory_and_still_resyncs(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """Five idle minutes after a game ends the server holds no actor for the table and its
    listing leaves the lobby; a resync still gets the final state."""
    clock = ManualClock()
    lobby = Inbox("carol")
    async with (
        _serving(broker, tmp_path, clock=clock) as server,
        _clients(broker, "alice", "bob", "carol") as (alice, bob, carol),
    ):
        carol.transport.tap = lobby
        carol.transport.subscribe(topics.lobby_listing("+"))
        table = await start_table([alice, bob], "knock", options={"deals": 1})
        finals = await asyncio.gather(play_seat(alice, table, 1), play_seat(bob, table, 2))
        final_seq = max(update.seq for update in finals)
        assert table in server.service.actors
        clock.advance(FINISHED_TTL)
        async with asyncio.timeout(WAIT):
            await server.service.wait_unloaded(table)
        assert not [task for task in asyncio.all_tasks() if task.get_name() == f"table-{table}"]
        synced = await alice.table(table).resync()
        assert ("finished", final_seq) == (synced.status, synced.seq)
        assert synced.view is not None
        assert synced.view.winners
        await carol.hello()
        mine = [m for m in lobby.messages if m.topic == topics.lobby_listing(table)]
        assert "finished" == decode_listing(mine[-2].payload).status
        assert b"" == mine[-1].payload


async def test_the_status_counts_open_tables_at_most_once_a_second(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """``ServerStatus.tables`` follows the open tables: a change is republished once a second
    has passed since the last status, with the count at that time."""
    clock = ManualClock()
    await ensure_users(broker, ["eve"])
    statuses = _Statuses()
    watcher = Transport("eve", broker.password("eve"), tap=statuses)
    async with (
        _serving(broker, tmp_path, clock=clock) as server,
        _clients(broker, "alice", "bob") as (alice, bob),
    ):
        await watcher.connect(parse_broker_url(broker.url))
        try:
            watcher.subscribe(topics.server_status())
            started = clock.now()
            assert 0 == (await statuses.wait(1)).tables
            first = await alice.create_table("gin")
            await alice.create_table("gin", sit=False)
            async with asyncio.timeout(WAIT):
                await clock.wait_for_sleeper(until=started + 1.0)
            assert 1 == len(statuses.seen)  # the change waits for the second to pass
            clock.advance(1.0)
            assert (True, 2) == ((status := await statuses.wait(2)).online, status.tables)
            await bob.table(first.table).sit()
            await alice.table(first.table).start()  # still open: the count does not change
            await alice.create_table("gin")
            async with asyncio.timeout(WAIT):
                await clock.wait_for_sleeper(until=started + 2.0)
            clock.advance(1.0)
            assert 3 == (await statuses.wait(3)).tables
            assert 3 == len(server.service.actors)
        finally:
            await watcher.close()


class _Statuses:
    """A tap keeping the server statuses a connection receives."""

    def __init__(self) -> None:
        self.seen: list[ServerStatus] = []
        self._arrived = asyncio.Event()

    def __call__(self, message: Message) -> None:
        if message.topic == topics.server_status() and message.payload:
            self.seen.append(decode_status(message.payload))
            self._arrived.set()

    async def wait(self, count: int) -> ServerStatus:
        """The ``count``-th status, once it has arrived."""
        async with asyncio.timeout(WAIT):
            while len(self.seen) < count:
                self._arrived.clear()
                await self._arrived.wait()
        return self.seen[count - 1]


async def test_a_rematch_after_the_table_left_memory_knows_who_is_away(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """A player whose connection died while his finished table was out of memory is still
    absent at the rematch that loads it back (his grace period runs there too)."""
    clock = ManualClock()
    async with (
        _serving(broker, tmp_path, clock=clock) as server,
        _clients(broker, "alice", "bob") as clients,
    ):
        table = await start_table(clients, "knock", options={"deals": 1})
        await asyncio.gather(play_seat(clients[0], table, 1), play_seat(clients[1], table, 2))
        other = await start_table(clients, "gin")  # playing, no move timer
        clock.advance(FINISHED_TTL)
        async with asyncio.timeout(WAIT):
            await server.service.wait_unloaded(table)
        playing = server.service.actors[other].table
        assert playing.game is not None
        away = playing.seats[to_move(playing.game)]
        gone, staying = sorted(clients, key=lambda client: client.username != away)
        gone.transport.kill()
        async with asyncio.timeout(WAIT):
            # The will reaches the server, which arms the grace timer of the awaited seat.
            await clock.wait_for_sleeper(until=clock.time + 30)
        await staying.table(table).rematch()
        assert server.service.actors[table].absent(away)


def test_quotas_and_lifetimes_come_from_the_environment_and_the_command_line() -> None:
    """``RAMINO_MAX_WAITING_TABLES``, ``RAMINO_MAX_OPEN_TABLES``, ``RAMINO_WAITING_TTL`` and
    ``RAMINO_FINISHED_TTL`` set what docs/operations.md says (the command line wins); unset,
    the defaults are 10, 50, 1800 and 300."""
    env = {
        "RAMINO_MAX_WAITING_TABLES": "3",
        "RAMINO_MAX_OPEN_TABLES": "7",
        "RAMINO_WAITING_TTL": "60",
        "RAMINO_FINISHED_TTL": "5",
        "RAMINO_RATE": "20",
    }
    config = ServeConfig.from_env(env, max_open_tables=9, burst=None)
    assert (3, 9, 20.0, 100) == (
        config.limits.max_waiting_tables,
        config.limits.max_open_tables,
        config.limits.rate,
        config.limits.burst,
    )
    assert (60.0, 5.0) == (config.waiting_ttl, config.finished_ttl)
    defaults = ServeConfig.from_env({})
    assert (10, 50, 1800.0, 300.0) == (
        defaults.limits.max_waiting_tables,
        defaults.limits.max_open_tables,
        defaults.waiting_ttl,
        defaults.finished_ttl,
    )
