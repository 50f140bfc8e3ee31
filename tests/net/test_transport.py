"""The transport over a real broker: what the broker's flow control asks of a busy publisher."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from protocol import topics
from protocol.transport import Message, Transport, parse_broker_url

from .conftest import BrokerUnderTest

COUNT = 1_000
"""QoS 1 messages published at once: ten times what deploy/'s Mosquitto lets a client have
unacknowledged (``max_inflight_messages 100``, its MQTT 5 "receive maximum")."""


async def test_a_burst_of_qos1_messages_past_the_brokers_window_all_arrive_in_order(
    broker: BrokerUnderTest,
) -> None:
    address = parse_broker_url(broker.url)
    server = Transport(broker.server_user, broker.server_password, mqtt5=broker.kind == "mosquitto")
    reader = Transport("alice", broker.password("alice"))
    received: list[bytes] = []
    done = asyncio.Event()

    def take(message: Message) -> None:
        if message.payload == b"probe":
            return
        received.append(message.payload)
        if len(received) == COUNT:
            done.set()

    reader.deliver = take
    await reader.connect(address)
    await server.connect(address)
    try:
        async with asyncio.timeout(10):
            await reader.connected.wait()
            await server.connected.wait()
        reader.subscribe(topics.inbox("alice"), qos=1)
        # The subscription is in place once a probe comes back.
        probe = asyncio.Event()
        reader.deliver = lambda message: probe.set()
        async with asyncio.timeout(10):
            while not probe.is_set():
                server.publish(topics.inbox("alice"), b"probe", qos=0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(probe.wait(), 0.2)
        reader.deliver = take
        for number in range(COUNT):  # no await: no acknowledgement can come in between
            server.publish(topics.inbox("alice"), str(number).encode(), qos=1)
        async with asyncio.timeout(20):
            await done.wait()
    finally:
        await server.close()
        await reader.close()
    assert received == [str(number).encode() for number in range(COUNT)]


async def test_subscriptions_wait_for_a_packet_id_when_the_window_is_full(
    broker: BrokerUnderTest,
) -> None:
    """A SUBSCRIBE or UNSUBSCRIBE needs a packet id, as a QoS 1 PUBLISH does: with the broker's
    window full of unacknowledged messages (Mosquitto's MQTT 5 "receive maximum" of 100) they
    wait for acknowledgements and go in the order they were asked for (gmqtt raised
    ``OverflowError`` instead, and the subscription was lost). Here the server stops reading
    alice's lobby topic and starts reading her presence topic while the window is full; alice
    then publishes on both, and only the second arrives."""
    if broker.kind != "mosquitto":
        pytest.skip("only Mosquitto sets a receive maximum: the embedded broker allows 65,535")
    address = parse_broker_url(broker.url)
    server = Transport(broker.server_user, broker.server_password, mqtt5=True)
    alice = Transport("alice", broker.password("alice"))
    before, after = topics.lobby_command("alice"), topics.presence("alice")
    received: list[Message] = []
    arrived = asyncio.Event()

    def take(message: Message) -> None:
        received.append(message)
        arrived.set()

    server.deliver = take
    await server.connect(address)
    await alice.connect(address)
    try:
        async with asyncio.timeout(10):
            await server.connected.wait()
            await alice.connected.wait()
        server.subscribe(before, qos=0)
        async with asyncio.timeout(10):  # the subscription is in place once a probe arrives
            while not arrived.is_set():
                alice.publish(before, b"probe", qos=0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), 0.2)
        for number in range(COUNT):  # no await: the window fills up
            server.publish(topics.inbox("alice"), str(number).encode(), qos=1)
        server.unsubscribe(before)
        server.subscribe(after, qos=0)
        assert server.deferred >= 1
        async with asyncio.timeout(20):  # the new subscription is in place once a probe arrives
            while not any(message.topic == after for message in received):
                alice.publish(after, b"probe", qos=0)
                arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), 0.2)
        # Sent after the unsubscribe, the subscription is in place: so is the unsubscribe.
        received.clear()
        arrived.clear()
        alice.publish(before, b"not read", qos=0)
        alice.publish(after, b"read", qos=0)
        async with asyncio.timeout(10):  # a late probe may come first
            while (after, b"read") not in [(m.topic, m.payload) for m in received]:
                arrived.clear()
                await arrived.wait()
    finally:
        await server.close()
        await alice.close()
    assert [message.payload for message in received if message.topic == before] == []
