"""Pairing: who plays the next match of a pool.

The *anchor* is the eligible entrant with the fewest results in the pool (ties drawn at
random), so a newcomer plays until it is listed and every entrant keeps playing. Its opponents
are, most of the time, the entrants nearest to it in rating (``mu``; a close match says the
most about both), and with probability ``exploration`` drawn at random from the others, so
far-apart entrants still meet now and then and a rating cannot be stuck in a corner of the
pool. No two entrants meet more than ``pair_cap_per_day`` times a day in a pool (0: no cap),
the day being the UTC day of the injected clock; when the anchor cannot make a table under the
cap the next anchor is tried. Entrants with fewer than ``min_matches`` results are rated and
paired like the others but not listed on the leaderboard.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from server.ladder.state import LadderState

__all__ = ["PairingSettings", "choose_entrants"]


@dataclass(frozen=True, slots=True)
class PairingSettings:
    """How matches are made."""

    pair_cap_per_day: int = 0
    """Most matches two entrants play together in a pool per UTC day (0: no cap)."""
    min_matches: int = 10
    """Results an entrant needs in a pool before the leaderboard lists it."""
    exploration: float = 0.1
    """Chance that a match's opponents are drawn at random instead of by rating."""


def choose_entrants(
    state: LadderState,
    pool: str,
    players: int,
    eligible: Sequence[str],
    settings: PairingSettings,
    rng: random.Random,
    now: float,
) -> tuple[str, ...] | None:
    """The entrants of the next match of ``pool`` (the anchor first), or None when no table
    of ``players`` can be made from ``eligible`` under the daily cap."""
    if len(eligible) < players:
        return None
    day = int(now // 86_400)
    cap = settings.pair_cap_per_day

    def fits(name: str, chosen: list[str]) -> bool:
        return cap <= 0 or all(state.pair_count(pool, day, name, other) < cap for other in chosen)

    shuffled = list(eligible)
    rng.shuffle(shuffled)
    anchors = sorted(shuffled, key=lambda name: state.matches_of(pool, name))
    explore = rng.random() < settings.exploration
    for anchor in anchors:
        others = [name for name in shuffled if name != anchor]
        if not explore:
            mu = state.rating(pool, anchor).mu
            others.sort(key=lambda name: abs(state.rating(pool, name).mu - mu))
        chosen = [anchor]
        for name in others:
            if len(chosen) == players:
                break
            if fits(name, chosen):
                chosen.append(name)
        if len(chosen) == players:
            return tuple(chosen)
    return None
