"""Ratings: OpenSkill's Weng-Lin Plackett-Luce model, one rating per entrant and pool.

Every entrant starts a pool at the model's prior (mu 25, sigma 25/3) and each match result
updates the ratings of its entrants from their ranks (``MatchResult.ranks``; equal ranks are a
tie). The model is OpenSkill's ``PlackettLuce`` with its defaults (beta 25/6, tau 25/300: each
update first widens sigma by tau, so ratings keep following a bot that changes). The
leaderboard shows the ordinal ``mu - 3 sigma``: a rating the entrant is very likely above.

The incremental ratings are written into each result; ``refit`` computes them again from the
ranks alone, in log order, which must give the same numbers (``Refitted`` records the largest
difference found).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from openskill.models import PlackettLuce

__all__ = ["MODEL", "Rating", "prior", "refit", "update"]

MODEL = PlackettLuce()
"""The rating model (OpenSkill's defaults)."""


@dataclass(frozen=True, slots=True)
class Rating:
    """A skill estimate: mean and standard deviation."""

    mu: float
    sigma: float

    @property
    def ordinal(self) -> float:
        """What the leaderboard ranks by: ``mu - 3 sigma``."""
        return self.mu - 3 * self.sigma


def prior() -> Rating:
    """The rating of an entrant new to a pool."""
    return Rating(MODEL.mu, MODEL.sigma)


def update(ratings: Sequence[Rating], ranks: Sequence[int]) -> tuple[Rating, ...]:
    """The ratings after a match of single-player teams finishing at ``ranks`` (1 is best).

    Raises:
        ValueError: fewer than two entrants, or not one rank each.
    """
    if len(ratings) < 2 or len(ranks) != len(ratings):
        raise ValueError(f"a result needs two or more ratings and one rank each, got {ranks!r}")
    teams = [[MODEL.rating(mu=rating.mu, sigma=rating.sigma)] for rating in ratings]
    rated = MODEL.rate(teams, ranks=[float(rank) for rank in ranks])
    return tuple(Rating(team[0].mu, team[0].sigma) for team in rated)


class ResultLike(Protocol):
    """What ``refit`` reads of a result (``MatchResult`` has it)."""

    @property
    def pool(self) -> str: ...
    @property
    def entrants(self) -> tuple[str, ...]: ...
    @property
    def ranks(self) -> tuple[int, ...]: ...


def refit(results: Iterable[ResultLike]) -> dict[tuple[str, str], Rating]:
    """Every (pool, entrant) rating computed afresh from the results, in order."""
    ratings: dict[tuple[str, str], Rating] = {}
    for result in results:
        keys = [(result.pool, name) for name in result.entrants]
        before = [ratings.get(key) or prior() for key in keys]
        for key, after in zip(keys, update(before, result.ranks)):
            ratings[key] = after
    return ratings
