"""Brokers for the network tests: a real Mosquitto with our deploy/ config, and the embedded one.

Both fixtures give a :class:`BrokerUnderTest`: ``host``, ``port``, ``url``, the server account's
name and password, a few test users (``users``: name -> password) and ``add_user``. Mosquitto
runs once per session from ``deploy/mosquitto/mosquitto.conf`` (listener moved to a free
127.0.0.1 port, absolute paths for the password and ACL files); the embedded broker runs per test
in guest mode (a name is bound to the first password it logs in with; the fixture binds the
test users' names to their passwords).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from protocol.client import Client
from protocol.transport import Message
from server.net.accounts import Accounts, local_mosquitto_config, random_password
from server.net.embedded import SERVER_USER, EmbeddedBroker
from server.net.gateway import Limits
from server.net.guests import Admission, Guests
from server.net.mosquitto_plugin import PluginUnavailable, build_plugin
from server.net.serve import Running, ServeConfig, running
from server.tables.timers import Clock

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "mosquitto"
HOST = "127.0.0.1"
TEST_USERS = ("alice", "bob", "carol")
DEADLINE = 10.0
"""Seconds a broker gets to start or to reload its accounts."""


@dataclass
class BrokerUnderTest:
    """A running broker and the accounts that may log in to it."""

    kind: str
    host: str
    port: int
    server_password: str
    users: dict[str, str]
    checks_passwords: bool
    """Whether a wrong password of a player is refused (both brokers: the embedded broker's
    guest names are bound to their first password)."""
    server_user: str = SERVER_USER
    embedded: EmbeddedBroker | None = None
    """The broker object when it runs in this process (its limits and counters)."""

    @property
    def url(self) -> str:
        """``mqtt://HOST:PORT``."""
        return f"mqtt://{self.host}:{self.port}"

    def password(self, name: str) -> str:
        """The password of ``name`` (a test user or the server account)."""
        return self.server_password if name == self.server_user else self.users[name]

    async def add_user(self, name: str, password: str) -> None:
        """Let ``name`` log in with ``password`` from now on."""
        self.users[name] = password


@dataclass
class MosquittoBroker(BrokerUnderTest):
    """A Mosquitto subprocess with its own password file."""

    process: subprocess.Popen[bytes] | None = None
    password_file: Path = Path()
    accounts: Accounts = field(default_factory=Accounts)
    websockets_port: int = 0
    """The port of deploy/'s WebSocket listener (MQTT over WebSockets, any path)."""

    async def add_user(self, name: str, password: str) -> None:
        """Write ``name`` into the password file, reload Mosquitto (SIGHUP) and wait until
        ``name`` can log in.

        Raises:
            TimeoutError: Mosquitto did not take the new account within the deadline.
        """
        assert self.process is not None
        self.accounts.add(name, password)
        self.accounts.save(self.password_file)
        self.process.send_signal(signal.SIGHUP)
        async with asyncio.timeout(DEADLINE):
            # Mosquitto tells of no finished reload: the new login working is the sign.
            while True:
                if await connack_code(self.host, self.port, name, password) == 0:
                    break
                await asyncio.sleep(0.02)
        self.users[name] = password


@dataclass
class GuestBroker(BrokerUnderTest):
    """The embedded broker in guest mode; its test users' names are bound to their passwords."""

    guests: Guests = field(default_factory=Guests)

    async def add_user(self, name: str, password: str) -> None:
        """Bind ``name`` to ``password``, as its first login would."""
        assert Admission.ACCEPTED == self.guests.admit(name, password)
        self.users[name] = password


def mqtt_text(value: str) -> bytes:
    """An MQTT string: two bytes of length, then UTF-8."""
    data = value.encode()
    return struct.pack("!H", len(data)) + data


def remaining_length(length: int) -> bytes:
    """An MQTT fixed header's remaining length (7 bits a byte, the high bit: more follows)."""
    encoded = bytearray()
    while True:
        digit, length = length % 128, length // 128
        encoded.append(digit | (0x80 if length else 0))
        if not length:
            return bytes(encoded)


def connect_packet(
    username: str, password: str, *, will: tuple[str, bytes] | None = None, client_id: str = ""
) -> bytes:
    """An MQTT 3.1.1 CONNECT packet (clean session, keep-alive 60 s), optionally with a will."""
    flags = 0x80 | 0x40 | 0x02
    payload = mqtt_text(client_id)
    if will is not None:
        flags |= 0x04
        payload += mqtt_text(will[0]) + struct.pack("!H", len(will[1])) + will[1]
    payload += mqtt_text(username) + mqtt_text(password)
    body = mqtt_text("MQTT") + bytes((4, flags)) + struct.pack("!H", 60) + payload
    return bytes((0x10,)) + remaining_length(len(body)) + body


async def connack_code(
    host: str, port: int, username: str, password: str, *, will: tuple[str, bytes] | None = None
) -> int:
    """The CONNACK return code a CONNECT with these credentials gets (0: accepted); -1 if the
    connection failed or closed before a CONNACK."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return -1
    try:
        writer.write(connect_packet(username, password, will=will))
        await writer.drain()
        connack = await reader.readexactly(4)
        if connack[3] == 0:
            writer.write(b"\xe0\x00")  # DISCONNECT: a will is not published
            await writer.drain()
        return connack[3]
    except (OSError, asyncio.IncompleteReadError):
        return -1
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def _connack_code_blocking(host: str, port: int, username: str, password: str) -> int:
    try:
        with socket.create_connection((host, port), timeout=1.0) as connection:
            connection.sendall(connect_packet(username, password))
            connack = b""
            while len(connack) < 4:
                chunk = connection.recv(4 - len(connack))
                if not chunk:
                    return -1
                connack += chunk
            connection.sendall(b"\xe0\x00")
            return connack[3]
    except OSError:
        return -1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@functools.cache
def limits_plugin() -> Path | None:
    """deploy/mosquitto's publish rate plugin, built once per process into a temporary folder;
    ``None`` where it cannot be built (no compiler or no Mosquitto headers: the brokers run
    without it and the tests of the plugin skip), except with ``CI=true``, where that fails."""
    folder = Path(tempfile.mkdtemp(prefix="ramino-mosquitto-plugin-"))
    atexit.register(shutil.rmtree, folder, True)
    try:
        return build_plugin(folder)
    except PluginUnavailable as error:
        if os.environ.get("CI") == "true":
            raise
        PLUGIN_UNAVAILABLE.append(str(error))
        return None


PLUGIN_UNAVAILABLE: list[str] = []
"""Why :func:`limits_plugin` gave ``None``."""


def mosquitto_config(
    port: int, password_file: Path, acl_file: Path, websockets_port: int | None = None
) -> str:
    """deploy/mosquitto/mosquitto.conf for a test broker on ``HOST:port``, its WebSocket
    listener on ``HOST:websockets_port`` (``None``: left out), with the publish rate plugin
    where it could be built (:func:`limits_plugin`)."""
    return local_mosquitto_config(
        DEPLOY / "mosquitto.conf",
        port,
        HOST,
        password_file,
        acl_file,
        websockets_port,
        plugin=limits_plugin(),
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _start_mosquitto(folder: Path, server_password: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start Mosquitto on a free port; retry on another port if it loses the race for one."""
    process, port, _websockets_port = start_mosquitto(folder, server_password)
    return process, port


def start_mosquitto(folder: Path, server_password: str) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start Mosquitto on free ports (TCP, WebSockets); retry on others if it loses the race for
    one. Both listeners are open once the TCP one answers (Mosquitto opens every listener
    before it serves)."""
    binary = shutil.which("mosquitto")
    assert binary is not None
    log = folder / "mosquitto.log"
    for _attempt in range(3):
        port, websockets_port = _free_port(), _free_port()
        while websockets_port == port:
            websockets_port = _free_port()
        config = folder / "mosquitto.conf"
        config.write_text(
            mosquitto_config(port, folder / "passwords", folder / "acl", websockets_port)
        )
        with log.open("ab") as output:
            process = subprocess.Popen(
                [binary, "-c", str(config)], stdout=output, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + DEADLINE
        while process.poll() is None and time.monotonic() < deadline:
            if _connack_code_blocking(HOST, port, SERVER_USER, server_password) == 0:
                return process, port, websockets_port
            time.sleep(0.02)
        _stop(process)
    raise RuntimeError(f"mosquitto did not start; its log:\n{log.read_text()}")


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MosquittoBroker]:
    """Mosquitto with deploy/mosquitto's config and ACL, the server account and TEST_USERS.

    Skipped when the ``mosquitto`` binary is missing, unless ``CI=true`` (then it fails).
    """
    if shutil.which("mosquitto") is None:
        reason = "the mosquitto binary is not installed (apt install mosquitto)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("mosquitto")
    shutil.copyfile(DEPLOY / "acl", folder / "acl")
    server_password = random_password()
    users = {name: random_password() for name in TEST_USERS}
    accounts = Accounts()
    accounts.add(SERVER_USER, server_password)
    for name, password in users.items():
        accounts.add(name, password)
    accounts.save(folder / "passwords")
    process, port, websockets_port = start_mosquitto(folder, server_password)
    try:
        yield MosquittoBroker(
            kind="mosquitto",
            host=HOST,
            port=port,
            server_password=server_password,
            users=users,
            checks_passwords=True,
            process=process,
            password_file=folder / "passwords",
            accounts=accounts,
            websockets_port=websockets_port,
        )
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerUnderTest]:
    """A 3-node NATS cluster (deploy/nats/node.conf, MQTT and JetStream) with the generated
    authorization, the server account and TEST_USERS (tests/net/nats_cluster.py).

    Skipped when ``nats-server`` is missing, unless ``CI=true`` (then it fails).
    """
    from tests.net.nats_cluster import nats_binary, start_cluster

    binary = nats_binary()
    if binary is None:
        reason = "the nats-server binary is not installed (apt install nats-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    cluster = start_cluster(binary, tmp_path_factory.mktemp("nats"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def embedded_broker() -> AsyncIterator[BrokerUnderTest]:
    """The embedded broker in guest mode on a free port, with a server password; the test users'
    names are bound to their passwords."""
    server_password = random_password()
    guests = Guests()
    users = {name: random_password() for name in TEST_USERS}
    for name, password in users.items():
        assert Admission.ACCEPTED == guests.admit(name, password)
    async with EmbeddedBroker(port=0, server_password=server_password, guests=guests) as broker:
        yield GuestBroker(
            kind="embedded",
            host=HOST,
            port=broker.port,
            server_password=server_password,
            users=users,
            checks_passwords=True,
            guests=guests,
            embedded=broker,
        )


@pytest.fixture(params=["mosquitto", "embedded"])
def broker(request: pytest.FixtureRequest) -> BrokerUnderTest:
    """Each broker in turn (Mosquitto with deploy/'s config, then the embedded one)."""
    name = "mosquitto" if request.param == "mosquitto" else "embedded_broker"
    found: BrokerUnderTest = request.getfixturevalue(name)
    return found


async def ensure_users(broker: BrokerUnderTest, names: list[str]) -> None:
    """Give every name in ``names`` an account (reloading Mosquitto once per new name)."""
    for name in names:
        if name not in broker.users:
            await broker.add_user(name, random_password())


@contextlib.asynccontextmanager
async def serving(
    broker: BrokerUnderTest,
    folder: Path,
    clock: Clock | None = None,
    limits: Limits | None = None,
    grace_seconds: float = 30.0,
    waiting_ttl: float = 1800.0,
    finished_ttl: float = 300.0,
    claim_seconds: float = 10.0,
) -> AsyncIterator[Running]:
    """``ramino serve`` in this process on ``broker``, with a SQLite store in ``folder`` (and
    by default a rate limit out of the way)."""
    config = ServeConfig(
        broker=broker.url,
        store=f"sqlite:///{folder / 'events.db'}",
        server_user=broker.server_user,
        server_password=broker.server_password,
        grace_seconds=grace_seconds,
        waiting_ttl=waiting_ttl,
        finished_ttl=finished_ttl,
        claim_seconds=claim_seconds,
        limits=limits or Limits(rate=10_000, burst=10_000),
        mqtt5=broker.kind == "mosquitto",  # the embedded broker speaks MQTT 3.1.1 only
    )
    async with running(config, clock=clock) as server:
        yield server


async def serve_process(
    broker: BrokerUnderTest, store: str, *extra: str, new_session: bool = False
) -> asyncio.subprocess.Process:
    """``ramino serve`` on ``broker`` with ``store`` (and the ``extra`` arguments) as a
    subprocess of this repository, its output piped (``new_session``: in a process group of
    its own, so that what it starts can be killed with it)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server.cli",
        "serve",
        "--broker",
        broker.url,
        "--store",
        store,
        "--server-password",
        broker.server_password,
        *extra,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=new_session,
    )


def client_for(
    broker: BrokerUnderTest,
    name: str,
    request_timeout: float = 5.0,
    tap: Callable[[Message], None] | None = None,
) -> Client:
    """An SDK client of ``name`` on ``broker``."""
    return Client(
        name, broker.password(name), broker=broker.url, request_timeout=request_timeout, tap=tap
    )
