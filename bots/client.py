"""Headless bot players over the network: the SDK plus a policy, like any third-party client.

A ``Bot`` is one connected player. It plays whatever seat it holds from the updates it gets —
its own view and legal actions, never more — choosing with its policy, after ``think_ms``.
``run_bots`` groups bots into tables (the first of each group creates the table, the others
sit, the host starts it), plays ``games`` games at each (rematch after each) and keeps
``Stats`` that a caller can print as a live summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from bots.policies.base import Policy, find_policy
from protocol.client import Client, GameUpdate, RequestFailed
from server.engine import Rules, make_rules
from server.net.logs import get_logger
from server.net.metrics import BotMetrics

__all__ = ["Bot", "Stats", "TablePlan", "TableProgress", "run_bots"]

_log = get_logger("ramino.bots")


@dataclass
class Stats:
    """What a set of bots has done so far."""

    started: float = field(default_factory=time.monotonic)
    moves: int = 0
    games: int = 0
    errors: int = 0
    resyncs: int = 0
    tables: dict[str, TableProgress] = field(default_factory=dict)
    metrics: BotMetrics | None = None
    """Where each move's reply and round trip are counted (``ramino bots --metrics``)."""

    def moves_per_second(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.moves / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        """A one-line summary."""
        return (
            f"{self.games} games finished, {self.moves} moves ({self.moves_per_second():.0f}/s), "
            f"{self.errors} errors, {self.resyncs} resyncs, {len(self.tables)} tables"
        )


@dataclass
class TableProgress:
    """One table as the bots see it: variant, hand, scores, games done."""

    table: str
    variant: str
    players: tuple[str, ...] = ()
    hand: int = 0
    seq: int = 0
    scores: tuple[str, ...] = ()
    games: int = 0
    status: str = "waiting"
    winners: tuple[str, ...] = ()


@dataclass
class TablePlan:
    """A table to open: its variant, options and how many bots sit there."""

    variant: str
    seats: int
    options: dict[str, object] = field(default_factory=dict)
    move_seconds: float = 0.0


class Bot:
    """One bot player: an SDK client and a policy."""

    def __init__(
        self,
        client: Client,
        policy: Policy,
        stats: Stats,
        seed: int,
        think_ms: float = 0.0,
    ) -> None:
        self.client = client
        self.policy = policy
        self.stats = stats
        self.rng = random.Random(seed)
        self.think_ms = think_ms
        self._rules: dict[tuple[str, int], Rules] = {}

    @property
    def name(self) -> str:
        return self.client.username

    async def play(self, table: str, games: int, host: bool, plan: TablePlan) -> None:
        """Play ``games`` games at ``table`` (the host starts each game)."""
        session = self.client.table(table)
        progress = self.stats.tables.setdefault(table, TableProgress(table, plan.variant))
        played = 0
        async for update in session.updates():
            if update.view is not None:
                progress.hand = update.view.hand_number
                progress.scores = update.view.scores
                progress.seq = max(progress.seq, update.seq)
                progress.status = update.status
            if update.status == "finished" and update.seq == session.seq:
                played += 1
                if host:
                    self.stats.games += 1
                    progress.games += 1
                    if update.view is not None:
                        progress.winners = tuple(str(seat) for seat in update.view.winners)
                if played >= games:
                    return
                if host:
                    await self._rematch(table)
                continue
            if update.legal and update.view is not None and update.seq == session.seq:
                await self._move(update)

    async def _rematch(self, table: str) -> None:
        try:
            await self.client.table(table).rematch()
        except RequestFailed as error:
            if error.code != "table/game_running":
                raise

    async def _move(self, update: GameUpdate) -> None:
        assert update.view is not None
        seen = update.view
        key = (seen.variant, seen.players)
        rules = self._rules.get(key)
        if rules is None:
            rules = make_rules(seen.variant, seen.options, seen.players)
            self._rules[key] = rules
        if self.think_ms:
            await asyncio.sleep(self.think_ms / 1000)
        command = self.policy.choose(rules, seen, update.legal, self.rng)
        session = self.client.table(update.table)
        if update.seq != session.seq:
            return  # the table moved on while we thought: the next update decides
        started = time.perf_counter()
        reply = await session.act(command, check=False)
        if self.stats.metrics is not None:
            self.stats.metrics.acted(command, reply, time.perf_counter() - started)
        if reply.ok:
            self.stats.moves += 1
        elif reply.code != "table/stale_seq":
            self.stats.errors += 1
            _log.warning(
                "move refused",
                bot=self.name,
                table=update.table,
                code=reply.code,
                message=reply.message,
            )


async def run_bots(
    broker: str,
    plans: Sequence[TablePlan],
    policy: str = "greedy",
    games: int = 1,
    think_ms: float = 0.0,
    password: str = "",
    prefix: str = "",
    stats: Stats | None = None,
    tables: Sequence[str] = (),
    on_connected: Callable[[list[Bot]], None] | None = None,
) -> Stats:
    """Connect one bot per seat of ``plans`` (or sit them at the existing ``tables``), play
    ``games`` games at each table, disconnect; return the stats.

    Raises:
        TransportError: the broker is not reachable or refuses the bots.
    """
    stats = stats or Stats()
    prefix = prefix or f"bot-{secrets.token_hex(2)}"
    count = sum(plan.seats for plan in plans)
    bots = [
        Bot(
            Client(f"{prefix}-{index + 1}", password, broker=broker),
            find_policy(policy),
            stats,
            seed=index,
            think_ms=think_ms,
        )
        for index in range(count)
    ]
    connected: list[Bot] = []
    try:
        for bot in bots:
            await bot.client.connect()
            connected.append(bot)
        if on_connected is not None:
            on_connected(bots)
        games_left: list[Coroutine[Any, Any, None]] = []
        cursor = 0
        for number, plan in enumerate(plans):
            group = bots[cursor : cursor + plan.seats]
            cursor += plan.seats
            existing = tables[number] if number < len(tables) else ""
            table = await _open(group, plan, existing)
            stats.tables.setdefault(table, TableProgress(table, plan.variant)).players = tuple(
                bot.name for bot in group
            )
            games_left.extend(
                bot.play(table, games, host=index == 0, plan=plan)
                for index, bot in enumerate(group)
            )
        await asyncio.gather(*games_left)
    finally:
        for bot in connected:
            with contextlib.suppress(Exception):
                await bot.client.close()
        stats.resyncs = sum(
            session.resyncs for bot in bots for session in bot.client.sessions.values()
        )
    return stats


async def _open(group: Sequence[Bot], plan: TablePlan, existing: str) -> str:
    """Create (or join) the table of ``group``, seat everyone and start the game."""
    host = group[0]
    if existing:
        table = existing
        for bot in group:
            await bot.client.table(table).sit()
    else:
        created = await host.client.create_table(
            plan.variant,
            seats=plan.seats,
            options=plan.options,
            move_seconds=plan.move_seconds,
        )
        table = created.table
        for bot in group[1:]:
            await bot.client.table(table).sit()
    try:
        await host.client.table(table).start()
    except RequestFailed as error:
        if error.code not in ("table/not_full", "table/game_running"):
            raise
    return table
