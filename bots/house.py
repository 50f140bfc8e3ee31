"""House bots: bots that take the free seats of public tables waiting for players.

``ramino serve --web ... --house-bots`` and ``ramino demo`` run them so that a person who
opens a public table in the web page gets opponents: a watcher reads the lobby's retained
listings, and for each free seat of a waiting public table whose seats are not all free it
connects a bot (one MQTT connection each, named ``house-N``), which sits, starts the game once
the table is full and plays one game there. Private tables are left alone (a private table is
never listed), so people play each other by invite.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable

from bots.client import Bot, Stats, TablePlan
from bots.policies import find_policy
from protocol import topics
from protocol.client import Client, RequestFailed
from protocol.codec import MalformedMessage, decode_listing
from protocol.messages import TableListing
from protocol.transport import Message

__all__ = ["HouseBots"]

_log = logging.getLogger(__name__)

_GIVE_UP = ("table/full", "table/seat_taken", "table/game_running", "table/already_seated")


class HouseBots:
    """Seat bots at the waiting public tables of the server on ``broker``."""

    def __init__(
        self,
        broker: str,
        password: str = "",
        policy: str = "greedy",
        think_ms: float = 300.0,
        prefix: str = "house",
        ignore_hosts: tuple[str, ...] = (),
    ) -> None:
        self.broker = broker
        self.password = password
        self.policy = policy
        self.think_ms = think_ms
        self.prefix = prefix
        self.ignore_hosts = ignore_hosts
        """Tables whose host's name starts with one of these are left alone."""
        self.stats = Stats()
        self._numbers = itertools.count(1)
        self._watcher = Client(f"{prefix}-lobby", password, broker=broker, tap=self._heard)
        self._listings: asyncio.Queue[TableListing] = asyncio.Queue()
        self._seating: dict[str, int] = {}
        """table -> bots on their way to a seat there."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._main: asyncio.Task[None] | None = None
        self.on_seated: Callable[[str, str], None] | None = None
        """Called with (table, bot name) when a bot has taken a seat."""

    async def start(self) -> None:
        """Connect the watcher and start seating bots.

        Raises:
            TransportError: the broker is not reachable or refuses the watcher.
        """
        self._watcher.transport.subscribe(f"{topics.PREFIX}/tables/+", qos=1)
        await self._watcher.connect()
        self._main = asyncio.create_task(self._seat_bots(), name="house-bots")

    async def stop(self) -> None:
        """Disconnect every bot and the watcher."""
        tasks = [task for task in (self._main, *self._tasks) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._watcher.close()

    def _heard(self, message: Message) -> None:
        if not message.topic.startswith(f"{topics.PREFIX}/tables/") or not message.payload:
            return
        try:
            listing = decode_listing(message.payload)
        except MalformedMessage:
            return
        self._listings.put_nowait(listing)

    async def _seat_bots(self) -> None:
        while True:
            listing = await self._listings.get()
            free = listing.seats.count("")
            if listing.status != "waiting" or free == 0 or free == len(listing.seats):
                continue
            if listing.host.startswith(self.ignore_hosts):
                continue
            wanted = free - self._seating.get(listing.table, 0)
            for _ in range(max(0, wanted)):
                self._seating[listing.table] = self._seating.get(listing.table, 0) + 1
                task = asyncio.create_task(self._play(listing))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _play(self, listing: TableListing) -> None:
        table = listing.table
        name = f"{self.prefix}-{next(self._numbers)}"
        client = Client(name, self.password, broker=self.broker)
        bot = Bot(client, find_policy(self.policy), self.stats, seed=0, think_ms=self.think_ms)
        try:
            await client.connect()
            session = client.table(table)
            try:
                await session.sit()
            except RequestFailed as error:
                if error.code not in _GIVE_UP:
                    _log.warning("house bot %s could not sit at %s: %s", name, table, error)
                return
            finally:
                self._seating[table] -= 1
            if self.on_seated is not None:
                self.on_seated(table, name)
            with contextlib.suppress(RequestFailed):
                await session.start()  # refused while a seat is still free
            await bot.play(table, 1, host=False, plan=TablePlan(listing.variant, 0))
        finally:
            await client.close()
