"""The compiled one-deck judgement (``bots.gin_compiled``): hands worked out by hand
from RULES.md, and the same answers as the pure-Python ``GinEvaluator.judge`` on random hands."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from bots import gin_compiled
from bots.policies.evaluation import GinEvaluator
from protocol.cards import Card, parse_cards
from server.engine import make_rules
from server.engine.solver import deadwood

pytestmark = pytest.mark.skipif(not gin_compiled.AVAILABLE, reason="numba is not available")

GIN = make_rules("gin", {}, 2)
"""Aces low, A 1, 2-10 their pips, J/Q/K 10; sets of 3-4, runs of 3 or more."""


def evaluators(unseen: list[Card], limit: int) -> tuple[GinEvaluator, GinEvaluator]:
    """A compiled evaluator and one forced onto the Python path."""
    compiled = GinEvaluator(GIN, unseen, limit)
    assert compiled._compiled is not None
    python = GinEvaluator(GIN, unseen, limit)
    python._compiled = None
    return compiled, python


def test_worked_hand_with_a_run_and_a_set() -> None:
    # 3C 4C 5C | 7D 7H 7S melded; deadwood KC KD QH 2S = 10 + 10 + 10 + 2 = 32.
    # Draws (limit 10):
    #  6C joins the run (3-6C): deadwood still 32, throw a 10-pointer -> 22, gain 10;
    #  KH makes K-K-K: deadwood QH 2S = 12, throw QH -> 2, gain 30 (a knock: 2 <= 10);
    #  AH joins nothing: the best is to keep it and throw a 10-pointer -> 22 + 1 = 23, gain 9.
    # Potential (10 + 30 + 9) / 3 = 49/3; knock chance 1/3 (KH only); gin chance 0.
    hand = parse_cards("3C 4C 5C 7D 7H 7S KC KD QH 2S")
    for evaluator in evaluators(list(parse_cards("6C KH AH")), 10):
        now, potential, knock, gin = evaluator.judge(hand)
        assert now == 32
        assert potential == pytest.approx(float(Fraction(49, 3)))
        assert knock == pytest.approx(1 / 3)
        assert gin == 0.0


def test_worked_hand_one_card_from_gin() -> None:
    # AC 2C 3C | 4D 5D 6D | 9C 9H 9S melded; deadwood KS = 10.
    #  QS joins nothing (no JS, one other queen): gain = drop 10 - its 10 = 0, and 10 <= 10
    #  still allows a knock;
    #  KH joins nothing (one other king): the same, a knock;
    #  7D extends 4-6D: throw KS -> 0 deadwood, gain 10: a knock and gin.
    # Potential 10/3; knock chance 3/3; gin chance 1/3.
    hand = parse_cards("AC 2C 3C 4D 5D 6D 9C 9H 9S KS")
    for evaluator in evaluators(list(parse_cards("QS KH 7D")), 10):
        now, potential, knock, gin = evaluator.judge(hand)
        assert now == 10
        assert potential == pytest.approx(10 / 3)
        assert knock == 1.0
        assert gin == pytest.approx(1 / 3)


def test_four_of_a_kind_shared_with_runs() -> None:
    # 5C 5D 5H 5S with 3C 4C and 6D 7D: the best partition takes 3-4-5C and 5-6-7D as runs
    # and leaves 5H 5S (10) -- or the four fives leaving 3C 4C 6D 7D (20), or a set of three
    # with one run. 3C4C5C + 5D6D7D + (5H 5S) = 10; 5D5H5S + 3C4C5C + (6D 7D) = 13;
    # 5C5H5S + 5D6D7D + (3C 4C) = 7. Least: 7.
    hand = parse_cards("5C 5D 5H 5S 3C 4C 6D 7D")
    for evaluator in evaluators([], 10):
        assert evaluator.judge(hand)[0] == 7


@pytest.mark.parametrize("seed", range(4))
def test_random_hands_match_the_python_path(seed: int) -> None:
    rng = random.Random(seed)
    faces = list(range(52))
    for _ in range(500):
        # Crowded hands (few ranks, many suits) make sets and runs compete for cards.
        pool = faces if rng.random() < 0.5 else [f for f in faces if f % 13 < 6]
        rng.shuffle(pool)
        size = rng.choice([0, 1, 3, 10, 10, 11])
        hand = tuple(sorted(pool[:size]))
        unseen = [card for card in faces if card not in hand]
        rng.shuffle(unseen)
        unseen = unseen[: rng.randrange(0, len(unseen) + 1)]
        limit = rng.choice([0, 5, 10])
        compiled, python = evaluators(unseen, limit)
        assert compiled.judge(hand) == python.judge(hand), (hand, unseen, limit)
        expected = deadwood(hand, GIN.meld_rules, GIN.values)
        assert compiled.judge(hand)[0] == expected


def test_other_decks_keep_the_python_path() -> None:
    ramino = make_rules("ramino", {}, 2)  # two decks and jokers, aces high or low
    assert ramino.decks == 2
    hand = parse_cards("3C 4C 5C 7D 7H 7S KC KD QH 2S")
    evaluator = GinEvaluator(ramino, list(parse_cards("6C KH AH")), 10)
    assert evaluator._compiled is None
    assert evaluator.judge(hand)[0] == deadwood(hand, ramino.meld_rules, ramino.values)
