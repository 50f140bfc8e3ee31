"""The server's CPU per move without the network: ``Gateway.handle`` fed in one process.

Run with ``python -m bench.gateway [--tables N] [--moves M] [--rounds R] [--reference REV]``.

What ``ramino serve`` does for a move, minus the MQTT client: the gateway decodes the request,
the table actor applies it, the store appends it (a SQLite file in a temporary folder, its
writer thread included), and the gateway builds and encodes the reply and every update (views,
legal actions, the public stream, snapshots). The transport is a stub that keeps what would be
published. ``--tables`` tables of two players (``--variant``, default ``basic``) play random
legal moves back to back (each player answers the update that gives it legal actions; the host
asks for a rematch when a game ends; ``--move-seconds`` gives the tables a move timer, none by
default) until ``--moves`` moves are acknowledged. Measured: the
process's CPU time (``time.process_time``: every thread) per move, minus the driver's own time
(decoding what its players receive, choosing and encoding their commands, on
``time.thread_time``).

``--reference REV`` runs the same measurement on the server code of git revision ``REV`` (a
copy made with ``git archive`` in a temporary folder; this file is run there as a script, so the
bench itself is today's), alternated with the current code ``--rounds`` times in separate
processes; it prints each round, the medians and their ratio. The machine may be loaded: the
ratio of medians of alternated runs is the figure to read, not the absolute values.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]


class _Stub:
    """What the gateway publishes, kept: each client's inbox messages, and an event per client
    set when one arrives."""

    def __init__(self) -> None:
        self.deliver: Any = None
        self.inboxes: dict[str, deque[bytes]] = defaultdict(deque)
        self.wakers: dict[str, asyncio.Event] = {}
        self.published = 0
        self.prefix = ""

    def subscribe(self, *topics: str, qos: int = 1) -> None:
        """Nothing to subscribe to."""

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> None:
        """Keep inbox messages; count the rest."""
        self.published += 1
        if topic.startswith(self.prefix):
            client = topic[len(self.prefix) :]
            self.inboxes[client].append(payload)
            waker = self.wakers.get(client)
            if waker is not None:
                waker.set()


class _Driver:
    """Two-player tables playing random legal moves through ``Gateway.handle``."""

    def __init__(
        self, gateway: Any, stub: _Stub, variant: str, seed: int, move_seconds: float = 0.0
    ) -> None:
        self.gateway = gateway
        self.stub = stub
        self.variant = variant
        self.move_seconds = move_seconds
        self.rng = random.Random(seed)
        self.own = 0.0
        """Thread CPU seconds spent by the driver itself."""
        self.moves = 0
        self.target = 0
        self.done = asyncio.Event()
        self.ids = 0

    def _send(self, topic: str, command: Any, seq: int | None = None) -> str:
        from protocol.codec import encode
        from protocol.messages import Request

        started = time.thread_time()
        self.ids += 1
        request_id = str(self.ids)
        payload = encode(Request(id=request_id, cmd=command, seq=seq))
        self.own += time.thread_time() - started
        self.gateway.handle(topic, payload)
        return request_id

    def _read(self, client: str) -> list[Any]:
        """Decode what ``client`` received since the last read."""
        from protocol.codec import decode_inbox

        inbox = self.stub.inboxes[client]
        if not inbox:  # read the clock only when there is something to decode
            return []
        started = time.thread_time()
        messages = [decode_inbox(payload) for payload in inbox]
        inbox.clear()
        self.own += time.thread_time() - started
        return messages

    async def _reply(self, client: str, request_id: str, waker: asyncio.Event) -> Any:
        from protocol.messages import Reply

        while True:
            for message in self._read(client):
                if isinstance(message, Reply) and message.id == request_id:
                    return message
            waker.clear()
            await waker.wait()

    async def table(self, number: int) -> None:
        """Open table ``number``, seat both players, play until the run is stopped."""
        from protocol import topics
        from protocol.messages import CreateTable, Rematch, Reply, Sit, Start, Update

        host, guest = f"h{number}", f"g{number}"
        players = (host, guest)
        waker = asyncio.Event()
        for player in players:
            self.stub.wakers[player] = waker
        create = CreateTable(variant=self.variant, seats=2, move_seconds=self.move_seconds)
        rid = self._send(topics.lobby_command(host), create)
        created = await self._reply(host, rid, waker)
        table = created.result.table
        rid = self._send(topics.table_command(table, guest), Sit(seat=1))
        await self._reply(guest, rid, waker)
        rid = self._send(topics.table_command(table, host), Start())
        await self._reply(host, rid, waker)
        latest: dict[str, Any] = {}
        waiting: dict[str, tuple[str, bool]] = {}  # client -> (request id, a move?) unanswered
        while True:
            waker.clear()
            for player in players:
                for message in self._read(player):
                    if isinstance(message, Update):
                        latest[player] = message
                    elif isinstance(message, Reply) and player in waiting:
                        if waiting[player][0] != message.id:
                            continue
                        move = waiting.pop(player)[1]
                        if move and message.ok:
                            self.moves += 1
                            if self.moves == self.target:
                                self.done.set()
            # Act for the player whose latest update, at the table's newest seq, gives it
            # legal actions (the host asks for a rematch after a game).
            newest = max((update.seq for update in latest.values()), default=0)
            for player in players if not waiting else ():
                update = latest.get(player)
                if update is None or update.seq != newest:
                    continue
                topic = topics.table_command(table, player)
                if update.status == "finished" and player == host:
                    waiting[player] = (self._send(topic, Rematch()), False)
                    break
                if update.status == "playing" and update.legal:
                    started = time.thread_time()
                    command = self.rng.choice(update.legal)
                    self.own += time.thread_time() - started
                    waiting[player] = (self._send(topic, command, update.seq), True)
                    break
            if not any(self.stub.inboxes[player] for player in players):
                await waker.wait()


async def _measure(
    tables: int, moves: int, variant: str, seed: int, move_seconds: float = 0.0
) -> dict[str, float]:
    """One measurement in this process: CPU ms per move (server only) and moves/s."""
    from protocol import topics
    from protocol.runtime import tune_gc
    from server.net.gateway import Gateway, Limits
    from server.tables.service import TableService
    from server.tables.store import open_store

    with tempfile.TemporaryDirectory(prefix="ramino-bench-gw-") as folder:
        store = await open_store(f"sqlite:///{Path(folder) / 'events.db'}")
        stub = _Stub()
        stub.prefix = topics.inbox("")
        gateway = Gateway(cast(Any, stub), limits=Limits(rate=1_000_000, burst=1_000_000))
        service = TableService(store, gateway)
        gateway.service = service
        await gateway.start()
        driver = _Driver(gateway, stub, variant, seed, move_seconds)
        # A warm-up of a tenth of the moves, then the measured part.
        driver.target = max(1, moves // 10)
        tune_gc()
        runs = [asyncio.create_task(driver.table(n)) for n in range(tables)]
        await driver.done.wait()
        driver.done.clear()
        driver.moves = 0
        driver.target = moves
        driver.own = 0.0
        cpu, wall = time.process_time(), time.perf_counter()
        await driver.done.wait()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        own = driver.own
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        await service.stop()
        await gateway.stop()
        await store.close()
    return {
        "moves": driver.moves,
        "cpu_ms_per_move": 1000.0 * (cpu - own) / driver.moves,
        "driver_ms_per_move": 1000.0 * own / driver.moves,
        "moves_per_s": driver.moves / wall,
    }


def _child(arguments: argparse.Namespace) -> None:
    from server.net.logs import configure_logging

    configure_logging("text", "warning")  # as ``ramino serve --log-level warning``
    result = asyncio.run(
        _measure(
            arguments.tables,
            arguments.moves,
            arguments.variant,
            arguments.seed,
            arguments.move_seconds,
        )
    )
    print(json.dumps(result))


def _run(code: Path, arguments: argparse.Namespace, seed: int) -> dict[str, float]:
    """One measurement in a fresh process on the server code under ``code``."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--tables",
        str(arguments.tables),
        "--moves",
        str(arguments.moves),
        "--variant",
        arguments.variant,
        "--seed",
        str(seed),
        "--move-seconds",
        str(arguments.move_seconds),
    ]
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env, cwd=code)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _others_cpu() -> tuple[float, float]:
    """(seconds of CPU time the whole machine was busy, wall seconds) since boot (/proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    values = [float(v) for v in fields]
    idle = values[3] + values[4]
    ticks = os.sysconf("SC_CLK_TCK")
    return (sum(values) - idle) / ticks, time.monotonic()


def main() -> None:
    """Parse the options; run the rounds (or, with ``--child``, one measurement)."""
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tables", type=int, default=100, help="concurrent tables")
    parser.add_argument("--moves", type=int, default=6_000, help="measured moves per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds")
    parser.add_argument("--variant", default="basic")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--move-seconds",
        type=float,
        default=0.0,
        help="the tables' move timer (0: none, as the protocol's default)",
    )
    parser.add_argument(
        "--reference", default="", metavar="REV", help="also measure git revision REV"
    )
    arguments = parser.parse_args()
    if arguments.child:
        _child(arguments)
        return
    codes: list[tuple[str, Path]] = [("current", ROOT)]
    with tempfile.TemporaryDirectory(prefix="ramino-bench-ref-") as folder:
        if arguments.reference:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", arguments.reference],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
            codes.insert(0, (arguments.reference, Path(folder)))
        print(
            f"bench.gateway: {arguments.tables} tables of {arguments.variant} (2 players), "
            f"{arguments.moves} moves a round, {arguments.rounds} rounds, move timer "
            f"{arguments.move_seconds:g} s, load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
            flush=True,
        )
        results: dict[str, list[float]] = {name: [] for name, _ in codes}
        for round_number in range(arguments.rounds):
            for name, code in codes:
                busy, at = _others_cpu()
                result = _run(code, arguments, arguments.seed + round_number)
                busy2, at2 = _others_cpu()
                machine = 100.0 * (busy2 - busy) / (at2 - at)
                results[name].append(result["cpu_ms_per_move"])
                print(
                    f"round {round_number + 1} {name:>10}: {result['cpu_ms_per_move']:.3f} "
                    f"CPU ms/move (driver {result['driver_ms_per_move']:.3f} left out), "
                    f"{result['moves_per_s']:,.0f} moves/s, machine busy {machine:.0f}% "
                    f"(100% = one core)",
                    flush=True,
                )
        medians = {name: statistics.median(values) for name, values in results.items()}
        for name, median in medians.items():
            values = ", ".join(f"{v:.3f}" for v in results[name])
            print(f"{name:>10}: median {median:.3f} CPU ms/move ({values})")
        if arguments.reference:
            ratio = medians["current"] / medians[arguments.reference]
            print(f"current / {arguments.reference}: {ratio:.2f} ({ratio - 1:+.0%} CPU a move)")


if __name__ == "__main__":
    # Run as a script (the reference's rounds), this folder comes first on the path, where
    # bench/server.py would hide the server package.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    main()
