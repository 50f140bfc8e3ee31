"""The ladder's coded errors."""

from __future__ import annotations

from protocol.errors import CodedError

__all__ = ["LadderError"]


class LadderError(CodedError):
    """A ladder request that cannot be done (code ``ladder/*``)."""

    default_code = "ladder/invalid"
