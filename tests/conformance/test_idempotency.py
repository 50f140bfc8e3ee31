"""§12 Idempotency and §3 "never retain a command": a retried id is answered with the first
outcome and never acts twice; a retained command is never executed."""

from __future__ import annotations

import contextlib

from tests.conformance.play import started, to_move
from tests.conformance.wire import (
    Peer,
    chat_topic,
    command_topic,
    encode,
    fresh_id,
    lobby_topic,
)


async def test_a_retried_move_is_answered_again_without_acting_twice(
    alice: Peer, bob: Peer
) -> None:
    """The same `draw_stock` id twice: the same `ok` and `seq`, one `drew` event in the log."""
    table = await started(alice, bob)
    seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    mover, _, _ = await to_move([alice, bob], table, seq)
    request_id = fresh_id()
    first = await mover.table(table, {"type": "draw_stock"}, seq=seq, request_id=request_id)
    again = await mover.table(table, {"type": "draw_stock"}, seq=seq, request_id=request_id)
    assert first["ok"] is True
    assert (first["ok"], first["code"], first["seq"]) == (again["ok"], again["code"], again["seq"])
    assert again["events"] in ([], first["events"])
    synced = (await mover.table(table, {"type": "resync"}))["result"]
    assert first["seq"] == synced["seq"]
    assert "play" == synced["view"]["phase"]


async def test_a_retried_refusal_stays_refused(alice: Peer, bob: Peer) -> None:
    """A refused id stays refused with the same code, even once the command would be accepted."""
    table = await started(alice, bob)
    seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    mover, other, _ = await to_move([alice, bob], table, seq)
    request_id = fresh_id()
    refused = await other.table(table, {"type": "draw_stock"}, request_id=request_id)
    assert "rules/not_your_turn" == refused["code"]
    drew = await mover.table(table, {"type": "draw_stock"}, seq=seq)
    discard = next(command for command in drew_legal(await mover.table(table, {"type": "resync"})))
    done = await mover.table(table, discard, seq=drew["seq"])
    assert done["ok"], done
    again = await other.table(table, {"type": "draw_stock"}, request_id=request_id)
    assert ("rules/not_your_turn", False) == (again["code"], again["ok"])
    fresh = await other.table(table, {"type": "draw_stock"})
    assert fresh["ok"] is True


def drew_legal(resync: dict[str, object]) -> list[dict[str, object]]:
    """The `discard` commands among a `synced` result's `legal`."""
    result = resync["result"]
    assert isinstance(result, dict)
    return [command for command in result["legal"] if command["type"] == "discard"]


async def test_create_table_is_idempotent_by_id(alice: Peer) -> None:
    """§7: resending `create_table` with the same id returns the same table."""
    request_id = fresh_id()
    command = {"type": "create_table", "variant": "knock"}
    first = await alice.lobby(command, request_id=request_id)
    again = await alice.lobby(command, request_id=request_id)
    assert first["result"]["table"] == again["result"]["table"]
    assert first["ok"] is again["ok"] is True


async def test_a_resent_chat_is_said_once(alice: Peer, bob: Peer) -> None:
    """§12: a resent `chat` (same id) is not posted twice."""
    table = await alice.create("knock")
    await bob.subscribe(chat_topic(table))
    request_id = fresh_id()
    for _ in range(2):
        reply = await alice.table(table, {"type": "chat", "text": "once"}, request_id=request_id)
        assert reply["ok"] is True
    await bob.collect(lambda message: message.topic == chat_topic(table), 1)
    await alice.table(table, {"type": "chat", "text": "barrier"})
    lines = await bob.collect(lambda message: message.topic == chat_topic(table), 2)
    assert ["once", "barrier"] == [line.data["text"] for line in lines if line.data is not None]


async def test_ids_are_per_client(alice: Peer, bob: Peer) -> None:
    """§12: two clients may use the same id at one table; each is its own request."""
    table = await alice.create("knock", seats=2)
    shared = fresh_id()
    assert (await bob.table(table, {"type": "sit"}, request_id=shared))["ok"]
    started_reply = await alice.table(table, {"type": "start"}, request_id=shared)
    assert started_reply["ok"] is True, started_reply


async def test_a_retained_command_is_never_executed(alice: Peer) -> None:
    """§3: the server ignores every retained command (and clears it). A retained
    `create_table` gets no reply and creates nothing; nor does a retained `chat`."""
    table = await alice.create("knock")
    await alice.subscribe(chat_topic(table))
    lobby_id, chat_id = fresh_id(), fresh_id()
    lobby_request = {"id": lobby_id, "cmd": {"type": "create_table", "variant": "knock"}}
    chat_request = {"id": chat_id, "cmd": {"type": "chat", "text": "retained"}}
    await alice.publish(lobby_topic(alice.name), encode(lobby_request), retain=True)
    await alice.publish(command_topic(table, alice.name), encode(chat_request), retain=True)
    try:
        # A round trip on each topic after them: a retained command would be answered first.
        await alice.lobby({"type": "hello"})
        await alice.table(table, {"type": "chat", "text": "barrier"})
        await alice.collect(lambda message: message.topic == chat_topic(table), 1)
        assert [] == alice.replies(lobby_id) + alice.replies(chat_id)
        said = [
            message.data["text"]
            for message in alice.received
            if message.topic == chat_topic(table) and message.data is not None
        ]
        assert ["barrier"] == said
        listed = await alice.lobby({"type": "list_tables", "variant": "knock"})
        mine = [item["table"] for item in listed["result"]["tables"] if item["host"] == alice.name]
        assert [table] == mine
    finally:
        # Clear what the broker may still hold, whatever the server did.
        with contextlib.suppress(Exception):
            await alice.publish(lobby_topic(alice.name), b"", retain=True)
            await alice.publish(command_topic(table, alice.name), b"", retain=True)
