"""§2 and docs/operations.md: a server stopped with SIGTERM leaves one retained
`ServerStatus` saying it is offline, with its real `started_at`; nothing replaces it."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import aiomqtt

from tests.conformance.deployment import START_SECONDS, Launched
from tests.conformance.wire import STATUS_TOPIC, WAIT, Peer, Received

SETTLE_SECONDS = 1.5
"""How long the status topic is watched after the offline status."""


def _offline(message: Received) -> bool:
    return message.topic == STATUS_TOPIC and message.data is not None and not message.data["online"]


async def test_sigterm_leaves_one_offline_status(private_deployment: Launched) -> None:
    """After SIGTERM the status says `online: false` with the `started_at` of the run that
    stopped, and no second status (e.g. `started_at: 0, tables: 0`) follows it. Behind
    Mosquitto, which outlives the server, a late subscriber reads that same offline status;
    the embedded broker stops with the server, so there only what arrived before the
    connection closed is checked."""
    deployment = private_deployment.deployment
    accounts = deployment.take(2)
    peer = Peer(accounts[0], deployment.host, deployment.port)
    external = private_deployment.broker is not None
    with contextlib.suppress(aiomqtt.MqttError):
        async with peer.connected(STATUS_TOPIC):
            online = await peer.wait_for(
                lambda message: (
                    message.topic == STATUS_TOPIC
                    and message.data is not None
                    and message.data["online"]
                )
            )
            assert online.data is not None
            started_at = online.data["started_at"]
            mark = peer.received.index(online) + 1
            private_deployment.server.send_signal(signal.SIGTERM)
            if external:
                offline = await peer.wait_for(_offline, after=mark, within=START_SECONDS)
                with contextlib.suppress(TimeoutError):
                    await peer.wait_for(
                        lambda message: message.topic == STATUS_TOPIC,
                        after=peer.received.index(offline) + 1,
                        within=SETTLE_SECONDS,
                    )
            else:
                # The embedded broker goes when the server's process does; whatever reached
                # the peer before that is all it can ever read (aiomqtt may notice the closed
                # socket only later, so wait for the process rather than for the peer).
                server = private_deployment.server
                await asyncio.to_thread(server.wait, START_SECONDS + WAIT)
    after = [
        message.data
        for message in peer.received[mark:]
        if message.topic == STATUS_TOPIC and message.data is not None
    ]
    if external:
        assert [started_at] == [status["started_at"] for status in after]
        assert [False] == [status["online"] for status in after]
    else:
        assert [] == [status for status in after if status["started_at"] != started_at]
    exit_code = await asyncio.to_thread(private_deployment.server.wait, START_SECONDS)
    assert 0 == exit_code
    if external:
        async with Peer(accounts[1], deployment.host, deployment.port).connected(
            STATUS_TOPIC
        ) as late:
            found = await late.wait_for(lambda message: message.topic == STATUS_TOPIC)
        assert found.data is not None
        assert (False, started_at) == (found.data["online"], found.data["started_at"])
