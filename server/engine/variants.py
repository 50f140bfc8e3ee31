"""Variants as data: presets, table options and the resolved ``Rules`` a game is played by.

A *preset* (``basic``, ``wrotham``, ...) is a name, a description, a player range and a set of
default option values; a table creator may override any option the preset lists. ``make_rules``
validates the overrides (unknown option, wrong type, value out of range, contradictory options:
each a ``VariantError`` naming the option) and resolves everything that depends on the number of
players into one frozen ``Rules`` object that the state machine reads.

>>> rules = make_rules("basic", {"going_rummy": "plus10"}, players=3)
>>> (rules.hand_size, rules.going_rummy)
(7, 'plus10')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol.cards import JOKER, face_rank
from server.engine.errors import VariantError
from server.engine.melds import AceMode, MeldRules

__all__ = [
    "OPTIONS",
    "VARIANTS",
    "OptionSpec",
    "Preset",
    "Rules",
    "find_variant",
    "make_rules",
    "parse_option_value",
]

UNLIMITED = "unlimited"


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One table option: its type, allowed values and meaning."""

    name: str
    kind: str
    """``bool``, ``int``, ``choice`` or ``int_or_unlimited``."""
    help: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None

    def validate(self, value: object) -> object:
        """Return ``value`` checked (and normalised) for this option.

        Raises:
            VariantError: the value has the wrong type or is out of range.
        """
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise VariantError(
                    f"option {self.name!r} takes true or false, got {value!r}", "variant/bad_option"
                )
            return value
        if self.kind == "choice":
            if value not in self.choices:
                raise VariantError(
                    f"option {self.name!r} takes one of {', '.join(self.choices)}, got {value!r}",
                    "variant/bad_option",
                )
            return value
        if self.kind == "int_or_unlimited" and (value is None or value == UNLIMITED):
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise VariantError(
                f"option {self.name!r} takes an integer"
                + (" or 'unlimited'" if self.kind == "int_or_unlimited" else "")
                + f", got {value!r}",
                "variant/bad_option",
            )
        if (self.minimum is not None and value < self.minimum) or (
            self.maximum is not None and value > self.maximum
        ):
            raise VariantError(
                f"option {self.name!r} must be between {self.minimum} and {self.maximum},"
                f" got {value!r}",
                "variant/bad_option",
            )
        return value

    def describe_type(self) -> str:
        """A short human description of the accepted values."""
        if self.kind == "choice":
            return " | ".join(self.choices)
        if self.kind == "int_or_unlimited":
            return "integer | unlimited"
        return "true | false" if self.kind == "bool" else "integer"


def _option(name: str, kind: str, help: str, **extra: Any) -> tuple[str, OptionSpec]:
    return name, OptionSpec(name, kind, help, **extra)


OPTIONS: dict[str, OptionSpec] = dict(
    [
        _option("decks", "int", "Number of 52-card decks.", minimum=1, maximum=4),
        _option(
            "jokers",
            "int",
            "Number of jokers: in the whole pack, or per deck where the preset says so"
            " (rummy500, ramino_classic: 0 or 2 per deck).",
            minimum=0,
            maximum=12,
        ),
        _option(
            "ace",
            "choice",
            "Where an ace may sit in a run: low (A-2-3), high_or_low (also Q-K-A), around"
            " (also K-A-2). When aces can be high, an ace left in hand is worth 15.",
            choices=tuple(mode.value for mode in AceMode),
        ),
        _option(
            "melds_per_turn",
            "choice",
            "How many new melds a player may lay down in one turn.",
            choices=("1", UNLIMITED),
        ),
        _option(
            "going_rummy",
            "choice",
            "Effect of going out in one turn without having melded or laid off before:"
            " none, double (what changes hands is doubled) or plus10 (10 more change hands).",
            choices=("none", "double", "plus10"),
        ),
        _option(
            "layoff_requires_own_meld",
            "bool",
            "No lay-off before the player's own first meld of the hand.",
        ),
        _option(
            "must_discard_to_go_out",
            "bool",
            "The last card must be a discard: melds and lay-offs must leave a card to discard.",
        ),
        _option(
            "stock_exhausted",
            "choice",
            "When the stock runs out: turn_over (the discard pile, not shuffled, becomes the"
            " stock), shuffle (the same, shuffled) or block (the hand ends when the player to"
            " move does not take the upcard).",
            choices=("turn_over", "shuffle", "block"),
        ),
        _option(
            "max_stock_reuses",
            "int_or_unlimited",
            "How many times the discard pile may become the stock; past it the hand ends as"
            " with block.",
            minimum=0,
            maximum=1000,
        ),
        _option(
            "scoring",
            "choice",
            "winner_collects (the winner scores the other hands), penalty (each loser scores"
            " his own hand; lowest total wins) or pay_winner (each loser pays the winner; zero-sum,"
            " fixed number of deals).",
            choices=("winner_collects", "penalty", "pay_winner"),
        ),
        _option(
            "target",
            "int_or_unlimited",
            "Score that ends the game when reached (in ramino: a penalty total above it"
            " eliminates the player); unlimited when the game is a fixed number of deals.",
            minimum=1,
            maximum=100_000,
        ),
        _option(
            "deals",
            "int_or_unlimited",
            "Fixed number of deals in the game (instead of a target).",
            minimum=1,
            maximum=1000,
        ),
        _option(
            "dealer",
            "choice",
            "How the first dealer is chosen: random, or lowest_card (everyone cuts; lowest deals).",
            choices=("random", "lowest_card"),
        ),
        _option(
            "joker_swap",
            "bool",
            "A player holding the natural card a table joker stands for may exchange it for the"
            " joker on his turn.",
        ),
        _option("joker_value", "int", "Value of a joker left in hand.", minimum=0, maximum=100),
        _option(
            "values",
            "choice",
            "Card values: standard (pip, J/Q/K 10, ace 15 but 1 below a 2 in a run, joker 15)"
            " or 5_10_15 (2-9 5, 10-K 10, ace and joker 15, no A-2-3 exception).",
            choices=("standard", "5_10_15"),
        ),
        _option(
            "top_discard_must_be_used",
            "bool",
            "The upcard, like any deeper discard, may be taken only to be melded or laid off"
            " in the same turn.",
        ),
        _option(
            "floating",
            "bool",
            "A player who melds his last cards without discarding floats: the hand goes on"
            " and he plays on from an empty hand at his next turn.",
        ),
        _option(
            "unplayable_last_discard",
            "bool",
            "The card discarded to go out must not be playable on any meld on the table.",
        ),
        _option(
            "open_to_take_upcard",
            "bool",
            "Before his opening a player may take the upcard only to open with it in the same"
            " turn.",
        ),
        _option(
            "chiudere_in_mano",
            "bool",
            "A player may open and close in the same turn (off: he may not).",
        ),
        _option(
            "bussare",
            "bool",
            "3-4 players: after a discard, any player but the discarder and the next player may"
            " claim the upcard; he takes it plus 2 stock cards and plays a full turn at once.",
        ),
        _option(
            "tie_goes_to",
            "choice",
            "Who wins a tie between knocker and opponent: knocker (collects 0) or opponent"
            " (collects 0 + 10).",
            choices=("knocker", "opponent"),
        ),
        _option(
            "literal_bonus",
            "bool",
            "Knock Rummy: an opponent with a lower count than the knocker collects the"
            " knocker's points + 10 (the seed's literal wording) instead of the difference + 10.",
        ),
        _option(
            "rummy_bonus",
            "int",
            "Knock Rummy: what the knocker collects from each opponent for knocking with no"
            " unmatched card.",
            minimum=0,
            maximum=1000,
        ),
        _option(
            "knock_limit",
            "int",
            "Gin Rummy: the most deadwood a player may knock with (0: gin only).",
            minimum=0,
            maximum=10,
        ),
        _option(
            "oklahoma",
            "bool",
            "Gin Rummy: the first upcard's value sets the knock limit; an ace means gin only.",
        ),
        _option("gin_bonus", "int", "Gin Rummy: bonus for going gin.", minimum=0, maximum=1000),
        _option(
            "undercut_bonus",
            "int",
            "Gin Rummy: bonus to a defender whose deadwood is at most the knocker's.",
            minimum=0,
            maximum=1000,
        ),
        _option(
            "undercut_on_tie",
            "bool",
            "Gin Rummy: a tie in deadwood is an undercut (off: a tie scores nothing).",
        ),
        _option(
            "big_gin_bonus",
            "int",
            "Gin Rummy: bonus for melding all 11 cards without a discard (0: big gin is off).",
            minimum=0,
            maximum=1000,
        ),
        _option(
            "box_bonus",
            "int",
            "Gin Rummy: points per hand won, added at the end of the game.",
            minimum=0,
            maximum=1000,
        ),
        _option(
            "game_bonus",
            "int",
            "Gin Rummy: bonus to the winner of the game.",
            minimum=0,
            maximum=1000,
        ),
        _option(
            "shutout",
            "choice",
            "Gin Rummy: when the loser won no hand, the winner's total is doubled, gets 100"
            " more, or nothing changes.",
            choices=("double", "plus100", "off"),
        ),
        _option(
            "idle_turn_cap",
            "int",
            "Safety cap: after this many consecutive turns in which no card was melded or laid"
            " off (in knock and gin: no card was drawn from the stock), the hand ends as if no"
            " one went out.",
            minimum=4,
            maximum=10_000,
        ),
    ]
)


@dataclass(frozen=True, slots=True)
class Preset:
    """A named variant: its defaults and which options a table may change."""

    name: str
    title: str
    description: str
    min_players: int
    max_players: int
    defaults: Mapping[str, object]
    """Every rule setting of the preset (options and fixed settings alike)."""
    options: tuple[str, ...]
    """The settings a table creator may change."""
    hand_sizes: Mapping[int, int]
    """Cards dealt to each player, by number of players."""
    decks_by_players: Mapping[int, int] = field(default_factory=dict)
    """Default number of decks where it depends on the players (Rummy 500 with 6-8)."""
    jokers_per_deck: bool = False
    """Whether the ``jokers`` option counts jokers per deck (Rummy 500) or in all."""


@dataclass(frozen=True, slots=True)
class Rules:
    """Everything the state machine needs to know about a table, resolved for its players."""

    preset: str
    players: int
    options: tuple[tuple[str, object], ...]
    """The options the table creator set (validated), sorted by name."""
    decks: int
    jokers: int
    """Jokers in the whole pack."""
    hand_size: int
    ace: AceMode
    melds_per_turn: int | None
    going_rummy: str
    layoff_requires_own_meld: bool
    must_discard_to_go_out: bool
    stock_exhausted: str
    max_stock_reuses: int | None
    scoring: str
    """winner_collects | penalty | pay_winner | melded_minus_hand (Rummy 500)."""
    target: int | None
    deals: int | None
    dealer: str
    joker_swap: bool
    joker_value: int
    idle_turn_cap: int
    min_natural: int = 1
    starter_extra_card: bool = False
    """Wrotham: the starting player gets one card more and does not draw on his first turn."""
    all_at_once_from_deal: int | None = None
    """Wrotham: from this deal (1-based) on, nobody may meld until he can go out at once."""
    ace_value: int | None = None
    """Value of an ace left in hand; ``None``: 1 with ``ace=low``, else 15."""
    values_scheme: str = "standard"
    deep_draws: bool = False
    """Rummy 500: any discard may be taken with all above it, if it is laid down at once."""
    top_discard_must_be_used: bool = False
    rummy_call: bool = False
    """Rummy 500: a claim window ("Rummy!") after a claimable discard."""
    floating: bool = False
    unplayable_last_discard: bool = False
    opening_minimum: int = 0
    """Ramino: points a player's first lay-down must reach (0: no opening rule)."""
    open_to_take_upcard: bool = False
    chiudere_in_mano: bool = True
    bussare: bool = False
    elimination: bool = False
    """Ramino: a total above ``target`` eliminates the player."""
    tie_plays_another_hand: bool = False
    """Rummy 500: a tie for the highest total at the target plays another hand."""
    table_melds: bool = True
    """Whether melds are laid on the table during play (not in Knock Rummy and Gin Rummy)."""
    knocking: str = ""
    """``knock`` (Knock Rummy: any count), ``gin`` (Gin Rummy: a limit) or empty."""
    first_upcard: bool = False
    """Gin Rummy: the first upcard is offered to the non-dealer, then the dealer."""
    wall: int = 0
    """Gin Rummy: the hand is void when a discard leaves this many stock cards and no one
    knocks (0: no wall)."""
    knock_limit: int = 10
    oklahoma: bool = False
    gin_bonus: int = 25
    undercut_bonus: int = 25
    undercut_on_tie: bool = True
    big_gin_bonus: int = 31
    box_bonus: int = 25
    game_bonus: int = 100
    shutout: str = "double"
    tie_goes_to: str = "knocker"
    literal_bonus: bool = False
    rummy_bonus: int = 0
    meld_rules: MeldRules = field(init=False, compare=False, repr=False)
    values: tuple[int, ...] = field(init=False, compare=False, repr=False)
    """Value of each face (index 52: joker) when left in hand."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "meld_rules", MeldRules(self.ace, self.min_natural))
        if self.ace_value is not None:
            ace_value = self.ace_value
        else:
            ace_value = 1 if self.ace is AceMode.LOW else 15
        values = [0] * (JOKER + 1)
        for face in range(JOKER):
            rank = face_rank(face)
            if rank == 1:
                values[face] = ace_value
            elif self.values_scheme == "5_10_15":
                values[face] = 5 if rank < 10 else 10
            else:
                values[face] = min(rank, 10)
        values[JOKER] = self.joker_value
        object.__setattr__(self, "values", tuple(values))

    @property
    def deck_size(self) -> int:
        """Number of physical cards in the pack."""
        return 52 * self.decks + self.jokers


_BASIC_OPTIONS = (
    "going_rummy",
    "layoff_requires_own_meld",
    "ace",
    "must_discard_to_go_out",
    "stock_exhausted",
    "max_stock_reuses",
    "scoring",
    "target",
    "deals",
    "dealer",
    "melds_per_turn",
    "idle_turn_cap",
)

_BASIC_DEFAULTS: dict[str, object] = {
    "decks": 1,
    "jokers": 0,
    "ace": "low",
    "melds_per_turn": "1",
    "going_rummy": "double",
    "layoff_requires_own_meld": False,
    "must_discard_to_go_out": False,
    "stock_exhausted": "turn_over",
    "max_stock_reuses": None,
    "scoring": "winner_collects",
    "target": 100,
    "deals": None,
    "dealer": "random",
    "joker_swap": False,
    "joker_value": 15,
    "idle_turn_cap": 60,
}

_SIZES_10_7_6 = {2: 10, 3: 7, 4: 7, 5: 6, 6: 6}

VARIANTS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            name="basic",
            title="Rummy",
            description=(
                "Straight rummy with one 52-card deck: draw, meld (one per turn), lay off,"
                " discard; the winner collects the value of the other hands."
            ),
            min_players=2,
            max_players=6,
            defaults=_BASIC_DEFAULTS,
            options=_BASIC_OPTIONS,
            hand_sizes=_SIZES_10_7_6,
        ),
        Preset(
            name="block",
            title="Block Rummy",
            description="Rummy whose discard pile is never reused: when the stock runs out and"
            " the player to move does not take the upcard, the hand ends and is settled by"
            " differences.",
            min_players=2,
            max_players=6,
            defaults={**_BASIC_DEFAULTS, "stock_exhausted": "block"},
            options=_BASIC_OPTIONS,
            hand_sizes=_SIZES_10_7_6,
        ),
        Preset(
            name="wrotham",
            title="Wrotham Rummy",
            description=(
                "Rummy with three jokers and joker swaps, played for exactly six deals; the"
                " starter gets 8 cards and does not draw on his first turn; in deals 4-6 nobody"
                " may meld until he can lay down his whole hand at once."
            ),
            min_players=2,
            max_players=6,
            defaults={
                **_BASIC_DEFAULTS,
                "jokers": 3,
                "joker_swap": True,
                "deals": 6,
                "target": None,
                "starter_extra_card": True,
                "all_at_once_from_deal": 4,
            },
            options=(*_BASIC_OPTIONS, "joker_value", "joker_swap"),
            hand_sizes=dict.fromkeys(range(2, 7), 7),
        ),
        Preset(
            name="ramino_classic",
            title="Ramino (classic)",
            description=(
                "The Italian family game: one deck with two jokers, any number of melds per"
                " turn, lay-off onto any meld, close with or without a final discard; the winner"
                " scores the other hands (joker 15)."
            ),
            min_players=2,
            max_players=6,
            defaults={**_BASIC_DEFAULTS, "jokers": 2, "melds_per_turn": UNLIMITED},
            options=(*_BASIC_OPTIONS, "decks", "jokers", "joker_value", "joker_swap"),
            hand_sizes=_SIZES_10_7_6,
            jokers_per_deck=True,
        ),
        Preset(
            name="rummy500",
            title="Rummy 500",
            description=(
                "The spread discard pile: take any discard with every card above it if you lay it"
                " down at once; melds and lay-offs score for whoever lays them down, cards in"
                ' hand count against; call "Rummy!" on a playable discard; first to 500.'
            ),
            min_players=2,
            max_players=8,
            defaults={
                **_BASIC_DEFAULTS,
                "jokers": 2,
                "ace": "high_or_low",
                "ace_value": 15,
                "melds_per_turn": UNLIMITED,
                "going_rummy": "none",
                "stock_exhausted": "block",
                "scoring": "melded_minus_hand",
                "target": 500,
                "deep_draws": True,
                "rummy_call": True,
                "tie_plays_another_hand": True,
                "values": "standard",
                "top_discard_must_be_used": False,
                "floating": False,
                "unplayable_last_discard": False,
            },
            options=(
                "decks",
                "jokers",
                "values",
                "top_discard_must_be_used",
                "floating",
                "unplayable_last_discard",
                "target",
                "dealer",
                "idle_turn_cap",
            ),
            hand_sizes={2: 13, **dict.fromkeys(range(3, 9), 7)},
            decks_by_players={6: 2, 7: 2, 8: 2},
            jokers_per_deck=True,
        ),
        Preset(
            name="ramino",
            title="Ramino (Italian, as played online)",
            description=(
                "Two decks and six jokers, 13 cards each; a first lay-down of at least 30 points"
                " opens; lay-offs and joker swaps after opening; close with a final discard;"
                " cards in hand are penalties and a total above the target eliminates."
            ),
            min_players=2,
            max_players=4,
            defaults={
                **_BASIC_DEFAULTS,
                "decks": 2,
                "jokers": 6,
                "ace": "high_or_low",
                "ace_value": 15,
                "min_natural": 2,
                "joker_value": 30,
                "joker_swap": True,
                "melds_per_turn": UNLIMITED,
                "must_discard_to_go_out": True,
                "scoring": "penalty",
                "going_rummy": "double",
                "target": 101,
                "elimination": True,
                "opening_minimum": 30,
                "open_to_take_upcard": False,
                "chiudere_in_mano": True,
                "bussare": False,
            },
            options=(
                "target",
                "chiudere_in_mano",
                "bussare",
                "open_to_take_upcard",
                "stock_exhausted",
                "max_stock_reuses",
                "dealer",
                "idle_turn_cap",
            ),
            hand_sizes=dict.fromkeys(range(2, 5), 13),
        ),
        Preset(
            name="knock",
            title="Knock Rummy (Ramino bussato)",
            description=(
                "No melds on the table: after drawing, a player may knock and discard, ending"
                " the hand; everyone shows his melds and only unmatched cards count; each"
                " opponent settles with the knocker."
            ),
            min_players=2,
            max_players=5,
            defaults={
                **_BASIC_DEFAULTS,
                "table_melds": False,
                "knocking": "knock",
                "scoring": "knock",
                "going_rummy": "none",
                "melds_per_turn": UNLIMITED,
                "tie_goes_to": "knocker",
                "literal_bonus": False,
                "rummy_bonus": 0,
            },
            options=(
                "tie_goes_to",
                "literal_bonus",
                "rummy_bonus",
                "target",
                "deals",
                "dealer",
                "stock_exhausted",
                "max_stock_reuses",
                "idle_turn_cap",
            ),
            hand_sizes={2: 10, 3: 7, 4: 7, 5: 6},
        ),
        Preset(
            name="gin",
            title="Gin Rummy",
            description=(
                "Two players, ten cards: knock with 10 or less deadwood, go gin with none; the"
                " defender lays off on the knocker's melds; undercuts, boxes and a game to 100."
            ),
            min_players=2,
            max_players=2,
            defaults={
                **_BASIC_DEFAULTS,
                "table_melds": False,
                "knocking": "gin",
                "scoring": "gin",
                "going_rummy": "none",
                "melds_per_turn": UNLIMITED,
                "stock_exhausted": "block",
                "first_upcard": True,
                "wall": 2,
                "knock_limit": 10,
                "oklahoma": False,
                "gin_bonus": 25,
                "undercut_bonus": 25,
                "undercut_on_tie": True,
                "big_gin_bonus": 31,
                "box_bonus": 25,
                "game_bonus": 100,
                "shutout": "double",
                "target": 100,
            },
            options=(
                "knock_limit",
                "oklahoma",
                "gin_bonus",
                "undercut_bonus",
                "undercut_on_tie",
                "big_gin_bonus",
                "target",
                "deals",
                "box_bonus",
                "game_bonus",
                "shutout",
                "dealer",
                "idle_turn_cap",
            ),
            hand_sizes={2: 10},
        ),
    )
}


def find_variant(name: str) -> Preset:
    """Return the preset called ``name``.

    Raises:
        VariantError: no such preset (code ``variant/unknown``).
    """
    try:
        return VARIANTS[name]
    except KeyError:
        raise VariantError(
            f"unknown variant {name!r}; known: {', '.join(sorted(VARIANTS))}", "variant/unknown"
        ) from None


def parse_option_value(name: str, text: str) -> object:
    """Turn the text form of an option (as given on a command line) into its typed value.

    Raises:
        VariantError: the option is unknown or the text is not of its type.
    """
    spec = OPTIONS.get(name)
    if spec is None:
        raise VariantError(f"unknown option {name!r}", "variant/unknown_option")
    lowered = text.strip().lower()
    if spec.kind == "bool":
        if lowered in {"true", "yes", "on", "1"}:
            return True
        if lowered in {"false", "no", "off", "0"}:
            return False
        raise VariantError(
            f"option {name!r} takes true or false, got {text!r}", "variant/bad_option"
        )
    if spec.kind == "choice":
        return lowered
    if spec.kind == "int_or_unlimited" and lowered in {UNLIMITED, "none", "off"}:
        return None
    try:
        return int(lowered)
    except ValueError:
        raise VariantError(
            f"option {name!r} takes an integer, got {text!r}", "variant/bad_option"
        ) from None


def make_rules(
    name: str, options: Mapping[str, object] | None = None, players: int | None = None
) -> Rules:
    """Validate a table's options against its preset and resolve the ``Rules``.

    ``players`` may be left out where only melds, values or scores are checked: the rules are
    then made for the fewest players the preset and options allow (the preset's minimum, or 3
    for Ramino with ``bussare``). Settings that depend on the players (the decks of Rummy 500,
    the deals of ``scoring=pay_winner``, the hand size) are those of that count.

    >>> rules = make_rules("gin")
    >>> rules.players, rules.hand_size, rules.knock_limit
    (2, 10, 10)
    >>> make_rules("ramino", {"bussare": True}).players
    3

    Raises:
        VariantError: unknown preset or option, a wrong value, contradictory options, or a
            number of players the preset does not allow.
    """
    chosen = {} if options is None else options
    if players is not None:
        return _make_rules(name, chosen, players)
    preset = find_variant(name)
    try:
        return _make_rules(name, chosen, preset.min_players)
    except VariantError as first:
        for count in range(preset.min_players + 1, preset.max_players + 1):
            try:
                return _make_rules(name, chosen, count)
            except VariantError:
                continue
        raise first from None


def _make_rules(name: str, options: Mapping[str, object], players: int) -> Rules:
    preset = find_variant(name)
    if not isinstance(players, int) or not preset.min_players <= players <= preset.max_players:
        raise VariantError(
            f"{preset.name} is played by {preset.min_players}-{preset.max_players} players,"
            f" got {players!r}",
            "variant/bad_players",
        )
    chosen: dict[str, object] = {}
    for key, value in options.items():
        if key not in preset.options:
            raise VariantError(
                f"unknown option {key!r} for {preset.name}; options: {', '.join(preset.options)}",
                "variant/unknown_option",
            )
        chosen[key] = OPTIONS[key].validate(value)
    settings = {**preset.defaults, **chosen}
    if "decks" not in chosen and players in preset.decks_by_players:
        settings["decks"] = preset.decks_by_players[players]
    _check_contradictions(preset, chosen, settings, players)
    if chosen.get("deals"):
        settings["target"] = None
    if settings["scoring"] == "pay_winner":
        settings["target"] = None
        if not settings["deals"]:
            settings["deals"] = players
    hand_size = preset.hand_sizes[players]
    decks = int(str(settings["decks"]))
    jokers = int(str(settings["jokers"])) * (decks if preset.jokers_per_deck else 1)
    needed = hand_size * players + (1 if settings.get("starter_extra_card") else 0) + 2
    if 52 * decks + jokers < needed:
        raise VariantError(
            f"{decks} deck(s) and {jokers} joker(s) are too few for {players} players",
            "variant/contradictory_options",
        )
    melds_per_turn = settings.pop("melds_per_turn")
    fields = {f.name for f in dataclasses.fields(Rules) if f.init}
    extra = {key: value for key, value in settings.items() if key in fields}
    extra.update(
        preset=preset.name,
        players=players,
        options=tuple(sorted(chosen.items())),
        decks=decks,
        jokers=jokers,
        hand_size=hand_size,
        ace=AceMode(str(settings["ace"])),
        melds_per_turn=None if melds_per_turn == UNLIMITED else int(str(melds_per_turn)),
        values_scheme=str(settings.get("values", "standard")),
    )
    return Rules(**extra)  # type: ignore[arg-type]


def _check_contradictions(
    preset: Preset, chosen: Mapping[str, object], settings: Mapping[str, object], players: int
) -> None:
    if chosen.get("target") and settings["deals"]:
        raise VariantError(
            f"options 'target' and 'deals' contradict each other: a game ends at a target score"
            f" or after a number of deals, not both ({preset.name} plays {settings['deals']}"
            " deals)",
            "variant/contradictory_options",
        )
    if settings["scoring"] == "pay_winner" and chosen.get("target"):
        raise VariantError(
            "option 'target' contradicts scoring=pay_winner, which is played for a fixed"
            " number of deals",
            "variant/contradictory_options",
        )
    endless = settings["target"] is None and settings["deals"] is None
    if endless and settings["scoring"] != "pay_winner":
        how = "set 'target' or 'deals'" if "deals" in preset.options else "set 'target'"
        raise VariantError(f"the game needs an end: {how}", "variant/contradictory_options")
    if settings["max_stock_reuses"] is not None and settings["stock_exhausted"] == "block":
        raise VariantError(
            "option 'max_stock_reuses' contradicts stock_exhausted=block (the pile is never"
            " reused)",
            "variant/contradictory_options",
        )
    if chosen.get("bussare") and players < 3:
        raise VariantError("option 'bussare' needs 3 or 4 players", "variant/contradictory_options")
    if preset.jokers_per_deck and settings["jokers"] not in (0, 2):
        raise VariantError(
            f"option 'jokers' takes 0 or 2 (per deck) for {preset.name},"
            f" got {settings['jokers']!r}",
            "variant/bad_option",
        )


def _optional_int(value: object) -> int | None:
    return None if value is None else int(str(value))


def rules_replace(rules: Rules, **changes: Any) -> Rules:
    """A copy of ``rules`` with some fields changed (for tests and tools)."""
    return dataclasses.replace(rules, **changes)
