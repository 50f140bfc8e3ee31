"""Hand settlement and game end for the Rummy family (``basic``, ``block``, ``wrotham``,
``ramino_classic``). Amounts are exact ``Fraction``s: a hand settled by differences splits points
among players tied for the lowest hand, and nothing is ever rounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from server.engine.cards import Card, card_face
from server.engine.variants import Rules

__all__ = ["format_amount", "game_winners", "hand_count", "parse_amount", "settle_hand"]


def hand_count(cards: Sequence[Card], rules: Rules) -> int:
    """Value of the cards a player still holds (every card counts; no melds are formed)."""
    values = rules.values
    return sum(values[card_face(card)] for card in cards)


def _rummy_factor(rules: Rules, rummy: bool) -> tuple[int, int]:
    """(multiplier, bonus) applied to what changes hands when a player went rummy."""
    if not rummy or rules.going_rummy == "none":
        return 1, 0
    return (2, 0) if rules.going_rummy == "double" else (1, 10)


def settle_hand(
    rules: Rules,
    counts: Sequence[int],
    winner: int,
    rummy: bool,
    active: Sequence[bool],
) -> tuple[Fraction, ...]:
    """Points each seat scores for a hand.

    ``counts`` are the values left in each hand, ``winner`` the seat that went out (-1: no one,
    then the hand is settled by differences: the lowest count wins the sum of its differences to
    every other count, shared equally among ties).

    >>> rules = __import__("server.engine.variants", fromlist=["make_rules"]).make_rules(
    ...     "basic", {}, 4)
    >>> [str(p) for p in settle_hand(rules, [6, 15, 7, 21], -1, False, [True] * 4)]
    ['25', '0', '0', '0']
    """
    seats = [seat for seat, playing in enumerate(active) if playing]
    points = [Fraction(0)] * len(counts)
    multiplier, bonus = _rummy_factor(rules, rummy)
    if winner >= 0:
        losers = [seat for seat in seats if seat != winner]
        if rules.scoring == "winner_collects":
            points[winner] = Fraction(sum(counts[seat] for seat in losers) * multiplier + bonus)
        elif rules.scoring == "penalty":
            for seat in losers:
                points[seat] = Fraction(counts[seat] * multiplier + bonus)
        else:  # pay_winner
            for seat in losers:
                paid = Fraction(counts[seat] * multiplier + bonus)
                points[seat] -= paid
                points[winner] += paid
        return tuple(points)
    lowest = min(counts[seat] for seat in seats)
    lows = [seat for seat in seats if counts[seat] == lowest]
    differences = {seat: counts[seat] - lowest for seat in seats}
    pot = Fraction(sum(differences.values()))
    if rules.scoring == "penalty":
        for seat in seats:
            points[seat] = Fraction(counts[seat])
    elif rules.scoring == "winner_collects":
        for seat in lows:
            points[seat] = pot / len(lows)
    else:  # pay_winner
        for seat in seats:
            points[seat] = -Fraction(differences[seat])
        for seat in lows:
            points[seat] += pot / len(lows)
    return tuple(points)


def game_winners(
    rules: Rules, totals: Sequence[Fraction], hands_played: int, active: Sequence[bool]
) -> tuple[int, ...]:
    """The seats that won the game, or ``()`` when it goes on.

    The game ends after ``rules.deals`` deals, or when a total reaches ``rules.target``.
    Highest total wins, except under ``penalty`` scoring, where the lowest does. Ties share.
    """
    seats = [seat for seat, playing in enumerate(active) if playing]
    over = rules.deals is not None and hands_played >= rules.deals
    if rules.target is not None and any(totals[seat] >= rules.target for seat in seats):
        over = True
    if not over:
        return ()
    if rules.scoring == "penalty":
        best = min(totals[seat] for seat in seats)
    else:
        best = max(totals[seat] for seat in seats)
    return tuple(seat for seat in seats if totals[seat] == best)


def format_amount(amount: Fraction) -> str:
    """Exact text form of a score: ``25``, ``-3``, ``25/2``."""
    return str(amount)


def parse_amount(text: str) -> Fraction:
    """Inverse of ``format_amount``."""
    return Fraction(text)
