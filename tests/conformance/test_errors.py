"""§14 Error codes: every refusal the page lists that a client can provoke, with its code,
`ok: false`, the request's id where it can be read, and the table left as it was."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.play import started, to_move
from tests.conformance.wire import (
    Map,
    Peer,
    command_topic,
    encode,
    fresh_id,
    inbox_topic,
    lobby_topic,
)


async def _raw(peer: Peer, topic: str, payload: bytes) -> Map:
    """Publish raw bytes and return the next reply (whatever its id)."""
    mark = len(peer.received)
    await peer.publish(topic, payload)
    inbox = inbox_topic(peer.name)
    found = await peer.wait_for(
        lambda message: message.topic == inbox and message.kind == "reply", after=mark
    )
    assert found.data is not None
    return found.data


@pytest.mark.parametrize(
    "payload",
    [b"\xc1", b"\x82\xa2id", b"\x92\x01"],
    ids=["never-used-byte", "truncated-map", "truncated-array"],
)
async def test_undecodable_bytes_are_malformed(alice: Peer, payload: bytes) -> None:
    """`protocol/malformed`, id `""` (it could not be read), table `""`."""
    reply = await _raw(alice, lobby_topic(alice.name), payload)
    assert ("reply", False, "protocol/malformed", "", "") == (
        reply["type"],
        reply["ok"],
        reply["code"],
        reply["id"],
        reply["table"],
    )


@pytest.mark.parametrize(
    ("request_map", "readable_id"),
    [
        ([1, 2, 3], False),
        ({"id": "r1"}, True),
        ({"id": "r2", "cmd": {"type": "no_such_command"}}, True),
        ({"id": "r3", "cmd": {"type": "hello", "versions": "one"}}, True),
        ({"id": "r4", "cmd": {"type": "create_table", "variant": 7}}, True),
        ({"id": "r5", "cmd": {"versions": [1]}}, True),
        ({"id": "r6", "cmd": {"type": "hello"}, "seq": -1}, True),
        ({"id": "", "cmd": {"type": "hello"}}, False),
        ({"id": 12, "cmd": {"type": "hello"}}, False),
    ],
    ids=[
        "not-a-map",
        "no-cmd",
        "unknown-type",
        "wrong-field-type",
        "variant-not-str",
        "cmd-without-type",
        "negative-seq",
        "empty-id",
        "int-id",
    ],
)
async def test_msgpack_that_is_no_request_is_invalid(
    alice: Peer, request_map: Any, readable_id: bool
) -> None:
    """`protocol/invalid`: not a map, a missing field, an unknown command type, a wrong type,
    a value out of range; with the id whenever it is a valid one."""
    if readable_id:
        # §6: a fresh id per request (the table shows which ids are valid).
        request_map = {**request_map, "id": f"{request_map['id']}-{fresh_id()}"}
    reply = await _raw(alice, lobby_topic(alice.name), encode(request_map))
    assert "protocol/invalid" == reply["code"]
    assert reply["ok"] is False
    if readable_id:
        assert request_map["id"] == reply["id"]


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ({"type": "create_table", "variant": "no_such_preset"}, "variant/unknown"),
        (
            {"type": "create_table", "variant": "knock", "options": {"no_such": 1}},
            "variant/unknown_option",
        ),
        (
            {"type": "create_table", "variant": "basic", "options": {"target": "lots"}},
            "variant/bad_option",
        ),
        (
            {"type": "create_table", "variant": "basic", "options": {"deals": 0}},
            "variant/bad_option",
        ),
        ({"type": "create_table", "variant": "gin", "seats": 3}, "variant/bad_players"),
        (
            {"type": "create_table", "variant": "basic", "options": {"target": 50, "deals": 2}},
            "variant/contradictory_options",
        ),
    ],
)
async def test_bad_presets_and_options_are_refused(alice: Peer, command: Map, code: str) -> None:
    """§7 and docs/variants.md §5: `variant/*` codes for `create_table`."""
    reply = await alice.lobby(command)
    assert (False, code) == (reply["ok"], reply["code"])


async def test_an_unlimited_option_may_be_null(alice: Peer) -> None:
    """docs/variants.md §4: an `int_or_unlimited` option takes an integer, `null` or
    `"unlimited"`; `deals: null` (with `target` unlimited) creates a table."""
    for deals in ("unlimited", None):
        reply = await alice.lobby(
            {
                "type": "create_table",
                "variant": "basic",
                "options": {"deals": deals, "target": 100},
            }
        )
        assert reply["ok"] is True, reply


async def test_seat_errors(alice: Peer, bob: Peer, deployment: Any) -> None:
    """§8: `table/already_seated`, `table/seat_taken`, `table/full`, `table/not_seated`,
    `table/not_full`, `table/no_game`."""
    table = await alice.create("knock", seats=2)
    assert "table/already_seated" == (await alice.table(table, {"type": "sit"}))["code"]
    assert "table/seat_taken" == (await bob.table(table, {"type": "sit", "seat": 0}))["code"]
    assert "table/seat_taken" == (await bob.table(table, {"type": "sit", "seat": 5}))["code"]
    assert "table/not_seated" == (await bob.table(table, {"type": "stand"}))["code"]
    assert "table/not_seated" == (await bob.table(table, {"type": "start"}))["code"]
    assert "table/not_full" == (await alice.table(table, {"type": "start"}))["code"]
    assert "table/no_game" == (await alice.table(table, {"type": "draw_stock"}))["code"]
    assert (await bob.table(table, {"type": "sit"}))["ok"]
    (account,) = deployment.take(1)
    async with Peer(account, deployment.host, deployment.port).connected() as carol:
        assert "table/full" == (await carol.table(table, {"type": "sit"}))["code"]
        assert (
            "table/not_seated" == (await carol.table(table, {"type": "chat", "text": "hi"}))["code"]
        )


async def test_game_running_and_game_over_errors(alice: Peer, bob: Peer) -> None:
    """§8: `table/game_running` for `sit`, `stand`, `start`, `rematch` during a game;
    `table/not_between_hands` for `ready` without a hand pause."""
    table = await started(alice, bob)
    for command in ({"type": "stand"}, {"type": "start"}, {"type": "rematch"}):
        assert "table/game_running" == (await alice.table(table, command))["code"]
    assert "table/not_between_hands" == (await alice.table(table, {"type": "ready"}))["code"]
    # `leave` during a game does nothing, successfully.
    assert (await alice.table(table, {"type": "leave"}))["ok"]


async def test_private_tables_need_the_invite(alice: Peer, bob: Peer) -> None:
    """§8: `lobby/bad_invite` for `join`, `sit` and `resync` at a private table without the
    code; with it, `join` returns `synced` and `sit` works."""
    reply = await alice.lobby({"type": "create_table", "variant": "knock", "private": True})
    table, code = reply["result"]["table"], reply["result"]["invite_code"]
    assert code
    assert "lobby/bad_invite" == (await bob.table(table, {"type": "join"}))["code"]
    assert "lobby/bad_invite" == (await bob.table(table, {"type": "resync"}))["code"]
    wrong = {"type": "sit", "invite_code": code + "x"}
    assert "lobby/bad_invite" == (await bob.table(table, wrong))["code"]
    joined = await bob.table(table, {"type": "join", "invite_code": code})
    assert "synced" == joined["result"]["type"]
    assert -1 == joined["result"]["seat"]
    assert (await bob.table(table, {"type": "sit", "invite_code": code}))["ok"]


async def test_rules_refusals_change_nothing(alice: Peer, bob: Peer) -> None:
    """§9 and §14: out of turn `rules/not_your_turn`; discarding before drawing
    `rules/wrong_phase`; a card not held `rules/card_not_held`; melding in Knock Rummy
    `rules/no_table_melds`; a claim with no window `rules/no_claim_window`. The table's `seq`
    stays where it was."""
    table = await started(alice, bob)
    first = await alice.table(table, {"type": "resync"})
    seq = int(first["result"]["seq"])
    mover, other, update = await to_move([alice, bob], table, seq)
    hand = update["view"]["hand"]
    pile = update["view"]["pile"]
    refusals = [
        (other, {"type": "draw_stock"}, "rules/not_your_turn"),
        (mover, {"type": "discard", "card": hand[0]}, "rules/wrong_phase"),
        (mover, {"type": "claim", "count": 1}, "rules/no_claim_window"),
        (mover, {"type": "meld", "melds": [{"cards": hand[:3], "faces": hand[:3]}]}, None),
    ]
    for player, command, code in refusals:
        reply = await player.table(table, command, seq=seq)
        assert reply["ok"] is False
        if code is not None:
            assert code == reply["code"]
        else:
            assert reply["code"] in ("rules/no_table_melds", "rules/wrong_phase")
        assert seq == reply["seq"]
        assert [] == reply["events"]
    drew = await mover.table(table, {"type": "draw_stock"}, seq=seq)
    assert drew["ok"], drew
    seq = int(drew["seq"])
    held = (await mover.table(table, {"type": "resync"}))["result"]["view"]["hand"]
    not_held = next(card for card in range(52) if card not in held and card not in pile)
    after_draw = await mover.table(table, {"type": "discard", "card": not_held}, seq=seq)
    if after_draw["ok"]:
        pytest.fail(f"discarding {not_held}, not in {held}, was accepted")
    assert after_draw["code"] in ("rules/card_not_held",)
    meld = {
        "type": "meld",
        "melds": [{"cards": hand[:3], "faces": [card & 63 for card in hand[:3]]}],
    }
    assert "rules/no_table_melds" == (await mover.table(table, meld, seq=seq))["code"]
    assert (
        "rules/wrong_phase" == (await mover.table(table, {"type": "draw_stock"}, seq=seq))["code"]
    )


async def test_a_stale_seq_is_refused_with_the_present(alice: Peer, bob: Peer) -> None:
    """§12: a command with a `seq` that is not the table's gets `table/stale_seq`, the current
    `seq` and a `synced` result; nothing changes."""
    table = await started(alice, bob)
    current = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    mover, _, _ = await to_move([alice, bob], table, current)
    for stale in (current - 1, current + 5, 0):
        reply = await mover.table(table, {"type": "draw_stock"}, seq=stale)
        assert ("table/stale_seq", current) == (reply["code"], reply["seq"])
        assert "synced" == reply["result"]["type"]
        assert current == reply["result"]["seq"]
        assert reply["result"]["legal"]
    assert (await mover.table(table, {"type": "draw_stock"}, seq=current))["ok"]


async def test_chat_from_a_stranger_is_refused(alice: Peer, bob: Peer) -> None:
    """§8: only the table's players and host chat: `table/not_seated`."""
    table = await alice.create("knock")
    assert "table/not_seated" == (await bob.table(table, {"type": "chat", "text": "hi"}))["code"]


async def test_a_command_topic_of_an_unknown_table_gets_table_unknown(alice: Peer) -> None:
    """§8: `table/unknown` for a game command too."""
    reply = await alice.send(command_topic("zz" + fresh_id(), alice.name), {"type": "draw_stock"})
    assert "table/unknown" == reply["code"]


async def test_refusals_of_draws_and_knocks(alice: Peer, bob: Peer) -> None:
    """§14: `pass` with stock left is `rules/cannot_pass`; a deep draw where deep draws are
    not played is `rules/too_deep`; `knock` in a preset without knocking is
    `rules/no_knocking`."""
    table = await started(alice, bob, "basic")
    seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    mover, _, update = await to_move([alice, bob], table, seq)
    assert "rules/cannot_pass" == (await mover.table(table, {"type": "pass"}, seq=seq))["code"]
    deep = {"type": "take_discard", "count": 2}
    assert "rules/too_deep" == (await mover.table(table, deep, seq=seq))["code"]
    drew = await mover.table(table, {"type": "draw_stock"}, seq=seq)
    assert drew["ok"], drew
    hand = (await mover.table(table, {"type": "resync"}))["result"]["view"]["hand"]
    knock = {"type": "knock", "card": hand[0], "melds": []}
    assert "rules/no_knocking" == (await mover.table(table, knock, seq=drew["seq"]))["code"]
    del update


async def test_ready_between_hands(alice: Peer, bob: Peer) -> None:
    """§8 `ready` at a table with a hand pause: after a hand of a game that goes on, each
    player's `ready` gives `player_ready` (twice is `table/already_ready`), and once both are
    ready the next hand is dealt."""
    table = await started(alice, bob, "knock", hand_pause_seconds=60.0, options={"deals": 2})
    seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    mover, other, _ = await to_move([alice, bob], table, seq)
    drew = await mover.table(table, {"type": "draw_stock"}, seq=seq)
    assert drew["ok"], drew
    legal = (await mover.table(table, {"type": "resync"}))["result"]["legal"]
    knock = next(command for command in legal if command["type"] == "knock")
    knocked = await mover.table(table, knock, seq=drew["seq"])
    assert knocked["ok"], knocked
    assert "hand_ended" in [logged["event"]["type"] for logged in knocked["events"]]
    first = await mover.table(table, {"type": "ready"})
    assert first["ok"], first
    assert ["player_ready"] == [logged["event"]["type"] for logged in first["events"]]
    assert "table/already_ready" == (await mover.table(table, {"type": "ready"}))["code"]
    second = await other.table(table, {"type": "ready"})
    assert second["ok"], second
    kinds = [logged["event"]["type"] for logged in second["events"]]
    assert ["player_ready", "deck_committed", "dealt"] == kinds
