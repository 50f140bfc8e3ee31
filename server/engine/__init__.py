"""The Ramino rules engine: pure, typed and sans-IO.

Everything a bot author or an analyst needs is here; docs/engine.md is the guide, with examples.
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

Names: ``Meld`` is a meld (cards and the faces they stand for, as ``check_meld`` or
``parse_meld`` gives it); ``MeldCommand`` is the command that lays melds down and ``MeldSpec``
the wire form of one meld. ``MeldShape`` is an older name of ``Meld``.
"""

from __future__ import annotations

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
from protocol.game import Meld as MeldCommand
from server.engine.analysis import (
    best_discard,
    best_melds,
    check_meld,
    deadwood,
    hand_solver,
    is_valid_opening,
    layoff_targets,
    opening_value,
)
from server.engine.errors import (
    CodedError,
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
from server.engine.melds import AceMode, Meld, MeldKind, MeldRules
from server.engine.notation import format_meld, format_melds, parse_meld, parse_melds
from server.engine.position import from_position, to_position
from server.engine.scoring import (
    HandScore,
    format_amount,
    hand_winner,
    parse_amount,
    parse_points,
    parse_totals,
    score_hand,
)
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
    "CodedError",
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
    "HandScore",
    "IllegalMoveError",
    "InvalidMeldError",
    "Knock",
    "Knocked",
    "LaidOff",
    "LayOff",
    "Meld",
    "MeldCommand",
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
    "best_discard",
    "best_melds",
    "card_face",
    "chance",
    "chance_pending",
    "check_meld",
    "deadwood",
    "decide",
    "describe_command",
    "evolve",
    "find_variant",
    "forfeit",
    "format_amount",
    "format_card",
    "format_cards",
    "format_face",
    "format_meld",
    "format_melds",
    "from_position",
    "hand_solver",
    "hand_winner",
    "is_joker",
    "is_over",
    "is_valid_opening",
    "layoff_targets",
    "legal_actions",
    "make_deck",
    "make_rules",
    "new_game",
    "opening_value",
    "parse_amount",
    "parse_card",
    "parse_cards",
    "parse_face",
    "parse_meld",
    "parse_melds",
    "parse_points",
    "parse_totals",
    "redact",
    "score_hand",
    "scores",
    "to_move",
    "to_position",
    "view",
]


MeldShape = Meld
"""An older name of ``Meld``, kept so that existing imports work."""
