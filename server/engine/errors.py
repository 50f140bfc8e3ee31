"""Errors the rules engine raises. Every one carries a stable ``code`` for the error reply.

::

    EngineError                      code namespace
    ├── NotationError                notation/*   a card or position text that does not parse
    ├── VariantError                 variant/*    unknown preset/option, bad or contradictory value
    └── RuleError                    rules/*      a command the rules refuse
        ├── InvalidMeldError         rules/invalid_meld, rules/min_natural, ...
        └── IllegalMoveError         rules/not_your_turn, rules/wrong_phase, ...

All of them are peer mistakes (bad input or an illegal move); a bug in the engine surfaces as any
other exception.
"""

from __future__ import annotations

__all__ = [
    "CodedError",
    "EngineError",
    "IllegalMoveError",
    "InvalidMeldError",
    "NotationError",
    "RuleError",
    "VariantError",
]


class CodedError(Exception):
    """An error a client is told about: ``code`` (stable, namespaced) and ``message``.

    The base of the engine's errors and of the table layer's.
    """

    default_code = "error"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class EngineError(CodedError):
    """Base of every error the engine raises on purpose; ``code`` names it for clients."""

    default_code = "engine/error"


class NotationError(EngineError, ValueError):
    """A card, face or position text that does not parse."""

    default_code = "notation/invalid"


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
