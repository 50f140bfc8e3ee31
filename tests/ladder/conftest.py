"""The real event stores of the table tests (a SQLite file, a throw-away PostgreSQL database),
and the network tests' Mosquitto (deploy/'s config) for the ladder inside ``ramino serve``."""

from __future__ import annotations

from tests.net.conftest import mosquitto
from tests.tables.conftest import postgres_url, sqlite_url, store, store_url

__all__ = ["mosquitto", "postgres_url", "sqlite_url", "store", "store_url"]
