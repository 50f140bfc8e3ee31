"""The end-of-run summary of a load test and the pass/fail of its thresholds.

Computed from Locust's stats (on the master in a distributed run, where every worker's numbers
are merged), printed, written as JSON for ``ramino loadtest`` and CI, and turned into the exit
status.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from locust.stats import RequestStats, StatsEntry, StatsError

from loadtest.player import KIND_COMMAND, KIND_GAME, KIND_REFUSED, KIND_RESYNC

__all__ = ["GENERATOR_CPU_LIMIT", "Summary", "Thresholds", "summarize"]

GENERATOR_CPU_LIMIT = 90.0
"""Percent of one core above which a load player process counts as saturated (Locust's own
warning threshold)."""

_CODE = re.compile(r"^\w+\('([^']*)'")


@dataclass(frozen=True, slots=True)
class Thresholds:
    """What a run must meet to pass."""

    p99_ms: float = 1000.0
    """Most milliseconds the 99th percentile of command -> reply may take."""
    max_error_rate: float = 0.01
    """Largest share of failed requests (0.01: 1 %)."""


@dataclass
class Summary:
    """The figures of a run and whether it met its thresholds."""

    requests: int
    failures: int
    error_rate: float
    commands: int
    p50_command_ms: float
    p99_command_ms: float
    games_finished: int
    resyncs: int
    errors_by_code: dict[str, int] = field(default_factory=dict)
    refused_by_code: dict[str, int] = field(default_factory=dict)
    p99_ms: float = 0.0
    max_error_rate: float = 0.0
    passed: bool = False
    generator_cpu: float = 0.0
    """The load generator's CPU over the run, in percent of one core: its busiest process."""
    generator_cpu_peak: float = 0.0
    """The highest of Locust's own CPU samples (every 10 s, each process), in percent."""
    generator_cpu_limit: float = GENERATOR_CPU_LIMIT
    generator_saturated: bool = False
    """Whether a player process used more than ``generator_cpu_limit``: its own queue then
    adds to the latencies, and the users asked for were not driven at full pace."""

    def lines(self) -> list[str]:
        """The summary for people, one figure a line, ending with PASS or FAIL."""
        p99_mark = "ok" if self.p99_command_ms <= self.p99_ms else "MISSED"
        rate_mark = "ok" if self.error_rate <= self.max_error_rate else "MISSED"
        lines = [
            f"requests {self.requests}, failures {self.failures}",
            f"commands {self.commands}: p50 {self.p50_command_ms:.0f} ms, "
            f"p99 {self.p99_command_ms:.0f} ms (threshold {self.p99_ms:.0f} ms: {p99_mark})",
            f"error rate {self.error_rate:.4%} (threshold {self.max_error_rate:.2%}: {rate_mark})",
            f"games finished {self.games_finished}, resyncs {self.resyncs}",
        ]
        if self.errors_by_code:
            errors = ", ".join(f"{code} {n}" for code, n in sorted(self.errors_by_code.items()))
            lines.append(f"errors by code: {errors}")
        if self.refused_by_code:
            refused = ", ".join(f"{code} {n}" for code, n in sorted(self.refused_by_code.items()))
            lines.append(f"expected refusals: {refused}")
        lines.append(self.generator_line())
        lines.append("PASS" if self.passed else "FAIL")
        return lines

    def generator_line(self) -> str:
        """What the load generator's CPU says of the figures above."""
        figures = (
            f"load generator CPU {self.generator_cpu:.0f}% of a core over the run (busiest "
            f"process), Locust's samples at most {self.generator_cpu_peak:.0f}%"
        )
        if not self.generator_saturated:
            return f"{figures} (limit {self.generator_cpu_limit:.0f}%: ok)"
        return (
            f"{figures} (limit {self.generator_cpu_limit:.0f}%: SATURATED): the latencies "
            "include the players' own queueing and the load asked for was not fully offered; "
            "spread the users over more processes (--processes N) or machines"
        )

    def to_json(self) -> dict[str, Any]:
        """The summary as a JSON object."""
        return asdict(self)


def _code(error: StatsError) -> str:
    text = StatsError.parse_error(error.error)
    match = _CODE.match(text)
    return match.group(1) if match else text


def summarize(
    stats: RequestStats,
    thresholds: Thresholds,
    generator: tuple[float, float],
    cpu_limit: float,
) -> Summary:
    """The summary of ``stats`` against ``thresholds``.

    The p99 of command -> reply is taken over every command type together; the error rate is
    Locust's: failed requests of every type over all requests. ``generator`` is the load
    generator's CPU (its busiest process's average over the run and the highest of Locust's
    samples, percent of one core), reported against ``cpu_limit``; it does not change the
    verdict.
    """
    commands = StatsEntry(stats, "commands", KIND_COMMAND)
    games = resyncs = 0
    refused: Counter[str] = Counter()
    for (name, method), entry in stats.entries.items():
        if method == KIND_COMMAND:
            commands.extend(entry)
        elif method == KIND_GAME:
            games += entry.num_requests - entry.num_failures
        elif method == KIND_RESYNC:
            resyncs += entry.num_requests
        elif method == KIND_REFUSED:
            refused[name] += entry.num_requests
    errors: Counter[str] = Counter()
    for error in stats.errors.values():
        errors[_code(error)] += error.occurrences
    total = stats.total
    requests = total.num_requests  # failures included
    error_rate = total.num_failures / requests if requests else 0.0
    p99 = float(commands.get_response_time_percentile(0.99)) if commands.num_requests else 0.0
    p50 = float(commands.get_response_time_percentile(0.5)) if commands.num_requests else 0.0
    passed = bool(commands.num_requests) and p99 <= thresholds.p99_ms
    passed = passed and error_rate <= thresholds.max_error_rate
    return Summary(
        requests=requests,
        failures=total.num_failures,
        error_rate=error_rate,
        commands=commands.num_requests,
        p50_command_ms=p50,
        p99_command_ms=p99,
        games_finished=games,
        resyncs=resyncs,
        errors_by_code=dict(errors),
        refused_by_code=dict(refused),
        p99_ms=thresholds.p99_ms,
        max_error_rate=thresholds.max_error_rate,
        passed=passed,
        generator_cpu=generator[0],
        generator_cpu_peak=generator[1],
        generator_cpu_limit=cpu_limit,
        generator_saturated=max(generator) > cpu_limit,
    )
