"""msgpack encoding and decoding of protocol messages, with decode limits.

The size limit is checked before decoding; msgspec then validates types, string and array
lengths (``Meta`` constraints in ``protocol.messages``) and, since every field is typed, the
nesting depth is bounded by the schema. A payload nested deeper than msgspec recurses (it raises
``RecursionError``, even while skipping an unknown key) is ``protocol/invalid``, or
``protocol/malformed`` if it is not msgpack: a reader without recursion tells which, and
``request_id`` reads the id beside such nesting for the error reply.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from protocol.errors import CodedError
from protocol.messages import (
    ChatLine,
    Inbox,
    Presence,
    Reply,
    Request,
    ServerStatus,
    TableEvents,
    TableListing,
    TableSnapshot,
    Update,
)

__all__ = [
    "MAX_PAYLOAD",
    "MalformedMessage",
    "decode_chat",
    "decode_events",
    "decode_inbox",
    "decode_listing",
    "decode_presence",
    "decode_request",
    "decode_snapshot",
    "decode_status",
    "encode",
    "request_id",
]

MAX_PAYLOAD = 16 * 1024
"""Largest client payload the server decodes, in bytes (a bigger one: ``limit/payload``)."""

T = TypeVar("T")


class MalformedMessage(CodedError):
    """A payload that is not a valid message: ``protocol/malformed`` or ``limit/payload``."""

    default_code = "protocol/malformed"


_encoder = msgspec.msgpack.Encoder()


def encode(message: Any) -> bytes:
    """The msgpack bytes of a message."""
    return _encoder.encode(message)


_untyped: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder()


class _Decoder:
    def __init__(self, kind: type[T] | Any, limit: int | None) -> None:
        self._decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(kind)
        self._limit = limit

    def __call__(self, payload: bytes) -> Any:
        if self._limit is not None and len(payload) > self._limit:
            raise MalformedMessage(
                f"payload of {len(payload)} bytes is over the limit of {self._limit}",
                "limit/payload",
            )
        try:
            return self._decoder.decode(payload)
        except msgspec.ValidationError as error:
            # The typed decoder stops at the first wrong type, before it has read the whole
            # payload: bytes that are not msgpack at all must still be called malformed.
            _require_msgpack(payload)
            raise MalformedMessage(f"invalid message: {error}", "protocol/invalid") from None
        except msgspec.DecodeError as error:
            raise MalformedMessage(f"not msgpack: {error}") from None
        except RecursionError:
            # Arrays or maps nested deeper than the decoder recurses: no message is that deep.
            _require_msgpack(payload)
            raise MalformedMessage(
                "invalid message: nested too deeply", "protocol/invalid"
            ) from None


def _require_msgpack(payload: bytes) -> None:
    """Raise ``protocol/malformed`` unless ``payload`` is one whole msgpack object."""
    try:
        _untyped.decode(payload)
    except msgspec.DecodeError as undecodable:
        raise MalformedMessage(f"not msgpack: {undecodable}") from None
    except RecursionError:
        problem = _msgpack_problem(payload)
        if problem:
            raise MalformedMessage(f"not msgpack: {problem}") from None


def request_id(payload: bytes) -> str | None:
    """The ``id`` string of a payload that is one msgpack map, read without decoding the rest
    (however deeply it nests); ``None`` when there is none or the payload is not msgpack.

    For the error reply to a request that did not decode, when the decoder gave up on it.
    """
    if _msgpack_problem(payload):
        return None
    pos = 0
    head = payload[0]
    if 0x80 <= head <= 0x8F:
        entries, pos = head & 0x0F, 1
    elif head in (0xDE, 0xDF):
        width = 2 if head == 0xDE else 4
        entries, pos = int.from_bytes(payload[1 : 1 + width], "big"), 1 + width
    else:
        return None
    found = None
    for _ in range(entries):
        key, end = _read_str(payload, pos)
        pos = _skip(payload, pos) if key is None else end
        value, end = _read_str(payload, pos)
        if key == "id" and value is not None:
            found = value
        pos = _skip(payload, pos) if value is None else end
    return found


class _NotMsgpack(Exception):
    """Raised by the readers below at the first byte that breaks the msgpack format."""


def _msgpack_problem(payload: bytes) -> str:
    """Why ``payload`` is not one whole msgpack object (``""``: it is), found without
    recursion, so that any depth of nesting is read."""
    try:
        end = _skip(payload, 0)
    except _NotMsgpack as error:
        return str(error)
    return "" if end == len(payload) else f"{len(payload) - end} bytes after the object"


# Sizes in the msgpack format: (bytes of the length field, fixed extra bytes) of the types whose
# size is read from the data, and the fixed size of the rest after their first byte.
_SIZED = {
    0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0),  # bin
    0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1),  # ext
    0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0),  # str
}  # fmt: skip
_FIXED = {
    0xC0: 0, 0xC2: 0, 0xC3: 0,  # nil, false, true
    0xCA: 4, 0xCB: 8,  # float
    0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8,  # int
    0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,  # fixext
}  # fmt: skip
_CONTAINERS = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}
"""array16/32 and map16/32: bytes of the count, objects per counted entry."""


def _skip(payload: bytes, pos: int) -> int:
    """The position after the msgpack object at ``pos`` (one loop, no recursion: the objects
    still to read are counted, not stacked)."""
    size = len(payload)
    pending = 1
    while pending:
        pending -= 1
        if pos >= size:
            raise _NotMsgpack("truncated")
        head = payload[pos]
        pos += 1
        if head <= 0x7F or head >= 0xE0:
            continue
        if head <= 0x8F:
            pending += 2 * (head & 0x0F)
        elif head <= 0x9F:
            pending += head & 0x0F
        elif head <= 0xBF:
            pos = _text_end(payload, pos, head & 0x1F)
        elif head in _FIXED:
            pos += _FIXED[head]
        elif head in _SIZED:
            width, extra = _SIZED[head]
            length = _length(payload, pos, width)
            pos += width
            if 0xD9 <= head <= 0xDB:
                pos = _text_end(payload, pos, length)
            else:
                pos += extra + length
        elif head in _CONTAINERS:
            width, per_entry = _CONTAINERS[head]
            pending += per_entry * _length(payload, pos, width)
            pos += width
        else:
            raise _NotMsgpack(f"byte 0x{head:02x} at {pos - 1} starts no object")
    if pos > size:
        raise _NotMsgpack("truncated")
    return pos


def _length(payload: bytes, pos: int, width: int) -> int:
    if pos + width > len(payload):
        raise _NotMsgpack("truncated")
    return int.from_bytes(payload[pos : pos + width], "big")


def _text_end(payload: bytes, pos: int, length: int) -> int:
    """The end of a str of ``length`` bytes at ``pos``, which must be UTF-8."""
    end = pos + length
    if end > len(payload):
        raise _NotMsgpack("truncated")
    try:
        payload[pos:end].decode()
    except UnicodeDecodeError:
        raise _NotMsgpack(f"a str at {pos} is not UTF-8") from None
    return end


def _read_str(payload: bytes, pos: int) -> tuple[str | None, int]:
    """The str at ``pos`` and the position after it; ``None`` if another type is there (the
    payload is known to be msgpack)."""
    head = payload[pos]
    if 0xA0 <= head <= 0xBF:
        start, length = pos + 1, head & 0x1F
    elif 0xD9 <= head <= 0xDB:
        width = 1 << (head - 0xD9)
        start, length = pos + 1 + width, _length(payload, pos + 1, width)
    else:
        return None, pos
    return payload[start : start + length].decode(), start + length


_request = _Decoder(Request, None)
_presence = _Decoder(Presence, 256)
_inbox = _Decoder(Inbox, None)
_events = _Decoder(TableEvents, None)
_snapshot = _Decoder(TableSnapshot, None)
_listing = _Decoder(TableListing, None)
_chat = _Decoder(ChatLine, None)
_status = _Decoder(ServerStatus, None)


def decode_request(payload: bytes, limit: int = MAX_PAYLOAD) -> Request:
    """A client's request of at most ``limit`` bytes.

    Raises:
        MalformedMessage: too big (``limit/payload``), not msgpack (``protocol/malformed``) or
            not a valid request (``protocol/invalid``).
    """
    if len(payload) > limit:
        raise MalformedMessage(
            f"payload of {len(payload)} bytes is over the limit of {limit}", "limit/payload"
        )
    result: Request = _request(payload)
    return result


def decode_presence(payload: bytes) -> Presence:
    """A presence message (raises ``MalformedMessage``)."""
    result: Presence = _presence(payload)
    return result


def decode_inbox(payload: bytes) -> Reply | Update:
    """A message of a client's inbox (raises ``MalformedMessage``)."""
    result: Reply | Update = _inbox(payload)
    return result


def decode_events(payload: bytes) -> TableEvents:
    """A public event stream message (raises ``MalformedMessage``)."""
    result: TableEvents = _events(payload)
    return result


def decode_snapshot(payload: bytes) -> TableSnapshot:
    """A retained table snapshot (raises ``MalformedMessage``)."""
    result: TableSnapshot = _snapshot(payload)
    return result


def decode_listing(payload: bytes) -> TableListing:
    """A retained lobby listing (raises ``MalformedMessage``)."""
    result: TableListing = _listing(payload)
    return result


def decode_chat(payload: bytes) -> ChatLine:
    """A chat line (raises ``MalformedMessage``)."""
    result: ChatLine = _chat(payload)
    return result


def decode_status(payload: bytes) -> ServerStatus:
    """The retained server status (raises ``MalformedMessage``)."""
    result: ServerStatus = _status(payload)
    return result
