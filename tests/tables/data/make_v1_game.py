"""Write ``v1_game.msgpack`` and ``v1_game.json``: a whole Gin Rummy game as version-1 records.

Run by hand, once, from the repository root (it is not a test, and the files it writes must
not change afterwards: they stand for logs written by an older server)::

    .venv/bin/python -m tests.tables.data.make_v1_game

It plays one two-deal Gin Rummy game with seeded random legal moves through ``TableActor`` on
a SQLite store in a temporary folder (a fixed clock and seeded salts, so a rerun writes the
same bytes), then dumps the table's rows as a msgpack list of ``{seq, at, command_id,
payload}`` maps, and the facts the test checks the fold against as JSON.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

import msgspec

from server.engine import is_over, legal_actions, scores, to_move
from server.tables.actor import TableActor
from server.tables.records import RECORD_VERSION, Record, decode_record
from server.tables.store import open_store
from server.tables.table import CreateTable, Sit, Stand, StartGame, TableState, empty_table

HERE = Path(__file__).resolve().parent
TABLE_ID = "v1-gin"
VARIANT = "gin"
OPTIONS: dict[str, object] = {"deals": 2}
SEED = 23


class StoredRow(msgspec.Struct, frozen=True):
    """One row of the stored log."""

    seq: int
    at: float
    command_id: str
    payload: bytes


class TickingClock:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.time = 1_700_000_000.0

    def now(self) -> float:
        """The next second."""
        self.time += 1.0
        return self.time

    async def sleep_until(self, when: float) -> None:
        """Never called: the game is played without a move timer."""
        raise AssertionError("no timers in this game")


class NullOutbox:
    """Publishes nothing."""

    async def publish(
        self, before: TableState, seq: int, record: Record, after: TableState
    ) -> None:
        """Drop the record."""

    async def flush(self, table: TableState) -> None:
        """Nothing to flush."""


async def play(folder: Path) -> tuple[list[StoredRow], TableState]:
    """Play the game on a store in ``folder``; its rows and the final table."""
    store = await open_store(f"sqlite:///{folder / 'events.db'}")
    salts = random.Random(SEED + 1)
    actor = TableActor(
        empty_table(TABLE_ID),
        store,
        NullOutbox(),
        clock=TickingClock(),
        rng=random.Random(SEED),
        snapshot_every=0,
        new_salt=lambda: f"{salts.getrandbits(128):032x}",
    )
    actor.start()
    moves = random.Random(SEED + 2)
    count = 0

    async def send(sender: str, command: object) -> None:
        nonlocal count
        count += 1
        reply = await actor.submit(sender, command, f"c{count}", actor.table.seq)  # type: ignore[arg-type]
        assert reply.ok, reply

    try:
        await send("alice", CreateTable(VARIANT, dict(OPTIONS), seats=2))
        await send("alice", Sit())
        await send("alice", Stand())
        await send("bob", Sit())
        await send("alice", Sit())
        await send("bob", StartGame())
        while actor.table.game is not None and not is_over(actor.table.game):
            game = actor.table.game
            seat = to_move(game)
            await send(actor.table.seats[seat], moves.choice(legal_actions(game, seat)))
        await actor.stop()
        rows = [
            StoredRow(row.seq, row.at, row.command_id, row.payload)
            for row in await store.read(TABLE_ID)
        ]
        return rows, actor.table
    finally:
        await store.close()


def main() -> None:
    """Write the two files."""
    if RECORD_VERSION != 1:
        sys.exit("this script writes version-1 logs; the current version is not 1")
    with tempfile.TemporaryDirectory() as folder:
        rows, table = asyncio.run(play(Path(folder)))
    game = table.game
    assert game is not None
    kinds = Counter(type(decode_record(row.payload).event).__name__ for row in rows)
    facts = {
        "table_id": TABLE_ID,
        "variant": VARIANT,
        "options": OPTIONS,
        "seats": list(table.seats),
        "records": len(rows),
        "games": table.game_number,
        "hands": game.hand_number,
        "totals": [str(total) for total in scores(game)],
        "winners": list(game.winners),
        "kinds": dict(sorted(kinds.items())),
    }
    (HERE / "v1_game.msgpack").write_bytes(msgspec.msgpack.encode(rows))
    (HERE / "v1_game.json").write_text(json.dumps(facts, indent=2) + "\n")
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
