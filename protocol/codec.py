"""msgpack encoding and decoding of protocol messages, with decode limits.

The size limit is checked before decoding; msgspec then validates types, string and array
lengths (``Meta`` constraints in ``protocol.messages``) and, since every field is typed, the
nesting depth is bounded by the schema.
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
            try:
                _untyped.decode(payload)
            except msgspec.DecodeError as undecodable:
                raise MalformedMessage(f"not msgpack: {undecodable}") from None
            raise MalformedMessage(f"invalid message: {error}", "protocol/invalid") from None
        except msgspec.DecodeError as error:
            raise MalformedMessage(f"not msgpack: {error}") from None


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
