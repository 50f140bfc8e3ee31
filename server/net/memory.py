"""Where the server's memory goes: Python's heap against SQLite's, for an operator chasing growth.

A process's resident memory (RSS) holds Python's objects, SQLite's page caches and statements
(allocated by SQLite, invisible to Python), the allocators' free lists and the libraries. To
tell a leak of Python objects from caches that fill:

- ``RAMINO_TRACEMALLOC=FRAMES`` (a positive number) makes ``ramino serve`` trace Python's
  allocations from start-up with ``FRAMES`` frames each (1 is enough to name the line; tracing
  costs CPU, a few tens of per cent);
- ``kill -USR1 PID`` then logs a report (``memory_report``): the RSS, the bytes SQLite holds
  (``sqlite3_memory_used``), the bytes Python traces, and the lines that allocated most of
  them, with their growth since the previous report. Without tracing the report has the first
  three figures only (Python's: none).

``/metrics`` carries the same figures as gauges (``ramino_sqlite_memory_bytes``,
``ramino_python_traced_bytes``), so a load test's timeline can set their slopes against the
RSS's.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import resource
import signal
import tracemalloc
from collections.abc import Mapping

__all__ = [
    "TRACEMALLOC_ENV",
    "MemoryReporter",
    "install_report_signal",
    "rss_bytes",
    "sqlite_memory_bytes",
    "start_tracing",
    "traced_bytes",
]

TRACEMALLOC_ENV = "RAMINO_TRACEMALLOC"
"""Environment variable: trace Python's allocations with this many frames (unset or 0: off)."""

_log = logging.getLogger(__name__)


def _sqlite_memory_used() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        import _sqlite3

        library = ctypes.CDLL(_sqlite3.__file__)  # its symbols and its libsqlite3's
        function = library.sqlite3_memory_used
    except (ImportError, OSError, AttributeError):
        return None
    function.restype = ctypes.c_int64
    function.argtypes = []
    return function


_MEMORY_USED = _sqlite_memory_used()


def sqlite_memory_bytes() -> int | None:
    """Bytes SQLite has allocated in this process (its page caches, statements and schemas;
    all connections), or None where the library's counter cannot be reached."""
    if _MEMORY_USED is None:
        return None
    return int(_MEMORY_USED())


def traced_bytes() -> int | None:
    """Bytes of Python objects alive now, while tracemalloc traces; else None."""
    if not tracemalloc.is_tracing():
        return None
    return tracemalloc.get_traced_memory()[0]


def rss_bytes() -> int:
    """The process's resident memory now (Linux; elsewhere its peak)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def start_tracing(env: Mapping[str, str] | None = None) -> int:
    """Start tracemalloc when ``RAMINO_TRACEMALLOC`` asks for it; the frames traced (0: off).

    Raises:
        ValueError: the variable is not a whole number.
    """
    env = os.environ if env is None else env
    text = env.get(TRACEMALLOC_ENV, "").strip()
    frames = int(text) if text else 0
    if frames > 0 and not tracemalloc.is_tracing():
        tracemalloc.start(frames)
    return max(frames, 0)


def _mib(value: float) -> str:
    return f"{value / 2**20:.1f} MiB"


def _kib(value: float) -> str:
    return f"{value / 2**10:+.1f} KiB"


class MemoryReporter:
    """Reports of the process's memory, each traced line compared with the previous report.

    Only the per-line totals of a report are kept for the next (a few hundred entries), never
    the snapshot itself: a snapshot copies every trace and would hold tens of MiB.
    """

    def __init__(self, limit: int = 15) -> None:
        self.limit = limit
        self._previous: dict[tracemalloc.Traceback, int] | None = None

    def report(self) -> str:
        """RSS, SQLite's bytes, Python's traced bytes and the top allocating lines (text)."""
        sqlite = sqlite_memory_bytes()
        head = (
            f"memory: rss {_mib(rss_bytes())}, sqlite "
            + (_mib(sqlite) if sqlite is not None else "unknown")
            + ", python traced "
            + (
                _mib(tracemalloc.get_traced_memory()[0])
                if tracemalloc.is_tracing()
                else f"off (set {TRACEMALLOC_ENV}=1)"
            )
        )
        if not tracemalloc.is_tracing():
            return head
        snapshot = tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__),)
        )
        statistics = snapshot.statistics("lineno")
        del snapshot
        previous = self._previous
        self._previous = {stat.traceback: stat.size for stat in statistics}
        lines = [head]
        if previous is None:
            for stat in statistics[: self.limit]:
                lines.append(f"  {_kib(stat.size)[1:]} in {stat.count} blocks: {stat.traceback}")
            return "\n".join(lines)
        grown = sorted(
            statistics,
            key=lambda stat: abs(stat.size - previous.get(stat.traceback, 0)),
            reverse=True,
        )
        for stat in grown[: self.limit]:
            change = stat.size - previous.get(stat.traceback, 0)
            lines.append(
                f"  {_kib(stat.size)[1:]} ({_kib(change)}) in {stat.count} blocks: {stat.traceback}"
            )
        return "\n".join(lines)


def install_report_signal(
    loop: asyncio.AbstractEventLoop, reporter: MemoryReporter | None = None
) -> MemoryReporter:
    """Log ``reporter.report()`` (at WARNING, so a quiet server shows it) on each SIGUSR1."""
    reporter = reporter or MemoryReporter()

    def handle() -> None:
        _log.warning("%s", reporter.report())

    loop.add_signal_handler(signal.SIGUSR1, handle)
    return reporter
