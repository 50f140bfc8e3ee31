"""The collector settings of the long-running processes (protocol/runtime.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from protocol.runtime import GC_THRESHOLDS, tune_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tune_gc_freezes_the_start_up_heap_and_raises_the_thresholds(restored_gc: None) -> None:
    """What is alive at start-up is frozen (never visited again), young collections wait for
    GC_THRESHOLDS[0] allocations, and cycles made afterwards are still collected."""
    gc.unfreeze()
    alive = [[index] for index in range(1_000)]  # start-up state: must end up frozen
    tune_gc()
    assert GC_THRESHOLDS == gc.get_threshold()
    assert gc.get_freeze_count() >= len(alive)
    collectable = {id(item) for item in gc.get_objects()}  # the frozen are not among them
    assert not any(id(item) in collectable for item in alive)

    class Node:
        def __init__(self) -> None:
            self.other: Node | None = None

    first, second = Node(), Node()
    first.other, second.other = second, first  # a cycle only the collector frees
    del first, second
    assert gc.collect() >= 2
