"""The machine-readable contract (AsyncAPI 3.0) and the generated parts of docs/protocol.md.

::

    python -m protocol.asyncapi [--output docs/asyncapi.yaml]   # write the AsyncAPI document
    python -m protocol.asyncapi --check                         # exit 1 if the file is stale
    python -m protocol.asyncapi --examples [--check]            # the examples of docs/protocol.md
    python -m protocol.asyncapi --transcript mqtt://HOST:PORT   # record a game into the doc

The AsyncAPI document describes a client: what it sends (``send``) and what it receives
(``receive``) on each topic of ``protocol.topics``. Payload schemas are the JSON Schemas that
``msgspec.json.schema_components`` makes of the Structs of ``protocol.messages``; they describe
the msgpack maps on the wire (``contentType: application/msgpack``). The YAML is written by the
small emitter below, so no YAML library is needed.

The examples of docs/protocol.md are built from fixed values and encoded by the real encoder
(``protocol.codec.encode``), so regenerating them gives the same text; the sample game
transcript is recorded from a real server by two SDK clients and a spectator.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from protocol import codec, topics
from protocol.client import Client, TableSession
from protocol.game import (
    Claim,
    ClaimAnswered,
    Claimed,
    ClaimWindowClosed,
    ClaimWindowOpened,
    Dealt,
    DeckCommitted,
    DeckRevealed,
    Declined,
    Discard,
    Discarded,
    DrawStock,
    Drew,
    Floated,
    GameEnded,
    GameStarted,
    HandEnded,
    Knock,
    Knocked,
    LaidOff,
    LayOff,
    Meld,
    Melded,
    MeldSpec,
    MeldView,
    Pass,
    PlayerReady,
    PlayerSat,
    PlayerStood,
    SeatBack,
    SeatForfeited,
    StockRebuilt,
    SwapJoker,
    SwappedJoker,
    TableClosed,
    TableCreated,
    TakeDiscard,
    TimedOut,
    TookDiscard,
    UpcardPassed,
    View,
)
from protocol.game import Command as GameCommand
from protocol.messages import (
    PROTOCOL_VERSION,
    AnyEvent,
    ChatLine,
    ChatSay,
    Created,
    CreateTable,
    Hello,
    Join,
    LadderEntry,
    LadderJoin,
    LadderLeave,
    LadderStanding,
    LadderStatus,
    Leave,
    ListTables,
    ListVariants,
    Logged,
    OptionInfo,
    Presence,
    Ready,
    Rematch,
    Reply,
    Request,
    Resync,
    ServerStatus,
    Sit,
    Stand,
    Start,
    Synced,
    TableEvents,
    TableListing,
    Tables,
    TableSnapshot,
    Update,
    VariantInfo,
    Variants,
    Welcome,
)
from protocol.transport import Message, Transport

__all__ = [
    "DECODERS",
    "ROOT",
    "Captured",
    "Example",
    "build_document",
    "examples",
    "format_hex",
    "format_json",
    "main",
    "record_game",
    "render_examples",
    "render_transcript",
    "replace_section",
    "to_yaml",
]

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (docs/ lives there)."""

DEFAULT_OUTPUT = ROOT / "docs" / "asyncapi.yaml"
DEFAULT_DOC = ROOT / "docs" / "protocol.md"

# AsyncAPI ---------------------------------------------------------------------------------------

_MESSAGES: tuple[tuple[str, type[msgspec.Struct], str], ...] = (
    (
        "Request",
        Request,
        "A command with the id the client chose (every client topic but presence).",
    ),
    ("Presence", Presence, "Online on connecting; offline as the MQTT will message."),
    ("Reply", Reply, "The one reply to a Request with the same id."),
    ("Update", Update, "A seated player's private update after each change of his table."),
    ("TableEvents", TableEvents, "New events of a table as a spectator sees them."),
    ("TableSnapshot", TableSnapshot, "The table as a spectator sees it (retained)."),
    ("ChatLine", ChatLine, "One line of table chat."),
    ("TableListing", TableListing, "A table as the lobby shows it (retained; empty removes it)."),
    ("ServerStatus", ServerStatus, "Whether a server is up, and its versions (retained)."),
)

_PARAMETERS = {
    "client": {
        "description": "A client's MQTT username: 1-64 of `A-Z a-z 0-9 _ . -`. On client topics "
        "it must be the publisher's own username (the broker's ACL enforces it).",
        "examples": ["alice"],
    },
    "table": {
        "description": "A table id as the server gave it (`Created.table`, `TableListing.table`): "
        "1-64 of `A-Z a-z 0-9 _ . -`.",
        "examples": ["3f9a1c2b7d4e"],
    },
    "shard": {
        "description": "The client's lobby shard: crc32(username UTF-8) modulo `Welcome.shards` "
        "(`ServerStatus.shards`); 0 when there is one shard. With several workers every lobby "
        "command but `hello` on another shard is refused with `lobby/wrong_shard` (its result: "
        "the `welcome`).",
        "examples": ["0"],
    },
}

# id, address, parameters, messages, summary, (action, qos, retain)
_CHANNELS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...], str, str, int, bool], ...] = (
    (
        "lobbyCommand",
        f"{topics.PREFIX}/lobby/{{shard}}/{{client}}",
        ("shard", "client"),
        ("Request",),
        "Lobby commands: hello, list_variants, create_table, list_tables.",
        "send",
        1,
        False,
    ),
    (
        "tableCommand",
        f"{topics.PREFIX}/table/{{table}}/cmd/{{client}}",
        ("table", "client"),
        ("Request",),
        "Table and game commands for one table (join, sit, ..., draw_stock, discard, ...).",
        "send",
        1,
        False,
    ),
    (
        "presence",
        f"{topics.PREFIX}/presence/{{client}}",
        ("client",),
        ("Presence",),
        "The client's presence: online after each connection, offline as its will message.",
        "send",
        1,
        False,
    ),
    (
        "inbox",
        f"{topics.PREFIX}/inbox/{{client}}",
        ("client",),
        ("Reply", "Update"),
        "The client's private topic: every Reply and the Updates of the tables it sits at.",
        "receive",
        0,
        False,
    ),
    (
        "tableEvents",
        f"{topics.PREFIX}/table/{{table}}/events",
        ("table",),
        ("TableEvents",),
        "A table's public event stream (hidden cards are -1).",
        "receive",
        0,
        False,
    ),
    (
        "tableState",
        f"{topics.PREFIX}/table/{{table}}/state",
        ("table",),
        ("TableSnapshot",),
        "A table's retained public snapshot, for late joiners and spectators.",
        "receive",
        0,
        True,
    ),
    (
        "tableChat",
        f"{topics.PREFIX}/table/{{table}}/chat",
        ("table",),
        ("ChatLine",),
        "A table's chat.",
        "receive",
        0,
        False,
    ),
    (
        "lobbyListing",
        f"{topics.PREFIX}/tables/{{table}}",
        ("table",),
        ("TableListing",),
        "The retained lobby listing of each public table; an empty payload removes it.",
        "receive",
        1,
        True,
    ),
    (
        "serverStatus",
        f"{topics.PREFIX}/server/status",
        (),
        ("ServerStatus",),
        "The retained server status (the server's will sets it offline).",
        "receive",
        1,
        True,
    ),
)

_DESCRIPTION = """\
Ramino is an authoritative rummy server: clients send commands and receive replies, private
updates and public table events as msgpack maps over MQTT 3.1.1. This document describes a
client: `send` operations are what it publishes, `receive` operations what it subscribes to.
docs/protocol.md is the full specification (connecting, sequence numbers, idempotency,
presence, timers, limits, error codes, examples).

Payload schemas are JSON Schema generated from the msgspec Structs of `protocol.messages`; on
the wire every object is a msgpack map with these keys, and each member of a union carries its
`type` tag. Cards are integers `copy << 6 | face` (face 0-51 natural, 52 joker; -1 hidden).
Generated by `python -m protocol.asyncapi`; do not edit by hand."""


def _schema_hook(kind: type) -> dict[str, Any]:
    if kind is object:
        return {"description": "any msgpack value"}
    raise NotImplementedError


def _fix_schema(value: Any) -> Any:
    """msgspec's schemas in AsyncAPI's dialect: a ``discriminator`` is the name of the tag
    property (not OpenAPI's object), and descriptions use Markdown backticks, not RST's."""
    if isinstance(value, dict):
        fixed: dict[str, Any] = {}
        for key, item in value.items():
            if key == "discriminator" and isinstance(item, dict):
                fixed[key] = item["propertyName"]
            elif key in ("description", "title") and isinstance(item, str):
                fixed[key] = item.replace("``", "`")
            else:
                fixed[key] = _fix_schema(item)
        return fixed
    if isinstance(value, list):
        return [_fix_schema(item) for item in value]
    return value


def build_document() -> dict[str, Any]:
    """The AsyncAPI 3.0 document of protocol v1, as JSON-compatible builtins."""
    _, schemas = msgspec.json.schema_components(
        [kind for _, kind, _ in _MESSAGES],
        ref_template="#/components/schemas/{name}",
        schema_hook=_schema_hook,
    )
    by_message: dict[str, list[Example]] = {}
    for example in examples():
        by_message.setdefault(type(example.message).__name__, []).append(example)
    messages: dict[str, Any] = {}
    for name, kind, summary in _MESSAGES:
        message: dict[str, Any] = {
            "name": name,
            "title": name,
            "summary": summary,
            "contentType": "application/msgpack",
            "payload": {"$ref": f"#/components/schemas/{name}"},
        }
        samples = by_message.get(kind.__name__, [])[:3]
        if samples:
            message["examples"] = [
                {"name": _slug(sample.title), "summary": sample.title, "payload": sample.decoded}
                for sample in samples
            ]
        messages[name] = message
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for channel_id, address, parameters, names, summary, action, qos, retain in _CHANNELS:
        channel: dict[str, Any] = {"address": address, "description": summary}
        channel["messages"] = {
            _lower(name): {"$ref": f"#/components/messages/{name}"} for name in names
        }
        if parameters:
            channel["parameters"] = {
                name: {"$ref": f"#/components/parameters/{name}"} for name in parameters
            }
        channels[channel_id] = channel
        verb = "send" if action == "send" else "receive"
        operations[f"{verb}{channel_id[0].upper()}{channel_id[1:]}"] = {
            "action": action,
            "channel": {"$ref": f"#/channels/{channel_id}"},
            "summary": summary,
            "messages": [
                {"$ref": f"#/channels/{channel_id}/messages/{_lower(name)}"} for name in names
            ],
            "bindings": {"mqtt": {"qos": qos, "retain": retain, "bindingVersion": "0.2.0"}},
        }
    document = {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Ramino protocol",
            "version": str(PROTOCOL_VERSION),
            "description": _DESCRIPTION,
            "license": {"name": "MIT"},
        },
        "defaultContentType": "application/msgpack",
        "servers": {
            "local": {
                "host": "127.0.0.1:1883",
                "protocol": "mqtt",
                "protocolVersion": "3.1.1",
                "description": "`ramino serve` with its embedded broker (MQTT 3.1.1). The "
                "username is the client's identity; the will message goes on its presence topic.",
                "security": [{"$ref": "#/components/securitySchemes/userPassword"}],
                "bindings": {
                    "mqtt": {
                        "cleanSession": True,
                        "keepAlive": 30,
                        "lastWill": {
                            "topic": f"{topics.PREFIX}/presence/{{client}}",
                            "qos": 1,
                            "message": "Presence {type: presence, online: false} (msgpack)",
                            "retain": False,
                        },
                        "bindingVersion": "0.2.0",
                    }
                },
            }
        },
        "channels": channels,
        "operations": operations,
        "components": {
            "securitySchemes": {
                "userPassword": {
                    "type": "userPassword",
                    "description": "MQTT username (the client's identity) and password.",
                }
            },
            "parameters": _PARAMETERS,
            "messages": messages,
            "schemas": _fix_schema(schemas),
        },
    }
    # Through JSON and back: tuples (schema defaults) become lists, and nothing else remains.
    result: dict[str, Any] = json.loads(json.dumps(document))
    return result


def _lower(name: str) -> str:
    return name[0].lower() + name[1:]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# YAML -------------------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$.-]*$")
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


def _yaml_key(key: str) -> str:
    if _PLAIN_KEY.match(key) and key.lower() not in _YAML_WORDS:
        return key
    return json.dumps(key)


def _yaml_scalar(value: Any, indent: int) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        lines = value.split("\n")
        literal = (
            len(lines) > 1
            and value == value.strip()
            and all(line == line.rstrip() and line.isprintable() for line in lines)
            and not lines[0].startswith(" ")
        )
        if literal:
            pad = " " * (indent + 2)
            return "|-\n" + "\n".join(pad + line if line else "" for line in lines)
        return json.dumps(value)
    raise TypeError(f"not JSON-compatible: {value!r}")


def _yaml_lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict) and value:
        lines: list[str] = []
        for key, item in value.items():
            head = f"{pad}{_yaml_key(str(key))}:"
            if isinstance(item, dict | list) and item:
                lines.append(head)
                lines.extend(_yaml_lines(item, indent + 2))
            else:
                lines.append(f"{head} {_yaml_block(item, indent)}")
        return lines
    if isinstance(value, list) and value:
        lines = []
        for item in value:
            if isinstance(item, dict | list) and item:
                nested = _yaml_lines(item, indent + 2)
                lines.append(f"{pad}- {nested[0][indent + 2 :]}")
                lines.extend(nested[1:])
            else:
                lines.append(f"{pad}- {_yaml_block(item, indent)}")
        return lines
    return [pad + _yaml_block(value, indent)]


def _yaml_block(value: Any, indent: int) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _yaml_scalar(value, indent)


def to_yaml(value: Any) -> str:
    """Block-style YAML of JSON-compatible ``value``: strings double-quoted as in JSON (or as
    ``|-`` literal blocks when multi-line), keys plain when that is unambiguous.

    >>> print(to_yaml({"a": [1, {"b": None}], "on": "x"}), end="")
    a:
      - 1
      - b: null
    "on": "x"
    """
    return "\n".join(_yaml_lines(value, 0)) + "\n"


# Examples ---------------------------------------------------------------------------------------

DECODERS: dict[str, Callable[[bytes], Any]] = {
    "request": codec.decode_request,
    "presence": codec.decode_presence,
    "inbox": codec.decode_inbox,
    "events": codec.decode_events,
    "snapshot": codec.decode_snapshot,
    "listing": codec.decode_listing,
    "chat": codec.decode_chat,
    "status": codec.decode_status,
}
"""The protocol's decoder for each kind of topic, by the name the examples use."""


@dataclass(frozen=True, slots=True)
class Example:
    """One message of the examples: where it goes, which decoder reads it, and why."""

    title: str
    topic: str
    decoder: str
    message: msgspec.Struct
    note: str = ""

    @property
    def payload(self) -> bytes:
        """The message's msgpack bytes, from the real encoder."""
        return codec.encode(self.message)

    @property
    def decoded(self) -> Any:
        """What any msgpack library decodes the payload to (maps, arrays, ints, ...)."""
        return msgspec.msgpack.decode(self.payload)


_TABLE = "3f9a1c2b7d4e"
_ALICE_LOBBY = topics.lobby_command("alice")
_ALICE_CMD = topics.table_command(_TABLE, "alice")
_BOB_CMD = topics.table_command(_TABLE, "bob")
_ALICE_INBOX = topics.inbox("alice")
_BOB_INBOX = topics.inbox("bob")
_EVENTS = topics.table_events(_TABLE)
_NOW = 1767225600.0

# A real deal of Knock Rummy (2 players, dealer seat 1): seat 0 gets the cards at even indices,
# seat 1 those at odd ones, index 20 is the upcard (KC = 12) and the rest is the stock.
_ALICE_HAND = (21, 28, 33, 0, 50, 46, 8, 45, 35, 49)
_DEAL_FOR_ALICE = tuple(
    _ALICE_HAND[index // 2] if index < 20 and index % 2 == 0 else 12 if index == 20 else -1
    for index in range(52)
)
_DEAL_FOR_SPECTATOR = tuple(12 if index == 20 else -1 for index in range(52))
_DECK: tuple[int, ...] = (
    (21, 14, 28, 11, 33, 10, 0, 40, 50, 16, 46, 17, 8, 39, 45, 51, 35, 19, 49, 44, 12, 22)
    + (24, 1, 29, 30, 20, 7, 31, 18, 36, 42, 43, 38, 15, 47, 26, 27, 5, 2, 13, 32, 48, 37)
    + (23, 6, 34, 4, 3, 41, 25, 9)
)
"""The whole deal in order (what DeckRevealed shows after the hand)."""
_KNOCK_OPTIONS: dict[str, Any] = {"deals": 1}
_LISTING = TableListing(
    table=_TABLE,
    variant="knock",
    options=_KNOCK_OPTIONS,
    seats=("alice", "bob"),
    status="playing",
    host="alice",
    move_seconds=30.0,
    game=1,
)
_WAITING = msgspec.structs.replace(_LISTING, seats=("alice", ""), status="waiting", game=0)
_ALICE_VIEW = View(
    variant="knock",
    options=_KNOCK_OPTIONS,
    players=2,
    seat=0,
    phase="draw",
    hand_number=1,
    dealer=1,
    turn=0,
    to_move=0,
    scores=("0", "0"),
    active=(True, True),
    hand=(0, 8, 21, 28, 33, 35, 45, 46, 49, 50),
    hand_sizes=(10, 10),
    stock_size=31,
    pile=(12,),
    melds=(),
    taken=(),
    melds_this_turn=0,
    stock_reuses=0,
    melded=(False, False),
    required=-1,
    claim_kind="",
    claim_seats=(),
    claim_answers=(),
    knock_limit=10,
    upcard_passes=0,
    hands_won=(0, 0),
    forfeited=(False, False),
    winners=(),
    last_result=None,
)
_SPECTATOR_VIEW = msgspec.structs.replace(_ALICE_VIEW, seat=-1, hand=())
_RAMINO_VIEW = View(
    variant="ramino",
    options={},
    players=2,
    seat=0,
    phase="draw",
    hand_number=1,
    dealer=1,
    turn=0,
    to_move=0,
    scores=("0", "0"),
    active=(True, True),
    hand=(2, 23, 44, 88, 94, 105, 113),
    hand_sizes=(7, 6),
    stock_size=83,
    pile=(81,),
    melds=(
        MeldView(kind="run", cards=(52, 93, 30), faces=(28, 29, 30), owners=(0, 0, 0)),
        MeldView(kind="run", cards=(69, 70, 71, 8), faces=(5, 6, 7, 8), owners=(1, 0, 0, 0)),
        MeldView(kind="set", cards=(3, 16, 29), faces=(3, 16, 29), owners=(1, 1, 1)),
        MeldView(kind="run", cards=(43, 108, 372), faces=(43, 44, 45), owners=(1, 1, 1)),
    ),
    taken=(),
    melds_this_turn=0,
    stock_reuses=0,
    melded=(True, True),
    required=-1,
    claim_kind="",
    claim_seats=(),
    claim_answers=(),
    knock_limit=10,
    upcard_passes=0,
    hands_won=(0, 0),
    forfeited=(False, False),
    winners=(),
    last_result=None,
)
"""A real position of a Ramino hand (seed 0 of a random playout), as seat 0 sees it."""
_SALT = "4be1f0c29a7d3e58b6a1c0f9d2e7b384"
_COMMITMENT = hashlib.sha256(
    f"{_SALT}:{','.join(str(card) for card in _DECK)}".encode()
).hexdigest()
"""The deal's real commitment: what DeckRevealed lets anyone check."""
_RUN_WITH_JOKER = MeldSpec(cards=(32, 33, 52), faces=(32, 33, 34))
"""7H 8H and a joker standing for 9H (JK=9H)."""
_KINGS = MeldSpec(cards=(12, 25, 38), faces=(12, 25, 38))
"""KC KD KH."""
_ACES = MeldSpec(cards=(0, 13, 26), faces=(0, 13, 26))
"""AC AD AH."""
_SPADES = MeldSpec(cards=(46, 47, 48), faces=(46, 47, 48))
"""8S 9S TS."""


def _request(title: str, command: Any, topic: str, seq: int | None, note: str = "") -> Example:
    return Example(title, topic, "request", Request(id="5c1e0b7a", cmd=command, seq=seq), note)


def _public(title: str, seq: int, event: AnyEvent, note: str = "") -> Example:
    return Example(title, _EVENTS, "events", TableEvents(_TABLE, (Logged(seq, event),)), note)


def examples() -> tuple[Example, ...]:
    """Every example of docs/protocol.md, in its order (fixed values: the output is stable)."""
    lobby = (
        _request("Hello", Hello(versions=(1,), client="my-client/1.0"), _ALICE_LOBBY, None),
        _request("ListVariants", ListVariants(), _ALICE_LOBBY, None),
        _request(
            "CreateTable",
            CreateTable(variant="knock", options=_KNOCK_OPTIONS, move_seconds=30.0),
            _ALICE_LOBBY,
            None,
            "Knock Rummy for two, one deal, 30 seconds a move; alice sits in seat 0.",
        ),
        _request("ListTables", ListTables(status="waiting"), _ALICE_LOBBY, None),
        _request(
            "LadderJoin",
            LadderJoin(ladder="main", pools=("gin-2", "knock-2")),
            _ALICE_LOBBY,
            None,
            "alice enters her account on the server's ladder `main` as `ext:alice`, in two pools.",
        ),
        _request("LadderLeave", LadderLeave(ladder="main"), _ALICE_LOBBY, None),
        _request("LadderStatus", LadderStatus(), _ALICE_LOBBY, None),
    )
    table = (
        _request("Join", Join(), topics.table_command(_TABLE, "carol"), None),
        _request("Sit", Sit(seat=-1), _BOB_CMD, None, "bob takes the first free seat."),
        _request("Stand", Stand(), _BOB_CMD, None),
        _request("Leave", Leave(), topics.table_command(_TABLE, "carol"), None),
        _request("Start", Start(), _BOB_CMD, 3, "With `seq`: refused if the table moved on."),
        _request("Rematch", Rematch(), _ALICE_CMD, None),
        _request("Ready", Ready(), _ALICE_CMD, None),
        _request("Resync", Resync(), _ALICE_CMD, None),
        _request("ChatSay", ChatSay(text="good luck!"), _ALICE_CMD, None),
    )
    game = (
        _request("DrawStock", DrawStock(), _ALICE_CMD, 6),
        _request("TakeDiscard (the upcard)", TakeDiscard(count=1), _ALICE_CMD, 6),
        _request(
            "TakeDiscard (deep draw)",
            TakeDiscard(count=3),
            _ALICE_CMD,
            41,
            "Rummy 500: the third card from the top of the pile and the two above it.",
        ),
        _request(
            "Meld",
            Meld(melds=(_RUN_WITH_JOKER, _KINGS)),
            _ALICE_CMD,
            42,
            "Two melds: `7H 8H JK=9H` (the joker's face says it stands for 9H = 34) and "
            "`KC KD KH` (naturals: face = card & 63).",
        ),
        _request(
            "LayOff",
            LayOff(card=116, target=0, face=35),
            _ALICE_CMD,
            44,
            "The second joker (`JK2` = 1 << 6 | 52 = 116) laid off on table meld 0 as TH (35).",
        ),
        _request(
            "SwapJoker",
            SwapJoker(card=34, target=0),
            _ALICE_CMD,
            45,
            "9H takes the place of the joker standing for 9H in meld 0; the joker goes to the "
            "hand.",
        ),
        _request("Discard", Discard(card=51), _ALICE_CMD, 7, "Discard KS."),
        _request("Pass", Pass(), _BOB_CMD, 48),
        _request(
            "Claim",
            Claim(count=1),
            _BOB_CMD,
            49,
            "In an open claim window (Rummy 500's Rummy! call, Ramino's bussare).",
        ),
        _request(
            "Knock",
            Knock(card=10, melds=(_ACES, _KINGS, _SPADES)),
            _ALICE_CMD,
            15,
            "Discard JC and knock, showing `AC AD AH`, `KC KD KH` and `8S 9S TS` (3C, 3 points, "
            "stays unmatched); with `melds` empty the server arranges "
            "the hand with the least deadwood. `card` = -1 is big gin (Gin Rummy).",
        ),
    )
    presence = (
        Example("Presence online", topics.presence("alice"), "presence", Presence(online=True)),
        Example(
            "Presence offline (the will)",
            topics.presence("alice"),
            "presence",
            Presence(online=False),
            "Set as the MQTT will message when connecting.",
        ),
    )
    variant = VariantInfo(
        name="knock",
        title="Knock Rummy (Ramino bussato)",
        description="No melds on the table: after drawing, a player may knock and discard, "
        "ending the hand; everyone shows his melds and only unmatched cards count; each "
        "opponent settles with the knocker.",
        min_players=2,
        max_players=5,
        defaults={"deals": None, "target": 100, "tie_goes_to": "knocker"},
        options=(
            OptionInfo(
                name="tie_goes_to",
                kind="choice",
                help="Who wins a tie between knocker and opponent.",
                choices=("knocker", "opponent"),
            ),
            OptionInfo(
                name="deals",
                kind="int_or_unlimited",
                help="Fixed number of deals in the game (instead of a target).",
                minimum=1,
                maximum=1000,
            ),
        ),
    )
    replies = (
        Example(
            "Reply to Hello (Welcome)",
            _ALICE_INBOX,
            "inbox",
            Reply(
                id="5c1e0b7a",
                ok=True,
                result=Welcome(
                    version=1,
                    server="ramino/0.1",
                    shards=1,
                    max_payload=16384,
                    rate_per_second=50.0,
                    burst=100,
                ),
            ),
        ),
        Example(
            "Reply to ListVariants (Variants)",
            _ALICE_INBOX,
            "inbox",
            Reply(id="5c1e0b7a", ok=True, result=Variants((variant,))),
            "Abridged: the server lists every preset with all its options and defaults.",
        ),
        Example(
            "Reply to ListTables (Tables)",
            _ALICE_INBOX,
            "inbox",
            Reply(id="5c1e0b7a", ok=True, result=Tables((_WAITING,))),
        ),
        Example(
            "Reply to CreateTable (Created)",
            _ALICE_INBOX,
            "inbox",
            Reply(id="5c1e0b7a", ok=True, table=_TABLE, seq=2, result=Created(_TABLE, "", 0)),
            "The table's log holds TableCreated (seq 1) and alice's PlayerSat (seq 2).",
        ),
        Example(
            "Reply to LadderStatus (LadderEntry)",
            _ALICE_INBOX,
            "inbox",
            Reply(
                id="5c1e0b7a",
                ok=True,
                result=LadderEntry(
                    ladder="main",
                    entrant="ext:alice",
                    pools=("gin-2", "knock-2"),
                    active=True,
                    failures=0,
                    suspended_until=0.0,
                    tables=(_TABLE,),
                    standings=(
                        LadderStanding(
                            pool="gin-2",
                            mu=27.5,
                            sigma=2.25,
                            ordinal=20.75,
                            matches=12,
                            forfeits=1,
                            rank=2,
                        ),
                    ),
                ),
            ),
            "alice plays at one ladder table now; in `gin-2` she is second of the listed"
            " entrants after 12 matches (no result in `knock-2` yet).",
        ),
        Example(
            "Reply to Join (Synced)",
            topics.inbox("carol"),
            "inbox",
            Reply(
                id="5c1e0b7a",
                ok=True,
                table=_TABLE,
                seq=2,
                result=Synced(table=_WAITING, seq=2, seat=-1, view=None, legal=(), deadline=0.0),
            ),
            "carol watches: seat -1, no game yet (`view` null).",
        ),
        Example(
            "Reply to Resync (Synced, Ramino in mid-hand)",
            topics.inbox("alice"),
            "inbox",
            Reply(
                id="5c1e0b7a",
                ok=True,
                table="7c2e9a41b0d5",
                seq=57,
                result=Synced(
                    table=TableListing(
                        table="7c2e9a41b0d5",
                        variant="ramino",
                        options={},
                        seats=("alice", "bob"),
                        status="playing",
                        host="bob",
                        move_seconds=0.0,
                        game=1,
                    ),
                    seq=57,
                    seat=0,
                    view=_RAMINO_VIEW,
                    legal=(DrawStock(), TakeDiscard(count=1)),
                    deadline=0.0,
                ),
            ),
            "Two decks and six jokers: table meld 0 is `JK=3H 4H2 5H` (52 stands for 28), "
            "meld 3 `5S 6S2 JK6=7S` (372 = 5 << 6 | 52); `owners` says who laid each card.",
        ),
        Example(
            "Reply to DrawStock (ok, with events)",
            _ALICE_INBOX,
            "inbox",
            Reply(id="5c1e0b7a", ok=True, table=_TABLE, seq=7, events=(Logged(7, Drew(0, 22)),)),
            "alice sees the card she drew (TD = 22); everyone else sees -1.",
        ),
        Example(
            "Reply (error: not your turn)",
            _BOB_INBOX,
            "inbox",
            Reply(
                id="5c1e0b7a",
                ok=False,
                code="rules/not_your_turn",
                message="it is seat 0's turn, not seat 1's",
                table=_TABLE,
                seq=6,
            ),
        ),
        Example(
            "Reply (error: stale seq)",
            _ALICE_INBOX,
            "inbox",
            Reply(
                id="5c1e0b7a",
                ok=False,
                code="table/stale_seq",
                message="you saw seq 4, the table is at 6: resync",
                table=_TABLE,
                seq=6,
                result=Synced(
                    table=_LISTING,
                    seq=6,
                    seat=0,
                    view=_ALICE_VIEW,
                    legal=(DrawStock(), TakeDiscard(count=1)),
                    deadline=_NOW + 30,
                ),
            ),
            "alice missed the deal (seq 5-6): the refusal carries a `synced` to catch up with, "
            "as `resync` would return.",
        ),
        Example(
            "Update (a new deal, as seat 0 sees it)",
            _ALICE_INBOX,
            "inbox",
            Update(
                table=_TABLE,
                seq=6,
                seat=0,
                events=(
                    Logged(5, DeckCommitted(game=1, hand=1, commitment=_COMMITMENT)),
                    Logged(6, Dealt(hand=1, dealer=1, order=_DEAL_FOR_ALICE)),
                ),
                view=_ALICE_VIEW,
                legal=(DrawStock(), TakeDiscard(count=1)),
                deadline=_NOW + 30,
                status="playing",
            ),
            "Her own ten cards and the upcard are shown; every other card of the pack is -1.",
        ),
    )
    public = (
        Example(
            "TableListing (lobby, retained)", topics.lobby_listing(_TABLE), "listing", _WAITING
        ),
        Example(
            "TableSnapshot (retained)",
            topics.table_state(_TABLE),
            "snapshot",
            TableSnapshot(table=_LISTING, seq=6, view=_SPECTATOR_VIEW, deadline=_NOW + 30),
            "The spectator's view: `seat` -1, `hand` empty.",
        ),
        Example(
            "ChatLine",
            topics.chat(_TABLE),
            "chat",
            ChatLine(table=_TABLE, sender="alice", text="good luck!", at=_NOW),
        ),
        Example(
            "ServerStatus (retained)",
            topics.server_status(),
            "status",
            ServerStatus(
                online=True, server="ramino/0.1", versions=(1,), shards=1, tables=3, started_at=_NOW
            ),
        ),
    )
    table_events = (
        _public(
            "TableCreated",
            1,
            TableCreated(
                table_id=_TABLE,
                variant="knock",
                options=_KNOCK_OPTIONS,
                seats=2,
                host="alice",
                move_seconds=30.0,
            ),
            "A private table's `invite_code` is blanked in every published copy.",
        ),
        _public("PlayerSat", 3, PlayerSat(seat=1, player="bob")),
        _public("PlayerStood", 3, PlayerStood(seat=1, player="bob")),
        _public("GameStarted", 4, GameStarted(game=1, players=("alice", "bob"))),
        _public(
            "DeckCommitted",
            5,
            DeckCommitted(game=1, hand=1, commitment=_COMMITMENT),
            "`salt` is always empty when published; DeckRevealed shows it after the hand.",
        ),
        _public(
            "DeckRevealed",
            27,
            DeckRevealed(
                game=1,
                hand=1,
                salt=_SALT,
                order=_DECK,
            ),
            "sha256(salt + ':' + the cards in decimal joined by ',') must equal the commitment.",
        ),
        _public("TimedOut", 12, TimedOut(seat=1), "The server's moves for seat 1 follow."),
        _public("SeatBack", 15, SeatBack(seat=1)),
        _public("PlayerReady", 16, PlayerReady(seat=0)),
        _public(
            "TableClosed", 40, TableClosed(reason="expired: no activity while waiting for players")
        ),
    )
    game_events = (
        _public(
            "Dealt (as a spectator sees it)",
            6,
            Dealt(hand=1, dealer=1, order=_DEAL_FOR_SPECTATOR),
            "Only the upcard (index 20, KC = 12) is visible; seat 0's copy is in the Update "
            "example above.",
        ),
        _public("Drew (someone else's draw)", 7, Drew(seat=0, card=-1)),
        _public("TookDiscard", 7, TookDiscard(seat=0, cards=(12,))),
        _public("Melded", 42, Melded(seat=0, melds=(_RUN_WITH_JOKER, _KINGS))),
        _public("LaidOff", 44, LaidOff(seat=0, card=116, target=0, face=35)),
        _public("SwappedJoker", 45, SwappedJoker(seat=0, card=34, target=0, joker=52)),
        _public("Discarded", 8, Discarded(seat=0, card=51)),
        _public(
            "StockRebuilt",
            30,
            StockRebuilt(order=(-1,) * 8, shuffled=False),
            "The new stock's order is hidden: only its size shows.",
        ),
        _public("Declined", 31, Declined(seat=1)),
        _public("UpcardPassed", 7, UpcardPassed(seat=1), "Gin Rummy's first upcard."),
        _public(
            "Knocked",
            25,
            Knocked(seat=0, card=10, melds=(_ACES, _KINGS, _SPADES), deadwood=3),
        ),
        _public("SeatForfeited", 18, SeatForfeited(seat=1)),
        _public("Floated", 50, Floated(seat=2), "Rummy 500 with floating."),
        _public(
            "ClaimWindowOpened",
            48,
            ClaimWindowOpened(kind="rummy", seats=(1, 2), depths=(1, 3)),
        ),
        _public("ClaimAnswered", 49, ClaimAnswered(seat=1, count=0), "0: passed."),
        _public(
            "Claimed (bussare, as others see it)",
            50,
            Claimed(seat=2, cards=(44,), stock_cards=(-1, -1)),
            "The two stock cards show only to the claimer.",
        ),
        _public("ClaimWindowClosed", 50, ClaimWindowClosed()),
        _public(
            "HandEnded",
            26,
            HandEnded(
                hand=1,
                winner=0,
                ended_by=0,
                reason="knock",
                rummy=False,
                hands=(
                    (0, 13, 26, 12, 25, 38, 46, 47, 48, 2),
                    (3, 4, 5, 6, 17, 30, 43, 21, 29, 14),
                ),
                counts=(3, 15),
                points=("12", "0"),
                totals=("12", "0"),
                shown=(
                    (_ACES, _KINGS, _SPADES),
                    (MeldSpec((3, 4, 5, 6), (3, 4, 5, 6)), MeldSpec((17, 30, 43), (17, 30, 43))),
                ),
            ),
            "Knock Rummy: `counts` are unmatched points, `shown` the melds each seat showed; "
            "bob's 15 against alice's 3 pays her the difference.",
        ),
        _public("GameEnded", 26, GameEnded(winners=(0,), totals=("12", "0"))),
    )
    return lobby + table + game + presence + replies + public + table_events + game_events


def format_hex(payload: bytes, per_line: int = 16) -> str:
    """Bytes as hex pairs, ``per_line`` to a line."""
    return "\n".join(
        payload[start : start + per_line].hex(" ") for start in range(0, len(payload), per_line)
    )


def _scalar(value: Any) -> bool:
    return not isinstance(value, dict | list)


def format_json(value: Any, indent: int = 0, width: int = 96) -> str:
    """JSON of decoded msgpack, compact where it fits in ``width`` columns."""
    flat = json.dumps(value, ensure_ascii=False)
    if _scalar(value) or indent + len(flat) <= width:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, list) and all(_scalar(item) for item in value):
        lines: list[str] = []
        line = ""
        for item in value:
            text = json.dumps(item, ensure_ascii=False) + ","
            if line and len(pad) + len(line) + len(text) + 1 > width:
                lines.append(pad + line)
                line = text
            else:
                line = f"{line} {text}" if line else text
        lines.append(pad + line)
        lines[-1] = lines[-1].rstrip(",")
        return "[\n" + "\n".join(lines) + "\n" + " " * indent + "]"
    if isinstance(value, list):
        items = [pad + format_json(item, indent + 2, width) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    entries = [
        f"{pad}{json.dumps(key, ensure_ascii=False)}: {format_json(item, indent + 2, width)}"
        for key, item in value.items()
    ]
    return "{\n" + ",\n".join(entries) + "\n" + " " * indent + "}"


def render_examples() -> str:
    """The examples section of docs/protocol.md (between its generated markers)."""
    parts: list[str] = []
    groups = {
        "request": "Client to server",
        "presence": "Client to server",
        "inbox": "Server to one client (inbox)",
        "listing": "Public topics",
        "snapshot": "Public topics",
        "chat": "Public topics",
        "status": "Public topics",
        "events": "Events (each in a `TableEvents` message on the public stream)",
    }
    heading = ""
    for example in examples():
        group = groups[example.decoder]
        if group != heading:
            heading = group
            parts.append(f"#### {group}\n")
        payload = example.payload
        lines = [
            f"**{example.title}** on `{example.topic}` ({len(payload)} bytes)"
            + (f". {example.note}" if example.note else "")
            + "\n",
            f"<!-- example: {example.decoder} -->",
            "```hex",
            format_hex(payload),
            "```",
            "```json",
            format_json(example.decoded),
            "```",
            "",
        ]
        parts.append("\n".join(lines))
    return "\n".join(parts)


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- BEGIN GENERATED {name}: python -m protocol.asyncapi --{name} -->",
        f"<!-- END GENERATED {name} -->",
    )


def replace_section(text: str, name: str, body: str) -> str:
    """``text`` with the generated section ``name`` replaced by ``body``.

    Raises:
        ValueError: ``text`` lacks the section's markers.
    """
    begin, end = _markers(name)
    start = text.find(begin)
    stop = text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"no generated section {name!r} ({begin} ... {end})")
    return text[: start + len(begin)] + "\n\n" + body.strip("\n") + "\n\n" + text[stop:]


# Transcript -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Captured:
    """One message a recorded client sent or received."""

    at: float
    client: str
    sent: bool
    topic: str
    payload: bytes


class _RecordingTransport(Transport):
    """A transport that logs what goes out and what comes in."""

    def __init__(self, log: list[Captured], username: str, password: str, **kwargs: Any) -> None:
        super().__init__(username, password, **kwargs)
        self._log = log

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> None:
        """Log, then publish."""
        self._log.append(Captured(time.monotonic(), self.username, True, topic, payload))
        super().publish(topic, payload, qos, retain)

    async def messages(self) -> AsyncIterator[Message]:
        """Every message received, logged."""
        async for message in super().messages():
            self._log.append(
                Captured(time.monotonic(), self.username, False, message.topic, message.payload)
            )
            yield message


def _recording_client(log: list[Captured], name: str, broker: str, password: str) -> Client:
    client = Client(name, password, broker=broker)
    will = (topics.presence(name), codec.encode(Presence(online=False)))
    client.transport = _RecordingTransport(log, name, password, will=will)
    return client


async def _play(session: TableSession, rng: random.Random, knock_after: int) -> None:
    """Random legal moves; knock (when the variant has it) after ``knock_after`` turns."""
    turns = 0
    async for update in session.updates():
        if update.status in ("finished", "closed"):
            return
        if not update.legal or update.seq < session.seq:
            continue  # not our move, or an update overtaken by a newer one
        knocks = [command for command in update.legal if isinstance(command, Knock)]
        if knocks and turns >= knock_after:
            command: GameCommand = rng.choice(knocks)
        else:
            others = [command for command in update.legal if not isinstance(command, Knock)]
            command = rng.choice(others or list(update.legal))
            turns += isinstance(command, Discard)
        await session.act(command, check=False)


async def record_game(
    broker: str, password: str = "", variant: str = "knock", seed: int = 1
) -> list[Captured]:
    """Record one short game at a running server: alice creates a table, bob sits and starts,
    both play random legal moves (knocking after three turns each), carol watches.

    Raises:
        TransportError: the broker is not reachable.
        RequestFailed: the server refused a lobby or table command.
    """
    log: list[Captured] = []
    rng = random.Random(seed)
    alice = _recording_client(log, "alice", broker, password)
    bob = _recording_client(log, "bob", broker, password)
    carol = _RecordingTransport(log, "carol", password)
    async with alice, bob:
        await alice.hello()
        created = await alice.create_table(variant, options={"deals": 1}, move_seconds=60.0)
        table = created.table
        carol.subscribe(topics.table_events(table), topics.table_state(table), topics.chat(table))
        await carol.connect(alice.address)
        watcher = asyncio.create_task(_drain(carol))
        try:
            await asyncio.sleep(0.3)
            alice_table = alice.table(table)
            bob_table = bob.table(table)
            await bob_table.sit()
            started = await bob_table.start()
            await alice_table.chat("good luck!")
            dealers = [
                logged.event.dealer for logged in started.events if isinstance(logged.event, Dealt)
            ]
            # Two players: the one left of the dealer (the dealer's opponent) moves first.
            waiting = alice if dealers and dealers[0] == 0 else bob
            # Out of turn on purpose, to show an error reply.
            await waiting.request(DrawStock(), table, check=False)
            async with asyncio.timeout(60):
                await asyncio.gather(
                    _play(alice_table, random.Random(rng.random()), 3),
                    _play(bob_table, random.Random(rng.random()), 3),
                )
            await asyncio.sleep(0.5)
        finally:
            watcher.cancel()
            await carol.close()
    return log


async def _drain(transport: Transport) -> None:
    async for _ in transport.messages():
        pass


def _abridge(value: Any, seen: set[str], key: str = "") -> Any:
    """Shorten a decoded message for the transcript: views to their main fields, long legal
    lists to their first entries, and events already shown to their ``seq``."""
    if isinstance(value, dict):
        if key == "view" and "phase" in value:
            kept = ("seat", "phase", "turn", "to_move", "hand", "hand_sizes", "stock_size", "pile")
            short = {name: value[name] for name in kept if name in value}
            short["…"] = f"{len(value) - len(short)} more fields"
            return short
        return {name: _abridge(item, seen, name) for name, item in value.items()}
    if isinstance(value, list):
        if key == "legal" and len(value) > 3:
            return [*(_abridge(item, seen) for item in value[:2]), f"… {len(value) - 2} more"]
        if key == "events":
            events = []
            for logged in value:
                text = json.dumps(logged, sort_keys=True)
                if text in seen:
                    events.append({"seq": logged["seq"], "event": "… as above"})
                else:
                    seen.add(text)
                    events.append(logged)
            return events
        return [_abridge(item, seen) for item in value]
    return value


def _kind(payload: bytes) -> str:
    try:
        decoded = msgspec.msgpack.decode(payload)
    except msgspec.DecodeError:
        return ""
    if not isinstance(decoded, dict):
        return ""
    command = decoded.get("cmd")
    if isinstance(command, dict):
        return str(command.get("type", ""))
    return str(decoded.get("type", ""))


def _left_out(count: int) -> str:
    return f"# … {count} message{'s' if count > 1 else ''} left out …\n"


def render_transcript(log: Sequence[Captured]) -> str:
    """The transcript section of docs/protocol.md: the messages of ``log`` in order, abridged.

    Presence and retained snapshots are shown once; the middle of the game is left out.
    """
    ordered = sorted(log, key=lambda item: item.at)
    first_discard = next(
        (
            index
            for index, item in enumerate(ordered)
            if item.sent and _kind(item.payload) == "discard"
        ),
        len(ordered),
    )
    knock = next(
        (
            index
            for index, item in enumerate(ordered)
            if item.sent and _kind(item.payload) == "knock"
        ),
        len(ordered),
    )
    shown: list[str] = []
    skipped = 0
    seen_snapshot = False
    last_snapshot = max(
        (index for index, item in enumerate(ordered) if item.topic.endswith("/state")), default=-1
    )
    seen: set[str] = set()
    statuses = 0
    for index, item in enumerate(ordered):
        keep = index <= first_discard + 6 or index >= knock
        if item.topic == topics.server_status():
            statuses += 1
            keep = keep and statuses == 1
        if item.topic.endswith("/state"):
            keep = keep and (not seen_snapshot or index == last_snapshot)
            seen_snapshot = seen_snapshot or keep
        if item.sent and item.topic.startswith(f"{topics.PREFIX}/presence/") and index > 10:
            keep = False
        if not keep:
            skipped += 1
            continue
        if skipped:
            shown.append(_left_out(skipped))
            skipped = 0
        verb = "publishes on" if item.sent else "receives on"
        body = _abridge(msgspec.msgpack.decode(item.payload), seen) if item.payload else None
        text = format_json(body) if item.payload else "(empty payload)"
        shown.append(f"# {item.client} {verb} {item.topic}\n{text}\n")
    if skipped:
        shown.append(_left_out(skipped))
    return "```text\n" + "\n".join(shown) + "```"


def _record_into(doc: Path, broker: str, password: str, seed: int) -> None:
    log = asyncio.run(record_game(broker, password, seed=seed))
    text = doc.read_text()
    doc.write_text(replace_section(text, "transcript", render_transcript(log)))


# Command line -----------------------------------------------------------------------------------


def _check_or_write(path: Path, expected: str, check: bool, what: str) -> bool:
    actual = path.read_text() if path.exists() else None
    if actual == expected:
        return True
    if check:
        print(
            f"{path} is out of date with the protocol code ({what}): run "
            f"`python -m protocol.asyncapi{' --examples' if what == 'examples' else ''}`",
            file=sys.stderr,
        )
        return False
    path.write_text(expected)
    print(f"wrote {path}")
    return True


def main(argv: Iterable[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m protocol.asyncapi", description=__doc__.split("\n")[0] if __doc__ else ""
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the AsyncAPI YAML")
    parser.add_argument("--doc", type=Path, default=DEFAULT_DOC, help="docs/protocol.md")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file is out of date"
    )
    parser.add_argument(
        "--examples", action="store_true", help="the examples of --doc instead of the YAML"
    )
    parser.add_argument(
        "--transcript",
        metavar="BROKER",
        help="record a game at the server behind mqtt://HOST:PORT into --doc",
    )
    parser.add_argument("--password", default="", help="password of alice, bob and carol")
    parser.add_argument("--seed", type=int, default=1, help="seed of the recorded players")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.transcript:
        _record_into(args.doc, args.transcript, args.password, args.seed)
        print(f"recorded a game into {args.doc}")
        return 0
    if args.examples:
        text = args.doc.read_text()
        expected = replace_section(text, "examples", render_examples())
        return 0 if _check_or_write(args.doc, expected, args.check, "examples") else 1
    expected = to_yaml(build_document())
    return 0 if _check_or_write(args.output, expected, args.check, "asyncapi") else 1


if __name__ == "__main__":
    sys.exit(main())
