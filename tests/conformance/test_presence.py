"""§13 Presence: the will marks a player absent; after the grace period the server plays his
awaited turns; `online: true` (or any command) marks him back; bad presence payloads are
ignored silently."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from tests.conformance.deployment import Deployment
from tests.conformance.play import started, to_move
from tests.conformance.wire import (
    OFFLINE,
    ONLINE,
    WAIT,
    Map,
    Peer,
    Received,
    encode,
    inbox_topic,
    presence_topic,
    vanish,
)

SHORT_GRACE = 5.0
"""Longest grace a test waits out (the servers started here use 1 s)."""


def _timed_out(peer: Peer, table: str, seat: int) -> list[tuple[int, Map]]:
    """Every `timed_out` of ``seat`` in ``peer``'s updates, with its `seq`."""
    return [
        (int(logged["seq"]), logged["event"])
        for update in peer.updates(table)
        for logged in update["events"]
        if logged["event"]["type"] == "timed_out" and logged["event"]["seat"] == seat
    ]


def _has_timeout_of(
    peer: Peer, table: str, seat: int, after_seq: int
) -> Callable[[Received], bool]:
    inbox = inbox_topic(peer.name)

    def matches(message: Received) -> bool:
        return (
            message.topic == inbox
            and message.kind == "update"
            and message.data is not None
            and message.data["table"] == table
            and any(
                logged["event"]["type"] == "timed_out"
                and logged["event"]["seat"] == seat
                and logged["seq"] > after_seq
                for logged in message.data["events"]
            )
        )

    return matches


@pytest.fixture
def short_grace(deployment: Deployment) -> float:
    """The deployment's grace, when it is short enough to wait out."""
    if deployment.grace_seconds > SHORT_GRACE:
        pytest.skip(f"grace of {deployment.grace_seconds} s (give --grace-seconds if shorter)")
    return deployment.grace_seconds


async def test_after_the_will_the_server_plays_for_the_absent_seat(
    deployment: Deployment, alice: Peer, bob: Peer, short_grace: float
) -> None:
    """A connection that dies publishes the will; once the grace has run out the awaited seat
    is played for (`timed_out`, then its draw and discard), and the other seat moves next."""
    table = await started(alice, bob)
    seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    mover, other, update = await to_move([alice, bob], table, seq)
    seat = int(update["seat"])
    await vanish(deployment.host, deployment.port, mover.account)
    found = await other.wait_for(
        _has_timeout_of(other, table, seat, seq),
        within=short_grace + WAIT,
    )
    assert found.data is not None
    inbox = inbox_topic(other.name)
    await other.wait_for(
        lambda message: (
            message.topic == inbox
            and message.kind == "update"
            and message.data is not None
            and message.data["table"] == table
            and any(
                logged["event"]["type"] in ("discarded", "knocked")
                and logged["event"]["seat"] == seat
                and logged["seq"] > seq
                for logged in message.data["events"]
            )
        )
    )
    played = [
        logged["event"]
        for update in other.updates(table)
        for logged in update["events"]
        if logged["seq"] > seq
    ]
    kinds = [event["type"] for event in played]
    assert "timed_out" == kinds[0]
    assert kinds[1] in ("drew", "took_discard")


async def test_online_again_ends_the_absence(
    deployment: Deployment, alice: Peer, bob: Peer, short_grace: float
) -> None:
    """`online: true` after `online: false` marks the player back: his seat is awaited past
    the grace without the server playing for it. (Both on one connection, so the server reads
    them in this order; a will from another connection could overtake.)"""
    table = await started(alice, bob)
    seq = int((await alice.table(table, {"type": "resync"}))["result"]["seq"])
    mover, other, update = await to_move([alice, bob], table, seq)
    seat = int(update["seat"])
    await other.publish(presence_topic(other.name), OFFLINE)
    await other.publish(presence_topic(other.name), ONLINE)
    # The mover plays his turn; then the other seat is awaited.
    drew = await mover.table(table, {"type": "draw_stock"}, seq=seq)
    synced = (await mover.table(table, {"type": "resync"}))["result"]
    discard = next(command for command in synced["legal"] if command["type"] == "discard")
    done = await mover.table(table, discard, seq=drew["seq"])
    assert done["ok"], done
    with contextlib.suppress(TimeoutError):
        await other.wait_for(
            _has_timeout_of(other, table, 1 - seat, seq),
            within=short_grace + 1.5,
        )
    assert [] == _timed_out(other, table, 1 - seat)


async def test_bad_presence_payloads_are_ignored_silently(alice: Peer) -> None:
    """A presence over 256 bytes, or that does not decode, gets no reply."""
    for payload in (b"\xc1", encode({"type": "presence", "online": True, "pad": "x" * 300})):
        await alice.publish(presence_topic(alice.name), payload)
    await alice.lobby({"type": "hello"})
    codes = [reply["code"] for reply in alice.replies()]
    assert [""] == codes
