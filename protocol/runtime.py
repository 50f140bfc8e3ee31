"""Garbage-collector settings for the long-running event-loop processes: server and bots.

Theory of operation. CPython frees almost everything by reference counting; its cyclic
collector only finds reference cycles, and with the default thresholds (700, 10, 10) it runs
a young collection every 700 net container allocations and a full one whenever enough
objects have survived into the oldest generation. A server holding hundreds of tables
allocates that fast: under 2,000 moves a second a full collection came every two to three
seconds and stopped the event loop for 55-67 ms (every live object is visited), the whole
99th percentile of a move's round trip (docs/performance.md).

``tune_gc`` does two things once start-up is over:

1. ``gc.freeze()`` moves everything alive then (modules, the engine's precomputed tables,
   tables resumed from the store) into a generation that collections never visit. Frozen
   objects are still freed by reference counting as usual.
2. Thresholds ``GC_THRESHOLDS``: a young collection only every 50,000 net container
   allocations, so the short-lived objects of a move are gone before one runs and few
   survive to be promoted; the middle and old generations are collected after 20 and 10 of
   the one below, as before in proportion. Measured at 2,000 moves a second: a young
   collection every 7 s of about 10 ms, no full collection in minutes.

Cyclic garbage still gets collected, only later: at most about 50,000 objects wait for it.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_gc"]

GC_THRESHOLDS = (50_000, 20, 10)
"""``gc.set_threshold`` arguments: young, middle and old generation."""


def tune_gc() -> None:
    """Collect once, freeze what is alive, and raise the collection thresholds (see above)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
