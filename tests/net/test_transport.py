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


async def _subscribed(server: Transport, reader: Transport, probe_qos: int = 0) -> None:
    """Once both are connected, subscribe ``reader`` to its inbox (QoS 1) and return when the
    subscription is in place: a probe from ``server`` came back. ``reader.deliver`` is set
    again afterwards; a late probe reaches it (payload ``b"probe"``)."""
    async with asyncio.timeout(10):
        await reader.connected.wait()
        await server.connected.wait()
    inbox = topics.inbox(reader.username)
    reader.subscribe(inbox, qos=1)
    deliver, probe = reader.deliver, asyncio.Event()
    reader.deliver = lambda message: probe.set()
    try:
        async with asyncio.timeout(10):
            while not probe.is_set():
                server.publish(inbox, b"probe", qos=probe_qos)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(probe.wait(), 0.2)
    finally:
        reader.deliver = deliver


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
        await _subscribed(server, reader)
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


class _Socket:
    """What a transport writes, kept (for the byte-level checks below)."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.written.append(data)


@pytest.mark.parametrize("mqtt5", [False, True])
def test_a_qos0_publish_is_byte_for_byte_what_gmqtt_builds(mqtt5: bool) -> None:
    """QoS 0 messages skip gmqtt's publish but must leave as the same packet: checked against
    gmqtt's own builder at every size where the remaining length gains a byte."""
    from gmqtt import Message as GmqttMessage
    from gmqtt.mqtt.constants import MQTTv50, MQTTv311
    from gmqtt.mqtt.package import PublishPacket

    class _Protocol:
        proto_ver = MQTTv50 if mqtt5 else MQTTv311

    transport = Transport("server", mqtt5=mqtt5)
    socket = _Socket()
    transport._socket = socket  # type: ignore[assignment]
    topic = topics.inbox("alice")
    header = 2 + len(topic) + (1 if mqtt5 else 0)
    sizes = [0, 1, 2_000]
    for limit in (0x80, 0x4000, 0x200000):  # the remaining length takes 2, 3, 4 bytes
        sizes += [limit - header - 1, limit - header]
    for size in sizes:
        for retain in (False, True):
            payload = bytes(index % 251 for index in range(size))
            transport.publish(topic, payload, qos=0, retain=retain)
            _, expected = PublishPacket.build_package(
                GmqttMessage(topic, payload, qos=0, retain=retain), _Protocol()
            )
            assert socket.written.pop() == bytes(expected), (size, retain)


async def test_qos0_messages_arrive_whole_live_and_retained(broker: BrokerUnderTest) -> None:
    """Payloads of every header size (up to the embedded broker's packet limit of 32 KiB),
    live to a subscriber, and a retained one to a client
    that subscribes afterwards (with the retain flag), over both brokers."""
    address = parse_broker_url(broker.url)
    server = Transport(broker.server_user, broker.server_password, mqtt5=broker.kind == "mosquitto")
    reader = Transport("alice", broker.password("alice"))
    payloads = [b"", b"x", b"y" * 127, b"z" * 128, b"w" * 16_384, bytes(range(250)) * 120]
    received: list[bytes] = []
    done = asyncio.Event()

    def take(message: Message) -> None:
        if message.payload == b"probe":
            return
        received.append(message.payload)
        if len(received) == len(payloads):
            done.set()

    reader.deliver = take
    await server.connect(address)
    await reader.connect(address)
    late = Transport("bob", broker.password("bob"))
    try:
        await _subscribed(server, reader)
        for payload in payloads:
            server.publish(topics.inbox("alice"), payload, qos=0)
        async with asyncio.timeout(10):
            await done.wait()
        assert received == payloads
        # Retained: a client subscribing later is given it, marked as retained.
        listing = topics.lobby_listing("t-qos0")
        server.publish(listing, b"kept", qos=0, retain=True)
        replayed: asyncio.Queue[Message] = asyncio.Queue()
        late.deliver = replayed.put_nowait
        await late.connect(address)
        async with asyncio.timeout(10):
            await late.connected.wait()
            late.subscribe(listing, qos=1)
            while True:
                message = await replayed.get()
                if message.topic == listing:
                    break
        assert (message.payload, message.retain) == (b"kept", True)
        server.publish(listing, b"", qos=0, retain=True)  # and an empty one clears it
    finally:
        await late.close()
        await server.close()
        await reader.close()


@pytest.mark.parametrize("mqtt5", [False, True])
async def test_qos1_messages_delivered_to_a_callback_are_acknowledged(
    broker: BrokerUnderTest, mqtt5: bool
) -> None:
    """A reader with a ``deliver`` callback acknowledges each QoS 1 message itself: Mosquitto
    stops sending after 100 unacknowledged ones (deploy/'s ``max_inflight_messages``), so 500
    arriving in order, in MQTT 3.1.1 and in MQTT 5, shows every PUBACK was right."""
    if mqtt5 and broker.kind != "mosquitto":
        pytest.skip("the embedded broker speaks MQTT 3.1.1 only")
    address = parse_broker_url(broker.url)
    server = Transport(broker.server_user, broker.server_password)
    reader = Transport("alice", broker.password("alice"), mqtt5=mqtt5)
    received: list[bytes] = []
    done = asyncio.Event()
    count = 500

    def take(message: Message) -> None:
        if message.payload == b"probe":
            return
        received.append(message.payload)
        if len(received) == count:
            done.set()

    reader.deliver = take
    await reader.connect(address)
    await server.connect(address)
    try:
        await _subscribed(server, reader, probe_qos=1)
        for number in range(count):
            server.publish(topics.inbox("alice"), str(number).encode(), qos=1)
        async with asyncio.timeout(20):
            await done.wait()
    finally:
        await server.close()
        await reader.close()
    assert received == [str(number).encode() for number in range(count)]
