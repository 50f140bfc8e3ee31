"""Every message of protocol v1 as a msgspec Struct; msgpack maps on the wire.

A client publishes a ``Request`` (an ``id`` it chooses, the command, and for table commands
the last table ``seq`` it saw) on its command topic and gets exactly one ``Reply`` on its
inbox: ``ok`` with what the command produced, or an error ``code`` and ``message``. Its inbox
also carries an ``Update`` whenever one of its tables changes: the new events as this seat may
see them, the seat's whole ``View`` and its legal actions, so a client needs no rules engine.
Public topics carry ``TableEvents`` (every event as a spectator sees it), the retained
``TableSnapshot`` and ``TableListing``, ``ChatLine`` and the retained ``ServerStatus``.

Unions are tagged by a ``type`` field. Decoding enforces limits on sizes and lengths (see
``protocol.codec``); every field a client sends is typed, so nothing nests deeper than this
schema says.

Every struct here is ``gc=False``: it holds only data (numbers, text, tuples and other such
structs), so it can never be part of a reference cycle, and the garbage collector need not
track the many a server or a bot keeps and decodes. Put nothing in one that refers back to it.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias

import msgspec
from msgspec import Meta

from protocol.game import (
    Command as GameCommand,
)
from protocol.game import (
    Event as GameEvent,
)
from protocol.game import (
    TableEvent,
    View,
)

__all__ = [
    "MAX_ID",
    "PROTOCOL_VERSION",
    "AnyCommand",
    "AnyEvent",
    "ChatLine",
    "ChatSay",
    "CreateTable",
    "Created",
    "GameCommand",
    "Hello",
    "Inbox",
    "Join",
    "LadderEntry",
    "LadderJoin",
    "LadderLeave",
    "LadderStanding",
    "LadderStatus",
    "Leave",
    "ListTables",
    "ListVariants",
    "Logged",
    "OptionInfo",
    "Presence",
    "Ready",
    "Rematch",
    "Reply",
    "Request",
    "Result",
    "Resync",
    "ServerStatus",
    "Sit",
    "Stand",
    "Start",
    "Synced",
    "TableEvents",
    "TableListing",
    "TableSnapshot",
    "Tables",
    "Update",
    "VariantInfo",
    "Variants",
    "Welcome",
]

PROTOCOL_VERSION = 1
MAX_ID = 64
"""Longest request id, in characters. A longer one is refused (``protocol/invalid``) with the
reply's ``id`` cut to its first ``MAX_ID`` characters."""

Name = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
ShortText = Annotated[str, Meta(max_length=64)]
OptionValue: TypeAlias = bool | int | float | str | None
"""An option's value; ``None`` (msgpack nil) is "unlimited" for ``int_or_unlimited`` options,
as ``VariantInfo.defaults`` sends it."""
Options = Annotated[dict[ShortText, OptionValue], Meta(max_length=64)]

# Lobby commands (published on ramino/v1/lobby/{shard}/{client}) -------------------------------


class Hello(msgspec.Struct, frozen=True, gc=False, tag="hello"):
    """Version negotiation: the versions the client speaks; the reply picks one (``Welcome``)."""

    versions: Annotated[tuple[int, ...], Meta(max_length=16)] = (PROTOCOL_VERSION,)
    client: Annotated[str, Meta(max_length=128)] = ""
    """Free text naming the client program, for the server's logs."""


class ListVariants(msgspec.Struct, frozen=True, gc=False, tag="list_variants"):
    """The variants this server plays, with their options (reply: ``Variants``)."""


class CreateTable(msgspec.Struct, frozen=True, gc=False, tag="create_table"):
    """Open a table (reply: ``Created``); the sender is its host and, with ``sit``, seat 0."""

    variant: ShortText
    options: Options = {}
    seats: Annotated[int, Meta(ge=1, le=16)] = 2
    private: bool = False
    """A private table is not listed in the lobby; sitting needs its ``invite_code``."""
    move_seconds: Annotated[float, Meta(ge=0, le=86400)] = 0.0
    """Seconds per move (0: no timer); when it runs out the server plays for the seat."""
    max_timeouts: Annotated[int, Meta(ge=0, le=100)] = 3
    """Timeouts in a row after which the server plays the rest of the game for the seat."""
    hand_pause_seconds: Annotated[float, Meta(ge=0, le=3600)] = 0.0
    """Between hands, wait this long for every player's ``ready`` before the next deal (0:
    deal at once)."""
    sit: bool = True


class ListTables(msgspec.Struct, frozen=True, gc=False, tag="list_tables"):
    """Public tables (reply: ``Tables``); empty filters match everything."""

    status: ShortText = ""
    """``waiting``, ``playing``, ``finished`` or ``closed``."""
    variant: ShortText = ""


class LadderJoin(msgspec.Struct, frozen=True, gc=False, tag="ladder_join"):
    """Enter the sender's account on the server's ladder as ``ext:USERNAME`` (reply:
    ``LadderEntry``): the ladder then seats it at its tables (an ``Update`` names each)."""

    ladder: ShortText = ""
    """The ladder's name; ``""``: the one the server runs."""
    pools: Annotated[tuple[ShortText, ...], Meta(max_length=16)] = ()
    """The pools to play (``gin-2``, ...); empty: every pool of the ladder."""


class LadderLeave(msgspec.Struct, frozen=True, gc=False, tag="ladder_leave"):
    """Stop being paired on the ladder (reply: ``LadderEntry``); a match under way is played
    to its end, and the ratings stay."""

    ladder: ShortText = ""


class LadderStatus(msgspec.Struct, frozen=True, gc=False, tag="ladder_status"):
    """The sender's entry on the ladder (reply: ``LadderEntry``)."""

    ladder: ShortText = ""


# Table commands (published on ramino/v1/table/{table}/cmd/{client}) ---------------------------


class Join(msgspec.Struct, frozen=True, gc=False, tag="join"):
    """Watch a table: the reply carries its snapshot (``Synced``); a private one needs the code."""

    invite_code: ShortText = ""


class Sit(msgspec.Struct, frozen=True, gc=False, tag="sit"):
    """Take seat ``seat`` (-1: the first free one) before a game starts or after it ends."""

    seat: Annotated[int, Meta(ge=-1, le=15)] = -1
    invite_code: ShortText = ""


class Stand(msgspec.Struct, frozen=True, gc=False, tag="stand"):
    """Give up your seat (not while a game is on)."""


class Leave(msgspec.Struct, frozen=True, gc=False, tag="leave"):
    """Stop watching; stands up too when no game is on."""


class Start(msgspec.Struct, frozen=True, gc=False, tag="start"):
    """Start the game once every seat is taken (any seated player may)."""


class Ready(msgspec.Struct, frozen=True, gc=False, tag="ready"):
    """Between hands (tables with ``hand_pause_seconds``): ready for the next deal, which
    comes when every player is ready or the pause runs out."""


class Rematch(msgspec.Struct, frozen=True, gc=False, tag="rematch"):
    """A new game with the same players after the last one ended."""


class Resync(msgspec.Struct, frozen=True, gc=False, tag="resync"):
    """Everything needed to catch up: the reply carries a ``Synced`` (view, legal actions, seq)."""


class ChatSay(msgspec.Struct, frozen=True, gc=False, tag="chat"):
    """Say something at the table (rate-limited); everyone watching gets a ``ChatLine``."""

    text: Annotated[str, Meta(min_length=1, max_length=500)]


LobbyCommand: TypeAlias = (
    Hello | ListVariants | CreateTable | ListTables | LadderJoin | LadderLeave | LadderStatus
)
TableCommand: TypeAlias = Join | Sit | Stand | Leave | Start | Ready | Rematch | Resync | ChatSay
AnyCommand: TypeAlias = LobbyCommand | TableCommand | GameCommand


class Request(msgspec.Struct, frozen=True, gc=False):
    """What a client publishes: its command with an id of its choosing.

    ``id`` makes the command idempotent: sending the same id again (after a timeout or a
    reconnection) returns the first reply and does not act twice. ``seq`` is the last table
    sequence number the client saw; when given and not current, the command is refused with
    ``table/stale_seq`` (omit it to skip the check).
    """

    id: Annotated[str, Meta(min_length=1, max_length=MAX_ID)]
    cmd: AnyCommand
    seq: Annotated[int, Meta(ge=0)] | None = None


class Presence(msgspec.Struct, frozen=True, gc=False, tag="presence"):
    """Published on ``ramino/v1/presence/{client}``: online on connecting, offline as the will."""

    online: bool


# Replies and their results ----------------------------------------------------------------------


class Welcome(msgspec.Struct, frozen=True, gc=False, tag="welcome"):
    """Reply to ``Hello``: the version chosen and the server's limits."""

    version: int
    server: str
    shards: int
    max_payload: int
    rate_per_second: float
    burst: int


class OptionInfo(msgspec.Struct, frozen=True, gc=False):
    """One table option: its kind (``bool``, ``int``, ``choice``, ``int_or_unlimited``), help
    and allowed values."""

    name: str
    kind: str
    help: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None


class VariantInfo(msgspec.Struct, frozen=True, gc=False):
    """A preset: its name, title, player counts, default options and the options it accepts."""

    name: str
    title: str
    description: str
    min_players: int
    max_players: int
    defaults: dict[str, Any]
    options: tuple[OptionInfo, ...]


class Variants(msgspec.Struct, frozen=True, gc=False, tag="variants"):
    """Reply to ``ListVariants``."""

    variants: tuple[VariantInfo, ...]


class TableListing(msgspec.Struct, frozen=True, gc=False, tag="listing"):
    """A table as the lobby shows it (also retained on ``ramino/v1/tables/{table}``)."""

    table: str
    variant: str
    options: dict[str, Any]
    seats: tuple[str, ...]
    """Player in each seat, ``""`` when free."""
    status: str
    host: str
    move_seconds: float
    game: int
    """Games played or under way at this table."""


class Tables(msgspec.Struct, frozen=True, gc=False, tag="tables"):
    """Reply to ``ListTables``."""

    tables: tuple[TableListing, ...]


class Created(msgspec.Struct, frozen=True, gc=False, tag="created"):
    """Reply to ``CreateTable``: the new table's id, its invite code if private, your seat."""

    table: str
    invite_code: str
    seat: int


AnyEvent: TypeAlias = GameEvent | TableEvent


class Logged(msgspec.Struct, frozen=True, gc=False):
    """One event of a table's log, numbered; hidden cards are -1 for whoever may not see them."""

    seq: int
    event: AnyEvent


class Synced(msgspec.Struct, frozen=True, gc=False, tag="synced"):
    """The whole present of a table as the requester may see it (reply to ``Resync``/``Join``).

    ``view`` is ``None`` before the first game; ``seat`` is -1 for a spectator.
    """

    table: TableListing
    seq: int
    seat: int
    view: View | None
    legal: tuple[GameCommand, ...]
    deadline: float
    """When the move timer runs out (Unix time, 0: no timer running)."""


class LadderStanding(msgspec.Struct, frozen=True, gc=False):
    """An entrant's rating and record in one pool of a ladder."""

    pool: str
    mu: float
    sigma: float
    ordinal: float
    """``mu - 3 sigma``: what the leaderboard ranks by."""
    matches: int
    forfeits: int
    """Matches in which it forfeited a seat."""
    rank: int
    """Its place on the pool's leaderboard (1 is best); 0 while it has too few matches."""


class LadderEntry(msgspec.Struct, frozen=True, gc=False, tag="ladder_entry"):
    """Reply to ``LadderJoin``, ``LadderLeave`` and ``LadderStatus``: the sender's entry."""

    ladder: str
    entrant: str
    """``ext:USERNAME``."""
    pools: tuple[str, ...]
    """The pools it plays (those it joined; empty if it never joined)."""
    active: bool
    """Whether it is paired (joined, and neither left nor suspended)."""
    failures: int
    """Matches forfeited in a row."""
    suspended_until: float
    """Unix time its suspension ends; 0: not suspended."""
    tables: tuple[str, ...]
    """The ladder tables it sits at now."""
    standings: tuple[LadderStanding, ...]


Result: TypeAlias = Welcome | Variants | Tables | Created | Synced | LadderEntry


class Reply(msgspec.Struct, frozen=True, gc=False, tag="reply"):
    """The one reply to a ``Request`` with the same ``id``.

    ``ok`` replies to table commands carry the table ``seq`` after the command and the events
    it produced (as the sender may see them); lobby replies carry a ``result``. Errors carry a
    stable ``code`` (docs/protocol.md lists them) and a message for people.
    """

    id: str
    ok: bool
    code: str = ""
    message: str = ""
    table: str = ""
    seq: int = 0
    events: tuple[Logged, ...] = ()
    result: Result | None = None


class Update(msgspec.Struct, frozen=True, gc=False, tag="update"):
    """A seated player's private update after each change of a table he sits at.

    ``events`` are the new events (numbered, without gaps after the previous update's ``seq``);
    ``view`` is this seat's whole view after them, ``legal`` what it may do now.
    """

    table: str
    seq: int
    seat: int
    events: tuple[Logged, ...]
    view: View | None
    legal: tuple[GameCommand, ...]
    deadline: float
    status: str


Inbox: TypeAlias = Reply | Update
"""What arrives on ``ramino/v1/inbox/{client}``."""

# Public topics -----------------------------------------------------------------------------------


class TableEvents(msgspec.Struct, frozen=True, gc=False, tag="events"):
    """Public stream ``ramino/v1/table/{table}/events``: new events as a spectator sees them."""

    table: str
    events: tuple[Logged, ...]


class TableSnapshot(msgspec.Struct, frozen=True, gc=False, tag="snapshot"):
    """Retained on ``ramino/v1/table/{table}/state``: the table as a spectator sees it."""

    table: TableListing
    seq: int
    view: View | None
    deadline: float


class ChatLine(msgspec.Struct, frozen=True, gc=False, tag="chat_line"):
    """A chat line on ``ramino/v1/table/{table}/chat``."""

    table: str
    sender: str
    text: str
    at: float


class ServerStatus(msgspec.Struct, frozen=True, gc=False, tag="status"):
    """Retained on ``ramino/v1/server/status``: whether a server is up, and its versions."""

    online: bool
    server: str
    versions: tuple[int, ...]
    shards: int
    tables: int
    started_at: float
    reconnected_at: float = 0.0
    """When the server last reconnected to the broker (0: never since it started). What it
    published while away may be lost: a client resyncs when this (or ``started_at``)
    changes."""
