"""Errors of the table layer. Every one carries a stable ``code`` for the error reply.

::

    TableError                       code namespace table/*
    ├── UnknownTable                 table/unknown        no table with that id
    ├── StaleSeq                     table/stale_seq      the command saw an older seq
    ├── NotSeated                    table/not_seated     the sender has no seat here
    ├── ReplayError                  replay/*             a replay or deal check not possible as
    │                                                     asked (replay/hand_in_progress, ...)
    └── StoreError                   store/*              the event store refused or failed
        ├── SeqConflict              store/seq_conflict   someone else appended that seq
        ├── LeaseLost                store/lease_lost     this worker no longer holds the
        │                                                     table's lease (another took it)
        ├── StoreClosed              store/closed         the store was closed
        └── StoreConfigError         store/config         a store URL that names no backend
                                                          (also store/not_found: no such file)

Rule violations come from the engine (``server.engine.errors``) with their own codes.
"""

from __future__ import annotations

from server.engine.errors import CodedError

__all__ = [
    "LeaseLost",
    "NotSeated",
    "ReplayError",
    "SeqConflict",
    "StaleSeq",
    "StoreClosed",
    "StoreConfigError",
    "StoreError",
    "TableError",
    "UnknownTable",
]


class TableError(CodedError):
    """Base of the table layer's errors; ``code`` names it for clients."""

    default_code = "table/error"


class UnknownTable(TableError):
    """No table has that id."""

    default_code = "table/unknown"


class StaleSeq(TableError):
    """The command was sent against an older sequence number than the table's."""

    default_code = "table/stale_seq"


class NotSeated(TableError):
    """The sender has no seat at the table."""

    default_code = "table/not_seated"


class ReplayError(TableError):
    """A replay or check that cannot be done as asked; ``code`` is ``replay/*``."""

    default_code = "replay/error"


class StoreError(TableError):
    """The event store refused an operation or failed."""

    default_code = "store/error"


class SeqConflict(StoreError):
    """Another writer appended after the ``seq`` this writer saw; ``current`` is the last one."""

    default_code = "store/seq_conflict"

    def __init__(self, message: str, current: int) -> None:
        super().__init__(message)
        self.current = current


class LeaseLost(StoreError):
    """The append was refused: the writing worker no longer holds the table's lease (its
    epoch changed: another worker took the table), so it must stop serving the table."""

    default_code = "store/lease_lost"

    def __init__(self, message: str, table_id: str) -> None:
        super().__init__(message)
        self.table_id = table_id


class StoreClosed(StoreError):
    """The store was closed."""

    default_code = "store/closed"


class StoreConfigError(StoreError):
    """A store URL or option that names no supported backend."""

    default_code = "store/config"
