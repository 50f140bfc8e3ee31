"""Coded errors: every refusal a client is told about carries a stable ``code`` and a message.

Codes are namespaced (``protocol/*``, ``limit/*``, ``lobby/*``, ``table/*``,
``rules/*``, ``variant/*``, ``notation/*``, ``server/*``); docs/protocol.md lists them all.
"""

from __future__ import annotations

__all__ = ["CodedError", "NotationError"]


class CodedError(Exception):
    """An error a client is told about: ``code`` (stable, namespaced) and ``message``.

    The base of the engine's errors, of the table layer's and of the protocol's.
    """

    default_code = "error"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class NotationError(CodedError, ValueError):
    """A card, face or position text that does not parse."""

    default_code = "notation/invalid"
