"""``GET /replay/TABLE`` on the web listener: a finished game's replay, refused for a game that
is still being played.

The server runs in this process (``ramino serve --web``'s code: the embedded broker with its
WebSocket listener, a SQLite store in a temporary folder); bots play over MQTT; the replay is
fetched over HTTP like the page fetches it.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bots.client import TablePlan, run_bots
from protocol.client import Client
from server.net.serve import Running, ServeConfig, running
from server.net.web import REPLAY_PATH

SECONDS = 120.0


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Running]:
    config = ServeConfig(
        store=f"sqlite:///{tmp_path / 'events.db'}",
        port=0,
        guests=":memory:",
        web="127.0.0.1:0",
    )
    async with running(config) as started:
        yield started


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


async def _replay(server: Running, table: str, query: str = "") -> tuple[int, Any]:
    url = f"{server.web_url.rstrip('/')}{REPLAY_PATH}{table}{query}"
    return await asyncio.to_thread(_get, url)


async def test_an_unfinished_game_is_refused_and_a_finished_one_replayed(server: Running) -> None:
    async with asyncio.timeout(SECONDS):
        # A table whose game is being played: nobody moves after the deal.
        alice = Client("alice", "pw", broker=server.address.url)
        bob = Client("bob", "pw", broker=server.address.url)
        await alice.connect()
        await bob.connect()
        try:
            created = await alice.create_table("knock", options={"deals": 1})
            await bob.table(created.table).sit()
            await bob.table(created.table).start()
            for viewer in ("all", "0", "1", "spectator", "alice"):
                status, body = await _replay(server, created.table, f"?as={viewer}")
                assert (409, "replay/game_in_progress") == (status, body["code"]), viewer
                assert "steps" not in body
            status, body = await _replay(server, created.table, "?game=1")
            assert (409, "replay/game_in_progress") == (status, body["code"])
        finally:
            await alice.close()
            await bob.close()

        # A table waiting for players has no game to replay either.
        waiting = Client("carol", "pw", broker=server.address.url)
        await waiting.connect()
        try:
            lonely = await waiting.create_table("gin")
        finally:
            await waiting.close()
        status, body = await _replay(server, lonely.table)
        assert (409, "replay/game_in_progress") == (status, body["code"])

        assert (404, "table/unknown") == _code(await _replay(server, "nosuchtable"))
        assert (404, "table/unknown") == _code(await _replay(server, "..%2F..%2Fetc"))

        # Two bots play two Knock Rummy games of one deal each (a rematch) to their end.
        stats = await run_bots(
            server.address.url, [TablePlan("knock", 2, {"deals": 1})], prefix="kb", games=2
        )
        (table,) = stats.tables
        assert (404, "replay/no_such_game") == _code(await _replay(server, table, "?game=3"))
        assert (404, "replay/no_such_game") == _code(await _replay(server, table, "?game=x"))
        assert (400, "replay/bad_viewer") == _code(await _replay(server, table, "?as=7"))
        assert (400, "replay/bad_viewer") == _code(await _replay(server, table, "?as=zed"))

        status, last = await _replay(server, table)
        assert (200, 2, [1, 2], "all") == (status, last["game"], last["games"], last["viewer"])
        status, everyone = await _replay(server, table, "?as=all&game=1")
        assert 200 == status
        status, first = await _replay(server, table, "?as=kb-1&game=1")
        assert 200 == status
        status, seat0 = await _replay(server, table, "?as=0&game=1")
        assert 200 == status
        assert seat0 == (await _replay(server, table, "?as=0&game=1"))[1]  # asked again
    assert first == seat0  # a player's name is his seat's viewpoint
    assert last["steps"][0]["text"].startswith("game 2 starts")
    assert everyone["steps"][0]["text"].startswith("game 1 starts")
    assert ("knock", ["kb-1", "kb-2"], 1, [1, 2], 0) == (
        seat0["variant"],
        seat0["players"],
        seat0["game"],
        seat0["games"],
        seat0["viewer"],
    )
    types = [step["type"] for step in everyone["steps"]]
    # A game's log: it starts, the deck is committed, the hand dealt, moves; the hand and the
    # game end (a knock ends a one-deal game) and the deck is revealed.
    assert ["game_started", "deck_committed", "dealt"] == types[:3]
    assert ["knocked", "hand_ended", "game_ended", "deck_revealed"] == types[-4:]
    assert [step["seq"] for step in everyone["steps"]] == [step["seq"] for step in seat0["steps"]]
    assert sorted(step["seq"] for step in everyone["steps"]) == [
        step["seq"] for step in everyone["steps"]
    ]

    dealt_all = everyone["steps"][2]["table"]["hands"]
    dealt_seat0 = seat0["steps"][2]["table"]["hands"]
    # Knock Rummy deals ten cards each to two players (RULES.md); everyone sees both hands,
    # seat 0 its own and ten hidden cards.
    assert [10, 10] == [len(hand) for hand in dealt_all]
    assert dealt_all[0] == dealt_seat0[0]
    assert [-1] * 10 == dealt_seat0[1]

    # Seat 0 never sees a card seat 1 held before the hand ends, unless it was shown on
    # the pile (the discards) or taken from it, or in the melds a knock shows (RULES.md: the
    # knocker shows his melds).
    ended = types.index("hand_ended")
    held = {card for step in everyone["steps"][:ended] for card in step["table"]["hands"][1]}
    public = {card for step in everyone["steps"] for card in step["table"]["pile"]}
    public |= {
        card
        for step in everyone["steps"]
        if step["type"] == "knocked"
        for meld in step["event"]["melds"]
        for card in meld["cards"]
    }
    for step in seat0["steps"][:ended]:
        seen = _cards(step["event"]) | _cards(step["table"])
        assert not (seen & held) - public, step["text"]
    # At the end the hand_ended event shows both hands to everyone, and so does the table from
    # then on, for every viewpoint.
    shown = everyone["steps"][ended]["event"]["hands"]
    assert shown == seat0["steps"][ended]["event"]["hands"]
    assert sorted(shown[1]) == sorted(seat0["steps"][ended]["table"]["hands"][1])
    assert 10 == len(shown[1])  # the knocker's opponent still holds ten cards


def _code(answer: tuple[int, Any]) -> tuple[int, str]:
    return answer[0], answer[1]["code"]


_CARD_KEYS = ("card", "cards", "order", "hand", "hands", "pile", "taken", "melds")


def _cards(value: dict[str, Any]) -> set[int]:
    """The cards in an event or a table: the values under the keys that hold cards."""
    found: set[int] = set()

    def collect(item: Any) -> None:
        if isinstance(item, int) and not isinstance(item, bool):
            found.add(item)
        elif isinstance(item, list):
            for inner in item:
                collect(inner)
        elif isinstance(item, dict):
            collect(item.get("cards", []))

    for key in _CARD_KEYS:
        item = value.get(key, [])
        if isinstance(item, list):  # ``hand`` is also a hand's number (deck_committed)
            collect(item)
    found.discard(-1)
    return found
