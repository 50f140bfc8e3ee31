"""Duplicate duels between policies, played in-process (``ramino duel``).

Theory of operation. A *deal* is a chance seed. Every deal is played once for each *seat
order*: the policies are assigned to the seats (cycling through the list when there are more
seats than policies) and every distinct permutation of that assignment is played (``--orders
all``; ``cyclic`` plays only its rotations). All the games of one deal draw their deck orders
from the same per-hand seeds (``{seed}:{deal}:hand{n}``), so the same cards reach the same seats
and each policy holds every seat's cards once: the luck of the deal cancels out. Policies get
their own generators (``{seed}:{deal}:{order}:{seat}``), so a run is reproducible whatever the
number of worker processes.

Without ``--target`` (or ``--game``) a game is one hand; with them it is a whole game to the
target (or the preset's own end). Each game gives every seat a *win share* (1 split among the
winners; a hand nobody wins goes to the best count, ties share) and points.

Statistics are computed over deals, not games, because the games of one deal are correlated:
the win share of a policy in a deal is its mean over the deal's games, the 95% interval is the
normal interval of the mean over deals, and the SPRT (two policies with as many seats each)
is the generalised SPRT on the per-deal score of the first policy, using the normal
approximation of the log-likelihood ratio (Van den Bergh)::

    LLR = n (s1 - s0) (2 mean - s0 - s1) / (2 variance),   s(elo) = 1 / (1 + 10 ** (-elo / 400))

accepted as H1 (the first policy is at least ``elo1`` stronger) above ``log((1 - beta) /
alpha)``, as H0 (at most ``elo0``) below ``log(beta / (1 - alpha))``, else undecided.
"""

from __future__ import annotations

import itertools
import json
import math
import multiprocessing
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from bots.policies.base import checked_policy, find_policy
from protocol.errors import CodedError
from server.engine import (
    Event,
    HandEnded,
    Phase,
    RuleError,
    Rules,
    chance,
    chance_pending,
    decide,
    describe_command,
    evolve,
    is_over,
    legal_actions,
    make_rules,
    new_game,
    redact,
    to_move,
    view,
)

__all__ = [
    "EAAI_OPTIONS",
    "DealResult",
    "DuelConfig",
    "DuelError",
    "DuelSummary",
    "GameResult",
    "PolicyStats",
    "SprtResult",
    "elo_from_score",
    "hand_winners",
    "mean_interval",
    "play_deal",
    "play_game",
    "run_command",
    "run_duel",
    "seat_orders",
    "sprt",
]

EAAI_OPTIONS: dict[str, object] = {
    "big_gin_bonus": 0,
    "box_bonus": 0,
    "game_bonus": 0,
    "shutout": "off",
}
"""Gin Rummy as the EAAI challenge scores it: gin 25, undercut 25 (ties included), no big gin,
no boxes, no game bonus, no shutout; first to 100 (``--target 100``)."""

Z_95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class DuelConfig:
    """What to play."""

    variant: str
    players: int
    policies: tuple[str, ...]
    deals: int
    seed: str = "0"
    options: Mapping[str, object] = field(default_factory=dict)
    target: int | None = None
    whole_games: bool = False
    """Play whole games (also implied by ``target``); else one hand per game."""
    orders: str = "auto"
    """``all`` (every distinct permutation), ``cyclic`` (rotations) or ``auto`` (all when at
    most 24, else cyclic)."""
    jobs: int = 1
    sprt: tuple[float, float] | None = None
    alpha: float = 0.05
    beta: float = 0.05

    def rules(self) -> Rules:
        """The resolved rules of every game.

        Raises:
            VariantError: bad variant, options or player count.
        """
        options = dict(self.options)
        if self.target is not None:
            options["target"] = self.target
        return make_rules(self.variant, options, self.players)

    @property
    def games_are_hands(self) -> bool:
        """Whether each game stops after its first hand."""
        return self.target is None and not self.whole_games


@dataclass(frozen=True, slots=True)
class GameResult:
    """One game of a deal: who sat where and what each seat got."""

    order: tuple[int, ...]
    """Index into the policy list of the policy in each seat."""
    wins: tuple[float, ...]
    points: tuple[float, ...]
    """Final totals (one hand: that hand's points)."""
    hand_points: tuple[float, ...]
    """Points summed over the hands played."""
    hands: int
    decisions: tuple[int, ...]
    seconds: tuple[float, ...]
    slowest: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class DealResult:
    """Every seat order of one deal."""

    deal: int
    games: tuple[GameResult, ...]


def seat_orders(policies: int, players: int, mode: str = "auto") -> list[tuple[int, ...]]:
    """The seat assignments (policy index per seat) every deal is played with.

    >>> seat_orders(2, 2)
    [(0, 1), (1, 0)]
    >>> seat_orders(2, 3)
    [(0, 1, 0), (1, 0, 0), (0, 0, 1)]
    >>> seat_orders(3, 3, "cyclic")
    [(0, 1, 2), (1, 2, 0), (2, 0, 1)]

    Raises:
        ValueError: unknown mode, or more policies than seats.
    """
    if not 1 <= policies <= players:
        raise ValueError(f"{policies} policies cannot share {players} seats")
    base = tuple(seat % policies for seat in range(players))
    rotations = list(dict.fromkeys(base[shift:] + base[:shift] for shift in range(players)))
    if mode == "cyclic":
        return rotations
    if mode not in ("all", "auto"):
        raise ValueError(f"unknown seat order mode {mode!r}; known: all, cyclic, auto")
    permutations = sorted(set(itertools.permutations(base)), key=_order_key(base))
    if mode == "auto" and len(permutations) > 24:
        return rotations
    return permutations


def _order_key(base: tuple[int, ...]) -> Any:
    def key(order: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        rotation = next(
            (shift for shift in range(len(base)) if base[shift:] + base[:shift] == order), -1
        )
        return (0 if rotation >= 0 else 1, (rotation,) if rotation >= 0 else order)

    return key


def hand_winners(ended: HandEnded, rules: Rules) -> tuple[int, ...]:
    """The seats that did best in the hand ``ended`` (its winner, or every seat tied at the
    top): a one-hand game is won by them, shared."""
    if ended.winner >= 0:
        return (ended.winner,)
    points = [Fraction(point) for point in ended.points]
    best = min(points) if rules.scoring == "penalty" else max(points)
    return tuple(seat for seat, point in enumerate(points) if point == best)


class DuelError(CodedError):
    """A duel that cannot be played as asked (code ``duel/*``)."""

    default_code = "duel/invalid"


def play_game(
    rules: Rules,
    names: Sequence[str],
    order: tuple[int, ...],
    seed: str,
    deal: int,
    order_index: int,
    one_hand: bool,
) -> GameResult:
    """Play one game of ``deal``: seat ``s`` is played by a new ``names[order[s]]`` policy.

    Raises:
        AssertionError: a policy chose an illegal command (a bug; the message names it).
    """
    players = rules.players
    policies = [find_policy(names[index]) for index in order]
    state = new_game(rules)
    rngs = [random.Random(f"{seed}:{deal}:{order_index}:{seat}") for seat in range(players)]
    hand_points = [0.0] * players
    decisions = [0] * players
    seconds = [0.0] * players
    slowest = [0.0] * players
    hands = 0
    last: HandEnded | None = None
    clock = time.perf_counter
    while not is_over(state):
        if chance_pending(state):
            if state.phase is Phase.DEAL:
                key = f"{seed}:{deal}:hand{state.hand_number + 1}"
            else:
                key = f"{seed}:{deal}:hand{state.hand_number}:rebuild{state.reuses}"
            events: tuple[Event, ...] = (chance(state, random.Random(key)),)
        else:
            seat = to_move(state)
            actions = legal_actions(state, seat)
            started = clock()
            command = policies[seat].choose(rules, view(state, seat), actions, rngs[seat])
            spent = clock() - started
            decisions[seat] += 1
            seconds[seat] += spent
            slowest[seat] = max(slowest[seat], spent)
            try:
                events = decide(state, seat, command)
            except RuleError as error:
                raise AssertionError(
                    f"policy {policies[seat].name!r} in seat {seat} chose the illegal"
                    f" {describe_command(command)!r} (seed {seed!r}, deal {deal}, order"
                    f" {order}): [{error.code}] {error.message}"
                ) from error
        for event in events:
            for watcher, policy in enumerate(policies):
                policy.observe(watcher, redact(state, event, watcher))
            state = evolve(state, event)
            if isinstance(event, HandEnded):
                hands += 1
                last = event
                for seat, point in enumerate(event.points):
                    hand_points[seat] += float(Fraction(point))
        if one_hand and hands:
            break
    assert last is not None
    if one_hand:
        winners = hand_winners(last, rules)
        points = tuple(float(Fraction(point)) for point in last.points)
    else:
        winners = state.winners
        points = tuple(float(score) for score in state.scores)
    share = 1 / len(winners) if winners else 0.0
    return GameResult(
        order=order,
        wins=tuple(share if seat in winners else 0.0 for seat in range(players)),
        points=points,
        hand_points=tuple(hand_points),
        hands=hands,
        decisions=tuple(decisions),
        seconds=tuple(seconds),
        slowest=tuple(slowest),
    )


def play_deal(config: DuelConfig, deal: int) -> DealResult:
    """Play every seat order of ``deal``.

    Raises:
        VariantError: bad variant, options or player count.
        AssertionError: a policy chose an illegal command.
    """
    rules = config.rules()
    orders = seat_orders(len(config.policies), config.players, config.orders)
    return DealResult(
        deal,
        tuple(
            play_game(
                rules,
                config.policies,
                order,
                config.seed,
                deal,
                index,
                config.games_are_hands,
            )
            for index, order in enumerate(orders)
        ),
    )


def _play_deals(config: DuelConfig, deals: Sequence[int]) -> list[DealResult]:
    return [play_deal(config, deal) for deal in deals]


# Statistics ------------------------------------------------------------------------------------


def mean_interval(values: Sequence[float], z: float = Z_95) -> tuple[float, float, float]:
    """The mean of ``values`` and its normal confidence interval ``(mean, low, high)``.

    >>> [round(value, 3) for value in mean_interval([0.0, 1.0, 0.0, 1.0, 1.0, 1.0])]
    [0.667, 0.253, 1.08]

    One value (or none) gives a zero-width interval. When every value is the same the normal
    interval has no width either; the Wilson score interval of a proportion ``mean`` out of
    ``len(values)`` trials is given instead (so 100 wins out of 100 deals is [0.963, 1]).
    """
    count = len(values)
    if count == 0:
        return 0.0, 0.0, 0.0
    mean = math.fsum(values) / count
    if count == 1:
        return mean, mean, mean
    variance = math.fsum((value - mean) ** 2 for value in values) / (count - 1)
    if variance == 0:
        return (mean, *_wilson(mean, count, z))
    half = z * math.sqrt(variance / count)
    return mean, mean - half, mean + half


def _wilson(share: float, count: int, z: float) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``share`` out of ``count`` trials."""
    z2 = z * z
    centre = (share + z2 / (2 * count)) / (1 + z2 / count)
    half = z * math.sqrt(share * (1 - share) / count + z2 / (4 * count * count)) / (1 + z2 / count)
    low = 0.0 if share <= 0 else max(0.0, centre - half)
    high = 1.0 if share >= 1 else min(1.0, centre + half)
    return low, high


def expected_score(elo: float) -> float:
    """The expected score of a player ``elo`` points stronger (logistic Elo)."""
    return 1 / (1 + 10 ** (-elo / 400))


def elo_from_score(score: float) -> float:
    """The Elo difference that gives expected score ``score`` (infinite at 0 and 1)."""
    if score <= 0:
        return -math.inf
    if score >= 1:
        return math.inf
    return -400 * math.log10(1 / score - 1)


@dataclass(frozen=True, slots=True)
class SprtResult:
    """The verdict of a sequential probability ratio test."""

    elo0: float
    elo1: float
    alpha: float
    beta: float
    llr: float
    lower: float
    upper: float

    @property
    def verdict(self) -> str:
        """``H1`` (at least ``elo1``), ``H0`` (at most ``elo0``) or ``continue``."""
        if self.llr >= self.upper:
            return "H1"
        if self.llr <= self.lower:
            return "H0"
        return "continue"


def sprt(
    scores: Sequence[float], elo0: float, elo1: float, alpha: float = 0.05, beta: float = 0.05
) -> SprtResult:
    """The GSPRT of H0 ``elo <= elo0`` against H1 ``elo >= elo1`` on per-deal ``scores`` in
    [0, 1], with the normal approximation of the log-likelihood ratio.

    >>> result = sprt([1.0, 0.5, 1.0, 0.5, 1.0, 0.5, 1.0, 0.5], 0, 200)
    >>> round(result.llr, 2), result.verdict
    (3.99, 'H1')

    Raises:
        ValueError: ``elo1`` is not above ``elo0``, or ``alpha``/``beta`` not in (0, 1).
    """
    if not elo1 > elo0:
        raise ValueError(f"SPRT needs elo1 > elo0, got {elo0!r}, {elo1!r}")
    if not (0 < alpha < 1 and 0 < beta < 1):
        raise ValueError(f"alpha and beta must be in (0, 1), got {alpha!r}, {beta!r}")
    lower, upper = math.log(beta / (1 - alpha)), math.log((1 - beta) / alpha)
    count = len(scores)
    if count < 2:
        return SprtResult(elo0, elo1, alpha, beta, 0.0, lower, upper)
    mean = math.fsum(scores) / count
    variance = math.fsum((score - mean) ** 2 for score in scores) / count
    variance = max(variance, 1e-3)
    s0, s1 = expected_score(elo0), expected_score(elo1)
    llr = count * (s1 - s0) * (2 * mean - s0 - s1) / (2 * variance)
    return SprtResult(elo0, elo1, alpha, beta, llr, lower, upper)


# Summary ---------------------------------------------------------------------------------------


@dataclass
class PolicyStats:
    """One policy's totals over a duel."""

    name: str
    seats: int
    games: float = 0.0
    hands: int = 0
    win_share: tuple[float, float, float] = (0.0, 0.0, 0.0)
    mean_points: float = 0.0
    points_per_hand: float = 0.0
    decisions: int = 0
    seconds: float = 0.0
    slowest: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        mean, low, high = self.win_share
        return {
            "policy": self.name,
            "seats_per_game": self.seats,
            "games": self.games,
            "win_share": round(mean, 4),
            "win_share_ci95": [round(low, 4), round(high, 4)],
            "mean_points": round(self.mean_points, 3),
            "points_per_hand": round(self.points_per_hand, 3),
            "decisions": self.decisions,
            "ms_per_decision": round(1000 * self.seconds / max(1, self.decisions), 3),
            "slowest_decision_ms": round(1000 * self.slowest, 1),
        }


@dataclass
class DuelSummary:
    """Everything a duel measured."""

    config: DuelConfig
    results: list[DealResult]
    seconds: float
    stats: list[PolicyStats]
    sprt: SprtResult | None
    first_scores: list[float]
    """Per deal, the first policy's share of the wins (what the SPRT tests)."""
    first_margins: list[float] = field(default_factory=list)
    """Per deal, the first policy's points per hand less the others' (per seat), averaged
    over the deal's games."""

    @property
    def games(self) -> int:
        """Games played (deals x seat orders)."""
        return sum(len(result.games) for result in self.results)

    @property
    def hands(self) -> int:
        """Hands played in all."""
        return sum(game.hands for result in self.results for game in result.games)

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        config = self.config
        first = _share_interval(self.first_scores)
        data: dict[str, Any] = {
            "variant": config.variant,
            "players": config.players,
            "policies": list(config.policies),
            "options": dict(config.rules().options),
            "target": config.target,
            "unit": "hand" if config.games_are_hands else "game",
            "seed": config.seed,
            "deals": config.deals,
            "seat_orders": len(seat_orders(len(config.policies), config.players, config.orders)),
            "games": self.games,
            "hands": self.hands,
            "jobs": config.jobs,
            "seconds": round(self.seconds, 2),
            "stats": [stats.as_json() for stats in self.stats],
            "first_policy_score": round(first[0], 4),
            "first_policy_score_ci95": [round(first[1], 4), round(first[2], 4)],
            "first_policy_elo": _rounded_elo(first[0]),
        }
        if self.first_margins:
            margin = mean_interval(self.first_margins)
            data["first_policy_margin_per_hand"] = round(margin[0], 3)
            data["first_policy_margin_per_hand_ci95"] = [round(margin[1], 3), round(margin[2], 3)]
        if self.sprt is not None:
            data["sprt"] = {
                "elo0": self.sprt.elo0,
                "elo1": self.sprt.elo1,
                "alpha": self.sprt.alpha,
                "beta": self.sprt.beta,
                "llr": round(self.sprt.llr, 3),
                "bounds": [round(self.sprt.lower, 3), round(self.sprt.upper, 3)],
                "verdict": self.sprt.verdict,
            }
        return data

    def lines(self) -> Iterator[str]:
        """The readable report."""
        config = self.config
        unit = "one hand per game" if config.games_are_hands else "whole games"
        orders = len(seat_orders(len(config.policies), config.players, config.orders))
        options = ", ".join(f"{k}={v}" for k, v in config.rules().options) or "defaults"
        yield (
            f"duel {config.variant}, {config.players} players ({options}), {unit},"
            f" seed {config.seed!r}"
        )
        yield (
            f"{config.deals} deals x {orders} seat orders = {self.games} games, {self.hands}"
            f" hands in {self.seconds:.1f} s ({config.jobs} jobs)"
        )
        yield ""
        yield (
            f"{'policy':<12} {'seats':>5} {'win share':>9}  {'95% CI':<15} {'mean pts':>9}"
            f" {'pts/hand':>9} {'ms/dec':>7} {'max ms':>7}"
        )
        for stats in self.stats:
            mean, low, high = stats.win_share
            yield (
                f"{stats.name:<12} {stats.seats:>5} {mean:>9.3f}  [{low:.3f}, {high:.3f}]"
                f"  {stats.mean_points:>9.2f} {stats.points_per_hand:>9.2f}"
                f" {1000 * stats.seconds / max(1, stats.decisions):>7.2f}"
                f" {1000 * stats.slowest:>7.1f}"
            )
        if len(self.stats) == 2:
            mean, low, high = _share_interval(self.first_scores)
            yield ""
            yield (
                f"{self.stats[0].name} vs {self.stats[1].name}: score {mean:.3f}"
                f" [{low:.3f}, {high:.3f}], Elo {_format_elo(mean)}"
                f" [{_format_elo(low)}, {_format_elo(high)}]"
            )
            if self.first_margins:
                margin, margin_low, margin_high = mean_interval(self.first_margins)
                yield (
                    f"points per hand, {self.stats[0].name} less {self.stats[1].name}:"
                    f" {margin:+.2f} [{margin_low:+.2f}, {margin_high:+.2f}]"
                )
        if self.sprt is not None:
            result = self.sprt
            meaning = {
                "H1": f"{self.stats[0].name} is at least {result.elo1:g} Elo stronger",
                "H0": f"{self.stats[0].name} is at most {result.elo0:g} Elo stronger",
                "continue": "undecided: play more deals",
            }[result.verdict]
            yield (
                f"SPRT elo0={result.elo0:g} elo1={result.elo1:g} alpha={result.alpha:g}"
                f" beta={result.beta:g}: LLR {result.llr:.2f} in [{result.lower:.2f},"
                f" {result.upper:.2f}] -> {result.verdict} ({meaning})"
            )


def _share_interval(shares: Sequence[float]) -> tuple[float, float, float]:
    """``mean_interval`` of win shares, clipped to [0, 1]."""
    mean, low, high = mean_interval(shares)
    return mean, max(0.0, low), min(1.0, high)


def _rounded_elo(score: float) -> float | None:
    elo = elo_from_score(score)
    return round(elo, 1) if math.isfinite(elo) else None


def _format_elo(score: float) -> str:
    elo = elo_from_score(score)
    return f"{elo:+.0f}" if math.isfinite(elo) else ("+inf" if elo > 0 else "-inf")


def summarise(config: DuelConfig, results: Sequence[DealResult], seconds: float) -> DuelSummary:
    """Per-policy statistics (over deals) and the SPRT of a finished duel.

    Raises:
        ValueError: an SPRT was asked for two policies that do not hold as many seats each.
    """
    names = config.policies
    ordered = sorted(results, key=lambda result: result.deal)
    base = seat_orders(len(names), config.players, config.orders)[0]
    stats = []
    for index, name in enumerate(names):
        seats = base.count(index)
        per_deal: list[float] = []
        games = 0.0
        points = 0.0
        hand_points = 0.0
        hands = 0
        decisions = 0
        spent = 0.0
        slowest = 0.0
        for result in ordered:
            share = 0.0
            for game in result.games:
                for seat, owner in enumerate(game.order):
                    if owner != index:
                        continue
                    share += game.wins[seat]
                    points += game.points[seat]
                    hand_points += game.hand_points[seat]
                    decisions += game.decisions[seat]
                    spent += game.seconds[seat]
                    slowest = max(slowest, game.slowest[seat])
                hands += game.hands * seats
            per_deal.append(share / len(result.games))
            games += len(result.games)
        stats.append(
            PolicyStats(
                name=name,
                seats=seats,
                games=games,
                hands=hands,
                win_share=_share_interval(per_deal),
                mean_points=points / max(1.0, games * seats),
                points_per_hand=hand_points / max(1, hands),
                decisions=decisions,
                seconds=spent,
                slowest=slowest,
            )
        )
    first = [
        sum(
            game.wins[seat]
            for game in result.games
            for seat, owner in enumerate(game.order)
            if owner == 0
        )
        / len(result.games)
        for result in ordered
    ]
    margins = [_margin(result, base) for result in ordered]
    test = None
    if config.sprt is not None:
        if len(names) != 2 or base.count(0) != base.count(1):
            raise ValueError("the SPRT compares two policies holding as many seats each")
        test = sprt(first, config.sprt[0], config.sprt[1], config.alpha, config.beta)
    return DuelSummary(config, ordered, seconds, stats, test, first, margins)


def _margin(result: DealResult, base: tuple[int, ...]) -> float:
    """The first policy's points per hand and seat less the others', over a deal's games."""
    mine, others = base.count(0), len(base) - base.count(0)
    total = 0.0
    for game in result.games:
        own = sum(p for p, owner in zip(game.hand_points, game.order) if owner == 0)
        rest = sum(p for p, owner in zip(game.hand_points, game.order) if owner != 0)
        if others:
            total += (own / mine - rest / others) / max(1, game.hands)
    return total / len(result.games)


def run_duel(config: DuelConfig) -> DuelSummary:
    """Play the duel (in ``config.jobs`` worker processes) and summarise it.

    Raises:
        VariantError: bad variant, options or player count.
        DuelError: unknown policy, one that does not play the variant, more policies than
            seats, a bad SPRT request or number of deals.
        AssertionError: a policy chose an illegal command (a bug).
    """
    rules = config.rules()
    if config.deals < 1:
        raise DuelError(f"--deals must be at least 1, got {config.deals!r}", "duel/bad_deals")
    try:
        seat_orders(len(config.policies), config.players, config.orders)
    except ValueError as error:
        raise DuelError(str(error), "duel/bad_policies") from error
    for name in config.policies:
        checked_policy(name, rules, DuelError)
    if config.sprt is not None and (
        len(config.policies) != 2 or config.players % 2 or not config.sprt[1] > config.sprt[0]
    ):
        raise DuelError(
            "--sprt compares two policies with as many seats each (an even number of players)"
            " and needs ELO0 < ELO1",
            "duel/bad_sprt",
        )
    started = time.perf_counter()
    deals = list(range(config.deals))
    jobs = max(1, min(config.jobs, config.deals))
    if jobs == 1:
        results = _play_deals(config, deals)
    else:
        chunk = max(1, min(50, config.deals // (jobs * 8)))
        chunks = [deals[start : start + chunk] for start in range(0, len(deals), chunk)]
        context = multiprocessing.get_context("fork")
        results = []
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            for part in pool.map(_play_deals, [config] * len(chunks), chunks):
                results.extend(part)
    seconds = time.perf_counter() - started
    return summarise(config, results, seconds)


def parse_sprt(text: str) -> tuple[float, float]:
    """``ELO0,ELO1`` as two numbers.

    Raises:
        DuelError: not two numbers (code ``duel/bad_sprt``).
    """
    parts = text.split(",")
    try:
        elo0, elo1 = (float(part) for part in parts)
    except ValueError:
        raise DuelError(f"--sprt takes ELO0,ELO1, got {text!r}", "duel/bad_sprt") from None
    return elo0, elo1


def run_command(args: Any, options: Mapping[str, object]) -> int:
    """``ramino duel``: play the duel ``args`` describe and print the report (or JSON).

    Raises:
        VariantError: bad variant, options or player count.
        DuelError: see ``run_duel``.
    """
    chosen = dict(options)
    if args.eaai:
        if args.variant != "gin":
            raise DuelError("--eaai applies to --variant gin only", "duel/bad_options")
        chosen = {**EAAI_OPTIONS, **chosen}
    policies = tuple(name.strip() for name in args.policies.split(",") if name.strip())
    config = DuelConfig(
        variant=args.variant,
        players=args.players,
        policies=policies,
        deals=args.deals,
        seed=str(args.seed),
        options=chosen,
        target=args.target,
        whole_games=args.game,
        orders=args.orders,
        jobs=args.jobs,
        sprt=parse_sprt(args.sprt) if args.sprt else None,
    )
    summary = run_duel(config)
    if args.json:
        print(json.dumps(summary.as_json(), sort_keys=True))
    else:
        for line in summary.lines():
            print(line)
    return 0
