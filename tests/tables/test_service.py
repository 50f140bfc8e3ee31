"""The table service: routing by table id and recovery of every unfinished table."""

from __future__ import annotations

import asyncio
import random

from server.engine import DrawStock, legal_actions, to_move
from server.tables.service import TableService
from server.tables.store import EventStore
from server.tables.table import CreateTable, Sit, StartGame
from server.tables.timers import ManualClock
from tests.tables.test_actor import RecordingOutbox

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
