"""What one client may push through the embedded broker, enforced as its packets are read.

Theory of operation. amqtt reads a connection through a reader adapter; :class:`GuardedReader`
stands in for its ``StreamReaderAdapter`` and frames the MQTT packets itself before amqtt sees
them, so these limits hold before amqtt decodes a packet, starts a task for it or queues it:

- **Packet size.** The fixed header gives a packet's length: over ``max_packet`` the connection
  is closed without reading the rest (as Mosquitto's ``max_packet_size`` does; the client's will
  is published).
- **Framing.** The first packet must be a CONNECT, and no other; every later one must be a type
  a client sends, with the flags MQTT 3.1.1 fixes for it, and a length of at most four bytes.
  Anything else (garbage on the socket) closes the connection at its first header, where amqtt
  would skip it and read on.
- **Rate.** Each username has a token bucket (``rate`` tokens a second, at most ``burst``)
  shared by all its connections: a packet costs one token and one more per KiB (the
  acknowledgements PUBACK, PUBREC, PUBREL and PUBCOMP are free: they answer what the broker
  sent), and each message delivered to the user's inbox gives ``inbox_credit`` back
  (:meth:`PublishGuard.credit`), so a client answering the server's updates is never short.
  A PUBLISH that finds the bucket short is dropped before amqtt sees it and counted
  (acknowledged at QoS 1, as Mosquitto acknowledges a message its ACL refuses, so the client's
  window does not fill); a SUBSCRIBE, UNSUBSCRIBE or PINGREQ waits for its tokens instead.
  Either way the connection is not read meanwhile: what a flooder sends beyond its rate waits
  in its own socket buffer (TCP flow control), never in this process, and costs no CPU here.
  The server's account has no limit.
- **Reconnections.** A connection closed for an oversized packet is charged the packet's
  declared size (a token per KiB), one closed for a malformed packet ``max_packet``'s, even
  past empty (down to ``-burst``); and a CONNECT of a username whose bucket holds less than a
  token waits, unread, until it does (within the connect timeout). So a client closed for
  breaking a limit cannot come straight back: setting up a connection is what costs the broker
  most, and a flood of them waits for the bucket. A CONNECT itself spends nothing, so that
  nobody can empty another user's bucket with CONNECTs in that user's name.
- **Fairness.** A reader that finds many packets already buffered yields to the event loop
  every ``YIELD_EVERY`` packets, so one connection's burst cannot hold the loop.

Buckets that have filled up again are forgotten (:meth:`PublishGuard.active` counts the others),
so a flood leaves nothing behind. Drops and closed connections are logged at most once per
``LOG_SECONDS``, with their counts.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from amqtt.adapters import ReaderAdapter

__all__ = ["GuardedReader", "PublishGuard", "PublishLimits"]

_log = logging.getLogger(__name__)

YIELD_EVERY = 64
"""Packets a reader takes from its buffer before it lets the other tasks run."""
LOG_SECONDS = 10.0
"""At most one log line about dropped publishes per this many seconds."""
_CONNECT, _PUBLISH = 1, 3
_ACKS = frozenset({4, 5, 6, 7})
"""PUBACK, PUBREC, PUBREL, PUBCOMP: answers to what the broker sent, never limited."""
_CLIENT_FLAGS = {4: 0, 5: 0, 6: 2, 7: 0, 8: 2, 10: 2, 12: 0, 14: 0}
"""The packet types a client sends after CONNECT (besides PUBLISH), with their fixed flags."""
_PUBACK = b"\x40\x02"


@dataclass(frozen=True, slots=True)
class PublishLimits:
    """Per-client limits of the embedded broker (docs/operations.md, "Hardening")."""

    rate: float = 100.0
    """Tokens a second per username: a packet costs one, and one more per KiB of it."""
    burst: int = 200
    """Tokens a username may spend at once."""
    inbox_credit: float = 1.0
    """Tokens given back for each message delivered to the user's inbox (the server's
    replies and updates): a client answering what the server sends is never short, however
    fast it plays, as with the server's own rate limit."""
    max_packet: int = 32 * 1024
    """Largest packet read, in bytes after the fixed header: twice the gateway's payload limit
    (``Limits.max_payload``), so a payload a little over that limit still gets its coded
    refusal (``limit/payload``) from the server; a larger one closes the connection."""
    max_queued: int = 10_000
    """Most messages waiting to be broadcast, and most deliveries waiting to be written to one
    subscriber; beyond, messages are dropped (Mosquitto's ``max_queued_messages`` in deploy/)."""


class PublishGuard:
    """The token buckets and counters shared by every :class:`GuardedReader` of one broker."""

    def __init__(
        self,
        limits: PublishLimits | None = None,
        exempt: Iterable[str] = (),
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits or PublishLimits()
        self.exempt = frozenset(exempt)
        self.now = now
        self._buckets: dict[str, tuple[float, float]] = {}
        self._pruned = now()
        self._logged = now() - LOG_SECONDS
        self._unlogged_drops = 0
        self._unlogged_oversized = 0
        self._unlogged_overflows = 0
        self.dropped = 0
        """PUBLISH packets dropped because their sender was over its rate."""
        self.oversized = 0
        """Connections closed for a packet over ``max_packet``."""
        self.malformed = 0
        """Connections closed for a packet that is not what an MQTT 3.1.1 client sends."""
        self.overflowed = 0
        """Messages dropped because a queue of the broker was full (``max_queued``)."""

    def reader(self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter) -> GuardedReader:
        """The reader adapter amqtt gets for one connection."""
        return GuardedReader(self, stream, writer)

    def take(self, user: str, cost: float) -> bool:
        """Spend ``cost`` tokens of ``user``'s bucket; ``False`` (nothing spent) when short."""
        if user in self.exempt:
            return True
        now = self.now()
        tokens = self._level(user, now)
        allowed = tokens >= cost
        self._buckets[user] = (tokens - cost if allowed else tokens, now)
        if now - self._pruned > 1.0:
            self._prune(now)
        return allowed

    def charge(self, user: str, cost: float) -> None:
        """Spend ``cost`` tokens of ``user``'s bucket even when it is short (down to
        ``-burst``): what a connection closed for breaking a limit costs its user."""
        if user in self.exempt:
            return
        now = self.now()
        self._buckets[user] = (max(-float(self.limits.burst), self._level(user, now) - cost), now)

    def shortfall(self, user: str, cost: float) -> float:
        """The tokens ``user`` lacks to spend ``cost`` now (0 when it may)."""
        if user in self.exempt:
            return 0.0
        return max(0.0, cost - self._level(user, self.now()))

    def _level(self, user: str, now: float) -> float:
        """The tokens in ``user``'s bucket at ``now`` (a bucket not kept is full)."""
        burst = float(self.limits.burst)
        tokens, then = self._buckets.get(user, (burst, now))
        return min(burst, tokens + (now - then) * self.limits.rate)

    def credit(self, user: str) -> None:
        """Give ``user`` back ``inbox_credit`` tokens (a message was delivered to its inbox)."""
        level = self._buckets.get(user)
        if level is not None:
            burst = float(self.limits.burst)
            self._buckets[user] = (min(burst, level[0] + self.limits.inbox_credit), level[1])

    def active(self) -> int:
        """Buckets not yet full again (the clients that spent tokens lately)."""
        self._prune(self.now())
        return len(self._buckets)

    def _prune(self, now: float) -> None:
        self._pruned = now
        full = [user for user in self._buckets if self._level(user, now) >= self.limits.burst]
        for user in full:
            del self._buckets[user]

    def note_drop(self, user: str) -> None:
        """Count a dropped PUBLISH; log the count now and then."""
        self.dropped += 1
        self._unlogged_drops += 1
        if self._log_due():
            _log.warning(
                "embedded broker: dropped %d publishes of clients over their rate (lately %s)",
                self._unlogged_drops,
                user,
            )
            self._unlogged_drops = 0

    def note_oversized(self, user: str, length: int) -> None:
        """Count a connection closed for an oversized packet; log the count now and then."""
        self.oversized += 1
        self._unlogged_oversized += 1
        if self._log_due():
            _log.warning(
                "embedded broker: closed %d connections for packets over %d bytes (lately %s's,"
                " %d bytes)",
                self._unlogged_oversized,
                self.limits.max_packet,
                user,
                length,
            )
            self._unlogged_oversized = 0

    def note_overflow(self, where: str) -> None:
        """Count a message dropped because a queue was full; log the count now and then."""
        self.overflowed += 1
        self._unlogged_overflows += 1
        if self._log_due():
            _log.warning(
                "embedded broker: dropped %d messages for full queues (lately %s)",
                self._unlogged_overflows,
                where,
            )
            self._unlogged_overflows = 0

    def _log_due(self) -> bool:
        now = self.now()
        if now - self._logged < LOG_SECONDS:
            return False
        self._logged = now
        return True


class GuardedReader(ReaderAdapter):  # type: ignore[misc]
    """amqtt's reader of one connection, one whole packet at a time; see the module docstring."""

    def __init__(
        self, guard: PublishGuard, stream: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._guard = guard
        self._stream = stream
        self._writer = writer
        self._buffer = b""
        self._offset = 0
        self._packets = 0
        self.user: str | None = None
        """The username of the connection's CONNECT, once read."""

    async def read(self, n: int = -1) -> bytes:
        """The next ``n`` bytes of the packets that passed (all of the current one for -1).

        Raises:
            asyncio.IncompleteReadError: the connection ended, or was closed by a limit (amqtt
                takes it as the end of the connection).
        """
        while self._offset >= len(self._buffer) or (n > 0 and len(self._buffer) - self._offset < n):
            packet = await self._next_packet()
            self._buffer = self._buffer[self._offset :] + packet
            self._offset = 0
        end = len(self._buffer) if n < 0 else self._offset + n
        data = self._buffer[self._offset : end]
        self._offset = end
        return data

    def feed_eof(self) -> None:
        self._stream.feed_eof()

    async def _next_packet(self) -> bytes:
        guard = self._guard
        while True:
            self._packets += 1
            if self._packets % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            first = await self._stream.readexactly(1)
            header = bytearray(first)
            length = 0
            for position in range(4):
                byte = (await self._stream.readexactly(1))[0]
                header.append(byte)
                length += (byte & 0x7F) << (7 * position)
                if not byte & 0x80:
                    break
            else:
                self._malformed()
                raise asyncio.IncompleteReadError(bytes(header), None)
            if length > guard.limits.max_packet:
                guard.note_oversized(self.user or "a client", length)
                if self.user is not None:
                    guard.charge(self.user, 1 + length // 1024)
                raise asyncio.IncompleteReadError(bytes(header), length)
            kind, flags = first[0] >> 4, first[0] & 0x0F
            if not _well_formed(kind, flags, self._packets == 1):
                self._malformed()
                raise asyncio.IncompleteReadError(bytes(header), None)
            body = await self._stream.readexactly(length) if length else b""
            if kind == _CONNECT:
                self.user = _connect_username(body)
                if self.user is not None:
                    await self._wait_out_debt(self.user)
            elif self.user is not None and kind not in _ACKS:
                cost = 1 + length // 1024
                while not guard.take(self.user, cost):
                    # Over the rate: a PUBLISH is dropped, anything else waits; either way
                    # this connection is not read meanwhile.
                    await asyncio.sleep(cost / guard.limits.rate)
                    if kind == _PUBLISH:
                        guard.note_drop(self.user)
                        self._acknowledge(first[0], body)
                        break
                else:
                    return bytes(header) + body
                continue
            return bytes(header) + body

    def _malformed(self) -> None:
        guard = self._guard
        guard.malformed += 1
        if self.user is not None:
            guard.charge(self.user, 1 + guard.limits.max_packet // 1024)

    async def _wait_out_debt(self, user: str) -> None:
        """Wait (the connection unread) while ``user``'s bucket holds less than a token."""
        guard = self._guard
        while True:
            if not guard.shortfall(user, 1):
                return
            # A token bucket refills with time, not on an event: look again when it should
            # have, or in a quarter of a second (an inbox credit may come first).
            await asyncio.sleep(min(0.25, max(1.0, guard.shortfall(user, 1)) / guard.limits.rate))

    def _acknowledge(self, first: int, body: bytes) -> None:
        """PUBACK a dropped QoS 1 PUBLISH (QoS 0 needs none; QoS 2 is left unanswered)."""
        if (first >> 1) & 0x03 != 1 or len(body) < 2:
            return
        topic_length = struct.unpack_from("!H", body)[0]
        packet_id = body[2 + topic_length : 4 + topic_length]
        if len(packet_id) == 2 and not self._writer.is_closing():
            self._writer.write(_PUBACK + packet_id)


def _well_formed(kind: int, flags: int, first: bool) -> bool:
    """Whether a fixed header may come from an MQTT 3.1.1 client: CONNECT first and only
    then, a packet type a client sends, and the flags the specification fixes for it."""
    if first or kind == _CONNECT:
        return first and kind == _CONNECT and flags == 0
    if kind == _PUBLISH:
        return (flags >> 1) & 0x03 != 0x03
    return _CLIENT_FLAGS.get(kind) == flags


def _connect_username(body: bytes) -> str | None:
    """The username of a CONNECT packet's body (``None`` when it has none or is cut short)."""
    try:
        offset = 2 + struct.unpack_from("!H", body)[0]  # protocol name
        flags = body[offset + 1]
        offset += 4  # level, flags, keep-alive
        fields = 1 + (2 if flags & 0x04 else 0)  # client id, will topic and message
        for _ in range(fields):
            offset += 2 + struct.unpack_from("!H", body, offset)[0]
        if not flags & 0x80:
            return None
        size = struct.unpack_from("!H", body, offset)[0]
        name = body[offset + 2 : offset + 2 + size]
        return name.decode() if len(name) == size else None
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
