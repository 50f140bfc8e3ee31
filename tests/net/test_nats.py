"""Ramino on a 3-node NATS cluster (deploy/nats/): the ACL generated from protocol/topics.py,
games with the server and the players on different nodes, retained messages on every node,
secrecy and snooping, and a node killed during play.

The broker tests of tests/net/test_brokers.py and the snooping test of test_server.py run here
too, on the cluster (the ``broker`` fixture below is the cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections.abc import Callable
from pathlib import Path

import bcrypt
import pytest

from bots.policies.base import find_policy
from protocol import topics
from protocol.client import Client
from protocol.codec import decode_snapshot
from protocol.transport import Message, Transport, parse_broker_urls
from server.engine import make_rules
from server.net.accounts import Accounts
from server.net.embedded import SERVER_USER
from server.net.nats import NatsPasswords, permissions, sidecar_path, subject_matches, to_subject
from server.tables.replay import read_rows
from tests.net import test_brokers, test_server
from tests.net.conftest import BrokerUnderTest, ensure_users, serving
from tests.net.nats_cluster import NatsCluster
from tests.net.players import (
    GAME_SECONDS,
    Inbox,
    card_leaks,
    public_topics,
    start_table,
    states_by_seq,
)

# Tests of the other modules, run here on the cluster.
test_added_user_can_log_in = test_brokers.test_added_user_can_log_in
test_command_on_another_users_topic_is_not_delivered = (
    test_brokers.test_command_on_another_users_topic_is_not_delivered
)
test_inbox_reaches_only_its_owner = test_brokers.test_inbox_reaches_only_its_owner
test_retained_state_reaches_a_late_subscriber = (
    test_brokers.test_retained_state_reaches_a_late_subscriber
)
test_wildcards_deliver_only_what_a_client_may_read = (
    test_brokers.test_wildcards_deliver_only_what_a_client_may_read
)
test_wrong_password_is_refused = test_brokers.test_wrong_password_is_refused
test_wrong_server_password_is_refused = test_brokers.test_wrong_server_password_is_refused
test_others_inbox_and_command_topics_are_closed = (
    test_server.test_others_inbox_and_command_topics_are_closed
)

ROOT = Path(__file__).resolve().parents[2]
WAIT = 10.0
"""Seconds to wait for something that must happen."""
ATTEMPT = 5.0
"""How long one subscriber waits for retained messages (:func:`_retained`)."""
RETAINED_WAIT = 30.0
"""How long a node may take to learn another node's retained messages."""
FAILOVER_WAIT = 30.0
"""How long a client may take to be connected again after its node is killed: the surviving
nodes first elect new JetStream stream leaders (nats-server's election timeout is 4-9 s; the
first move after a kill waited up to 10.3 s), and an MQTT session's CONNACK waits for them.
docs/operations.md tells clients to resend for 30 s."""


@pytest.fixture
def broker(nats_cluster: NatsCluster) -> BrokerUnderTest:
    """The NATS cluster, for the tests taken from test_brokers.py and test_server.py."""
    return nats_cluster


class Received:
    """Every message a transport received (its tap), to wait on."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.changed = asyncio.Event()

    def __call__(self, message: Message) -> None:
        self.messages.append(message)
        self.changed.set()

    async def first(self, count: int, among: set[str]) -> list[Message]:
        """The first ``count`` messages on the topics ``among``, once they arrived."""
        async with asyncio.timeout(WAIT):
            while True:
                found = [message for message in self.messages if message.topic in among]
                if len(found) >= count:
                    return found[:count]
                self.changed.clear()
                await self.changed.wait()


async def _server_reading(cluster: NatsCluster, node: int) -> tuple[Transport, Received]:
    """The server account on ``node``, subscribed to what the server reads, once the broker
    has taken the subscriptions (a presence message to itself came back)."""
    received = Received()
    server = Transport(SERVER_USER, cluster.server_password, tap=received)
    await server.connect(parse_broker_urls(cluster.nodes[node].url))
    server.subscribe(*topics.SERVER_SUBSCRIPTIONS)
    marker = topics.presence(f"settled-{server.client_id}")
    async with asyncio.timeout(WAIT):
        while not any(message.topic == marker for message in received.messages):
            server.publish(marker, b"")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.2):
                    await received.changed.wait()
            received.changed.clear()
    return server, received


async def test_commands_on_own_topics_reach_the_server_from_another_node(
    nats_cluster: NatsCluster,
) -> None:
    """A client's lobby, table and presence topics, published on node 2, reach the server
    account on node 1 (NATS keeps the order within a topic only: compared as sets)."""
    sent = [
        topics.lobby_command("alice"),
        topics.table_command("t1", "alice"),
        topics.presence("alice"),
    ]
    server, received = await _server_reading(nats_cluster, 0)
    alice = Transport("alice", nats_cluster.password("alice"))
    try:
        await alice.connect(parse_broker_urls(nats_cluster.nodes[1].url))
        for topic in sent:
            alice.publish(topic, b"hello")
        got = await received.first(len(sent), set(sent))
    finally:
        await alice.close()
        await server.close()
    assert sorted(sent) == sorted(message.topic for message in got)
    assert [b"hello"] * 3 == [message.payload for message in got]


async def test_a_forged_retained_listing_is_neither_delivered_nor_kept(
    nats_cluster: NatsCluster,
) -> None:
    """alice publishing a retained lobby listing of a table named like her: the server does
    not receive it (her command after it does), and no node keeps it: a new subscriber to
    every listing gets the server's retained marker listing and not hers."""
    forged = topics.lobby_listing("alice")
    marker = topics.lobby_listing(f"marker-{random.randrange(10**9)}")
    server, received = await _server_reading(nats_cluster, 0)
    server.subscribe(f"{topics.PREFIX}/tables/+")
    alice = Transport("alice", nats_cluster.password("alice"))
    try:
        await alice.connect(parse_broker_urls(nats_cluster.nodes[1].url))
        alice.publish(forged, b"forged", retain=True)
        alice.publish(topics.lobby_command("alice"), b"after")
        command = topics.lobby_command("alice")
        await received.first(1, {command})
        server.publish(marker, b"marker", retain=True)
        await received.first(1, {marker})
        seen = [
            await _retained(nats_cluster, node, [marker], f"{topics.PREFIX}/tables/+")
            for node in range(3)
        ]
        server.publish(marker, b"", retain=True)  # removes it
    finally:
        await alice.close()
        await server.close()
    assert [] == [message for message in received.messages if message.topic == forged]
    assert [{marker: b"marker"}] * 3 == [
        {topic: payload for topic, payload in got.items() if topic in (marker, forged)}
        for got in seen
    ]


# The ACL, without a broker

USERS = ("alice", "bob", "ramino-server")
TOPICS = (
    "ramino/v1/lobby/0/alice",
    "ramino/v1/lobby/3/alice",
    "ramino/v1/lobby/0/bob",
    "ramino/v1/table/t1/cmd/alice",
    "ramino/v1/table/t1/cmd/bob",
    "ramino/v1/table/alice/cmd/bob",
    "ramino/v1/presence/alice",
    "ramino/v1/presence/bob",
    "ramino/v1/inbox/alice",
    "ramino/v1/inbox/bob",
    "ramino/v1/table/t1/events",
    "ramino/v1/table/t1/state",
    "ramino/v1/table/t1/chat",
    "ramino/v1/table/t1/secret",
    "ramino/v1/tables/t1",
    "ramino/v1/tables/alice",
    "ramino/v1/server/status",
    "ramino/v1/server/other",
    "ramino/v2/inbox/alice",
    "other/alice",
)


def _allowed(patterns: list[str], topic: str) -> bool:
    return any(subject_matches(pattern, to_subject(topic)) for pattern in patterns)


@pytest.mark.parametrize("user", USERS)
def test_the_nats_permissions_equal_the_topic_rules(user: str) -> None:
    """On a table of topics, what the generated NATS permissions allow is what
    protocol/topics.py's may_publish and may_read allow (Mosquitto's and the embedded
    broker's ACL)."""
    publish, subscribe = permissions(user, SERVER_USER)
    for topic in TOPICS:
        assert topics.may_publish(user, topic, SERVER_USER) == _allowed(publish, topic), topic
        assert topics.may_read(user, topic, SERVER_USER) == _allowed(subscribe, topic), topic


def test_the_client_filters_are_the_mosquitto_acl() -> None:
    """deploy/mosquitto/acl's patterns are CLIENT_WRITE_FILTERS and CLIENT_READ_FILTERS."""
    acl = (ROOT / "deploy" / "mosquitto" / "acl").read_text()
    write = re.findall(r"^pattern write (\S+)$", acl, re.MULTILINE)
    read = re.findall(r"^pattern read (\S+)$", acl, re.MULTILINE)
    assert [f.format(user="%u") for f in topics.CLIENT_WRITE_FILTERS] == write
    assert [f.format(user="%u") for f in topics.CLIENT_READ_FILTERS] == read


def test_subjects_match_as_nats_matches_them() -> None:
    """``*`` is one token, ``>`` one or more at the end."""
    assert subject_matches("a.*.c", "a.b.c")
    assert not subject_matches("a.*.c", "a.b.b.c")
    assert subject_matches("a.>", "a.b.c")
    assert not subject_matches("a.>", "a")
    assert not subject_matches("a.b", "a.b.c")
    assert "ramino.v1.table.*.cmd.>" == to_subject("ramino/v1/table/+/cmd/#")


def test_accounts_add_keeps_bcrypt_hashes_and_nats_config_writes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ramino accounts add`` also stores a bcrypt hash (sidecar FILE.nats, 0600);
    ``nats-config`` writes the users with it; a dotted name is left out with a warning;
    ``remove`` drops the hash."""
    from server.cli import main

    accounts = tmp_path / "passwords"
    assert 0 == main(["accounts", "--file", str(accounts), "add", "alice", "--password", "pw1"])
    assert 0 == main(["accounts", "--file", str(accounts), "add", "a.b", "--password", "pw2"])
    hashes = NatsPasswords.load(sidecar_path(accounts)).hashes
    assert {"alice", "a.b"} == set(hashes)
    assert bcrypt.checkpw(b"pw1", hashes["alice"].encode())
    assert hashes["alice"].startswith("$2a$")
    assert 0o600 == sidecar_path(accounts).stat().st_mode & 0o777
    output = tmp_path / "authorization.conf"
    capsys.readouterr()
    assert 0 == main(["accounts", "--file", str(accounts), "nats-config", "--output", str(output)])
    assert "a.b left out" in capsys.readouterr().err
    text = output.read_text()
    assert hashes["alice"] in text
    assert '"ramino.v1.inbox.alice"' in text
    assert "a.b" not in text
    assert 0o600 == output.stat().st_mode & 0o777
    assert 0 == main(["accounts", "--file", str(accounts), "remove", "alice"])
    assert "alice" not in NatsPasswords.load(sidecar_path(accounts)).hashes
    assert "alice" not in Accounts.load(accounts)


# On the cluster


def _client(cluster: NatsCluster, name: str, node: int, tap: Inbox | None = None) -> Client:
    """An SDK client of ``name`` that knows every node, ``node`` first. A request lost with a
    node is sent again every 2 s for 30 s (the SDK's default budget): after a node is killed,
    QoS 1 messages wait while JetStream elects new leaders for what that node led, 2-10 s
    here (nats-server's election timeout is 4-9 s)."""
    return Client(
        name,
        cluster.password(name),
        broker=cluster.urls_from(node),
        request_timeout=2.0,
        attempts=15,
        tap=tap,
    )


async def _retained(
    cluster: NatsCluster,
    node: int,
    wanted: list[str],
    subscription: str = "",
    until: Callable[[dict[str, bytes]], bool] = lambda got: True,
) -> dict[str, bytes]:
    """The retained messages a new subscriber on ``node`` receives (to ``wanted``, or to
    ``subscription``), once every topic of ``wanted`` has come and ``until`` holds of them.

    A node learns another node's retained messages from a JetStream stream, a little after they
    were published: a subscriber that got none, or ``until`` refuses, is replaced by a new one
    (every ATTEMPT seconds, for at most RETAINED_WAIT seconds in all)."""
    async with asyncio.timeout(RETAINED_WAIT):
        while True:
            got = await _retained_once(cluster, node, wanted, subscription)
            if got is not None and until(got):
                return got


async def _retained_once(
    cluster: NatsCluster, node: int, wanted: list[str], subscription: str
) -> dict[str, bytes] | None:
    """What one new subscriber on ``node`` receives within ATTEMPT seconds; ``None`` unless
    every topic of ``wanted`` came."""
    got: dict[str, bytes] = {}
    arrived = asyncio.Event()

    def keep(message: Message) -> None:
        if message.retain:
            got[message.topic] = message.payload
            if all(topic in got for topic in wanted):
                arrived.set()

    reader = Transport("carol", cluster.password("carol"), tap=keep)
    await reader.connect(parse_broker_urls(cluster.nodes[node].url))
    try:
        reader.subscribe(*([subscription] if subscription else wanted))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ATTEMPT):
                await arrived.wait()
    finally:
        await reader.close()
    return got if arrived.is_set() else None


async def test_players_on_other_nodes_play_to_the_end_and_see_no_hidden_card(
    nats_cluster: NatsCluster, tmp_path: Path
) -> None:
    """The server on node 1, alice on node 2, bob and a spectator on node 3: a game of gin
    finishes; no message any of them received shows a hidden card; the retained snapshot and
    lobby listing of the table are the same on every node."""
    cluster = nats_cluster
    await ensure_users(cluster, ["alice", "bob", "carol", "eve"])
    inboxes = [Inbox("alice"), Inbox("bob")]
    watcher = Inbox("eve (spectator)")
    async with serving(cluster, tmp_path) as server:
        assert cluster.nodes[0].mqtt_port == server.gateway.transport.address.port  # type: ignore[union-attr]
        alice = _client(cluster, "alice", 1, inboxes[0])
        bob = _client(cluster, "bob", 2, inboxes[1])
        eve = _client(cluster, "eve", 2, watcher)
        for client in (alice, bob, eve):
            await client.connect()
        try:
            assert [cluster.nodes[1].mqtt_port, cluster.nodes[2].mqtt_port] == [
                alice.transport.address.port,  # type: ignore[union-attr]
                bob.transport.address.port,  # type: ignore[union-attr]
            ]
            table = await start_table([alice, bob], "gin")
            eve.transport.subscribe(*public_topics(table))
            finals = await asyncio.gather(
                *(_play(client, table, seed, []) for seed, client in enumerate((alice, bob)))
            )
            wanted = [topics.table_state(table), topics.lobby_listing(table)]
            final = max(finals)
            seen = [
                await _retained(
                    cluster,
                    node,
                    wanted,
                    until=lambda got: decode_snapshot(got[topics.table_state(table)]).seq == final,
                )
                for node in range(3)
            ]
        finally:
            for client in (alice, bob, eve):
                await client.close()
        states = await states_by_seq(server.store, table)
    last = states[max(states)].state
    assert "finished" == last.status
    assert [last.seq, last.seq] == finals
    assert seen[0] == seen[1] == seen[2]
    assert last.seq == decode_snapshot(seen[0][topics.table_state(table)]).seq
    leaks = [
        leak
        for seat, inbox in enumerate(inboxes)
        for leak in card_leaks(inbox, seat, states, table)
    ]
    leaks += card_leaks(watcher, None, states, table)
    assert [] == leaks
    assert all(len(inbox.messages) > len(states) // 4 for inbox in [*inboxes, watcher])


async def _play(client: Client, table: str, seed: int, acked: list[int], stop_at: int = 0) -> int:
    """Play ``client``'s seat with the greedy bot until the game is over (or the table passes
    ``stop_at``); the seq of every move the server acknowledged goes to ``acked``. Returns the
    last seq seen."""
    chooser = find_policy("greedy")
    rng = random.Random(seed)
    session = client.table(table)
    async with asyncio.timeout(GAME_SECONDS):
        async for update in session.updates():
            if update.status == "finished" or (stop_at and update.seq >= stop_at):
                return update.seq
            if update.legal and update.view is not None and update.seq == session.seq:
                seen = update.view
                rules = make_rules(seen.variant, seen.options, seen.players)
                command = chooser.choose(rules, seen, update.legal, rng)
                reply = await session.act(command, check=False)
                if reply.ok:
                    acked.append(reply.seq)
    raise AssertionError("the updates ended")  # pragma: no cover


async def test_a_killed_node_loses_no_acknowledged_move_and_the_game_finishes(
    nats_cluster: NatsCluster, tmp_path: Path
) -> None:
    """SIGKILL of node 1 mid-game, where the server and alice are: both reconnect to another
    node, the game finishes, and every move the server acknowledged is in its log."""
    cluster = nats_cluster
    await ensure_users(cluster, ["alice", "bob"])
    acked: dict[str, list[int]] = {"alice": [], "bob": []}
    try:
        async with serving(cluster, tmp_path) as server:
            transport = server.gateway.transport
            transport.set_reconnect_delay(0.05)
            alice = _client(cluster, "alice", 0)
            bob = _client(cluster, "bob", 1)
            for client in (alice, bob):
                await client.connect()
                client.transport.set_reconnect_delay(0.05)
            try:
                table = await start_table([alice, bob], "gin")
                bob_game = asyncio.create_task(_play(bob, table, 2, acked["bob"]))
                first = await _play(alice, table, 1, acked["alice"], stop_at=10)
                assert first >= 10
                assert "playing" == server.service.actors[table].table.status
                connections = transport.connections
                cluster.kill(0)  # blocks: the loss is seen once the loop runs again
                async with asyncio.timeout(FAILOVER_WAIT):
                    await transport.lost.wait()
                    await transport.connected.wait()
                assert connections + 1 == transport.connections
                assert transport.address is not None
                assert cluster.nodes[0].mqtt_port != transport.address.port
                finals = await asyncio.gather(_play(alice, table, 1, acked["alice"]), bob_game)
                assert alice.transport.address is not None
                assert cluster.nodes[0].mqtt_port != alice.transport.address.port
            finally:
                for client in (alice, bob):
                    await client.close()
            rows = await read_rows(server.store, table)
            final = server.service.actors[table].table
    finally:
        cluster.restart(0)
    assert "finished" == final.status
    assert [final.seq, final.seq] == list(finals)
    logged = {row.seq for row in rows}
    assert acked["alice"]
    assert acked["bob"]
    assert set(acked["alice"] + acked["bob"]) <= logged
