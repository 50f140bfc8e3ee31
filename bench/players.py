"""Bot players for the server benchmarks, in processes of their own (``bench.server``,
``bench.workers``).

``spawn_players`` starts ``count`` processes sharing the player accounts (two a table: host,
guest); each connects its players, opens its tables (seated, not started) and says it is ready;
``Players.go`` gives them the start of play and of the measured window; ``Players.tallies``
collects what each counted in the window (``Tally``). A player plays its seat with a
``bots.policies`` policy as soon as it may (or on a Poisson schedule, ``pace``), and the host
asks for a rematch when a game ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field

from bots.policies.base import find_policy
from protocol.client import Client, RequestFailed, TableSession
from protocol.game import Command
from protocol.runtime import tune_gc
from protocol.transport import Message
from server.engine import Rules, make_rules

__all__ = [
    "READY_SECONDS",
    "Players",
    "Tally",
    "WorkerSpec",
    "run_worker",
    "spawn_players",
]

REQUEST_TIMEOUT = 60.0
"""The players' request timeout: long, so a slow reply is measured rather than sent again."""
CONNECT_CONCURRENCY = 50
READY_SECONDS = 300.0
"""How long the processes may take to connect their players and open their tables."""
REPORT_SECONDS = 120.0
"""How long the processes may take to report once the window ended."""


@dataclass(frozen=True)
class WorkerSpec:
    """What one load-generator process plays."""

    index: int
    broker: str
    password: str
    players: tuple[str, ...]
    """Two per table: host, guest, host, guest, ..."""
    variant: str
    policy: str
    seed: int
    pace: float
    """Moves a second each table offers, Poisson (0: back to back)."""
    nice: int = 0
    """Added to the process's niceness (the players yield the CPU to the server and broker)."""


@dataclass
class Pacer:
    """When a table's next move is due: a Poisson schedule of ``rate`` moves a second that
    both seats follow, kept whatever the round trips (a late move is made at once)."""

    rate: float
    rng: random.Random
    due: float

    def next_due(self) -> float:
        """The time of the next move."""
        self.due += self.rng.expovariate(self.rate)
        return self.due


@dataclass
class Tally:
    """What one worker counted in the measured window (and a few totals)."""

    moves: int = 0
    """Game commands acknowledged ``ok`` in the window."""
    latencies: list[float] = field(default_factory=list)
    """Round trip of every game command answered in the window, ok or not."""
    refused: Counter[str] = field(default_factory=Counter)
    """Refused game commands in the window, by code."""
    timeouts: int = 0
    games: int = 0
    """Games that ended in the window."""
    resyncs: int = 0
    messages: int = 0
    """Messages the players received in the window."""
    bytes: int = 0
    tables: int = 0
    setup_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


@dataclass
class Window:
    """The measured window in ``time.monotonic`` seconds (the same clock in every process)."""

    start: float
    end: float
    recording: bool = False


def run_worker(spec: WorkerSpec, connection: multiprocessing.connection.Connection) -> None:
    """One load-generator process: connect, open tables, play, report (see ``worker_main``)."""
    # gmqtt warns of each publish to a connection being closed, as the players stop.
    logging.getLogger("gmqtt").setLevel(logging.ERROR)
    if spec.nice:
        os.nice(spec.nice)
    tune_gc()  # as `ramino bots` does: the players' collector pauses are not the server's
    asyncio.run(worker_main(spec, connection))


async def worker_main(spec: WorkerSpec, connection: multiprocessing.connection.Connection) -> None:
    """Connect every player, open the tables (seated, not started), say ready, wait for the
    start time, start every game and play until the window ends; send back the ``Tally``."""
    tally = Tally()
    started = time.monotonic()
    window = Window(math.inf, math.inf)

    def tap(message: Message) -> None:
        if window.recording:
            tally.messages += 1
            tally.bytes += len(message.payload)

    clients = [
        Client(name, spec.password, broker=spec.broker, request_timeout=REQUEST_TIMEOUT, tap=tap)
        for name in spec.players
    ]
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def connect(client: Client) -> None:
        async with gate:
            await client.connect()

    async def open_table(host: Client, guest: Client) -> str:
        async with gate:
            created = await host.create_table(spec.variant, seats=2)
            await guest.table(created.table).sit()
            return created.table

    await asyncio.gather(*(connect(client) for client in clients))
    pairs = list(zip(clients[0::2], clients[1::2]))
    table_ids = await asyncio.gather(*(open_table(host, guest) for host, guest in pairs))
    tally.tables = len(table_ids)
    tally.setup_seconds = time.monotonic() - started
    connection.send("ready")
    go, window.start, window.end = await asyncio.to_thread(connection.recv)
    await asyncio.sleep(max(0.0, go - time.monotonic()))
    rng = random.Random(spec.seed)
    players: list[asyncio.Task[None]] = []
    for (host, guest), table in zip(pairs, table_ids):
        pacer = Pacer(spec.pace, random.Random(rng.getrandbits(64)), go) if spec.pace > 0 else None
        for client, is_host in ((host, True), (guest, False)):
            seed = rng.getrandbits(64)
            players.append(
                asyncio.create_task(
                    play(client, table, is_host, spec.policy, seed, window, tally, pacer),
                    name=f"play-{client.username}",
                )
            )
    await asyncio.gather(*(host.table(table).start() for (host, _), table in zip(pairs, table_ids)))
    await asyncio.sleep(max(0.0, window.start - time.monotonic()))
    window.recording = True
    await asyncio.sleep(max(0.0, window.end - time.monotonic()))
    window.recording = False
    for task in players:
        task.cancel()
    for result in await asyncio.gather(*players, return_exceptions=True):
        if isinstance(result, Exception):
            tally.errors.append(repr(result))
    tally.resyncs = sum(
        session.resyncs for client in clients for session in client._sessions.values()
    )

    async def close(client: Client) -> None:
        async with gate:
            await client.close()

    await asyncio.gather(*(close(client) for client in clients))
    connection.send(tally)


async def turns(
    client: Client,
    table: str,
    is_host: bool,
    policy_name: str,
    rng: random.Random,
    finished: Callable[[], None] | None = None,
) -> AsyncIterator[tuple[TableSession, Command]]:
    """``client``'s seat at ``table``, game after game: yields the session and the command
    ``policy_name`` chooses each time the seat may act; at each game's end the host calls
    ``finished`` and asks for the rematch."""
    policy = find_policy(policy_name)
    session = client.table(table)
    rules: Rules | None = None
    async for update in session.updates():
        if update.seq != session.seq:
            continue  # a newer update is already queued
        if update.status == "finished":
            if is_host:
                if finished is not None:
                    finished()
                with contextlib.suppress(RequestFailed):
                    await session.rematch()
            continue
        seen = update.view
        if not update.legal or seen is None:
            continue
        if rules is None:
            rules = make_rules(seen.variant, seen.options, seen.players)
        yield session, policy.choose(rules, seen, update.legal, rng)


async def play(
    client: Client,
    table: str,
    is_host: bool,
    policy_name: str,
    seed: int,
    window: Window,
    tally: Tally,
    pacer: Pacer | None = None,
) -> None:
    """Play ``client``'s seat as fast as the server answers (or when ``pacer`` says), game
    after game (the host asks for the rematch); count what the window sees."""

    def finished() -> None:
        if window.recording:
            tally.games += 1

    async for session, command in turns(
        client, table, is_host, policy_name, random.Random(seed), finished
    ):
        if pacer is not None:
            await asyncio.sleep(max(0.0, pacer.next_due() - time.monotonic()))
        sent = time.monotonic()
        try:
            reply = await session.act(command, check=False)
        except RequestFailed:
            tally.timeouts += 1
            continue
        answered = time.monotonic()
        if window.start <= answered < window.end:
            tally.latencies.append(answered - sent)
            if reply.ok:
                tally.moves += 1
            else:
                tally.refused[reply.code] += 1


@dataclass
class Players:
    """Running player processes (see ``spawn_players``)."""

    processes: list[multiprocessing.process.BaseProcess]
    pipes: list[multiprocessing.connection.Connection]

    @property
    def pids(self) -> list[int]:
        """The processes' ids (for their CPU time)."""
        return [process.pid for process in self.processes if process.pid is not None]

    def go(self, go: float, start: float, end: float) -> None:
        """Play from ``go``, measure from ``start`` to ``end`` (``time.monotonic``)."""
        for pipe in self.pipes:
            pipe.send((go, start, end))

    def tallies(self) -> list[Tally]:
        """What each process counted, once the window ended.

        Raises:
            RuntimeError: a process did not report within ``REPORT_SECONDS``.
        """
        tallies: list[Tally] = []
        for pipe, process in zip(self.pipes, self.processes):
            if not pipe.poll(REPORT_SECONDS):
                raise RuntimeError(f"{process.name} did not report")
            tallies.append(pipe.recv())
        return tallies


@contextlib.contextmanager
def spawn_players(
    broker: str,
    password: str,
    names: Sequence[str],
    count: int,
    variant: str,
    policy: str,
    seed: int,
    pace: float = 0.0,
    nice: int = 0,
) -> Iterator[Players]:
    """``count`` processes (at most) playing ``len(names) // 2`` tables of ``names`` (host,
    guest, host, guest, ...), once every process has its tables ready; joined (killed if they
    hang) afterwards.

    Raises:
        RuntimeError: a process did not get its tables ready within ``READY_SECONDS``.
    """
    context = multiprocessing.get_context("spawn")
    tables = len(names) // 2
    share = math.ceil(tables / max(1, count))
    players = Players([], [])
    try:
        for index in range(count):
            mine = tuple(names[2 * share * index : 2 * share * (index + 1)])
            if not mine:
                continue
            spec = WorkerSpec(
                index, broker, password, mine, variant, policy, seed * 1_000 + index, pace, nice
            )
            ours, theirs = context.Pipe()
            started = context.Process(
                target=run_worker, args=(spec, theirs), name=f"players-{index}"
            )
            started.start()
            players.processes.append(started)
            players.pipes.append(ours)
        for pipe, process in zip(players.pipes, players.processes):
            if not pipe.poll(READY_SECONDS):
                raise RuntimeError(f"{process.name} did not get its tables ready")
            pipe.recv()
        yield players
    finally:
        for process in players.processes:
            process.join(30)
            if process.is_alive():
                process.kill()
