"""The real event stores of the table tests (a SQLite file, a throw-away PostgreSQL database)."""

from __future__ import annotations

from tests.tables.conftest import postgres_url, sqlite_url, store, store_url

__all__ = ["postgres_url", "sqlite_url", "store", "store_url"]
