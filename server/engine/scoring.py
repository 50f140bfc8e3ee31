"""Hand settlement and game end. Amounts are exact ``Fraction``s: a hand settled by differences
splits points among players tied for the lowest hand, and nothing is ever rounded.

Modes (``Rules.scoring``): ``winner_collects``, ``penalty`` (with elimination in Ramino),
``pay_winner`` and ``melded_minus_hand`` (Rummy 500: what a player laid down minus his hand).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from server.engine.cards import Card, card_face, face_rank, is_joker
from server.engine.melds import Meld, MeldKind
from server.engine.variants import Rules

if TYPE_CHECKING:
    from server.engine.game import TableMeld

__all__ = [
    "format_amount",
    "game_outcome",
    "game_winners",
    "hand_count",
    "meld_points",
    "opening_points",
    "parse_amount",
    "settle_hand",
]


def hand_count(cards: Sequence[Card], rules: Rules) -> int:
    """Value of the cards a player still holds (every card counts; no melds are formed)."""
    values = rules.values
    return sum(values[card_face(card)] for card in cards)


def _ace_below_two(meld: Meld, index: int) -> bool:
    """Whether the card at ``index`` of ``meld`` is an ace placed below a 2 (A-2-3...)."""
    return (
        meld.kind is MeldKind.RUN
        and face_rank(meld.faces[index]) == 1
        and index + 1 < len(meld.faces)
        and face_rank(meld.faces[index + 1]) == 2
    )


def meld_points(melds: Iterable[TableMeld], seat: int, rules: Rules) -> int:
    """Value of the table cards ``seat`` laid down (Rummy 500).

    A joker is worth ``joker_value`` whatever it stands for; an ace below a 2 in a run is worth
    1 under the standard values, otherwise cards are worth what they would be in hand.
    """
    total = 0
    standard = rules.values_scheme == "standard"
    for table_meld in melds:
        meld = table_meld.meld
        for index, (card, owner) in enumerate(zip(meld.cards, table_meld.owners)):
            if owner != seat:
                continue
            if is_joker(card):
                total += rules.joker_value
            elif standard and _ace_below_two(meld, index):
                total += 1
            else:
                total += rules.values[card_face(card)]
    return total


def opening_points(melds: Iterable[Meld]) -> int:
    """Points a lay-down counts towards an opening (Italian Ramino's 30).

    J/Q/K 10, pip cards face value; an ace 1 below a 2 in a run, else 11 (above the king or in
    a set); a joker counts as the card it stands for.
    """
    total = 0
    for meld in melds:
        for index, face in enumerate(meld.faces):
            rank = face_rank(face)
            if rank == 1:
                total += 1 if _ace_below_two(meld, index) else 11
            else:
                total += min(rank, 10)
    return total


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
    melded: Sequence[int] = (),
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
    if rules.scoring == "melded_minus_hand":
        for seat in seats:
            points[seat] = Fraction(melded[seat] - counts[seat])
        return tuple(points)
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


def game_outcome(
    rules: Rules, totals: Sequence[Fraction], hands_played: int, active: Sequence[bool]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """After a hand: the seats eliminated by it, and the game's winners (``()``: it goes on).

    With ``elimination`` a total above ``target`` eliminates; two players: the game ends at the
    first elimination; more: the last player left wins. With ``tie_plays_another_hand`` a tie
    for the best total at the target plays on. Otherwise see ``game_winners``.
    """
    seats = [seat for seat, playing in enumerate(active) if playing]
    if rules.elimination and rules.target is not None:
        out = tuple(seat for seat in seats if totals[seat] > rules.target)
        left = [seat for seat in seats if seat not in out]
        if out and (len(active) == 2 or len(left) <= 1):
            if left:
                return out, tuple(left)
            best = min(totals[seat] for seat in out)
            return out, tuple(seat for seat in out if totals[seat] == best)
        return out, ()
    winners = game_winners(rules, totals, hands_played, active)
    if rules.tie_plays_another_hand and len(winners) > 1:
        return (), ()
    return (), winners


def format_amount(amount: Fraction) -> str:
    """Exact text form of a score: ``25``, ``-3``, ``25/2``."""
    return str(amount)


def parse_amount(text: str) -> Fraction:
    """Inverse of ``format_amount``."""
    return Fraction(text)
