"""What a table's log holds: table events, the engine's events, and their versioned encoding.

Every row's payload is a msgpack ``Record``: a schema version, the game number the event
belongs to (0 for events of the table itself) and the event. Table events cover a table's
life outside the rules (creation, seats, the start of a game, a rematch, the fairness
commitment and reveal); engine events are the ``server.engine`` events unchanged.

Old logs stay readable: ``decode_record`` upgrades each older version to the current one
(``_UPCASTERS``), so the rest of the server only ever sees current records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeAlias

import msgspec

from protocol.game import (
    DeckCommitted,
    DeckRevealed,
    GameStarted,
    PlayerReady,
    PlayerSat,
    PlayerStood,
    SeatBack,
    TableClosed,
    TableCreated,
    TableEvent,
    TimedOut,
)
from protocol.game import Event as EngineEvent

__all__ = [
    "RECORD_VERSION",
    "DeckCommitted",
    "DeckRevealed",
    "GameStarted",
    "PlayerReady",
    "PlayerSat",
    "PlayerStood",
    "Record",
    "RecordEvent",
    "SeatBack",
    "TableClosed",
    "TableCreated",
    "TableEvent",
    "TimedOut",
    "deck_commitment",
    "decode_record",
    "encode_record",
]

RECORD_VERSION = 1


RecordEvent: TypeAlias = TableEvent | EngineEvent


class Record(msgspec.Struct, frozen=True):
    """One row of a table log: schema version, game number (0: table-level) and event."""

    v: int
    game: int
    event: RecordEvent


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Record)
_raw_decoder = msgspec.msgpack.Decoder(dict[str, Any])

_UPCASTERS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}
"""Version n -> a function turning a raw version-n record into a raw version-n+1 record."""


def encode_record(event: RecordEvent, game: int = 0) -> bytes:
    """The payload to store for ``event`` of game ``game``."""
    return _encoder.encode(Record(RECORD_VERSION, game, event))


def decode_record(payload: bytes) -> Record:
    """Decode a stored payload, upgrading an older version to the current one.

    Raises:
        msgspec.DecodeError: the payload is not a record of a known version (a
            ``msgspec.ValidationError``, its subclass, when it parses but does not fit).
    """
    try:
        record = _decoder.decode(payload)
    except msgspec.ValidationError:
        record = None
    if record is not None and record.v == RECORD_VERSION:
        return record
    raw = _raw_decoder.decode(payload)
    version = raw.get("v")
    if not isinstance(version, int) or isinstance(version, bool):
        raise msgspec.ValidationError(f"a record needs an integer version, got {version!r}")
    if version >= RECORD_VERSION or any(
        step not in _UPCASTERS for step in range(version, RECORD_VERSION)
    ):
        raise msgspec.DecodeError(f"unknown record version {version!r}")
    while version < RECORD_VERSION:
        raw = _UPCASTERS[version](raw)
        version += 1
        raw["v"] = version
    return msgspec.convert(raw, Record)


def deck_commitment(salt: str, order: tuple[int, ...]) -> str:
    """The published commitment for a deck order: SHA-256 of the salt and the cards."""
    digest = hashlib.sha256()
    digest.update(salt.encode())
    digest.update(b":")
    digest.update(",".join(str(card) for card in order).encode())
    return digest.hexdigest()
