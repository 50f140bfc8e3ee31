"""Mosquitto's WebSocket listener (deploy/mosquitto/mosquitto.conf, ``protocol websockets``)
and ``ramino serve --web HOST:PORT --web-broker URL`` with Mosquitto as the broker.

Over WebSockets a player logs in with the same accounts and is bound by the same ACL as over
TCP. Access is checked by delivery, as in test_brokers.py: a message the client may receive,
sent after the forbidden one over the same connection, must be the first to arrive.
"""

from __future__ import annotations

import asyncio
import http.client
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiomqtt
import pytest

from protocol import topics
from server.net.accounts import random_password
from server.net.serve import ServeConfig, running
from server.net.web import BROKER_META, MQTT_PATH, STATIC_ROOT
from tests.net.conftest import MosquittoBroker
from tests.net.test_brokers import connected, next_message


@asynccontextmanager
async def over_websockets(
    broker: MosquittoBroker, name: str, password: str | None = None
) -> AsyncIterator[aiomqtt.Client]:
    """An aiomqtt client of ``name`` on Mosquitto's WebSocket listener (path /mqtt, as the web
    page connects)."""
    async with aiomqtt.Client(
        broker.host,
        broker.websockets_port,
        username=name,
        password=broker.password(name) if password is None else password,
        identifier=f"{name}-ws-{random_password()[:8]}",
        transport="websockets",
        websocket_path=MQTT_PATH,
        timeout=10,
    ) as client:
        yield client


async def test_a_player_over_websockets_reads_her_inbox_and_no_other(
    mosquitto: MosquittoBroker,
) -> None:
    """alice, logged in over WebSockets, subscribes to her inbox, bob's and every inbox; the
    server writes to bob's inbox, then to hers: the first message she gets is hers."""
    async with (
        connected(mosquitto, mosquitto.server_user) as server,
        over_websockets(mosquitto, "alice") as alice,
    ):
        await alice.subscribe(topics.inbox("alice"), qos=1)
        await alice.subscribe(topics.inbox("bob"), qos=1)
        await alice.subscribe(f"{topics.PREFIX}/inbox/+", qos=1)
        await server.publish(topics.inbox("bob"), b"bob's hand", qos=1)
        await server.publish(topics.inbox("alice"), b"alice's hand", qos=1)
        first = await next_message(alice)
    assert (topics.inbox("alice"), b"alice's hand") == (first.topic.value, first.payload)


async def test_a_player_over_websockets_cannot_speak_for_another(
    mosquitto: MosquittoBroker,
) -> None:
    """alice's command on bob's topic, sent over WebSockets, never reaches the server; her own
    command sent after it does."""
    async with (
        connected(mosquitto, mosquitto.server_user) as server,
        over_websockets(mosquitto, "alice") as alice,
    ):
        for subscription in topics.SERVER_SUBSCRIPTIONS:
            await server.subscribe(subscription, qos=1)
        await alice.publish(topics.table_command("t1", "bob"), b"forged", qos=1)
        await alice.publish(topics.lobby_command("bob"), b"forged", qos=1)
        await alice.publish(topics.table_command("t1", "alice"), b"marker", qos=1)
        first = await next_message(server)
    assert (topics.table_command("t1", "alice"), b"marker") == (first.topic.value, first.payload)


async def test_a_wrong_password_is_refused_over_websockets(mosquitto: MosquittoBroker) -> None:
    """The WebSocket listener checks the password file like the TCP one."""
    with pytest.raises(aiomqtt.MqttCodeError) as refused:
        async with over_websockets(mosquitto, "alice", password="not-her-password"):
            pass
    assert "Not authorized" == str(refused.value.rc)


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


async def test_serve_web_with_mosquitto_serves_the_page_naming_its_websocket_url(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """``ramino serve --broker mqtt://... --web 127.0.0.1:0 --web-broker ws://.../mqtt``: the
    page's index.html names the broker's WebSocket URL in its ``<meta>``, its other files are
    served as built, and the page's port takes no MQTT (a WebSocket upgrade there is a 404)."""
    url = f"ws://127.0.0.1:{mosquitto.websockets_port}{MQTT_PATH}"
    config = ServeConfig(
        broker=mosquitto.url,
        store=f"sqlite:///{tmp_path / 'events.db'}",
        server_password=mosquitto.server_password,
        web="127.0.0.1:0",
        web_broker=url,
        mqtt5=True,
    )
    async with running(config) as server:
        assert server.web_url.startswith("http://127.0.0.1:")
        port = int(server.web_url.rstrip("/").rpartition(":")[2])
        index = await asyncio.to_thread(_get, port, "/")
        script = await asyncio.to_thread(_get, port, "/app.js")
        upgrade = await asyncio.to_thread(
            _get,
            port,
            MQTT_PATH,
            {
                "Connection": "Upgrade",
                "Upgrade": "websocket",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                "Sec-WebSocket-Version": "13",
            },
        )
    meta = f'<meta name="{BROKER_META}" content="{url}">'.encode()
    original = (STATIC_ROOT / "index.html").read_bytes()
    assert 200 == index[0]
    assert original == index[1].replace(b"\n" + meta, b"", 1)
    assert index[1].index(meta) < index[1].index(b"</head>")
    assert (200, (STATIC_ROOT / "app.js").read_bytes()) == script
    assert 404 == upgrade[0]
