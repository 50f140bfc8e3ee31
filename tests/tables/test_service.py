"""The table service: routing by table id, recovery of every unfinished table, and where its
deals come from."""

from __future__ import annotations

import asyncio
import random

from server.engine import DrawStock, is_over, legal_actions, to_move
from server.tables.actor import TableActor, load_table
from server.tables.replay import read_rows, verify_deals
from server.tables.service import TableService
from server.tables.store import EventStore
from server.tables.table import CreateTable, Sit, StartGame, empty_table, fold
from server.tables.timers import ManualClock
from tests.tables.test_actor import RecordingOutbox, _play_to_the_end

WAIT = 10.0


async def _open(service: TableService, variant: str, move_seconds: float = 0.0) -> str:
    table_id, reply = await service.create(
        "p0", CreateTable(variant=variant, seats=2, move_seconds=move_seconds)
    )
    assert reply.ok
    for player in ("p0", "p1"):
        assert (await service.submit(table_id, player, Sit())).ok
    assert (await service.submit(table_id, "p0", StartGame())).ok
    return table_id


async def test_a_command_for_an_unknown_table_is_refused(store: EventStore) -> None:
    """No table, no actor: the reply says ``table/unknown`` and the store stays empty."""
    service = TableService(store, RecordingOutbox(store), rng=random.Random(1))
    reply = await service.submit("nope", "p0", DrawStock(), "c1")
    assert ("table/unknown", False) == (reply.code, reply.ok)
    assert [] == await store.tables()


async def test_a_restarted_service_resumes_every_unfinished_table_with_its_timers(
    store: EventStore,
) -> None:
    """Tables come back after a restart; an expired move timer plays at once."""
    clock = ManualClock()
    service = TableService(store, RecordingOutbox(store), clock=clock, rng=random.Random(2))
    timed = await _open(service, "basic", move_seconds=30.0)
    untimed = await _open(service, "gin")
    seqs = {table_id: service.actors[table_id].table.seq for table_id in (timed, untimed)}
    await service.stop()
    clock.advance(60)
    restarted = TableService(store, RecordingOutbox(store), clock=clock, rng=random.Random(3))
    resumed = await restarted.start()
    assert sorted([timed, untimed]) == sorted(resumed)
    await asyncio.wait_for(restarted.actors[timed].wait_for_seq(seqs[timed] + 3), WAIT)
    assert seqs[untimed] == restarted.actors[untimed].table.seq
    game = restarted.actors[untimed].table.game
    assert game is not None
    seat = to_move(game)
    player = restarted.actors[untimed].table.seats[seat]
    reply = await restarted.submit(untimed, player, legal_actions(game, seat)[0], "after")
    assert (True, seqs[untimed] + 1) == (reply.ok, reply.first_seq)
    await restarted.stop()


async def _first_deal(service: TableService, table_id: str) -> tuple[int, tuple[int, ...]]:
    """Open a 2-seat basic game at ``table_id``; return its first dealer and deck order."""
    _, reply = await service.create("p0", CreateTable(variant="basic", seats=2), "c", table_id)
    assert reply.ok
    for player in ("p0", "p1"):
        assert (await service.submit(table_id, player, Sit(), f"sit-{player}")).ok
    assert (await service.submit(table_id, "p0", StartGame(), "start")).ok
    table = service.actors[table_id].table
    assert table.game is not None
    return table.game.dealer, table.deck


async def test_by_default_every_table_deals_from_the_os_csprng(store: EventStore) -> None:
    """A service built without a generator shuffles with the operating system's CSPRNG (no
    generator state that revealed decks could give away), and two such services deal
    differently."""
    decks = []
    for table_id in ("a", "b"):
        service = TableService(store, RecordingOutbox(store))
        decks.append(await _first_deal(service, table_id))
        assert isinstance(service.rng, random.SystemRandom)
        assert isinstance(service.actors[table_id].rng, random.SystemRandom)
        await service.stop()
    assert decks[0][1] != decks[1][1]
    assert sorted(decks[0][1]) == sorted(decks[1][1])


def test_an_actor_built_without_a_generator_deals_from_the_os_csprng(store: EventStore) -> None:
    """The same default for an actor made directly (tools and tests)."""
    actor = TableActor(empty_table("t"), store, RecordingOutbox(store))
    assert isinstance(actor.rng, random.SystemRandom)


async def test_a_seeded_generator_still_deals_the_same_each_time(store: EventStore) -> None:
    """Simulations and tests pass a seeded generator: the same seed deals the same decks."""
    deals = []
    for table_id, seed in (("a", 5), ("b", 5), ("c", 6)):
        service = TableService(store, RecordingOutbox(store), rng=random.Random(seed))
        deals.append(await _first_deal(service, table_id))
        assert not isinstance(service.actors[table_id].rng, random.SystemRandom)
        await service.stop()
    assert deals[0] == deals[1]
    assert deals[0][1] != deals[2][1]


async def test_a_game_dealt_from_the_csprng_replays_exactly_from_its_log(
    store: EventStore,
) -> None:
    """The deck is an event: folding the log again gives the live table, every deal checks."""
    service = TableService(store, RecordingOutbox(store))
    await _first_deal(service, "r")
    actor = service.actors["r"]
    await _play_to_the_end(actor, random.Random(9))
    game = actor.table.game
    assert game is not None
    assert is_over(game)
    await service.stop()
    rows = await read_rows(store, "r")
    replayed = empty_table("r")
    for row in rows:
        replayed = fold(replayed, row.record, row.seq)
    assert actor.table == replayed
    checks = verify_deals(rows, game=1)
    assert checks
    assert {"ok"} == {check.status for check in checks}


async def _move(service: TableService, table_id: str, command_id: str) -> None:
    """Make the first legal move of whoever is to move at ``table_id``."""
    actor = await service.actor(table_id)
    assert actor is not None
    assert actor.table.game is not None
    game = actor.table.game
    seat = to_move(game)
    command = legal_actions(game, seat)[0]
    reply = await service.submit(table_id, actor.table.seats[seat], command, command_id)
    assert reply.ok


async def test_tables_read_together_are_built_as_their_logs_say(store: EventStore) -> None:
    """``read`` then ``adopt_read`` (a worker taking tables over) give each table the state
    ``load_table`` rebuilds from its log; a table with no events is left out; a table already
    served keeps its actor."""
    first = TableService(store, RecordingOutbox(store), rng=random.Random(4))
    playing = await _open(first, "basic")
    for step in range(3):
        await _move(first, playing, f"m{step}")
    waiting, reply = await first.create("p0", CreateTable(variant="gin", seats=2))
    assert reply.ok
    await first.stop()
    second = TableService(store, RecordingOutbox(store), rng=random.Random(5))
    wanted = [playing, waiting, "missing"]
    read = await second.read(wanted)
    try:
        actors = second.adopt_read(read, wanted)
        assert [playing, waiting] == [actor.table.table_id for actor in actors]
        for actor in actors:
            assert await load_table(store, actor.table.table_id) == actor.table
        assert actors == second.adopt_read(read, wanted)  # the same actors, not new ones
    finally:
        second.release(read)
    await _move(second, playing, "after")  # the adopted actor plays on
    await second.stop()


async def test_a_table_whose_actor_came_and_went_during_a_read_is_not_built_from_it(
    store: EventStore,
) -> None:
    """A table loaded by a command while it was being read, which then moved on and left
    memory, is not rebuilt from the older read: its next command loads it from the log."""
    first = TableService(store, RecordingOutbox(store), rng=random.Random(6))
    table_id = await _open(first, "basic")
    await first.stop()
    second = TableService(store, RecordingOutbox(store), rng=random.Random(7))
    read = await second.read([table_id])
    try:
        await _move(second, table_id, "meanwhile")  # loads the table, appends
        await second.drop(table_id)
        assert [] == second.adopt_read(read, [table_id])
        assert table_id not in second.actors
    finally:
        second.release(read)
    actor = await second.actor(table_id)
    assert actor is not None
    assert await load_table(store, table_id) == actor.table
    await second.stop()
