"""Fixtures giving real event stores: a SQLite file and a throw-away PostgreSQL database."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from server.tables.store import EventStore, open_store

POSTGRES_ADMIN_URL = os.environ.get(
    "RAMINO_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
IN_CI = os.environ.get("CI") == "true"


async def _postgres_available() -> str | None:
    """None if PostgreSQL answers at ``POSTGRES_ADMIN_URL``, else the reason it does not."""
    try:
        import asyncpg

        connection = await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=5)
    except Exception as error:  # any failure to reach the server means: not available
        return f"PostgreSQL at {POSTGRES_ADMIN_URL} is not reachable: {error}"
    await connection.close()
    return None


async def _create_database() -> str:
    """A new, empty PostgreSQL database's URL; skipped (failed under CI=true) without PostgreSQL."""
    reason = await _postgres_available()
    if reason is not None:
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    import asyncpg

    name = f"ramino_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(POSTGRES_ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    base, _, _ = POSTGRES_ADMIN_URL.rpartition("/")
    return f"{base}/{name}"


async def _drop_database(url: str) -> None:
    import asyncpg

    name = url.rpartition("/")[2]
    admin = await asyncpg.connect(POSTGRES_ADMIN_URL)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A new, empty PostgreSQL database for one test, dropped afterwards."""
    url = await _create_database()
    try:
        yield url
    finally:
        await _drop_database(url)


@pytest.fixture
def postgres_url_sync() -> Iterator[str]:
    """``postgres_url`` for a test that is not a coroutine (a browser test driving Playwright's
    synchronous API). Its set-up runs in a thread of its own, away from any running loop."""
    with ThreadPoolExecutor(1) as thread:
        url = thread.submit(asyncio.run, _create_database()).result()
        try:
            yield url
        finally:
            thread.submit(asyncio.run, _drop_database(url)).result()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite store file in a fresh temporary folder."""
    return f"sqlite:///{tmp_path / 'events.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The URL of each real store in turn."""
    name = f"{request.param}_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[EventStore]:
    """An open store of each kind, closed after the test."""
    opened = await open_store(store_url)
    try:
        yield opened
    finally:
        await opened.close()
