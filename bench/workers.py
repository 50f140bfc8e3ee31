"""Scale-out workers: throughput with 1 and 2 workers, failover time, recovery of many tables.

Run with ``python -m bench.workers [--parts throughput,failover,recovery] [--tables N]
[--seconds S] [--repeats N] [--policy P] [--failover-tables N] [--recovery-tables N] [--lease-ttl S]
[--postgres URL]``. One run starts one Mosquitto with deploy/'s config (as ``bench.server``
does) and uses throw-away PostgreSQL databases; every worker is a process of its own (``ramino
serve --worker``, through ``--serve-child`` to lift the per-client rate limit as
``bench.server`` does). Three parts, in one run:

1. **throughput**: ``--tables`` tables of two SDK bot players (``bench.players``, in
   ``--player-processes`` processes, playing ``--policy``: ``random`` by default, the lightest
   there is) playing back to back, served first by one worker holding both lobby shards, then
   by two workers holding one each (the tables follow their host's shard); after ``--warmup``
   seconds, ``--seconds`` are measured: moves acknowledged ``ok`` a second, the command round
   trip p50/p99, and the CPU time of the workers (and how long they waited for a CPU),
   Mosquitto, the players and the whole machine. Printed, each labelled: the measured ratio
   of the two rates (target ``>= 1.7``), which on a machine whose cores the players and the
   broker share says how much CPU was left for a second worker rather than whether the
   server scales; and the ratio per worker core: moves per worker CPU second with two workers
   over the same with one, and what it projects for two workers with a core each. With
   ``--repeats N`` the pair of cases runs N times, one pair after the other, and the medians
   of the pairs' ratios are printed last.
2. **failover**: ``--failover-tables`` open tables written into the store (games started,
   ``--moves`` random moves each), adopted by worker w1 at its start; then w2 joins and takes
   its share of them (the balancer). Once that has settled a probe player makes a move at its
   table through the worker holding it; that worker is killed (SIGKILL) and the probe at
   once sends its next move, resent every ``PROBE_RETRY`` seconds with the same id until
   answered: the failover time is from the kill to that move's ``ok`` (target < 10 s; lease
   ``--lease-ttl``).
3. **recovery**: ``--recovery-tables`` open tables (snapshots every ``SNAPSHOT_EVERY`` events,
   so each loads from a snapshot and a tail), no worker; a fresh worker starts: the time from
   its start to its "serving" line, and the time (and CPU time) it took to take every table
   over (load, republish, subscribe; target < 10 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bench.players import spawn_players
from bench.server import (
    RATE,
    Broker,
    Usage,
    fresh_store,
    machine_cpu,
    percentile,
    process_usage,
    start_broker,
    stop_process,
    verdict,
)
from protocol.client import Client
from server.engine import awaiting, is_over, legal_actions
from server.net.embedded import SERVER_USER
from server.net.gateway import Limits
from server.net.serve import ServeConfig, serve
from server.tables.actor import TableActor
from server.tables.postgres_store import PostgresStore
from server.tables.records import Record
from server.tables.table import CreateTable, Sit, StartGame, TableState, empty_table

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT_EVERY = 16
"""Snapshots in the recovery part's tables (the server's default is 200: with a few dozen
events a table would load from its whole log)."""
PROBE_RETRY = 0.1
"""Seconds between the failover probe's resends of its move."""
PROBES = ("probe0", "probe1")
SCALE_TARGET = 1.7
"""Moves/s with 2 workers over moves/s with 1 (issue 18)."""
IDLE_SECONDS = 2.0
"""Seconds the workers' CPU is measured with no players, before each throughput case."""
RECOVERY_TARGET = 10.0
"""Seconds for a fresh worker to load 10,000 open tables (issue 18)."""


# --- workers as processes --------------------------------------------------------------------


def serve_child() -> None:
    """``--serve-child``: ``serve`` as ``ramino serve`` runs it (settings from ``RAMINO_*``),
    with the per-client rate limit lifted."""
    from server.net.logs import configure_logging

    configure_logging("text", "warning")
    config = ServeConfig.from_env(limits=Limits(rate=RATE, burst=RATE))
    asyncio.run(serve(config))


@dataclass
class WorkerProcess:
    """A worker process and the file its output goes to."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    started: float

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 300.0, after: int = 0) -> re.Match[str]:
        """The first match of ``pattern`` in the output from character ``after`` on (polled:
        a benchmark, not a test)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output()[after:])
            if found is not None:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"worker {self.name}: no {pattern!r}; its output:\n{self.output()}")


def start_worker(
    broker: Broker, store: str, name: str, folder: Path, shards: int = 2, ttl: float = 5.0
) -> WorkerProcess:
    """Worker ``name``, once it says it is serving."""
    log = folder / f"{name}-{time.monotonic_ns()}.log"
    environment = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "RAMINO_BROKER": broker.url,
        "RAMINO_STORE": store,
        "RAMINO_SERVER_USER": SERVER_USER,
        "RAMINO_SERVER_PASSWORD": broker.server_password,
        "RAMINO_WORKER": name,
        "RAMINO_SHARDS": str(shards),
        "RAMINO_LEASE_TTL": str(ttl),
    }
    started = time.monotonic()
    with log.open("ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.workers", "--serve-child"],
            cwd=ROOT,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    worker = WorkerProcess(name, process, log, started)
    worker.wait_for("serving on")
    return worker


@contextlib.contextmanager
def workers(
    broker: Broker, store: str, count: int, folder: Path, ttl: float = 5.0
) -> Iterator[list[WorkerProcess]]:
    """``count`` workers on two lobby shards, once each of them serves one (or the only one
    both); stopped with SIGTERM afterwards."""
    started: list[WorkerProcess] = []
    try:
        for index in range(count):
            started.append(start_worker(broker, store, f"w{index + 1}", folder, ttl=ttl))
        for worker in started:
            worker.wait_for("serves lobby shard")
        if count == 2:
            started[0].wait_for("handed over lobby shard")
        yield started
    finally:
        for worker in started:
            stop_process(worker.process)


# --- 1. throughput ---------------------------------------------------------------------------


@dataclass
class Throughput:
    """One throughput case."""

    workers: int
    tables: int
    moves: int
    seconds: float
    p50: float
    p99: float
    timeouts: int
    workers_cpu: Usage
    """CPU time of the worker processes in the window, and their time runnable but waiting
    for a CPU."""
    broker_cpu: float
    players_cpu: float
    machine_cpu: float
    """CPU seconds of the whole machine (every process, other jobs included)."""
    idle_cpu: float
    """CPU seconds a second the workers spent with no players (lease renewals, balancing)."""
    owners: dict[str, int]

    @property
    def rate(self) -> float:
        return self.moves / self.seconds if self.seconds else 0.0

    @property
    def per_cpu_second(self) -> float:
        """Moves per CPU second of the workers: what one worker serves on a core of its own
        when that core is its only limit."""
        return self.moves / self.workers_cpu.run if self.workers_cpu.run else 0.0

    @property
    def marginal_cpu(self) -> float:
        """Worker CPU seconds a move, without what the workers spend idle."""
        busy = self.workers_cpu.run - self.idle_cpu * self.seconds
        return max(0.0, busy) / self.moves if self.moves else 0.0


def throughput_case(
    broker: Broker, store: str, count: int, arguments: argparse.Namespace, folder: Path
) -> Throughput:
    """``arguments.tables`` tables of bots on ``count`` workers."""
    names = [f"bench{index:04d}" for index in range(2 * arguments.tables)]
    with workers(broker, store, count, folder, ttl=arguments.lease_ttl) as running:
        quiet = _cpu(running, broker, [])
        time.sleep(IDLE_SECONDS)
        idle = (_cpu(running, broker, [])[0].run - quiet[0].run) / IDLE_SECONDS
        with spawn_players(
            broker.url,
            broker.player_password,
            names,
            arguments.player_processes,
            "basic",
            arguments.policy,
            arguments.seed,
            nice=arguments.players_nice,
        ) as players:
            go = time.monotonic() + 0.2
            start = go + arguments.warmup
            end = start + arguments.seconds
            players.go(go, start, end)
            time.sleep(max(0.0, start - time.monotonic()))
            before = _cpu(running, broker, players.pids)
            time.sleep(max(0.0, end - time.monotonic()))
            after = _cpu(running, broker, players.pids)
            tallies = players.tallies()
        # Before the workers stop: a stopping worker hands its tables to the other.
        owners = asyncio.run(_owners(store))
    latencies = [latency for tally in tallies for latency in tally.latencies]
    return Throughput(
        workers=count,
        tables=arguments.tables,
        moves=sum(tally.moves for tally in tallies),
        seconds=end - start,
        p50=percentile(latencies, 0.5),
        p99=percentile(latencies, 0.99),
        timeouts=sum(tally.timeouts for tally in tallies),
        workers_cpu=after[0] - before[0],
        broker_cpu=after[1] - before[1],
        players_cpu=after[2] - before[2],
        machine_cpu=after[3] - before[3],
        idle_cpu=idle,
        owners=owners,
    )


def _cpu(
    running: Sequence[WorkerProcess], broker: Broker, players: Sequence[int]
) -> tuple[Usage, float, float, float]:
    """CPU so far of the workers, Mosquitto, the players and the whole machine."""
    workers_usage = Usage()
    for worker in running:
        workers_usage += process_usage(worker.process.pid)
    return (
        workers_usage,
        process_usage(broker.process.pid).run,
        sum(process_usage(pid).run for pid in players),
        machine_cpu()[0],
    )


def print_throughput(case: Throughput) -> None:
    """One case's line."""
    busy = case.workers_cpu.run / case.seconds if case.seconds else 0.0
    print(
        f"throughput, {case.workers} worker(s), {case.tables} tables: {case.rate:.0f} moves/s, "
        f"p50 {case.p50 * 1000:.1f} ms, p99 {case.p99 * 1000:.1f} ms, timeouts "
        f"{case.timeouts}; in {case.seconds:.0f} s, CPU s: workers {case.workers_cpu.run:.1f} "
        f"({busy:.2f} cores; waited for a CPU {case.workers_cpu.wait:.1f} s), mosquitto "
        f"{case.broker_cpu:.1f}, players {case.players_cpu:.1f}, whole machine "
        f"{case.machine_cpu:.1f} of {(os.cpu_count() or 1) * case.seconds:.0f}; "
        f"{1000 / case.per_cpu_second if case.per_cpu_second else 0:.2f} ms of worker CPU a "
        f"move ({case.per_cpu_second:.0f} moves per worker CPU second; idle, the workers used "
        f"{case.idle_cpu:.3f} cores: without it {case.marginal_cpu * 1000:.2f} ms a move); "
        f"tables per worker {case.owners}",
        flush=True,
    )


def judge_throughput(one: Throughput, two: Throughput) -> None:
    """The ratios, labelled: measured on this machine, and per worker core."""
    raw = two.rate / one.rate if one.rate else 0.0
    print(
        f"throughput ratio 2 workers / 1 worker, measured (players and broker on the same "
        f"cores): {raw:.2f} (target >= {SCALE_TARGET}): {verdict(raw >= SCALE_TARGET)}",
        flush=True,
    )
    efficiency = two.per_cpu_second / one.per_cpu_second if one.per_cpu_second else 0.0
    projected = capacity(two) / capacity(one) if capacity(one) else 0.0
    print(
        f"throughput ratio per worker core: {two.per_cpu_second:.0f} / "
        f"{one.per_cpu_second:.0f} moves per worker CPU second = {efficiency:.2f}; projected "
        f"from the CPU a move (idle CPU aside), 2 workers with a core each would serve "
        f"{capacity(two):.0f} moves/s, 1 worker with one core {capacity(one):.0f}: "
        f"{projected:.2f}x (target >= {SCALE_TARGET}): {verdict(projected >= SCALE_TARGET)} "
        "(a projection for players and broker on other cores, not a measurement)",
        flush=True,
    )


def judge_medians(pairs: Sequence[tuple[Throughput, Throughput]]) -> None:
    """The medians of each pair's ratios (``--repeats``: the pairs ran one after the other,
    1 worker then 2, so a change in the machine's load hits both cases of a pair alike)."""
    measured = statistics.median(two.rate / one.rate for one, two in pairs if one.rate)
    efficiency = statistics.median(
        two.per_cpu_second / one.per_cpu_second for one, two in pairs if one.per_cpu_second
    )
    projected = statistics.median(
        capacity(two) / capacity(one) for one, two in pairs if capacity(one)
    )
    print(
        f"medians of {len(pairs)} pairs: measured {measured:.2f} "
        f"({verdict(measured >= SCALE_TARGET)}); per worker core {efficiency:.2f}; "
        f"projected for a core each {projected:.2f}x "
        f"(target >= {SCALE_TARGET}: {verdict(projected >= SCALE_TARGET)}, a projection)",
        flush=True,
    )


def capacity(case: Throughput) -> float:
    """Moves/s ``case.workers`` workers would serve with a core each and nothing else on
    them: each core's second, less what a worker spends idle, over the CPU a move."""
    if not case.marginal_cpu:
        return 0.0
    return (case.workers - case.idle_cpu) / case.marginal_cpu


async def _owners(store: str) -> dict[str, int]:
    """Worker -> the tables it holds."""
    connection = await asyncpg.connect(store)
    try:
        rows = await connection.fetch(
            "SELECT owner, count(*) FROM leases WHERE kind = 'table' GROUP BY owner"
        )
    finally:
        await connection.close()
    return {str(owner): int(count) for owner, count in rows}


# --- open tables written straight into the store ---------------------------------------------


class NullOutbox:
    """Publishes nowhere: the tables are written before any worker runs."""

    async def publish(
        self, before: TableState, seq: int, record: Record, after: TableState
    ) -> None:
        """Drop the record."""

    async def flush(self, table: TableState) -> None:
        """Nothing to flush."""


async def populate(
    store_url: str, count: int, moves: int, seed: int, snapshot_every: int = 200
) -> list[str]:
    """``count`` two-player basic tables with a game under way, ``moves`` random moves into
    it (fewer if a hand would end); table 0 is the probes'. Their ids."""
    store = await PostgresStore.open(store_url)
    outbox = NullOutbox()
    rng = random.Random(seed)
    gate = asyncio.Semaphore(256)
    table_ids = [f"bench{index:06d}" for index in range(count)]

    async def one(index: int, table_id: str) -> None:
        players = PROBES if index == 0 else (f"h{index}", f"g{index}")
        async with gate:
            actor = TableActor(
                empty_table(table_id),
                store,
                outbox,
                rng=random.Random(rng.getrandbits(64)),
                snapshot_every=snapshot_every,
            )
            actor.start()
            try:
                await actor.submit(players[0], CreateTable(variant="basic", seats=2), "c")
                for player in players:
                    await actor.submit(player, Sit(), f"sit-{player}")
                await actor.submit(players[0], StartGame(), "start")
                picker = random.Random(index)
                for step in range(moves):
                    game = actor.table.game
                    if game is None or is_over(game) or not awaiting(game):
                        break
                    seat = awaiting(game)[0]
                    command = picker.choice(legal_actions(game, seat))
                    await actor.submit(actor.table.seats[seat], command, f"m{step}")
                    after = actor.table.game
                    if after is None or after.hand_number != game.hand_number:
                        break  # a hand ended: stop while it is one
            finally:
                await actor.stop()

    try:
        await asyncio.gather(*(one(index, table) for index, table in enumerate(table_ids)))
    finally:
        await store.close()
    return table_ids


# --- 2. failover -----------------------------------------------------------------------------


@dataclass
class Failover:
    tables: int
    """The tables the killed worker held (the other took its share when it joined)."""
    ttl: float
    seconds: float
    """From SIGKILL to the probe's move acknowledged by the new owner."""
    adoption: float
    """What the new owner took to load, republish and subscribe the tables (its own line)."""
    adopted: int


async def _probe_move(client: Client, table: str) -> None:
    """Make the probe client's move at ``table`` (it must be its turn)."""
    session = client.table(table)
    update = await session.resync()
    assert update.legal, "not the probe's turn"
    reply = await session.act(update.legal[0], check=True)
    assert reply.ok


async def failover(
    broker: Broker, store: str, arguments: argparse.Namespace, folder: Path
) -> Failover:
    """See the module docstring, part 2."""
    table_ids = await populate(store, arguments.failover_tables, arguments.moves, arguments.seed)
    first = start_worker(broker, store, "w1", folder, ttl=arguments.lease_ttl)
    second: WorkerProcess | None = None
    clients = [
        Client(name, broker.player_password, broker=broker.url, request_timeout=5.0)
        for name in PROBES
    ]
    try:
        first.wait_for(r"took over \d+ table")
        second = start_worker(broker, store, "w2", folder, ttl=arguments.lease_ttl)
        second.wait_for("serves lobby shard")
        for client in clients:
            await client.connect()
        # w2 joining takes its share of w1's tables; once that has settled the worker holding
        # the probes' table is killed, the other takes its tables over.
        await _settle(store, table_ids, "w1", (len(table_ids) + 1) // 2)
        probe = table_ids[0]
        owners = await _owners_of(store, table_ids)
        assert second is not None
        victim, survivor = (first, second) if owners[probe] == "w1" else (second, first)
        held = [table for table, owner in owners.items() if owner == owners[probe]]
        mover = await _whose_turn(clients, probe)
        await _probe_move(mover, probe)  # served by the victim
        mover = await _whose_turn(clients, probe)
        session = mover.table(probe)
        update = await session.resync()
        mover.request_timeout = PROBE_RETRY
        mover.attempts = 10_000
        mark = len(survivor.output())
        killed = time.monotonic()
        victim.process.send_signal(signal.SIGKILL)
        reply = await session.act(update.legal[0], check=True)
        seconds = time.monotonic() - killed
        assert reply.ok
        found = survivor.wait_for(r"took over (\d+) table\(s\) in ([\d.]+) s", after=mark)
        owner = (await _owners_of(store, [probe]))[probe]
        assert owner == survivor.name, owner
        return Failover(
            len(held),
            arguments.lease_ttl,
            seconds,
            float(found.group(2)),
            int(found.group(1)),
        )
    finally:
        for client in clients:
            await client.close()
        stop_process(first.process)
        if second is not None:
            stop_process(second.process)


async def _settle(store: str, table_ids: list[str], worker: str, share: int) -> None:
    """Wait until ``worker`` holds at most ``share`` of the tables, or what it holds has not
    changed for a second (within 60 s)."""
    deadline = time.monotonic() + 60
    last: list[str] = []
    since = time.monotonic()
    while True:
        owners = await _owners_of(store, table_ids)
        held = sorted(table for table, owner in owners.items() if owner == worker)
        if held != last:
            last, since = held, time.monotonic()
        if held and (len(held) <= share or time.monotonic() - since >= 1.0):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{worker} holds {len(held)} tables after 60 s")
        await asyncio.sleep(0.1)  # polling the store: the balancer tells nothing outside


async def _whose_turn(clients: Sequence[Client], table: str) -> Client:
    for client in clients:
        if (await client.table(table).resync()).legal:
            return client
    raise RuntimeError("neither probe may move")


async def _owners_of(store: str, table_ids: list[str]) -> dict[str, str]:
    connection = await asyncpg.connect(store)
    try:
        rows = await connection.fetch(
            "SELECT key, owner FROM leases WHERE kind = 'table' AND key = ANY($1)", table_ids
        )
    finally:
        await connection.close()
    return {str(key): str(owner) for key, owner in rows}


# --- 3. recovery -----------------------------------------------------------------------------


@dataclass
class Recovery:
    tables: int
    events: int
    snapshots: int
    start_seconds: float
    """From spawning the worker to its "serving" line (Python start-up included)."""
    subscribed: float
    """From the adoption's start until every table's commands are read (a table not loaded
    yet is loaded by its first command)."""
    adoption: float
    """From the adoption's start until every table is loaded and republished."""
    adopted: int
    cpu: float
    """CPU seconds the worker process spent meanwhile."""
    load: float
    """The machine's load average (1 minute) when it ended."""


async def _counts(store: str) -> tuple[int, int]:
    connection = await asyncpg.connect(store)
    try:
        events = int(await connection.fetchval("SELECT count(*) FROM events"))
        snapshots = int(await connection.fetchval("SELECT count(*) FROM snapshots"))
    finally:
        await connection.close()
    return events, snapshots


def recovery(broker: Broker, store: str, arguments: argparse.Namespace, folder: Path) -> Recovery:
    """See the module docstring, part 3."""
    asyncio.run(
        populate(store, arguments.recovery_tables, arguments.moves, arguments.seed, SNAPSHOT_EVERY)
    )
    events, snapshots = asyncio.run(_counts(store))
    worker = start_worker(broker, store, "fresh", folder, ttl=arguments.lease_ttl)
    try:
        start_seconds = time.monotonic() - worker.started
        found = worker.wait_for(r"took over (\d+) table\(s\) in ([\d.]+) s \(([\d.]+) s of CPU")
        load = os.getloadavg()[0]
        serves = worker.wait_for(r"serves \d+ adopted table\(s\) after ([\d.]+) s")
    finally:
        stop_process(worker.process)
    return Recovery(
        arguments.recovery_tables,
        events,
        snapshots,
        start_seconds,
        float(serves.group(1)),
        float(found.group(2)),
        int(found.group(1)),
        float(found.group(3)),
        load,
    )


# --- main ------------------------------------------------------------------------------------


def main() -> None:
    if sys.argv[1:2] == ["--serve-child"]:
        serve_child()
        return
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__)
    parser.add_argument("--parts", default="throughput,failover,recovery")
    parser.add_argument("--tables", type=int, default=40, help="throughput: tables of bots")
    parser.add_argument("--seconds", type=float, default=20.0, help="throughput: measured")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="throughput: pairs of cases (1 worker, 2 workers) one after the other; medians",
    )
    parser.add_argument("--player-processes", type=int, default=2)
    parser.add_argument(
        "--policy", default="random", help="throughput: the players' policy (random: lightest)"
    )
    parser.add_argument(
        "--players-nice", type=int, default=0, help="throughput: niceness added to the players"
    )
    parser.add_argument("--failover-tables", type=int, default=1000)
    parser.add_argument("--recovery-tables", type=int, default=10_000)
    parser.add_argument("--moves", type=int, default=24, help="random moves in each open table")
    parser.add_argument("--lease-ttl", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "RAMINO_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    arguments = parser.parse_args()
    parts = set(arguments.parts.split(","))
    print(f"bench.workers: {os.cpu_count()} CPU(s), load {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ramino-workers-") as name:
        folder = Path(name)
        broker = start_broker(folder, 2 * arguments.tables)
        _add_probes(broker, folder)
        try:
            if "throughput" in parts:
                pairs = []
                for _ in range(max(1, arguments.repeats)):
                    cases = []
                    for count in (1, 2):
                        with fresh_store("postgres", arguments.postgres, folder) as store:
                            case = throughput_case(broker, store, count, arguments, folder)
                        cases.append(case)
                        print_throughput(case)
                    judge_throughput(*cases)
                    pairs.append((cases[0], cases[1]))
                if len(pairs) > 1:
                    judge_medians(pairs)
            if "failover" in parts:
                with fresh_store("postgres", arguments.postgres, folder) as store:
                    result = asyncio.run(failover(broker, store, arguments, folder))
                print(
                    f"failover, {arguments.failover_tables} open tables, {result.tables} on the "
                    f"worker killed, lease {result.ttl:g} s: "
                    f"{result.seconds:.2f} s from SIGKILL to the first move accepted by the new "
                    f"owner (target < 10 s: {verdict(result.seconds < 10)}); it took "
                    f"{result.adopted} tables over in {result.adoption:.2f} s",
                    flush=True,
                )
            if "recovery" in parts:
                with fresh_store("postgres", arguments.postgres, folder) as store:
                    done = recovery(broker, store, arguments, folder)
                print(
                    f"recovery, {done.tables} open tables ({done.events} events, "
                    f"{done.snapshots} snapshots): a fresh worker read the commands of all after "
                    f"{done.subscribed:.2f} s and had loaded {done.adopted} in "
                    f"{done.adoption:.2f} s, {done.cpu:.2f} s of its CPU (target < "
                    f"{RECOVERY_TARGET:g} s: {verdict(done.adoption < RECOVERY_TARGET)}; load "
                    f"average {done.load:.2f}); its start to 'serving': "
                    f"{done.start_seconds:.2f} s",
                    flush=True,
                )
        finally:
            stop_process(broker.process)


def _add_probes(broker: Broker, folder: Path) -> None:
    """Accounts for the failover probes (same password as the bench players)."""
    from server.net.accounts import Accounts

    accounts = Accounts.load(folder / "passwords")
    for name in PROBES:
        accounts.add(name, broker.player_password)
    accounts.save(folder / "passwords")
    broker.process.send_signal(signal.SIGHUP)


if __name__ == "__main__":
    main()
