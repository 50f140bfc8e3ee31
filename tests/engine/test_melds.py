"""Sets, runs, jokers and lay-off faces as RULES.md's Common vocabulary defines them."""

from __future__ import annotations

import random

import pytest

from protocol.cards import make_deck
from server.engine import VARIANTS, InvalidMeldError, MeldKind, format_cards, make_rules
from server.engine.melds import (
    AceMode,
    MeldRules,
    _enumerate,
    check_meld,
    enumerate_melds,
    layoff_faces,
    with_layoff,
    with_swap,
)
from tests.engine.helpers import card, cards, spec

LOW = MeldRules(AceMode.LOW)
HIGH_OR_LOW = MeldRules(AceMode.HIGH_OR_LOW)
AROUND = MeldRules(AceMode.AROUND)


def refusal(text: str, rules: MeldRules = LOW) -> str:
    """The code ``check_meld`` raises for the meld written ``text`` (jokers as ``JK=7H``)."""
    written = spec(text)
    with pytest.raises(InvalidMeldError) as caught:
        check_meld(written.cards, rules, written.faces)
    return caught.value.code


def placed(text: str, rules: MeldRules = LOW) -> str:
    """The valid meld written ``text``, in canonical order, as notation."""
    written = spec(text)
    return str(check_meld(written.cards, rules, written.faces))


# Sets ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("7H 7C 7D", "7C 7D 7H"),
        ("7S 7H 7D 7C", "7C 7D 7H 7S"),
        ("7C 7D2 7H", "7C 7D2 7H"),
        ("KS JK=KC KD", "JK=KC KD KS"),
    ],
)
def test_a_set_is_three_or_four_cards_of_one_rank_and_distinct_suits(
    text: str, canonical: str
) -> None:
    """A set is valid with 3 or 4 cards of different suits, from either deck, jokers included."""
    assert canonical == placed(text)


@pytest.mark.parametrize(
    "text",
    ["7H 7H2 7C", "7C 7H JK=7H", "7C 7D 7H 7S 7S2", "7C 7D 7H 7S JK=7S", "7C 7C2 7D 7H"],
)
def test_a_set_never_holds_two_cards_of_one_suit(text: str) -> None:
    """Two cards of one suit (two decks, or a joker standing for a held suit) are refused."""
    assert "rules/duplicate_suit" == refusal(text)


def test_a_meld_has_at_least_three_cards() -> None:
    """Two cards are not a meld."""
    assert "rules/too_short" == refusal("7C 7D")


def test_a_set_type_is_reported() -> None:
    """A valid set is reported as a set, a valid run as a run."""
    assert MeldKind.SET == check_meld(cards("7C 7D 7H"), LOW).kind
    assert MeldKind.RUN == check_meld(cards("7C 8C 9C"), LOW).kind


# Runs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rules", "canonical"),
    [
        ("AH 2H 3H", LOW, "AH 2H 3H"),
        ("3H AH 2H", HIGH_OR_LOW, "AH 2H 3H"),
        ("2H AH 3H", AROUND, "AH 2H 3H"),
        ("AH QH KH", HIGH_OR_LOW, "QH KH AH"),
        ("KH AH QH", AROUND, "QH KH AH"),
        ("AH JH KH QH", HIGH_OR_LOW, "JH QH KH AH"),
        ("2H AH KH", AROUND, "KH AH 2H"),
        ("QH 2H KH AH", AROUND, "QH KH AH 2H"),
        ("9H 7H 8H", LOW, "7H 8H 9H"),
        ("5D 6D 7D 8D 9D TD JD QD KD", LOW, "5D 6D 7D 8D 9D TD JD QD KD"),
    ],
)
def test_runs_allowed_by_the_ace_option(text: str, rules: MeldRules, canonical: str) -> None:
    """A-2-3 is a run in every mode; Q-K-A with high_or_low and around; K-A-2 with around."""
    assert canonical == placed(text, rules)


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("QH KH AH", LOW),
        ("KH AH 2H", LOW),
        ("KH AH 2H", HIGH_OR_LOW),
        ("QH KH AH 2H", HIGH_OR_LOW),
        ("2H 3H 5H", LOW),
        ("2H 3H 4S", LOW),
        ("5H 6H 6H2 7H", LOW),
        ("JK=KH AH 2H", HIGH_OR_LOW),
    ],
)
def test_runs_refused_by_the_ace_option(text: str, rules: MeldRules) -> None:
    """K-A-2 only goes around the corner with ``around``; gaps, mixed suits, repeats never."""
    assert "rules/invalid_meld" == refusal(text, rules)


# Jokers ----------------------------------------------------------------------------------------


def test_a_joker_stands_for_its_declared_card() -> None:
    """``5H JK=6H 7H`` is a run whose joker stands for 6H."""
    meld = check_meld(cards("5H JK 7H"), LOW, spec("5H JK=6H 7H").faces)
    assert ("5H JK 7H", spec("5H 6H 7H").faces) == (format_cards(meld.cards), meld.faces)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("5H JK=6S 7H", "rules/invalid_meld"),
        ("5H JK=5H 6H", "rules/invalid_meld"),
        ("5H 6H=7H 8H", "rules/invalid_meld"),
        ("5H JK 7H", "rules/undeclared_joker"),
        ("JK=5H JK2=6H JK3=7H", "rules/min_natural"),
    ],
)
def test_joker_declarations_must_fit_the_meld(text: str, code: str) -> None:
    """A joker must be declared as a card that fits; a natural card stands only for itself."""
    assert code == refusal(text)


def test_min_natural_counts_the_natural_cards_of_a_meld() -> None:
    """With ``min_natural=2`` one natural and two jokers are refused; with 1 they are a run."""
    assert "rules/min_natural" == refusal("5H JK=6H JK2=7H", MeldRules(min_natural=2))
    assert "5H JK=6H JK2=7H" == placed("5H JK=6H JK2=7H", MeldRules(min_natural=1))
    assert "5H JK=6H 7H" == placed("5H JK=6H 7H", MeldRules(min_natural=2))


# Lay-offs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rules", "faces"),
    [
        ("7C 7D 7H", LOW, "7S"),
        ("7C JK=7D 7H", LOW, "7S"),
        ("7C 7D 7H 7S", LOW, ""),
        ("4H 5H 6H", LOW, "3H 7H"),
        ("AH 2H 3H", LOW, "4H"),
        ("AH 2H 3H", HIGH_OR_LOW, "4H"),
        ("AH 2H 3H", AROUND, "4H KH"),
        ("JH QH KH", LOW, "TH"),
        ("JH QH KH", HIGH_OR_LOW, "AH TH"),
        ("QH KH AH", HIGH_OR_LOW, "JH"),
        ("KH AH 2H", AROUND, "3H QH"),
        ("AD 2D 3D 4D 5D 6D 7D 8D 9D TD JD QD KD", AROUND, ""),
    ],
)
def test_layoff_faces(text: str, rules: MeldRules, faces: str) -> None:
    """A set takes its missing suits up to 4 cards; a run takes the card at either end."""
    written = spec(text)
    meld = check_meld(written.cards, rules, written.faces)
    assert sorted(cards(faces)) == sorted(layoff_faces(meld, rules))


def test_a_layoff_grows_the_meld_in_canonical_order() -> None:
    """Laying off 3H on 4H 5H 6H gives 3H 4H 5H 6H; a joker may stand for the other end."""
    meld = check_meld(cards("4H 5H 6H"), LOW)
    assert "3H 4H 5H 6H" == str(with_layoff(meld, card("3H"), card("3H"), LOW))
    assert "4H 5H 6H JK=7H" == str(with_layoff(meld, card("JK"), card("7H"), LOW))


@pytest.mark.parametrize(
    ("laid", "face", "code"),
    [
        ("8H", "8H", "rules/invalid_layoff"),
        ("7S", "7S", "rules/invalid_layoff"),
        ("JK", "8H", "rules/invalid_layoff"),
        ("3H", "7H", "rules/invalid_meld"),
    ],
)
def test_a_layoff_that_does_not_extend_the_meld_is_refused(laid: str, face: str, code: str) -> None:
    """A card off either end of the run, or a natural card posing as another, is refused."""
    meld = check_meld(cards("4H 5H 6H"), LOW)
    with pytest.raises(InvalidMeldError) as caught:
        with_layoff(meld, card(laid), card(face), LOW)
    assert code == caught.value.code


def test_swapping_a_joker_puts_the_natural_card_in_its_place() -> None:
    """Swapping 6H into ``5H JK=6H 7H`` gives ``5H 6H 7H`` and hands back the joker."""
    written = spec("5H JK=6H 7H")
    meld = check_meld(written.cards, LOW, written.faces)
    swapped, joker = with_swap(meld, card("6H"))
    assert ("5H 6H 7H", card("JK")) == (str(swapped), joker)
    with pytest.raises(InvalidMeldError) as caught:
        with_swap(meld, card("7H2"))
    assert "rules/no_joker_to_swap" == caught.value.code


# Enumeration -----------------------------------------------------------------------------------


def test_every_meld_of_a_hand_is_listed_once_in_card_order() -> None:
    """4H 5H 6H 7H hold three runs (4-6, 5-7, 4-7: three or more consecutive cards of one
    suit); 7C 7D 7H is the one set (three of a rank in distinct suits; a fourth 7 is missing);
    2S and the lone 4H-7C pairings make nothing. Sorted by their cards."""
    found = [str(meld) for meld in enumerate_melds(cards("7H 2S 4H 7C 5H 6H 7D"), LOW)]
    assert found == ["7C 7D 7H", "4H 5H 6H", "4H 5H 6H 7H", "5H 6H 7H"]


def test_twin_cards_count_once_unless_one_must_stay_apart() -> None:
    """Two decks: 7C and 7C2 are the same face, so 7C 7D 7H is one set whichever club is
    used; a club that must stay apart (just taken from the pile) makes a second one (sets are
    written in suit order)."""
    hand = cards("7C 7C2 7D 7H")
    assert [str(meld) for meld in enumerate_melds(hand, LOW)] == ["7C 7D 7H"]
    apart = frozenset(cards("7C2"))
    assert [str(meld) for meld in enumerate_melds(hand, LOW, apart)] == [
        "7C 7D 7H",
        "7C2 7D 7H",
    ]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_enumerating_by_suit_and_rank_matches_one_pass_over_the_hand(variant: str) -> None:
    """A joker-free hand is worked out suit by suit and rank by rank from remembered parts;
    any hand must give exactly what one pass over the whole hand gives (hands of 3 to 15
    cards of the preset's pack, jokers included, with random cards kept apart)."""
    rules = make_rules(variant)
    pack = make_deck(rules.decks, rules.jokers)
    rng = random.Random(variant)
    for _ in range(400):
        hand = tuple(rng.sample(pack, rng.randint(3, 15)))
        apart = frozenset(rng.sample(hand, rng.randint(0, 2)))
        for kept in (frozenset(), apart):
            assert enumerate_melds(hand, rules.meld_rules, kept) == _enumerate(
                hand, rules.meld_rules, kept
            ), (format_cards(hand), format_cards(tuple(kept)))
