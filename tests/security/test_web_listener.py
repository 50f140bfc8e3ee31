"""The web listener of the embedded broker (``ramino serve --web``): the same authentication
and ACL over WebSockets as over TCP, and plain HTTP that serves only the built page."""

from __future__ import annotations

import asyncio
import http.client
from collections.abc import AsyncIterator

import aiomqtt
import pytest

from server.net.broker_limits import BrokerLimits
from server.net.embedded import EmbeddedBroker
from server.net.web import MQTT_PATH, STATIC_ROOT, static_site

PASSWORD = "server-secret"
REFUSED = 0x80
"""SUBACK return code of a refused filter (MQTT 3.1.1 §3.9.3)."""


@pytest.fixture
async def web_broker() -> AsyncIterator[EmbeddedBroker]:
    broker = EmbeddedBroker(
        port=0, server_password=PASSWORD, web=("127.0.0.1", 0), http=static_site()
    )
    async with broker:
        yield broker


def _get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _client(broker: EmbeddedBroker, user: str, password: str) -> aiomqtt.Client:
    return aiomqtt.Client(
        "127.0.0.1",
        broker.web_port,
        username=user,
        password=password,
        identifier=f"{user}-web",
        transport="websockets",
        websocket_path=MQTT_PATH,
        timeout=5,
    )


async def test_the_page_is_served_and_nothing_outside_it(web_broker: EmbeddedBroker) -> None:
    status, body = await asyncio.to_thread(_get, web_broker.web_port, "/")
    assert (200, (STATIC_ROOT / "index.html").read_bytes()) == (status, body)
    for path in ("/../net/web.py", "/%2e%2e/net/web.py", "/..%2fnet/web.py", "/nothing.js"):
        status, _ = await asyncio.to_thread(_get, web_broker.web_port, path)
        assert 404 == status, path


async def test_the_server_account_needs_its_password_over_websockets(
    web_broker: EmbeddedBroker,
) -> None:
    with pytest.raises(aiomqtt.MqttError):
        async with _client(web_broker, "ramino-server", "guess"):
            pass


async def test_a_websocket_client_may_not_read_another_inbox(web_broker: EmbeddedBroker) -> None:
    async with _client(web_broker, "mallory", "any") as client:
        granted = await client.subscribe("ramino/v1/inbox/alice")
        assert [REFUSED] == [code if isinstance(code, int) else code.value for code in granted]
        granted = await client.subscribe("ramino/v1/tables/+")
        assert [0] == [code if isinstance(code, int) else code.value for code in granted]


async def test_websocket_connections_count_against_the_per_user_limit() -> None:
    limits = BrokerLimits(max_connections_per_user=1)
    broker = EmbeddedBroker(
        port=0,
        server_password=PASSWORD,
        limits=limits,
        web=("127.0.0.1", 0),
        http=static_site(),
    )
    async with broker, _client(broker, "mallory", "any"):
        second = aiomqtt.Client(
            "127.0.0.1",
            broker.port,
            username="mallory",
            password="any",
            identifier="mallory-tcp",
            timeout=5,
        )
        with pytest.raises(aiomqtt.MqttError):
            async with second:
                pass
        assert 1 == broker.book.refused_connects
