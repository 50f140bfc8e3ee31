"""A server stand-in that plays many tables at once and is killed by test_crash.

Usage: ``python -m tests.tables.crash_worker STORE_URL SEED RUN TABLES MODE``.

On start the worker opens the store and recovers every table in it with ``TableActor.load``.
In ``play`` mode it keeps TABLES tables going with random legal moves for ever: recovered
tables that are waiting or playing are continued, a finished table is either given a rematch
(a table plays one or two games, fixed by its id) or retired, and new tables (ids starting
``rRUN-``, variants drawn at random) fill the free places. In ``finish`` mode it creates
nothing and plays every unfinished table to the end of its game, then prints ``done`` and
exits.

It prints ``ready TABLES_RECOVERED`` once recovery is over, then one line per acknowledged
command, flushed at once: ``ack TABLE_ID COMMAND_ID FIRST_SEQ SEQ``. Any refused command,
or a retried command id that is not answered as a duplicate, stops it with a traceback.
"""

from __future__ import annotations

import asyncio
import random
import sys
import zlib
from dataclasses import dataclass

from server.engine import Command, is_over, legal_actions, to_move
from server.tables.actor import Reply, TableActor
from server.tables.records import Record
from server.tables.store import EventStore, open_store
from server.tables.table import (
    CreateTable,
    Rematch,
    Sit,
    Stand,
    StartGame,
    TableCommand,
    TableState,
    empty_table,
)

SNAPSHOT_EVERY = 9
"""Small, so that most tables have a snapshot with a tail after it."""

GAMES = (
    ("basic", {"deals": 1}, (2, 3)),
    ("gin", {"deals": 1}, (2,)),
    ("rummy500", {"target": 100}, (2, 3)),
    ("ramino", {"target": 51}, (2, 3)),
    ("knock", {"deals": 2}, (2, 3)),
)
"""Variant, options and the numbers of players a new table may have."""


def games_for(table_id: str) -> int:
    """How many games table ``table_id`` plays before it is retired (1 or 2)."""
    return 1 + zlib.crc32(table_id.encode()) % 2


def players_of(table: TableState) -> list[str]:
    """The names of the players at ``table``: ``p0`` (the host), ``p1``, ..."""
    assert table.created is not None
    return [f"p{seat}" for seat in range(table.created.seats)]


def wants_rematch(table: TableState) -> bool:
    """Whether the finished ``table`` plays another game rather than being retired."""
    return table.game_number < games_for(table.table_id)


class NullOutbox:
    """Publishes nothing: no one is watching."""

    async def publish(
        self, before: TableState, seq: int, record: Record, after: TableState
    ) -> None:
        """Drop the record."""

    async def flush(self, table: TableState) -> None:
        """Nothing to flush."""


@dataclass
class Worker:
    """The tables of one run of the worker and how to name their commands."""

    store: EventStore
    seed: int
    run: int
    rng: random.Random
    commands: int = 0
    tables: int = 0

    def actor_rng(self, table_id: str) -> random.Random:
        """The shuffling randomness of one table in this run."""
        return random.Random(f"{self.seed}/{self.run}/{table_id}")

    async def submit(self, actor: TableActor, sender: str, command: Command | TableCommand) -> None:
        """Send ``command`` with a fresh id and the table's seq; print its acknowledgement."""
        self.commands += 1
        command_id = f"r{self.run}c{self.commands}"
        table = actor.table
        reply = await actor.submit(sender, command, command_id, table.seq)
        if not reply.ok:
            raise AssertionError(f"{table.table_id}: {command!r} from {sender} refused: {reply}")
        print(f"ack {table.table_id} {command_id} {reply.first_seq} {reply.seq}", flush=True)
        if self.rng.random() < 0.03:
            await self.retry(actor, sender, command, reply)

    async def retry(
        self, actor: TableActor, sender: str, command: Command | TableCommand, first: Reply
    ) -> None:
        """Send an acknowledged command again: it must be a duplicate and change nothing."""
        seq = actor.table.seq
        again = await actor.submit(sender, command, first.command_id, first.first_seq - 1)
        answer = (again.ok, again.duplicate, again.first_seq, actor.table.seq)
        if answer != (True, True, first.first_seq, seq):
            raise AssertionError(f"{actor.table.table_id}: retry answered {again}, first {first}")

    async def new_actor(self) -> TableActor:
        """A started actor for a new, empty table with a fresh id."""
        self.tables += 1
        table_id = f"r{self.run}-{self.tables}"
        actor = TableActor(
            empty_table(table_id),
            self.store,
            NullOutbox(),
            rng=self.actor_rng(table_id),
            snapshot_every=SNAPSHOT_EVERY,
        )
        actor.start()
        return actor

    async def step(self, actor: TableActor) -> bool:
        """Send the table's next command; False when it has nothing more to do in this run."""
        table = actor.table
        if table.created is None:
            variant, options, counts = self.rng.choice(GAMES)
            create = CreateTable(variant, dict(options), seats=self.rng.choice(counts))
            await self.submit(actor, "p0", create)
            return True
        players = players_of(table)
        if table.game is None or is_over(table.game):
            missing = [player for player in players if player not in table.seats]
            if missing:
                await self.submit(actor, missing[0], Sit())
            elif table.game is None and self.rng.random() < 0.1:
                await self.submit(actor, self.rng.choice(players), Stand())
            elif table.game is None:
                await self.submit(actor, "p0", StartGame())
            elif wants_rematch(table):
                await self.submit(actor, self.rng.choice(players), Rematch())
            else:
                return False
            return True
        seat = to_move(table.game)
        move = self.rng.choice(legal_actions(table.game, seat))
        await self.submit(actor, table.seats[seat], move)
        return True

    async def drive(self, actor: TableActor | None, keep_going: bool) -> None:
        """Play ``actor``'s table (or a new one) until it is done; then a new one if asked."""
        while True:
            if actor is None:
                actor = await self.new_actor()
            while await self.step(actor):
                if not keep_going and actor.table.game is not None and is_over(actor.table.game):
                    break
            await actor.stop()
            if not keep_going:
                return
            actor = None


async def run(url: str, seed: int, run_number: int, tables: int, mode: str) -> None:
    """Recover every table in the store, then play (``play``) or finish (``finish``) them."""
    store = await open_store(url)
    worker = Worker(store, seed, run_number, random.Random(f"{seed}/{run_number}"))
    try:
        active: list[TableActor] = []
        for summary in await store.tables():
            actor = await TableActor.load(
                store,
                summary.table_id,
                NullOutbox(),
                rng=worker.actor_rng(summary.table_id),
                snapshot_every=SNAPSHOT_EVERY,
            )
            table = actor.table
            finished = table.game is not None and is_over(table.game)
            if finished and (mode == "finish" or not wants_rematch(table)):
                continue
            actor.start()
            active.append(actor)
        print(f"ready {len(active)}", flush=True)
        if mode == "finish":
            await asyncio.gather(*(worker.drive(actor, keep_going=False) for actor in active))
            print("done", flush=True)
            return
        drivers: list[TableActor | None] = [*active, *[None] * max(0, tables - len(active))]
        await asyncio.gather(*(worker.drive(actor, keep_going=True) for actor in drivers))
    finally:
        await store.close()


def main(argv: list[str]) -> None:
    """Run the worker from the command line."""
    url, seed, run_number, tables, mode = argv
    if mode not in ("play", "finish"):
        raise SystemExit(f"unknown mode {mode!r}: play or finish")
    asyncio.run(run(url, int(seed), int(run_number), int(tables), mode))


if __name__ == "__main__":
    main(sys.argv[1:])
