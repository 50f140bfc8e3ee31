"""Pairing: who plays the next match of a pool.

Most matches are *rating* matches. Their *anchor* is the eligible entrant with the fewest
results in the pool (ties drawn at random), so a newcomer plays until it is listed and every
entrant keeps playing; its opponents are the entrants nearest to it in rating (``mu``; a close
match says the most about both).

With probability ``exploration`` (at most ``MAX_EXPLORATION``, so rating matches stay the
majority) a match is an *exploration* match instead: it seats the pair of eligible entrants
that has shared the fewest matches in the pool (ties drawn at random), then, for more players,
whoever has shared the fewest with those already seated. So every pair of a pool keeps being
sampled, the far-apart ones included, at a share of about ``exploration`` divided among the
pairs the rating matches neglect: the head-to-head score of any two entrants, and so the order
of entrants of different strength, can be established with confidence however far apart
their ratings are (docs/ladder.md, "Pairing").

No two entrants meet more than ``pair_cap_per_day`` times a day in a pool (0: no cap), the
day being the UTC day of the injected clock; when a table cannot be made under the cap the
next anchor (or pair) is tried. Entrants with fewer than ``min_matches`` results are rated and
paired like the others but not listed on the leaderboard.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from server.ladder.state import LadderState

__all__ = ["MAX_EXPLORATION", "PairingSettings", "choose_entrants"]

MAX_EXPLORATION = 0.5
"""The largest ``exploration``: rating matches are never fewer than exploration ones."""


@dataclass(frozen=True, slots=True)
class PairingSettings:
    """How matches are made."""

    pair_cap_per_day: int = 0
    """Most matches two entrants play together in a pool per UTC day (0: no cap)."""
    min_matches: int = 10
    """Results an entrant needs in a pool before the leaderboard lists it."""
    exploration: float = 0.25
    """Chance that a match seats the entrants that have shared the fewest matches instead of
    entrants near in rating (at most ``MAX_EXPLORATION``)."""


def choose_entrants(
    state: LadderState,
    pool: str,
    players: int,
    eligible: Sequence[str],
    settings: PairingSettings,
    rng: random.Random,
    now: float,
) -> tuple[str, ...] | None:
    """The entrants of the next match of ``pool`` (the anchor, or the least-shared pair,
    first), or None when no table
    of ``players`` can be made from ``eligible`` under the daily cap."""
    if len(eligible) < players:
        return None
    day = int(now // 86_400)
    cap = settings.pair_cap_per_day

    def fits(name: str, chosen: list[str]) -> bool:
        return cap <= 0 or all(state.pair_count(pool, day, name, other) < cap for other in chosen)

    shuffled = list(eligible)
    rng.shuffle(shuffled)
    if rng.random() < min(settings.exploration, MAX_EXPLORATION):
        table = _least_shared(state, pool, players, shuffled, fits)
        if table is not None:
            return table
    anchors = sorted(shuffled, key=lambda name: state.matches_of(pool, name))
    for anchor in anchors:
        mu = state.rating(pool, anchor).mu
        others = sorted(
            (name for name in shuffled if name != anchor),
            key=lambda name: abs(state.rating(pool, name).mu - mu),
        )
        chosen = [anchor]
        for name in others:
            if len(chosen) == players:
                break
            if fits(name, chosen):
                chosen.append(name)
        if len(chosen) == players:
            return tuple(chosen)
    return None


def _least_shared(
    state: LadderState,
    pool: str,
    players: int,
    shuffled: Sequence[str],
    fits: Callable[[str, list[str]], bool],
) -> tuple[str, ...] | None:
    """The exploration table: the pair that has shared the fewest matches in ``pool``, then
    whoever has shared the fewest with those seated (ties in the order of ``shuffled``)."""

    def shared(name: str, chosen: list[str]) -> int:
        return sum(state.shared_count(pool, name, other) for other in chosen)

    pairs = sorted(
        (
            (first, second)
            for index, first in enumerate(shuffled)
            for second in shuffled[index + 1 :]
        ),
        key=lambda pair: state.shared_count(pool, *pair),
    )
    for first, second in pairs:
        chosen = [first, second]
        if not fits(second, [first]):
            continue
        while len(chosen) < players:
            rest = sorted(
                (name for name in shuffled if name not in chosen),
                key=lambda name: shared(name, chosen),
            )
            name = next((name for name in rest if fits(name, chosen)), None)
            if name is None:
                break
            chosen.append(name)
        if len(chosen) == players:
            return tuple(chosen)
    return None
