"""The table runner: a match of an external bot and a built-in entrant at real server tables.

The server runs in this process on its embedded broker; the bot is an SDK connection that
answers each update with the first entry of ``legal``. The runner plays the match of one seed
(gin-2: two rotations) and the test reads the two tables' logs: the seats are the rotation's,
both tables got the same deal (the one the in-process runner deals for that seed), the
built-in seat moved (its policy, through the service) and no update was published for it, the
hand ended and the table was closed after it, and the outcome adds up.
"""

from __future__ import annotations

import random
import secrets
from fractions import Fraction
from pathlib import Path

import msgspec

from protocol import topics
from protocol.client import Client
from protocol.transport import Message, Transport
from server.engine import Dealt, HandEnded, chance, new_game
from server.ladder.entrants import builtin, external
from server.ladder.matches import chance_key
from server.ladder.pools import parse_pool
from server.ladder.runner import InlineRunner
from server.ladder.tables import TableRunner
from server.net.serve import ServeConfig, running
from server.tables.records import TableClosed
from server.tables.replay import read_rows
from tests.net.players import Inbox


class _FirstLegal:
    """An inbox tap that answers every update with legal moves by its first entry."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.tables: list[str] = []

    def __call__(self, message: Message) -> None:
        decoded = msgspec.msgpack.decode(message.payload) if message.payload else None
        if not isinstance(decoded, dict) or decoded.get("type") != "update":
            return
        if decoded["table"] not in self.tables:
            self.tables.append(decoded["table"])
        if decoded["legal"] and self.client is not None:
            command, seq = decoded["legal"][0], decoded["seq"]
            request = {"id": secrets.token_hex(8), "cmd": command, "seq": seq}
            topic = topics.table_command(decoded["table"], "alice")
            self.client.transport.publish(topic, msgspec.msgpack.encode(request), qos=1)


async def test_a_match_with_an_external_bot_is_played_at_two_closed_tables(
    tmp_path: Path,
) -> None:
    config = ServeConfig(
        broker="embedded", port=0, store=f"sqlite:///{tmp_path / 't.db'}", guests=":memory:"
    )
    pool = parse_pool("gin-2")
    seed = "tables:m1"
    async with running(config) as server:
        tap = _FirstLegal()
        bot = Client("alice", secrets.token_urlsafe(12), broker=server.address, tap=tap)
        tap.client = bot
        await bot.connect()
        # Every inbox, read with the server's account: the built-in seat's stays unused.
        inboxes = Inbox("every inbox")
        watcher = Transport(
            config.server_user, server.server_password, client_id="inbox-watcher", tap=inboxes
        )
        watcher.subscribe(f"{topics.PREFIX}/inbox/+", qos=0)
        await watcher.connect((server.address,))
        runner = TableRunner(server.service, "t", InlineRunner(), move_seconds=60)
        try:
            entrants = [external("alice", ("gin-2",)), builtin("greedy@1")]
            outcome = await runner.play(pool, entrants, seed)
        finally:
            await bot.close()
            await watcher.close()
            await runner.close()
        logs = {}
        for summary in await server.store.tables():
            logs[summary.table_id] = (summary, await read_rows(server.store, summary.table_id))
    assert {"alice"} == {message.topic.rsplit("/", 1)[1] for message in inboxes.messages}
    assert 2 == len(logs)
    assert set(tap.tables) == set(logs)
    seats = sorted(summary.seats for summary, _ in logs.values())
    assert [("alice", "greedy@1"), ("greedy@1", "alice")] == seats
    deal = chance(new_game(pool.rules()), random.Random(chance_key(seed, 1)))
    assert isinstance(deal, Dealt)
    for summary, rows in logs.values():
        events = [row.record.event for row in rows]
        dealt = [event for event in events if isinstance(event, Dealt)]
        assert [deal.order] == [event.order for event in dealt]  # one hand, the seed's deal
        ended = [index for index, event in enumerate(events) if isinstance(event, HandEnded)]
        assert 1 == len(ended)
        assert isinstance(events[-1], TableClosed)
        assert "closed" == summary.status
        # Moves of both seats: the bot's (ids scoped by its name) and the built-in seat's (the
        # runner's ids end in the table seq and the seat they moved for).
        ids = {row.command_id for row in rows}
        greedy = summary.seats.index("greedy@1")
        assert any(command.startswith("alice/") for command in ids)
        assert any(
            command.startswith("ladder-")
            and command.endswith(f":{greedy}")
            and command.count(":") == 2
            for command in ids
        )
    assert 2 == len(outcome.games)
    assert (False, False) == outcome.forfeits
    # One hand per game: the win shares of each game add up to 1, so 2 in all.
    assert Fraction(2) == sum(outcome.wins)
    assert all(game.decisions > 0 for game in outcome.games)  # greedy moved at both tables
    assert sorted(outcome.ranks) in ([1, 1], [1, 2])
