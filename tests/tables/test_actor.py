"""The table actor over real stores: persist first, idempotent commands, stale seqs, recovery."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from server.engine import (
    Dealt,
    Discard,
    DrawStock,
    HandEnded,
    is_over,
    legal_actions,
    to_move,
)
from server.tables.actor import OUTSIDER_REFUSALS, Reply, TableActor, load_table
from server.tables.errors import LeaseLost
from server.tables.records import (
    DeckCommitted,
    DeckRevealed,
    Record,
    deck_commitment,
    decode_record,
)
from server.tables.store import EventStore, open_store
from server.tables.table import CreateTable, Sit, StartGame, TableState, empty_table
from server.tables.timers import ManualClock


@dataclass
class RecordingOutbox:
    """Keeps what was published, checking each record is already in the store."""

    store: EventStore
    published: list[tuple[int, Record]] = field(default_factory=list)
    unpersisted: list[int] = field(default_factory=list)

    async def publish(
        self, before: TableState, seq: int, record: Record, after: TableState
    ) -> None:
        """Record the publication; note any seq not yet durable."""
        if await self.store.last_seq(after.table_id) < seq:
            self.unpersisted.append(seq)
        self.published.append((seq, record))

    async def flush(self, table: TableState) -> None:
        """Nothing to flush."""


@pytest.fixture
async def actor(store: EventStore) -> AsyncIterator[TableActor]:
    """A started actor for table ``t1`` on each real store."""
    table = TableActor(
        empty_table("t1"),
        store,
        RecordingOutbox(store),
        clock=ManualClock(),
        rng=random.Random(7),
        snapshot_every=25,
    )
    table.start()
    yield table
    await table.stop()


async def _open_game(
    actor: TableActor,
    variant: str = "basic",
    players: int = 2,
    options: dict[str, object] | None = None,
) -> None:
    names = [f"p{seat}" for seat in range(players)]
    create = CreateTable(variant=variant, seats=players, options=options or {})
    assert (await actor.submit(names[0], create, "c0")).ok
    for name in names:
        assert (await actor.submit(name, Sit(), f"sit-{name}")).ok
    assert (await actor.submit(names[0], StartGame(), "start")).ok


async def _play_to_the_end(actor: TableActor, rng: random.Random, limit: int = 20_000) -> int:
    moves = 0
    while actor.table.game is not None and not is_over(actor.table.game) and moves < limit:
        game = actor.table.game
        seat = to_move(game)
        command = rng.choice(legal_actions(game, seat))
        reply = await actor.submit(actor.table.seats[seat], command, f"m{moves}", actor.table.seq)
        assert reply.ok, reply
        moves += 1
    return moves


async def test_starting_a_game_deals_with_a_published_commitment(actor: TableActor) -> None:
    """The start appends the commitment and the deal; both are durable before publication."""
    await _open_game(actor)
    rows = await actor.store.read("t1")
    events = [decode_record(row.payload).event for row in rows]
    commitment, dealt = events[-2], events[-1]
    assert isinstance(commitment, DeckCommitted)
    assert isinstance(dealt, Dealt)
    assert commitment.commitment == deck_commitment(commitment.salt, dealt.order)
    assert [] == actor.outbox.unpersisted  # type: ignore[attr-defined]
    assert len(rows) == actor.table.seq


async def test_a_whole_game_replays_from_the_log_to_the_live_state(actor: TableActor) -> None:
    """Loading the table from the store (snapshot + tail) gives exactly the live state."""
    await _open_game(actor, "gin", options={"deals": 2})
    await _play_to_the_end(actor, random.Random(3))
    assert actor.table.game is not None
    assert is_over(actor.table.game)
    loaded = await load_table(actor.store, "t1")
    assert actor.table == loaded
    revealed = [
        decode_record(row.payload).event
        for row in await actor.store.read("t1")
        if isinstance(decode_record(row.payload).event, DeckRevealed | HandEnded)
    ]
    assert any(isinstance(event, DeckRevealed) for event in revealed)


async def test_a_repeated_command_id_returns_the_first_reply_without_acting(
    actor: TableActor,
) -> None:
    """A retried command is answered as before and appends nothing."""
    await _open_game(actor)
    game = actor.table.game
    assert game is not None
    player = actor.table.seats[to_move(game)]
    first = await actor.submit(player, DrawStock(), "draw-1", actor.table.seq)
    seq = actor.table.seq
    again = await actor.submit(player, DrawStock(), "draw-1", seq - 1)
    assert (True, True, first.first_seq) == (again.ok, again.duplicate, again.first_seq)
    assert seq == await actor.store.last_seq("t1")


async def test_a_stale_seq_is_refused_with_the_current_seq(actor: TableActor) -> None:
    """A command sent against an older seq changes nothing and says where the table is."""
    await _open_game(actor)
    game = actor.table.game
    assert game is not None
    seq = actor.table.seq
    reply = await actor.submit(actor.table.seats[to_move(game)], DrawStock(), "d", seq - 1)
    assert ("table/stale_seq", seq) == (reply.code, reply.seq)
    assert seq == await actor.store.last_seq("t1")


@pytest.mark.parametrize(
    ("sender", "command", "code"),
    [
        ("p0", DrawStock(), "table/unknown"),
        ("p0", Sit(), "table/unknown"),
        ("p0", CreateTable(variant="nope"), "variant/unknown"),
        ("p0", CreateTable(variant="basic", options={"ace": "sideways"}), "variant/bad_option"),
    ],
)
async def test_commands_on_a_missing_table_are_refused_with_a_code(
    actor: TableActor, sender: str, command: object, code: str
) -> None:
    """Bad input before the table exists leaves the log empty."""
    reply = await actor.submit(sender, command, "x")  # type: ignore[arg-type]
    assert (False, code) == (reply.ok, reply.code)
    assert 0 == await actor.store.last_seq("t1")


async def test_moves_of_unseated_players_and_illegal_moves_leave_the_log_unchanged(
    actor: TableActor,
) -> None:
    """An outsider and an out-of-turn player get coded errors; nothing is appended."""
    await _open_game(actor)
    game = actor.table.game
    assert game is not None
    seq = actor.table.seq
    waiting = actor.table.seats[1 - to_move(game)]
    replies: list[Reply] = [
        await actor.submit("stranger", DrawStock(), "s1"),
        await actor.submit(waiting, DrawStock(), "s2"),
    ]
    assert ["table/not_seated", "rules/not_your_turn"] == [reply.code for reply in replies]
    assert seq == await actor.store.last_seq("t1")


async def test_a_reloaded_table_continues_where_it_stopped(store: EventStore) -> None:
    """After the actor stops, a new one loaded from the store plays the game to its end."""
    first = TableActor(empty_table("t9"), store, RecordingOutbox(store), rng=random.Random(1))
    first.start()
    await _open_game(first, "knock", 3)
    await first.stop()
    second = await TableActor.load(store, "t9", RecordingOutbox(store), rng=random.Random(2))
    assert first.table == second.table
    second.start()
    await _play_to_the_end(second, random.Random(4))
    await second.stop()
    assert second.table.game is not None
    assert is_over(second.table.game)


async def test_the_store_lists_the_table_with_its_status(store_url: str) -> None:
    """The summary written with each append shows the table's variant, status and seats."""
    store = await open_store(store_url)
    try:
        actor = TableActor(empty_table("t5"), store, RecordingOutbox(store), rng=random.Random(5))
        actor.start()
        await _open_game(actor, "rummy500", 3)
        await actor.stop()
        (summary,) = await store.tables()
        expected = ("t5", "rummy500", "playing", ("p0", "p1", "p2"))
        assert expected == (summary.table_id, summary.variant, summary.status, summary.seats)
    finally:
        await store.close()


async def test_a_refused_command_retried_later_is_refused_again_without_acting(
    store: EventStore,
) -> None:
    """A refused command id keeps its refusal, also after a restart, even once it would pass."""
    actor = TableActor(empty_table("t3"), store, RecordingOutbox(store), rng=random.Random(3))
    actor.start()
    await _open_game(actor)
    game = actor.table.game
    assert game is not None
    waiting = actor.table.seats[1 - to_move(game)]
    refused = await actor.submit(waiting, DrawStock(), "early")
    assert "rules/not_your_turn" == refused.code
    await actor.stop()
    again = await TableActor.load(store, "t3", RecordingOutbox(store))
    again.start()
    game = again.table.game
    assert game is not None
    mover = again.table.seats[to_move(game)]
    assert (await again.submit(mover, DrawStock(), "draw")).ok
    game = again.table.game
    assert game is not None
    discard = next(a for a in legal_actions(game, to_move(game)) if isinstance(a, Discard))
    assert (await again.submit(mover, discard, "discard")).ok
    game = again.table.game
    assert game is not None
    assert waiting == again.table.seats[to_move(game)]  # now the early draw would be legal
    seq = again.table.seq
    retried = await again.submit(waiting, DrawStock(), "early")
    assert (False, True, "rules/not_your_turn") == (retried.ok, retried.duplicate, retried.code)
    assert seq == await store.last_seq("t3")
    await again.stop()


async def test_refusals_of_clients_without_a_seat_are_kept_in_memory_not_stored(
    actor: TableActor,
) -> None:
    """Anyone may send commands to a table: an outsider's refused commands write nothing, and
    only the latest ``OUTSIDER_REFUSALS`` of them answer a retry; a seated player's refusal is
    still stored, for retries after a restart."""
    await _open_game(actor)
    game = actor.table.game
    assert game is not None
    seq = actor.table.seq
    flood = OUTSIDER_REFUSALS + 20
    for number in range(flood):
        refused = await actor.submit("stranger", DrawStock(), f"s{number}")
        assert (False, "table/not_seated") == (refused.ok, refused.code)
    stored = [await actor.store.refusal("t1", f"s{number}") for number in range(flood)]
    assert [None] * flood == stored
    retried = await actor.submit("stranger", DrawStock(), f"s{flood - 1}")
    assert (False, True, "table/not_seated") == (retried.ok, retried.duplicate, retried.code)
    forgotten = await actor.submit("stranger", DrawStock(), "s0")
    assert (False, False, "table/not_seated") == (forgotten.ok, forgotten.duplicate, forgotten.code)
    waiting = actor.table.seats[1 - to_move(game)]
    assert "rules/not_your_turn" == (await actor.submit(waiting, DrawStock(), "early")).code
    assert await actor.store.refusal("t1", "early") is not None
    assert seq == await actor.store.last_seq("t1")


async def test_posted_moves_are_answered_in_order_after_they_are_durable_and_published(
    actor: TableActor,
) -> None:
    """``post`` queues without waiting: each answer comes once the move is in the store and
    published (the outbox saw every seq as durable), in the order posted, and a duplicate of a
    posted move is answered as the first one without acting."""
    await _open_game(actor)
    game = actor.table.game
    assert game is not None
    player = actor.table.seats[to_move(game)]
    answers: list[tuple[Reply, int, int]] = []
    done = asyncio.Event()
    outbox = actor.outbox
    assert isinstance(outbox, RecordingOutbox)

    def answer(outcome: Reply | LeaseLost) -> None:
        assert isinstance(outcome, Reply)
        answers.append((outcome, actor.table.seq, len(outbox.published)))
        if len(answers) == 3:
            done.set()

    seq = actor.table.seq
    actor.post(player, DrawStock(), "draw", seq, answer)
    actor.post(player, DrawStock(), "draw", seq, answer)  # a retry: the same id
    actor.post(player, DrawStock(), "again", seq, answer)  # refused: already drawn
    assert not answers  # nothing is answered before the actor's task runs
    async with asyncio.timeout(10):
        await done.wait()
    (first, at, published), (again, _, _), (refused, _, _) = answers
    assert (True, seq + 1, seq + 1) == (first.ok, first.seq, at)
    assert published == len(outbox.published)
    assert not outbox.unpersisted
    assert (True, True, first.seq) == (again.ok, again.duplicate, again.seq)
    assert (False, "table/stale_seq") == (refused.ok, refused.code)
    assert seq + 1 == await actor.store.last_seq("t1")


async def test_a_stopping_actor_takes_no_posted_move(actor: TableActor) -> None:
    """Once ``stop`` is called ``post`` refuses, as ``submit`` does."""
    await _open_game(actor)
    await actor.stop()
    assert actor.stopping
    with pytest.raises(RuntimeError, match="stopping"):
        actor.post("p0", DrawStock(), "late", None, lambda outcome: None)
