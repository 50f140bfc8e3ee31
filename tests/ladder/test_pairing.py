"""The pairing rule: rating matches seat near ratings together, exploration matches the
least-shared pair, at a bounded share, so every pair of a pool keeps being sampled."""

from __future__ import annotations

import random
from itertools import combinations, pairwise

from server.ladder.events import MatchCancelled, MatchResult, MatchScheduled
from server.ladder.pairing import MAX_EXPLORATION, PairingSettings, choose_entrants
from server.ladder.ratings import Rating, update
from server.ladder.state import DAY, LadderState

NOW = 20_000 * DAY + 3600.0
POOL = "gin-2"
NAMES = ("a", "b", "c", "d", "e")


class FixedDraw(random.Random):
    """A random source whose ``random()`` is always ``draw`` (the shuffles stay random)."""

    def __init__(self, draw: float) -> None:
        super().__init__(0)
        self.draw = draw

    def random(self) -> float:
        return self.draw


EXPLORE = FixedDraw(0.0)
"""Every match an exploration match (for any exploration above 0)."""


def _play(
    state: LadderState, entrants: tuple[str, ...], ranks: tuple[int, ...], at: float = NOW
) -> None:
    """Schedule and record (at ``at``) a match of ``entrants`` with ``ranks``."""
    match_id = f"m{len(state.scheduled) + 1}"
    state.apply(MatchScheduled(match_id, POOL, entrants, f"s:{match_id}", at), state.seq + 1)
    before = [state.rating(POOL, name) for name in entrants]
    after: tuple[Rating, ...] = update(before, ranks)
    count = len(entrants)
    result = MatchResult(
        match_id,
        POOL,
        entrants,
        2,
        tuple(1.0 if rank == 1 else 0.0 for rank in ranks),
        tuple(0.0 for _ in entrants),
        ranks,
        tuple(rating.mu for rating in after),
        tuple(rating.sigma for rating in after),
        0.0,
        at,
    )
    assert count == len(ranks)
    state.apply(result, state.seq + 1)


def _ranked(entrants: tuple[str, ...]) -> tuple[int, ...]:
    """Ranks by strength: later in ``NAMES`` is stronger."""
    order = sorted(entrants, key=NAMES.index, reverse=True)
    return tuple(order.index(name) + 1 for name in entrants)


def _spread_state() -> LadderState:
    """A pool whose entrants have played their neighbours in strength many times, so their
    ratings are far apart, and ``a`` has never met ``e``."""
    state = LadderState()
    for _ in range(12):
        for first, second in pairwise(NAMES):
            _play(state, (first, second), _ranked((first, second)))
    for first, second in combinations(NAMES, 2):
        if {first, second} != {"a", "e"} and state.shared_count(POOL, first, second) == 0:
            _play(state, (first, second), _ranked((first, second)))
    return state


def test_an_exploration_match_seats_the_pair_that_shared_the_fewest_matches() -> None:
    state = _spread_state()
    assert state.shared_count(POOL, "a", "e") == 0
    assert min(state.shared_count(POOL, *pair) for pair in combinations("bcde", 2)) >= 1
    chosen = choose_entrants(state, POOL, 2, NAMES, PairingSettings(), EXPLORE, NOW)
    assert chosen is not None
    assert set(chosen) == {"a", "e"}


def test_a_rating_match_seats_the_anchor_with_its_nearest_rating() -> None:
    state = _spread_state()
    # No exploration: the anchor is an entrant with the fewest results, its opponent the
    # entrant nearest to it in mu, never the far end of the pool.
    never = FixedDraw(0.99)
    for _ in range(20):
        chosen = choose_entrants(state, POOL, 2, NAMES, PairingSettings(), never, NOW)
        assert chosen is not None
        anchor, opponent = chosen
        fewest = min(state.matches_of(POOL, name) for name in NAMES)
        assert state.matches_of(POOL, anchor) == fewest
        mu = state.rating(POOL, anchor).mu
        distances = [abs(state.rating(POOL, n).mu - mu) for n in NAMES if n != anchor]
        assert abs(state.rating(POOL, opponent).mu - mu) == min(distances)
        _play(state, chosen, _ranked(chosen))


def test_the_exploration_share_is_bounded() -> None:
    state = _spread_state()
    # A draw of 0.6 explores under no setting: the share is capped at MAX_EXPLORATION.
    assert MAX_EXPLORATION == 0.5
    chosen = choose_entrants(
        state, POOL, 2, NAMES, PairingSettings(exploration=1.0), FixedDraw(0.6), NOW
    )
    assert chosen is not None
    assert set(chosen) != {"a", "e"}
    # 0.4 explores at 0.5, not at the default 0.25.
    explored = choose_entrants(
        state, POOL, 2, NAMES, PairingSettings(exploration=0.5), FixedDraw(0.4), NOW
    )
    assert explored is not None
    assert set(explored) == {"a", "e"}
    default = choose_entrants(state, POOL, 2, NAMES, PairingSettings(), FixedDraw(0.4), NOW)
    assert default is not None
    assert set(default) != {"a", "e"}


def test_every_pair_keeps_being_sampled_while_rating_matches_dominate() -> None:
    """Over a long run with far-apart strengths, each exploration match raises a least-shared
    pair, so after E of them every one of the P pairs has shared at least E // P matches;
    without exploration the far pairs hardly meet."""
    settings = PairingSettings()
    pairs = list(combinations(NAMES, 2))

    def run(exploration: float, matches: int) -> LadderState:
        state = LadderState()
        rng = random.Random(7)
        chosen_settings = PairingSettings(exploration=exploration)
        for _ in range(matches):
            chosen = choose_entrants(state, POOL, 2, NAMES, chosen_settings, rng, NOW)
            assert chosen is not None
            _play(state, chosen, _ranked(chosen))
        return state

    explored = run(settings.exploration, 400)
    counts = [explored.shared_count(POOL, *pair) for pair in pairs]
    # Binomial(400, 0.25) exceeds 80 but for a chance below 1e-4: 80 // 10 pairs.
    assert min(counts) >= 8
    neighbours = {frozenset(pair) for pair in pairwise(NAMES)}
    near = sum(count for pair, count in zip(pairs, counts) if frozenset(pair) in neighbours)
    assert near > sum(counts) / 2  # the 4 neighbour pairs of 10 still play most matches

    rated_only = run(0.0, 400)
    # Only the first matches, while every rating is the prior, may seat far-apart entrants.
    assert min(rated_only.shared_count(POOL, *pair) for pair in pairs) <= 1


def test_more_players_fill_up_with_the_least_shared() -> None:
    state = LadderState()
    for _ in range(5):
        _play(state, ("a", "b", "c"), (1, 2, 3))
        _play(state, ("a", "b", "d"), (1, 2, 3))
    _play(state, ("c", "d", "e"), (1, 2, 3))
    chosen = choose_entrants(state, POOL, 3, NAMES, PairingSettings(), EXPLORE, NOW)
    # a-e and b-e share nothing; the third seat is whoever shared least with the two.
    assert chosen is not None
    assert "e" in chosen
    assert len(set(chosen)) == 3
    first_two = set(chosen[:2])
    assert first_two in ({"a", "e"}, {"b", "e"})
    assert set(chosen) != {"a", "b", "e"}  # a and b shared 10 matches


def test_exploration_respects_the_daily_cap_and_cancelled_matches_do_not_count() -> None:
    state = LadderState()
    for first, second in combinations(NAMES, 2):
        if {first, second} != {"a", "e"}:
            for _ in range(3):
                _play(state, (first, second), _ranked((first, second)), NOW - DAY)
    _play(state, ("a", "e"), (2, 1))
    # a-e shared the fewest matches (1, the others 3), but today's cap of 1 is reached.
    capped = PairingSettings(pair_cap_per_day=1)
    chosen = choose_entrants(state, POOL, 2, NAMES, capped, EXPLORE, NOW)
    assert chosen is not None
    assert set(chosen) != {"a", "e"}
    later = choose_entrants(state, POOL, 2, NAMES, capped, EXPLORE, NOW + DAY)
    assert later is not None
    assert set(later) == {"a", "e"}
    before = state.shared_count(POOL, "b", "c")
    state.apply(MatchScheduled("x1", POOL, ("b", "c"), "s:x1", NOW), state.seq + 1)
    assert state.shared_count(POOL, "b", "c") == before + 1
    state.apply(MatchCancelled("x1", "left", NOW), state.seq + 1)
    assert state.shared_count(POOL, "b", "c") == before
