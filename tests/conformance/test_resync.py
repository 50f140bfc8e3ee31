"""§12 Resync and reconnection: `synced` gives the present as the requester may see it, and a
client that was away catches up from it."""

from __future__ import annotations

from tests.conformance.deployment import Deployment
from tests.conformance.play import latest_update, started, to_move
from tests.conformance.wire import Peer


async def test_resync_equals_the_last_update(alice: Peer, bob: Peer) -> None:
    """A seated player's `synced` has the table's `seq`, its seat, and the same view and legal
    commands as its last update."""
    table = await started(alice, bob)
    synced = (await alice.table(table, {"type": "resync"}))["result"]
    assert "synced" == synced["type"]
    update = await latest_update(alice, table, int(synced["seq"]))
    assert (update["seq"], update["seat"]) == (synced["seq"], synced["seat"])
    assert update["view"] == synced["view"]
    assert update["legal"] == synced["legal"]
    assert table == synced["table"]["table"]
    assert "playing" == synced["table"]["status"]


async def test_a_spectator_resync_hides_every_hand(
    deployment: Deployment, alice: Peer, bob: Peer
) -> None:
    """A spectator's `synced`: seat -1, no legal commands, an empty hand, and no card of the
    players' hands anywhere in the view."""
    table = await started(alice, bob)
    (account,) = deployment.take(1)
    async with Peer(account, deployment.host, deployment.port).connected() as watcher:
        synced = (await watcher.table(table, {"type": "resync"}))["result"]
        joined = (await watcher.table(table, {"type": "join"}))["result"]
    assert (-1, [], []) == (synced["seat"], synced["legal"], synced["view"]["hand"])
    assert synced == joined
    seq = int(synced["seq"])
    hands = set((await latest_update(alice, table, seq))["view"]["hand"]) | set(
        (await latest_update(bob, table, seq))["view"]["hand"]
    )
    shown = set(synced["view"]["pile"]) | {
        card for meld in synced["view"]["melds"] for card in meld["cards"]
    }
    assert set() == hands & shown
    assert sum(synced["view"]["hand_sizes"]) == len(hands)


async def test_a_client_that_was_away_catches_up(deployment: Deployment, alice: Peer) -> None:
    """§12 reconnection: while bob is disconnected alice moves; bob reconnects, resyncs, and
    continues from `synced` (its `seq` and `legal`)."""
    (bob_account,) = deployment.take(1)
    async with Peer(bob_account, deployment.host, deployment.port).connected() as bob:
        table = await started(alice, bob)
        seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
        mover, _, _ = await to_move([alice, bob], table, seq)
        if mover is bob:
            drew = await bob.table(table, {"type": "draw_stock"}, seq=seq)
            legal = (await bob.table(table, {"type": "resync"}))["result"]["legal"]
            discard = next(command for command in legal if command["type"] == "discard")
            seq = int((await bob.table(table, discard, seq=drew["seq"]))["seq"])
    # bob is away (a clean disconnect: no will); alice draws and discards.
    drew = await alice.table(table, {"type": "draw_stock"}, seq=seq)
    assert drew["ok"], drew
    legal = (await alice.table(table, {"type": "resync"}))["result"]["legal"]
    discard = next(command for command in legal if command["type"] == "discard")
    done = await alice.table(table, discard, seq=drew["seq"])
    assert done["ok"], done
    async with Peer(bob_account, deployment.host, deployment.port).connected() as back:
        synced = (await back.table(table, {"type": "resync"}))["result"]
        assert done["seq"] == synced["seq"]
        assert synced["legal"]
        reply = await back.table(table, synced["legal"][0], seq=synced["seq"])
        assert reply["ok"], reply
