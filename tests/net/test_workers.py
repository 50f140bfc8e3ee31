"""Several ``ramino serve --worker`` processes sharing a PostgreSQL store and Mosquitto.

Workers run as real subprocesses on the session's Mosquitto (deploy/ config) and a throw-away
PostgreSQL database. The tests wait on what the workers print (the shards they take, the tables
they take over) and on the clients' messages, never on a clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from protocol import topics
from protocol.client import Client, RequestFailed
from protocol.codec import decode_inbox, decode_request, encode
from protocol.messages import ListTables, Reply, Request, Welcome
from protocol.transport import Message, Transport, parse_broker_url
from server.net.leases import Leases
from server.net.serve import ServeConfig, check_worker
from server.net.workers import WorkerError
from server.tables.actor import TableActor, load_table, load_tables
from server.tables.errors import LeaseLost, SeqConflict
from server.tables.postgres_store import Fence, PostgresStore
from server.tables.store import NewEvent, Snapshot
from server.tables.table import CreateTable, Sit, StartGame, empty_table
from tests.net.conftest import MosquittoBroker, client_for, ensure_users, serve_process
from tests.net.players import logged_table, play_seat, start_table
from tests.net.test_restart import Acks
from tests.tables.conftest import postgres_url as postgres_url  # the fixture
from tests.tables.test_records import NullOutbox

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 60.0
"""Longest a worker may take to start, or to print a line the test waits for."""

# Lobby shards with 2 shards, crc32(name) mod 2 worked out with zlib.crc32:
# bob 0, dave 0, erin 0; alice 1, carol 1, frank 1.
SHARD0 = ("bob", "dave")
SHARD1 = ("alice", "carol")


class WorkerProcess:
    """``ramino serve --worker NAME`` as a subprocess; every line it prints is kept, and
    ``wait_for`` waits for a line containing a text."""

    def __init__(self, name: str, process: asyncio.subprocess.Process) -> None:
        self.name = name
        self.process = process
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            async with self._changed:
                self.lines.append(line.decode(errors="replace").rstrip())
                self._changed.notify_all()
        async with self._changed:
            self.lines.append("<exited>")
            self._changed.notify_all()

    async def wait_for(self, text: str, after: int = 0) -> str:
        """The first line from index ``after`` on that contains ``text``."""
        async with asyncio.timeout(START_SECONDS), self._changed:
            while True:
                for line in self.lines[after:]:
                    if text in line:
                        return line
                assert "<exited>" not in self.lines, "\n".join(self.lines)
                await self._changed.wait()

    def shards(self) -> set[int]:
        """The lobby shards it serves now, as its lines tell."""
        held: set[int] = set()
        for line in self.lines:
            if "lobby shard " in line and f"worker {self.name} " in line:
                shard = int(line.rsplit(" ", 1)[1])
                if " serves lobby shard " in line:
                    held.add(shard)
                else:
                    held.discard(shard)
        return held

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        await self._reader


@contextlib.asynccontextmanager
async def worker(
    broker: MosquittoBroker,
    store: str,
    name: str,
    shards: int = 2,
    ttl: float = 2.0,
    extra: tuple[str, ...] = (),
) -> AsyncIterator[WorkerProcess]:
    """Worker ``name`` as a subprocess, once it says it is serving; SIGKILLed if still alive."""
    process = await serve_process(
        broker, store, "--worker", name, "--shards", str(shards), "--lease-ttl", str(ttl), *extra
    )
    running = WorkerProcess(name, process)
    try:
        await running.wait_for("serving on")
        yield running
    finally:
        await running.close()


@contextlib.asynccontextmanager
async def two_workers(
    broker: MosquittoBroker, store: str, ttl: float = 2.0, extra: tuple[str, ...] = ()
) -> AsyncIterator[tuple[WorkerProcess, WorkerProcess]]:
    """Workers w1 and w2, once each serves one of the two lobby shards (w1 takes both, sees
    w2 join and hands one over)."""
    async with worker(broker, store, "w1", ttl=ttl, extra=extra) as first:
        await first.wait_for("serves lobby shard 1")
        async with worker(broker, store, "w2", ttl=ttl, extra=extra) as second:
            await second.wait_for("w2 serves lobby shard")
            yield first, second


async def lease_owners(store: str, kind: str = "table") -> dict[str, str]:
    """Key -> owner of the current leases of ``kind``."""
    connection = await asyncpg.connect(store)
    try:
        rows = await connection.fetch(
            "SELECT key, owner FROM leases WHERE kind = $1 AND expires_at > now()", kind
        )
    finally:
        await connection.close()
    return {str(key): str(owner) for key, owner in rows}


async def check_log(store: str, table: str, acks: dict[str, Acks]) -> int:
    """The table's log ends the game, holds every command acknowledged to its players
    (``acks``), and each command's events form one run (a command applied twice would show
    two runs); its last seq."""
    rows, state = await logged_table(store, table)
    assert "finished" == state.status
    runs: dict[str, list[int]] = {}
    for row in rows:
        if row.command_id:
            runs.setdefault(row.command_id, []).append(row.seq)
    for command_id, seqs in runs.items():
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), (command_id, seqs)
    acknowledged = {f"{name}/{id_}" for name, ack in acks.items() for id_ in ack.ids}
    assert set() == acknowledged - set(runs)
    return state.seq


def pick(acks: dict[str, Acks], names: tuple[str, ...]) -> dict[str, Acks]:
    """The acknowledgements of ``names`` (the players of one table)."""
    return {name: acks[name] for name in names}


def _clients(
    broker: MosquittoBroker,
    names: tuple[str, ...],
    acks: dict[str, Acks],
    request_timeout: float = 1.0,
) -> list[Client]:
    clients = []
    for name in names:
        acks[name] = Acks()
        client = client_for(broker, name, request_timeout=request_timeout, tap=acks[name])
        client.attempts = max(2, int(60 / request_timeout))
        clients.append(client)
    return clients


def test_worker_needs_postgresql_and_a_shared_broker() -> None:
    with pytest.raises(WorkerError, match="PostgreSQL"):
        check_worker(ServeConfig(broker="mqtt://127.0.0.1:1883", worker="w1"))
    with pytest.raises(WorkerError, match="broker"):
        check_worker(ServeConfig(store="postgresql://127.0.0.1/ramino", worker="w1"))
    with pytest.raises(WorkerError, match="--worker"):
        check_worker(ServeConfig(shards=2))
    shared = "mqtt://127.0.0.1:1883"
    laddered = ServeConfig(broker=shared, store="postgresql://h/r", worker="w1", ladder="main")
    with pytest.raises(WorkerError, match="--ladder"):
        check_worker(laddered)
    check_worker(ServeConfig())  # one server as before: SQLite and the embedded broker


async def test_a_stale_owner_cannot_append_even_at_a_fresh_seq(
    postgres_url: str,
) -> None:
    first = await PostgresStore.open(postgres_url)
    second = await PostgresStore.open(postgres_url)
    connection = await asyncpg.connect(postgres_url)
    try:
        take = (
            "INSERT INTO leases VALUES ('table', 't1', $1, $2, now() + interval '1 hour')"
            " ON CONFLICT (kind, key) DO UPDATE SET owner = excluded.owner,"
            " epoch = excluded.epoch, expires_at = excluded.expires_at"
        )
        await connection.execute(take, "w1", 1)
        first.fence = Fence("w1", {"t1": 1})
        second.fence = Fence("w2", {})
        event = NewEvent(b"\x80", 1.0)
        assert 1 == await first.append("t1", 0, [event])
        with pytest.raises(LeaseLost):  # w2 holds no lease on t1
            await second.append("t1", 1, [event])
        # w1's lease ran out and w2 took the table (epoch 2): w1 may not append, although
        # seq 2 is free, while w2 appends there.
        await connection.execute(take, "w2", 2)
        second.fence.epochs["t1"] = 2
        with pytest.raises(LeaseLost):
            await first.append("t1", 1, [event])
        assert 2 == await second.append("t1", 1, [event])
        with pytest.raises(LeaseLost):  # nor at the next one
            await first.append("t1", 2, [event])
        with pytest.raises(SeqConflict):  # the seq check still holds for the owner
            await second.append("t1", 1, [event])
        assert 2 == await second.last_seq("t1")
    finally:
        await connection.close()
        await first.close()
        await second.close()


async def test_renewing_leases_while_an_append_reads_them_cannot_deadlock(
    postgres_url: str,
) -> None:
    """An append reads the lease rows of its batch ``FOR SHARE`` in key order; the renewal of
    a worker's table leases locks them too, so it must take them in the same order (in any
    other, an append of tables a and b, and a renewal of b and a, wait for each other)."""
    store = await PostgresStore.open(postgres_url)  # the schema
    await store.close()
    appender = await asyncpg.connect(postgres_url)
    watcher = await asyncpg.connect(postgres_url)
    leases = await Leases.open(postgres_url, "w1", 60.0)
    try:
        for key in ("b", "a"):  # b first: read first by a scan of the rows
            assert 1 == await leases.take("table", key)
        select = "SELECT key FROM leases WHERE kind = 'table' AND key = $1 FOR SHARE"
        async with appender.transaction():
            await appender.fetch(select, "a")
            renewal = asyncio.create_task(leases.renew("table", {"b": 1, "a": 1}))
            # Until the renewal waits for a lock (on "a", held here).
            async with asyncio.timeout(START_SECONDS):
                while not await watcher.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND datname = current_database()"
                ):
                    assert not renewal.done()
            await appender.fetch(select, "b")  # not held by the waiting renewal
        async with asyncio.timeout(START_SECONDS):
            assert {"a", "b"} == await renewal
    finally:
        await leases.close()
        await appender.close()
        await watcher.close()


async def test_two_workers_share_the_tables_and_both_games_finish(
    mosquitto: MosquittoBroker,
    postgres_url: str,
) -> None:
    await ensure_users(mosquitto, [*SHARD0, *SHARD1])
    acks: dict[str, Acks] = {"bob": Acks()}
    wrong: asyncio.Queue[Reply] = asyncio.Queue()

    def tap(message: Message) -> None:
        acks["bob"](message)
        if message.topic == topics.inbox("bob") and message.payload:
            reply = decode_inbox(message.payload)
            if isinstance(reply, Reply) and reply.id == "wrong-shard":
                wrong.put_nowait(reply)

    async with two_workers(mosquitto, postgres_url) as (first, second):
        assert {0, 1} == first.shards() | second.shards()
        clients = _clients(mosquitto, (*SHARD0, *SHARD1), acks)
        acks["bob"] = Acks()
        clients[0] = client_for(mosquitto, "bob", request_timeout=1.0, tap=tap)
        clients[0].attempts = 60
        try:
            for client in clients:
                await client.connect()
            # bob's shard is 0: sent on shard 1, a lobby command is refused with the welcome,
            # which gives the number of shards.
            request = encode(Request(id="wrong-shard", cmd=ListTables()))
            clients[0].transport.publish(topics.lobby_command("bob", 1), request)
            async with asyncio.timeout(START_SECONDS):
                refused = await wrong.get()
            assert (False, "lobby/wrong_shard") == (refused.ok, refused.code)
            assert isinstance(refused.result, Welcome)
            assert 2 == refused.result.shards
            # The SDK follows such a refusal: dave (shard 0) sent to shard 1 ends on shard 0.
            # (After the welcome the retained status, delivered before it, has been read: it
            # cannot set the shard behind the test's back.)
            await clients[1].hello()
            clients[1].shard = 1
            assert (await clients[1].request(ListTables())).ok
            assert 0 == clients[1].shard
            on_zero = await start_table(clients[:2], "basic")  # hosted by bob, shard 0
            on_one = await start_table(clients[2:], "basic")  # hosted by alice, shard 1
            owners = await lease_owners(postgres_url)
            shard_owners = await lease_owners(postgres_url, "shard")
            # Each table is leased by the worker of its host's lobby shard: one each.
            assert owners[on_zero] == shard_owners["0"]
            assert owners[on_one] == shard_owners["1"]
            assert {"w1", "w2"} == {owners[on_zero], owners[on_one]}
            listed = {listing.table for listing in await clients[1].tables()}
            assert {on_zero, on_one} <= listed  # the lobby lists both workers' tables
            finals = await asyncio.gather(
                *(play_seat(client, on_zero, seed) for seed, client in enumerate(clients[:2])),
                *(play_seat(client, on_one, seed) for seed, client in enumerate(clients[2:])),
            )
        finally:
            for client in clients:
                await client.close()
    assert {final.status for final in finals} == {"finished"}
    assert await check_log(postgres_url, on_zero, pick(acks, SHARD0)) == finals[0].seq
    assert await check_log(postgres_url, on_one, pick(acks, SHARD1)) == finals[2].seq


async def _play_through_a_stop(
    mosquitto: MosquittoBroker, store: str, how: signal.Signals, ttl: float
) -> tuple[str, str, str, str]:
    """Two games on two workers; ``how`` stops the worker of the first at seq 30. Returns the
    two tables, the stopped worker and the survivor, after both games are over and checked."""
    await ensure_users(mosquitto, [*SHARD0, *SHARD1])
    acks: dict[str, Acks] = {}
    async with two_workers(mosquitto, store, ttl=ttl) as (first, second):
        clients = _clients(mosquitto, (*SHARD0, *SHARD1), acks)
        try:
            for client in clients:
                await client.connect()
            on_zero = await start_table(clients[:2], "basic")
            on_one = await start_table(clients[2:], "basic")
            owners = await lease_owners(store)
            victim, survivor = (first, second) if owners[on_zero] == first.name else (second, first)
            mark = len(survivor.lines)
            games = asyncio.gather(
                *(play_seat(client, on_zero, seed) for seed, client in enumerate(clients[:2])),
                *(play_seat(client, on_one, seed) for seed, client in enumerate(clients[2:])),
            )
            async with asyncio.timeout(START_SECONDS):
                await acks["bob"].wait_for(30)
            victim.process.send_signal(how)
            code = await victim.process.wait()
            if how == signal.SIGTERM:
                assert 0 == code
                # Released, not left to expire: no lease of the stopped worker is current.
                current = await lease_owners(store)
                assert victim.name not in current.values()
            await survivor.wait_for("took over", after=mark)
            finals = await games
        finally:
            for client in clients:
                await client.close()
    # The survivor logs one line for what it took over, none per table: a ``table`` line for
    # on_zero while it was still playing could only come from the takeover (its listing, seats
    # and status, does not change while a game is played).
    logged = [json.loads(line) for line in survivor.lines[mark:] if line.startswith("{")]
    tables = [
        (line.get("table"), line.get("status")) for line in logged if line["event"] == "table"
    ]
    assert (on_zero, "playing") not in tables
    assert (on_zero, "finished") in tables  # the lines are there to be read
    assert {final.status for final in finals} == {"finished"}
    assert await check_log(store, on_zero, pick(acks, SHARD0)) == finals[0].seq
    assert await check_log(store, on_one, pick(acks, SHARD1)) == finals[2].seq
    return on_zero, on_one, victim.name, survivor.name


async def test_a_killed_worker_s_tables_continue_under_the_other(
    mosquitto: MosquittoBroker,
    postgres_url: str,
) -> None:
    on_zero, on_one, _, survivor = await _play_through_a_stop(
        mosquitto, postgres_url, signal.SIGKILL, ttl=3.0
    )
    connection = await asyncpg.connect(postgres_url)
    try:
        rows = await connection.fetch(
            "SELECT key, owner, epoch FROM leases WHERE kind = 'table' AND key = ANY($1)",
            [on_zero, on_one],
        )
    finally:
        await connection.close()
    # Both tables end with the survivor; the killed worker's changed owner (epoch 1 at its
    # creation, bumped at the takeover).
    held = {str(key): (str(owner), int(epoch)) for key, owner, epoch in rows}
    assert {on_zero: survivor, on_one: survivor} == {key: held[key][0] for key in held}
    assert held[on_zero][1] >= 2


async def test_sigterm_hands_the_tables_over(
    mosquitto: MosquittoBroker,
    postgres_url: str,
) -> None:
    # Leases of 60 s: the survivor can only have taken the table over before the game's end
    # because the stopped worker released it.
    await _play_through_a_stop(mosquitto, postgres_url, signal.SIGTERM, ttl=60.0)


class Unlisted:
    """A client tap: the retained lobby listings cleared (a finished table leaving the
    server's memory clears its listing), one event per table."""

    def __init__(self) -> None:
        self.cleared: dict[str, asyncio.Event] = {}

    def __call__(self, message: Message) -> None:
        if message.topic.startswith(topics.lobby_listing("")) and not message.payload:
            table = message.topic[len(topics.lobby_listing("")) :]
            self.cleared.setdefault(table, asyncio.Event()).set()

    async def wait(self, table: str) -> None:
        async with asyncio.timeout(START_SECONDS):
            await self.cleared.setdefault(table, asyncio.Event()).wait()


async def test_a_finished_table_out_of_memory_answers_as_one_server_does(
    mosquitto: MosquittoBroker,
    postgres_url: str,
) -> None:
    """docs/operations.md section 0: a finished table idle for ``--finished-ttl`` leaves
    memory and "the next command, join or resync there loads it back, so a late rematch or
    resync still works". Workers answer the same: the worker that had the table, or, once it
    is killed, another."""
    await ensure_users(mosquitto, [*SHARD0, *SHARD1])
    unlisted = Unlisted()
    extra = ("--finished-ttl", "1")
    async with two_workers(mosquitto, postgres_url, extra=extra) as (first, second):
        names = (*SHARD0, *SHARD1)
        clients = [client_for(mosquitto, name, request_timeout=1.0) for name in names]
        clients[0] = client_for(mosquitto, "bob", request_timeout=1.0, tap=unlisted)
        for client in clients:
            client.attempts = 15
        try:
            for client in clients:
                await client.connect()
            clients[0].transport.subscribe(topics.lobby_listing("+"), qos=1)
            on_zero = await start_table(clients[:2], "basic")
            on_one = await start_table(clients[2:], "basic")
            owners = await lease_owners(postgres_url)
            finals = await asyncio.gather(
                *(play_seat(client, on_zero, seed) for seed, client in enumerate(clients[:2])),
                *(play_seat(client, on_one, seed) for seed, client in enumerate(clients[2:])),
            )
            assert {"finished"} == {final.status for final in finals}
            await unlisted.wait(on_zero)  # both out of memory
            await unlisted.wait(on_one)
            # Loaded back by a resync, by the worker that had it.
            synced = await clients[2].table(on_one).resync()
            assert ("finished", finals[2].seq) == (synced.status, synced.seq)
            assert owners[on_one] == (await lease_owners(postgres_url))[on_one]
            # The worker that had the other one is killed: the survivor answers there.
            victim, survivor = (first, second) if owners[on_zero] == "w1" else (second, first)
            assert survivor.name == owners[on_one]
            mark = len(survivor.lines)
            victim.process.kill()
            await victim.process.wait()
            await survivor.wait_for("finished table(s) of stopped workers", after=mark)
            synced = await clients[1].table(on_zero).resync()
            assert ("finished", finals[0].seq) == (synced.status, synced.seq)
            assert (await clients[0].table(on_zero).rematch()).ok
            assert survivor.name == (await lease_owners(postgres_url))[on_zero]
            # A new game at once (docs/protocol.md: rematch), played by the survivor.
            assert "playing" == (await clients[0].table(on_zero).resync()).status
        finally:
            for client in clients:
                await client.close()


async def test_table_quotas_hold_across_workers(
    mosquitto: MosquittoBroker,
    postgres_url: str,
) -> None:
    """docs/operations.md "Quotas and table lifetimes": an account may sit at
    ``--max-open-tables`` open tables and have created ``--max-waiting-tables`` waiting ones,
    whichever workers serve them."""
    await ensure_users(mosquitto, ["bob", "alice"])
    extra = ("--max-open-tables", "1", "--max-waiting-tables", "1")
    async with two_workers(mosquitto, postgres_url, extra=extra):
        bob, alice = (client_for(mosquitto, name) for name in ("bob", "alice"))
        try:
            for client in (bob, alice):
                await client.connect()
            mine = (await bob.create_table("basic", seats=2)).table  # shard 0's worker
            theirs = (await alice.create_table("basic", seats=2)).table  # shard 1's worker
            owners = await lease_owners(postgres_url)
            assert owners[mine] != owners[theirs]
            # bob sits at one open table already, on the other worker.
            with pytest.raises(RequestFailed) as refused:
                await bob.table(theirs).sit()
            assert "limit/tables" == refused.value.code
            assert "at most 1 open tables" in str(refused.value)
            # One waiting table created by bob already: a second one is refused, with sit or
            # without.
            for sit in (True, False):
                with pytest.raises(RequestFailed) as refused:
                    await bob.create_table("basic", seats=2, sit=sit)
                assert "limit/tables" == refused.value.code
            # A place freed on one worker counts on the other: the same request succeeds.
            assert (await bob.table(mine).stand()).ok
            assert (await bob.table(theirs).sit()).ok
            # Sitting at alice's table, bob is at his limit again.
            with pytest.raises(RequestFailed) as refused:
                await bob.table(mine).sit()
            assert "limit/tables" == refused.value.code
        finally:
            for client in (bob, alice):
                await client.close()


class Resends:
    """A tap of the server's account on every table command topic: the request ids sent more
    than once (a client sends a request again only when no reply came in time)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], int] = {}

    def __call__(self, message: Message) -> None:
        parsed = topics.parse_command_topic(message.topic)
        if parsed is None or not message.payload:
            return
        key = (parsed[2], decode_request(message.payload).id)
        self.seen[key] = self.seen.get(key, 0) + 1

    def at(self, table: str) -> list[str]:
        return [id_ for (at, id_), count in self.seen.items() if at == table and count > 1]


async def test_a_worker_that_joins_takes_tables_over_while_they_play(
    mosquitto: MosquittoBroker,
    postgres_url: str,
) -> None:
    """Worker w1 serves three tables in play; w2 joins and is handed some of them (the
    tables above w1's fair share): the games go on under w2 with no acknowledged command lost
    and no request left unanswered long enough to be sent again."""
    players = (*SHARD0, *SHARD1, "erin", "frank")  # erin shard 0, frank 1
    await ensure_users(mosquitto, list(players))
    acks: dict[str, Acks] = {}
    resends = Resends()
    listener = Transport(mosquitto.server_user, mosquitto.server_password, tap=resends)
    listener.subscribe(topics.table_command("+", "+"))
    await listener.connect(parse_broker_url(mosquitto.url))
    pairs = (players[0:2], players[2:4], players[4:6])
    async with worker(mosquitto, postgres_url, "w1") as first:
        await first.wait_for("serves lobby shard 1")
        clients = _clients(mosquitto, players, acks, request_timeout=5.0)
        try:
            for client in clients:
                await client.connect()
            tables = [
                await start_table(clients[i : i + 2], "basic", {"target": 300}) for i in (0, 2, 4)
            ]
            assert {"w1"} == set((await lease_owners(postgres_url)).values())
            games = asyncio.gather(
                *(
                    play_seat(client, table, seed)
                    for index, table in enumerate(tables)
                    for seed, client in enumerate(clients[2 * index : 2 * index + 2])
                )
            )
            async with asyncio.timeout(START_SECONDS):
                await acks["bob"].wait_for(20)
            async with worker(mosquitto, postgres_url, "w2") as second:
                line = await second.wait_for("handed-over table(s)")
                at_handover = {table: await _last_seq(postgres_url, table) for table in tables}
                finals = await games
                owners = await lease_owners(postgres_url)
        finally:
            for client in clients:
                await client.close()
            await listener.close()
    # w1 held 3, its fair share with two workers is 2: one table moved.
    assert "took 1 handed-over" in line
    moved = [table for table in tables if owners[table] == "w2"]
    assert 1 == len(moved)
    assert {final.status for final in finals} == {"finished"}
    for index, table in enumerate(tables):
        final = finals[2 * index]
        assert await check_log(postgres_url, table, pick(acks, pairs[index])) == final.seq
    # Played on under w2 after the handover, with no request sent twice.
    assert finals[2 * tables.index(moved[0])].seq > at_handover[moved[0]]
    assert [] == resends.at(moved[0])


async def _last_seq(store: str, table: str) -> int:
    connection = await asyncpg.connect(store)
    try:
        return int(
            await connection.fetchval("SELECT last_seq FROM tables WHERE table_id = $1", table)
        )
    finally:
        await connection.close()


async def test_tables_loaded_together_equal_tables_loaded_one_by_one(
    postgres_url: str,
) -> None:
    """What a worker taking tables over loads in one query (snapshot and tail) is what
    ``load_table`` rebuilds for each table, with the time of its last event."""
    store = await PostgresStore.open(postgres_url)
    try:
        # Three tables: t0 with no snapshot (snapshot_every 0), t1 and t2 with snapshots
        # every 3 events, so that each loads from a snapshot and a tail (or no tail).
        for index, every in enumerate((0, 3, 3)):
            table_id = f"t{index}"
            actor = TableActor(empty_table(table_id), store, NullOutbox(), snapshot_every=every)
            actor.start()
            await actor.submit("p0", CreateTable(variant="basic", seats=2), "c")
            for name in ("p0", "p1"):
                await actor.submit(name, Sit(), f"sit-{name}")
            if index < 2:  # t2 stops at seq 3, on its snapshot
                await actor.submit("p0", StartGame(), "start")
            await actor.stop()
        assert 3 == (await store.latest_snapshot("t2") or Snapshot("", 0, b"")).seq
        assert await store.latest_snapshot("t1") is not None
        loaded = await load_tables(store, ["t0", "t1", "t2", "missing"])
        assert ["t0", "t1", "t2"] == sorted(loaded)
        for table_id, (table, last_at) in loaded.items():
            assert await load_table(store, table_id) == table
            rows = await store.read(table_id)
            assert rows[-1].at == last_at
    finally:
        await store.close()


async def test_departed_workers_are_forgotten_once_they_hold_nothing(postgres_url: str) -> None:
    """Membership rows: ``gone`` expired two hours ago and holds nothing; ``parker`` too but
    still owns a parked table (its row is how the live workers find that table: kept);
    ``tabled`` still owns an expired table lease (kept until adopted); ``recent`` expired a
    minute ago (kept: within the hour); ``live`` is live. Only ``gone`` is forgotten; once the
    parked table is adopted by a live worker, ``parker`` is forgotten too."""
    store = await PostgresStore.open(postgres_url)  # writes the schema
    connection = await asyncpg.connect(postgres_url)
    leases = await Leases.open(postgres_url, "live", ttl=5.0)
    try:
        rows = [
            ("worker", "gone", "gone", "now() - interval '2 hours'"),
            ("worker", "parker", "parker", "now() - interval '2 hours'"),
            ("parked", "t-parked", "parker", "'infinity'"),
            ("worker", "tabled", "tabled", "now() - interval '2 hours'"),
            ("table", "t-open", "tabled", "now() - interval '2 hours'"),
            ("worker", "recent", "recent", "now() - interval '1 minute'"),
            ("worker", "live", "live", "now() + interval '1 minute'"),
        ]
        for kind, key, owner, expires in rows:
            await connection.execute(
                f"INSERT INTO leases VALUES ($1, $2, $3, 1, {expires})", kind, key, owner
            )
        assert {"gone"} == await leases.forget_departed()
        assert {"t-parked"} == await leases.adopt_parked(10)
        assert {"parker"} == await leases.forget_departed()
        workers = await connection.fetch("SELECT key FROM leases WHERE kind = 'worker'")
        assert {"tabled", "recent", "live"} == {row["key"] for row in workers}
    finally:
        await leases.close()
        await connection.close()
        await store.close()
