"""The ladder's state: a fold of its event log.

``LadderState.apply`` takes the events in log order. Ratings come from the results themselves
(each carries the ratings after it), so folding never recomputes them; ``ratings.refit`` does,
and must agree. A log that contradicts itself (a result for a match never scheduled, a second
result for one match) is refused with ``ladder/corrupt_log``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from server.ladder.entrants import Entrant
from server.ladder.errors import LadderError
from server.ladder.events import (
    Configured,
    EntrantAdded,
    EntrantRemoved,
    EntrantSuspended,
    LadderEvent,
    MatchCancelled,
    MatchResult,
    MatchScheduled,
    Refitted,
)
from server.ladder.ratings import Rating, prior

__all__ = ["DAY", "LadderState", "Standing", "day_of"]

DAY = 86_400.0


def day_of(at: float) -> int:
    """The UTC day number of the time ``at`` (seconds since the epoch)."""
    return int(at // DAY)


@dataclass
class Standing:
    """An entrant in one pool: its rating and record."""

    name: str
    rating: Rating = field(default_factory=prior)
    matches: int = 0
    games: int = 0
    wins: float = 0.0
    first: int = 0
    """Matches ranked first (alone or tied)."""
    forfeits: int = 0
    """Matches in which it forfeited a seat."""


@dataclass
class LadderState:
    """Everything the log says, folded."""

    seq: int = 0
    config: Configured | None = None
    entrants: dict[str, Entrant] = field(default_factory=dict)
    active: dict[str, bool] = field(default_factory=dict)
    scheduled: dict[str, MatchScheduled] = field(default_factory=dict)
    results: dict[str, MatchResult] = field(default_factory=dict)
    cancelled: dict[str, MatchCancelled] = field(default_factory=dict)
    order: list[MatchResult] = field(default_factory=list)
    """Results in log order."""
    standings: dict[str, dict[str, Standing]] = field(default_factory=dict)
    """pool -> entrant -> standing."""
    refits: list[Refitted] = field(default_factory=list)
    suspended: dict[str, EntrantSuspended] = field(default_factory=dict)
    """Entrants suspended and not entered again since."""
    failing: Counter[str] = field(default_factory=Counter)
    """Entrant -> matches forfeited in a row (since its last clean match, entry or
    suspension)."""
    pairs: Counter[tuple[str, int, frozenset[str]]] = field(default_factory=Counter)
    """(pool, day, pair) -> matches scheduled (and not cancelled) that day."""
    shared: Counter[tuple[str, frozenset[str]]] = field(default_factory=Counter)
    """(pool, pair) -> matches scheduled (and not cancelled) in all."""

    def apply(self, event: LadderEvent, seq: int) -> None:
        """Fold ``event`` (row ``seq`` of the stream).

        Raises:
            LadderError: the event contradicts the log (``ladder/corrupt_log``).
        """
        self.seq = seq
        if isinstance(event, Configured):
            self.config = event
        elif isinstance(event, EntrantAdded):
            self.entrants[event.name] = Entrant(event.name, event.kind, event.spec)
            self.active[event.name] = True
            self.suspended.pop(event.name, None)
            self.failing.pop(event.name, None)
        elif isinstance(event, EntrantRemoved):
            self._require(event.name in self.entrants, f"removal of unknown {event.name!r}")
            self.active[event.name] = False
        elif isinstance(event, EntrantSuspended):
            self._require(event.name in self.entrants, f"suspension of unknown {event.name!r}")
            self.active[event.name] = False
            self.suspended[event.name] = event
            self.failing.pop(event.name, None)
        elif isinstance(event, MatchScheduled):
            self._require(event.match_id not in self.scheduled, f"{event.match_id} twice")
            self.scheduled[event.match_id] = event
            for pair in _pairs(event.entrants):
                self.pairs[(event.pool, day_of(event.at), pair)] += 1
                self.shared[(event.pool, pair)] += 1
        elif isinstance(event, MatchCancelled):
            scheduled = self.scheduled.get(event.match_id)
            self._require(scheduled is not None, f"cancel of unknown {event.match_id}")
            self._require(event.match_id not in self.results, "cancel of a played match")
            assert scheduled is not None
            self.cancelled[event.match_id] = event
            for pair in _pairs(scheduled.entrants):
                self.pairs[(scheduled.pool, day_of(scheduled.at), pair)] -= 1
                self.shared[(scheduled.pool, pair)] -= 1
        elif isinstance(event, MatchResult):
            self._apply_result(event)
        elif isinstance(event, Refitted):
            self.refits.append(event)

    def _apply_result(self, result: MatchResult) -> None:
        match_id = result.match_id
        scheduled = self.scheduled.get(match_id)
        self._require(scheduled is not None, f"result of unscheduled {match_id}")
        self._require(match_id not in self.results, f"second result of {match_id}")
        self._require(match_id not in self.cancelled, f"result of cancelled {match_id}")
        assert scheduled is not None
        self._require(
            (scheduled.pool, scheduled.entrants) == (result.pool, result.entrants),
            f"result of {match_id} names other entrants",
        )
        self.results[match_id] = result
        self.order.append(result)
        pool = self.standings.setdefault(result.pool, {})
        per_entrant = result.games
        for index, name in enumerate(result.entrants):
            standing = pool.setdefault(name, Standing(name))
            standing.rating = Rating(result.mu[index], result.sigma[index])
            standing.matches += 1
            standing.games += per_entrant
            standing.wins += result.wins[index]
            if result.ranks[index] == 1:
                standing.first += 1
            if result.forfeits and result.forfeits[index]:
                standing.forfeits += 1
                self.failing[name] += 1
            else:
                self.failing.pop(name, None)

    @staticmethod
    def _require(condition: bool, what: str) -> None:
        if not condition:
            raise LadderError(f"the ladder log contradicts itself: {what}", "ladder/corrupt_log")

    # Queries -------------------------------------------------------------------------------

    def pending(self) -> list[MatchScheduled]:
        """Matches scheduled but neither played nor cancelled, in schedule order."""
        return [
            match
            for match_id, match in self.scheduled.items()
            if match_id not in self.results and match_id not in self.cancelled
        ]

    def rating(self, pool: str, name: str) -> Rating:
        """The rating of ``name`` in ``pool`` (the prior before its first result there)."""
        standing = self.standings.get(pool, {}).get(name)
        return standing.rating if standing is not None else prior()

    def matches_of(self, pool: str, name: str) -> int:
        """Results of ``name`` in ``pool``."""
        standing = self.standings.get(pool, {}).get(name)
        return standing.matches if standing is not None else 0

    def pair_count(self, pool: str, day: int, first: str, second: str) -> int:
        """Matches of ``first`` with ``second`` in ``pool`` scheduled on ``day``."""
        return self.pairs[(pool, day, frozenset((first, second)))]

    def shared_count(self, pool: str, first: str, second: str) -> int:
        """Matches of ``first`` with ``second`` in ``pool`` scheduled (and not cancelled) in
        all, whatever the day."""
        return self.shared[(pool, frozenset((first, second)))]

    def leaderboard(self, pool: str, min_matches: int = 0) -> list[Standing]:
        """The standings of ``pool`` with at least ``min_matches`` results, best ordinal
        first."""
        rows = [row for row in self.standings.get(pool, {}).values() if row.matches >= min_matches]
        return sorted(rows, key=lambda row: (-row.rating.ordinal, row.name))


def _pairs(names: tuple[str, ...]) -> list[frozenset[str]]:
    return [
        frozenset((first, second))
        for index, first in enumerate(names)
        for second in names[index + 1 :]
    ]
