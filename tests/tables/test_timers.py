"""Timers with an injected clock: the move timer plays for an absent seat, claim windows
close, and deadlines survive a restart."""

from __future__ import annotations

import asyncio
import random

from server.engine import Discard, Discarded, DrawStock, Drew, card_face, legal_actions, to_move
from server.engine.game import Phase
from server.tables.actor import TableActor
from server.tables.records import TimedOut, decode_record
from server.tables.store import EventStore
from server.tables.table import CreateTable, Ready, Sit, StartGame, empty_table
from server.tables.timers import ManualClock, auto_command
from tests.tables.test_actor import RecordingOutbox

WAIT = 10.0


async def _table(
    store: EventStore,
    clock: ManualClock,
    variant: str = "basic",
    players: int = 2,
    move_seconds: float = 30.0,
    options: dict[str, object] | None = None,
    claim_seconds: float = 10.0,
) -> TableActor:
    actor = TableActor(
        empty_table("t1"),
        store,
        RecordingOutbox(store),
        clock=clock,
        rng=random.Random(11),
        claim_seconds=claim_seconds,
    )
    actor.start()
    create = CreateTable(
        variant=variant, seats=players, move_seconds=move_seconds, options=options or {}
    )
    assert (await actor.submit("p0", create)).ok
    for seat in range(players):
        assert (await actor.submit(f"p{seat}", Sit())).ok
    assert (await actor.submit("p0", StartGame())).ok
    return actor


async def test_an_absent_player_is_played_for_when_his_time_is_up(store: EventStore) -> None:
    """After move_seconds the server draws from the stock and discards the highest card."""
    clock = ManualClock()
    actor = await _table(store, clock)
    game = actor.table.game
    assert game is not None
    seat, seq = to_move(game), actor.table.seq
    await asyncio.wait_for(clock.wait_for_sleeper(clock.time + 30), WAIT)
    clock.advance(29)
    assert seq == actor.table.seq
    clock.advance(2)
    await asyncio.wait_for(actor.wait_for_seq(seq + 3), WAIT)
    rows = await store.read("t1", after_seq=seq)
    events = [decode_record(row.payload).event for row in rows]
    timed_out, drew, discarded = events[0], events[1], events[2]
    assert TimedOut(seat) == timed_out
    assert isinstance(drew, Drew)
    assert isinstance(discarded, Discarded)
    assert (seat, seat) == (drew.seat, discarded.seat)
    hand = (*game.hands[seat], drew.card)
    values = game.rules.values
    highest = max(values[card_face(card)] for card in hand)
    assert highest == values[card_face(discarded.card)]
    assert rows[0].command_id.startswith("timeout:")
    await actor.stop()


async def test_a_move_restarts_the_timer(store: EventStore) -> None:
    """A player who moves in time gets a fresh deadline counted from his move: the first
    deadline passes with nothing played, the new one plays for him."""
    clock = ManualClock()
    actor = await _table(store, clock)
    game = actor.table.game
    assert game is not None
    await asyncio.wait_for(clock.wait_for_sleeper(clock.time + 30), WAIT)
    clock.advance(20)
    player = actor.table.seats[to_move(game)]
    assert (await actor.submit(player, DrawStock(), "d", actor.table.seq)).ok
    seq, moved_at = actor.table.seq, clock.time
    clock.advance(29)  # past the first deadline, before the new one
    await asyncio.wait_for(clock.wait_for_sleeper(moved_at + 30), WAIT)
    assert seq == actor.table.seq
    clock.advance(1)
    await asyncio.wait_for(actor.wait_for_seq(seq + 2), WAIT)  # timed out, discarded
    rows = await store.read("t1", after_seq=seq)
    assert TimedOut(to_move(game)) == decode_record(rows[0].payload).event
    await actor.stop()


async def test_a_deadline_that_passed_while_the_server_was_down_fires_on_restart(
    store: EventStore,
) -> None:
    """Timers are rebuilt from the log's event times: a late seat is played for at once."""
    clock = ManualClock()
    first = await _table(store, clock)
    seq = first.table.seq
    await first.stop()
    clock.advance(45)
    second = await TableActor.load(store, "t1", RecordingOutbox(store), clock=clock)
    second.start()
    await asyncio.wait_for(second.wait_for_seq(seq + 3), WAIT)
    await second.stop()


async def test_an_unanswered_claim_window_closes_when_its_time_is_up(store: EventStore) -> None:
    """Seats that do not answer a "Rummy!" window pass when claim_seconds run out."""
    clock = ManualClock()
    actor = await _table(store, clock, "rummy500", 3, move_seconds=0.0, claim_seconds=5.0)
    rng = random.Random(3)
    for move in range(3000):
        game = actor.table.game
        assert game is not None
        if game.phase is Phase.CLAIM:
            break
        seat = to_move(game)
        actions = legal_actions(game, seat)
        reply = await actor.submit(actor.table.seats[seat], rng.choice(actions), f"m{move}")
        assert reply.ok
    game = actor.table.game
    assert game is not None
    assert Phase.CLAIM is game.phase
    seq, waiting = actor.table.seq, len(game.claim_seats)
    await asyncio.wait_for(clock.wait_for_sleeper(clock.time + 5), WAIT)
    clock.advance(5)
    # One pass per seat that did not answer, then the window closes.
    await asyncio.wait_for(actor.wait_for_seq(seq + waiting + 1), WAIT)
    after = actor.table.game
    assert after is not None
    assert Phase.CLAIM is not after.phase
    await actor.stop()


def test_the_automatic_move_passes_in_a_claim_window_and_draws_otherwise() -> None:
    """``auto_command`` draws from the stock when it can."""
    from server.engine import chance, evolve, new_game

    game = new_game("basic", {}, 2)
    game = evolve(game, chance(game, random.Random(1)))
    assert DrawStock() == auto_command(game, to_move(game))


async def test_a_seat_that_misses_three_turns_in_a_row_is_played_for_at_once(
    store: EventStore,
) -> None:
    """After max_timeouts timeouts the seat is forfeited and its turns no longer wait."""
    clock = ManualClock()
    actor = await _table(store, clock)
    game = actor.table.game
    assert game is not None
    absent = to_move(game)
    for _ in range(3):
        game = actor.table.game
        assert game is not None
        if to_move(game) != absent:
            mover = to_move(game)
            await _play_one_turn(actor, mover)
        seq = actor.table.seq
        await asyncio.wait_for(clock.wait_for_sleeper(clock.time + 30), WAIT)
        clock.advance(30)
        await asyncio.wait_for(actor.wait_for_seq(seq + 3), WAIT)
    game = actor.table.game
    assert game is not None
    assert game.forfeited[absent]
    mover = 1 - absent
    seq = actor.table.seq
    await _play_one_turn(actor, mover)
    # No clock advance: the forfeited seat's turn is played without waiting.
    await asyncio.wait_for(actor.wait_for_seq(actor.table.seq + 2), WAIT)
    assert actor.table.seq > seq
    refused = await actor.submit(actor.table.seats[absent], DrawStock(), "late")
    assert "table/forfeited" == refused.code
    await actor.stop()


async def _play_one_turn(actor: TableActor, seat: int) -> None:
    """The seat draws from the stock and discards its first card."""
    player = actor.table.seats[seat]
    assert (await actor.submit(player, DrawStock())).ok
    game = actor.table.game
    assert game is not None
    discard = next(a for a in legal_actions(game, seat) if isinstance(a, Discard))
    assert (await actor.submit(player, discard)).ok


async def test_a_disconnected_player_is_played_for_after_the_grace_period(
    store: EventStore,
) -> None:
    """Without a move timer, a player marked absent keeps his turn for the grace period; then
    the server plays it; once he is back, nobody plays for him."""
    clock = ManualClock()
    actor = await _table(store, clock, move_seconds=0)
    actor.grace_seconds = 20
    game = actor.table.game
    assert game is not None
    player = actor.table.seats[to_move(game)]
    seq = actor.table.seq
    clock.advance(100)  # no move timer: nothing happens however long he thinks
    assert seq == actor.table.seq
    actor.set_absent(player, True)
    await asyncio.wait_for(clock.wait_for_sleeper(clock.time + 20), WAIT)
    clock.advance(19)
    assert seq == actor.table.seq
    clock.advance(1)
    await asyncio.wait_for(actor.wait_for_seq(seq + 3), WAIT)
    rows = await store.read("t1", after_seq=seq)
    assert TimedOut(to_move(game)) == decode_record(rows[0].payload).event
    # Back again before his next turn: no timer runs for him.
    actor.set_absent(player, False)
    game = actor.table.game
    assert game is not None
    other = actor.table.seats[to_move(game)]
    assert other != player
    assert actor.due() is None
    actor.set_absent(other, True)
    assert clock.time + 20 == actor.due()
    await actor.stop()


async def test_with_a_hand_pause_the_next_deal_waits_for_everyone_ready(
    store: EventStore,
) -> None:
    """At a table with ``hand_pause_seconds`` the next hand is dealt once every player is
    ready, or when the pause runs out; ``ready`` at any other time is refused."""
    clock = ManualClock()
    actor = TableActor(
        empty_table("t1"), store, RecordingOutbox(store), clock=clock, rng=random.Random(5)
    )
    actor.start()
    create = CreateTable(variant="knock", seats=2, hand_pause_seconds=60)
    assert (await actor.submit("p0", create)).ok
    for seat in range(2):
        assert (await actor.submit(f"p{seat}", Sit())).ok
    assert (await actor.submit("p0", StartGame())).ok
    early = await actor.submit("p0", Ready())
    assert (False, "table/not_between_hands") == (early.ok, early.code)
    for pause in range(2):
        # Play the hand out: knock at once when allowed, else draw and discard.
        game = actor.table.game
        assert game is not None
        hand = game.hand_number
        while actor.table.game is not None and actor.table.game.hand_number == hand:
            game = actor.table.game
            if game.phase is Phase.DEAL or not legal_actions(game, to_move(game)):
                break
            seat = to_move(game)
            actions = legal_actions(game, seat)
            knocks = [action for action in actions if type(action).__name__ == "Knock"]
            command = knocks[0] if knocks else auto_command(game, seat)
            assert (await actor.submit(f"p{seat}", command)).ok
        game = actor.table.game
        assert game is not None
        assert Phase.DEAL == game.phase
        seq = actor.table.seq
        if pause == 0:
            assert (await actor.submit("p1", Ready())).ok
            again = await actor.submit("p1", Ready())
            assert (False, "table/already_ready") == (again.ok, again.code)
            assert (await actor.submit("p0", Ready())).ok
            assert actor.table.game is not None
            assert hand + 1 == actor.table.game.hand_number  # dealt once both were ready
        else:
            await asyncio.wait_for(clock.wait_for_sleeper(clock.time + 60), WAIT)
            clock.advance(59)
            assert seq == actor.table.seq
            clock.advance(1)
            await asyncio.wait_for(actor.wait_for_seq(seq + 4), WAIT)
            assert actor.table.game is not None
            assert hand + 1 == actor.table.game.hand_number  # the pause ran out
    await actor.stop()
