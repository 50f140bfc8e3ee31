"""Mosquitto's publish rate per username (deploy/mosquitto/ramino_limits.c, issue 15 item 8).

Each test runs its own Mosquitto from deploy/'s config with the plugin built for the run and
its options set small (``rate`` 1 token a second), so that what the bucket lets through is
known to within a token or two whatever the machine's speed: a flood of PUBLISH packets at
QoS 0 is written in one go, a PINGREQ behind it tells when Mosquitto has handled all of it (it
handles one client's packets in order), and a marker the server's account publishes after that
tells the watcher when every forwarded message has reached it (one subscriber's messages leave
in order).

Worked out from the plugin's rule (a PUBLISH costs 1 token + 1 per KiB; the bucket starts full
at ``burst`` and refills ``rate`` a second; ``inbox_credit`` back per inbox message): a flood of
N one-byte messages from a full bucket of B forwards B messages, plus at most one per second of
the flood's duration (``rate`` 1), plus one for rounding.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bench.abuse import publish_packet
from protocol import topics
from server.net.accounts import Accounts, random_password
from server.net.embedded import SERVER_USER
from tests.net.conftest import DEPLOY, PLUGIN_UNAVAILABLE, limits_plugin, mosquitto_config
from tests.security.test_connections import WAIT, Raw, free_port, read_packet

pytestmark = pytest.mark.asyncio

BURST = 50
INBOX_CREDIT = 1
USERS = ("alice", "bob")


@dataclass
class RateBroker:
    """A Mosquitto with the plugin at ``rate`` 1, ``burst`` BURST; passwords by username."""

    port: int
    passwords: dict[str, str]
    log: list[str]
    """Mosquitto's log lines so far."""
    logged: asyncio.Condition
    """Notified at each log line."""
    logins: list[Raw] = field(default_factory=list)

    async def says(self, text: str) -> None:
        """Wait (at most WAIT seconds) for a log line holding ``text``."""
        async with asyncio.timeout(WAIT), self.logged:
            await self.logged.wait_for(lambda: any(text in line for line in self.log))

    async def login(self, user: str) -> Raw:
        raw = await Raw.open(self.port)
        self.logins.append(raw)
        assert 0 == await raw.connect(user, self.passwords[user])
        return raw


@contextlib.asynccontextmanager
async def rate_broker(folder: Path, **options: str) -> AsyncIterator[RateBroker]:
    """deploy/'s Mosquitto config with the plugin's options replaced by ``options`` (and
    ``options`` the config does not set added)."""
    if shutil.which("mosquitto") is None:
        pytest.skip("the mosquitto binary is not installed")
    if limits_plugin() is None:
        pytest.skip(f"the publish rate plugin could not be built: {PLUGIN_UNAVAILABLE[0]}")
    settings = {"rate": "1", "burst": str(BURST), "inbox_credit": str(INBOX_CREDIT)} | options
    shutil.copyfile(DEPLOY / "acl", folder / "acl")
    passwords = {name: random_password() for name in (SERVER_USER, *USERS)}
    accounts = Accounts()
    for name, password in passwords.items():
        accounts.add(name, password)
    accounts.save(folder / "passwords")
    port = free_port()
    lines = []
    for line in mosquitto_config(port, folder / "passwords", folder / "acl").splitlines():
        key = line.split(" ", 1)[0]
        if key.startswith("plugin_opt_") and key[len("plugin_opt_") :] in settings:
            continue
        lines.append(line)
        if key == "plugin":
            lines += [f"plugin_opt_{name} {value}" for name, value in settings.items()]
    (folder / "mosquitto.conf").write_text("\n".join(lines) + "\n")
    process = await asyncio.create_subprocess_exec(
        "mosquitto",
        "-c",
        str(folder / "mosquitto.conf"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    log: list[str] = []
    logged = asyncio.Condition()

    async def read_log() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            async with logged:
                log.append(line.decode(errors="replace"))
                logged.notify_all()

    reader = asyncio.create_task(read_log())
    broker = RateBroker(port, passwords, log, logged)
    try:
        # Mosquitto says "running" once its listeners are open; a broker that stops ends the log.
        started = asyncio.ensure_future(broker.says(" running"))
        await asyncio.wait({started, reader}, return_when=asyncio.FIRST_COMPLETED)
        if not started.done() or started.exception() is not None:
            started.cancel()
            raise RuntimeError(f"mosquitto did not start: {''.join(log)}")
        try:
            yield broker
        finally:
            for raw in broker.logins:
                await raw.close()
    finally:
        if process.returncode is None:
            process.terminate()
        async with asyncio.timeout(WAIT):
            await process.wait()
            await reader


async def flood(raw: Raw, topic: str, count: int) -> float:
    """Write ``count`` one-byte PUBLISH packets on ``topic`` in one go; return once Mosquitto
    has handled them all (its PINGRESP to the PINGREQ written behind them). The seconds it took."""
    began = time.monotonic()
    raw.writer.write(publish_packet(topic, b"x") * count)
    assert await raw.ping()
    return time.monotonic() - began


async def received(watcher: Raw, server: Raw, topic: str) -> int:
    """The server's account publishes a marker on ``topic``: the messages ``watcher`` got on
    it before the marker."""
    server.writer.write(publish_packet(topic, b"end"))
    count = 0
    async with asyncio.timeout(WAIT):
        while True:
            header, body = await read_packet(watcher.reader)
            if header >> 4 != 3:
                continue
            length = int.from_bytes(body[:2], "big")
            if body[2 + length :] == b"end":
                return count
            count += 1


async def test_mosquitto_forwards_a_users_publishes_only_up_to_its_rate(tmp_path: Path) -> None:
    """alice writes 500 messages on her lobby topic at once: the server's subscription gets
    her burst (50) and at most a token a second more, not 500."""
    async with rate_broker(tmp_path) as broker:
        server, alice = await broker.login(SERVER_USER), await broker.login("alice")
        topic = topics.lobby_command("alice", 0)
        assert [0] == await server.subscribe([topic])
        seconds = await flood(alice, topic, 500)
        count = await received(server, server, topic)
        assert BURST <= count <= BURST + int(seconds) + 1, (count, seconds)
        # bob's bucket is his own: alice's flood took nothing from it.
        bob_topic = topics.lobby_command("bob", 0)
        assert [0] == await server.subscribe([bob_topic], packet_id=2)
        seconds = await flood(await broker.login("bob"), bob_topic, 10)
        assert 10 == await received(server, server, bob_topic)
        await broker.says("ramino_limits: dropped")


async def test_the_server_account_is_never_limited(tmp_path: Path) -> None:
    """500 messages of the server's account to alice's inbox all reach her."""
    async with rate_broker(tmp_path) as broker:
        server, alice = await broker.login(SERVER_USER), await broker.login("alice")
        inbox = topics.inbox("alice")
        assert [0] == await alice.subscribe([inbox])
        await flood(server, inbox, 500)
        assert 500 == await received(alice, server, inbox)


async def test_each_message_to_a_users_inbox_gives_it_a_token_back(tmp_path: Path) -> None:
    """alice spends her bucket (a flood of 200: 50 go through), the server sends her 30 inbox
    messages (30 tokens back), and a second flood of 200 forwards those 30 and at most a
    token a second more. Without the credit the second flood would forward only the tokens
    of the seconds between the floods."""
    async with rate_broker(tmp_path) as broker:
        server, alice = await broker.login(SERVER_USER), await broker.login("alice")
        topic, inbox = topics.lobby_command("alice", 0), topics.inbox("alice")
        assert [0] == await server.subscribe([topic])
        assert [0] == await alice.subscribe([inbox])
        began = time.monotonic()
        await flood(alice, topic, 200)
        assert (
            BURST
            <= await received(server, server, topic)
            <= BURST + 1 + int(time.monotonic() - began)
        )
        began = time.monotonic()
        await flood(server, inbox, 30)
        assert 30 == await received(alice, server, inbox)
        await flood(alice, topic, 200)
        count = await received(server, server, topic)
        assert 30 <= count <= 30 + 1 + int(time.monotonic() - began), count


async def test_a_bad_plugin_option_stops_mosquitto_with_a_message_naming_it(
    tmp_path: Path,
) -> None:
    """``plugin_opt_rate fast`` is refused at start, and the log says which option."""
    with pytest.raises(RuntimeError, match="plugin_opt_rate must be a number >= 0, not 'fast'"):
        async with rate_broker(tmp_path, rate="fast"):
            pytest.fail("Mosquitto started with plugin_opt_rate fast")


async def test_a_user_with_a_full_bucket_is_never_refused_when_buckets_are_forgotten(
    tmp_path: Path,
) -> None:
    """``prune_seconds`` 0 forgets every full bucket at each message, the moment a first
    message of a user has just made one: each of 10 single messages is forwarded (the bucket
    of a user who publishes one message at a time stays full)."""
    async with rate_broker(tmp_path, prune_seconds="0") as broker:
        server = await broker.login(SERVER_USER)
        topic = topics.lobby_command("alice", 0)
        assert [0] == await server.subscribe([topic])
        alice = await broker.login("alice")
        for _ in range(10):
            await flood(alice, topic, 1)
            assert 1 == await received(server, server, topic)
        assert not any("ramino_limits: dropped" in line for line in broker.log)
