"""The OpenSpiel adapter: our policies play whole hands inside OpenSpiel's ``gin_rummy``."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspiel", reason="the OpenSpiel adapter needs open-spiel (dev dependency)")

from bots.eval.openspiel_gin import from_os, play_hand, run, to_os
from server.engine import make_deck


def test_card_ids_round_trip() -> None:
    """Every card maps to a distinct OpenSpiel id and back."""
    deck = make_deck(1)
    assert list(range(52)) == sorted(to_os(card) for card in deck)
    assert list(deck) == [from_os(to_os(card)) for card in deck]


@pytest.mark.parametrize("policy", ["simple", "heuristic"])
def test_hands_against_openspiels_bot_finish_with_zero_sum_points(policy: str) -> None:
    """A few deals in both seats end in OpenSpiel with our policy's legal moves only."""
    for deal in range(3):
        for player in (0, 1):
            outcome = play_hand(policy, "adapter", deal, player)
            assert outcome.decisions > 0
            assert outcome.points == int(outcome.points)


def test_summary_counts_both_seats_of_every_deal() -> None:
    """``run`` plays each deal twice and reports a win share in [0, 1]."""
    summary = run("simple", 4, "summary", 1)
    assert 8 == summary["hands"]
    assert 0.0 <= summary["win_share"] <= 1.0
