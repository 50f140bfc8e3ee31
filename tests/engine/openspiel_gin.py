"""An adapter between our ``gin`` preset and OpenSpiel's ``gin_rummy``: cards, deals and moves.

OpenSpiel plays one hand of Gin Rummy with ``undercut_on_tie=false`` and no big gin; our preset
with ``OPENSPIEL_OPTIONS`` is meant to play the same hand. The adapter carries what both the
differential test and a benchmark need:

- card ids: OpenSpiel numbers cards ``suit * 13 + rank - 1`` with suits s c d h, ours go C D H S,
  so ``os_id = (face + 13) % 52``;
- forcing one of our deals into an OpenSpiel state (ten cards to OpenSpiel's player 0, who is our
  starter, the non-dealer; ten to player 1; then the upcard), and serving our stock to
  OpenSpiel's chance nodes after a stock draw;
- OpenSpiel's action id for each of our commands, and the meld actions that lay out one of our
  melds (runs longer than five cards are laid as two or more melds there).

``pyspiel`` is imported only by ``OpenSpielGin.load``, so importing this module never fails.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bots.eval.openspiel_gin import (
    DRAW_STOCK,
    DRAW_UPCARD,
    KNOCK,
    MELD_BASE,
    PASS,
    from_os,
    to_os,
)
from protocol.cards import face_rank
from protocol.game import Knock
from server.engine import (
    Card,
    Command,
    Dealt,
    Discard,
    DrawStock,
    Pass,
    Phase,
    State,
    TakeDiscard,
    card_face,
)

__all__ = [
    "DRAW_STOCK",
    "DRAW_UPCARD",
    "KNOCK",
    "MAX_RUN",
    "MELD_BASE",
    "OPENSPIEL_OPTIONS",
    "PASS",
    "OpenSpielGin",
    "at_wall",
    "command_action",
    "deal_actions",
    "from_os",
    "split_run",
    "to_os",
]

OPENSPIEL_OPTIONS: dict[str, object] = {"deals": 1, "undercut_on_tie": False, "big_gin_bonus": 0}
"""Our ``gin`` preset set to OpenSpiel's rules: one hand, a tie is no undercut, no big gin."""

MAX_RUN = 5
"""OpenSpiel's longest meld: a longer run is laid as several."""


def deal_actions(dealt: Dealt) -> list[int]:
    """The 21 chance actions that give OpenSpiel our deal.

    Our cards go one at a time from the dealer's left, so the starter gets ``order[0:20:2]`` and
    the dealer ``order[1:20:2]``; ``order[20]`` is the upcard and the stock follows.
    """
    order = dealt.order
    return [to_os(card) for card in (*order[0:20:2], *order[1:20:2], order[20])]


def at_wall(state: State) -> bool:
    """Whether the seat to move is at the wall: the stock is down to ``rules.wall`` cards."""
    return (
        state.phase is Phase.DRAW and state.rules.wall > 0 and len(state.stock) <= state.rules.wall
    )


def command_action(state: State, command: Command) -> int:
    """OpenSpiel's action for one of our commands in ``state``.

    A knock is two OpenSpiel actions, ``KNOCK`` and then the discard; this gives the first. At
    the wall our ``TakeDiscard`` (allowed only to knock with the upcard) is OpenSpiel's ``KNOCK``
    and our ``Pass`` its ``PASS``.

    Raises:
        ValueError: the command has no OpenSpiel counterpart (melds, lay-offs, big gin, ...).
    """
    match command:
        case DrawStock():
            return DRAW_STOCK
        case TakeDiscard(count=1):
            return KNOCK if at_wall(state) else DRAW_UPCARD
        case Pass():
            return PASS
        case Discard(card=card):
            return to_os(card)
        case Knock(card=card) if card >= 0:
            return KNOCK
    raise ValueError(f"no OpenSpiel action for {command!r}")


def split_run(cards: Sequence[Card]) -> list[tuple[Card, ...]]:
    """A meld cut into OpenSpiel melds: a run of more than ``MAX_RUN`` cards into the fewest
    pieces of three to five consecutive cards; any other meld stays whole."""
    ordered = sorted(cards, key=lambda card: face_rank(card_face(card)))
    ranks = {face_rank(card_face(card)) for card in ordered}
    if len(ordered) <= MAX_RUN or len(ranks) == 1:
        return [tuple(ordered)]
    pieces = -(-len(ordered) // MAX_RUN)
    size, extra = divmod(len(ordered), pieces)
    result: list[tuple[Card, ...]] = []
    start = 0
    for index in range(pieces):
        length = size + (index < extra)
        result.append(tuple(ordered[start : start + length]))
        start += length
    return result


@dataclass(frozen=True, slots=True)
class OpenSpielGin:
    """OpenSpiel's ``gin_rummy`` with its default parameters, and helpers to drive it."""

    pyspiel: Any
    game: Any
    utils: Any
    """``GinRummyUtils(13, 4, 10)``: exact ``min_deadwood`` for 10 cards."""
    meld_ids: dict[frozenset[int], int] = field(default_factory=dict)
    """OpenSpiel meld id of every meld (as a set of OpenSpiel card ids)."""

    @classmethod
    def load(cls) -> OpenSpielGin:
        """Import ``pyspiel`` and check that its action ids are the ones assumed here.

        Raises:
            ImportError: ``pyspiel`` is not installed.
        """
        pyspiel = importlib.import_module("pyspiel")
        gin = pyspiel.gin_rummy
        expected = (DRAW_UPCARD, DRAW_STOCK, PASS, KNOCK, MELD_BASE)
        actual = (
            gin.DRAW_UPCARD_ACTION,
            gin.DRAW_STOCK_ACTION,
            gin.PASS_ACTION,
            gin.KNOCK_ACTION,
            gin.MELD_ACTION_BASE,
        )
        if expected != actual:
            raise AssertionError(f"OpenSpiel's gin_rummy action ids changed: {actual}")
        utils = gin.GinRummyUtils(13, 4, 10)
        meld_ids = {frozenset(meld): int(meld_id) for meld_id, meld in utils.int_to_meld.items()}
        return cls(pyspiel, pyspiel.load_game("gin_rummy"), utils, meld_ids)

    def deal(self, dealt: Dealt) -> Any:
        """A new OpenSpiel state holding our deal, waiting for player 0 (our starter)."""
        state = self.game.new_initial_state()
        for action in deal_actions(dealt):
            state.apply_action(action)
        return state

    def meld_actions(self, cards: Iterable[Card]) -> list[int]:
        """The OpenSpiel actions that lay one of our melds (several for a long run)."""
        return [
            MELD_BASE + self.meld_ids[frozenset(to_os(card) for card in piece)]
            for piece in split_run(tuple(cards))
        ]

    def min_deadwood(self, cards: Iterable[Card]) -> int:
        """OpenSpiel's ``min_deadwood`` of our cards (exact for 10; drop-the-highest for 11)."""
        return int(self.utils.min_deadwood([to_os(card) for card in cards]))

    def discard_values(self, hand: Sequence[Card]) -> dict[Card, int]:
        """OpenSpiel's exact 10-card ``min_deadwood`` after each discard from an 11-card hand."""
        ids = [to_os(card) for card in hand]
        return {
            card: int(self.utils.min_deadwood(ids[:index] + ids[index + 1 :]))
            for index, card in enumerate(hand)
        }
