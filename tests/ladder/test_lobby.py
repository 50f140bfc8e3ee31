"""The ladder's lobby commands over MQTT: ``ladder_join``, ``ladder_leave``, ``ladder_status``
and their error codes (the server on its embedded broker, an SDK client)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from protocol.client import Client, RequestFailed
from protocol.messages import AnyCommand, LadderEntry, LadderJoin, LadderLeave, LadderStatus
from server.net.serve import ServeConfig, running
from tests.ladder.conftest import enter


async def _entry(client: Client, command: AnyCommand) -> LadderEntry:
    reply = await client.request(command)
    assert isinstance(reply.result, LadderEntry)
    return reply.result


async def _code(client: Client, command: AnyCommand) -> str:
    with pytest.raises(RequestFailed) as refused:
        await client.request(command)
    return refused.value.code


async def test_join_status_leave_and_their_refusals(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lobby.db'}"
    await enter(url, ["random@1"])  # one entrant: no match can be made, nothing moves
    config = ServeConfig(
        broker="embedded",
        port=0,
        store=url,
        guests=":memory:",
        ladder="main",
        ladder_pools="gin-2,knock-2",
    )
    async with running(config) as server:
        async with Client("carol", secrets.token_urlsafe(12), broker=server.address) as carol:
            before = await _entry(carol, LadderStatus())
            assert ("main", "ext:carol", (), False) == (
                before.ladder,
                before.entrant,
                before.pools,
                before.active,
            )
            assert "ladder/not_joined" == await _code(carol, LadderLeave())
            assert "ladder/bad_pool" == await _code(carol, LadderJoin(pools=("rummy500-3",)))
            assert "ladder/not_running" == await _code(carol, LadderJoin(ladder="other"))
            # No pools named: every pool of the ladder.
            joined = await _entry(carol, LadderJoin())
            assert (("gin-2", "knock-2"), True) == (joined.pools, joined.active)
            narrowed = await _entry(carol, LadderJoin(ladder="main", pools=("knock-2",)))
            assert (("knock-2",), True) == (narrowed.pools, narrowed.active)
            assert ("knock-2",) == (await _entry(carol, LadderStatus(ladder="main"))).pools
            left = await _entry(carol, LadderLeave())
            assert (("knock-2",), False, 0.0) == (left.pools, left.active, left.suspended_until)
            assert "ladder/not_joined" == await _code(carol, LadderLeave())
        assert server.ladder is not None
        state = server.ladder.ladder.state
        entrant = state.entrants["ext:carol"]
        assert ("external", "knock-2", False) == (
            entrant.kind,
            entrant.spec,
            state.active["ext:carol"],
        )


async def test_a_server_without_a_ladder_says_so(tmp_path: Path) -> None:
    config = ServeConfig(
        broker="embedded", port=0, store=f"sqlite:///{tmp_path / 'none.db'}", guests=":memory:"
    )
    async with running(config) as server:
        assert server.ladder is None
        async with Client("dave", secrets.token_urlsafe(12), broker=server.address) as dave:
            for command in (LadderJoin(), LadderLeave(), LadderStatus()):
                assert "ladder/not_running" == await _code(dave, command)
