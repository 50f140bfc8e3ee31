"""Fixtures for every test."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", autouse=True)
def _collect_after_each_module() -> Iterator[None]:
    """Collect garbage after each module, so that a socket or file a module left open warns
    (and fails) within that module's last test rather than in whichever test runs next."""
    yield
    gc.collect()
