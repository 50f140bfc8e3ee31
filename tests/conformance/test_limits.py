"""§13 Limits: payload size, request rate, chat rate and field sizes, each breach answered with
its code (and the request's id where it can be read)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.conformance.deployment import Deployment
from tests.conformance.play import BACK_OFF, play_game, seat_players
from tests.conformance.wire import (
    OFFLINE,
    WAIT,
    Peer,
    chat_topic,
    connack,
    connect_packet,
    encode,
    fresh_id,
    inbox_topic,
    lobby_topic,
    peers,
    presence_topic,
)


async def test_a_payload_over_the_limit_is_refused(alice: Peer) -> None:
    """A request over `Welcome.max_payload` (16 KiB by default, under Mosquitto's 64 KiB) gets
    `limit/payload`."""
    welcome = await alice.lobby({"type": "hello", "versions": [1]})
    limit = int(welcome["result"]["max_payload"])
    request_id = fresh_id()
    padding = "x" * (limit + 100)
    payload = encode({"id": request_id, "cmd": {"type": "hello"}, "seq": None, "pad": padding})
    assert limit < len(payload) < 65536
    await alice.publish(lobby_topic(alice.name), payload)
    inbox = inbox_topic(alice.name)
    found = await alice.wait_for(
        lambda message: (
            message.topic == inbox
            and message.data is not None
            and message.data.get("code") == "limit/payload"
        )
    )
    assert found.data is not None
    assert found.data["id"] in (request_id, "")
    assert found.data["ok"] is False


async def test_a_burst_over_the_rate_is_refused_by_id_and_a_resend_is_served(
    alice: Peer,
) -> None:
    """Over the burst, requests get `limit/rate` with their own id; every request gets one
    reply (150 is within the second bucket), and resending a refused one later works."""
    welcome = await alice.lobby({"type": "hello", "versions": [1]})
    burst = int(welcome["result"]["burst"])
    count = burst + burst // 2
    ids = [fresh_id() for _ in range(count)]
    mark = len(alice.received)
    for request_id in ids:
        request = {"id": request_id, "cmd": {"type": "hello"}, "seq": None}
        await alice.publish(lobby_topic(alice.name), encode(request), qos=0)
    replies = {request_id: await alice.reply_to(request_id, after=mark) for request_id in ids}
    refused = [request_id for request_id, reply in replies.items() if not reply["ok"]]
    assert refused
    assert {"limit/rate"} == {replies[request_id]["code"] for request_id in refused}
    # The bucket held `burst` tokens before the connection's `online` presence and the hello
    # that read the burst took one each (every message the server reads is counted).
    assert count - len(refused) >= burst - 2
    # §13: back off and resend the same request; it is then served.
    async with asyncio.timeout(WAIT):
        while True:
            again = await alice.lobby({"type": "hello"}, request_id=refused[0])
            if again["ok"]:
                break
            assert "limit/rate" == again["code"]
            await asyncio.sleep(BACK_OFF)
    assert "welcome" == again["result"]["type"]


async def test_chat_over_its_rate_is_refused(alice: Peer, bob: Peer) -> None:
    """Chat: bursts of 5 lines, then `limit/chat_rate`; each accepted line is published once."""
    table = await alice.create("knock", seats=2)
    topic = chat_topic(table)
    await bob.subscribe(topic)
    replies = [await alice.table(table, {"type": "chat", "text": f"line {n}"}) for n in range(8)]
    accepted = [reply for reply in replies if reply["ok"]]
    assert 5 <= len(accepted) <= 6
    assert {"limit/chat_rate"} == {reply["code"] for reply in replies if not reply["ok"]}
    lines = await bob.collect(lambda message: message.topic == topic, len(accepted))
    assert [f"line {n}" for n, reply in enumerate(replies) if reply["ok"]] == [
        line.data["text"] for line in lines if line.data is not None
    ]
    assert {"chat_line"} == {line.kind for line in lines}
    for line in lines:
        assert line.data is not None
        assert (table, alice.name) == (line.data["table"], line.data["sender"])
        assert line.data["at"] > 0
    # After a round trip of bob's own, still no line more than was accepted.
    await bob.lobby({"type": "hello"})
    assert len(accepted) == len([message for message in bob.received if message.topic == topic])


@pytest.mark.parametrize(
    ("command", "what"),
    [
        ({"type": "create_table", "variant": "v" * 65}, "a preset name over 64 characters"),
        ({"type": "hello", "client": "c" * 129}, "hello.client over 128 characters"),
        ({"type": "hello", "versions": [1] * 17}, "more than 16 versions"),
        (
            {
                "type": "create_table",
                "variant": "basic",
                "options": {f"option{n}": 1 for n in range(65)},
            },
            "more than 64 options",
        ),
        ({"type": "create_table", "variant": "basic", "seats": 17}, "more than 16 seats"),
        ({"type": "create_table", "variant": "basic", "move_seconds": -1.0}, "negative timer"),
    ],
)
async def test_oversized_fields_are_invalid(
    alice: Peer, command: dict[str, object], what: str
) -> None:
    """§13 field sizes and §7 ranges: `protocol/invalid`, with the request's id."""
    request_id = fresh_id()
    reply = await alice.lobby(command, request_id=request_id)
    assert "protocol/invalid" == reply["code"], what
    assert request_id == reply["id"]


async def test_chat_text_sizes_are_checked(alice: Peer) -> None:
    """Chat text is 1-500 characters: empty and 501 characters are `protocol/invalid`."""
    table = await alice.create("knock", seats=2)
    longest = await alice.table(table, {"type": "chat", "text": "t" * 500})
    # Valid, so accepted (or refused only by the chat rate, when the account chatted just now).
    assert longest["ok"] or "limit/chat_rate" == longest["code"]
    for text in ("", "t" * 501):
        reply = await alice.table(table, {"type": "chat", "text": text})
        assert "protocol/invalid" == reply["code"]


async def test_an_over_long_id_is_refused_with_the_readable_id(alice: Peer) -> None:
    """§6 and §13: ids are 1-64 characters; a 65-character id is `protocol/invalid`, and the
    reply carries the id as far as it could be read (not `""`), so the client can match it."""
    request_id = "i" * 65
    mark = len(alice.received)
    await alice.publish(
        lobby_topic(alice.name), encode({"id": request_id, "cmd": {"type": "hello"}, "seq": None})
    )
    inbox = inbox_topic(alice.name)
    found = await alice.wait_for(
        lambda message: message.topic == inbox and message.kind == "reply", after=mark
    )
    assert found.data is not None
    assert "protocol/invalid" == found.data["code"]
    assert found.data["id"]
    assert request_id.startswith(found.data["id"])


async def test_a_fast_client_is_never_rate_limited(deployment: Deployment) -> None:
    """§13: the request rate (50 a second, bursts of 100) is for floods. Two clients that
    answer every update listing `legal` at once (without waiting for replies) play an ordinary
    Rummy 500 game, claim windows included, without a single `limit/rate`."""
    async with peers(deployment.host, deployment.port, deployment.take(2)) as (host, guest):
        table = await host.create("rummy500", seats=2)
        await seat_players(host, [guest], table)
        records = await play_game([host, guest], table, seed=7, pipelined=True)
    refused = [reply for record in records for reply in record.replies if not reply["ok"]]
    assert [] == [reply for reply in refused if reply["code"] == "limit/rate"]
    assert [] == [refused for record in records for refused in record.refused_legal]


async def test_the_embedded_broker_holds_back_a_client_closed_for_an_oversized_packet(
    deployment: Deployment,
) -> None:
    """§13 (the table's payload row): a packet over the embedded broker's 32 KiB closes the
    connection and charges the user a token per KiB, from a rate of 100 a second and a burst
    of 200. A PUBLISH header declaring 200 MiB charges far more than the bucket holds, so it
    is empty (it goes no lower than minus the burst, -200): the user's next CONNECT is answered
    once the bucket holds a token again, 201 tokens at 100 a second, about 2 s later; not
    sooner than 1.5 s."""
    if deployment.kind != "embedded":
        pytest.skip("a promise of the embedded broker only")
    (account,) = deployment.take(1)
    will = (presence_topic(account.name), OFFLINE)
    reader, writer = await asyncio.open_connection(deployment.host, deployment.port)
    try:
        writer.write(connect_packet(account.name, account.password, will))
        async with asyncio.timeout(WAIT):
            assert 0 == (await reader.readexactly(4))[3]
            declared = 200 * 1024 * 1024
            length = bytearray()
            while True:
                digit, declared = declared % 128, declared // 128
                length.append(digit | (0x80 if declared else 0))
                if not declared:
                    break
            writer.write(b"\x30" + bytes(length))  # the fixed header: the broker reads no more
            assert b"" == await reader.read(1024)  # closed by the broker
    finally:
        writer.transport.abort()
    closed = time.monotonic()
    assert 0 == await connack(deployment.host, deployment.port, account, will)
    assert time.monotonic() - closed >= 1.5
