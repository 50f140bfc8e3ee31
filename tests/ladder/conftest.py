"""The real event stores of the table tests (a SQLite file, a throw-away PostgreSQL database),
and the network tests' Mosquitto (deploy/'s config) for the ladder inside ``ramino serve``."""

from __future__ import annotations

from collections.abc import Sequence

from server.ladder.service import Ladder
from server.tables.store import open_store
from tests.net.conftest import mosquitto
from tests.tables.conftest import postgres_url, sqlite_url, store, store_url

__all__ = ["enter", "mosquitto", "postgres_url", "sqlite_url", "store", "store_url"]


async def enter(url: str, names: Sequence[str], ladder: str = "main") -> None:
    """Enter the built-in entrants ``names`` on ``ladder`` in the store at ``url``, before a
    server that runs the ladder opens it."""
    store = await open_store(url)
    try:
        opened = await Ladder.open(store, ladder)
        for name in names:
            await opened.add_entrant(name)
    finally:
        await store.close()
