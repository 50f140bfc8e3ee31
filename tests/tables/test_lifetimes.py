"""Table lifetimes on a fake clock: idle waiting tables expire, finished ones leave memory.

The rules (docs/operations.md, "Quotas and table lifetimes"): a table still waiting for
players with no command, join or resync for ``waiting_ttl`` seconds gets ``table_closed`` with
the reason "expired: no activity while waiting for players", and later commands there are
refused with ``table/closed``; a finished or closed table idle for ``finished_ttl`` seconds
leaves memory (no actor, no task) and is loaded back from the store on demand.
"""

from __future__ import annotations

import asyncio
import random

from server.engine import is_over, legal_actions, to_move
from server.tables.actor import TableActor
from server.tables.records import TableClosed, decode_record
from server.tables.service import TableService
from server.tables.store import EventStore
from server.tables.table import CreateTable, Rematch, Sit, StartGame
from server.tables.timers import ManualClock
from tests.tables.test_actor import RecordingOutbox

WAIT = 10.0
WAITING_TTL = 1800.0
FINISHED_TTL = 300.0
REASON = "expired: no activity while waiting for players"


def _service(store: EventStore, clock: ManualClock, seed: int = 1) -> TableService:
    return TableService(
        store,
        RecordingOutbox(store),
        clock=clock,
        rng=random.Random(seed),
        waiting_ttl=WAITING_TTL,
        finished_ttl=FINISHED_TTL,
    )


def _table_tasks(table_id: str) -> list[asyncio.Task[object]]:
    """The running tasks of ``table_id``'s actor (named ``table-ID`` and ``table-ID-timer``)."""
    return [
        task
        for task in asyncio.all_tasks()
        if task.get_name() in (f"table-{table_id}", f"table-{table_id}-timer") and not task.done()
    ]


async def _waiting_table(service: TableService) -> str:
    table_id, reply = await service.create("host", CreateTable(variant="basic", seats=2), "c")
    assert reply.ok
    assert (await service.submit(table_id, "host", Sit(), "sit")).ok
    return table_id


async def _finished_table(service: TableService) -> str:
    table_id, reply = await service.create(
        "p0", CreateTable(variant="basic", seats=2, options={"deals": 1}), "c"
    )
    assert reply.ok
    for player in ("p0", "p1"):
        assert (await service.submit(table_id, player, Sit(), f"sit-{player}")).ok
    assert (await service.submit(table_id, "p0", StartGame(), "start")).ok
    actor = service.actors[table_id]
    rng = random.Random(5)
    moves = 0
    while actor.table.game is not None and not is_over(actor.table.game):
        game = actor.table.game
        seat = to_move(game)
        command = rng.choice(legal_actions(game, seat))
        reply = await service.submit(table_id, actor.table.seats[seat], command, f"m{moves}")
        assert reply.ok, reply
        moves += 1
    assert actor.table.status == "finished"
    return table_id


async def _last_event(store: EventStore, table_id: str) -> object:
    rows = await store.read(table_id)
    return decode_record(rows[-1].payload).event


async def test_an_idle_waiting_table_is_closed_after_the_waiting_ttl(store: EventStore) -> None:
    """Nobody comes for 30 minutes: ``table_closed`` is appended (and published) with the
    documented reason; later commands get ``table/closed``; reads still work."""
    clock = ManualClock()
    service = _service(store, clock)
    created_at = clock.now()
    table_id = await _waiting_table(service)
    actor = service.actors[table_id]
    seq = actor.table.seq
    async with asyncio.timeout(WAIT):
        await clock.wait_for_sleeper(until=created_at + WAITING_TTL)
    clock.advance(WAITING_TTL)
    async with asyncio.timeout(WAIT):
        await actor.wait_for_seq(seq + 1)
    assert TableClosed(reason=REASON) == await _last_event(store, table_id)
    published = actor.outbox.published  # type: ignore[attr-defined]
    assert TableClosed(reason=REASON) == published[-1][1].event
    assert "closed" == actor.table.status
    sit = await service.submit(table_id, "guest", Sit(), "late")
    assert (False, "table/closed") == (sit.ok, sit.code)
    start = await service.submit(table_id, "host", StartGame(), "start")
    assert (False, "table/closed") == (start.ok, start.code)
    assert seq + 1 == actor.table.seq  # nothing more was appended
    await service.stop()


async def test_activity_pushes_the_expiry_of_a_waiting_table_back(store: EventStore) -> None:
    """A command (even a refused one) or a join restarts the 30 minutes (the timer, asleep
    until the earlier expiry, finds the later one when it wakes)."""
    clock = ManualClock()
    service = _service(store, clock)
    start = clock.now()
    table_id = await _waiting_table(service)
    actor = service.actors[table_id]
    seq = actor.table.seq
    clock.advance(1000)
    refused = await service.submit(table_id, "host", StartGame(), "too-early")
    assert (False, "table/not_full") == (refused.ok, refused.code)
    clock.advance(WAITING_TTL - 1000)  # 30 minutes after the creation: not yet
    async with asyncio.timeout(WAIT):
        await clock.wait_for_sleeper(until=start + 1000 + WAITING_TTL)
    assert seq == actor.table.seq
    actor.touch()  # a join at start + 1800
    clock.advance(1000)  # 30 minutes after the refused command: not yet
    async with asyncio.timeout(WAIT):
        await clock.wait_for_sleeper(until=start + 1800 + WAITING_TTL)
    assert seq == actor.table.seq
    clock.advance(WAITING_TTL - 1000)
    async with asyncio.timeout(WAIT):
        await actor.wait_for_seq(seq + 1)
    assert "closed" == actor.table.status
    await service.stop()


async def test_closing_survives_a_restart(store: EventStore) -> None:
    """A waiting table whose time ran out while the server was down is closed as soon as it
    is loaded; once closed it is not resumed by the next start."""
    clock = ManualClock()
    service = _service(store, clock)
    table_id = await _waiting_table(service)
    await service.stop()
    clock.advance(WAITING_TTL + 60)
    restarted = _service(store, clock, seed=2)
    assert [table_id] == await restarted.start()
    actor = restarted.actors[table_id]
    async with asyncio.timeout(WAIT):
        await actor.wait_for_seq(3)
    assert TableClosed(reason=REASON) == await _last_event(store, table_id)
    await restarted.stop()
    again = _service(store, clock, seed=3)
    assert [] == await again.start()
    loaded = await again.actor(table_id)
    assert loaded is not None
    assert ("closed", 3) == (loaded.table.status, loaded.table.seq)
    await again.stop()


async def test_a_finished_table_leaves_memory_and_comes_back_on_demand(
    store: EventStore,
) -> None:
    """Five idle minutes after the game ended the service holds no actor for the table and
    its tasks are done; a later read loads the final state back, and a rematch still works."""
    clock = ManualClock()
    service = _service(store, clock)
    table_id = await _finished_table(service)
    final = service.actors[table_id].table
    ended_at = clock.now()
    async with asyncio.timeout(WAIT):
        await clock.wait_for_sleeper(until=ended_at + FINISHED_TTL)
    assert 2 == len(_table_tasks(table_id))
    clock.advance(FINISHED_TTL)
    async with asyncio.timeout(WAIT):
        await service.wait_unloaded(table_id)
    assert table_id not in service.actors
    assert [] == _table_tasks(table_id)
    loaded = await service.actor(table_id)
    assert loaded is not None
    assert final == loaded.table
    rematch = await service.submit(table_id, "p0", Rematch(), "again")
    assert rematch.ok
    assert "playing" == service.actors[table_id].table.status
    await service.stop()


async def test_activity_keeps_a_finished_table_in_memory(store: EventStore) -> None:
    """A resync (``touch``) four minutes after the end keeps the table five more minutes."""
    clock = ManualClock()
    service = _service(store, clock)
    table_id = await _finished_table(service)
    actor: TableActor = service.actors[table_id]
    ended_at = clock.now()
    clock.advance(240)
    actor.touch()
    async with asyncio.timeout(WAIT):
        await clock.wait_for_sleeper(until=ended_at + 240 + FINISHED_TTL)
    clock.advance(FINISHED_TTL - 240)
    async with asyncio.timeout(WAIT):
        await clock.wait_for_sleeper(until=ended_at + 240 + FINISHED_TTL)
    assert service.actors.get(table_id) is actor
    clock.advance(240)
    async with asyncio.timeout(WAIT):
        await service.wait_unloaded(table_id)
    assert [] == _table_tasks(table_id)
    await service.stop()
