"""The transport over a real broker: what the broker's flow control asks of a busy publisher."""

from __future__ import annotations

import asyncio
import contextlib

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
