"""Random playouts of every preset at every player count, with or without invariant checks.

    python -m bench.simulate_all [--games N] [--no-check] [--variant V ...] [--jobs J]

Prints one row per (preset, players): games completed, hands, moves, games/s and invariant
violations, then the totals. Each row is one ``ramino simulate`` run (same seed scheme), so a
row can be reproduced with ``ramino simulate --variant V --players P --games N --seed S``.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from server.engine import VARIANTS
from server.simulation import simulate


def _run(job: tuple[str, int, int, str, bool]) -> dict[str, Any]:
    variant, players, games, seed, check = job
    return simulate(variant, players, games, seed=seed, check=check).as_json()


def main(argv: list[str] | None = None) -> int:
    """Run the sweep and print the table; exit 1 if any invariant was violated."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--seed", default="sweep")
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    names = args.variant or sorted(VARIANTS)
    jobs = [
        (name, players, args.games, args.seed, not args.no_check)
        for name in names
        for players in range(VARIANTS[name].min_players, VARIANTS[name].max_players + 1)
    ]
    print(
        f"{'variant':<16}{'players':>8}{'completed':>11}{'hands':>9}{'moves':>10}"
        f"{'games/s':>10}{'violations':>12}"
    )
    violations = 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for row in pool.map(_run, jobs):
            violations += row["invariant_violations"]
            print(
                f"{row['variant']:<16}{row['players']:>8}{row['completed']:>6}/{row['games']:<4}"
                f"{row['hands']:>9}{row['moves']:>10}{row['games_per_s']:>10.1f}"
                f"{row['invariant_violations']:>12}",
                flush=True,
            )
            for line in row["violations"]:
                print(f"    {line}")
    print(f"total invariant violations: {violations}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
