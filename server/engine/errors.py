"""Errors the rules engine raises. Every one carries a stable ``code`` for the error reply.

::

    EngineError                      code namespace
    ├── VariantError                 variant/*    unknown preset/option, bad or contradictory value
    └── RuleError                    rules/*      a command the rules refuse
        ├── InvalidMeldError         rules/invalid_meld, rules/min_natural, ...
        └── IllegalMoveError         rules/not_your_turn, rules/wrong_phase, ...

``NotationError`` (``notation/*``: a card or position text that does not parse) is the
protocol's, since card notation is part of the wire contract.

All of them are peer mistakes (bad input or an illegal move); a bug in the engine surfaces as any
other exception.
"""

from __future__ import annotations

from protocol.errors import CodedError, NotationError

__all__ = [
    "CodedError",
    "EngineError",
    "IllegalMoveError",
    "InvalidMeldError",
    "NotationError",
    "RuleError",
    "VariantError",
]


class EngineError(CodedError):
    """Base of every error the engine raises on purpose; ``code`` names it for clients."""

    default_code = "engine/error"


class VariantError(EngineError, ValueError):
    """An unknown preset, an unknown option, a value of the wrong type or contradictory options."""

    default_code = "variant/invalid_option"


class RuleError(EngineError):
    """A command the rules refuse in this state."""

    default_code = "rules/illegal"


class InvalidMeldError(RuleError):
    """Cards that do not form a valid meld under the table's rules."""

    default_code = "rules/invalid_meld"


class IllegalMoveError(RuleError):
    """A well-formed command that is not allowed now (wrong turn, wrong phase, card not held)."""

    default_code = "rules/illegal_move"
