"""Tests for the meld solver, against a brute-force oracle built on ``enumerate_melds``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.cards import (
    JOKER,
    Card,
    card_face,
    format_card,
    is_joker,
    make_deck,
    parse_card,
    parse_cards,
)
from server.engine import solver
from server.engine.errors import InvalidMeldError
from server.engine.melds import (
    AceMode,
    Meld,
    MeldRules,
    check_meld,
    enumerate_melds,
    layoff_faces,
    with_layoff,
)
from server.engine.solver import (
    best_discard,
    best_layoff_deadwood,
    best_melds,
    deadwood,
    discard_deadwoods,
    layoff_targets,
)

GIN_VALUES: tuple[int, ...] = (*(min(face % 13 + 1, 10) for face in range(52)), 0)
"""A=1, 2-10 pip, J/Q/K=10; no jokers in Gin Rummy."""
RAMINO_VALUES: tuple[int, ...] = (
    *(15 if face % 13 == 0 else min(face % 13 + 1, 10) for face in range(52)),
    30,
)
"""Ramino penalties: A=15, J/Q/K=10, pip, joker 30."""
GIN = MeldRules(AceMode.LOW, 1)
RAMINO = MeldRules(AceMode.HIGH_OR_LOW, 2)

ONE_DECK = make_deck(1)
TWO_DECKS_JOKERS = make_deck(2, 4)

rules_strategy = st.builds(MeldRules, st.sampled_from(list(AceMode)), st.integers(0, 4))
values_strategy = st.one_of(
    st.just(GIN_VALUES),
    st.just(RAMINO_VALUES),
    st.lists(st.integers(0, 20), min_size=53, max_size=53).map(tuple),
)


DENSE = [card for card in ONE_DECK if card % 13 in (0, 1, 2, 3, 4, 11, 12)]
"""Aces to fives, queens and kings: hands drawn from these are full of overlapping melds."""


def one_deck_hands(max_size: int) -> st.SearchStrategy[list[Card]]:
    """Hands of distinct natural cards from one deck (often from the dense part)."""
    cards = st.one_of(st.sampled_from(DENSE), st.sampled_from(ONE_DECK))
    return st.lists(cards, unique=True, min_size=max_size // 2, max_size=max_size)


def joker_hands(max_size: int) -> st.SearchStrategy[list[Card]]:
    """Hands from two decks and four jokers, with duplicated faces and jokers likely."""
    pool = st.sampled_from(
        [*make_deck(2)[:13], *make_deck(2)[52:65], *make_deck(2)[26:30], *make_deck(0, 4)]
    )
    cards = st.one_of(pool, st.sampled_from(TWO_DECKS_JOKERS))
    return st.lists(cards, unique=True, min_size=max_size // 2, max_size=max_size)


def hand_value(cards: Iterable[Card], values: Sequence[int]) -> int:
    """Sum of the values of ``cards``."""
    return sum(values[card_face(card)] for card in cards)


def meld_shapes(cards: Sequence[Card], rules: MeldRules) -> list[Counter[int]]:
    """Every meld of the hand as the faces it uses (jokers under face 52), deduplicated."""
    shapes: dict[tuple[tuple[int, int], ...], Counter[int]] = {}
    for meld in enumerate_melds(cards, rules):
        need = Counter(card_face(card) for card in meld.cards)
        shapes.setdefault(tuple(sorted(need.items())), need)
    return list(shapes.values())


def oracle_partitions(cards: Sequence[Card], rules: MeldRules) -> list[Counter[int]]:
    """Every multiset of faces (jokers as face 52) covered by some set of disjoint melds."""
    shapes = meld_shapes(cards, rules)
    available = Counter(card_face(card) for card in cards)
    found: dict[tuple[tuple[int, int], ...], Counter[int]] = {}

    def search(start: int, used: Counter[int]) -> None:
        found.setdefault(tuple(sorted(used.items())), used)
        for index in range(start, len(shapes)):
            total = used + shapes[index]
            if all(total[face] <= available[face] for face in shapes[index]):
                search(index, total)  # the same meld may be formed twice with two decks

    search(0, Counter())
    return list(found.values())


def oracle_deadwood(cards: Sequence[Card], rules: MeldRules, values: Sequence[int]) -> int:
    """Least deadwood by trying every set of disjoint melds from ``enumerate_melds``."""
    total = hand_value(cards, values)
    return min(
        total - sum(values[face] * count for face, count in used.items())
        for used in oracle_partitions(cards, rules)
    )


def oracle_layoffs(
    cards: Sequence[Card], melds: tuple[Meld, ...], rules: MeldRules, values: Sequence[int]
) -> int:
    """Most value laid off, by trying every sequence of single lay-offs."""
    best = 0
    for card in cards:
        rest = [other for other in cards if other != card]
        for index, meld in enumerate(melds):
            for face in layoff_faces(meld, rules):
                if is_joker(card) or card_face(card) == face:
                    table = (
                        *melds[:index],
                        with_layoff(meld, card, face, rules),
                        *melds[index + 1 :],
                    )
                    best = max(
                        best, values[card_face(card)] + oracle_layoffs(rest, table, rules, values)
                    )
    return best


def oracle_defender(
    cards: Sequence[Card], melds: tuple[Meld, ...], rules: MeldRules, values: Sequence[int]
) -> int:
    """Least deadwood after own melds and lay-offs, by brute force (one deck)."""
    best = hand_value(cards, values)
    jokers = sorted(card for card in cards if is_joker(card))
    for used in oracle_partitions(cards, rules):
        left = [card for card in cards if not is_joker(card) and not used[card_face(card)]]
        left += jokers[used[JOKER] :]
        saved = oracle_layoffs(left, melds, rules, values)
        best = min(best, hand_value(left, values) - saved)
    return best


def assert_is_partition(
    cards: Sequence[Card], melds: Sequence[Meld], rules: MeldRules, values: Sequence[int], left: int
) -> None:
    """The melds are valid, disjoint, from the hand, and leave exactly ``left`` deadwood."""
    melded = [card for meld in melds for card in meld.cards]
    assert len(set(melded)) == len(melded)
    assert set(melded) <= set(cards)
    for meld in melds:
        assert meld == check_meld(meld.cards, rules, meld.faces)
    assert sorted(melds, key=lambda meld: (meld.cards, meld.faces)) == list(melds)
    assert hand_value(cards, values) - hand_value(melded, values) == left


# --- deadwood and best_melds ---------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(one_deck_hands(10), rules_strategy, values_strategy)
def test_deadwood_matches_oracle_on_one_deck_hands(
    cards: list[Card], rules: MeldRules, values: tuple[int, ...]
) -> None:
    """The fast path finds the brute-force minimum on hands without jokers or duplicates."""
    assert oracle_deadwood(cards, rules, values) == deadwood(cards, rules, values)


@settings(max_examples=300, deadline=None)
@given(joker_hands(8), rules_strategy, values_strategy)
def test_deadwood_matches_oracle_with_jokers_and_two_decks(
    cards: list[Card], rules: MeldRules, values: tuple[int, ...]
) -> None:
    """The general path finds the brute-force minimum with jokers and duplicated faces."""
    assert oracle_deadwood(cards, rules, values) == deadwood(cards, rules, values)


@settings(max_examples=200, deadline=None)
@given(st.one_of(one_deck_hands(13), joker_hands(13)), rules_strategy, values_strategy)
def test_best_melds_is_a_valid_partition_with_the_least_deadwood(
    cards: list[Card], rules: MeldRules, values: tuple[int, ...]
) -> None:
    """best_melds returns valid disjoint melds from the hand whose leftover is the minimum."""
    melds, left = best_melds(cards, rules, values)
    assert deadwood(cards, rules, values) == left
    assert_is_partition(cards, melds, rules, values, left)


@settings(max_examples=100, deadline=None)
@given(st.one_of(one_deck_hands(13), joker_hands(13)), rules_strategy, st.data())
def test_best_melds_does_not_depend_on_the_order_of_the_hand(
    cards: list[Card], rules: MeldRules, data: st.DataObject
) -> None:
    """Ties are broken by a fixed rule, so a shuffled hand gives the same melds."""
    shuffled = data.draw(st.permutations(cards))
    assert best_melds(cards, rules, RAMINO_VALUES) == best_melds(shuffled, rules, RAMINO_VALUES)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(ONE_DECK), unique=True, min_size=8, max_size=16), rules_strategy)
def test_general_path_agrees_with_fast_path_on_large_hands(
    cards: list[Card], rules: MeldRules
) -> None:
    """The multiset search gives the bitmask search's result where both apply."""
    context = solver._context(rules, RAMINO_VALUES)
    expected = deadwood(cards, rules, RAMINO_VALUES)
    hand = solver._Hand(cards)
    assert expected == solver._general_deadwood(context, hand.layers, len(hand.jokers))


@settings(max_examples=200, deadline=None)
@given(st.one_of(one_deck_hands(11), joker_hands(8)), rules_strategy, values_strategy)
def test_solver_bound_to_rules_finds_the_least_deadwood(
    cards: list[Card], rules: MeldRules, values: tuple[int, ...]
) -> None:
    """``Solver(rules, values)`` gives the brute-force minimum, and melds that leave it."""
    bound = solver.Solver(rules, values)
    expected = oracle_deadwood(cards, rules, values)
    assert expected == bound.deadwood(cards)
    melds, left = bound.best_melds(tuple(cards))
    assert expected == left
    assert_is_partition(cards, melds, rules, values, left)
    assert (melds, left) == best_melds(iter(cards), rules, values)


def test_set_between_runs_of_its_own_suit_is_sorted_among_them() -> None:
    """AC 2C 3C and 7C 8C 9C around the set 5C 5D 5H (5C could join no run): KS is left
    (10). Melds come sorted by their cards: the set's first card 5C lies between the runs."""
    hand = parse_cards("9C 5H KS 7C AC 5D 2C 8C 3C 5C")
    expected = (["AC 2C 3C", "5C 5D 5H", "7C 8C 9C"], 10)
    for found in (
        best_melds(hand, GIN, GIN_VALUES),
        solver.Solver(GIN, GIN_VALUES).best_melds(hand),
    ):
        assert expected == ([str(meld) for meld in found[0]], found[1])


def test_set_without_clubs_follows_the_lower_diamonds_run() -> None:
    """2D 3D 4D and the set 5D 5H 5S leave KC (10); the run 2D-5D would leave 5H 5S KC (20).
    The set's first card is 5D, after the run's 2D."""
    hand = parse_cards("5S KC 5D 3D 5H 2D 4D")
    melds, left = solver.Solver(GIN, GIN_VALUES).best_melds(hand)
    assert (["2D 3D 4D", "5D 5H 5S"], 10) == ([str(meld) for meld in melds], left)


def test_tie_between_a_set_and_a_run_goes_to_the_meld_of_the_lowest_card() -> None:
    """5C 5D 5H leaves 4H 6H (10); 4H 5H 6H leaves 5C 5D (10). Scanning from 5C, the lowest
    card, the set is the first meld that keeps the least deadwood."""
    hand = parse_cards("6H 5D 4H 5C 5H")
    for found in (
        best_melds(hand, GIN, GIN_VALUES),
        solver.Solver(GIN, GIN_VALUES).best_melds(hand),
    ):
        assert (["5C 5D 5H"], 10) == ([str(meld) for meld in found[0]], found[1])
    assert solver.Solver(GIN, GIN_VALUES).deadwood(hand) == 10


def test_solver_bound_to_rules_refuses_bad_values_and_repeated_cards() -> None:
    """The same checks as the module functions: 53 values when made, distinct cards when
    called."""
    with pytest.raises(ValueError, match="53"):
        solver.Solver(GIN, GIN_VALUES[:52])
    bound = solver.Solver(GIN, GIN_VALUES)
    with pytest.raises(ValueError, match="twice"):
        bound.deadwood([parse_card("7H"), parse_card("7H")])
    with pytest.raises(ValueError, match="twice"):
        bound.best_melds([parse_card("7H"), parse_card("7H")])


def test_empty_hand_has_no_deadwood() -> None:
    """No cards, no melds, no deadwood."""
    expected: tuple[tuple[Meld, ...], int] = ((), 0)
    assert expected == best_melds([], GIN, GIN_VALUES)


def test_tie_between_two_sets_goes_to_the_lower_set() -> None:
    """7C 7D 7H with 5S 6S 7S, or 7C 7D 7S with 5H 6H 7H: both leave 11 (5 and 6 of the other
    suit). Scanning from 7C, the first set in the fixed order is 7C 7D 7H."""
    melds, left = best_melds(parse_cards("7C 7D 7H 7S 5H 6H 5S 6S"), GIN, GIN_VALUES)
    expected = (["7C 7D 7H", "5S 6S 7S"], 11)
    assert expected == ([str(meld) for meld in melds], left)
    assert deadwood(parse_cards("7C 7D 7H 7S 5H 6H 5S 6S"), GIN, GIN_VALUES) == 11


def test_two_ranks_in_three_suits() -> None:
    """Sets of 4s and of 9s, and the run 3C 4C 5C that would break the set of 4s: the sets
    leave 3C 5C (8) where the run leaves 4D 4H (8) too, and 9C 9D 9H 9S make a set either way;
    KS is left over. Least deadwood 18."""
    hand = parse_cards("3C 4C 5C 4D 4H 9C 9D 9H 9S KS")
    assert deadwood(hand, GIN, GIN_VALUES) == 18
    assert best_melds(hand, GIN, GIN_VALUES)[1] == 18


def test_second_deck_cards_on_a_one_deck_hand_are_the_cards_melded() -> None:
    """A hand with no repeated face uses the one-deck tables; its melds hold its own copies."""
    melds, left = best_melds(parse_cards("7H2 8H 9H2 KS"), GIN, GIN_VALUES)
    expected = (["7H2 8H 9H2"], 10)
    assert expected == ([str(meld) for meld in melds], left)


def test_one_joker_goes_to_the_near_run_that_saves_most() -> None:
    """One joker completes 4H 5H or 9S TS, not both: with spades (8-9-10) 4H 5H KC are left
    (19); with hearts 9S TS KC (29); unused, the joker itself costs 30."""
    hand = parse_cards("4H 5H 9S TS KC JK")
    assert deadwood(hand, RAMINO, RAMINO_VALUES) == 19
    melds, left = best_melds(hand, RAMINO, RAMINO_VALUES)
    assert left == 19
    assert [str(meld) for meld in melds] == ["JK=8S 9S TS"]


def test_three_copies_of_a_face() -> None:
    """Three decks: one 7H goes to 7H 8H 9H, the other two are left over (14)."""
    assert deadwood(parse_cards("7H 7H2 7H3 8H 9H"), GIN, GIN_VALUES) == 14


def test_set_and_run_sharing_a_card_keeps_the_better_one() -> None:
    """9H goes to the run (leaving 9C 9D, 18) or the set (leaving 7H 8H, 15): the set wins."""
    melds, left = best_melds(parse_cards("7H 8H 9H 9C 9D"), GIN, GIN_VALUES)
    expected = (["9C 9D 9H"], 15)
    assert expected == ([str(meld) for meld in melds], left)


def test_two_copies_of_a_face_never_share_a_set() -> None:
    """7H and its twin 7H2 cannot both be in a set, but each may join a different meld."""
    expected_deadwood = 21
    assert expected_deadwood == deadwood(parse_cards("7H 7H2 7C"), GIN, GIN_VALUES)
    melds, left = best_melds(parse_cards("7H 7H2 7C 7D 7S"), GIN, GIN_VALUES)
    expected = (["7C 7D 7H 7S"], 7)
    assert expected == ([str(meld) for meld in melds], left)


def test_two_copies_of_a_run_are_both_melded() -> None:
    """Two decks allow the same run twice."""
    melds, left = best_melds(parse_cards("5H 6H 7H 5H2 6H2 7H2"), GIN, GIN_VALUES)
    expected = (["5H 6H 7H", "5H2 6H2 7H2"], 0)
    assert expected == ([str(meld) for meld in melds], left)


def test_joker_stands_for_the_missing_face_of_a_run() -> None:
    """JK fills the gap of 5H _ 7H and is declared as 6H."""
    melds, left = best_melds(parse_cards("5H JK 7H"), RAMINO, RAMINO_VALUES)
    expected = (["5H JK=6H 7H"], 0)
    assert expected == ([str(meld) for meld in melds], left)


def test_joker_is_only_usable_as_a_declared_face() -> None:
    """5H JK 9H: the joker can stand for one card only, so no meld forms."""
    expected = 5 + 9 + 30
    assert expected == deadwood(parse_cards("5H JK 9H"), RAMINO, RAMINO_VALUES)


def test_min_natural_two_forbids_a_meld_of_one_card_and_two_jokers() -> None:
    """A-JK-JK is a meld with min_natural=1 but not in ramino (min_natural=2)."""
    hand = parse_cards("AS JK JK2")
    expected = 15 + 30 + 30
    assert expected == deadwood(hand, RAMINO, RAMINO_VALUES)
    melds, left = best_melds(hand, MeldRules(AceMode.HIGH_OR_LOW, 1), RAMINO_VALUES)
    expected_count_and_left = (1, 0)
    assert expected_count_and_left == (len(melds), left)


def test_spare_jokers_extend_melds_instead_of_staying_in_hand() -> None:
    """Spare jokers join a meld with room (declared in its lowest window) instead of staying."""
    melds, left = best_melds(parse_cards("5H 6H 7H JK JK2 JK3"), RAMINO, RAMINO_VALUES)
    expected = (["JK=2H JK2=3H JK3=4H 5H 6H 7H"], 0)
    assert expected == ([str(meld) for meld in melds], left)


def test_joker_takes_the_place_of_a_natural_when_that_leaves_less() -> None:
    """A set of four has no room for the joker (30): it replaces 7S, which stays (7)."""
    expected = 7
    assert expected == deadwood(parse_cards("7C 7D 7H 7S JK"), RAMINO, RAMINO_VALUES)


@pytest.mark.parametrize(
    ("ace", "hand", "expected"),
    [
        (AceMode.LOW, "QS KS AS", 21),
        (AceMode.HIGH_OR_LOW, "QS KS AS", 0),
        (AceMode.AROUND, "QS KS AS", 0),
        (AceMode.LOW, "AS 2S 3S", 0),
        (AceMode.HIGH_OR_LOW, "KS AS 2S", 13),
        (AceMode.AROUND, "KS AS 2S", 0),
    ],
)
def test_ace_mode_decides_which_runs_count(ace: AceMode, hand: str, expected: int) -> None:
    """Q-K-A needs high aces; K-A-2 needs ``around``; A-2-3 is always a run."""
    assert expected == deadwood(parse_cards(hand), MeldRules(ace), GIN_VALUES)


def test_high_or_low_ace_hand_with_jokers_and_two_decks() -> None:
    """A 13-card ramino hand: both jokers used, one twin 7H left over."""
    hand = parse_cards("JK 7H 7H2 8H 9H 9C 9D KS QS JK2 AS 2C 3C")
    melds, left = best_melds(hand, RAMINO, RAMINO_VALUES)
    expected = 7
    assert expected == left
    assert_is_partition(hand, melds, RAMINO, RAMINO_VALUES, left)
    assert oracle_deadwood(hand, RAMINO, RAMINO_VALUES) == left


def test_values_must_have_53_entries() -> None:
    """A value table of the wrong size is refused."""
    with pytest.raises(ValueError, match="53"):
        deadwood(parse_cards("7H"), GIN, GIN_VALUES[:52])


def test_a_hand_with_a_repeated_card_is_refused() -> None:
    """The same physical card twice is a caller's bug."""
    with pytest.raises(ValueError, match="twice"):
        deadwood([parse_card("7H"), parse_card("7H")], GIN, GIN_VALUES)


def test_fast_path_meld_table_is_every_meld_of_a_full_deck() -> None:
    """The precomputed one-deck melds are exactly what enumerate_melds finds in a deck."""
    for ace in AceMode:
        for min_natural in (1, 4):
            rules = MeldRules(ace, min_natural)
            expected = {
                sum(1 << card for card in meld.cards) for meld in enumerate_melds(ONE_DECK, rules)
            }
            tables = solver._tables(rules)
            actual = {mask for masks in tables.melds_by_lowest for mask in masks}
            assert expected == actual


# --- discards ------------------------------------------------------------------------------------


def test_openspiel_eleven_card_quirk_hand_discards_six_of_spades() -> None:
    """The RULES.md example: discarding 6S leaves 10 (OpenSpiel's heuristic says 12)."""
    hand = parse_cards("6S 3C 4H 2H 5H 4C 6C 3S 6H 5S 5C")
    card, left = best_discard(hand, GIN, GIN_VALUES)
    expected = ("6S", 10)
    assert expected == (format_card(card), left)
    exhaustive = min(oracle_deadwood([c for c in hand if c != d], GIN, GIN_VALUES) for d in hand)
    assert exhaustive == left


@settings(max_examples=200, deadline=None)
@given(st.one_of(one_deck_hands(11), joker_hands(8)).filter(bool), rules_strategy, values_strategy)
def test_discard_deadwoods_matches_oracle_for_every_discard(
    cards: list[Card], rules: MeldRules, values: tuple[int, ...]
) -> None:
    """The deadwood after each discard is the brute-force minimum of the remaining cards."""
    expected = {
        card: oracle_deadwood([other for other in cards if other != card], rules, values)
        for card in sorted(cards)
    }
    actual = discard_deadwoods(cards, rules, values)
    assert list(expected.items()) == list(actual.items())


@settings(max_examples=200, deadline=None)
@given(st.one_of(one_deck_hands(11), joker_hands(11)).filter(bool), rules_strategy, st.data())
def test_best_discard_is_the_least_allowed_discard(
    cards: list[Card], rules: MeldRules, data: st.DataObject
) -> None:
    """best_discard returns the lowest card among the allowed discards of least deadwood."""
    forbidden = frozenset(data.draw(st.lists(st.sampled_from(cards), max_size=len(cards) - 1)))
    after = discard_deadwoods(cards, rules, RAMINO_VALUES)
    least = min(left for card, left in after.items() if card not in forbidden)
    card = min(card for card, left in after.items() if card not in forbidden and left == least)
    assert (card, least) == best_discard(cards, rules, RAMINO_VALUES, forbidden)


def test_best_discard_ties_go_to_the_lowest_card() -> None:
    """Discarding either king leaves the same deadwood: the lower card is chosen."""
    hand = parse_cards("KS KC 2H 3H 4H")
    assert (parse_card("KC"), 10) == best_discard(hand, GIN, GIN_VALUES)


def test_best_discard_respects_forbidden_cards() -> None:
    """The card just taken from the pile may not go back even if it is the best discard."""
    hand = parse_cards("KS 2H 3H 4H 5C")
    forbidden = frozenset({parse_card("KS")})
    assert (parse_card("5C"), 10) == best_discard(hand, GIN, GIN_VALUES, forbidden)


def test_best_discard_refuses_when_every_card_is_forbidden() -> None:
    """With nothing to discard there is no answer."""
    hand = parse_cards("KS")
    with pytest.raises(ValueError, match="discard"):
        best_discard(hand, GIN, GIN_VALUES, frozenset(hand))


def test_discarding_a_joker_is_considered() -> None:
    """A joker that fits nowhere (min_natural=2) is the best discard."""
    hand = parse_cards("JK 2C 9D KS")
    assert (parse_card("JK"), 21) == best_discard(hand, RAMINO, RAMINO_VALUES)


def test_spare_joker_kept_when_it_extends_a_meld() -> None:
    """A joker that extends a run is worth keeping: the loose card goes."""
    hand = parse_cards("JK 5H 6H 7H 2C")
    assert (parse_card("2C"), 0) == best_discard(hand, RAMINO, RAMINO_VALUES)


# --- lay-offs ------------------------------------------------------------------------------------


def table(*texts: str, rules: MeldRules = GIN) -> tuple[Meld, ...]:
    """Table melds from notation."""
    return tuple(check_meld(parse_cards(text), rules) for text in texts)


def test_layoff_targets_lists_every_legal_single_layoff_sorted() -> None:
    """Naturals go where their face fits; a joker may stand for any accepted face."""
    melds = table("5H 6H 7H", "9C 9D 9S", rules=RAMINO)
    hand = parse_cards("8H 9H 4H JK KS")
    joker = parse_card("JK")
    expected = sorted(
        [
            (parse_card("8H"), 0, parse_card("8H")),
            (parse_card("4H"), 0, parse_card("4H")),
            (parse_card("9H"), 1, parse_card("9H")),
            (joker, 0, parse_card("4H")),
            (joker, 0, parse_card("8H")),
            (joker, 1, parse_card("9H")),
        ]
    )
    assert expected == layoff_targets(hand, melds, RAMINO)


@settings(max_examples=100, deadline=None)
@given(joker_hands(10), rules_strategy, st.data())
def test_layoff_targets_are_exactly_the_legal_with_layoff_calls(
    cards: list[Card], rules: MeldRules, data: st.DataObject
) -> None:
    """Every listed lay-off is accepted by with_layoff and every other one is refused."""
    source = data.draw(st.lists(st.sampled_from(TWO_DECKS_JOKERS), unique=True, max_size=8))
    pool = enumerate_melds(source, rules)
    melds = data.draw(st.lists(st.sampled_from(pool), max_size=3)) if pool else []
    on_table = {card for meld in melds for card in meld.cards}
    cards = [card for card in cards if card not in on_table]
    expected = []
    for card in cards:
        for index, meld in enumerate(melds):
            for face in range(52):
                if not is_joker(card) and card_face(card) != face:
                    continue
                try:
                    with_layoff(meld, card, face, rules)
                except InvalidMeldError:
                    continue
                expected.append((card, index, face))
    assert sorted(expected) == layoff_targets(cards, melds, rules)


def test_layoffs_chain_along_a_run() -> None:
    """8H then 9H go on 5H-6H-7H; KS stays."""
    expected = (10, (parse_card("8H"), parse_card("9H")))
    assert expected == best_layoff_deadwood(
        parse_cards("8H 9H KS"), table("5H 6H 7H"), GIN, GIN_VALUES
    )


def test_card_in_own_meld_is_not_laid_off() -> None:
    """Keeping 8C 8D 8H as a set beats laying 8H 9H off: 9H then cannot follow."""
    hand = parse_cards("8H 8C 8D 9H")
    expected: tuple[int, tuple[Card, ...]] = (9, ())
    assert expected == best_layoff_deadwood(hand, table("5H 6H 7H"), GIN, GIN_VALUES)


def test_layoff_prefers_the_meld_that_lets_more_cards_follow() -> None:
    """7H could complete the sevens, but on the run it lets 8H follow."""
    melds = table("7C 7D 7S", "4H 5H 6H")
    hand = parse_cards("7H 8H QC")
    expected = (10, (parse_card("7H"), parse_card("8H")))
    assert expected == best_layoff_deadwood(hand, melds, GIN, GIN_VALUES)


def test_joker_laid_off_bridges_a_gap() -> None:
    """A spare joker declared 8H lets 9H follow it onto 5H-6H-7H."""
    rules = MeldRules(AceMode.LOW, 1)
    melds = table("5H 6H 7H", rules=rules)
    left, laid = best_layoff_deadwood(parse_cards("JK 9H KD"), melds, rules, RAMINO_VALUES)
    expected = (10, ["9H", "JK"])
    assert expected == (left, sorted(format_card(card) for card in laid))


def test_no_table_melds_means_plain_deadwood() -> None:
    """Without melds to lay off on, the defender's deadwood is his deadwood."""
    hand = parse_cards("8H 9H TH KS 2C")
    assert (deadwood(hand, GIN, GIN_VALUES), ()) == best_layoff_deadwood(hand, (), GIN, GIN_VALUES)


@st.composite
def layoff_situations(
    draw: st.DrawFn, jokers: int
) -> tuple[list[Card], tuple[Meld, ...], MeldRules]:
    """One-deck table melds (disjoint) and a defender hand from the other cards."""
    rules = draw(rules_strategy)
    deck = make_deck(1, jokers)
    pool = enumerate_melds(make_deck(1), rules)
    melds: list[Meld] = []
    used: set[Card] = set()
    for meld in draw(st.lists(st.sampled_from(pool), max_size=3)):
        if not used & set(meld.cards):
            melds.append(meld)
            used |= set(meld.cards)
    # Cards next to the table melds make lay-offs likely.
    near = sorted(
        {face for meld in melds for face in layoff_faces(meld, rules)} - used
        | {card for card in deck if is_joker(card)}
    )
    rest = [card for card in deck if card not in used]
    cards = draw(
        st.lists(st.sampled_from(near or rest) | st.sampled_from(rest), unique=True, max_size=7)
    )
    return cards, tuple(melds), rules


@settings(max_examples=150, deadline=None)
@given(layoff_situations(jokers=0), values_strategy)
def test_best_layoff_deadwood_matches_oracle_in_gin(
    situation: tuple[list[Card], tuple[Meld, ...], MeldRules], values: tuple[int, ...]
) -> None:
    """The defender's least deadwood is the brute-force minimum over melds and lay-off orders."""
    cards, melds, rules = situation
    left, laid = best_layoff_deadwood(cards, melds, rules, values)
    assert oracle_defender(cards, melds, rules, values) == left
    assert set(laid) <= set(cards)


@settings(max_examples=80, deadline=None)
@given(layoff_situations(jokers=2), values_strategy)
def test_best_layoff_deadwood_matches_oracle_with_jokers(
    situation: tuple[list[Card], tuple[Meld, ...], MeldRules], values: tuple[int, ...]
) -> None:
    """Spare jokers may be melded or laid off; the minimum matches the brute force."""
    cards, melds, rules = situation
    assert (
        oracle_defender(cards, melds, rules, values)
        == best_layoff_deadwood(cards, melds, rules, values)[0]
    )
