"""A small Ramino client written from docs/protocol.md alone: aiomqtt for MQTT 3.1.1, msgpack for
the payloads, nothing from the project's own packages.

A :class:`Peer` is one connected client: it subscribes to its inbox (and any public topic asked
for), keeps every message it receives in arrival order (:attr:`Peer.received`), and sends
requests whose replies it finds by id. Every wait is bounded by :data:`WAIT` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import aiomqtt
import msgpack  # type: ignore[import-untyped]

PREFIX = "ramino/v1"
WAIT = 10.0
"""Seconds any single wait for the server may take before the test fails."""

Map = dict[str, Any]


def encode(value: object) -> bytes:
    """One msgpack payload (strings as str, bytes as bin)."""
    data: bytes = msgpack.packb(value, use_bin_type=True)
    return data


def decode(payload: bytes) -> Map | None:
    """The map in ``payload``; None for an empty payload.

    Raises:
        ValueError: ``payload`` is not one msgpack map (a server that breaks §4).
    """
    if not payload:
        return None
    value = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    if not isinstance(value, dict):
        raise ValueError(f"not a msgpack map: {value!r}")
    return cast(Map, value)


def inbox_topic(name: str) -> str:
    """``ramino/v1/inbox/{name}``."""
    return f"{PREFIX}/inbox/{name}"


def lobby_topic(name: str, shard: int = 0) -> str:
    """``ramino/v1/lobby/{shard}/{name}``."""
    return f"{PREFIX}/lobby/{shard}/{name}"


def command_topic(table: str, name: str) -> str:
    """``ramino/v1/table/{table}/cmd/{name}``."""
    return f"{PREFIX}/table/{table}/cmd/{name}"


def presence_topic(name: str) -> str:
    """``ramino/v1/presence/{name}``."""
    return f"{PREFIX}/presence/{name}"


def events_topic(table: str) -> str:
    """``ramino/v1/table/{table}/events``."""
    return f"{PREFIX}/table/{table}/events"


def state_topic(table: str) -> str:
    """``ramino/v1/table/{table}/state`` (retained snapshot)."""
    return f"{PREFIX}/table/{table}/state"


def chat_topic(table: str) -> str:
    """``ramino/v1/table/{table}/chat``."""
    return f"{PREFIX}/table/{table}/chat"


def listing_topic(table: str) -> str:
    """``ramino/v1/tables/{table}`` (retained listing)."""
    return f"{PREFIX}/tables/{table}"


STATUS_TOPIC = f"{PREFIX}/server/status"
OFFLINE = encode({"type": "presence", "online": False})
ONLINE = encode({"type": "presence", "online": True})


def fresh_id() -> str:
    """A fresh request id: 16 random hex digits, as §12 recommends."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Account:
    """A name the broker lets in, with its password."""

    name: str
    password: str


@dataclass(frozen=True)
class Received:
    """One message as it arrived: topic, raw payload, its decoded map and the retain flag."""

    topic: str
    payload: bytes
    data: Map | None
    retain: bool

    @property
    def kind(self) -> str:
        """The payload's ``type`` ("" when it has none or is empty)."""
        return "" if self.data is None else str(self.data.get("type", ""))


@dataclass
class Peer:
    """One client connection, opened with :meth:`connected`."""

    account: Account
    host: str
    port: int
    client: aiomqtt.Client | None = None
    received: list[Received] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the connection is gone and every message that came before it is read."""
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def name(self) -> str:
        """The username, which is the client's identity."""
        return self.account.name

    @contextlib.asynccontextmanager
    async def connected(
        self, *topics: str, will: bool = True, presence: bool = True
    ) -> AsyncIterator[Peer]:
        """Connect as §2 says (MQTT 3.1.1, clean session, TCP_NODELAY, the offline will),
        subscribe to the inbox and ``topics``, announce ``online: true`` and read every
        message into :attr:`received` until the block ends.

        Raises:
            aiomqtt.MqttError: the broker refused the connection.
        """
        client = aiomqtt.Client(
            self.host,
            self.port,
            username=self.account.name,
            password=self.account.password,
            identifier=f"{self.account.name}-{secrets.token_hex(4)}",
            protocol=aiomqtt.ProtocolVersion.V311,
            clean_session=True,
            keepalive=30,
            will=aiomqtt.Will(presence_topic(self.name), OFFLINE, qos=1, retain=False)
            if will
            else None,
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
            timeout=WAIT,
        )
        async with client:
            self.client = client
            reader = asyncio.create_task(self._read(client), name=f"read-{self.name}")
            try:
                await client.subscribe(inbox_topic(self.name), qos=1)
                for topic in topics:
                    await client.subscribe(topic, qos=1)
                if presence:
                    await client.publish(presence_topic(self.name), ONLINE, qos=1)
                yield self
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
                self.client = None

    async def _read(self, client: aiomqtt.Client) -> None:
        try:
            async for message in client.messages:
                payload = message.payload
                raw = bytes(payload) if isinstance(payload, bytes | bytearray) else b""
                self.received.append(Received(str(message.topic), raw, decode(raw), message.retain))
                self._arrived.set()
        except aiomqtt.MqttError:
            # The broker went away (a test that stops the server): what arrived is kept.
            pass
        finally:
            self.closed.set()

    def _live(self) -> aiomqtt.Client:
        if self.client is None:
            raise RuntimeError(f"{self.name} is not connected")
        return self.client

    async def subscribe(self, topic: str) -> None:
        """Subscribe to one more topic (QoS 1)."""
        await self._live().subscribe(topic, qos=1)

    async def publish(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False
    ) -> None:
        """Publish raw bytes."""
        await self._live().publish(topic, payload, qos=qos, retain=retain)

    async def wait_for(
        self, predicate: Callable[[Received], bool], *, after: int = 0, within: float = WAIT
    ) -> Received:
        """The first message from index ``after`` on that satisfies ``predicate``, waiting for
        it to arrive.

        Raises:
            TimeoutError: none arrived within ``within`` seconds.
        """
        index = after
        async with asyncio.timeout(within):
            while True:
                while index < len(self.received):
                    message = self.received[index]
                    if predicate(message):
                        return message
                    index += 1
                self._arrived.clear()
                await self._arrived.wait()

    async def collect(
        self, predicate: Callable[[Received], bool], count: int, *, within: float = WAIT
    ) -> list[Received]:
        """The first ``count`` messages that satisfy ``predicate``, waiting for them.

        Raises:
            TimeoutError: fewer arrived within ``within`` seconds.
        """
        found: list[Received] = []
        index = 0
        async with asyncio.timeout(within):
            while len(found) < count:
                message = await self.wait_for(predicate, after=index, within=within)
                found.append(message)
                index = self.received.index(message, index) + 1
        return found

    def replies(self, request_id: str | None = None) -> list[Map]:
        """Every reply received so far (with this id when given)."""
        return [
            message.data
            for message in self.received
            if message.topic == inbox_topic(self.name)
            and message.data is not None
            and message.data.get("type") == "reply"
            and (request_id is None or message.data.get("id") == request_id)
        ]

    def updates(self, table: str) -> list[Map]:
        """Every update of ``table`` received so far."""
        return [
            message.data
            for message in self.received
            if message.topic == inbox_topic(self.name)
            and message.data is not None
            and message.data.get("type") == "update"
            and message.data.get("table") == table
        ]

    async def reply_to(self, request_id: str, *, after: int = 0, within: float = WAIT) -> Map:
        """The reply with ``request_id``, waiting for it.

        Raises:
            TimeoutError: it did not come within ``within`` seconds.
        """
        inbox = inbox_topic(self.name)
        found = await self.wait_for(
            lambda message: (
                message.topic == inbox
                and message.kind == "reply"
                and message.data is not None
                and message.data.get("id") == request_id
            ),
            after=after,
            within=within,
        )
        assert found.data is not None
        return found.data

    async def send(
        self,
        topic: str,
        command: Map,
        *,
        seq: int | None = None,
        request_id: str | None = None,
        within: float = WAIT,
    ) -> Map:
        """Publish a ``Request`` on ``topic`` and return its reply.

        Raises:
            TimeoutError: no reply within ``within`` seconds.
        """
        request_id = request_id or fresh_id()
        mark = len(self.received)
        request: Map = {"id": request_id, "cmd": command, "seq": seq}
        await self.publish(topic, encode(request))
        return await self.reply_to(request_id, after=mark, within=within)

    async def lobby(self, command: Map, **kwargs: Any) -> Map:
        """Send a lobby command on shard 0 and return its reply."""
        return await self.send(lobby_topic(self.name), command, **kwargs)

    async def table(self, table: str, command: Map, **kwargs: Any) -> Map:
        """Send a table or game command on ``table``'s command topic and return its reply."""
        return await self.send(command_topic(table, self.name), command, **kwargs)

    async def create(self, variant: str = "knock", **fields: Any) -> str:
        """Create a table (the creator sits in seat 0 unless ``sit=False``) and return its id.

        Raises:
            AssertionError: the server refused it.
        """
        reply = await self.lobby({"type": "create_table", "variant": variant, **fields})
        assert reply["ok"], reply
        table: str = reply["result"]["table"]
        return table


@contextlib.asynccontextmanager
async def peers(
    host: str, port: int, accounts: list[Account], *topics: str
) -> AsyncIterator[list[Peer]]:
    """Several connected peers at once (each subscribed to ``topics`` too)."""
    async with contextlib.AsyncExitStack() as stack:
        connected = [
            await stack.enter_async_context(Peer(account, host, port).connected(*topics))
            for account in accounts
        ]
        yield connected


def connect_packet(name: str, password: str, will: tuple[str, bytes]) -> bytes:
    """An MQTT 3.1.1 CONNECT (clean session, keep-alive 60 s) with a QoS 1 will."""

    def text(value: bytes) -> bytes:
        return struct.pack("!H", len(value)) + value

    flags = 0x80 | 0x40 | 0x08 | 0x04 | 0x02  # username, password, will QoS 1, will, clean
    payload = text(f"{name}-{secrets.token_hex(4)}".encode())
    payload += text(will[0].encode()) + text(will[1])
    payload += text(name.encode()) + text(password.encode())
    body = text(b"MQTT") + bytes((4, flags)) + struct.pack("!H", 60) + payload
    length = bytearray()
    remaining = len(body)
    while True:
        digit, remaining = remaining % 128, remaining // 128
        length.append(digit | (0x80 if remaining else 0))
        if not remaining:
            return bytes((0x10,)) + bytes(length) + body


async def connack(host: str, port: int, account: Account, will: tuple[str, bytes]) -> int:
    """The CONNACK return code a CONNECT of ``account`` with ``will`` gets (0: accepted; -1:
    the broker closed the connection instead). An accepted connection is then dropped without
    a DISCONNECT, as a crashed client or a lost network does (§2: the broker then publishes
    the will)."""
    async with asyncio.timeout(WAIT):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(connect_packet(account.name, account.password, will))
            await writer.drain()
            try:
                answer = await reader.readexactly(4)
            except (asyncio.IncompleteReadError, ConnectionError):
                return -1
            return answer[3]
        finally:
            writer.transport.abort()


async def vanish(host: str, port: int, account: Account) -> None:
    """Open a second connection of ``account`` whose will is `Presence{online: false}`, then
    drop it without a DISCONNECT (see :func:`connack`).

    Raises:
        ConnectionError: the broker refused the connection.
    """
    code = await connack(host, port, account, (presence_topic(account.name), OFFLINE))
    if code != 0:
        raise ConnectionError(f"CONNACK {code} for {account.name!r}")
