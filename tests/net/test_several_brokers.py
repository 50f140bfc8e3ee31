"""Several broker addresses (the nodes of a cluster): the transport connects to the first that
answers and, when its broker goes away, reconnects to the next."""

from __future__ import annotations

import asyncio

import pytest

from protocol.client import Client
from protocol.transport import Transport, TransportError, parse_broker_urls
from server.net.accounts import random_password
from server.net.embedded import EmbeddedBroker
from tests.net.conftest import HOST, _free_port

WAIT = 10.0


def test_several_broker_urls_parse_in_order() -> None:
    """``--broker`` takes a comma-separated list of nodes."""
    addresses = parse_broker_urls("mqtt://h1:1884, h2:1885,mqtt://h3")
    assert [("h1", 1884), ("h2", 1885), ("h3", 1883)] == [(a.host, a.port) for a in addresses]
    with pytest.raises(ValueError, match="no broker address"):
        parse_broker_urls(" , ")


async def test_the_first_broker_that_answers_is_used() -> None:
    """A client whose first address has no broker connects to the second."""
    closed = _free_port()
    async with EmbeddedBroker(port=0, server_password=random_password()) as broker:
        client = Client("alice", "pw", broker=f"mqtt://{HOST}:{closed},{broker.url}")
        async with client:
            await client.transport.connected.wait()
            assert client.transport.address is not None
            assert broker.port == client.transport.address.port


async def test_no_broker_answering_is_an_error_naming_each() -> None:
    """No address answers: TransportError names every one."""
    ports = [_free_port(), _free_port()]
    transport = Transport("alice", "pw")
    with pytest.raises(TransportError) as error:
        await transport.connect(parse_broker_urls(",".join(f"{HOST}:{p}" for p in ports)))
    assert all(str(port) in str(error.value) for port in ports)


async def test_a_lost_broker_is_replaced_by_the_next() -> None:
    """The broker of a connection stops: the transport reconnects to the next address."""
    password = random_password()
    async with EmbeddedBroker(port=0, server_password=password) as second:
        first = EmbeddedBroker(port=0, server_password=password)
        await first.start()
        transport = Transport("alice", "pw", reconnect_delay=0.05)
        try:
            await transport.connect(parse_broker_urls(f"{first.url},{second.url}"))
            assert transport.address is not None
            assert first.port == transport.address.port
            await first.stop()
            async with asyncio.timeout(WAIT):
                await transport.lost.wait()
                await transport.connected.wait()
            assert 2 == transport.connections
            assert second.port == transport.address.port
        finally:
            await transport.close()
