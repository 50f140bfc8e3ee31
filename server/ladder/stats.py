"""Statistics over a ladder's results: head-to-head scores and how soon an order settled.

Head to head. Every match two entrants played together in a pool gives the first a score:
1 if it ranked better, 0.5 for a shared rank, 0 if worse (in a 3- or 4-player match, each pair
of its entrants is compared). A match is already a duplicate comparison, so its score is one
observation; the score's 95% interval is the normal interval of the mean over matches (the
Wilson interval when every score is the same, as ``ramino duel`` does; one match tells nothing:
[0, 1]). ``better`` says the first entrant is stronger with 95% confidence (the interval lies
above 0.5).

Comparison. ``shared_scores`` lists those scores of one entrant against another, match by
match in log order (in one pool, or every pool); ``ramino ladder compare`` runs the SPRT of
``ramino duel --sprt`` (``bots.duel.sprt``) on them, a shared match being the duplicate deal
the duel's SPRT takes as its unit.

Convergence. After each result of a pool, the entrants rated so far are ordered by ordinal;
the order *settles* at the first result after which it never changes again (the final order
is compared with the rated entrants present).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bots.duel import mean_interval
from server.ladder.events import MatchResult
from server.ladder.ratings import Rating, prior, update

__all__ = ["HeadToHead", "Settling", "head_to_head", "settling", "shared_scores"]


@dataclass(frozen=True, slots=True)
class HeadToHead:
    """How ``first`` did against ``second`` in the matches they shared."""

    first: str
    second: str
    matches: int
    score: float
    low: float
    high: float

    @property
    def better(self) -> bool:
        """Whether ``first`` is the stronger with 95% confidence."""
        return self.low > 0.5

    def as_json(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {
            "first": self.first,
            "second": self.second,
            "matches": self.matches,
            "score": round(self.score, 4),
            "ci95": [round(self.low, 4), round(self.high, 4)],
            "better_95": self.better,
        }


def pair_score(result: MatchResult, first: str, second: str) -> float:
    """``first``'s score against ``second`` in ``result`` (both must be in it): 1 for a
    better rank, 0.5 for the same, 0 for a worse."""
    mine = result.ranks[result.entrants.index(first)]
    theirs = result.ranks[result.entrants.index(second)]
    return 1.0 if mine < theirs else 0.5 if mine == theirs else 0.0


def shared_scores(
    results: Sequence[MatchResult], first: str, second: str, pool: str | None = None
) -> list[float]:
    """``first``'s score against ``second`` in each match they shared (in ``pool``, or in
    any pool), in log order."""
    return [
        pair_score(result, first, second)
        for result in results
        if (pool is None or result.pool == pool)
        and first in result.entrants
        and second in result.entrants
    ]


def head_to_head(results: Sequence[MatchResult], pool: str) -> list[HeadToHead]:
    """Every ordered pair of entrants that met in ``pool``, by name."""
    scores: dict[tuple[str, str], list[float]] = {}
    for result in results:
        if result.pool != pool:
            continue
        for i, first in enumerate(result.entrants):
            for j, second in enumerate(result.entrants):
                if i == j:
                    continue
                scores.setdefault((first, second), []).append(pair_score(result, first, second))
    rows = []
    for (first, second), values in sorted(scores.items()):
        mean, low, high = mean_interval(values) if len(values) > 1 else (values[0], 0.0, 1.0)
        rows.append(HeadToHead(first, second, len(values), mean, max(0.0, low), min(1.0, high)))
    return rows


@dataclass(frozen=True, slots=True)
class Settling:
    """When a pool's ordinal order stopped changing."""

    pool: str
    order: tuple[str, ...]
    """The final order, best first."""
    results: int
    """Results of the pool in all."""
    settled_after: int
    """Results of the pool after which the order never changed again."""
    games: int
    """Games those results took."""


def settling(results: Sequence[MatchResult], pool: str) -> Settling:
    """How many results (and games) ``pool`` needed until its order stopped changing.

    The ratings are refitted here from the ranks (they equal the stored ones)."""
    ratings: dict[str, Rating] = {}
    orders: list[tuple[str, ...]] = []
    games: list[int] = []
    played = 0
    for result in results:
        if result.pool != pool:
            continue
        before = [ratings.get(name) or prior() for name in result.entrants]
        for name, after in zip(result.entrants, update(before, result.ranks)):
            ratings[name] = after
        played += result.games
        orders.append(tuple(sorted(ratings, key=lambda name: (-ratings[name].ordinal, name))))
        games.append(played)
    if not orders:
        return Settling(pool, (), 0, 0, 0)
    final = orders[-1]
    settled = len(orders)
    while settled > 1 and orders[settled - 2] == final:
        settled -= 1
    return Settling(pool, final, len(orders), settled, games[settled - 1])
