"""Hand values, hand settlement and game end as RULES.md gives them for the Rummy presets.

``test_rules.py`` reaches the same rules through played hands; here the arithmetic is checked
on its own, including counts no seven-card hand can reach (RULES.md's worked example).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from server.engine import Rules, make_rules
from server.engine.scoring import format_amount, game_winners, hand_count, settle_hand
from tests.engine.helpers import cards

FOUR_SEATS = (True, True, True, True)


def basic(players: int = 4, **options: object) -> Rules:
    """``basic`` rules for ``players`` seats with ``options``."""
    return make_rules("basic", options, players)


def settled(rules: Rules, counts: tuple[int, ...], winner: int = -1, rummy: bool = False) -> str:
    """The points of a hand, as text separated by spaces."""
    points = settle_hand(rules, counts, winner, rummy, (True,) * len(counts))
    return " ".join(format_amount(point) for point in points)


# Hand values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "options", "hand", "count"),
    [
        ("basic", {}, "AC 2D 9H TS JC QD KH", 1 + 2 + 9 + 10 + 10 + 10 + 10),
        ("basic", {"ace": "high_or_low"}, "AC AD 5H", 15 + 15 + 5),
        ("basic", {"ace": "around"}, "AS", 15),
        ("ramino_classic", {}, "JK AC KD", 15 + 1 + 10),
        ("wrotham", {}, "JK JK2 2C", 15 + 15 + 2),
        ("wrotham", {"joker_value": 25}, "JK 2C", 25 + 2),
    ],
)
def test_hand_values(name: str, options: dict[str, object], hand: str, count: int) -> None:
    """Pip cards face value, J/Q/K 10, ace 1 (15 when aces can be high), joker 15."""
    assert count == hand_count(cards(hand), make_rules(name, options, 2))


# Settlement ------------------------------------------------------------------------------------


def test_settlement_by_differences_worked_example() -> None:
    """RULES.md: A 6, B 15, C 7, D 21 -> A scores 9 + 1 + 15 = 25."""
    assert "25 0 0 0" == settled(basic(), (6, 15, 7, 21))


@pytest.mark.parametrize(
    ("counts", "points"),
    [
        ((6, 6, 31, 6), "25/3 25/3 0 25/3"),
        ((6, 6, 31, 7), "13 13 0 0"),
        ((5, 5, 10, 11), "11/2 11/2 0 0"),
        ((9, 9, 9, 9), "0 0 0 0"),
    ],
)
def test_ties_for_the_lowest_hand_share_exact_fractions(
    counts: tuple[int, int, int, int], points: str
) -> None:
    """Tied lowest hands split the pot equally; the shares stay exact fractions."""
    assert points == settled(basic(), counts)


def test_shares_are_fractions_not_floats() -> None:
    """A share of 25/2 is the exact ``Fraction``, not 12.5 or 12."""
    points = settle_hand(basic(3), (6, 6, 31), -1, False, (True, True, True))
    assert (Fraction(25, 2), Fraction(25, 2), Fraction(0)) == points


@pytest.mark.parametrize(
    ("going_rummy", "rummy", "points"),
    [
        ("double", False, "0 0 43 0"),
        ("double", True, "0 0 86 0"),
        ("plus10", False, "0 0 43 0"),
        ("none", True, "0 0 43 0"),
    ],
)
def test_winner_collects_the_other_hands(going_rummy: str, rummy: bool, points: str) -> None:
    """The winner scores the sum of the other hands (doubled when he went rummy)."""
    assert points == settled(basic(going_rummy=going_rummy), (6, 15, 0, 22), 2, rummy)


@pytest.mark.parametrize(
    ("winner", "rummy", "points"),
    [(2, False, "6 15 0 22"), (2, True, "12 30 0 44"), (-1, False, "6 15 7 22")],
)
def test_penalty_scoring(winner: int, rummy: bool, points: str) -> None:
    """Each loser scores his own hand (doubled for rummy); with no winner, everyone does."""
    counts = (6, 15, 0 if winner == 2 else 7, 22)
    assert points == settled(basic(scoring="penalty"), counts, winner, rummy)


@pytest.mark.parametrize(
    ("winner", "rummy", "counts", "points"),
    [
        (2, False, (6, 15, 0, 22), "-6 -15 43 -22"),
        (2, True, (6, 15, 0, 22), "-12 -30 86 -44"),
        (-1, False, (6, 15, 7, 21), "25 -9 -1 -15"),
        (-1, False, (6, 6, 31, 7), "13 13 -25 -1"),
    ],
)
def test_pay_winner_is_zero_sum(
    winner: int, rummy: bool, counts: tuple[int, ...], points: str
) -> None:
    """Each loser pays the winner his hand, or the difference to the lowest when no one is out."""
    rules = basic(scoring="pay_winner")
    assert points == settled(rules, counts, winner, rummy)
    assert 0 == sum(settle_hand(rules, counts, winner, rummy, FOUR_SEATS))


# Game end --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("totals", "winners"),
    [((99, 50, 0, 0), ()), ((120, 130, 0, 0), (1,)), ((100, 40, 100, 0), (0, 2))],
)
def test_winner_collects_highest_total_at_the_target_wins(
    totals: tuple[int, ...], winners: tuple[int, ...]
) -> None:
    """The game ends once a total reaches the target; the highest total wins; ties share."""
    rules = basic()
    assert winners == game_winners(rules, [Fraction(t) for t in totals], 1, FOUR_SEATS)


@pytest.mark.parametrize(
    ("totals", "winners"),
    [((99, 50, 0, 10), ()), ((100, 50, 3, 10), (2,)), ((130, 0, 0, 9), (1, 2))],
)
def test_penalty_lowest_total_wins_at_the_target(
    totals: tuple[int, ...], winners: tuple[int, ...]
) -> None:
    """Under ``penalty`` reaching the target ends the game and the lowest total wins."""
    rules = basic(scoring="penalty")
    assert winners == game_winners(rules, [Fraction(t) for t in totals], 1, FOUR_SEATS)


@pytest.mark.parametrize(("hands_played", "over"), [(2, False), (3, True)])
def test_fixed_number_of_deals(hands_played: int, over: bool) -> None:
    """With ``deals=3`` the game ends after the third hand, not before, whatever the totals."""
    rules = basic(deals=3)
    totals = [Fraction(500), Fraction(0), Fraction(0), Fraction(0)]
    assert over == bool(game_winners(rules, totals, hands_played, FOUR_SEATS))
