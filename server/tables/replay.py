"""Replay and export of a table's log, the fairness check of its deals, and table listings.

Theory of operation. A replay folds the whole log from its first row, exactly as the table
actor did, and shows each selected row as one viewer may see it:

* a seat (``0``, ``1``, ...) sees every engine event through the engine's ``redact`` for that
  seat, applied to the game state *before* the event, so another seat's hidden cards never
  appear before the hand's end (the end itself, ``HandEnded``, shows every hand by the rules);
* a spectator (``"spectator"``) sees what ``redact`` leaves for no seat;
* ``"all"`` sees the log unredacted, and is refused (``replay/hand_in_progress``) when the
  selected rows include a hand the log has not seen end.

For every viewer the salt of ``DeckCommitted`` is stripped (the hand's ``DeckRevealed`` carries
it), and so is the invite code of a private table except for ``"all"``. A ``DeckRevealed``
logged before its hand ended (the actor never writes one) is hidden from all but ``"all"``.

Each row is attributed to a game and a hand: ``GameStarted``, ``DeckCommitted`` and
``DeckRevealed`` name theirs; engine events belong to the hand dealt last in their game
(``GameEnded`` to the last hand); the other table events (creation, seats, closing) belong to
no game (0) and no hand (0).

The functions here are pure over decoded rows (``LogRow``); the ``ramino`` command reads the
rows from a store and prints the results.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeAlias

import msgspec

from protocol.cards import card_copy
from protocol.game import Event as EngineEvent
from server.engine import (
    Card,
    Dealt,
    HandEnded,
    card_face,
    format_cards,
    redact,
)
from server.engine.views import HIDDEN
from server.narration import describe_event
from server.tables.errors import ReplayError, StoreError, UnknownTable
from server.tables.records import (
    DeckCommitted,
    DeckRevealed,
    GameStarted,
    PlayerReady,
    PlayerSat,
    PlayerStood,
    Record,
    RecordEvent,
    SeatBack,
    TableClosed,
    TableCreated,
    TimedOut,
    deck_commitment,
    decode_record,
)
from server.tables.store import EventStore, StoredEvent, TableSummary, open_store
from server.tables.table import TableState, empty_table, fold

__all__ = [
    "EVERYTHING",
    "SPECTATOR",
    "DealCheck",
    "LogRow",
    "ReplayError",
    "ReplayLine",
    "Viewer",
    "decode_rows",
    "format_deal_check",
    "format_line",
    "format_summary",
    "format_time",
    "open_existing_store",
    "parse_viewer",
    "project",
    "read_rows",
    "replay_rows",
    "summary_to_json",
    "verify_deals",
]

SPECTATOR: Final = "spectator"
EVERYTHING: Final = "all"

Viewer: TypeAlias = int | Literal["spectator", "all"]
"""A seat number, a spectator, or everything (the operator's unredacted view)."""


@dataclass(frozen=True, slots=True)
class LogRow:
    """One decoded row of a table's log."""

    table_id: str
    seq: int
    at: float
    command_id: str
    record: Record


def decode_rows(rows: Iterable[StoredEvent]) -> list[LogRow]:
    """Decode stored rows (upgrading old record versions).

    Raises:
        ReplayError: a payload is not a record (``replay/bad_record``, naming the seq).
    """
    decoded = []
    for row in rows:
        try:
            record = decode_record(row.payload)
        except msgspec.DecodeError as error:
            raise ReplayError(
                f"row {row.seq!r} of table {row.table_id!r} is not a readable record: {error}",
                "replay/bad_record",
            ) from error
        decoded.append(LogRow(row.table_id, row.seq, row.at, row.command_id, record))
    return decoded


async def read_rows(store: EventStore, table_id: str) -> list[LogRow]:
    """Every row of ``table_id``, decoded.

    Raises:
        UnknownTable: the table has no rows.
        ReplayError: a row cannot be decoded.
    """
    rows = decode_rows(await store.read(table_id))
    if not rows:
        raise UnknownTable(f"there is no table {table_id!r} in this store")
    return rows


async def open_existing_store(url: str) -> EventStore:
    """Open the store at ``url`` for reading, refusing a SQLite file that does not exist.

    ``open_store`` creates a missing SQLite file; a read-only command given a mistyped path
    should say so instead of reporting an empty store.

    Raises:
        StoreError: the SQLite file does not exist (``store/not_found``).
        StoreConfigError: the URL names no supported backend.
    """
    _require_store_file(url)
    return await open_store(url)


def _require_store_file(url: str) -> None:
    path = _sqlite_path(url)
    if path is not None and path != ":memory:" and not os.path.exists(path):
        raise StoreError(f"no store file at {path!r}", "store/not_found")


def _sqlite_path(url: str) -> str | None:
    """The file a SQLite URL (or bare path) names, as ``open_store`` reads it; None otherwise."""
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        if path.startswith("//"):
            return path[1:]
        return (path[1:] or ":memory:") if path.startswith("/") else path
    if "://" in url:
        return None
    return url


# Viewers ---------------------------------------------------------------------------------------


def parse_viewer(text: str, rows: Sequence[LogRow] = ()) -> Viewer:
    """``spectator``, ``all``, a seat number, or the name of a player seen at the table.

    Raises:
        ReplayError: none of those (``replay/bad_viewer``).
    """
    lowered = text.strip().lower()
    if lowered == SPECTATOR:
        return SPECTATOR
    if lowered == EVERYTHING:
        return EVERYTHING
    if lowered.isdigit():
        return int(lowered)
    for row in reversed(rows):
        event = row.record.event
        if isinstance(event, PlayerSat) and event.player == text:
            return event.seat
    raise ReplayError(
        f"--as takes a seat number, a player's name, 'spectator' or 'all', not {text!r}",
        "replay/bad_viewer",
    )


# Attribution of rows to games and hands --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Place:
    game: int
    hand: int


_TABLE_ONLY = (TableCreated, PlayerSat, PlayerStood, TableClosed)


def _places(rows: Sequence[LogRow]) -> list[_Place]:
    """The game and hand of each row (see the module docstring)."""
    places = []
    current_hand: dict[int, int] = {}
    for row in rows:
        event = row.record.event
        match event:
            case GameStarted(game=game):
                place = _Place(game, 0)
            case DeckCommitted(game=game, hand=hand) | DeckRevealed(game=game, hand=hand):
                if isinstance(event, DeckCommitted):
                    current_hand[game] = hand
                place = _Place(game, hand)
            case _ if isinstance(event, _TABLE_ONLY):
                place = _Place(0, 0)
            case _:
                game = row.record.game
                if isinstance(event, Dealt):
                    current_hand[game] = event.hand
                place = _Place(game, current_hand.get(game, 0))
        places.append(place)
    return places


def _ended_hands(rows: Sequence[LogRow], places: Sequence[_Place]) -> set[tuple[int, int]]:
    return {
        (place.game, row.record.event.hand)
        for row, place in zip(rows, places)
        if isinstance(row.record.event, HandEnded)
    }


def _last_game(rows: Sequence[LogRow]) -> int:
    games = [row.record.event.game for row in rows if isinstance(row.record.event, GameStarted)]
    return max(games, default=0)


def _seat_count(rows: Sequence[LogRow]) -> int:
    for row in rows:
        if isinstance(row.record.event, TableCreated):
            return row.record.event.seats
    return 0


# Replay ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayLine:
    """One row of a replay, as its viewer may see it."""

    seq: int
    at: float
    game: int
    """The game the row belongs to (0: the table itself)."""
    hand: int
    """The hand the row belongs to (0: none)."""
    event: RecordEvent
    """The event, redacted for the viewer."""
    text: str
    """The event as a sentence."""
    details: tuple[str, ...] = ()
    """Further sentences (the viewer's cards after a deal, the hands and totals at its end)."""

    def to_json(self) -> dict[str, Any]:
        """The line as a JSON object: seq, time, game, hand, type, event, text and details."""
        event = msgspec.to_builtins(self.event)
        return {
            "seq": self.seq,
            "time": _iso_time(self.at),
            "at": self.at,
            "game": self.game,
            "hand": self.hand,
            "type": event.get("type", type(self.event).__name__),
            "event": event,
            "text": self.text,
            "details": list(self.details),
        }


def replay_rows(
    rows: Sequence[LogRow],
    viewer: Viewer,
    hand: int | None = None,
    to_seq: int | None = None,
    game: int | None = None,
) -> list[ReplayLine]:
    """The rows of a table's log up to ``to_seq`` as ``viewer`` may see them.

    ``hand`` limits the replay to one hand of ``game`` (default: the last game); ``game``
    alone limits it to one game. ``rows`` must be the whole log from seq 1: the game state is
    folded from the start to redact each event.

    Raises:
        ReplayError: ``replay/bad_viewer`` (no such seat), ``replay/no_such_game``,
            ``replay/no_such_hand``, or ``replay/hand_in_progress`` when ``viewer`` is
            ``all`` and a selected hand has not ended in the log.
    """
    if not rows:
        return []
    places = _places(rows)
    seats = _seat_count(rows)
    if isinstance(viewer, int) and not 0 <= viewer < seats:
        raise ReplayError(
            f"the table has seats 0 to {seats - 1}, not {viewer!r}", "replay/bad_viewer"
        )
    if hand is not None and game is None:
        game = _last_game(rows)
    if game is not None and not any(place.game == game for place in places):
        raise ReplayError(f"the table has no game {game!r}", "replay/no_such_game")
    if hand is not None and not any(place == _Place(game or 0, hand) for place in places):
        raise ReplayError(f"game {game!r} has no hand {hand!r}", "replay/no_such_hand")

    def selected(row: LogRow, place: _Place) -> bool:
        return (
            (to_seq is None or row.seq <= to_seq)
            and (game is None or place.game == game)
            and (hand is None or place.hand == hand)
        )

    chosen = [selected(row, place) for row, place in zip(rows, places)]
    if viewer == EVERYTHING:
        ended = _ended_hands(rows, places)
        for row, place, wanted in zip(rows, places, chosen):
            if wanted and place.hand and (place.game, place.hand) not in ended:
                raise ReplayError(
                    f"hand {place.hand} of game {place.game} has not ended (seq {row.seq}):"
                    " replay it as a seat or a spectator, or stop before it",
                    "replay/hand_in_progress",
                )
    lines = []
    table = empty_table(rows[0].table_id)
    commitments: dict[tuple[int, int], str] = {}
    ended_so_far: set[tuple[int, int]] = set()
    last = max((row.seq for row, wanted in zip(rows, chosen) if wanted), default=0)
    for row, place, wanted in zip(rows, places, chosen):
        if row.seq > last:
            break
        before = table
        table = fold(before, row.record, row.seq)
        event = row.record.event
        if isinstance(event, DeckCommitted):
            commitments[event.game, event.hand] = event.commitment
        if isinstance(event, HandEnded):
            ended_so_far.add((place.game, event.hand))
        if wanted:
            early = isinstance(event, DeckRevealed) and (event.game, event.hand) not in ended_so_far
            lines.append(_line(row, place, viewer, before, table, commitments, early))
    return lines


_TABLE_EVENTS = (
    TableCreated,
    PlayerSat,
    PlayerStood,
    GameStarted,
    DeckRevealed,
    TimedOut,
    SeatBack,
    PlayerReady,
    TableClosed,
)


def project(
    event: RecordEvent, viewer: Viewer, before: TableState, early: bool = False
) -> RecordEvent:
    """``event`` as ``viewer`` may see it; ``before`` is the table the event applies to.

    ``early`` marks a ``DeckRevealed`` logged before its hand ended (the actor never writes
    one): its salt and order are hidden from everyone but ``all``.
    """
    if isinstance(event, DeckCommitted):
        return msgspec.structs.replace(event, salt="")
    if isinstance(event, DeckRevealed) and early and viewer != EVERYTHING:
        return msgspec.structs.replace(event, salt="", order=(HIDDEN,) * len(event.order))
    if isinstance(event, TableCreated):
        hide = event.invite_code and viewer != EVERYTHING
        return msgspec.structs.replace(event, invite_code="") if hide else event
    if isinstance(event, _TABLE_EVENTS) or viewer == EVERYTHING:
        return event
    if before.game is None:  # pragma: no cover - the actor never logs a move without a game
        raise ReplayError(f"{type(event).__name__} before any game", "replay/bad_record")
    return redact(before.game, event, viewer if isinstance(viewer, int) else None)


def _names(table: TableState) -> tuple[str, ...]:
    return tuple(player or f"seat {seat}" for seat, player in enumerate(table.seats))


def _sorted(cards: Iterable[Card]) -> str:
    return format_cards(sorted(cards, key=lambda card: (card_face(card), card_copy(card))))


def _line(
    row: LogRow,
    place: _Place,
    viewer: Viewer,
    before: TableState,
    after: TableState,
    commitments: dict[tuple[int, int], str],
    early: bool,
) -> ReplayLine:
    event = project(row.record.event, viewer, before, early)
    names = _names(before)
    details: tuple[str, ...] = ()
    match event:
        case TableCreated():
            options = ", ".join(f"{key}={value}" for key, value in sorted(event.options.items()))
            text = (
                f"table {event.table_id} created by {event.host} on {format_time(row.at)}:"
                f" {event.variant}, {event.seats} seats"
                + (f", options {options}" if options else "")
                + (", private" if event.private else "")
                + (f", invite code {event.invite_code}" if event.invite_code else "")
                + (f", {event.move_seconds:g} s per move" if event.move_seconds else "")
            )
        case PlayerSat(seat=seat, player=player):
            text = f"{player} sits in seat {seat}"
        case PlayerStood(seat=seat, player=player):
            text = f"{player} leaves seat {seat}"
        case GameStarted(game=game, players=players):
            seated = ", ".join(f"{player} (seat {seat})" for seat, player in enumerate(players))
            text = f"game {game} starts on {format_time(row.at)}: {seated}"
        case DeckCommitted(hand=hand, commitment=commitment):
            text = f"hand {hand}: the deck order is committed, sha256 {commitment}"
        case DeckRevealed(hand=hand) if early:
            text = f"hand {hand}: the deck is revealed BEFORE the hand ended"
            if viewer != EVERYTHING:
                text += " (hidden here)"
        case DeckRevealed():
            text = _describe_reveal(event, commitments, before.deck)
        case TableClosed(reason=reason):
            text = f"the table is closed: {reason}"
        case TimedOut(seat=seat):
            text = f"{names[seat]}'s time is up: the server plays for him"
        case SeatBack(seat=seat):
            text = f"{names[seat]} plays again by himself"
        case PlayerReady(seat=seat):
            text = f"{names[seat]} is ready for the next hand"
        case _:
            assert before.game is not None
            text = describe_event(event, names, len(before.game.melds))
            details = _event_details(event, viewer, names, after)
    return ReplayLine(row.seq, row.at, place.game, place.hand, event, text, details)


def _event_details(
    event: EngineEvent, viewer: Viewer, names: Sequence[str], after: TableState
) -> tuple[str, ...]:
    assert after.game is not None
    state = after.game
    if isinstance(event, Dealt):
        if viewer == EVERYTHING:
            seats: Sequence[int] = range(state.players)
        else:
            seats = [viewer] if isinstance(viewer, int) else []
        lines = [
            f"{names[seat]} is dealt {_sorted(state.hands[seat])}"
            for seat in seats
            if state.hands[seat]
        ]
        if state.upcard is not None:
            lines.append(f"the upcard is {format_cards([state.upcard])}")
        return tuple(lines)
    if isinstance(event, HandEnded):
        lines = [
            f"{names[seat]} holds {_sorted(cards)}, counting {event.counts[seat]}"
            for seat, cards in enumerate(event.hands)
            if cards
        ]
        totals = ", ".join(f"{names[seat]} {total}" for seat, total in enumerate(event.totals))
        lines.append(f"totals: {totals}")
        if event.eliminated:
            lines.append("out of the game: " + ", ".join(names[s] for s in event.eliminated))
        return tuple(lines)
    return ()


def _describe_reveal(
    event: DeckRevealed, commitments: dict[tuple[int, int], str], dealt: tuple[int, ...]
) -> str:
    head = f"hand {event.hand}: the deck is revealed, salt {event.salt} ({len(event.order)} cards)"
    commitment = commitments.get((event.game, event.hand))
    if commitment is None:
        return f"{head}: NO commitment was published for it"
    if deck_commitment(event.salt, event.order) != commitment:
        return f"{head}: it does NOT match the commitment"
    if event.order != dealt:
        return f"{head}: it matches the commitment but NOT the order dealt"
    return f"{head}: it matches the commitment and the deal"


def format_line(line: ReplayLine) -> str:
    """A replay line as text: seq, UTC time of day, the sentence, then indented details."""
    head = f"{line.seq:>6}  {_clock_time(line.at)}  {line.text}"
    return "\n".join([head, *(f"{'':18}{detail}" for detail in line.details)])


# Fairness --------------------------------------------------------------------------------------

DealStatus: TypeAlias = Literal["ok", "mismatch", "in_progress", "unrevealed"]


@dataclass(frozen=True, slots=True)
class DealCheck:
    """The fairness check of one hand's deal.

    ``status`` is ``ok`` (the commitment published before the deal hashes the revealed salt
    and order, and that order is the one dealt), ``mismatch`` (``problems`` say what failed),
    ``in_progress`` (not revealed because the hand has not ended) or ``unrevealed`` (the hand
    ended but the log holds no reveal, so it cannot be checked).
    """

    game: int
    hand: int
    status: DealStatus
    problems: tuple[str, ...] = ()
    commitment: str = ""
    commitment_seq: int = 0
    deal_seq: int = 0
    reveal_seq: int = 0

    @property
    def mismatch(self) -> bool:
        """Whether the check failed."""
        return self.status == "mismatch"

    def to_json(self) -> dict[str, Any]:
        """The check as a JSON object."""
        return {
            "game": self.game,
            "hand": self.hand,
            "status": self.status,
            "problems": list(self.problems),
            "commitment": self.commitment,
            "commitment_seq": self.commitment_seq,
            "deal_seq": self.deal_seq,
            "reveal_seq": self.reveal_seq,
        }


@dataclass
class _HandLog:
    commitments: list[tuple[int, DeckCommitted]] = dataclasses.field(default_factory=list)
    deals: list[tuple[int, Dealt]] = dataclasses.field(default_factory=list)
    reveals: list[tuple[int, DeckRevealed]] = dataclasses.field(default_factory=list)
    ended_seq: int = 0


def verify_deals(
    rows: Sequence[LogRow], hand: int | None = None, game: int | None = None
) -> list[DealCheck]:
    """Check every dealt hand (or hand ``hand`` of ``game``, default the last game).

    Raises:
        ReplayError: ``replay/no_such_game`` or ``replay/no_such_hand``.
    """
    hands: dict[tuple[int, int], _HandLog] = {}
    for row, place in zip(rows, _places(rows)):
        event = row.record.event
        if not isinstance(event, DeckCommitted | Dealt | DeckRevealed | HandEnded):
            continue
        key = (place.game, event.hand)
        log = hands.setdefault(key, _HandLog())
        match event:
            case DeckCommitted():
                log.commitments.append((row.seq, event))
            case Dealt():
                log.deals.append((row.seq, event))
            case DeckRevealed():
                log.reveals.append((row.seq, event))
            case HandEnded():
                log.ended_seq = log.ended_seq or row.seq
    if hand is not None and game is None:
        game = _last_game(rows)
    if game is not None and not any(key[0] == game for key in hands):
        raise ReplayError(f"the table has no dealt game {game!r}", "replay/no_such_game")
    if hand is not None and (game, hand) not in hands:
        raise ReplayError(f"game {game!r} has no hand {hand!r}", "replay/no_such_hand")
    return [
        _check_hand(key, log)
        for key, log in hands.items()
        if (game is None or key[0] == game) and (hand is None or key[1] == hand)
    ]


def _check_hand(key: tuple[int, int], log: _HandLog) -> DealCheck:
    game, hand = key
    commitment_seq, committed = log.commitments[0] if log.commitments else (0, None)
    deal_seq, dealt = log.deals[0] if log.deals else (0, None)
    found = DealCheck(
        game,
        hand,
        "ok",
        commitment=committed.commitment if committed is not None else "",
        commitment_seq=commitment_seq,
        deal_seq=deal_seq,
        reveal_seq=log.reveals[-1][0] if log.reveals else 0,
    )
    problems: list[str] = []
    if committed is None:
        problems.append("no commitment was published for this hand")
    elif len(log.commitments) > 1:
        problems.append(f"the deck was committed {len(log.commitments)} times")
    if dealt is None:
        problems.append("the hand was never dealt")
    elif len(log.deals) > 1:
        problems.append(f"the hand was dealt {len(log.deals)} times")
    if committed is not None and dealt is not None and commitment_seq > deal_seq:
        problems.append(f"the commitment (seq {commitment_seq}) came after the deal")
    if not log.reveals:
        if problems:
            return dataclasses.replace(found, status="mismatch", problems=tuple(problems))
        if log.ended_seq:
            ended = f"the hand ended at seq {log.ended_seq} but its deck was never revealed"
            return dataclasses.replace(found, status="unrevealed", problems=(ended,))
        return dataclasses.replace(found, status="in_progress")
    if len(log.reveals) > 1:
        problems.append(f"the deck was revealed {len(log.reveals)} times")
    for reveal_seq, reveal in log.reveals:
        if committed is not None and (
            deck_commitment(reveal.salt, reveal.order) != committed.commitment
        ):
            problems.append(
                f"the salt and order revealed at seq {reveal_seq} do not hash to the commitment"
            )
        if dealt is not None and reveal.order != dealt.order:
            problems.append(
                f"the order revealed at seq {reveal_seq} is not the order dealt at seq {deal_seq}"
            )
    if problems:
        return dataclasses.replace(found, status="mismatch", problems=tuple(problems))
    return found


def format_deal_check(check: DealCheck) -> str:
    """One line per hand: ``ok``, ``MISMATCH`` with the problems, or why it is not checked."""
    head = f"game {check.game} hand {check.hand}:"
    match check.status:
        case "ok":
            return (
                f"{head} ok (commitment {check.commitment[:16]}... at seq {check.commitment_seq},"
                f" dealt at seq {check.deal_seq}, revealed at seq {check.reveal_seq})"
            )
        case "mismatch":
            return f"{head} MISMATCH: {'; '.join(check.problems)}"
        case "in_progress":
            return f"{head} not revealed yet (the hand is in progress)"
    return f"{head} NOT REVEALED: {'; '.join(check.problems)}"


# Tables ----------------------------------------------------------------------------------------


def summary_to_json(summary: TableSummary) -> dict[str, Any]:
    """A table summary as a JSON object."""
    return {
        "table_id": summary.table_id,
        "status": summary.status,
        "variant": summary.variant,
        "seats": list(summary.seats),
        "last_seq": summary.last_seq,
        "updated_at": summary.updated_at,
        "last_activity": _iso_time(summary.updated_at),
    }


def format_summary(summaries: Sequence[TableSummary]) -> list[str]:
    """The tables as aligned text columns under a header (or a line saying there are none)."""
    if not summaries:
        return ["no tables"]
    header = ("TABLE", "STATUS", "VARIANT", "SEATS", "LAST SEQ", "LAST ACTIVITY")
    rows = [
        (
            summary.table_id,
            summary.status,
            summary.variant,
            ", ".join(player or "(free)" for player in summary.seats),
            str(summary.last_seq),
            format_time(summary.updated_at),
        )
        for summary in summaries
    ]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(5)]
    return [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row[:5], widths)), row[5]]).rstrip()
        for row in [header, *rows]
    ]


# Time ------------------------------------------------------------------------------------------


def format_time(at: float) -> str:
    """A server time as ``2025-01-31 18:04:05 UTC``."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _clock_time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")


def _iso_time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
