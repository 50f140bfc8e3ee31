"""Connection attacks (issue 15, items 7 and 9): idle sockets that never send CONNECT, many
connections under one name, more sockets than the broker may hold, and a subscription flood.

The embedded broker runs here with small limits (:class:`BrokerLimits`) so that each attack is
bounded; a normal player keeps getting replies during and after each one. Mosquitto's limits
come from deploy/mosquitto/mosquitto.conf, which the ``mosquitto`` fixture runs.
"""

from __future__ import annotations

import asyncio
import configparser
import contextlib
import logging
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from protocol import topics
from protocol.client import Client
from server.net.accounts import Accounts, random_password
from server.net.broker_limits import (
    FILE_RESERVE,
    BrokerLimits,
    FailureLogFilter,
    connection_cap,
)
from server.net.embedded import EmbeddedBroker
from server.net.publish_guard import PublishLimits
from server.net.serve import Running, ServeConfig
from tests.net.conftest import (
    DEPLOY,
    HOST,
    BrokerUnderTest,
    MosquittoBroker,
    client_for,
    connect_packet,
    mosquitto_config,
    mqtt_text,
    remaining_length,
    serving,
)
from tests.net.players import start_table

NOT_AUTHORISED = 5
"""CONNACK return code of a refused CONNECT (MQTT 3.1.1 §3.2.2.3)."""
SERVER_UNAVAILABLE = 3
REFUSED = 0x80
"""SUBACK return code of a refused filter (MQTT 3.1.1 §3.9.3)."""
WAIT = 10.0
"""Longest any single step of these tests may take (seconds)."""


# Raw MQTT 3.1.1 ---------------------------------------------------------------------------------


def subscribe_packet(packet_id: int, filters: list[str]) -> bytes:
    body = struct.pack("!H", packet_id) + b"".join(mqtt_text(f) + b"\x00" for f in filters)
    return b"\x82" + remaining_length(len(body)) + body


def unsubscribe_packet(packet_id: int, filters: list[str]) -> bytes:
    body = struct.pack("!H", packet_id) + b"".join(mqtt_text(f) for f in filters)
    return b"\xa2" + remaining_length(len(body)) + body


async def read_packet(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The next packet: (type and flags byte, body)."""
    header = (await reader.readexactly(1))[0]
    length, shift = 0, 0
    while True:
        byte = (await reader.readexactly(1))[0]
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return header, await reader.readexactly(length)


@dataclass
class Raw:
    """One raw MQTT connection."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    @classmethod
    async def open(cls, port: int) -> Raw:
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer)

    async def connect(self, username: str, password: str, client_id: str = "") -> int:
        """Send CONNECT; the CONNACK return code (-1: closed without one)."""
        self.writer.write(connect_packet(username, password, client_id=client_id))
        try:
            async with asyncio.timeout(WAIT):
                header, body = await read_packet(self.reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            return -1
        assert header == 0x20
        return body[1]

    async def subscribe(self, filters: list[str], packet_id: int = 1) -> list[int]:
        """SUBSCRIBE to ``filters`` at QoS 0; the SUBACK return codes."""
        self.writer.write(subscribe_packet(packet_id, filters))
        async with asyncio.timeout(WAIT):
            while True:
                header, body = await read_packet(self.reader)
                if header == 0x90 and body[:2] == struct.pack("!H", packet_id):
                    return list(body[2:])

    async def unsubscribe(self, filters: list[str], packet_id: int = 2) -> None:
        self.writer.write(unsubscribe_packet(packet_id, filters))
        async with asyncio.timeout(WAIT):
            while True:
                header, body = await read_packet(self.reader)
                if header == 0xB0 and body == struct.pack("!H", packet_id):
                    return

    async def ping(self) -> bool:
        """Whether the connection is alive: PINGREQ gets its PINGRESP."""
        try:
            self.writer.write(b"\xc0\x00")
            async with asyncio.timeout(WAIT):
                while True:
                    header, _ = await read_packet(self.reader)
                    if header == 0xD0:
                        return True
        except (asyncio.IncompleteReadError, ConnectionError):
            return False

    async def closed_by_peer(self) -> bool:
        """Wait (at most WAIT seconds) for the other side to close; whether it did."""
        try:
            async with asyncio.timeout(WAIT):
                while await self.reader.read(1024):
                    pass
        except TimeoutError:
            return False
        except ConnectionError:
            pass
        return True

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


async def close_all(connections: list[Raw]) -> None:
    await asyncio.gather(*(raw.close() for raw in connections))


# A server on an embedded broker with given limits -----------------------------------------------


@dataclass
class Room:
    """A server on an embedded broker, and alice and bob at a started table."""

    broker: EmbeddedBroker
    under_test: BrokerUnderTest
    server: Running
    table: str
    players: list[Client]

    async def still_plays(self) -> None:
        """A normal player at the table gets replies: a lobby request and a table command."""
        alice = self.players[0]
        async with asyncio.timeout(WAIT):
            assert 1 == (await alice.hello()).version
            await alice.table(self.table).chat("still here")


@contextlib.asynccontextmanager
async def room(tmp_path: Path, limits: BrokerLimits) -> AsyncIterator[Room]:
    password = random_password()
    async with EmbeddedBroker(port=0, server_password=password, limits=limits) as broker:
        under_test = BrokerUnderTest(
            kind="embedded",
            host=HOST,
            port=broker.port,
            server_password=password,
            users={name: random_password() for name in ("alice", "bob", "carol", "mallory")},
            checks_passwords=False,
        )
        async with serving(under_test, tmp_path) as server:
            players = [client_for(under_test, "alice"), client_for(under_test, "bob")]
            for client in players:
                await client.connect()
            try:
                table = await start_table(players, "gin")
                yield Room(broker, under_test, server, table, players)
            finally:
                for client in players:
                    await client.close()


# Embedded broker ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_sockets_that_send_no_connect_are_closed_after_the_connect_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Idle sockets, and one that sends half a CONNECT, are closed once the connect timeout
    passes; connected players are not, and play on meanwhile. The broker's log gets a line or
    two, not one per socket."""
    caplog.set_level(logging.WARNING, logger="amqtt.broker")
    async with room(tmp_path, BrokerLimits(connect_timeout=0.5)) as here:
        idle = [await Raw.open(here.under_test.port) for _ in range(50)]
        slow = await Raw.open(here.under_test.port)
        slow.writer.write(connect_packet("mallory", "x")[:5])
        await here.still_plays()
        closed = await asyncio.gather(*(raw.closed_by_peer() for raw in [*idle, slow]))
        assert all(closed)
        await here.still_plays()
        await close_all([*idle, slow])
    failures = [r for r in caplog.records if r.name == "amqtt.broker" and "session" in r.msg]
    assert 1 <= len(failures) <= 3


def test_connection_failure_lines_are_logged_once_an_interval_with_a_count() -> None:
    now = [0.0]
    quiet = FailureLogFilter(interval=60.0, clock=lambda: now[0])

    def line(text: str) -> logging.LogRecord:
        return logging.LogRecord("amqtt.broker", logging.WARNING, "", 0, text, (), None)

    assert quiet.filter(line("Failed to initialize client session: no CONNECT within 10 s"))
    for _ in range(5):
        assert not quiet.filter(line("Failed to initialize client session: no CONNECT"))
    assert quiet.filter(line("No data from (client @=127.0.0.1:1)"))  # another kind
    assert quiet.filter(line("Client c1 is already connected, performing take-over."))
    now[0] = 61.0
    record = line("Failed to initialize client session: x")
    assert quiet.filter(record)
    assert (
        record.getMessage() == "Failed to initialize client session: x (5 more like it not logged)"
    )


@pytest.mark.asyncio
async def test_one_user_holds_at_most_the_per_user_limit_of_connections(tmp_path: Path) -> None:
    """The CONNECT beyond the limit is refused with CONNACK 5; the user's other connections
    stay up, a slot freed is usable again, and the server account is exempt."""
    limit = BrokerLimits().max_connections_per_user
    async with room(tmp_path, BrokerLimits()) as here:
        port, password = here.under_test.port, here.under_test.password("mallory")
        held = [await Raw.open(port) for _ in range(limit)]
        for index, raw in enumerate(held):
            assert 0 == await raw.connect("mallory", password, client_id=f"mallory-{index}")
        extra = await Raw.open(port)
        assert await extra.connect("mallory", password, client_id="mallory-extra") in (
            NOT_AUTHORISED,
            SERVER_UNAVAILABLE,
        )
        assert await extra.closed_by_peer()
        await here.still_plays()
        assert all(await asyncio.gather(*(raw.ping() for raw in held)))

        # Reconnecting with one of its own client ids takes that connection over: not refused.
        again = await Raw.open(port)
        assert 0 == await again.connect("mallory", password, client_id="mallory-0")
        assert await held[0].closed_by_peer()
        await held[0].close()
        held[0] = again
        assert all(await asyncio.gather(*(raw.ping() for raw in held)))

        # A slot freed is usable again.
        await held.pop().close()
        freed = await Raw.open(port)
        async with asyncio.timeout(WAIT):
            while (code := await freed.connect("mallory", password, client_id="m-new")) != 0:
                assert code in (NOT_AUTHORISED, SERVER_UNAVAILABLE)  # the close is not seen yet
                await freed.close()
                await asyncio.sleep(0.01)
                freed = await Raw.open(port)
        held.append(freed)

        server = [await Raw.open(port) for _ in range(limit + 1)]
        for index, raw in enumerate(server):
            code = await raw.connect(here.under_test.server_user, here.under_test.server_password)
            assert code == 0, index
        await here.still_plays()
        await close_all([*held, *server, extra])


@pytest.mark.asyncio
async def test_idle_sockets_beyond_max_connections_are_closed_at_once(tmp_path: Path) -> None:
    """With a global cap, a few hundred idle sockets cannot take every file descriptor: those
    beyond the cap are closed on accept, players already in play on (the store still opens
    tables), and once the attacker leaves a new player logs in."""
    cap = 60
    async with room(tmp_path, BrokerLimits(max_connections=cap, connect_timeout=60)) as here:
        port = here.under_test.port
        attack = [await Raw.open(port) for _ in range(300)]
        closed = await asyncio.gather(*(raw.closed_by_peer() for raw in attack[cap:]))
        assert all(closed)
        assert here.broker.book.sockets <= cap
        await here.still_plays()
        created = await here.players[0].create_table("gin", seats=2)
        assert created.table
        await close_all(attack)
        carol = client_for(here.under_test, "carol")
        async with asyncio.timeout(WAIT):
            while True:  # the broker sees the attacker's sockets close a moment later
                try:
                    await carol.connect()
                    break
                except Exception:
                    await asyncio.sleep(0.05)
        try:
            assert 1 == (await carol.hello()).version
        finally:
            await carol.close()
        await here.still_plays()


@pytest.mark.asyncio
async def test_a_client_holds_at_most_max_subscriptions_filters(tmp_path: Path) -> None:
    """A SUBSCRIBE beyond the limit gets SUBACK 0x80 for each extra filter, the game at the
    table goes on meanwhile, and an unsubscribed or reconnected client subscribes again."""
    limit = BrokerLimits().max_subscriptions
    async with room(tmp_path, BrokerLimits()) as here:
        port, password = here.under_test.port, here.under_test.password("mallory")
        flood = [topics.table_events(f"t{index}") for index in range(limit + 5)]
        mallory = await Raw.open(port)
        assert 0 == await mallory.connect("mallory", password, client_id="mallory-subs")
        codes = await mallory.subscribe(flood)
        assert codes == [0] * limit + [REFUSED] * 5
        assert [REFUSED] == await mallory.subscribe([topics.chat("another")], packet_id=3)
        assert [0] == await mallory.subscribe([flood[0]], packet_id=4)  # already held
        await here.still_plays()

        await mallory.unsubscribe(flood[:1])
        assert [0] == await mallory.subscribe([flood[-1]], packet_id=5)
        await mallory.close()

        # A clean session's filters go with it: the same client id starts from none.
        again = await Raw.open(port)
        assert 0 == await again.connect("mallory", password, client_id="mallory-subs")
        assert [0] * limit == await again.subscribe(flood[:limit])
        await again.close()
        await here.still_plays()


@pytest.mark.asyncio
async def test_a_normal_client_fits_the_default_subscription_limit(tmp_path: Path) -> None:
    """What a client subscribes to on connecting, plus every public topic of 20 tables."""
    async with room(tmp_path, BrokerLimits()) as here:
        watcher = await Raw.open(here.under_test.port)
        assert 0 == await watcher.connect("carol", "any", client_id="carol-watch")
        wanted = list(topics.client_subscriptions("carol"))
        for index in range(20):
            table = f"t{index}"
            wanted += [topics.table_events(table), topics.table_state(table), topics.chat(table)]
        assert [0] * len(wanted) == await watcher.subscribe(wanted)
        await watcher.close()


# Settings ---------------------------------------------------------------------------------------


def test_the_limits_are_read_from_the_environment_and_the_overrides() -> None:
    env = {"RAMINO_CONNECT_TIMEOUT": "2.5", "RAMINO_MAX_SUBSCRIPTIONS": "16"}
    config = ServeConfig.from_env(env, max_connections_per_user=3, max_connections=None)
    assert config.broker_limits == BrokerLimits(
        connect_timeout=2.5, max_subscriptions=16, max_connections_per_user=3
    )
    assert ServeConfig.from_env({}).broker_limits == BrokerLimits()
    with pytest.raises(ValueError, match="max_connections"):
        BrokerLimits(max_connections=-1)


def test_the_connection_cap_leaves_room_under_the_file_limit() -> None:
    limits = BrokerLimits(max_connections=1000)
    assert connection_cap(limits, 1024) == 1024 - FILE_RESERVE
    assert connection_cap(limits, 1 << 20) == 1000
    assert connection_cap(BrokerLimits(max_connections=0), 1024) == 0


def test_the_server_raises_its_soft_file_limit_to_the_hard_one() -> None:
    """In a child process whose soft limit starts low."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(256, hard)
    code = (
        "import resource\n"
        "from server.net.broker_limits import raise_file_limit\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({low}, {hard}))\n"
        "print(raise_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(DEPLOY.parents[1])},
        timeout=WAIT,
    )
    expected = hard if hard != resource.RLIM_INFINITY else max(low, 1 << 20)
    assert done.stdout.split() == [str(expected), str(expected)]


@pytest.mark.asyncio
async def test_ramino_serve_takes_the_limits_from_flags_and_environment(tmp_path: Path) -> None:
    """``ramino serve`` started with a low soft file limit: it logs the raised limit, and its
    embedded broker applies the limits of the command line and of RAMINO_CONNECT_TIMEOUT."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def low_file_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server.cli",
        "serve",
        "--port",
        str(free_port()),
        "--store",
        f"sqlite:///{tmp_path / 'events.db'}",
        "--max-connections-per-user",
        "1",
        "--max-subscriptions",
        "2",
        "--log-format",
        "text",
        cwd=DEPLOY.parents[1],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "RAMINO_CONNECT_TIMEOUT": "0.5"},
        preexec_fn=low_file_limit,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(30):
            while "serving on" not in (line := (await process.stdout.readline()).decode()):
                assert line, f"ramino serve exited before serving: {lines}"
                lines.append(line)
        port = int(line.split("mqtt://127.0.0.1:")[1].split(",")[0])
        expected = hard if hard != resource.RLIM_INFINITY else 1 << 20
        assert any(f"file limit (RLIMIT_NOFILE): {expected} open files" in x for x in lines)

        # Each socket sends its CONNECT as soon as it is open (the connect timeout is short).
        first = await Raw.open(port)
        assert 0 == await first.connect("mallory", "any", client_id="mallory-1")
        second = await Raw.open(port)
        assert NOT_AUTHORISED == await second.connect("mallory", "any", client_id="mallory-2")
        idle = await Raw.open(port)
        assert [0, 0, REFUSED] == await first.subscribe(
            [topics.inbox("mallory"), topics.server_status(), topics.table_events("t")]
        )
        assert await idle.closed_by_peer()
        await close_all([first, second, idle])
    finally:
        if process.returncode is None:
            process.terminate()
        async with asyncio.timeout(30):
            await process.communicate()


# Mosquitto --------------------------------------------------------------------------------------

DEPLOY_LIMITS = (
    "max_connections",
    "max_inflight_messages",
    "max_queued_messages",
    "max_keepalive",
    "max_packet_size",
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _settings(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition(" ")
            found[key] = value.strip()
    return found


@pytest.mark.asyncio
async def test_mosquitto_runs_with_the_deploy_limits(mosquitto: MosquittoBroker) -> None:
    """deploy/'s config sets the limits (the fixture's Mosquitto runs with it, so it loads)."""
    settings = _settings((DEPLOY / "mosquitto.conf").read_text())
    for key in DEPLOY_LIMITS:
        assert int(settings[key]) > 0, key
    lines = [line.split(" ", 1)[0] for line in (DEPLOY / "mosquitto.conf").read_text().splitlines()]
    assert lines.index("max_connections") > lines.index("listener")  # a listener's option
    raw = await Raw.open(mosquitto.port)
    assert 0 == await raw.connect("alice", mosquitto.password("alice"))
    await raw.close()


@pytest.mark.asyncio
async def test_mosquitto_closes_connections_beyond_its_max_connections(tmp_path: Path) -> None:
    """deploy/'s config with a max_connections of 5: the sixth connection is refused, the five
    others stay up. (The option belongs to the listener above it.)"""
    binary = shutil.which("mosquitto")
    if binary is None:
        pytest.skip("the mosquitto binary is not installed")
    shutil.copyfile(DEPLOY / "acl", tmp_path / "acl")
    accounts, password = Accounts(), random_password()
    accounts.add("alice", password)
    accounts.save(tmp_path / "passwords")
    port = free_port()
    lines = []
    for line in mosquitto_config(port, tmp_path / "passwords", tmp_path / "acl").splitlines():
        lines.append("max_connections 5" if line.startswith("max_connections ") else line)
    (tmp_path / "mosquitto.conf").write_text("\n".join(lines) + "\n")
    process = await asyncio.create_subprocess_exec(
        binary,
        "-c",
        str(tmp_path / "mosquitto.conf"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        first: Raw | None = None
        async with asyncio.timeout(WAIT):
            while first is None:
                try:
                    first = await Raw.open(port)
                except OSError:
                    await asyncio.sleep(0.02)
        held = [first, *[await Raw.open(port) for _ in range(4)]]
        for index, raw in enumerate(held):
            assert 0 == await raw.connect("alice", password, client_id=f"alice-{index}")
        extra = await Raw.open(port)
        assert await extra.connect("alice", password, client_id="alice-extra") == -1
        assert all(await asyncio.gather(*(raw.ping() for raw in held)))
        await close_all([*held, extra])
    finally:
        process.terminate()
        await process.wait()


# systemd ----------------------------------------------------------------------------------------


def test_the_systemd_unit_runs_ramino_serve_with_a_raised_file_limit() -> None:
    """deploy/systemd/ramino.service: a dedicated user, secrets from an env file, a file limit
    that holds the default connection cap and the reserve, restarted on failure."""
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(DEPLOY.parent / "systemd" / "ramino.service")
    service = unit["Service"]
    assert service["ExecStart"].split()[0].endswith("/ramino")
    assert service["ExecStart"].split()[1] == "serve"
    assert service["User"] not in ("", "root")
    assert service["EnvironmentFile"].startswith("/")
    assert int(service["LimitNOFILE"]) >= BrokerLimits().max_connections + FILE_RESERVE
    assert service["Restart"] == "on-failure"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    example = (DEPLOY.parent / "systemd" / "ramino.env.example").read_text()
    names = {line.lstrip("#").split("=")[0] for line in example.splitlines() if "=" in line}
    assert {f"RAMINO_{name.upper()}" for name in ("connect_timeout", "max_subscriptions")} <= names


@pytest.mark.asyncio
async def test_a_client_closed_for_an_oversized_packet_cannot_come_straight_back() -> None:
    """Worked from the guard's rule (rate 10 a second, burst 20, the guard's clock stopped):
    mallory's CONNECT spends nothing (her bucket: 20); a 40 KiB packet (over max_packet's
    32 KiB) closes her connection and costs her 1 + 40 = 41 tokens: 20 - 41 = -21, held at
    -burst = -20, so she lacks 21 for a token. Her next CONNECT waits unanswered while her
    bucket holds less than a token; bob's is answered at once (his bucket is his own); 2.1 s
    later on the guard's clock she holds -20 + 21 = 1 token and her CONNECT is answered."""
    now = [1000.0]
    password = random_password()
    async with EmbeddedBroker(
        port=0, server_password=password, publish_limits=PublishLimits(rate=10, burst=20)
    ) as broker:
        broker.guard.now = lambda: now[0]
        first = await Raw.open(broker.port)
        waiting = await Raw.open(broker.port)
        bob = await Raw.open(broker.port)
        try:
            assert 0 == await first.connect("mallory", "her-password")
            body = 40 * 1024
            first.writer.write(b"\x30" + remaining_length(body))  # the fixed header is enough
            assert await first.closed_by_peer()
            assert 1 == broker.guard.oversized
            assert broker.guard.shortfall("mallory", 1) == pytest.approx(21)
            waiting.writer.write(connect_packet("mallory", "her-password"))
            answer = asyncio.ensure_future(read_packet(waiting.reader))
            assert 0 == await bob.connect("bob", "his-password")
            # bob was answered, and mallory, who asked first, is not, even half a second on.
            done, _ = await asyncio.wait({answer}, timeout=0.5)
            assert not done
            now[0] += 2.1
            async with asyncio.timeout(WAIT):
                header, connack = await answer
            assert (0x20, 0) == (header, connack[1])
        finally:
            await close_all([first, waiting, bob])
