"""Inbox and stream messages with their events encoded once: the bytes of protocol v1.

Theory of operation. A change of a table is shown to each seat and to spectators as a list of
``Logged`` events (``server.tables.replay.project``). The gateway sends each seat's list in
that seat's ``Update``, the spectators' list on the table's events stream, and the sender's
list again in the ``Reply`` to the command that made the change (and in the replies to its
retries while the gateway still has it). Encoding each list once, keeping the bytes and
splicing them into every message that carries them saves an encoding a message, and keeps no
event objects alive between a change and a retry: the gateway holds bytes, which the garbage
collector never has to visit.

The structs here have the fields of ``protocol.messages.Update``, ``Reply`` and
``TableEvents`` in the same order with the same tags, ``events`` being the msgpack array
already encoded (``msgspec.Raw``): they encode to the same bytes as those messages would
(``tests/net/test_wire.py`` holds them equal). They are for encoding only; clients, and the
server's own tests, decode with ``protocol.messages``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import msgspec

from protocol.game import Command as GameCommand
from protocol.game import View
from protocol.messages import Logged, Reply, Result

__all__ = [
    "EMPTY_EVENTS",
    "AnyReply",
    "EventsOut",
    "ReplyOut",
    "UpdateOut",
    "decode_events",
    "encode_events",
]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(tuple[Logged, ...])

EMPTY_EVENTS = msgspec.Raw(b"\x90")
"""An empty msgpack array."""


def encode_events(events: Sequence[Logged]) -> msgspec.Raw:
    """``events`` as the msgpack array a message carries."""
    return msgspec.Raw(_encoder.encode(events))


def decode_events(raw: msgspec.Raw) -> tuple[Logged, ...]:
    """The events of an encoded array (``encode_events``)."""
    return _decoder.decode(raw)


class UpdateOut(msgspec.Struct, frozen=True, gc=False, tag="update"):
    """``protocol.messages.Update`` with its events encoded."""

    table: str
    seq: int
    seat: int
    events: msgspec.Raw
    view: View | None
    legal: tuple[GameCommand, ...]
    deadline: float
    status: str


class ReplyOut(msgspec.Struct, frozen=True, gc=False, tag="reply"):
    """``protocol.messages.Reply`` with its events encoded."""

    id: str
    ok: bool
    code: str = ""
    message: str = ""
    table: str = ""
    seq: int = 0
    events: msgspec.Raw = EMPTY_EVENTS
    result: Result | None = None


class EventsOut(msgspec.Struct, frozen=True, gc=False, tag="events"):
    """``protocol.messages.TableEvents`` with its events encoded."""

    table: str
    events: msgspec.Raw


AnyReply: TypeAlias = Reply | ReplyOut
"""A reply as the gateway publishes it: either struct encodes to a protocol ``Reply``."""
