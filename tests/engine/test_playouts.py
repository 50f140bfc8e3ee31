"""Random playouts: every preset at every player count plays to the end with no violation."""

from __future__ import annotations

import pytest

from server.engine import VARIANTS
from server.simulation import simulate

CASES = [
    (name, players)
    for name, preset in sorted(VARIANTS.items())
    for players in range(preset.min_players, preset.max_players + 1)
]


@pytest.mark.parametrize(("variant", "players"), CASES, ids=[f"{v}-{p}" for v, p in CASES])
def test_random_games_complete_without_invariant_violations(variant: str, players: int) -> None:
    """Random legal play ends every game, conserving cards, keeping secrets and replaying."""
    summary = simulate(variant, players, games=2, seed=f"playout-{variant}-{players}")
    assert [] == summary.violations
    assert (2, 0) == (summary.completed, summary.invariant_violations)
    assert summary.hands >= 2


@pytest.mark.parametrize(
    "options",
    [
        {"stock_exhausted": "shuffle"},
        {"stock_exhausted": "turn_over", "max_stock_reuses": 1},
        {"scoring": "penalty", "going_rummy": "plus10"},
        {"scoring": "pay_winner", "deals": 3},
        {"ace": "around", "melds_per_turn": "unlimited"},
        {"ace": "high_or_low", "layoff_requires_own_meld": True, "must_discard_to_go_out": True},
        {"dealer": "lowest_card", "deals": 2},
    ],
    ids=lambda options: ",".join(f"{k}={v}" for k, v in options.items()),
)
def test_house_rules_play_out_without_violations(options: dict[str, object]) -> None:
    """Each house rule of ``basic`` plays whole games with every invariant holding."""
    summary = simulate("basic", 3, games=2, seed="house", options=options)
    assert [] == summary.violations
    assert 2 == summary.completed
