"""Hand settlement and game end. Amounts are exact ``Fraction``s: a hand settled by differences
splits points among players tied for the lowest hand, and nothing is ever rounded.

Modes (``Rules.scoring``): ``winner_collects``, ``penalty`` (with elimination in Ramino),
``pay_winner`` and ``melded_minus_hand`` (Rummy 500: what a player laid down minus his hand).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from protocol.cards import Card, card_face, face_rank, is_joker
from protocol.game import GameEnded, HandEnded, MeldSpec
from server.engine import solver
from server.engine.melds import AceMode, Meld, MeldKind
from server.engine.variants import Rules

GAME_HAND_CAP = 500
"""Safety cap: a game ends after this many hands whatever the scores (a table whose players
never go out or knock still finishes); the best total then wins."""

__all__ = [
    "GAME_HAND_CAP",
    "HandScore",
    "KnockResult",
    "OwnedMeld",
    "format_amount",
    "game_outcome",
    "game_winners",
    "hand_count",
    "hand_winner",
    "meld_points",
    "opening_points",
    "parse_amount",
    "parse_points",
    "parse_totals",
    "score_hand",
    "settle_gin",
    "settle_hand",
    "settle_knock",
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


class OwnedMeld(Protocol):
    """A meld on the table with the seat that laid each card (``TableMeld`` is one)."""

    @property
    def meld(self) -> Meld:
        """The meld."""

    @property
    def owners(self) -> tuple[int, ...]:
        """The seat that laid each card, parallel to ``meld.cards``."""


def meld_points(melds: Iterable[OwnedMeld], seat: int, rules: Rules) -> int:
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


def opening_points(melds: Iterable[Meld], ace: AceMode = AceMode.HIGH_OR_LOW) -> int:
    """Points a lay-down counts towards an opening (Italian Ramino's 30).

    J/Q/K 10, pip cards face value; an ace 1 below a 2 in a run, else 11 (above the king or in
    a set); with ``ace=low`` an ace can only be low and always counts 1. A joker counts as the
    card it stands for.
    """
    total = 0
    low_only = ace is AceMode.LOW
    for meld in melds:
        for index, face in enumerate(meld.faces):
            rank = face_rank(face)
            if rank == 1:
                total += 1 if low_only or _ace_below_two(meld, index) else 11
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
    if rules.scoring in ("gin", "knock"):
        # Those hands score only through a knock; any other end (the wall) is void.
        return tuple(points)
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
    over = hands_played >= GAME_HAND_CAP
    if rules.deals is not None and hands_played >= rules.deals:
        over = True
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
    rules: Rules,
    totals: Sequence[Fraction],
    hands_played: int,
    active: Sequence[bool],
    hands_won: Sequence[int] = (),
    forfeited: Sequence[bool] = (),
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[Fraction, ...]]:
    """After a hand: the seats it eliminates, the game's winners (``()``: it goes on) and the
    final totals (the totals plus Gin Rummy's end-of-game bonuses).

    With ``elimination`` a total above ``target`` (or a forfeited seat) eliminates; two players:
    the game ends at the first elimination; more: the last player left wins. With
    ``tie_plays_another_hand`` a tie for the best total at the target plays on. Otherwise see
    ``game_winners``.
    """
    final = tuple(totals)
    seats = [seat for seat, playing in enumerate(active) if playing]
    if rules.elimination and rules.target is not None:
        out = tuple(
            seat
            for seat in seats
            if totals[seat] > rules.target or (seat < len(forfeited) and forfeited[seat])
        )
        left = [seat for seat in seats if seat not in out]
        if out and (len(active) == 2 or len(left) <= 1):
            if left:
                return out, tuple(left), final
            best = min(totals[seat] for seat in out)
            return out, tuple(seat for seat in out if totals[seat] == best), final
        return out, (), final
    winners = game_winners(rules, totals, hands_played, active)
    if rules.tie_plays_another_hand and len(winners) > 1 and hands_played < GAME_HAND_CAP:
        return (), (), final
    if winners and rules.scoring == "gin":
        final = _gin_final_totals(rules, totals, winners, hands_won)
    return (), winners, final


def _gin_final_totals(
    rules: Rules, totals: Sequence[Fraction], winners: Sequence[int], hands_won: Sequence[int]
) -> tuple[Fraction, ...]:
    """Gin Rummy's totals at the end of a game: boxes, the game bonus and the shutout."""
    final = [total + rules.box_bonus * won for total, won in zip(totals, hands_won)]
    if len(winners) == 1:
        winner = winners[0]
        final[winner] += rules.game_bonus
        losers_won = sum(won for seat, won in enumerate(hands_won) if seat != winner)
        if losers_won == 0:
            if rules.shutout == "double":
                final[winner] *= 2
            elif rules.shutout == "plus100":
                final[winner] += 100
    return tuple(final)


@dataclass(frozen=True, slots=True)
class KnockResult:
    """The settlement of a knock: who scores, why, and what every seat showed."""

    winner: int
    """The seat that scores (-1: nobody, e.g. a Gin Rummy tie that is not an undercut)."""
    reason: str
    counts: tuple[int, ...]
    """Unmatched points of each seat after the layout (and lay-offs)."""
    points: tuple[Fraction, ...]
    shown: tuple[tuple[MeldSpec, ...], ...]
    laid_off: tuple[Card, ...] = ()


def _specs(melds: Iterable[Meld]) -> tuple[MeldSpec, ...]:
    return tuple(MeldSpec(meld.cards, meld.faces) for meld in melds)


def _defender(active: Sequence[bool], knocker: int) -> int:
    """The one other seat still playing (Gin Rummy is for two)."""
    for seat, playing in enumerate(active):
        if playing and seat != knocker:
            return seat
    raise ValueError(f"no seat but the knocker {knocker} is playing: {tuple(active)}")


def settle_gin(
    rules: Rules,
    hands: Sequence[Sequence[Card]],
    active: Sequence[bool],
    knocker: int,
    melds: Sequence[Meld],
    knocker_deadwood: int,
    big: bool,
) -> KnockResult:
    """Gin Rummy after ``knocker`` laid out ``melds`` (``hands`` are after his discard).

    Gin (no deadwood): the defender's deadwood + ``gin_bonus`` (``big_gin_bonus`` without a
    discard), no lay-offs. Otherwise the defender lays off on the knocker's melds; if his
    deadwood is lower (or equal, with ``undercut_on_tie``) he scores the difference +
    ``undercut_bonus``; an equal count without ``undercut_on_tie`` scores nothing; else the
    knocker scores the difference.

    Raises:
        ValueError: no seat but the knocker is playing.
    """
    defender = _defender(active, knocker)
    hand = hands[defender]
    laid_off: tuple[Card, ...] = ()
    if knocker_deadwood == 0:
        defender_melds, defender_deadwood = solver.best_melds(hand, rules.meld_rules, rules.values)
    else:
        defender_deadwood, laid_off = solver.best_layoff_deadwood(
            hand, melds, rules.meld_rules, rules.values
        )
        kept = [card for card in hand if card not in laid_off]
        defender_melds, _ = solver.best_melds(kept, rules.meld_rules, rules.values)
    points = [Fraction(0)] * len(hands)
    counts = [0] * len(hands)
    counts[knocker], counts[defender] = knocker_deadwood, defender_deadwood
    if knocker_deadwood == 0:
        bonus = rules.big_gin_bonus if big else rules.gin_bonus
        winner, reason = knocker, "big_gin" if big else "gin"
        points[knocker] = Fraction(defender_deadwood + bonus)
    elif defender_deadwood < knocker_deadwood or (
        defender_deadwood == knocker_deadwood and rules.undercut_on_tie
    ):
        winner, reason = defender, "undercut"
        points[defender] = Fraction(knocker_deadwood - defender_deadwood + rules.undercut_bonus)
    elif defender_deadwood == knocker_deadwood:
        winner, reason = -1, "tie"
    else:
        winner, reason = knocker, "knock"
        points[knocker] = Fraction(defender_deadwood - knocker_deadwood)
    shown: list[tuple[MeldSpec, ...]] = [()] * len(hands)
    shown[knocker] = _specs(melds)
    shown[defender] = _specs(defender_melds)
    return KnockResult(
        winner, reason, tuple(counts), tuple(points), tuple(shown), tuple(sorted(laid_off))
    )


def settle_knock(
    rules: Rules,
    hands: Sequence[Sequence[Card]],
    active: Sequence[bool],
    knocker: int,
    melds: Sequence[Meld],
    knocker_count: int,
) -> KnockResult:
    """Knock Rummy: everyone shows his best melds; each opponent settles with the knocker.

    ``hands`` are after the knocker's discard. A higher count pays the knocker the difference;
    a lower one collects the difference + 10 (``literal_bonus``: the knocker's count + 10); a
    tie goes to the knocker for 0, or with ``tie_goes_to=opponent`` the opponent collects 10. A
    knock with no unmatched card also collects ``rummy_bonus`` from each opponent. Points are
    credited: nobody goes negative.
    """
    players = len(hands)
    points = [Fraction(0)] * players
    counts = [0] * players
    shown: list[tuple[MeldSpec, ...]] = [()] * players
    counts[knocker] = knocker_count
    shown[knocker] = _specs(melds)
    for seat, playing in enumerate(active):
        if not playing or seat == knocker:
            continue
        their_melds, count = solver.best_melds(hands[seat], rules.meld_rules, rules.values)
        counts[seat] = count
        shown[seat] = _specs(their_melds)
        if knocker_count == 0:
            points[knocker] += rules.rummy_bonus
        if count > knocker_count:
            points[knocker] += count - knocker_count
        elif count < knocker_count:
            points[seat] += (knocker_count if rules.literal_bonus else knocker_count - count) + 10
        elif rules.tie_goes_to == "opponent":
            points[seat] += 10
    return KnockResult(knocker, "knock", tuple(counts), tuple(points), tuple(shown))


@dataclass(frozen=True, slots=True)
class HandScore:
    """The settlement of one hand, as ``score_hand`` works it out from its end."""

    points: tuple[Fraction, ...]
    """What each seat scores for the hand, exact (a penalty under ``scoring=penalty``)."""
    counts: tuple[int, ...]
    """Each seat's count: the value of his hand, or his unmatched points after a knock."""
    winner: int
    """The seat that does best in the hand (``hand_winner``: most points, fewest under
    ``penalty`` scoring); -1 when no seat does strictly better than every other."""
    ended_by: int
    """The seat that went out or knocked; -1: nobody."""
    reason: str
    """Why the hand ended: ``out``, ``knock``, ``gin``, ``big_gin``, ``undercut``, ``tie``,
    ``stock_exhausted``, ``wall``, ``idle_cap``."""
    rummy: bool = False
    """The seat that went out went rummy (all his cards in one turn)."""
    shown: tuple[tuple[MeldSpec, ...], ...] = ()
    """After a knock: the melds each seat showed."""
    laid_off: tuple[Card, ...] = ()
    """Gin Rummy: the cards the defender laid off on the knocker's melds."""


def score_hand(
    rules: Rules,
    hands: Sequence[Sequence[Card]],
    ended_by: int = -1,
    *,
    melds: Sequence[Meld] | None = None,
    table: Iterable[OwnedMeld] = (),
    rummy: bool = False,
    big_gin: bool = False,
    active: Sequence[bool] | None = None,
    reason: str = "",
) -> HandScore:
    """Settle a hand from its end, without playing it: what each seat scores, and why.

    ``hands`` are the cards each seat holds at the end (one entry per seat); ``ended_by`` the
    seat that went out or knocked (-1: nobody, e.g. the stock ran out). ``active`` marks the
    seats still in the game (default: every seat).

    - Rummy presets: the counts are the values of the hands; ``rummy`` says whether the seat
      that went out went rummy; ``table`` holds the table melds with their owners, which
      Rummy 500 (``melded_minus_hand``) scores for the seats that laid them.
    - Knock and Gin Rummy: ``hands[ended_by]`` is the knocker's hand after his discard (eleven
      cards and ``big_gin=True`` for big gin) and ``melds`` the melds he lays out (default: his
      best melds); the others show their best melds and, in Gin Rummy, lay off. Without a
      knock the hand is void: everyone scores 0.

    ``reason`` defaults to what the engine reports: ``out`` for a player out, the knock's
    result after a knock, ``wall`` (Knock, Gin) or ``stock_exhausted`` when nobody ended it.

    >>> from protocol.cards import parse_cards
    >>> from server.engine.variants import make_rules
    >>> basic = make_rules("basic", {}, 3)
    >>> hands = [(), parse_cards("KS QS 2C"), parse_cards("7D")]
    >>> settled = score_hand(basic, hands, 0, rummy=True)   # (10 + 10 + 2 + 7) doubled
    >>> [str(p) for p in settled.points], settled.counts, settled.winner, settled.reason
    (['58', '0', '0'], (0, 22, 7), 0, 'out')

    Raises:
        ValueError: ``ended_by`` is not a seat of ``hands``, or the knocker's ``melds`` use
            cards he does not hold.
    """
    seats = len(hands)
    if not -1 <= ended_by < seats:
        raise ValueError(f"ended_by must be -1 or a seat 0-{seats - 1}, got {ended_by}")
    playing = tuple(active) if active is not None else (True,) * seats
    if rules.knocking and ended_by >= 0:
        result = _settle_knock(rules, hands, playing, ended_by, melds, big_gin)
        return HandScore(
            points=result.points,
            counts=result.counts,
            winner=hand_winner(rules, result.points, playing),
            ended_by=ended_by,
            reason=reason or result.reason,
            shown=result.shown,
            laid_off=result.laid_off,
        )
    if rules.knocking:
        counts = tuple(solver.deadwood(hand, rules.meld_rules, rules.values) for hand in hands)
        points = settle_hand(rules, counts, ended_by, False, playing)
        default = "wall"
    else:
        counts = tuple(hand_count(hand, rules) for hand in hands)
        melded: tuple[int, ...] = ()
        if rules.scoring == "melded_minus_hand":
            owned = tuple(table)
            melded = tuple(meld_points(owned, seat, rules) for seat in range(seats))
        points = settle_hand(rules, counts, ended_by, rummy, playing, melded)
        default = "out" if ended_by >= 0 else "stock_exhausted"
    return HandScore(
        points=points,
        counts=counts,
        winner=hand_winner(rules, points, playing),
        ended_by=ended_by,
        reason=reason or default,
        rummy=rummy and ended_by >= 0,
    )


def _settle_knock(
    rules: Rules,
    hands: Sequence[Sequence[Card]],
    active: Sequence[bool],
    knocker: int,
    melds: Sequence[Meld] | None,
    big_gin: bool,
) -> KnockResult:
    """A knock settled as the engine settles it: the knocker's melds, deadwood, the others."""
    hand = tuple(hands[knocker])
    if melds is None:
        melds, _ = solver.best_melds(hand, rules.meld_rules, rules.values)
    used = [card for meld in melds for card in meld.cards]
    if len(set(used)) != len(used) or not set(used) <= set(hand):
        raise ValueError(
            f"the knocker's melds must use distinct cards of his hand: {used!r} of {hand!r}"
        )
    unmatched = hand_count([card for card in hand if card not in set(used)], rules)
    if rules.knocking == "gin":
        return settle_gin(rules, hands, active, knocker, melds, unmatched, big_gin)
    return settle_knock(rules, hands, active, knocker, melds, unmatched)


def parse_points(result: HandEnded) -> tuple[Fraction, ...]:
    """What each seat scored in a ``HandEnded`` event, as exact numbers (the event carries
    text, ``"25/2"``, for the wire).

    >>> from protocol.game import HandEnded
    >>> ended = HandEnded(hand=1, winner=0, reason="out", rummy=False, hands=((), ()),
    ...                   counts=(0, 5), points=("25/2", "0"), totals=("25/2", "0"))
    >>> parse_points(ended)
    (Fraction(25, 2), Fraction(0, 1))
    """
    return tuple(parse_amount(point) for point in result.points)


def parse_totals(result: HandEnded | GameEnded) -> tuple[Fraction, ...]:
    """Each seat's total after a ``HandEnded``, or the final totals of a ``GameEnded``, exact.

    >>> from protocol.game import GameEnded
    >>> parse_totals(GameEnded(winners=(1,), totals=("-3", "7")))
    (Fraction(-3, 1), Fraction(7, 1))
    """
    return tuple(parse_amount(total) for total in result.totals)


def format_amount(amount: Fraction) -> str:
    """Exact text form of a score: ``25``, ``-3``, ``25/2``."""
    return str(amount)


def parse_amount(text: str) -> Fraction:
    """Inverse of ``format_amount``."""
    return Fraction(text)


def hand_winner(rules: Rules, points: Sequence[Fraction], active: Sequence[bool] = ()) -> int:
    """The seat that did best in a hand, or -1 when no seat did strictly better than every other.

    Best is the most points, except under ``penalty`` scoring (Ramino's too), where points are
    penalties and the fewest win. Only seats still in the game (``active``; all when empty)
    compete, so an eliminated seat's zero never ties with the player who went out. A tie at the
    top, or a hand in which every seat scores the same (a void Gin Rummy hand, a Gin tie), has no
    winner. This is ``HandEnded.winner``; who ended the hand is ``HandEnded.ended_by``.

    >>> from server.engine.variants import make_rules
    >>> knock = make_rules("knock", {}, 3)
    >>> hand_winner(knock, [Fraction(5), Fraction(0), Fraction(12)])  # the undercutter
    2
    >>> hand_winner(knock, [Fraction(0), Fraction(0), Fraction(0)])
    -1
    >>> hand_winner(make_rules("ramino", {}, 3), [Fraction(0), Fraction(40), Fraction(7)])
    0
    """
    seats = [seat for seat in range(len(points)) if not active or active[seat]]
    if not seats:
        return -1
    sign = -1 if rules.scoring == "penalty" else 1
    best = max(sign * points[seat] for seat in seats)
    leaders = [seat for seat in seats if sign * points[seat] == best]
    return leaders[0] if len(leaders) == 1 else -1
