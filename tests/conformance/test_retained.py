"""§11 retained state: the `TableSnapshot` and the lobby's `TableListing` equal the real state
after a burst of changes; private tables are never listed."""

from __future__ import annotations

from tests.conformance.deployment import Deployment
from tests.conformance.play import started, to_move
from tests.conformance.wire import Map, Peer, listing_topic, state_topic

SNAPSHOT_SECONDS = 5.0
"""The snapshot is republished at most once a second, and always after the last change."""


async def _retained(deployment: Deployment, topic: str) -> Map | None:
    """What a new subscriber reads first on ``topic`` (the retained message)."""
    (account,) = deployment.take(1)
    async with Peer(account, deployment.host, deployment.port).connected(topic) as reader:
        found = await reader.wait_for(lambda message: message.topic == topic)
        assert found.retain is True
        return found.data


async def _burst(alice: Peer, bob: Peer, table: str, moves: int) -> int:
    """Play ``moves`` turns (draw, then the first legal discard) as fast as replies come;
    return the table's `seq` after them."""
    seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    for _ in range(moves):
        mover, _, _ = await to_move([alice, bob], table, seq)
        drew = await mover.table(table, {"type": "draw_stock"}, seq=seq)
        assert drew["ok"], drew
        synced = (await mover.table(table, {"type": "resync"}))["result"]
        discard = next(command for command in synced["legal"] if command["type"] == "discard")
        done = await mover.table(table, discard, seq=drew["seq"])
        assert done["ok"], done
        seq = int(done["seq"])
    return seq


async def test_snapshot_equals_the_state_after_a_burst(
    deployment: Deployment, alice: Peer, bob: Peer
) -> None:
    """After a burst of moves the retained snapshot reaches the last `seq`, and then equals
    what a spectator's `resync` says (listing, view, deadline)."""
    table = await started(alice, bob, "basic")
    await alice.subscribe(state_topic(table))
    seq = await _burst(alice, bob, table, 6)
    topic = state_topic(table)
    await alice.wait_for(
        lambda message: (
            message.topic == topic and message.data is not None and message.data["seq"] == seq
        ),
        within=SNAPSHOT_SECONDS,
    )
    snapshot = await _retained(deployment, topic)
    assert snapshot is not None
    assert "snapshot" == snapshot["type"]
    assert seq == snapshot["seq"]
    (account,) = deployment.take(1)
    async with Peer(account, deployment.host, deployment.port).connected() as watcher:
        synced = (await watcher.table(table, {"type": "resync"}))["result"]
    assert -1 == synced["seat"]
    assert [] == synced["legal"]
    assert synced["view"] == snapshot["view"]
    assert synced["table"] == snapshot["table"]
    assert synced["deadline"] == snapshot["deadline"]
    assert [] == snapshot["view"]["hand"]


async def test_listing_follows_the_table(deployment: Deployment, alice: Peer, bob: Peer) -> None:
    """The retained listing shows the seats and the status as they change: waiting with a free
    seat, then playing with both players; `list_tables` gives the same listing."""
    table = await alice.create("knock", seats=2)
    listing = await _retained(deployment, listing_topic(table))
    assert listing is not None
    assert ("listing", table, [alice.name, ""], "waiting", alice.name, 0) == (
        listing["type"],
        listing["table"],
        listing["seats"],
        listing["status"],
        listing["host"],
        listing["game"],
    )
    assert (await bob.table(table, {"type": "sit"}))["ok"]
    await alice.subscribe(listing_topic(table))
    assert (await alice.table(table, {"type": "start"}))["ok"]
    topic = listing_topic(table)
    await alice.wait_for(
        lambda message: (
            message.topic == topic
            and message.data is not None
            and message.data["status"] == "playing"
        )
    )
    now = await _retained(deployment, topic)
    assert now is not None
    assert ([alice.name, bob.name], "playing", 1) == (now["seats"], now["status"], now["game"])
    listed = await alice.lobby({"type": "list_tables", "status": "playing", "variant": "knock"})
    assert now in listed["result"]["tables"]


async def test_private_tables_are_not_listed(deployment: Deployment, alice: Peer) -> None:
    """A private table is left out of `list_tables`; its listing topic holds nothing or an
    empty retained payload."""
    reply = await alice.lobby({"type": "create_table", "variant": "knock", "private": True})
    table = reply["result"]["table"]
    listed = await alice.lobby({"type": "list_tables"})
    assert table not in [listing["table"] for listing in listed["result"]["tables"]]
    (account,) = deployment.take(1)
    async with Peer(account, deployment.host, deployment.port).connected(
        listing_topic(table)
    ) as reader:
        await reader.lobby({"type": "hello"})
        assert all(
            message.data is None
            for message in reader.received
            if message.topic == listing_topic(table)
        )
