"""A table as a fold of its log: who sits where, which game is on, and the game's state.

``TableState`` is rebuilt from records with ``fold``; the table actor decides new records with
``decide_table`` and appends them before applying them. Table commands (create, sit, stand,
start, rematch) are validated here; game commands go to the engine.
"""

from __future__ import annotations

import dataclasses
import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from server.engine import Dealt, HandEnded, State, evolve, is_over, new_game
from server.engine.game import Phase, chance, chance_pending
from server.engine.variants import make_rules
from server.tables.errors import NotSeated, TableError
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
)

__all__ = [
    "CreateTable",
    "Ready",
    "Rematch",
    "Sit",
    "Stand",
    "StartGame",
    "TableCommand",
    "TableState",
    "between_hands",
    "chance_records",
    "decide_table",
    "empty_table",
    "fold",
    "reveal_records",
]


class Sit(msgspec.Struct, frozen=True, tag="sit"):
    """Take seat ``seat`` (-1: the first free one)."""

    seat: int = -1


class Stand(msgspec.Struct, frozen=True, tag="stand"):
    """Leave your seat (only before a game starts or after it ends)."""


class StartGame(msgspec.Struct, frozen=True, tag="start"):
    """Start the game once every seat is taken."""


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    """Ready for the next deal (between hands, at a table with a hand pause)."""


class Rematch(msgspec.Struct, frozen=True, tag="rematch"):
    """Start a new game with the same players after the last one ended."""


class CreateTable(msgspec.Struct, frozen=True, tag="create"):
    """Create a table (the sender becomes its host)."""

    variant: str
    options: dict[str, object] = {}
    seats: int = 2
    private: bool = False
    move_seconds: float = 0.0
    max_timeouts: int = 3
    hand_pause_seconds: float = 0.0


TableCommand = CreateTable | Sit | Stand | StartGame | Ready | Rematch


@dataclass(frozen=True, slots=True)
class TableState:
    """A table's state: the fold of its records."""

    table_id: str
    seq: int = 0
    created: TableCreated | None = None
    seats: tuple[str, ...] = ()
    """Player in each seat ("" when free)."""
    game_number: int = 0
    game: State | None = None
    salt: str = ""
    """The salt of the current hand's deck commitment (server-side only until revealed)."""
    deck: tuple[int, ...] = ()
    """The current hand's deck order (server-side only until revealed)."""
    timeouts: tuple[int, ...] = ()
    """Each seat's timeouts in a row in the current game."""
    ready: tuple[bool, ...] = ()
    """Between hands: the seats ready for the next deal (empty otherwise)."""
    closed: bool = False

    @property
    def status(self) -> str:
        """``waiting``, ``playing``, ``finished`` or ``closed``."""
        if self.closed:
            return "closed"
        if self.game is None:
            return "waiting"
        return "finished" if is_over(self.game) else "playing"

    def seat_of(self, player: str) -> int:
        """The seat ``player`` sits in.

        Raises:
            NotSeated: he has none.
        """
        try:
            return self.seats.index(player)
        except ValueError:
            raise NotSeated(f"{player!r} has no seat at table {self.table_id!r}") from None


def empty_table(table_id: str) -> TableState:
    """A table before its first record."""
    return TableState(table_id)


_TABLE_EVENTS = (
    TableCreated,
    PlayerSat,
    PlayerStood,
    GameStarted,
    TimedOut,
    SeatBack,
    DeckCommitted,
    DeckRevealed,
    PlayerReady,
    TableClosed,
)
"""The records of the table itself; the others are the game's."""

_FIELDS = (
    "table_id",
    "seq",
    "created",
    "seats",
    "game_number",
    "game",
    "salt",
    "deck",
    "timeouts",
    "ready",
    "closed",
)
assert _FIELDS == tuple(field.name for field in dataclasses.fields(TableState)), (
    "_moved passes TableState's fields by position: update it with them"
)


def _moved(table: TableState, seq: int, game: State) -> TableState:
    """``table`` at ``seq`` with ``game``: ``dataclasses.replace`` written out, which takes a
    third of the time (loading a table folds every game event after its snapshot)."""
    return TableState(
        table.table_id,
        seq,
        table.created,
        table.seats,
        table.game_number,
        game,
        table.salt,
        table.deck,
        table.timeouts,
        table.ready,
        table.closed,
    )


def fold(table: TableState, record: Record, seq: int) -> TableState:
    """Apply one record (the ``seq``-th of the log). Never fails on records the actor wrote."""
    event = record.event
    if not isinstance(event, _TABLE_EVENTS):  # most records: the game's, on their fast path
        state = table.game
        assert state is not None
        if isinstance(event, Dealt):
            dealt = evolve(state, event)
            return dataclasses.replace(table, seq=seq, game=dealt, deck=event.order, ready=())
        return _moved(table, seq, evolve(state, event))
    replace = dataclasses.replace
    match event:
        case TableCreated(seats=count):
            return replace(table, seq=seq, created=event, seats=("",) * count)
        case PlayerSat(seat=seat, player=player):
            taken = table.seats[:seat] + (player,) + table.seats[seat + 1 :]
            return replace(table, seq=seq, seats=taken)
        case PlayerStood(seat=seat):
            freed = table.seats[:seat] + ("",) + table.seats[seat + 1 :]
            return replace(table, seq=seq, seats=freed)
        case GameStarted(game=game):
            assert table.created is not None
            created = table.created
            rules = make_rules(created.variant, created.options, created.seats)
            return replace(
                table,
                seq=seq,
                game_number=game,
                game=new_game(rules),
                timeouts=(0,) * created.seats,
            )
        case TimedOut(seat=seat):
            counts = (
                table.timeouts[:seat] + (table.timeouts[seat] + 1,) + table.timeouts[seat + 1 :]
            )
            return replace(table, seq=seq, timeouts=counts)
        case SeatBack(seat=seat):
            counts = table.timeouts[:seat] + (0,) + table.timeouts[seat + 1 :]
            return replace(table, seq=seq, timeouts=counts)
        case DeckCommitted(salt=salt):
            return replace(table, seq=seq, salt=salt)
        case DeckRevealed():
            return replace(table, seq=seq, salt="", deck=())
        case PlayerReady(seat=seat):
            ready = table.ready or (False,) * len(table.seats)
            return replace(table, seq=seq, ready=ready[:seat] + (True,) + ready[seat + 1 :])
        case TableClosed():
            return replace(table, seq=seq, closed=True)
    raise AssertionError(f"a table record with no case: {event!r}")  # pragma: no cover


def _require_created(table: TableState) -> TableCreated:
    if table.created is None:
        raise TableError(f"there is no table {table.table_id!r}", "table/unknown")
    return table.created


def decide_table(table: TableState, sender: str, command: TableCommand) -> list[RecordEvent]:
    """The records a table command produces (validated; the table is unchanged).

    Raises:
        TableError: the command does not fit the table (coded ``table/*``).
        VariantError: a new table's variant or options are invalid.
    """
    if table.closed and not isinstance(command, CreateTable):
        raise TableError("the table is closed", "table/closed")
    match command:
        case CreateTable(variant=variant, options=options, seats=seats):
            if table.created is not None:
                raise TableError(f"table {table.table_id!r} exists already", "table/exists")
            make_rules(variant, options, seats)
            created = TableCreated(
                table_id=table.table_id,
                variant=variant,
                options=dict(options),
                seats=seats,
                host=sender,
                private=command.private,
                invite_code=secrets.token_urlsafe(6) if command.private else "",
                move_seconds=command.move_seconds,
                max_timeouts=command.max_timeouts,
                hand_pause_seconds=command.hand_pause_seconds,
            )
            return [created]
        case Ready():
            seat = table.seat_of(sender)
            if not between_hands(table):
                raise TableError("there is no hand to wait for now", "table/not_between_hands")
            if table.ready and table.ready[seat]:
                raise TableError("you are ready already", "table/already_ready")
            return [PlayerReady(seat)]
        case Sit(seat=seat):
            _require_created(table)
            if sender in table.seats:
                raise TableError("you already have a seat here", "table/already_seated")
            if table.game is not None and not is_over(table.game):
                raise TableError("the game is under way", "table/game_running")
            free = [index for index, player in enumerate(table.seats) if not player]
            if seat < 0:
                if not free:
                    raise TableError("the table is full", "table/full")
                seat = free[0]
            if seat not in free:
                raise TableError(f"seat {seat!r} is not free", "table/seat_taken")
            return [PlayerSat(seat=seat, player=sender)]
        case Stand():
            seat = table.seat_of(sender)
            if table.game is not None and not is_over(table.game):
                raise TableError("you cannot stand while the game is on", "table/game_running")
            return [PlayerStood(seat=seat, player=sender)]
        case StartGame() | Rematch():
            _require_created(table)
            table.seat_of(sender)
            if not all(table.seats):
                raise TableError("every seat must be taken first", "table/not_full")
            if table.game is not None and not is_over(table.game):
                raise TableError("a game is already under way", "table/game_running")
            if isinstance(command, StartGame) and table.game is not None:
                raise TableError("the game was played; ask for a rematch", "table/game_over")
            return [GameStarted(game=table.game_number + 1, players=table.seats)]
    raise TableError(f"unknown table command {command!r}", "table/unknown_command")


def chance_records(
    table: TableState, rng: random.Random, new_salt: Callable[[], str]
) -> list[RecordEvent]:
    """Records due from chance now: a committed deal, or a rebuilt stock; ``[]`` if none.

    A deal is preceded by the commitment to its deck order; the salt travels in that record
    (the server's log is private) and is stripped from everything published until the hand's
    ``DeckRevealed``.
    """
    game = table.game
    if game is None or is_over(game) or not chance_pending(game) or between_hands(table):
        return []
    event = chance(game, rng)
    if isinstance(event, Dealt):
        salt = new_salt()
        commitment = DeckCommitted(
            game=table.game_number,
            hand=event.hand,
            commitment=deck_commitment(salt, event.order),
            salt=salt,
        )
        return [commitment, event]
    return [event]


def between_hands(table: TableState) -> bool:
    """Whether the next deal waits for players' ``ready`` (a table with a hand pause, after a
    hand of a game that goes on, until every active seat is ready)."""
    created = table.created
    game = table.game
    if created is None or created.hand_pause_seconds <= 0 or game is None or is_over(game):
        return False
    if game.phase is not Phase.DEAL or game.hand_number < 1:
        return False
    ready = table.ready or (False,) * len(table.seats)
    return not all(ready[seat] for seat, playing in enumerate(game.active) if playing)


def reveal_records(table: TableState, events: list[RecordEvent]) -> list[RecordEvent]:
    """The ``DeckRevealed`` due after ``events`` if they end a hand (appended with them)."""
    game = table.game
    if game is None:
        return []
    for event in events:
        if isinstance(event, HandEnded):
            return [
                DeckRevealed(
                    game=table.game_number,
                    hand=event.hand,
                    salt=table.salt,
                    order=table.deck,
                )
            ]
    return []
