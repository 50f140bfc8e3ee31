"""Commands (what a seat asks for) and events (what happened), as frozen msgspec Structs.

Both are tagged unions (``type`` field) so they encode to msgpack and back without loss. Cards
are ints (see ``cards``); score amounts are exact fractions written as text (``"25"``,
``"25/2"``) because a hand settled by differences may split points among tied players.

Commands are validated by ``decide``; events are trusted by ``evolve``.

Every struct here is ``gc=False``: it holds only data (numbers, text, tuples and other such
structs), so it can never be part of a reference cycle, and the garbage collector need not
track the many a server or a bot keeps and decodes. Put nothing in one that refers back to it.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from protocol.cards import Card, Face, format_card, format_face, is_joker

__all__ = [
    "COMMAND_TYPES",
    "Claim",
    "ClaimAnswered",
    "ClaimWindowClosed",
    "ClaimWindowOpened",
    "Claimed",
    "Command",
    "Dealt",
    "DeckCommitted",
    "DeckRevealed",
    "Declined",
    "Discard",
    "Discarded",
    "DrawStock",
    "Drew",
    "Event",
    "Floated",
    "GameEnded",
    "GameStarted",
    "HandEnded",
    "Knock",
    "Knocked",
    "LaidOff",
    "LayOff",
    "Meld",
    "MeldSpec",
    "MeldView",
    "Melded",
    "Pass",
    "PlayerReady",
    "PlayerSat",
    "PlayerStood",
    "SeatBack",
    "SeatForfeited",
    "StockRebuilt",
    "SwapJoker",
    "SwappedJoker",
    "TableClosed",
    "TableCreated",
    "TableEvent",
    "TakeDiscard",
    "TimedOut",
    "TookDiscard",
    "UpcardPassed",
    "View",
    "describe_command",
    "format_spec",
]


class MeldSpec(msgspec.Struct, frozen=True, gc=False):
    """Cards for one new meld and the face each stands for (a joker's declared card)."""

    cards: tuple[Card, ...]
    faces: tuple[Face, ...]


# Commands --------------------------------------------------------------------------------------


class DrawStock(msgspec.Struct, frozen=True, gc=False, tag="draw_stock"):
    """Draw the top card of the stock."""


class TakeDiscard(msgspec.Struct, frozen=True, gc=False, tag="take_discard"):
    """Take the upcard (``count`` = 1) or, where allowed, that many cards from the pile's top."""

    count: int = 1


class Meld(msgspec.Struct, frozen=True, gc=False, tag="meld"):
    """Lay down one or more new melds from the hand."""

    melds: tuple[MeldSpec, ...]


class LayOff(msgspec.Struct, frozen=True, gc=False, tag="lay_off"):
    """Add ``card`` (standing for ``face``) to table meld number ``target``."""

    card: Card
    target: int
    face: Face


class SwapJoker(msgspec.Struct, frozen=True, gc=False, tag="swap_joker"):
    """Put natural ``card`` in place of the joker standing for it in table meld ``target``."""

    card: Card
    target: int


class Discard(msgspec.Struct, frozen=True, gc=False, tag="discard"):
    """Discard ``card`` face up, ending the turn."""

    card: Card


class Pass(msgspec.Struct, frozen=True, gc=False, tag="pass"):
    """Decline: the pile when the stock is empty (the hand then ends), or a claim window."""


class Claim(msgspec.Struct, frozen=True, gc=False, tag="claim"):
    """Claim out of turn in an open claim window: ``count`` cards from the pile's top.

    Rummy 500's "Rummy!" call takes the claimable card and every card above it; Ramino's
    ``bussare`` takes the upcard (``count`` = 1) and two cards from the stock.
    """

    count: int = 1


class Knock(msgspec.Struct, frozen=True, gc=False, tag="knock"):
    """Discard ``card`` and knock, ending the hand (Knock Rummy, Gin Rummy).

    ``card`` is -1 for big gin (all eleven cards melded, no discard). ``melds`` may give the
    arrangement the knocker lays out; empty lets the engine lay out the one with the least
    deadwood.
    """

    card: Card
    melds: tuple[MeldSpec, ...] = ()


Command: TypeAlias = (
    DrawStock | TakeDiscard | Meld | LayOff | SwapJoker | Discard | Pass | Claim | Knock
)
COMMAND_TYPES = (DrawStock, TakeDiscard, Meld, LayOff, SwapJoker, Discard, Pass, Claim, Knock)
"""The classes of ``Command``, for ``isinstance``."""

# Events ----------------------------------------------------------------------------------------


class Dealt(msgspec.Struct, frozen=True, gc=False, tag="dealt"):
    """A new hand: the whole pack in shuffled order (chance), and who deals.

    Cards are dealt one at a time from the front of ``order`` starting left of the dealer; the
    next card is the upcard and the rest is the stock, drawn from the front. ``cuts`` holds the
    cards cut to choose the first dealer (``dealer=lowest_card``), one per seat, else empty.
    """

    hand: int
    dealer: int
    order: tuple[Card, ...]
    cuts: tuple[Card, ...] = ()


class Drew(msgspec.Struct, frozen=True, gc=False, tag="drew"):
    """``seat`` drew ``card`` from the stock. Other seats see ``card`` as -1."""

    seat: int
    card: Card


class TookDiscard(msgspec.Struct, frozen=True, gc=False, tag="took_discard"):
    """``seat`` took ``cards`` (top of the pile last) from the discard pile."""

    seat: int
    cards: tuple[Card, ...]


class Melded(msgspec.Struct, frozen=True, gc=False, tag="melded"):
    """``seat`` laid down new melds (canonical order); they get the next table indices."""

    seat: int
    melds: tuple[MeldSpec, ...]


class LaidOff(msgspec.Struct, frozen=True, gc=False, tag="laid_off"):
    """``seat`` added ``card`` as ``face`` to table meld ``target``."""

    seat: int
    card: Card
    target: int
    face: Face


class SwappedJoker(msgspec.Struct, frozen=True, gc=False, tag="swapped_joker"):
    """``seat`` put ``card`` into meld ``target`` and took ``joker`` into his hand."""

    seat: int
    card: Card
    target: int
    joker: Card


class Discarded(msgspec.Struct, frozen=True, gc=False, tag="discarded"):
    """``seat`` discarded ``card``."""

    seat: int
    card: Card


class StockRebuilt(msgspec.Struct, frozen=True, gc=False, tag="stock_rebuilt"):
    """The discard pile became the stock, in ``order`` (drawn from the front). Chance."""

    order: tuple[Card, ...]
    shuffled: bool


class Declined(msgspec.Struct, frozen=True, gc=False, tag="declined"):
    """``seat`` declined the upcard with the stock exhausted."""

    seat: int


class UpcardPassed(msgspec.Struct, frozen=True, gc=False, tag="upcard_passed"):
    """``seat`` declined the first upcard (Gin Rummy)."""

    seat: int


class Knocked(msgspec.Struct, frozen=True, gc=False, tag="knocked"):
    """``seat`` discarded ``card`` (-1: none, big gin) and knocked, showing ``melds`` and
    ``deadwood`` unmatched points."""

    seat: int
    card: Card
    melds: tuple[MeldSpec, ...]
    deadwood: int


class SeatForfeited(msgspec.Struct, frozen=True, gc=False, tag="seat_forfeited"):
    """``seat`` missed too many turns in a row: the server plays for it from now on, it can
    no longer win a hand, and in Ramino it is eliminated when the hand ends."""

    seat: int


class Floated(msgspec.Struct, frozen=True, gc=False, tag="floated"):
    """``seat`` laid down his last cards without a discard and floats: the hand goes on."""

    seat: int


class ClaimWindowOpened(msgspec.Struct, frozen=True, gc=False, tag="claim_window_opened"):
    """After a discard, ``seats`` (in priority order) may claim out of turn or pass.

    ``depths`` are the pile depths that may be claimed (1 = the upcard).
    """

    kind: str
    seats: tuple[int, ...]
    depths: tuple[int, ...]


class ClaimAnswered(msgspec.Struct, frozen=True, gc=False, tag="claim_answered"):
    """``seat`` answered the claim window: ``count`` cards claimed, or 0 for a pass."""

    seat: int
    count: int


class Claimed(msgspec.Struct, frozen=True, gc=False, tag="claimed"):
    """The window resolved for ``seat``: he takes ``cards`` from the pile (bottom first) and,
    with ``bussare``, ``stock_cards`` from the stock (hidden from the others)."""

    seat: int
    cards: tuple[Card, ...]
    stock_cards: tuple[Card, ...] = ()


class ClaimWindowClosed(msgspec.Struct, frozen=True, gc=False, tag="claim_window_closed"):
    """Everyone passed; the next player draws as usual."""


class HandEnded(msgspec.Struct, frozen=True, gc=False, tag="hand_ended"):
    """A hand is over: every hand revealed, what each seat scores, and the totals after it.

    ``winner`` is the seat that did best in the hand: the most ``points`` (under ``penalty``
    scoring, Ramino's included, the fewest), or -1 when no seat did strictly better than every
    other (a tie at the top, a Gin Rummy tie, a void hand). ``ended_by`` is the seat that went
    out or knocked, or -1 when no one did (``reason`` says why the hand ended). The two differ,
    for example, when a Knock Rummy opponent undercuts the knocker.
    """

    hand: int
    winner: int
    reason: str
    rummy: bool
    hands: tuple[tuple[Card, ...], ...]
    counts: tuple[int, ...]
    points: tuple[str, ...]
    totals: tuple[str, ...]
    eliminated: tuple[int, ...] = ()
    """Seats whose total went past the target (Ramino); they leave the game."""
    shown: tuple[tuple[MeldSpec, ...], ...] = ()
    """Knock and Gin Rummy: the melds each seat showed (``counts`` are then unmatched points)."""
    laid_off: tuple[Card, ...] = ()
    """Gin Rummy: the cards the defender laid off on the knocker's melds."""
    ended_by: int = -1
    """The seat that went out or knocked; -1 when no one did (block, wall, safety cap)."""


class GameEnded(msgspec.Struct, frozen=True, gc=False, tag="game_ended"):
    """The game is over; ``winners`` share the win."""

    winners: tuple[int, ...]
    totals: tuple[str, ...]


Event: TypeAlias = (
    Dealt
    | Drew
    | TookDiscard
    | Melded
    | LaidOff
    | SwappedJoker
    | Discarded
    | StockRebuilt
    | Declined
    | SeatForfeited
    | UpcardPassed
    | Knocked
    | Floated
    | ClaimWindowOpened
    | ClaimAnswered
    | Claimed
    | ClaimWindowClosed
    | HandEnded
    | GameEnded
)


# Table events: a table's life outside the rules ----------------------------------------------


class TableCreated(msgspec.Struct, frozen=True, gc=False, tag="table_created"):
    """A table exists: its variant and options (validated), seats and settings."""

    table_id: str
    variant: str
    options: dict[str, Any]
    seats: int
    host: str
    private: bool = False
    invite_code: str = ""
    move_seconds: float = 0.0
    """Move timer in seconds (0: no timer)."""
    max_timeouts: int = 3
    """Timeouts in a row after which the server plays for the seat for good (0: never)."""
    hand_pause_seconds: float = 0.0
    """Between hands, wait this long for every player's ``ready`` before the next deal (0:
    deal at once)."""


class PlayerSat(msgspec.Struct, frozen=True, gc=False, tag="player_sat"):
    """``player`` took seat ``seat``."""

    seat: int
    player: str


class PlayerStood(msgspec.Struct, frozen=True, gc=False, tag="player_stood"):
    """``player`` left seat ``seat``."""

    seat: int
    player: str


class GameStarted(msgspec.Struct, frozen=True, gc=False, tag="game_started"):
    """Game number ``game`` begins with the players in their seats (a rematch is game 2, ...)."""

    game: int
    players: tuple[str, ...]


class DeckCommitted(msgspec.Struct, frozen=True, gc=False, tag="deck_committed"):
    """Before a deal: the hash of salt + deck order, shown to every seat.

    ``salt`` is kept in the server's log and stripped from every published copy until the
    hand's ``DeckRevealed``.
    """

    game: int
    hand: int
    commitment: str
    salt: str = ""


class DeckRevealed(msgspec.Struct, frozen=True, gc=False, tag="deck_revealed"):
    """After a hand: the salt and the deck order, so anyone can check the commitment."""

    game: int
    hand: int
    salt: str
    order: tuple[int, ...]


class TimedOut(msgspec.Struct, frozen=True, gc=False, tag="timed_out"):
    """``seat``'s time ran out; the server plays its turn (the moves follow)."""

    seat: int


class SeatBack(msgspec.Struct, frozen=True, gc=False, tag="seat_back"):
    """``seat`` moved by itself again after timeouts: its count starts over."""

    seat: int


class PlayerReady(msgspec.Struct, frozen=True, gc=False, tag="player_ready"):
    """Between hands, ``seat`` is ready for the next deal (the server marks everyone ready
    when the pause runs out)."""

    seat: int


class TableClosed(msgspec.Struct, frozen=True, gc=False, tag="table_closed"):
    """The table is closed for good (a table waiting for players that expired)."""

    reason: str


TableEvent: TypeAlias = (
    TableCreated
    | PlayerSat
    | PlayerStood
    | GameStarted
    | DeckCommitted
    | DeckRevealed
    | TimedOut
    | SeatBack
    | PlayerReady
    | TableClosed
)


# Views -----------------------------------------------------------------------------------------


class MeldView(msgspec.Struct, frozen=True, gc=False):
    """A table meld: its cards, what each stands for, and who laid each."""

    kind: str
    cards: tuple[Card, ...]
    faces: tuple[Face, ...]
    owners: tuple[int, ...]


class View(msgspec.Struct, frozen=True, gc=False):
    """A state as one seat (``seat`` >= 0) or a spectator (``seat`` = -1) sees it."""

    variant: str
    options: dict[str, Any]
    players: int
    seat: int
    phase: str
    hand_number: int
    dealer: int
    turn: int
    to_move: int
    scores: tuple[str, ...]
    active: tuple[bool, ...]
    hand: tuple[Card, ...]
    """The viewer's own cards (empty for a spectator)."""
    hand_sizes: tuple[int, ...]
    stock_size: int
    pile: tuple[Card, ...]
    """The whole discard pile, upcard last (every discard was seen by everyone)."""
    melds: tuple[MeldView, ...]
    taken: tuple[Card, ...]
    """Cards the seat to move took from the pile this turn."""
    melds_this_turn: int
    stock_reuses: int
    melded: tuple[bool, ...]
    """Seats that have melded this hand (in Ramino: that have opened)."""
    required: Card
    """A card the seat to move must lay down before his turn can end (-1: none)."""
    claim_kind: str
    """``rummy`` or ``bussare`` while a claim window is open, else empty."""
    claim_seats: tuple[int, ...]
    claim_answers: tuple[int, ...]
    """Parallel to ``claim_seats``: 0 waiting, -1 passed, n > 0 claimed n cards."""
    knock_limit: int
    """Gin Rummy: the most deadwood a knock may leave this hand."""
    upcard_passes: int
    """Gin Rummy: how many players declined the first upcard."""
    hands_won: tuple[int, ...]
    """Gin Rummy: hands each seat has won (boxes)."""
    forfeited: tuple[bool, ...]
    """Seats the server plays for after repeated timeouts."""
    winners: tuple[int, ...]
    last_result: HandEnded | None


def format_spec(spec: MeldSpec) -> str:
    """A meld in card notation, jokers with the card they stand for: ``7H 8H JK=9H``."""
    return " ".join(
        f"{format_card(card)}={format_face(face)}" if is_joker(card) else format_card(card)
        for card, face in zip(spec.cards, spec.faces)
    )


def describe_command(command: Command) -> str:
    """A short readable form of a command, e.g. ``discard 7H`` or ``meld [7H 8H 9H]``."""
    match command:
        case DrawStock():
            return "draw stock"
        case TakeDiscard(count=count):
            return "take discard" if count == 1 else f"take {count} from discard pile"
        case Meld(melds=melds):
            return "meld " + " ".join(f"[{format_spec(spec)}]" for spec in melds)
        case LayOff(card=card, target=target, face=face):
            shown = format_spec(MeldSpec((card,), (face,)))
            return f"lay off {shown} on meld {target}"
        case SwapJoker(card=card, target=target):
            return f"swap {format_card(card)} for the joker in meld {target}"
        case Discard(card=card):
            return f"discard {format_card(card)}"
        case Pass():
            return "pass"
        case Claim(count=count):
            return "claim the upcard" if count == 1 else f"claim {count} cards from the pile"
        case Knock(card=card):
            return "knock (big gin)" if card < 0 else f"knock, discarding {format_card(card)}"
    raise AssertionError(f"unknown command {command!r}")  # pragma: no cover
