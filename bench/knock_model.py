"""Fit the knock rule of ``mc`` version 4 (``bots.policies.knock_model``) to playouts.

Run with ``python -m bench.knock_model [--matches N] [--jobs J] [--shuffles S] [--seed P]
[--write]``. It plays ``N`` ladder matches of the ``gin-2`` pool (one deal, both seat orders)
between two ``heuristic`` policies. At every decision where the knock rule applies (a knock
other than gin and a discard are both legal), it takes the rule's two candidates, knocking and
the heuristic's best discard, and plays the hand on after each from the *true* state: both
seats as fresh ``heuristic`` policies that have seen the game so far, the true hands, and ``S``
shuffles of the true stock (the same shuffle for both candidates). The target is the mean of
*margin after knocking less margin after playing on*; the inputs are the rule's features as
the deciding seat knows them.

It prints the five-fold cross-validated result of a ridge regression (folds by match): the
points per decision the fitted rule gains over the heuristic's own choice on held-out matches
(with the mean target and with a single playout on the true stock), how often each names the
better move, and how often the fitted rule departs from the heuristic. Then it fits on all the
decisions and prints the ``MODEL`` block; ``--write`` puts it into
``bots/policies/knock_model.py``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import multiprocessing
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy

from bench.mc_knocks import _Game, margin_after
from bots.policies import knock_model
from bots.policies.base import Policy
from bots.policies.heuristic import GinTurn, HeuristicPolicy
from protocol.game import View
from server.engine import (
    Command,
    Knock,
    Rules,
    State,
)
from server.ladder.matches import play_match
from server.ladder.pools import parse_pools

_RIDGE = 10.0
MODULE = Path(__file__).resolve().parents[1] / "bots" / "policies" / "knock_model.py"


@dataclass(frozen=True)
class Row:
    """One decision: the features, the mean target over the shuffles and the one on the true
    stock, whether the heuristic knocked, and the match it came from."""

    features: tuple[float, ...]
    target: float
    real: float
    heuristic_knocks: bool
    match: int


def _margin(
    rules: Rules, players: Sequence[Policy], state: State, seat: int, command: Command, seed: int
) -> float:
    """``seat``'s margin at the end of the hand after ``command``, both seats then played by
    copies of ``players`` (so the same players serve every playout)."""
    return margin_after(
        rules, copy.deepcopy(list(players)), state, seat, command, random.Random(seed)
    )


def collect(match: int, prefix: str, shuffles: int) -> list[Row]:
    """The decisions of one match (seed ``PREFIX + match``)."""
    rules = parse_pools("gin-2")[0].rules()
    game = _Game(rules)
    rows: list[Row] = []

    class Recorder(HeuristicPolicy):
        def choose(
            self, rules: Rules, seen: View, actions: Sequence[Command], rng: random.Random
        ) -> Command:
            memory = self.tracker.sync(seen)
            default = super().choose(rules, seen, actions, rng)
            if seen.phase != "play" or len(actions) == 1:
                return default
            turn = GinTurn(rules, seen, actions, memory, self.gin)
            pair = knock_model.candidates(turn, default)
            if pair is None:
                return default
            knock, on = pair
            knocked = isinstance(default, Knock)
            values = tuple(knock_model.features(turn, knock, on, knocked))
            players, state = game.replay()
            shuffler = random.Random(f"{prefix}{match}:{len(rows)}")

            def difference(stock: tuple[int, ...], seed: int) -> float:
                world = dataclasses.replace(state, stock=stock)
                return _margin(rules, players, world, seen.seat, knock, seed) - _margin(
                    rules, players, world, seen.seat, on, seed
                )

            real = difference(state.stock, 0)
            total = 0.0
            for _ in range(shuffles):
                stock = list(state.stock)
                shuffler.shuffle(stock)
                total += difference(tuple(stock), shuffler.getrandbits(32))
            rows.append(Row(values, total / shuffles, real, knocked, match))
            return default

    play_match(rules, ["a", "b"], f"{prefix}{match}", game.watch, lambda name: Recorder())
    return rows


def fit(rows: Sequence[Row]) -> knock_model.KnockModel:
    """Ridge regression of the targets on the standardised features."""
    inputs = numpy.asarray([row.features for row in rows], dtype=float)
    targets = numpy.asarray([row.target for row in rows], dtype=float)
    mean = inputs.mean(axis=0)
    scale = inputs.std(axis=0) + 1e-9
    design = numpy.c_[numpy.ones(len(rows)), (inputs - mean) / scale]
    weights = numpy.linalg.solve(
        design.T @ design + _RIDGE * numpy.eye(design.shape[1]), design.T @ targets
    )
    return knock_model.KnockModel(
        tuple(float(value) for value in mean),
        tuple(float(value) for value in scale),
        tuple(float(value) for value in weights),
    )


def cross_validate(rows: Sequence[Row], folds: int = 5) -> dict[str, float]:
    """Held-out figures of the fitted rule against the heuristic's choice (folds by match)."""
    gained = gained_real = 0.0
    right = heuristic_right = departures = 0
    for fold in range(folds):
        train = [row for row in rows if row.match % folds != fold]
        model = fit(train)
        for row in rows:
            if row.match % folds != fold:
                continue
            knocks = model.value(row.features) > 0
            change = int(knocks) - int(row.heuristic_knocks)
            gained += change * row.target
            gained_real += change * row.real
            right += knocks == (row.target > 0)
            heuristic_right += row.heuristic_knocks == (row.target > 0)
            departures += knocks != row.heuristic_knocks
    count = max(1, len(rows))
    return {
        "gain": gained / count,
        "gain_real": gained_real / count,
        "right": right / count,
        "heuristic_right": heuristic_right / count,
        "departures": departures / count,
    }


def model_source(model: knock_model.KnockModel) -> str:
    """The ``MODEL = ...`` block of ``bots/policies/knock_model.py`` for ``model``."""

    def numbers(values: Sequence[float]) -> str:
        return "".join(f"        {value!r},\n" for value in values)

    return (
        "MODEL = KnockModel(\n"
        f"    mean=(\n{numbers(model.mean)}    ),\n"
        f"    scale=(\n{numbers(model.scale)}    ),\n"
        f"    weights=(\n{numbers(model.weights)}    ),\n"
        ")\n"
    )


def write(model: knock_model.KnockModel, path: Path = MODULE) -> None:
    """Replace the ``MODEL`` block at the end of ``path``."""
    text = path.read_text()
    head, found, _ = text.partition("MODEL = KnockModel(")
    if not found:
        raise ValueError(f"no MODEL block in {path}")
    path.write_text(head + model_source(model))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.knock_model", description=__doc__)
    parser.add_argument("--matches", type=int, default=3000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--shuffles", type=int, default=8)
    parser.add_argument("--seed", default="k", help="prefix of the match seeds")
    parser.add_argument("--write", action="store_true", help="write the fitted MODEL block")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    jobs = [(match, args.seed, args.shuffles) for match in range(args.matches)]
    with multiprocessing.Pool(args.jobs) as pool:
        found = pool.starmap(collect, jobs, chunksize=8)
    rows = [row for rows in found for row in rows]
    print(
        f"{len(rows)} decisions in {args.matches} matches ({time.perf_counter() - started:.0f} s);"
        f" the heuristic knocked in {sum(row.heuristic_knocks for row in rows)}"
    )
    figures = cross_validate(rows)
    print(
        f"held out: {figures['gain']:+.3f} points a decision against the heuristic's choice"
        f" ({figures['gain_real']:+.3f} by the true stock's playout); names the better move"
        f" {figures['right']:.3f} (the heuristic {figures['heuristic_right']:.3f}); departs"
        f" {figures['departures']:.3f}"
    )
    model = fit(rows)
    print(model_source(model), end="")
    if args.write:
        write(model)
        print(f"written to {MODULE}")


if __name__ == "__main__":
    main()
