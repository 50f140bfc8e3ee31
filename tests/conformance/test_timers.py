"""§13 Move timer: `deadline` in updates, `timed_out` and the server's move when it runs out,
`seat_forfeited` after `max_timeouts` in a row (then `table/forfeited` and an empty `legal`),
and `seat_back` for a seat that moves by itself again."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.conformance.play import started, to_move
from tests.conformance.wire import WAIT, Map, Peer, Received, inbox_topic

MOVE_SECONDS = 1.0


def _events(peer: Peer, table: str) -> list[tuple[int, Map]]:
    """Every event of ``table`` in ``peer``'s updates, with its `seq`."""
    return [
        (int(logged["seq"]), logged["event"])
        for update in peer.updates(table)
        for logged in update["events"]
    ]


def _event_of(peer: Peer, table: str, kind: str, seat: int) -> Callable[[Received], bool]:
    inbox = inbox_topic(peer.name)

    def matches(message: Received) -> bool:
        return (
            message.topic == inbox
            and message.kind == "update"
            and message.data is not None
            and message.data["table"] == table
            and any(
                logged["event"]["type"] == kind and logged["event"].get("seat") == seat
                for logged in message.data["events"]
            )
        )

    return matches


async def test_timeouts_forfeit_a_seat(alice: Peer, bob: Peer) -> None:
    """With `move_seconds` 1 and `max_timeouts` 2 nobody moves: each awaited seat gets
    `timed_out` and the server's draw and discard; a seat's second timeout in a row forfeits
    it; a forfeited seat's commands get `table/forfeited` and its `legal` is empty."""
    before = time.time()
    table = await started(
        alice, bob, "knock", move_seconds=MOVE_SECONDS, max_timeouts=2, options={"deals": 1}
    )
    seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    mover, _, update = await to_move([alice, bob], table, seq)
    seat = int(update["seat"])
    # §6: `deadline` is when the server plays for the awaited seat (the server's clock; the
    # suite allows for a clock that is off by up to WAIT seconds).
    assert update["deadline"] > 0
    assert before - WAIT < update["deadline"] < time.time() + MOVE_SECONDS + WAIT
    found = await mover.wait_for(
        _event_of(mover, table, "seat_forfeited", seat),
        within=4 * MOVE_SECONDS + WAIT,
    )
    assert found.data is not None
    events = _events(mover, table)
    timeouts = [event["seat"] for _, event in events if event["type"] == "timed_out"]
    assert [seat, 1 - seat, seat] == timeouts[:3]
    after_first = [event for number, event in events if number > seq]
    assert {"type": "timed_out", "seat": seat} == after_first[0]
    assert after_first[1]["type"] in ("drew", "took_discard")
    assert seat == after_first[1]["seat"]
    assert found.data["legal"] == []
    reply = await mover.table(table, {"type": "draw_stock"})
    assert reply["code"] in ("table/forfeited", "rules/game_over")
    assert reply["ok"] is False
    # With both seats forfeited the server plays the one deal to its end.
    ended = await mover.wait_for(
        lambda message: (
            message.kind == "update"
            and message.data is not None
            and message.data["table"] == table
            and any(logged["event"]["type"] == "game_ended" for logged in message.data["events"])
        ),
        within=WAIT,
    )
    assert ended.data is not None
    # §14 does not say which of the two a forfeited seat hears once the game is over.
    after_end = await mover.table(table, {"type": "draw_stock"})
    assert after_end["code"] in ("rules/game_over", "table/forfeited")
    assert "table/game_over" == (await mover.table(table, {"type": "start"}))["code"]
    rematch = await mover.table(table, {"type": "rematch"})
    assert rematch["ok"], rematch
    game_started = next(logged["event"] for logged in rematch["events"])
    assert ("game_started", 2) == (game_started["type"], game_started["game"])


async def test_a_seat_that_moves_again_is_back(alice: Peer, bob: Peer) -> None:
    """After a timeout, a seat that sends its own command gets `seat_back`."""
    table = await started(alice, bob, "knock", move_seconds=MOVE_SECONDS, max_timeouts=3)
    seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    mover, other, update = await to_move([alice, bob], table, seq)
    seat = int(update["seat"])
    await other.wait_for(
        _event_of(other, table, "discarded", seat),
        within=MOVE_SECONDS + WAIT,
    )
    # The other seat plays its own turn at once; then the timed-out seat moves by itself.
    now = max(int(u["seq"]) for u in other.updates(table))
    synced = (await other.table(table, {"type": "resync"}))["result"]
    assert synced["seq"] == now
    drew = await other.table(table, {"type": "draw_stock"}, seq=now)
    assert drew["ok"], drew
    legal = (await other.table(table, {"type": "resync"}))["result"]["legal"]
    discard = next(command for command in legal if command["type"] == "discard")
    done = await other.table(table, discard, seq=drew["seq"])
    assert done["ok"], done
    back = await mover.table(table, {"type": "draw_stock"}, seq=done["seq"])
    assert back["ok"], back
    kinds = [event["type"] for event in (logged["event"] for logged in back["events"])]
    assert "seat_back" in kinds
    assert {"type": "seat_back", "seat": seat} in [logged["event"] for logged in back["events"]]
