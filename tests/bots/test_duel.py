"""The duel tool: duplicate seat orders, the statistics and a short run of each kind."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Sequence
from typing import ClassVar

import pytest

import bots.policies.base as policy_base
from bots.duel import (
    DealResult,
    DuelConfig,
    DuelError,
    GameResult,
    elo_from_score,
    expected_score,
    mean_interval,
    play_deal,
    run_duel,
    seat_orders,
    sprt,
    summarise,
)
from bots.policies import Policy
from bots.policies.random_policy import RandomPolicy
from server.cli import main
from server.engine import Command, Event, Rules, View


def test_two_players_swap_seats() -> None:
    """With two seats each deal is played twice, the policies swapped."""
    assert [(0, 1), (1, 0)] == seat_orders(2, 2)


def test_every_policy_holds_every_seat_equally_often() -> None:
    """Over the orders of a deal, each policy sits in each seat as often as any other."""
    for policies, players in ((2, 2), (3, 3), (2, 4), (2, 3), (4, 4), (3, 6)):
        orders = seat_orders(policies, players)
        for seat in range(players):
            counts = [sum(order[seat] == p for order in orders) for p in range(policies)]
            held = [sum(order.count(p) for order in orders) for p in range(policies)]
            assert [held[p] / players for p in range(policies)] == counts


def test_orders_are_the_distinct_permutations_or_the_rotations() -> None:
    """``all`` plays every distinct permutation, ``cyclic`` the rotations; ``auto`` falls back
    to rotations past 24 orders."""
    assert 6 == len(seat_orders(3, 3, "all"))
    assert 3 == len(seat_orders(3, 3, "cyclic"))
    assert 6 == len(seat_orders(2, 4, "all"))  # A B A B in its 6 arrangements
    assert 6 == len(seat_orders(6, 6))  # 720 permutations: rotations instead
    assert (0, 1, 0, 1) == seat_orders(2, 4)[0]
    with pytest.raises(ValueError, match="cannot share"):
        seat_orders(3, 2)


class _Recorder(RandomPolicy):
    """A random policy that notes the hand it is first shown in each game."""

    hands: ClassVar[list[tuple[int, ...]]] = []

    def choose(
        self, rules: Rules, seen: View, actions: Sequence[Command], rng: random.Random
    ) -> Command:
        if not getattr(self, "noted", False):
            self.noted = True
            _Recorder.hands.append(seen.hand if seen.seat == 0 else ())
        return super().choose(rules, seen, actions, rng)

    def observe(self, seat: int, event: Event) -> None:
        """Ignored."""


def test_a_deal_gives_the_same_cards_to_the_same_seat_in_every_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Duplicate: both games of a deal deal seat 0 the same hand, whoever sits there."""
    original = policy_base._registry

    def registry() -> dict[str, type[Policy]]:
        found = dict(original())
        found["recorder"] = _Recorder
        return found  # type: ignore[return-value]

    monkeypatch.setattr(policy_base, "_registry", registry)
    _Recorder.hands = []
    config = DuelConfig("gin", 2, ("recorder", "random"), deals=1, seed="dup")
    result = play_deal(config, 0)
    first_hands = [hand for hand in _Recorder.hands if hand]
    assert 2 == len(result.games)
    assert 1 <= len(first_hands)
    assert all(hand == first_hands[0] for hand in first_hands)
    _Recorder.hands = []
    play_deal(config, 1)
    assert first_hands[0] not in _Recorder.hands


def test_mean_interval_of_known_values() -> None:
    """The normal 95% interval of 0, 1, 0, 1: mean 0.5, half-width 1.96 * 0.577 / 2."""
    mean, low, high = mean_interval([0.0, 1.0, 0.0, 1.0])
    half = 1.959963984540054 * math.sqrt(1 / 3) / 2
    assert 0.5 == mean
    assert math.isclose(0.5 - half, low)
    assert math.isclose(0.5 + half, high)
    assert (0.25, 0.25, 0.25) == mean_interval([0.25])
    assert (0.0, 0.0, 0.0) == mean_interval([])


def test_a_clean_sweep_gets_a_wilson_interval() -> None:
    """All 100 deals won: the interval is Wilson's [0.963, 1], not a zero-width one."""
    mean, low, high = mean_interval([1.0] * 100)
    assert (1.0, 1.0) == (mean, high)
    assert 0.963 == round(low, 3)
    assert (0.0, 0.0) == mean_interval([0.0] * 100)[:2]


def test_elo_and_expected_score_are_inverse() -> None:
    """Elo 0 is a score of one half; +400 Elo scores 10/11; the conversions invert."""
    assert 0.5 == expected_score(0)
    assert math.isclose(10 / 11, expected_score(400))
    assert math.isclose(123.0, elo_from_score(expected_score(123.0)))
    assert math.inf == elo_from_score(1.0)
    assert -math.inf == elo_from_score(0.0)


def test_sprt_llr_matches_the_formula() -> None:
    """LLR = n (s1 - s0)(2 mean - s0 - s1) / (2 var), var the population variance."""
    scores = [1.0, 0.5, 1.0, 0.5, 1.0, 0.5, 1.0, 0.5]
    s0, s1 = expected_score(0), expected_score(200)
    expected = 8 * (s1 - s0) * (2 * 0.75 - s0 - s1) / (2 * 0.0625)
    result = sprt(scores, 0, 200)
    assert math.isclose(expected, result.llr)
    assert math.isclose(math.log(0.05 / 0.95), result.lower)
    assert math.isclose(math.log(0.95 / 0.05), result.upper)
    assert "H1" == result.verdict


def test_sprt_accepts_h0_for_an_even_match_and_waits_when_unsure() -> None:
    """Even results reject a +50 Elo claim; a handful of mixed results decide nothing."""
    even = [1.0, 0.0] * 400
    assert "H0" == sprt(even, 0, 50).verdict
    assert "continue" == sprt([1.0, 0.0, 0.5, 1.0], 0, 50).verdict
    with pytest.raises(ValueError, match="elo1 > elo0"):
        sprt(even, 10, 5)


def test_summary_counts_wins_by_policy_over_deals() -> None:
    """A policy's win share is averaged per deal over the orders, then over deals."""
    config = DuelConfig("gin", 2, ("a", "b"), deals=2)

    def game(order: tuple[int, ...], wins: tuple[float, ...]) -> GameResult:
        return GameResult(order, wins, (0.0, 0.0), (0.0, 0.0), 1, (1, 1), (0.0, 0.0), (0, 0))

    results = [
        DealResult(0, (game((0, 1), (1.0, 0.0)), game((1, 0), (1.0, 0.0)))),
        DealResult(1, (game((0, 1), (1.0, 0.0)), game((1, 0), (0.0, 1.0)))),
    ]
    summary = summarise(config, results, 1.0)
    assert [0.5, 1.0] == summary.first_scores
    assert [0.0, 0.0] == summary.first_margins
    assert 0.75 == summary.stats[0].win_share[0]
    assert 0.25 == summary.stats[1].win_share[0]
    assert 4 == summary.games


def test_points_margin_is_per_hand_from_the_first_policy() -> None:
    """A wins 12 points in a 2-hand game and B 4 in a 1-hand game: margin (6 + -4) / 2."""
    config = DuelConfig("gin", 2, ("a", "b"), deals=1)
    first = GameResult((0, 1), (1.0, 0.0), (12.0, 0.0), (12.0, 0.0), 2, (1, 1), (0.0, 0.0), (0, 0))
    second = GameResult((1, 0), (1.0, 0.0), (4.0, 0.0), (4.0, 0.0), 1, (1, 1), (0.0, 0.0), (0, 0))
    summary = summarise(config, [DealResult(0, (first, second))], 1.0)
    assert [1.0] == summary.first_margins


def test_a_short_gin_duel_runs_and_is_reproducible_across_jobs() -> None:
    """Greedy against simple for a few hands: shares add up to 1 and two workers give the
    same results as one."""
    config = DuelConfig("gin", 2, ("greedy", "simple"), deals=4, seed="smoke", sprt=(0, 50))
    alone = run_duel(config)
    shares = [stats.win_share[0] for stats in alone.stats]
    assert 8 == alone.games
    assert math.isclose(1.0, sum(shares))
    assert alone.sprt is not None
    split = run_duel(dataclasses.replace(config, jobs=2))

    def outcomes(results: Sequence[DealResult]) -> list[tuple[object, ...]]:
        return [
            (result.deal, game.order, game.wins, game.points, game.hands)
            for result in results
            for game in result.games
        ]

    assert outcomes(alone.results) == outcomes(split.results)


def test_a_whole_game_duel_with_three_players() -> None:
    """Whole games of Knock Rummy with three seats and two policies (A B A and its orders)."""
    config = DuelConfig("knock", 3, ("heuristic", "random"), deals=2, seed="k", target=30)
    summary = run_duel(config)
    assert 6 == summary.games
    assert [2, 1] == [stats.seats for stats in summary.stats]
    assert summary.hands >= 6


def test_bad_requests_are_coded_errors() -> None:
    """Unknown policies, unsupported variants and lopsided SPRTs are refused with a code."""
    with pytest.raises(DuelError) as unknown:
        run_duel(DuelConfig("gin", 2, ("greedy", "nobody"), deals=1))
    assert "duel/unknown_policy" == unknown.value.code
    with pytest.raises(DuelError) as unsupported:
        run_duel(DuelConfig("basic", 2, ("mc", "greedy"), deals=1))
    assert "duel/unsupported_variant" == unsupported.value.code
    with pytest.raises(DuelError) as lopsided:
        run_duel(DuelConfig("basic", 3, ("greedy", "random"), deals=1, sprt=(0, 10)))
    assert "duel/bad_sprt" == lopsided.value.code


def test_cli_duel_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    """``ramino duel --json`` prints one JSON object with per-policy statistics."""
    status = main(
        [
            "duel",
            "--variant",
            "gin",
            "--policies",
            "greedy,random",
            "--deals",
            "3",
            "--seed",
            "cli",
            "--eaai",
            "--sprt",
            "0,100",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert 0 == status
    assert ["greedy", "random"] == [entry["policy"] for entry in data["stats"]]
    assert 0 == data["options"]["box_bonus"]
    assert data["sprt"]["verdict"] in ("H0", "H1", "continue")
    assert 6 == data["games"]


def test_cli_duel_text_report_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    """The text report names both policies; a bad policy exits 2 with its code."""
    assert 0 == main(
        [
            "duel",
            "--variant",
            "basic",
            "--players",
            "3",
            "--policies",
            "greedy,random",
            "--deals",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert "greedy" in out
    assert "random" in out
    assert 2 == main(["duel", "--variant", "gin", "--policies", "greedy,nobody"])
    assert "duel/unknown_policy" in capsys.readouterr().err
