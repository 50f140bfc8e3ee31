"""A load test's figures over time, and their trend: for soak runs.

With ``--ramino-timeline FILE`` (``ramino loadtest --timeline FILE``) the load players' process
writes one CSV row every ``--ramino-timeline-every`` seconds (default 10): the commands answered
in that window and the p50/p99 of their command -> reply times, and, with
``--ramino-server-metrics URL`` (set by ``ramino loadtest --local``), the server's resident
memory and CPU seconds read from its ``/metrics`` (``ramino serve --metrics``), with the bytes
SQLite holds and, when the server traces them (``RAMINO_TRACEMALLOC``), those of Python's
objects. With ``--processes`` the master writes the rows, from the command times its workers
send with their reports.

``python -m loadtest.timeline FILE`` prints the run's trend: the least-squares slope per hour of
the server's memory (resident, SQLite's, Python's) and of the windows' p99, with the first,
last and extreme values.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "FIELDS",
    "Trend",
    "Window",
    "percentile",
    "read_server_metrics",
    "slope_per_hour",
    "trend",
]

FIELDS = (
    "elapsed_s",
    "users",
    "commands",
    "commands_per_s",
    "p50_ms",
    "p99_ms",
    "server_rss_mib",
    "server_cpu_s",
    "server_cpu_pct",
    "server_sqlite_mib",
    "server_traced_mib",
)
"""The columns of a timeline file (empty cells: not measured)."""

_METRIC = re.compile(
    r"^(process_resident_memory_bytes|process_cpu_seconds_total|ramino_sqlite_memory_bytes"
    r"|ramino_python_traced_bytes) (\S+)$",
    re.M,
)


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile of ``values`` (``share`` 0.99: the p99); NaN if empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def slope_per_hour(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(seconds, value)`` points, in value units per hour.

    NaN values are left out; fewer than two points (or all at one time) give NaN.
    """
    kept = [(t, v) for t, v in points if not math.isnan(v)]
    if len(kept) < 2:
        return math.nan
    mean_t = sum(t for t, _ in kept) / len(kept)
    mean_v = sum(v for _, v in kept) / len(kept)
    spread = sum((t - mean_t) ** 2 for t, _ in kept)
    if spread == 0:
        return math.nan
    slope = sum((t - mean_t) * (v - mean_v) for t, v in kept) / spread
    return slope * 3600.0


def read_server_metrics(url: str, timeout: float = 5.0) -> tuple[float, float, float, float]:
    """The server's resident memory (bytes), CPU seconds, SQLite's bytes and the bytes of
    Python objects it traces (``RAMINO_TRACEMALLOC``; NaN when not traced) from its
    ``/metrics`` page."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode()
    found = dict(_METRIC.findall(text))
    return (
        float(found.get("process_resident_memory_bytes", "nan")),
        float(found.get("process_cpu_seconds_total", "nan")),
        float(found.get("ramino_sqlite_memory_bytes", "nan")),
        float(found.get("ramino_python_traced_bytes", "nan")),
    )


@dataclass
class Window:
    """The command -> reply times of the current window, and the last server CPU reading."""

    started: float = field(default_factory=time.monotonic)
    latencies_ms: list[float] = field(default_factory=list)
    cpu: tuple[float, float] | None = None
    """(monotonic time, server CPU seconds) of the previous row."""

    def row(
        self,
        now: float,
        elapsed: float,
        users: int,
        rss: float,
        cpu_s: float,
        sqlite: float = math.nan,
        traced: float = math.nan,
    ) -> dict[str, str]:
        """The row of the window ending at ``now`` (and start the next window)."""
        seconds = max(now - self.started, 1e-9)
        count = len(self.latencies_ms)
        cpu_pct = ""
        if self.cpu is not None and not math.isnan(cpu_s):
            cpu_pct = f"{100.0 * (cpu_s - self.cpu[1]) / max(now - self.cpu[0], 1e-9):.1f}"
        if not math.isnan(cpu_s):
            self.cpu = (now, cpu_s)
        row = {
            "elapsed_s": f"{elapsed:.1f}",
            "users": str(users),
            "commands": str(count),
            "commands_per_s": f"{count / seconds:.1f}",
            "p50_ms": "" if not count else f"{percentile(self.latencies_ms, 0.5):.1f}",
            "p99_ms": "" if not count else f"{percentile(self.latencies_ms, 0.99):.1f}",
            "server_rss_mib": "" if math.isnan(rss) else f"{rss / 2**20:.1f}",
            "server_cpu_s": "" if math.isnan(cpu_s) else f"{cpu_s:.2f}",
            "server_cpu_pct": cpu_pct,
            "server_sqlite_mib": "" if math.isnan(sqlite) else f"{sqlite / 2**20:.1f}",
            "server_traced_mib": "" if math.isnan(traced) else f"{traced / 2**20:.1f}",
        }
        self.started = now
        self.latencies_ms = []
        return row


@dataclass(frozen=True)
class Trend:
    """The trend of a timeline: its length, and per figure first/last/min/max and slope."""

    rows: int
    seconds: float
    figures: dict[str, tuple[float, float, float, float, float]]
    """Per column: first, last, min, max, slope per hour (NaN when not measured)."""

    def lines(self) -> list[str]:
        """The trend for people."""
        lines = [f"{self.rows} rows over {self.seconds / 60:.1f} min"]
        for name, (first, last, low, high, slope) in self.figures.items():
            lines.append(
                f"{name}: first {first:.1f}, last {last:.1f}, min {low:.1f}, max {high:.1f}, "
                f"slope {slope:+.2f}/h"
            )
        return lines


def _number(text: str) -> float:
    return float(text) if text else math.nan


def trend(rows: Sequence[dict[str, str]], skip_seconds: float = 0.0) -> Trend:
    """The trend of timeline ``rows``, leaving out those of the first ``skip_seconds`` (the
    ramp-up)."""
    kept = [dict(row) for row in rows if _number(row["elapsed_s"]) >= skip_seconds]
    for row in kept:
        # What the resident memory holds besides SQLite's caches: flat once Python's heap is.
        rest = _number(row.get("server_rss_mib", "")) - _number(row.get("server_sqlite_mib", ""))
        row["server_rss_less_sqlite_mib"] = "" if math.isnan(rest) else f"{rest:.1f}"
    figures: dict[str, tuple[float, float, float, float, float]] = {}
    for name in (
        "server_rss_mib",
        "server_sqlite_mib",
        "server_rss_less_sqlite_mib",
        "server_traced_mib",
        "p99_ms",
        "p50_ms",
        "commands_per_s",
        "server_cpu_pct",
    ):
        points = [(_number(row["elapsed_s"]), _number(row.get(name, ""))) for row in kept]
        values = [v for _, v in points if not math.isnan(v)]
        if not values:
            continue
        figures[name] = (values[0], values[-1], min(values), max(values), slope_per_hour(points))
    times = [_number(row["elapsed_s"]) for row in kept]
    seconds = (max(times) - min(times)) if times else 0.0
    return Trend(rows=len(kept), seconds=seconds, figures=figures)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m loadtest.timeline FILE [--skip SECONDS]``: print a timeline's trend."""
    parser = argparse.ArgumentParser(prog="python -m loadtest.timeline", description=__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument(
        "--skip", type=float, default=60.0, help="leave out the first SECONDS (ramp-up)"
    )
    args = parser.parse_args(argv)
    with args.file.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for line in trend(rows, args.skip).lines():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
