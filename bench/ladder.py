"""Ladder throughput: rated Gin Rummy 2-player matches (and games) per hour.

Run with ``python -m bench.ladder [--matches N] [--concurrency K] [--pool gin-2]``. A fresh
ladder on a temporary SQLite file enters the default built-in entrants and plays ``N``
duplicate matches (two games each in a 2-player pool) in ``K`` worker processes, as
``ramino ladder run`` does; the time runs from the first schedule to the last durable result,
worker start-up included. ``mc@4`` searches 200 ms per searched decision, so the rate depends
on how often it is drawn; the per-entrant mean match time is printed too.

``python -m bench.ladder --report STORE_URL [--ladder NAME]`` reads an existing ladder instead
and prints, per pool, the leaderboard, the head-to-head score of each entrant against the next
one down (95% interval over matches; ``yes`` when it lies above 0.5) and against every other
one, and the results and games after which the order stopped changing
(``server.ladder.stats``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from collections import defaultdict

from server.ladder.events import MatchResult
from server.ladder.pairing import PairingSettings
from server.ladder.pools import parse_pools
from server.ladder.runner import ProcessRunner
from server.ladder.service import Ladder, RunSettings
from server.ladder.stats import head_to_head, settling
from server.tables.store import open_store


async def _bench(pool: str, matches: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(f"sqlite:///{folder}/ladder.db")
        try:
            ladder = await Ladder.open(store, "bench")
            settings = RunSettings(
                parse_pools(pool),
                matches=matches,
                concurrency=concurrency,
                seed="bench",
                pairing=PairingSettings(min_matches=1),
            )
            runner = ProcessRunner(concurrency)
            started = time.perf_counter()
            try:
                await ladder.run(settings, runner)
            finally:
                await runner.close()
            seconds = time.perf_counter() - started
        finally:
            await store.close()
    results: list[MatchResult] = ladder.state.order
    games = sum(result.games for result in results)
    per_entrant: dict[str, list[float]] = defaultdict(list)
    for result in results:
        for name in result.entrants:
            per_entrant[name].append(result.seconds)
    print(
        f"ladder bench: pool {pool}, {len(results)} matches ({games} games),"
        f" concurrency {concurrency}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"  wall time {seconds:.1f} s")
    print(f"  rated matches/hour {3600 * len(results) / seconds:,.0f}")
    print(f"  rated games/hour   {3600 * games / seconds:,.0f}")
    for name, spent in sorted(per_entrant.items()):
        print(f"  {name:<12} {len(spent):>4} matches, mean {statistics.mean(spent):.3f} s a match")


async def _report(url: str, name: str) -> None:
    from server.tables.replay import open_existing_store

    store = await open_existing_store(url)
    try:
        ladder = await Ladder.open(store, name)
    finally:
        await store.close()
    state = ladder.state
    for pool in state.standings:
        board = state.leaderboard(pool)
        print(f"{pool}: {sum(1 for r in state.order if r.pool == pool)} results")
        pairs = {(row.first, row.second): row for row in head_to_head(state.order, pool)}
        for index, row in enumerate(board):
            line = (
                f"  {index + 1}. {row.name:<12} ordinal {row.rating.ordinal:6.2f}"
                f" mu {row.rating.mu:6.2f} sigma {row.rating.sigma:5.2f}"
                f" matches {row.matches:4}"
            )
            if index + 1 < len(board):
                below = board[index + 1].name
                h2h = pairs.get((row.name, below))
                if h2h is not None:
                    verdict = "yes" if h2h.better else "no"
                    line += (
                        f"  vs {below}: {h2h.score:.3f} [{h2h.low:.3f}, {h2h.high:.3f}]"
                        f" in {h2h.matches} (95%: {verdict})"
                    )
            print(line)
        print("  head to head (each pair, the better-rated first):")
        for index, row in enumerate(board):
            for lower in board[index + 1 :]:
                h2h = pairs.get((row.name, lower.name))
                if h2h is not None:
                    verdict = "yes" if h2h.better else "no"
                    if h2h.high < 0.5:
                        verdict = "no, reversed"
                    print(
                        f"    {row.name} vs {lower.name}: {h2h.score:.3f}"
                        f" [{h2h.low:.3f}, {h2h.high:.3f}] in {h2h.matches} (95%: {verdict})"
                    )
        settled = settling(state.order, pool)
        print(
            f"  order settled after {settled.settled_after} of {settled.results} results"
            f" ({settled.games} games)"
        )


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="gin-2")
    parser.add_argument("--matches", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--report", default="", metavar="STORE_URL")
    parser.add_argument("--ladder", default="main")
    args = parser.parse_args()
    if args.report:
        asyncio.run(_report(args.report, args.ladder))
    else:
        asyncio.run(_bench(args.pool, args.matches, args.concurrency))


if __name__ == "__main__":
    main()
