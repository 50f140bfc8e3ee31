"""The Ramino rules engine: pure, typed and sans-IO.

The game API has the OpenSpiel shape::

    state = new_game("basic", {"going_rummy": "plus10"}, seats=3)
    while not is_over(state):
        if chance_pending(state):
            events = (chance(state, rng),)          # a deal: the shuffled pack is the event
        else:
            seat = to_move(state)
            events = decide(state, seat, pick(legal_actions(state, seat)))
        for event in events:
            state = evolve(state, event)

``view(state, seat)`` and ``redact(state, event, seat)`` are the only ways hidden cards leave it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocol.cards import (
    JOKER,
    Card,
    Face,
    card_face,
    format_card,
    format_cards,
    format_face,
    is_joker,
    make_deck,
    parse_card,
    parse_cards,
    parse_face,
)
from protocol.game import (
    Claim,
    ClaimAnswered,
    Claimed,
    ClaimWindowClosed,
    ClaimWindowOpened,
    Command,
    Dealt,
    Declined,
    Discard,
    Discarded,
    DrawStock,
    Drew,
    Event,
    Floated,
    GameEnded,
    HandEnded,
    Knock,
    Knocked,
    LaidOff,
    LayOff,
    Meld,
    Melded,
    MeldSpec,
    Pass,
    SeatForfeited,
    StockRebuilt,
    SwapJoker,
    SwappedJoker,
    TakeDiscard,
    TookDiscard,
    UpcardPassed,
    describe_command,
)
from server.engine.errors import (
    EngineError,
    IllegalMoveError,
    InvalidMeldError,
    NotationError,
    RuleError,
    VariantError,
)
from server.engine.game import (
    Phase,
    State,
    TableMeld,
    advance,
    apply,
    awaiting,
    chance,
    chance_pending,
    decide,
    evolve,
    forfeit,
    is_over,
    legal_actions,
    new_game,
    scores,
    to_move,
)
from server.engine.melds import AceMode, MeldKind, MeldRules
from server.engine.melds import Meld as MeldShape
from server.engine.melds import check_meld as _check_meld
from server.engine.scoring import opening_points
from server.engine.variants import OPTIONS, VARIANTS, Preset, Rules, find_variant, make_rules
from server.engine.views import HIDDEN, View, redact, view

__all__ = [
    "HIDDEN",
    "JOKER",
    "OPTIONS",
    "VARIANTS",
    "AceMode",
    "Card",
    "Claim",
    "ClaimAnswered",
    "ClaimWindowClosed",
    "ClaimWindowOpened",
    "Claimed",
    "Command",
    "Dealt",
    "Declined",
    "Discard",
    "Discarded",
    "DrawStock",
    "Drew",
    "EngineError",
    "Event",
    "Face",
    "Floated",
    "GameEnded",
    "HandEnded",
    "IllegalMoveError",
    "InvalidMeldError",
    "Knock",
    "Knocked",
    "LaidOff",
    "LayOff",
    "Meld",
    "MeldKind",
    "MeldRules",
    "MeldShape",
    "MeldSpec",
    "Melded",
    "NotationError",
    "Pass",
    "Phase",
    "Preset",
    "RuleError",
    "Rules",
    "SeatForfeited",
    "State",
    "StockRebuilt",
    "SwapJoker",
    "SwappedJoker",
    "TableMeld",
    "TakeDiscard",
    "TookDiscard",
    "UpcardPassed",
    "VariantError",
    "View",
    "advance",
    "apply",
    "awaiting",
    "best_melds",
    "card_face",
    "chance",
    "chance_pending",
    "check_meld",
    "decide",
    "describe_command",
    "evolve",
    "find_variant",
    "forfeit",
    "format_card",
    "format_cards",
    "format_face",
    "is_joker",
    "is_over",
    "legal_actions",
    "make_deck",
    "make_rules",
    "new_game",
    "opening_value",
    "parse_card",
    "parse_cards",
    "parse_face",
    "redact",
    "scores",
    "to_move",
    "view",
]


def _meld_rules(rules: Rules | MeldRules) -> MeldRules:
    return rules.meld_rules if isinstance(rules, Rules) else rules


def check_meld(
    cards: Sequence[Card], rules: Rules | MeldRules, faces: Sequence[Face] | None = None
) -> MeldShape:
    """Validate ``cards`` (with declared ``faces`` for jokers) as a meld under ``rules``.

    Raises:
        InvalidMeldError: not a valid set or run; the code says why.
    """
    return _check_meld(cards, _meld_rules(rules), faces)


def best_melds(hand: Iterable[Card], rules: Rules) -> tuple[tuple[MeldShape, ...], int]:
    """The partition of ``hand`` into melds that leaves the least deadwood, and that deadwood."""
    from server.engine.solver import best_melds as solve

    return solve(hand, rules.meld_rules, rules.values)


def opening_value(melds: Iterable[MeldShape], rules: Rules | MeldRules | None = None) -> int:
    """Points a lay-down counts towards an opening (Italian Ramino's 30).

    J/Q/K 10, pip cards face value; an ace 1 below a 2 in a run, else 11 (above the king or
    in a set); a joker counts as the card it stands for. ``rules`` is accepted for symmetry
    with the other helpers; the values are the same under every preset.
    """
    return opening_points(melds)
