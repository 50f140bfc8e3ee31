"""The ladder's event log: what happened, in order, as msgpack rows of the table store.

A ladder keeps one stream in the same event store as the tables, under the id ``ladder:NAME``
(table ids are hexadecimal and never hold a colon, so the two cannot meet). Appends carry no
table summary, so ``ramino tables`` does not list the stream. Everything the ladder knows is a
fold of this stream (``server.ladder.state``): entrants, pools, scheduled matches, results and
the ratings after each result.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

__all__ = [
    "LADDER_RECORD_VERSION",
    "STREAM_PREFIX",
    "Configured",
    "EntrantAdded",
    "EntrantRemoved",
    "EntrantSuspended",
    "LadderEvent",
    "MatchCancelled",
    "MatchResult",
    "MatchScheduled",
    "Refitted",
    "decode_event",
    "encode_event",
    "stream_id",
]

STREAM_PREFIX = "ladder:"
LADDER_RECORD_VERSION = 1


def stream_id(name: str) -> str:
    """The store stream of the ladder called ``name``."""
    return f"{STREAM_PREFIX}{name}"


class Configured(msgspec.Struct, frozen=True, tag="configured"):
    """The settings a run started with (written when they change)."""

    pools: tuple[str, ...]
    seed: str
    pair_cap_per_day: int
    min_matches: int
    exploration: float
    concurrency: int
    at: float


class EntrantAdded(msgspec.Struct, frozen=True, tag="entrant_added"):
    """An entrant joins (or joins again): ``kind`` is ``builtin`` (``spec`` names its policy
    configuration) or ``external`` (an MQTT account; ``spec`` lists the pools it plays,
    comma-separated)."""

    name: str
    kind: str
    spec: str
    at: float


class EntrantRemoved(msgspec.Struct, frozen=True, tag="entrant_removed"):
    """An entrant leaves: it is no longer paired; its history and ratings stay."""

    name: str
    reason: str
    at: float


class EntrantSuspended(msgspec.Struct, frozen=True, tag="entrant_suspended"):
    """An external entrant failed too many matches in a row: it is not paired, and may not
    join again, before ``until``."""

    name: str
    reason: str
    failures: int
    until: float
    at: float


class MatchScheduled(msgspec.Struct, frozen=True, tag="match_scheduled"):
    """A duplicate match is about to be played: ``entrants[i]`` is entrant index ``i`` of the
    seat rotations; ``seed`` fixes every deal of the match."""

    match_id: str
    pool: str
    entrants: tuple[str, ...]
    seed: str
    at: float


class MatchResult(msgspec.Struct, frozen=True, tag="match_result"):
    """A match is over: per entrant (in ``MatchScheduled.entrants`` order) its win share and
    points summed over the rotations, its rank (1 is best, ties share), and its rating after
    this result (the incremental update the refit must reproduce)."""

    match_id: str
    pool: str
    entrants: tuple[str, ...]
    games: int
    wins: tuple[float, ...]
    points: tuple[float, ...]
    ranks: tuple[int, ...]
    mu: tuple[float, ...]
    sigma: tuple[float, ...]
    seconds: float
    at: float
    forfeits: tuple[bool, ...] = ()
    """Per entrant: whether it forfeited a seat in any game of the match (missed its move
    timer too often, or was away); a forfeiting entrant ranks below every other. Empty in
    logs written before external entrants."""


class MatchCancelled(msgspec.Struct, frozen=True, tag="match_cancelled"):
    """A scheduled match that will not be played (an entrant was removed meanwhile)."""

    match_id: str
    reason: str
    at: float


class Refitted(msgspec.Struct, frozen=True, tag="refitted"):
    """A batch refit of every rating from the full history: how far the incremental ratings
    were from it (0 when the fold is sound)."""

    results: int
    max_difference: float
    at: float


LadderEvent: TypeAlias = (
    Configured
    | EntrantAdded
    | EntrantRemoved
    | EntrantSuspended
    | MatchScheduled
    | MatchResult
    | MatchCancelled
    | Refitted
)


class _Row(msgspec.Struct, frozen=True):
    v: int
    event: LadderEvent


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Row)


def encode_event(event: LadderEvent) -> bytes:
    """The payload stored for ``event``."""
    return _encoder.encode(_Row(LADDER_RECORD_VERSION, event))


def decode_event(payload: bytes) -> LadderEvent:
    """The event of a stored payload.

    Raises:
        msgspec.DecodeError: not a ladder row of a known version.
    """
    row = _decoder.decode(payload)
    if row.v != LADDER_RECORD_VERSION:
        raise msgspec.DecodeError(f"unknown ladder record version {row.v!r}")
    return row.event


def event_json(event: LadderEvent) -> dict[str, Any]:
    """A JSON-ready form of ``event`` with its ``type``."""
    data: dict[str, Any] = msgspec.to_builtins(event)
    return data
