"""The ladder over a real store: results, ratings as a fold of the log, the refit, pairing
under the daily cap (with a fake clock), the listing threshold, failures and resumption."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

import pytest

from server.ladder.entrants import Entrant
from server.ladder.errors import LadderError
from server.ladder.events import MatchCancelled, MatchResult, MatchScheduled, decode_event
from server.ladder.matches import MatchOutcome, rank_totals
from server.ladder.pairing import PairingSettings
from server.ladder.pools import Pool, parse_pools
from server.ladder.ratings import refit
from server.ladder.runner import InlineRunner
from server.ladder.service import Ladder, RunSettings, max_refit_difference
from server.ladder.state import DAY
from server.tables.store import EventStore, open_store

STRENGTH = {"random@1": 0, "greedy@1": 1, "simple@1": 2, "heuristic@1": 3, "mc@4": 4}


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = 20_000 * DAY + 3600.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class ScriptedRunner:
    """Stronger entrants (``STRENGTH``) usually win; the seed decides upsets."""

    def __init__(self, fail: bool = False) -> None:
        self.played: list[tuple[str, tuple[str, ...], str]] = []
        self.fail = fail

    async def play(self, pool: Pool, entrants: Sequence[Entrant], seed: str) -> MatchOutcome:
        names = tuple(entrant.name for entrant in entrants)
        self.played.append((pool.name, names, seed))
        if self.fail:
            raise RuntimeError("the engine broke")
        rng = random.Random(seed)
        scores = [STRENGTH[name] + rng.random() * 2.5 for name in names]
        wins = tuple(Fraction(round(score)) for score in scores)
        points = tuple(Fraction(int(score * 10)) for score in scores)
        return MatchOutcome((), wins, points, rank_totals(wins, points, False), 0.0)

    async def close(self) -> None:
        """Nothing held."""


async def _results(store: EventStore, name: str = "main") -> list[MatchResult]:
    rows = await store.read(f"ladder:{name}")
    return [
        event
        for event in map(decode_event, (r.payload for r in rows))
        if isinstance(event, MatchResult)
    ]


async def test_ratings_fold_equals_a_batch_refit(store: EventStore) -> None:
    """After many results in three pools, every rating folded from the log (each written
    incrementally as results came) equals the refit from the ranks alone, and a fresh fold of
    the stored log gives the same standings."""
    clock = FakeClock()
    ladder = await Ladder.open(store, "refit", clock)
    settings = RunSettings(
        parse_pools("gin-2,rummy500-3,ramino-4"), matches=60, seed="r", refit_every=20
    )
    runner = ScriptedRunner()
    assert 60 == await ladder.run(settings, runner)
    fitted = refit(await _results(store, "refit"))
    again = await Ladder.open(store, "refit", clock)
    for pool, standings in again.state.standings.items():
        for name, standing in standings.items():
            assert fitted[(pool, name)] == standing.rating
            assert ladder.state.standings[pool][name].rating == standing.rating
    assert 0.0 == max_refit_difference(again.state)
    assert [20, 40, 60] == [refit.results for refit in again.state.refits]
    assert all(0.0 == refit.max_difference for refit in again.state.refits)


async def test_stronger_entrants_rate_higher(store: EventStore) -> None:
    """A sanity check of the whole chain: with the scripted strengths, the leaderboard of a
    2-player pool comes out in strength order."""
    ladder = await Ladder.open(store, "order", FakeClock())
    settings = RunSettings(
        parse_pools("knock-2"), matches=120, seed="o", pairing=PairingSettings(min_matches=5)
    )
    await ladder.run(settings, ScriptedRunner())
    board = [row.name for row in ladder.state.leaderboard("knock-2", 5)]
    assert ["mc@4", "heuristic@1", "simple@1", "greedy@1", "random@1"] == board


async def test_pairing_respects_the_daily_cap_and_resets_the_next_day(
    sqlite_url: str,
) -> None:
    """With a cap of 2 matches per pair a day, 5 entrants in a 2-player pool (10 pairs) make
    20 matches that day and then no more; the next UTC day 20 more."""
    clock = FakeClock()
    store = await open_store(sqlite_url)
    try:
        ladder = await Ladder.open(store, "cap", clock)
        settings = RunSettings(
            parse_pools("gin-2"),
            matches=100,
            seed="c",
            pairing=PairingSettings(pair_cap_per_day=2, exploration=0.5),
        )
        assert 20 == await ladder.run(settings, ScriptedRunner())
        pairs = Counter(frozenset(m.entrants) for m in ladder.state.scheduled.values())
        assert 10 == len(pairs)
        assert {2} == set(pairs.values())
        clock.now += DAY
        assert 20 == await ladder.run(settings, ScriptedRunner())
        assert 40 == len(ladder.state.results)
    finally:
        await store.close()


async def test_newcomers_play_first_and_are_listed_after_min_matches(sqlite_url: str) -> None:
    """The entrant with the fewest results anchors the next match, so an entrant added later
    catches up; the leaderboard lists only entrants with ``min_matches`` results."""
    store = await open_store(sqlite_url)
    try:
        ladder = await Ladder.open(store, "new", FakeClock())
        settings = RunSettings(
            parse_pools("knock-2"), matches=30, seed="n", pairing=PairingSettings(min_matches=8)
        )
        await ladder.configure(settings)
        await ladder.remove_entrant("mc@4")
        await ladder.run(settings, ScriptedRunner())
        assert 0 == ladder.state.matches_of("knock-2", "mc@4")
        await ladder.add_entrant("mc@4")
        runner = ScriptedRunner()
        await ladder.run(RunSettings(settings.pools, 37, 1, "n", settings.pairing), runner)
        assert all("mc@4" in names for _, names, _ in runner.played)
        listed = {row.name for row in ladder.state.leaderboard("knock-2", 8)}
        assert "mc@4" not in listed
        assert {"random@1", "greedy@1", "simple@1", "heuristic@1"} == listed
        assert 7 == ladder.state.matches_of("knock-2", "mc@4")
    finally:
        await store.close()


async def test_pending_matches_are_played_again_from_their_seed(sqlite_url: str) -> None:
    """A match scheduled but not recorded (the ladder stopped in between) is played at the
    next start with its id, entrants and seed, once."""
    store = await open_store(sqlite_url)
    try:
        ladder = await Ladder.open(store, "resume", FakeClock())
        settings = RunSettings(parse_pools("knock-2"), matches=3, seed="p")
        await ladder.configure(settings)
        match = await ladder.schedule(settings.pools[0], settings, random.Random(1))
        assert match is not None
        runner = ScriptedRunner()
        again = await Ladder.open(store, "resume", FakeClock())
        await again.run(settings, runner)
        assert ("knock-2", match.entrants, match.seed) == runner.played[0]
        results = await _results(store, "resume")
        assert 3 == len(results)
        assert 3 == len({result.match_id for result in results})
        assert match.match_id in {result.match_id for result in results}
    finally:
        await store.close()


async def test_a_failing_runner_cancels_and_then_stops(sqlite_url: str) -> None:
    """A match whose runner fails is cancelled with the reason; three in a row stop the run
    with ``ladder/runner_failed`` and nothing is rated."""
    store = await open_store(sqlite_url)
    try:
        ladder = await Ladder.open(store, "fail", FakeClock())
        settings = RunSettings(parse_pools("knock-2"), matches=10, seed="f")
        with pytest.raises(LadderError) as caught:
            await ladder.run(settings, ScriptedRunner(fail=True))
        assert "ladder/runner_failed" == caught.value.code
        assert 3 == len(ladder.state.cancelled)
        assert not ladder.state.results
        assert not ladder.state.pending()
        assert all("RuntimeError" in c.reason for c in ladder.state.cancelled.values())
    finally:
        await store.close()


async def test_a_second_writer_is_refused(sqlite_url: str) -> None:
    """Two ladders over one stream: the one that appends on a stale view is refused with
    ``ladder/concurrent_writer`` instead of both scheduling the same match."""
    store = await open_store(sqlite_url)
    try:
        first = await Ladder.open(store, "two", FakeClock())
        second = await Ladder.open(store, "two", FakeClock())
        await first.add_entrant("random@1")
        with pytest.raises(LadderError) as caught:
            await second.add_entrant("greedy@1")
        assert "ladder/concurrent_writer" == caught.value.code
    finally:
        await store.close()


async def test_built_in_entrants_play_real_matches(sqlite_url: str) -> None:
    """The engine plays the matches: each result has a game per rotation (2 for 2 players, 6
    for 3), and the ladder's stream is not listed as a table."""
    store = await open_store(sqlite_url)
    try:
        ladder = await Ladder.open(store, "real", FakeClock())
        settings = RunSettings(parse_pools("knock-2,rummy500-3"), matches=4, seed="x")
        await ladder.run(settings, InlineRunner())
        games = {result.pool: result.games for result in ladder.state.order}
        assert {"knock-2": 2, "rummy500-3": 6} == games
        assert [] == await store.tables()
    finally:
        await store.close()


async def test_cancelled_match_frees_the_pair_and_a_removed_entrant_is_not_resumed(
    sqlite_url: str,
) -> None:
    """A pending match of an entrant removed meanwhile is cancelled at the next start."""
    store = await open_store(sqlite_url)
    try:
        ladder = await Ladder.open(store, "gone", FakeClock())
        settings = RunSettings(parse_pools("knock-2"), matches=2, seed="g")
        await ladder.configure(settings)
        match = await ladder.schedule(settings.pools[0], settings, random.Random(2))
        assert match is not None
        await ladder.remove_entrant(match.entrants[0])
        runner = ScriptedRunner()
        await ladder.run(settings, runner)
        assert isinstance(ladder.state.cancelled.get(match.match_id), MatchCancelled)
        assert all(match.entrants[0] not in names for _, names, _ in runner.played)
        assert isinstance(ladder.state.scheduled[match.match_id], MatchScheduled)
    finally:
        await store.close()
