"""``deadwood`` on two-deck and joker hands (sets rank by rank, runs suit by suit) against the
component search it replaced, ``solver._general_deadwood``, kept as the reference.

These are the pure-Python path's tests: the compiled search (``server.engine.compiled``) is
switched off here; tests/engine/test_compiled.py checks it against this path.
"""

from __future__ import annotations

import random
import time

import pytest

from protocol.cards import JOKER, Card, card_face, make_deck, parse_cards
from server.engine import VARIANTS, make_rules, solver
from server.engine.melds import AceMode, MeldRules
from server.engine.solver import deadwood
from tests.engine.helpers import pure_python_solver

RAMINO_VALUES: tuple[int, ...] = (
    *(15 if face % 13 == 0 else min(face % 13 + 1, 10) for face in range(52)),
    30,
)


@pytest.fixture(autouse=True)
def pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Solver contexts made afresh, without the compiled search."""
    pure_python_solver(monkeypatch)


def reference_deadwood(cards: tuple[Card, ...], rules: MeldRules, values: tuple[int, ...]) -> int:
    """The least deadwood by the component search over the whole multiset."""
    hand = solver._Hand(cards)
    return solver._general_deadwood(solver._context(rules, values), hand.layers, len(hand.jokers))


def refuse(*_: object) -> int:
    """Stands in for the component search where it must not be used."""
    raise AssertionError("the component search was used")


def test_two_deck_joker_hands_are_not_left_to_the_component_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ramino hand with jokers and a repeated face is solved by the split.

    By the rules (ace high or low, two naturals a meld, A 15, J/Q/K 10, joker 30): 5H-6H-7H,
    7C-7S-JK and JK(QS)-KS-AS, or 7C-7S-7H, 5H-6H-JK and JK-KS-AS; the two 9D cannot share a
    meld and QC2 has none: 9 + 9 + 10 = 28.
    """
    monkeypatch.setattr(solver, "_general_deadwood", refuse)
    hand = (*parse_cards("5H 6H 7H 7C 7S 9D 9D2 KS QC2 AS"), *make_deck(0, 2))
    rules = make_rules("ramino", {}, 2)
    assert 28 == deadwood(hand, rules.meld_rules, rules.values)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_random_hands_of_every_preset_match_the_reference(name: str) -> None:
    """Seeded random hands of 1 to 15 cards from the preset's pack, at two player counts."""
    rng = random.Random(f"split-{name}")
    preset = VARIANTS[name]
    for players in sorted({preset.min_players, preset.max_players}):
        rules = make_rules(name, {}, players)
        pack = make_deck(rules.decks, rules.jokers)
        for _ in range(600):
            hand = tuple(rng.sample(pack, rng.randint(1, 15)))
            expected = reference_deadwood(hand, rules.meld_rules, rules.values)
            assert expected == deadwood(hand, rules.meld_rules, rules.values), hand


def test_random_rules_values_and_packs_match_the_reference() -> None:
    """Every ace mode and ``min_natural`` 0-4, values the same in every suit or not, one or two
    decks with up to eight jokers: the split and the reference agree (bounded in time)."""
    rng = random.Random("split-rules")
    deadline = time.monotonic() + 15
    checked = 0
    for _ in range(40):
        rules = MeldRules(rng.choice(list(AceMode)), rng.randint(0, 4))
        kind = rng.random()
        if kind < 0.3:
            values = tuple(rng.randint(0, 20) for _ in range(53))
        elif kind < 0.6:
            ranks = [rng.randint(0, 20) for _ in range(13)]
            values = (*ranks * 4, rng.randint(0, 40))
        else:
            values = (*RAMINO_VALUES[:52], rng.choice((0, 15, 30)))
        pack = make_deck(rng.choice((1, 2)), rng.randint(0, 8))
        for _ in range(100):
            hand = tuple(rng.sample(pack, rng.randint(1, 15)))
            expected = reference_deadwood(hand, rules, values)
            assert expected == deadwood(hand, rules, values), (rules, values, hand)
            checked += 1
        if time.monotonic() > deadline:
            break
    assert checked >= 500


def test_a_hand_with_too_many_set_choices_falls_back_to_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``min_natural`` 1 and two jokers every card starts a set or a run: three suits of
    A-2-3-4 give too many set choices to try, and the component search answers; by the rules
    the three runs take every card and the jokers lengthen them, so nothing is left over."""
    rules = MeldRules(AceMode.LOW, 1)
    hand = (*parse_cards("AC AD AH 2C 2D 2H 3C 3D 3H 4C 4D 4H"), *make_deck(0, 2))
    calls: list[int] = []
    original = solver._general_deadwood

    def counted(context: solver._Context, layers: tuple[int, ...], jokers: int) -> int:
        calls.append(jokers)
        return original(context, layers, jokers)

    monkeypatch.setattr(solver, "_general_deadwood", counted)
    assert 0 == deadwood(hand, rules, RAMINO_VALUES)
    assert [2] == calls


def test_third_copies_go_to_the_reference() -> None:
    """Three decks: a face held three times is beyond the split."""
    hand = parse_cards("7H 7H2 7H3 8H 9H JK")
    assert reference_deadwood(hand, MeldRules(), RAMINO_VALUES) == deadwood(
        hand, MeldRules(), RAMINO_VALUES
    )


@pytest.mark.parametrize("ace", list(AceMode))
def test_run_vectors_match_the_component_search(ace: AceMode) -> None:
    """A suit's least deadwoods in runs by jokers placed, from the direct programme over its
    cards (``_Split.runs_vector``), equal those read from the component search's outcome
    tables (jokers spent on gaps, joker capacity), on random patterns of one or two copies
    with 0 to 6 jokers, for ``min_natural`` 0-4 and values that differ by suit."""
    rng = random.Random(f"runs-{ace.value}")
    checked = 0
    for min_natural in range(5):
        rules = MeldRules(ace, min_natural)
        values = tuple(rng.randint(0, 20) for _ in range(53))
        context = solver._context(rules, values)
        split = solver._Split(context)
        for _ in range(40):
            suit = rng.randrange(4)
            present = rng.getrandbits(13) & rng.getrandbits(13)
            twice = present & rng.getrandbits(13) & rng.getrandbits(13)
            jokers = rng.randint(0, 6)
            offset = 13 * suit
            layers = (present << offset, twice << offset) if twice else (present << offset,)
            outcomes = context.search(jokers).outcomes(layers)
            expected = [
                min(
                    [least for (gaps, room), least in outcomes.items() if gaps <= placed <= room],
                    default=None,
                )
                for placed in range(jokers + 1)
            ]
            found = split.runs_vector(suit, present, twice, jokers, {})
            assert expected == [None if least >= solver._LARGE else least for least in found], (
                rules,
                present,
                twice,
                jokers,
            )
            checked += 1
    assert checked == 200


def test_fresh_ramino_hands_by_joker_count_match_the_reference() -> None:
    """13- and 14-card hands of the ``ramino`` pack, many with jokers and sets of naturals
    (two decks), dealt with 0 to 4 jokers in equal numbers: the solver and the component
    search agree."""
    rng = random.Random("split-jokers")
    rules = make_rules("ramino", {}, 2)
    pack = make_deck(rules.decks, rules.jokers)
    naturals = [card for card in pack if card_face(card) != JOKER]
    jokers = [card for card in pack if card_face(card) == JOKER]
    for count in range(5):
        for _ in range(150):
            size = rng.choice((13, 14))
            hand = (*rng.sample(naturals, size - count), *rng.sample(jokers, count))
            expected = reference_deadwood(hand, rules.meld_rules, rules.values)
            assert expected == deadwood(hand, rules.meld_rules, rules.values), hand
