"""Where ``mc`` leaves ``heuristic``'s play in Gin Rummy, and whether it should have.

Run with ``python -m bench.mc_knocks [--matches N] [--jobs J] [--seed S] [--spec mc:200:v3]
[--set NAME=VALUE ...]`` (``--set`` changes an attribute of the ``mc`` policy: a variant).
It plays ``N`` ladder matches of the gin-2 pool (one deal, both seat orders, as
``server.ladder.matches``) between ``--spec`` and ``heuristic`` and prints two things.

1. The match score, and the matches grouped by the kinds of decision where ``mc`` chose
   otherwise than the heuristic would have (its search's first candidate is the heuristic's
   move; version 4's knock rule reports its decisions the same way, without values).
   ``mc`` plays every other decision as ``heuristic``, so a match in which it never
   deviates is played identically in both orders and is a tie: every won or lost match comes
   from a deviation, and the table says which kinds win.
2. The knock decisions: each search in which knocking and playing on were both candidates.
   For each, the search's estimate of knocking minus playing on (its mean over the sampled
   worlds), against the *real* difference: the hand played on from the true cards and stock,
   both seats then played by fresh ``heuristic`` policies that have seen what the real players
   saw. One real continuation is a single draw of the future, so a single row is noisy; the
   averages over many say whether the estimate knows more than the heuristic's knock rule.

The search draws ``mc``'s budget of process time, so a run is reproducible only as far as the
budget does not stop the search; expect small differences between runs.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from bots.duel import mean_interval
from bots.policies.base import Policy, find_policy
from bots.policies.heuristic import HeuristicPolicy
from bots.policies.mc import MonteCarloPolicy
from protocol.game import View
from server.engine import (
    Command,
    Discard,
    Event,
    HandEnded,
    Knock,
    Rules,
    State,
    TakeDiscard,
    advance,
    decide,
    evolve,
    legal_actions,
    new_game,
    redact,
    view,
)
from server.ladder.matches import play_match
from server.ladder.pools import parse_pools

_STEPS = 400


@dataclass(frozen=True)
class KnockRow:
    """One search between knocking and playing on."""

    heuristic_knocked: bool
    chosen_knock: bool
    estimate: float
    """The search's mean of the best knock less the play-on candidate's."""
    real: float
    """The real continuation's margin after that knock less after playing on."""
    stock: int


@dataclass(frozen=True)
class MatchRow:
    score: float
    kinds: tuple[str, ...]
    knocks: tuple[KnockRow, ...]


def _kind(seen: View, default: Command, chosen: Command) -> str:
    if seen.phase in ("draw", "first_upcard"):
        taken = "take" if isinstance(chosen, TakeDiscard) else "pass"
        return f"wall {taken}" if seen.stock_size <= 2 else f"draw {taken}"
    if isinstance(default, Knock):
        return "which knock" if isinstance(chosen, Knock) else "play on"
    return "knock now" if isinstance(chosen, Knock) else "discard"


class _Game:
    """The events of the game being played, to rebuild its true state and its players."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.events: list[Event] = []
        self.rotation = -1

    def watch(self, rotation: int, event: Event) -> None:
        if rotation != self.rotation:
            self.events.clear()
            self.rotation = rotation
        self.events.append(event)

    def replay(self) -> tuple[list[Policy], State]:
        """Fresh ``heuristic`` policies, one a seat, that have seen the game so far, and its
        true state."""
        players: list[Policy] = [HeuristicPolicy() for _ in range(self.rules.players)]
        state = new_game(self.rules)
        for event in self.events:
            state = self._apply(state, event, players)
        return players, state

    def play_on(self, seat: int, command: Command) -> float:
        """``seat``'s margin at the end of the hand after ``command`` in the true state, both
        seats then played by ``heuristic`` policies that have seen the game so far."""
        players, state = self.replay()
        return margin_after(self.rules, players, state, seat, command, random.Random(0))

    @staticmethod
    def _apply(state: State, event: Event, players: Sequence[Policy]) -> State:
        for watcher, policy in enumerate(players):
            policy.observe(watcher, redact(state, event, watcher))
        return evolve(state, event)


def margin_after(
    rules: Rules,
    players: Sequence[Policy],
    state: State,
    seat: int,
    command: Command,
    rng: random.Random,
) -> float:
    """``seat``'s margin (its points less the others' mean) at the end of the hand after
    ``command`` in ``state``, every seat then played by its policy of ``players`` (which
    observe the events)."""

    def choose(state: State, turn: int) -> Command:
        return players[turn].choose(rules, view(state, turn), legal_actions(state, turn), rng)

    pending = decide(state, seat, command)
    for _ in range(_STEPS):
        for event in pending:
            if isinstance(event, HandEnded):
                points = [float(Fraction(point)) for point in event.points]
                others = [p for index, p in enumerate(points) if index != seat]
                return points[seat] - sum(others) / len(others)
            state = _Game._apply(state, event, players)
        pending = advance(state, rng, choose)
    return 0.0


def _setting(policy: MonteCarloPolicy, pair: str) -> None:
    name, _, text = pair.partition("=")
    current = getattr(policy, name)  # an unknown name is an AttributeError
    value: object
    if isinstance(current, bool):
        value = text in ("1", "true", "yes")
    elif isinstance(current, frozenset):
        value = frozenset(text.split("+"))
    else:
        value = type(current)(text)
    setattr(policy, name, value)


def _match(spec: str, seed: str, settings: tuple[str, ...] = ()) -> MatchRow:
    rules = parse_pools("gin-2")[0].rules()
    game = _Game(rules)
    kinds: list[str] = []
    knocks: list[KnockRow] = []

    def trace(seen: View, means: list[tuple[Command, float]], chosen: Command) -> None:
        default = means[0][0]
        if chosen != default:
            kinds.append(_kind(seen, default, chosen))
        if seen.phase in ("draw", "first_upcard"):
            return
        knock = max(
            ((c, v) for c, v in means if isinstance(c, Knock) and not math.isnan(v)),
            key=lambda pair: pair[1],
            default=None,
        )
        on = next(((c, v) for c, v in means if isinstance(c, Discard)), None)
        if knock is None or on is None or math.isnan(on[1]):
            return
        real = game.play_on(seen.seat, knock[0]) - game.play_on(seen.seat, on[0])
        knocks.append(
            KnockRow(
                isinstance(default, Knock),
                isinstance(chosen, Knock),
                knock[1] - on[1],
                real,
                seen.stock_size,
            )
        )

    def make(name: str) -> Policy:
        policy = find_policy(name)
        if isinstance(policy, MonteCarloPolicy):
            policy.trace = trace
            for pair in settings:
                _setting(policy, pair)
        return policy

    outcome = play_match(rules, [spec, "heuristic"], seed, game.watch, make)
    first, second = outcome.ranks
    score = 1.0 if first < second else 0.0 if first > second else 0.5
    return MatchRow(score, tuple(sorted(set(kinds))), tuple(knocks))


def _interval(values: Sequence[float]) -> str:
    if not values:
        return "-"
    mean, low, high = mean_interval(values)
    return f"{mean:+.2f} ± {(high - low) / 2:.2f}"


def _report(spec: str, rows: Sequence[MatchRow], seconds: float) -> None:
    scores = [row.score for row in rows]
    print(f"{spec} against heuristic, gin-2 ladder matches: {len(rows)} in {seconds:.0f} s")
    mean, low, high = mean_interval(scores)
    print(f"  match score {mean:.3f} [{low:.3f}, {high:.3f}]")
    print()
    print("Matches by the kinds of decision where mc left the heuristic's move")
    print(f"  {'kinds':<36} {'matches':>7} {'won':>5} {'lost':>5} {'score':>6}")
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        groups[", ".join(row.kinds) or "(none)"].append(row.score)
    for name, group in sorted(groups.items(), key=lambda item: -len(item[1])):
        won = sum(1 for s in group if s == 1)
        lost = sum(1 for s in group if s == 0)
        print(f"  {name:<36} {len(group):>7} {won:>5} {lost:>5} {statistics.fmean(group):>6.3f}")
    knocks = [knock for row in rows for knock in row.knocks]
    print()
    print(f"Knock decisions (knocking and playing on both searched): {len(knocks)}")
    if not knocks:
        return
    decided = [k for k in knocks if k.real != 0]
    if decided:
        search = sum(1 for k in decided if (k.estimate > 0) == (k.real > 0)) / len(decided)
        rule = sum(1 for k in decided if k.heuristic_knocked == (k.real > 0)) / len(decided)
        chosen = sum(1 for k in decided if k.chosen_knock == (k.real > 0)) / len(decided)
        print(
            f"  the better move by the real continuation (where they differ, {len(decided)}):"
            f" the search's estimate names it {search:.3f}, the heuristic's rule {rule:.3f},"
            f" mc's choice {chosen:.3f}"
        )
    for knocked in (True, False):
        subset = [k for k in knocks if k.heuristic_knocked == knocked]
        if not subset:
            continue
        what = "the heuristic knocked" if knocked else "the heuristic played on"
        print(
            f"  {what}: {len(subset)}; real knock less play-on"
            f" {_interval([k.real for k in subset])},"
            f" estimate {_interval([k.estimate for k in subset])}"
        )
        ordered = sorted(subset, key=lambda k: k.estimate)
        step = max(1, math.ceil(len(ordered) / 5))
        for start in range(0, len(ordered), step):
            part = ordered[start : start + step]
            print(
                f"    estimate {part[0].estimate:+7.1f} .. {part[-1].estimate:+7.1f}:"
                f" {len(part):>4} decisions, real {_interval([k.real for k in part])}"
            )
    print("  by stock left (all knock decisions):")
    for low, high in ((0, 8), (9, 14), (15, 20), (21, 31)):
        part = [k for k in knocks if low <= k.stock <= high]
        if part:
            share = sum(k.heuristic_knocked for k in part) / len(part)
            print(
                f"    {low:>2}-{high:<2} cards: {len(part):>4} decisions, heuristic knocked"
                f" {share:.2f}, real {_interval([k.real for k in part])},"
                f" estimate {_interval([k.estimate for k in part])}"
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mc_knocks", description=__doc__)
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", default="knocks")
    parser.add_argument("--spec", default="mc:200:v3", help="the mc policy (default mc:200:v3)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set an attribute of the mc policy (a variant to measure; repeatable)",
    )
    args = parser.parse_args(argv)
    settings = tuple(args.set)
    jobs = [(args.spec, f"{args.seed}:{index}", settings) for index in range(args.matches)]
    started = time.perf_counter()
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            rows = pool.starmap(_match, jobs, chunksize=2)
    else:
        rows = [_match(*job) for job in jobs]
    name = " ".join((args.spec, *settings))
    _report(name, rows, time.perf_counter() - started)


if __name__ == "__main__":
    main()
