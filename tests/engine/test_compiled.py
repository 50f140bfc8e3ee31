"""The compiled meld search (``server.engine.compiled``): worked hands, the pure-Python path
and a brute-force oracle agree with it; without numba the solver still answers."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from bench.solver import oracle_deadwood
from protocol.cards import Card, card_face, is_joker, make_deck, parse_cards
from server.engine import compiled, make_rules, solver
from server.engine.melds import AceMode, MeldRules
from tests.engine.helpers import pure_python_solver

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason=compiled.WHY_NOT or "no numba")

ROOT = Path(__file__).resolve().parents[2]
RAMINO = make_rules("ramino", {}, 2)
"""Ace high or low, two naturals a meld; A 15, 2-10 their pips, J/Q/K 10, joker 30."""


def masks(hand: tuple[Card, ...]) -> tuple[int, int, int]:
    """The compiled search's input: faces held, faces held twice, jokers."""
    present = twice = jokers = 0
    for card in hand:
        if is_joker(card):
            jokers += 1
            continue
        bit = 1 << card_face(card)
        if present & bit:
            twice |= bit
        present |= bit
    return present, twice, jokers


def solve(text: str, rules: MeldRules = RAMINO.meld_rules) -> int:
    hand = parse_cards(text)
    search = compiled.bind(RAMINO.values, rules.ace is AceMode.HIGH_OR_LOW, rules.min_natural)
    return search(*masks(hand))


@pytest.mark.parametrize(
    ("hand", "expected", "why"),
    [
        ("7H 8H 9H JK 5C 5D KS", 10, "7H-8H-9H, 5C-5D-JK; KS 10 left"),
        ("QS KS AS 2S 3S", 5, "Q-K-A above the king melds 35, A-2-3 only 20: 2S 3S, 5 left"),
        ("4C 4C2 5C 5C2 6C 6C2", 0, "two runs 4C-5C-6C, one of each copy"),
        ("JK JK2", 60, "no natural card: no meld, two jokers at 30"),
        ("9D JK JK2", 69, "a meld needs two naturals: 9 + 30 + 30"),
        ("3H 4H 5H JK JK2 JK3", 0, "3H-4H-5H with three jokers: a run of six"),
        ("8C 8D 8H JK", 0, "a set of four: 8C 8D 8H and the joker"),
        ("8C 8D 8H 8S JK", 8, "8C-8D-8H-JK leaves 8S (the four 8s leave the joker, 30)"),
        ("AH 2H 3H AD AC", 5, "AH-AD-AC melds 45, AH-2H-3H only 20: 2H 3H, 5 left"),
        ("5H 7H 9H JK JK2", 0, "5H-JK-7H-JK-9H: the jokers fill both gaps"),
        ("5H 7H 9H JK", 5, "one gap filled: 7H-JK-9H, 5H left (5H-JK-7H would leave 9)"),
        ("KD KH AD 2D 3D JK", 0, "KD-KH-JK, AD-2D-3D"),
    ],
)
def test_worked_ramino_hands(hand: str, expected: int, why: str) -> None:
    """Deadwood of Ramino hands worked out by hand from RULES.md (``why`` is the
    derivation)."""
    assert expected == solve(hand), why


def test_one_natural_makes_a_meld_where_the_rules_say_so() -> None:
    """With ``min_natural`` 1, 9D and two jokers are a meld (a run or a set): nothing left;
    with 2 they are not: 9 + 30 + 30."""
    assert 0 == solve("9D JK JK2", MeldRules(AceMode.HIGH_OR_LOW, 1))
    assert 69 == solve("9D JK JK2", MeldRules(AceMode.HIGH_OR_LOW, 2))


def test_an_ace_sits_above_the_king_only_where_the_rules_say_so() -> None:
    """QS KS AS: a run with the ace high (0 left); with the ace low only, nothing melds:
    10 + 10 + 15."""
    assert 0 == solve("QS KS AS", MeldRules(AceMode.HIGH_OR_LOW, 2))
    assert 35 == solve("QS KS AS", MeldRules(AceMode.LOW, 2))


RULE_SETS = [
    MeldRules(ace, min_natural)
    for ace in (AceMode.LOW, AceMode.HIGH_OR_LOW)
    for min_natural in (1, 2, 3)
]


@pytest.mark.parametrize("rules", RULE_SETS, ids=str)
def test_random_hands_match_the_pure_python_solver(
    rules: MeldRules, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seeded random hands of 1 to 16 cards from two decks and six jokers, and from one deck
    and two, under Ramino's values, Gin's and random ones."""
    rng = random.Random(f"compiled-{rules}")
    gin = (*(min(face % 13 + 1, 10) for face in range(52)), 0)
    value_sets = [tuple(RAMINO.values), gin, (*(rng.randint(0, 50) for _ in range(52)), 25)]
    packs = [make_deck(2, 6), make_deck(1, 2)]
    cases = []
    for values in value_sets:
        for pack in packs:
            for _ in range(700):
                cases.append((tuple(rng.sample(pack, rng.randint(1, 16))), values))
    found = [
        compiled.least_deadwood(
            *masks(hand), values, rules.ace is AceMode.HIGH_OR_LOW, rules.min_natural
        )
        for hand, values in cases
    ]
    pure_python_solver(monkeypatch)
    expected = [solver.deadwood(hand, rules, values) for hand, values in cases]
    assert expected == found


def test_small_random_hands_match_the_brute_force_oracle() -> None:
    """Every multiset of disjoint melds tried (``bench.solver.oracle_deadwood``), on hands of
    up to 9 cards."""
    rng = random.Random("compiled-oracle")
    pack = make_deck(2, 6)
    for rules in (MeldRules(AceMode.HIGH_OR_LOW, 2), MeldRules(AceMode.LOW, 1)):
        for _ in range(150):
            hand = tuple(rng.sample(pack, rng.randint(3, 9)))
            expected = oracle_deadwood(hand, rules, RAMINO.values)
            found = compiled.least_deadwood(
                *masks(hand), RAMINO.values, rules.ace is AceMode.HIGH_OR_LOW, rules.min_natural
            )
            assert expected == found, hand


def test_deadwood_of_ramino_hands_goes_through_the_compiled_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The public ``deadwood`` uses it for two-deck and joker hands (the pure-Python split is
    not reached), and keeps the answer of the worked hand above."""
    hand = parse_cards("7H 8H 9H JK 5C 5D KS 9C2")

    def refuse(*_: object) -> int:
        raise AssertionError("the pure-Python path was used")

    monkeypatch.setattr(solver, "_python_two_deck_deadwood", refuse)
    assert 10 + 9 == solver.deadwood(hand, RAMINO.meld_rules, RAMINO.values)


def test_around_the_corner_aces_stay_with_the_pure_python_solver() -> None:
    """``around`` (K-A-2) is not compiled: the solver's context has no compiled search, and
    K-A-2 still melds."""
    rules = MeldRules(AceMode.AROUND, 2)
    hand = parse_cards("KS AS 2S JK 9D")
    assert 9 == solver.deadwood(hand, rules, RAMINO.values)
    assert solver._context(rules, RAMINO.values).compiled is None


def test_without_numba_the_solver_answers_in_pure_python() -> None:
    """``NUMBA_DISABLE_JIT=1`` (as on a Python numba has no wheel for): the module says why
    it is not used, and the worked hand still has 10 left."""
    script = (
        "from protocol.cards import parse_cards\n"
        "from server.engine import compiled, make_rules, solver\n"
        "rules = make_rules('ramino', {}, 2)\n"
        "hand = parse_cards('7H 8H 9H JK 5C 5D KS')\n"
        "print(compiled.AVAILABLE, solver.deadwood(hand, rules.meld_rules, rules.values),\n"
        "      solver._context(rules.meld_rules, rules.values).compiled)\n"
    )
    environment = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "False 10 None" == result.stdout.strip()
    told = subprocess.run(
        [sys.executable, "-m", "server.engine.compiled"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "NUMBA_DISABLE_JIT=1" in told.stdout
