"""§2 Connecting, §3 Topics, §4 Encoding and §15 Versioning, as a client sees them."""

from __future__ import annotations

import contextlib

import aiomqtt
import pytest

from tests.conformance.deployment import Deployment
from tests.conformance.wire import (
    OFFLINE,
    STATUS_TOPIC,
    Peer,
    command_topic,
    connack,
    encode,
    fresh_id,
    inbox_topic,
    lobby_topic,
    presence_topic,
)


async def test_hello_is_answered_with_welcome(alice: Peer) -> None:
    """§7: `hello` with version 1 gets `welcome` with the version chosen and the limits."""
    reply = await alice.lobby({"type": "hello", "versions": [1], "client": "conformance/1"})
    assert reply["ok"] is True
    assert ("", "", "", 0, []) == (
        reply["code"],
        reply["message"],
        reply["table"],
        reply["seq"],
        reply["events"],
    )
    welcome = reply["result"]
    assert "welcome" == welcome["type"]
    assert 1 == welcome["version"]
    assert welcome["shards"] >= 1
    assert welcome["max_payload"] > 0
    assert welcome["rate_per_second"] > 0
    assert welcome["burst"] > 0


async def test_hello_without_a_common_version_is_refused(alice: Peer) -> None:
    """§14: `protocol/version` when `hello` lists no version the server speaks."""
    reply = await alice.lobby({"type": "hello", "versions": [99, 100]})
    assert (False, "protocol/version") == (reply["ok"], reply["code"])


async def test_hello_fields_have_defaults(alice: Peer) -> None:
    """§4: a missing field with a default is filled in (`versions` defaults to [1])."""
    reply = await alice.lobby({"type": "hello"})
    assert 1 == reply["result"]["version"]


async def test_server_status_is_retained_and_online(alice: Peer) -> None:
    """§11: the retained `ServerStatus` says online, version 1 and the shard count."""
    await alice.subscribe(STATUS_TOPIC)
    found = await alice.wait_for(lambda message: message.topic == STATUS_TOPIC)
    assert found.retain is True
    assert found.data is not None
    assert "status" == found.data["type"]
    assert found.data["online"] is True
    assert 1 in found.data["versions"]
    assert found.data["shards"] >= 1
    assert found.data["started_at"] > 0


async def test_list_variants_names_every_documented_preset(alice: Peer) -> None:
    """§7 and docs/variants.md §4: the eight presets, each with its options."""
    reply = await alice.lobby({"type": "list_variants"})
    variants = reply["result"]["variants"]
    names = {variant["name"] for variant in variants}
    expected = {"basic", "block", "wrotham", "ramino_classic", "rummy500", "ramino", "knock", "gin"}
    assert expected <= names
    for variant in variants:
        assert variant["min_players"] <= variant["max_players"]
        assert {option["name"] for option in variant["options"]} <= set(variant["defaults"])


async def test_a_lobby_command_on_a_table_topic_is_refused(alice: Peer) -> None:
    """§3: `protocol/wrong_topic` for a lobby command on a table topic."""
    table = await alice.create("knock")
    reply = await alice.table(table, {"type": "hello"})
    assert "protocol/wrong_topic" == reply["code"]


async def test_a_table_command_on_the_lobby_topic_is_refused(alice: Peer) -> None:
    """§3: `protocol/wrong_topic` for a table command on the lobby topic."""
    reply = await alice.lobby({"type": "draw_stock"})
    assert "protocol/wrong_topic" == reply["code"]


async def test_a_publish_in_another_clients_name_is_dropped(alice: Peer, bob: Peer) -> None:
    """§3 and §13: a client may publish only on topics ending in its own name; the broker drops
    the rest, so the server never answers them (to anyone)."""
    spoofed = fresh_id()
    with contextlib.suppress(aiomqtt.MqttError):
        await alice.publish(
            lobby_topic(bob.name),
            encode({"id": spoofed, "cmd": {"type": "hello"}, "seq": None}),
        )
    # A round trip each on the same connections: the spoofed request would have come first.
    await alice.lobby({"type": "hello"})
    await bob.lobby({"type": "hello"})
    assert [] == alice.replies(spoofed) + bob.replies(spoofed)


async def test_another_clients_inbox_cannot_be_read(alice: Peer, bob: Peer) -> None:
    """§13: a subscription to another client's inbox delivers nothing (refused, or granted and
    filtered)."""
    with contextlib.suppress(aiomqtt.MqttError):
        await bob.subscribe(inbox_topic(alice.name))
    await alice.lobby({"type": "hello"})
    await bob.lobby({"type": "hello"})
    assert [] == [message for message in bob.received if message.topic == inbox_topic(alice.name)]


async def test_a_subscription_to_everything_delivers_nothing_private(
    deployment: Deployment, alice: Peer
) -> None:
    """§13: `ramino/v1/#` is not readable; at most public topics arrive through it, never an
    inbox nor a command."""
    (account,) = deployment.take(1)
    async with Peer(account, deployment.host, deployment.port).connected() as eve:
        with contextlib.suppress(aiomqtt.MqttError):
            await eve.subscribe("ramino/v1/#")
        table = await alice.create("knock")
        await alice.table(table, {"type": "chat", "text": "hello"})
        await eve.lobby({"type": "hello"})
        private = [
            message.topic
            for message in eve.received
            if (
                message.topic.startswith(
                    ("ramino/v1/inbox/", "ramino/v1/lobby/", "ramino/v1/presence/")
                )
                and message.topic != inbox_topic(eve.name)
            )
            or "/cmd/" in message.topic
        ]
        assert [] == private


async def test_unknown_keys_are_ignored(alice: Peer) -> None:
    """§4 and §15: the server ignores keys it does not know, in the request and the command."""
    reply = await alice.lobby({"type": "hello", "future_field": [1, 2]}, seq=None)
    assert reply["ok"] is True
    request_id = fresh_id()
    mark = len(alice.received)
    request = {"id": request_id, "cmd": {"type": "hello"}, "seq": None, "trace": {"a": 1}}
    await alice.publish(lobby_topic(alice.name), encode(request))
    assert (await alice.reply_to(request_id, after=mark))["ok"] is True


async def test_an_int_is_accepted_where_a_float_is_expected(alice: Peer) -> None:
    """§4: an int where a float is expected is accepted (`move_seconds: 30`)."""
    reply = await alice.lobby({"type": "create_table", "variant": "knock", "move_seconds": 30})
    assert reply["ok"] is True, reply


async def test_a_float_is_refused_where_an_int_is_expected(alice: Peer) -> None:
    """§4: never a float where an int is (`seats: 2.0` is `protocol/invalid`)."""
    reply = await alice.lobby({"type": "create_table", "variant": "knock", "seats": 2.0})
    assert "protocol/invalid" == reply["code"]


async def test_any_lobby_shard_is_served_with_one_shard(alice: Peer) -> None:
    """§3: with one shard a client's shard is 0 (`crc32 mod 1`)."""
    welcome = await alice.lobby({"type": "hello"})
    if welcome["result"]["shards"] == 1:
        reply = await alice.send(lobby_topic(alice.name, 0), {"type": "list_tables"})
        assert reply["ok"] is True


async def test_table_commands_for_an_unknown_table_are_refused(alice: Peer) -> None:
    """§8: `table/unknown`, with the table id from the topic in the reply."""
    reply = await alice.send(command_topic("nosuchtable0", alice.name), {"type": "resync"})
    assert ("table/unknown", "nosuchtable0") == (reply["code"], reply["table"])


async def test_the_embedded_broker_refuses_a_will_in_another_name(
    deployment: Deployment, alice: Peer
) -> None:
    """§2: the embedded broker refuses a connection whose will is on a topic the client may not
    publish on (another client's presence)."""
    if deployment.kind != "embedded":
        pytest.skip("a promise of the embedded broker only")
    (account,) = deployment.take(1)
    foreign = (presence_topic(alice.name), OFFLINE)
    assert 0 != await connack(deployment.host, deployment.port, account, foreign)
    own = (presence_topic(account.name), OFFLINE)
    assert 0 == await connack(deployment.host, deployment.port, account, own)


async def test_every_request_of_a_mixed_burst_gets_one_reply(alice: Peer) -> None:
    """§6: exactly one reply per request, whatever its outcome, for requests sent at once."""
    table = await alice.create("knock")
    commands = [
        (lobby_topic(alice.name), {"type": "hello"}),
        (lobby_topic(alice.name), {"type": "list_variants"}),
        (lobby_topic(alice.name), {"type": "draw_stock"}),
        (lobby_topic(alice.name), {"type": "create_table", "variant": "no_such"}),
        (lobby_topic(alice.name), {"type": "hello", "versions": "x"}),
        (command_topic(table, alice.name), {"type": "resync"}),
        (command_topic(table, alice.name), {"type": "start"}),
        (command_topic(table, alice.name), {"type": "draw_stock"}),
        (command_topic(table, alice.name), {"type": "sit"}),
        (command_topic("nosuchtable1", alice.name), {"type": "join"}),
    ] * 2
    ids = [fresh_id() for _ in commands]
    mark = len(alice.received)
    for request_id, (topic, command) in zip(ids, commands):
        await alice.publish(topic, encode({"id": request_id, "cmd": command, "seq": None}))
    for request_id in ids:
        await alice.reply_to(request_id, after=mark)
    await alice.lobby({"type": "hello"})
    answered = [reply["id"] for reply in alice.replies() if reply["id"] in ids]
    assert sorted(ids) == sorted(answered)
