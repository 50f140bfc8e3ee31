"""A small adapter over gmqtt: connect, subscribe, publish and an async stream of messages.

The server, the SDK and the bots all reach the broker through it, so the MQTT client library
is one choice in one place. It speaks MQTT 3.1.1 (the embedded broker knows no other), or MQTT 5
when asked (the server on an external broker, to see the retain flag of live messages),
reconnects with backoff by itself (to the next of several broker addresses, when it has more
than one: the nodes of a cluster), and subscribes again after every reconnection (sessions
are clean). asyncio sets TCP_NODELAY on its TCP sockets, so a small message leaves at once;
what is published during one pass of the event loop leaves in one write.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import gmqtt
from gmqtt.mqtt.constants import MQTTv50, MQTTv311

SUBSCRIBE_RETRY = 0.05
"""Seconds before a SUBSCRIBE or UNSUBSCRIBE that found no packet id free is tried again."""

__all__ = [
    "BrokerAddress",
    "Message",
    "Transport",
    "TransportError",
    "parse_broker_url",
    "parse_broker_urls",
]

_log = logging.getLogger(__name__)


class TransportError(Exception):
    """The broker could not be reached, or it refused the credentials."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where the broker listens."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"


def parse_broker_url(url: str) -> BrokerAddress:
    """``mqtt://HOST:PORT`` (port 1883 when omitted), or ``HOST:PORT``.

    Raises:
        ValueError: not such an address.
    """
    text = url if "://" in url else f"mqtt://{url}"
    parts = urlsplit(text)
    if parts.scheme != "mqtt" or not parts.hostname:
        raise ValueError(f"a broker address is mqtt://HOST:PORT, got {url!r}")
    return BrokerAddress(parts.hostname, parts.port or 1883)


def parse_broker_urls(urls: str) -> tuple[BrokerAddress, ...]:
    """Comma-separated addresses (``mqtt://h:1883,mqtt://h:1884``): the nodes of one broker
    cluster, tried in turn.

    Raises:
        ValueError: one is not an address, or there is none.
    """
    addresses = tuple(parse_broker_url(url.strip()) for url in urls.split(",") if url.strip())
    if not addresses:
        raise ValueError(f"no broker address in {urls!r}")
    return addresses


class _Client(gmqtt.Client):  # type: ignore[misc]  # gmqtt has no types
    """gmqtt's client, reconnecting to the next address of a list on each attempt."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.addresses: tuple[BrokerAddress, ...] = ()
        self.current = 0

    async def reconnect(self, delay: bool = False) -> None:
        if len(self.addresses) > 1 and self._allow_reconnect():
            self.current = (self.current + 1) % len(self.addresses)
            address = self.addresses[self.current]
            self._host, self._port = address.host, address.port
        await super().reconnect(delay)


@dataclass(frozen=True, slots=True)
class Message:
    """One message received: its topic and payload."""

    topic: str
    payload: bytes
    retain: bool = False
    """The broker kept it and replays it to new subscribers (it is not a new message)."""


class _Coalescing:
    """Wraps a socket transport: what is written during one pass of the event loop leaves in
    one ``send`` (a server answering a command publishes several messages at once), and with
    ``spacing`` sends are at least that many seconds apart (a busy server then makes one system
    call for many commands; an idle one writes at once)."""

    def __init__(self, transport: asyncio.Transport, spacing: float = 0.0) -> None:
        self._transport = transport
        self._pending: list[bytes] = []
        self._loop = asyncio.get_running_loop()
        self._spacing = spacing
        self._last = -spacing
        self._immediate = False

    def write(self, data: bytes) -> None:
        if self._immediate:
            self._flush()
            if not self._transport.is_closing():
                self._transport.write(data)
            return
        if not self._pending:
            wait = self._last + self._spacing - self._loop.time()
            if wait > 0:
                self._loop.call_later(wait, self._flush)
            else:
                self._loop.call_soon(self._flush)
        self._pending.append(data)

    def flush(self) -> None:
        """Send what is waiting now, and every later write at once (before a close: what is
        still waiting when the socket closes is lost, a DISCONNECT with it)."""
        self._spacing = 0.0
        self._immediate = True
        self._flush()

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if self._spacing:
            self._last = self._loop.time()
        if pending and not self._transport.is_closing():
            self._transport.write(b"".join(pending))

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


_PREFIXES_KEPT = 10_000
"""Topics whose PUBLISH header is kept (the inboxes of as many clients, and tables)."""


def _header(retain: bool, size: int) -> bytes:
    """The fixed header of a QoS 0 PUBLISH with ``size`` bytes after it: the packet type and
    flags, then the remaining length as MQTT's variable byte integer."""
    if size > 0x0FFFFFFF:
        raise ValueError(f"an MQTT packet holds at most 268,435,455 bytes, not {size:,}")
    header = bytearray((0x31 if retain else 0x30,))
    while True:
        size, byte = size >> 7, size & 0x7F
        header.append(byte | 0x80 if size else byte)
        if not size:
            return bytes(header)


_HEADERS = {retain: [_header(retain, size) for size in range(0x80)] for retain in (False, True)}
"""The fixed headers of short packets, built once."""


class Transport:
    """One MQTT connection with an inbound queue; see the module docstring."""

    def __init__(
        self,
        username: str,
        password: str = "",
        client_id: str = "",
        will: tuple[str, bytes] | None = None,
        will_retain: bool = False,
        reconnect_delay: float = 1.0,
        queue_size: int = 0,
        tap: Callable[[Message], None] | None = None,
        write_spacing: float = 0.0,
        mqtt5: bool = False,
    ) -> None:
        self.username = username
        self.mqtt5 = mqtt5
        """Speak MQTT 5 and subscribe with "retain as published", so that ``Message.retain``
        also marks a live message its sender retained (MQTT 3.1.1 clears the flag on live
        delivery: only a replay to a new subscriber has it)."""
        self.write_spacing = write_spacing
        """Least seconds between two socket writes (what is published meanwhile waits)."""
        self.client_id = client_id or f"{username}-{secrets.token_hex(4)}"
        will_message = (
            gmqtt.Message(will[0], will[1], qos=1, retain=will_retain) if will is not None else None
        )
        self._client = _Client(self.client_id, clean_session=True, will_message=will_message)
        self._client.set_auth_credentials(username, password or None)
        self._client.set_config({"reconnect_retries": -1, "reconnect_delay": reconnect_delay})
        self._client.on_message = self._on_message
        # gmqtt looks its packet handlers up by name on the instance: QoS 0 messages for a
        # ``deliver`` callback take a shorter way than its generic one (see _fast_publish).
        handler = self._client._package_handler
        self._gmqtt_publish = handler._handle_publish_packet
        handler._handle_publish_packet = self._fast_publish
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self.tap = tap
        """Called with every message received, before it is queued (logging, tests)."""
        self.deliver: Callable[[Message], None] | None = None
        """When set, called with every message instead of queueing it: a reader that never
        waits (the server) saves a queue and a task switch per message."""
        self._subscriptions: dict[str, int] = {}
        self._queue: asyncio.Queue[Message] = asyncio.Queue(queue_size)
        self.connected = asyncio.Event()
        self.lost = asyncio.Event()
        """Set while the connection is down after having been up."""
        self.connections = 0
        """How many times the connection was made (1 + reconnections)."""
        self.dropped = 0
        """Messages dropped because the inbound queue was full."""
        self._deferred: collections.deque[tuple[bool, list[str], int]] = collections.deque()
        self.deferred = 0
        """Times a SUBSCRIBE or UNSUBSCRIBE waited for the broker to acknowledge packets of
        ours first (no packet id was left)."""
        self.downgraded = 0
        """QoS 1 messages sent at QoS 0 because the broker had not yet acknowledged as many
        as it lets a client have in flight (its MQTT 5 "receive maximum")"""
        self._socket: _Coalescing | None = None
        """The connection's socket while it is up: QoS 0 messages are written to it directly."""
        self._prefixes: dict[str, bytes] = {}
        """The variable header of a QoS 0 PUBLISH to each topic (its length, the topic, and
        MQTT 5's empty properties), built once."""

    async def connect(
        self, address: BrokerAddress | Sequence[BrokerAddress], keepalive: int = 30
    ) -> None:
        """Connect (the first time; later reconnections are automatic). Given several
        addresses, the first that answers is used, and each reconnection attempt goes to the
        next one in turn.

        Raises:
            TransportError: no broker is there, or one refuses the credentials.
        """
        addresses = (address,) if isinstance(address, BrokerAddress) else tuple(address)
        unreachable: list[str] = []
        for index, where in enumerate(addresses):
            try:
                await self._client.connect(
                    where.host,
                    where.port,
                    keepalive=keepalive,
                    version=MQTTv50 if self.mqtt5 else MQTTv311,
                )
            except (TimeoutError, OSError) as error:
                unreachable.append(f"cannot reach the broker at {where.url}: {error}")
                continue
            except Exception as error:  # gmqtt raises its own types for a refused CONNACK
                raise TransportError(f"the broker at {where.url} refused us: {error}") from None
            self._client.addresses, self._client.current = addresses, index
            return
        raise TransportError("; ".join(unreachable) or "no broker address")

    @property
    def address(self) -> BrokerAddress | None:
        """The broker address of the connection (or of the reconnection being tried); ``None``
        before the first connection."""
        client: _Client = self._client
        return client.addresses[client.current] if client.addresses else None

    async def close(self) -> None:
        """Disconnect cleanly (no will message is sent).

        What was published before is written first, then the DISCONNECT: gmqtt closes the
        socket right after queueing the DISCONNECT, and the broker, seeing the connection drop
        without one, would publish the will (the server's: a second, wrong, retained status).
        """
        protocol: Any = getattr(getattr(self._client, "_connection", None), "_protocol", None)
        socket = getattr(protocol, "_transport", None)
        if isinstance(socket, _Coalescing):
            socket.flush()
        with contextlib.suppress(Exception):
            await self._client.disconnect()
        # A disconnect that failed (the link was already down) leaves the socket to us.
        connection = getattr(self._client, "_connection", None)
        transport = getattr(connection, "_transport", None)
        if transport is not None and not transport.is_closing():
            transport.close()

    def drop(self) -> None:
        """Cut the connection without a DISCONNECT, as a network failure would: the broker
        sends the will, and the transport reconnects by itself."""
        connection = getattr(self._client, "_connection", None)
        transport = getattr(connection, "_transport", None)
        if transport is not None:
            transport.close()

    def kill(self) -> None:
        """Cut the connection for good, as a crash would (the broker sends the will)."""
        self._client.set_config({"reconnect_retries": 0})
        self._client._is_active = False
        self.drop()

    def set_reconnect_delay(self, seconds: float) -> None:
        """Wait ``seconds`` before each reconnection attempt."""
        self._client.reconnect_delay = seconds

    def subscribe(self, *topics: str, qos: int = 1) -> None:
        """Subscribe now and after every reconnection."""
        fresh = [topic for topic in topics if topic not in self._subscriptions]
        for topic in fresh:
            self._subscriptions[topic] = qos
        if fresh and self.connected.is_set():
            self._send(True, fresh, qos)

    def _subscription(self, topic: str, qos: int) -> gmqtt.Subscription:
        return gmqtt.Subscription(topic, qos=qos, retain_as_published=self.mqtt5)

    def unsubscribe(self, *topics: str) -> None:
        """Stop receiving ``topics``."""
        gone = [topic for topic in topics if self._subscriptions.pop(topic, None) is not None]
        if gone and self.connected.is_set():
            self._send(False, gone, 0)

    def _send(self, subscribe: bool, topics: list[str], qos: int) -> None:
        """Send a SUBSCRIBE (or UNSUBSCRIBE) of ``topics``, or, while the broker holds as many
        of our packets unacknowledged as it allows (no packet id left: its MQTT 5 "receive
        maximum"), keep it, after those kept before, for ``_retry`` (counted in ``deferred``)."""
        if self._deferred:
            self._deferred.append((subscribe, topics, qos))
            return
        try:
            if subscribe:
                self._client.subscribe([self._subscription(topic, qos) for topic in topics])
            else:
                self._client.unsubscribe(topics)
        except OverflowError:  # gmqtt: no packet id left
            self._deferred.append((subscribe, topics, qos))
            self._retry_later()

    def _retry_later(self) -> None:
        self.deferred += 1
        asyncio.get_running_loop().call_later(SUBSCRIBE_RETRY, self._retry)

    def _retry(self) -> None:
        """Send the subscriptions kept by ``_send``, in order, until ids run out again."""
        while self._deferred and self.connected.is_set():
            subscribe, topics, qos = self._deferred[0]
            try:
                if subscribe:
                    self._client.subscribe([self._subscription(t, qos) for t in topics])
                else:
                    self._client.unsubscribe(topics)
            except OverflowError:
                self._retry_later()
                return
            self._deferred.popleft()

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> None:
        """Queue a message for the broker (QoS 1 messages are resent after a reconnection;
        QoS 0 ones are written to the socket as they are, or lost while it is down).

        When the broker has as many QoS 1 messages of ours unacknowledged as it allows (its
        acknowledgements wait behind what it sends us, a flood for instance), the message goes
        at QoS 0 rather than not at all (counted in ``downgraded``).
        """
        socket = self._socket
        if qos == 0 and socket is not None and not socket.is_closing():
            # What gmqtt's publish writes, without its message object, property handling and
            # four calls: a server publishes several QoS 0 messages a move.
            prefix = self._prefixes.get(topic)
            if prefix is None:
                prefix = self._prefix(topic)
            size = len(prefix) + len(payload)
            header = _HEADERS[retain][size] if size < 0x80 else _header(retain, size)
            socket.write(header + prefix + payload)
            return
        try:
            self._client.publish(topic, payload, qos=qos, retain=retain)
        except OverflowError:  # gmqtt: no packet id left
            self.downgraded += 1
            self._client.publish(topic, payload, qos=0, retain=retain)

    def _prefix(self, topic: str) -> bytes:
        """The variable header of a QoS 0 PUBLISH to ``topic`` (kept for the next one)."""
        name = topic.encode()
        if len(name) > 0xFFFF:
            raise ValueError(f"an MQTT topic has at most 65,535 bytes, not {len(name):,}")
        prefix = len(name).to_bytes(2, "big") + name + (b"\x00" if self.mqtt5 else b"")
        if len(self._prefixes) >= _PREFIXES_KEPT:
            self._prefixes.clear()
        self._prefixes[topic] = prefix
        return prefix

    async def receive(self) -> Message:
        """The next message received."""
        return await self._queue.get()

    async def messages(self) -> AsyncIterator[Message]:
        """Every message received, in order, forever."""
        while True:
            yield await self._queue.get()

    def _fast_publish(self, command: int, packet: bytes) -> None:
        """gmqtt's PUBLISH handler, shortened for a QoS 0 message with a ``deliver`` callback:
        the topic and payload are cut out of the packet and delivered, the properties skipped
        unread (a server under a flood spends most of its time here per message)."""
        deliver = self.deliver
        if deliver is None or command & 0x06 or self.tap is not None or len(packet) < 3:
            self._gmqtt_publish(command, packet)
            return
        size = (packet[0] << 8) | packet[1]
        offset = 2 + size
        if self.mqtt5:
            length, shift = 0, 0
            while offset < len(packet) and shift <= 21:
                byte = packet[offset]
                offset += 1
                length |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            offset += length
        if not size or offset > len(packet):  # a topic alias, or not MQTT: the long way
            self._gmqtt_publish(command, packet)
            return
        try:
            topic = packet[2 : 2 + size].decode()
        except UnicodeDecodeError:
            return
        deliver(Message(topic, bytes(packet[offset:]), bool(command & 0x01)))

    def _on_message(
        self, client: Any, topic: str, payload: bytes, qos: int, properties: Any
    ) -> int:
        try:
            retain = bool(properties.get("retain")) if isinstance(properties, dict) else False
            message = Message(topic, bytes(payload), retain)
            if self.tap is not None:
                self.tap(message)
            if self.deliver is not None:
                self.deliver(message)
                return 0
            self._queue.put_nowait(message)
        except asyncio.QueueFull:
            self.dropped += 1
        return 0

    def _on_connect(self, client: Any, flags: Any, rc: Any, properties: Any) -> None:
        self.connections += 1
        if self.mqtt5 and client._connection_state.protocol_version != MQTTv50:
            self.mqtt5 = False  # the broker refused MQTT 5 and gmqtt fell back to 3.1.1 (NATS)
        protocol: Any = getattr(getattr(client, "_connection", None), "_protocol", None)
        socket = getattr(protocol, "_transport", None)
        if socket is not None and not isinstance(socket, _Coalescing):
            # gmqtt has no hook for this
            protocol._transport = _Coalescing(socket, self.write_spacing)
        self._prefixes.clear()  # MQTT 5 or not: it may have changed
        self._socket = protocol._transport if protocol is not None else None
        self._deferred.clear()  # what they asked for is in ``_subscriptions``, sent below
        if self._subscriptions:
            by_qos: dict[int, list[str]] = {}
            for topic, qos in self._subscriptions.items():
                by_qos.setdefault(qos, []).append(topic)
            for qos, topics in by_qos.items():
                self._send(True, topics, qos)
        self.lost.clear()
        self.connected.set()

    def _on_disconnect(self, client: Any, packet: Any, exc: Any = None) -> None:
        self._socket = None
        self.connected.clear()
        self.lost.set()
