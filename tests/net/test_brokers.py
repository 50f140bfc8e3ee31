"""Both brokers enforce protocol/topics.py's ACL; the accounts file is Mosquitto's.

Access is checked by delivery, never by SUBACK: Mosquitto grants a subscription to a topic the
client may not read and then delivers nothing on it. "Nothing arrived" is shown with a marker:
a message the client may receive, sent after the forbidden one over the same connection, must be
the first to arrive.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiomqtt
import pytest

from protocol import topics
from server.net.accounts import Accounts, AccountsError, random_password
from server.net.broker_limits import BrokerLimits
from server.net.embedded import SERVER_USER, BrokerPortBusy, EmbeddedBroker, may_subscribe
from server.net.serve import _embedded
from tests.net.conftest import BrokerUnderTest, MosquittoBroker, connack_code, connect_packet

WAIT = 5.0
"""Seconds to wait for a message that must arrive."""

NOT_AUTHORISED = 5
"""CONNACK return code of MQTT 3.1.1 for refused credentials."""


@pytest.fixture(params=["mosquitto", "embedded_broker"])
def broker(request: pytest.FixtureRequest) -> BrokerUnderTest:
    """Each test runs against Mosquitto and against the embedded broker."""
    chosen: BrokerUnderTest = request.getfixturevalue(request.param)
    return chosen


@asynccontextmanager
async def connected(
    broker: BrokerUnderTest, name: str, password: str | None = None
) -> AsyncIterator[aiomqtt.Client]:
    """An aiomqtt client logged in as ``name`` (with its own password unless one is given)."""
    async with aiomqtt.Client(
        broker.host,
        broker.port,
        username=name,
        password=broker.password(name) if password is None else password,
        identifier=f"{name}-{random_password()[:8]}",
    ) as client:
        yield client


async def next_message(client: aiomqtt.Client, retained: bool = True) -> aiomqtt.Message:
    """The next message ``client`` receives (skipping retained ones unless ``retained``: the
    session's Mosquitto keeps what earlier tests retained).

    Raises:
        TimeoutError: none within ``WAIT`` seconds.
    """
    async with asyncio.timeout(WAIT):
        while True:
            message = await anext(client.messages)
            if retained or not message.retain:
                return message


async def test_commands_on_own_topics_reach_the_server(broker: BrokerUnderTest) -> None:
    """A client's lobby, table and presence topics reach the server account."""
    sent = [
        topics.lobby_command("alice"),
        topics.table_command("t1", "alice"),
        topics.presence("alice"),
    ]
    async with connected(broker, SERVER_USER) as server, connected(broker, "alice") as alice:
        for subscription in topics.SERVER_SUBSCRIPTIONS:
            await server.subscribe(subscription, qos=1)
        for topic in sent:
            await alice.publish(topic, b"hello", qos=1)
        received = [await next_message(server) for _ in sent]
    assert sent == [message.topic.value for message in received]
    assert [b"hello"] * 3 == [message.payload for message in received]


async def test_command_on_another_users_topic_is_not_delivered(broker: BrokerUnderTest) -> None:
    """A client cannot speak for another: its message on bob's command topic is dropped."""
    async with connected(broker, SERVER_USER) as server, connected(broker, "alice") as alice:
        for subscription in topics.SERVER_SUBSCRIPTIONS:
            await server.subscribe(subscription, qos=1)
        await alice.publish(topics.table_command("t1", "bob"), b"forged", qos=1)
        await alice.publish(topics.lobby_command("bob"), b"forged", qos=1)
        await alice.publish(topics.presence("bob"), b"forged", qos=1)
        await alice.publish(topics.table_command("t1", "alice"), b"marker", qos=1)
        first = await next_message(server)
    assert topics.table_command("t1", "alice") == first.topic.value


async def test_inbox_reaches_only_its_owner(broker: BrokerUnderTest) -> None:
    """bob subscribing to alice's inbox gets nothing; alice gets her message."""
    async with (
        connected(broker, SERVER_USER) as server,
        connected(broker, "alice") as alice,
        connected(broker, "bob") as bob,
    ):
        await alice.subscribe(topics.inbox("alice"), qos=1)
        await bob.subscribe(topics.inbox("alice"), qos=1)
        await bob.subscribe(topics.server_status(), qos=1)
        await server.publish(topics.inbox("alice"), b"your hand", qos=1)
        await server.publish(topics.server_status(), b"marker", qos=1)
        owner_got = await next_message(alice)
        intruder_got = await next_message(bob)
    assert (topics.inbox("alice"), b"your hand") == (owner_got.topic.value, owner_got.payload)
    assert topics.server_status() == intruder_got.topic.value


async def test_wildcards_deliver_only_what_a_client_may_read(broker: BrokerUnderTest) -> None:
    """A client's ``ramino/v1/#`` (refused by the embedded broker, granted by Mosquitto) brings
    neither other inboxes nor command topics, only the public topics."""
    async with (
        connected(broker, SERVER_USER) as server,
        connected(broker, "alice") as alice,
        connected(broker, "bob") as bob,
    ):
        await bob.subscribe(f"{topics.PREFIX}/#", qos=1)
        await bob.subscribe(f"{topics.PREFIX}/inbox/+", qos=1)
        await bob.subscribe(f"{topics.PREFIX}/table/+/cmd/+", qos=1)
        await bob.subscribe(topics.table_events("t1"), qos=1)
        await alice.publish(topics.table_command("t1", "alice"), b"private", qos=1)
        await server.publish(topics.inbox("alice"), b"private", qos=1)
        await server.publish(topics.table_events("t1"), b"public", qos=1)
        first = await next_message(bob, retained=False)
    assert (topics.table_events("t1"), b"public") == (first.topic.value, first.payload)


async def test_lobby_listing_cannot_be_forged_by_a_namesake(broker: BrokerUnderTest) -> None:
    """A client may not write (nor retain) the lobby listing of a table named like itself."""
    forged = topics.lobby_listing("alice")
    async with connected(broker, SERVER_USER) as server, connected(broker, "alice") as alice:
        await server.subscribe(f"{topics.PREFIX}/#", qos=1)
        await alice.publish(forged, b"forged", qos=1, retain=True)
        await alice.publish(topics.lobby_command("alice"), b"marker", qos=1)
        first = await next_message(server, retained=False)
    assert topics.lobby_command("alice") == first.topic.value
    async with connected(broker, "carol") as carol:
        await carol.subscribe(forged, qos=1)
        await carol.subscribe(topics.server_status(), qos=1)
        async with connected(broker, SERVER_USER) as server:
            await server.publish(topics.server_status(), b"marker", qos=1)
        first = await next_message(carol)
    assert topics.server_status() == first.topic.value


async def test_retained_state_reaches_a_late_subscriber(broker: BrokerUnderTest) -> None:
    """The retained public snapshot of a table is delivered to whoever subscribes later."""
    state = topics.table_state("t-retained")
    async with connected(broker, SERVER_USER) as server:
        await server.publish(state, b"snapshot", qos=1, retain=True)
    async with connected(broker, "bob") as bob:
        await bob.subscribe(state, qos=1)
        message = await next_message(bob)
    assert (state, b"snapshot", True) == (message.topic.value, message.payload, message.retain)


async def test_wrong_server_password_is_refused(broker: BrokerUnderTest) -> None:
    """The server account needs its password on both brokers."""
    assert NOT_AUTHORISED == await connack_code(broker.host, broker.port, SERVER_USER, "guess")
    assert 0 == await connack_code(broker.host, broker.port, SERVER_USER, broker.server_password)


async def test_wrong_password_is_refused(broker: BrokerUnderTest) -> None:
    """A player needs his password: an account's, or on the embedded broker in guest mode the
    one his name was bound to."""
    assert broker.checks_passwords
    assert NOT_AUTHORISED == await connack_code(broker.host, broker.port, "alice", "guess")
    assert 0 == await connack_code(broker.host, broker.port, "alice", broker.users["alice"])
    with pytest.raises(aiomqtt.MqttError):
        async with connected(broker, "nobody/else", "guess"):
            pass


async def test_will_on_another_users_topic_is_refused_or_dropped(broker: BrokerUnderTest) -> None:
    """A will is a publish like any other: alice cannot leave one on bob's presence topic.

    The embedded broker refuses the CONNECT; Mosquitto 2.0 accepts it and drops the will when
    the connection ends. alice's own will, left after, is the marker.
    """
    async with connected(broker, SERVER_USER) as server:
        await server.subscribe(f"{topics.PREFIX}/presence/+", qos=1)
        forged = await connection_with_will(broker, "alice", topics.presence("bob"))
        if broker.kind == "embedded":
            assert forged is None
        else:
            assert forged is not None
            forged.close()  # no DISCONNECT: the broker publishes the will
        own = await connection_with_will(broker, "alice", topics.presence("alice"))
        assert own is not None
        own.close()
        first = await next_message(server)
    assert (topics.presence("alice"), b"gone") == (first.topic.value, first.payload)


async def connection_with_will(
    broker: BrokerUnderTest, name: str, will_topic: str
) -> asyncio.StreamWriter | None:
    """A raw connection of ``name`` with a will (payload ``gone``) on ``will_topic``, or
    ``None`` if the broker refused it."""
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    writer.write(connect_packet(name, broker.password(name), will=(will_topic, b"gone")))
    async with asyncio.timeout(WAIT):
        connack = await reader.read(4)
    if connack[3:] == b"\x00":
        return writer
    writer.close()
    return None


async def test_added_user_can_log_in(broker: BrokerUnderTest) -> None:
    """``add_user`` takes effect (Mosquitto reloads its password file on SIGHUP)."""
    name = f"dave-{random_password()[:6]}"
    password = random_password()
    await broker.add_user(name, password)
    async with connected(broker, name) as dave:
        await dave.subscribe(topics.inbox(name), qos=1)
        async with connected(broker, SERVER_USER) as server:
            await server.publish(topics.inbox(name), b"welcome", qos=1)
        message = await next_message(dave)
    assert b"welcome" == message.payload


# The embedded broker


def test_may_subscribe_grants_only_filters_whose_every_topic_is_readable() -> None:
    """A client's filter is granted only if it cannot match an unreadable topic."""
    granted = [
        topics.inbox("alice"),
        f"{topics.PREFIX}/table/+/events",
        f"{topics.PREFIX}/tables/+",
        topics.server_status(),
    ]
    refused = [
        f"{topics.PREFIX}/#",
        f"{topics.PREFIX}/table/+/events/#",
        f"{topics.PREFIX}/inbox/+",
        topics.inbox("bob"),
        f"{topics.PREFIX}/table/+/cmd/+",
        f"{topics.PREFIX}/table/+/+",
        f"{topics.PREFIX}/+/status",
        f"{topics.PREFIX}/lobby/+/+",
        "#",
    ]
    assert [True] * len(granted) == [may_subscribe("alice", f, SERVER_USER) for f in granted]
    assert [False] * len(refused) == [may_subscribe("alice", f, SERVER_USER) for f in refused]
    assert may_subscribe(SERVER_USER, f"{topics.PREFIX}/#", SERVER_USER)
    assert not may_subscribe(SERVER_USER, "#", SERVER_USER)


async def test_embedded_broker_checks_an_accounts_file() -> None:
    """With accounts, the embedded broker wants each player's password."""
    accounts = Accounts()
    accounts.add("alice", "alice-password")
    async with EmbeddedBroker(accounts=accounts, server_password="server-password") as broker:
        assert f"mqtt://127.0.0.1:{broker.port}" == broker.url
        codes = [
            await connack_code("127.0.0.1", broker.port, "alice", "alice-password"),
            await connack_code("127.0.0.1", broker.port, "alice", "guess"),
            await connack_code("127.0.0.1", broker.port, "bob", "alice-password"),
            await connack_code("127.0.0.1", broker.port, SERVER_USER, "server-password"),
        ]
    assert [0, NOT_AUTHORISED, NOT_AUTHORISED, 0] == codes


async def test_embedded_broker_does_not_retain_private_messages(
    embedded_broker: BrokerUnderTest,
) -> None:
    """amqtt sends retained messages without asking the ACL, so only public ones are kept: a
    retained command or inbox message is dropped, never kept."""
    broker = embedded_broker
    async with connected(broker, SERVER_USER) as server:
        await server.publish(topics.inbox("alice"), b"private", qos=1, retain=True)
        await server.publish(topics.table_state("t1"), b"public", qos=1, retain=True)
    async with connected(broker, "alice") as alice:
        await alice.publish(topics.table_command("t1", "alice"), b"command", qos=1, retain=True)
    async with connected(broker, SERVER_USER) as server:
        await server.subscribe(f"{topics.PREFIX}/#", qos=1)
        first = await next_message(server)
    assert (topics.table_state("t1"), b"public") == (first.topic.value, first.payload)


async def test_embedded_broker_sends_retained_messages_only_for_ones_own_subscriptions(
    embedded_broker: BrokerUnderTest,
) -> None:
    """amqtt replays on CONNECT the retained messages of every subscription in the broker,
    whoever holds it; the embedded broker replays only the connecting client's."""
    broker = embedded_broker
    async with connected(broker, SERVER_USER) as server:
        await server.subscribe(f"{topics.PREFIX}/#", qos=1)
        await server.publish(topics.table_state("t1"), b"snapshot", qos=1, retain=True)
        await next_message(server)
        async with connected(broker, "alice") as alice:
            await alice.subscribe(topics.server_status(), qos=1)
            await server.publish(topics.server_status(), b"marker", qos=1)
            first = await next_message(alice)
    assert topics.server_status() == first.topic.value


async def test_embedded_broker_keeps_a_persistent_session_for_its_owner(
    embedded_broker: BrokerUnderTest,
) -> None:
    """Reconnecting to alice's persistent session as bob is refused, and alice keeps it."""
    broker = embedded_broker
    session = "alice-phone"
    async with aiomqtt.Client(
        broker.host,
        broker.port,
        username="alice",
        password=broker.password("alice"),
        identifier=session,
        clean_session=False,
    ) as alice:
        await alice.subscribe(topics.inbox("alice"), qos=1)
    async with connected(broker, SERVER_USER) as server:
        await server.publish(topics.inbox("alice"), b"queued", qos=1)
    with pytest.raises(aiomqtt.MqttError):
        async with aiomqtt.Client(
            broker.host,
            broker.port,
            username="bob",
            password=broker.password("bob"),
            identifier=session,
            clean_session=False,
        ):
            pass
    async with aiomqtt.Client(
        broker.host,
        broker.port,
        username="alice",
        password=broker.password("alice"),
        identifier=session,
        clean_session=False,
    ) as alice:
        message = await next_message(alice)
    assert (topics.inbox("alice"), b"queued") == (message.topic.value, message.payload)


async def test_embedded_broker_sets_tcp_nodelay() -> None:
    """Accepted connections have Nagle's algorithm off."""
    async with (
        EmbeddedBroker(server_password="server-password") as broker,
        aiomqtt.Client("127.0.0.1", broker.port, username="alice", password="x"),
    ):
        # The accepted sockets are only reachable through amqtt's internals.
        assert broker._broker is not None
        sockets = [
            handler.writer._writer.get_extra_info("socket")
            for _session, handler in broker._broker.sessions.values()
        ]
        options = [s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets]
    assert 1 == len(options)
    assert all(options)


async def test_embedded_broker_reports_a_busy_port() -> None:
    """A taken port gives BrokerPortBusy, whose message tells the user about --broker."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerPortBusy, match="--broker") as raised:
            async with EmbeddedBroker(port=port, server_password="server-password"):
                pass
    assert str(port) in str(raised.value)


def test_embedded_broker_needs_a_server_password() -> None:
    """An empty server password would let anyone be the server."""
    with pytest.raises(ValueError, match="server_password"):
        EmbeddedBroker(server_password="")


# Accounts


def test_accounts_round_trip(tmp_path: Path) -> None:
    """Saved accounts load back with the same names and passwords; remove forgets one."""
    path = tmp_path / "passwords"
    accounts = Accounts()
    accounts.add("alice", "alice-password")
    accounts.add("bob", "first")
    accounts.add("bob", "second")
    accounts.save(path)
    loaded = Accounts.load(path)
    assert ["alice", "bob"] == loaded.names()
    assert loaded.check("alice", "alice-password")
    assert loaded.check("bob", "second")
    assert not loaded.check("bob", "first")
    assert not loaded.check("carol", "anything")
    assert loaded.remove("bob")
    assert not loaded.remove("bob")
    assert ["alice"] == loaded.names()


def test_accounts_file_is_mosquitto_format_private_and_replaced_whole(tmp_path: Path) -> None:
    """Lines are ``name:$7$101$salt$hash``, the file is 0600 and no temporary file is left."""
    path = tmp_path / "passwords"
    accounts = Accounts()
    accounts.add("alice", "alice-password")
    accounts.save(path)
    accounts.save(path)
    name, encoded = path.read_text().strip().split(":")
    assert "alice" == name
    assert ["", "7", "101"] == encoded.split("$")[:3]
    assert 0o600 == stat.S_IMODE(os.stat(path).st_mode)
    assert ["passwords"] == [entry.name for entry in tmp_path.iterdir()]


def test_a_random_password_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """A password is pasted after ``--password``, where a leading dash reads as an option: the
    draws that start with one are thrown away."""
    draws = iter(["-dashed", "-again", "plain-after"])
    monkeypatch.setattr("server.net.accounts.secrets.token_urlsafe", lambda _: next(draws))
    assert "plain-after" == random_password()


def test_missing_accounts_file_is_empty(tmp_path: Path) -> None:
    """No file yet: no accounts."""
    assert [] == Accounts.load(tmp_path / "absent").names()


def test_accounts_refuse_bad_names_passwords_and_lines(tmp_path: Path) -> None:
    """Names must be client ids, passwords non-empty, lines ``name:hash``."""
    accounts = Accounts()
    with pytest.raises(AccountsError, match="'a/b'"):
        accounts.add("a/b", "password")
    with pytest.raises(AccountsError, match="empty password"):
        accounts.add("alice", "")
    path = tmp_path / "passwords"
    path.write_text("# comment\n\nalice\n")
    with pytest.raises(AccountsError, match=":3:"):
        Accounts.load(path)


def test_accounts_check_hashes_written_by_mosquitto_passwd(tmp_path: Path) -> None:
    """``mosquitto_passwd``'s lines are checked like ours."""
    binary = shutil.which("mosquitto_passwd")
    if binary is None:
        pytest.skip("mosquitto_passwd is not installed")
    path = tmp_path / "passwords"
    subprocess.run([binary, "-c", "-b", str(path), "alice", "alice-password"], check=True)
    accounts = Accounts.load(path)
    assert accounts.check("alice", "alice-password")
    assert not accounts.check("alice", "guess")


async def test_mosquitto_accepts_a_file_we_wrote(mosquitto: MosquittoBroker) -> None:
    """Mosquitto logs in the accounts of the password file Accounts.save wrote."""
    assert "mosquitto" == mosquitto.kind
    codes = [
        await connack_code(mosquitto.host, mosquitto.port, name, password)
        for name, password in mosquitto.users.items()
    ]
    assert [0] * len(codes) == codes


async def test_ramino_serve_moves_only_the_taken_port_and_says_which(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The broker's port is taken and the web page's is free: the broker moves to a free port,
    the web page stays where it was asked, and the message names the broker's port only."""
    with socket.socket() as taken, socket.socket() as spare:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        spare.bind(("127.0.0.1", 0))
        port, web_port = taken.getsockname()[1], spare.getsockname()[1]
        spare.close()  # free again, for the web page
        web = ("127.0.0.1", web_port)
        broker = await _embedded(
            port, None, "server-password", SERVER_USER, BrokerLimits(), None, web
        )
        try:
            moved = broker.port
            assert moved not in (0, port)
            assert web_port == broker.web_port
        finally:
            await broker.stop()
    said = capsys.readouterr().err
    assert f"port {port} is taken, so the embedded broker listens on {moved}" in said
    assert "--broker" in said
    assert "web page" not in said
