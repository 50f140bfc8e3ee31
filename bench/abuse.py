"""One hostile client's floods against a running server, as another table sees them.

Run with ``python -m bench.abuse [--brokers embedded mosquitto] [--seconds S] [--settle S]
[--cases ...]``. For each broker, ``ramino serve`` (``python -m server.cli serve``, default
limits, a fresh SQLite store) runs as a process of its own: with its embedded broker (guest
mode), or on a Mosquitto started on a free port with deploy/mosquitto's config and an accounts
file made for the run (as tests/net/conftest.py starts it). Then:

1. **The probe**: two SDK players (``bots.policies``, ``--policy``) play game after game at one
   table in this process, each move as soon as it may; every move's command -> reply time is
   kept (``TableSession.act``), with when it was answered.
2. **Quiet**: ``--quiet`` seconds of the probe alone: p50/p99 of its moves.
3. **Each flood**, from one client (``mallory``) on a raw socket in a process of its own, for
   ``--seconds``: ``hello`` (pre-encoded ``Hello`` requests, QoS 0, written as fast as the
   socket takes them), ``payload`` (60 KiB payloads on the lobby topic; under Mosquitto's
   ``max_packet_size`` of 64 KiB), ``fuzz`` (mutated msgpack requests on the lobby topic and on
   the probe's table), ``garbage`` (random bytes on the socket after CONNECT, reconnecting
   whenever the broker hangs up) and ``subscribe`` (SUBSCRIBE packets to topics it may and may
   not read). The probe's moves answered during the flood give its p50/p99; a pause of
   ``--pause`` seconds follows each flood. First comes ``cpu``, no flood but the reference of
   the others: two processes keep two cores busy as long, as a flooder and a broker reading
   it flat out do; ``p99/cpu`` is a flood's p99 over that one. The server's and Mosquitto's
   busy cores (``bench.server.process_usage``) show where each flood's work is done.
4. **Memory**: the server process's RSS (``/proc/PID/status``) before the floods, after them,
   and after ``--settle`` seconds of quiet.

Goal (issue 15, item 8): during any single-client flood, the probe's p99 stays within
``GOAL["mosquitto"]`` (2x) of its quiet p99 on Mosquitto and ``GOAL["embedded"]`` (5x) on the
embedded broker; every ratio is of figures of the same run. A probe move that got no reply for
``REQUEST_TIMEOUT`` seconds counts as a miss by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import os
import platform
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bench.players import turns
from bench.server import (
    git_state,
    load,
    milliseconds,
    percentile,
    process_usage,
    stop_process,
    verdict,
)
from protocol import topics
from protocol.client import Client, RequestFailed
from protocol.codec import encode
from protocol.messages import Hello, ListVariants, Request
from server.net.accounts import Accounts, random_password
from server.net.embedded import SERVER_USER
from tests.net.conftest import connect_packet, mqtt_text, remaining_length

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
CASES = ("cpu", "hello", "payload", "fuzz", "garbage", "subscribe")
REFERENCE = "cpu"
"""Not a flood: two processes of their own keep two cores busy for as long as a flood lasts, as
the flooder and the broker reading its flood as fast as it can do. The probe's p99 meanwhile is
what sharing the machine with them costs whatever the broker does with the packets; it is
printed beside each flood's (``p99/cpu``) and judged by no goal."""
GOAL = {"mosquitto": 2.0, "embedded": 5.0}
"""Largest p99 under a flood, as a multiple of the quiet p99 (issue 15, item 8)."""
PROBE = ("probe-a", "probe-b")
ATTACKER = "mallory"
REQUEST_TIMEOUT = 30.0
"""The probe's request timeout: long, so that a slow reply is measured rather than resent."""
BIG_PAYLOAD = 60 * 1024
BATCH = 200
"""Packets per socket write of the flooder."""


# --- MQTT packets, by hand ------------------------------------------------------------------------


def publish_packet(topic: str, payload: bytes) -> bytes:
    """A QoS 0 PUBLISH."""
    body = mqtt_text(topic) + payload
    return b"\x30" + remaining_length(len(body)) + body


def subscribe_packet(packet_id: int, topic_filter: str) -> bytes:
    """A SUBSCRIBE of one filter at QoS 0."""
    body = struct.pack("!H", packet_id) + mqtt_text(topic_filter) + b"\x00"
    return b"\x82" + remaining_length(len(body)) + body


# --- the flooder (a process of its own) ----------------------------------------------------------


def flood_batches(kind: str, table: str, rng: random.Random) -> Iterator[bytes]:
    """Endless socket writes of one flood."""
    lobby = topics.lobby_command(ATTACKER)
    if kind == "hello":
        one = publish_packet(lobby, encode(Request(id="flood", cmd=Hello())))
        batch = one * BATCH
        while True:
            yield batch
    elif kind == "payload":
        big = publish_packet(lobby, os.urandom(BIG_PAYLOAD))
        while True:
            yield big
    elif kind == "fuzz":
        seeds = [
            encode(Request(id="f", cmd=Hello())),
            encode(Request(id="f", cmd=ListVariants())),
            msgspec.msgpack.encode({"id": "f", "cmd": {"type": "draw_stock"}, "seq": 3}),
        ]
        where = (lobby, topics.table_command(table, ATTACKER))
        packets = []
        for index in range(2_000):
            data = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.getrandbits(8)
            if rng.random() < 0.2:
                data += rng.randbytes(rng.randint(1, 64))
            packets.append(publish_packet(where[index % 2], bytes(data)))
        while True:
            rng.shuffle(packets)
            for start in range(0, len(packets), BATCH):
                yield b"".join(packets[start : start + BATCH])
    elif kind == "garbage":
        while True:
            yield rng.randbytes(4096)
    elif kind == "subscribe":
        filters = [topics.inbox(ATTACKER), topics.inbox("probe-a"), "ramino/v1/#", "#"]
        packet_id = 0
        while True:
            chunk = []
            for _ in range(BATCH):
                packet_id = packet_id % 65_535 + 1
                chunk.append(subscribe_packet(packet_id, filters[packet_id % len(filters)]))
            yield b"".join(chunk)
    else:
        raise ValueError(f"no flood {kind!r}")


def spin(seconds: float) -> None:
    """Keep one core busy for ``seconds``."""
    deadline = time.monotonic() + seconds
    spins = 0
    while time.monotonic() < deadline:
        spins += 1


def flood_child(argv: Sequence[str]) -> None:
    """``--flood-child KIND HOST PORT PASSWORD TABLE SECONDS``: flood, print a JSON tally.

    Prints ``ready`` once the first CONNECT is accepted; writes until the time is up,
    reconnecting whenever the broker closes the connection; then prints what it wrote.
    """
    kind, host, port_text, password, table, seconds_text = argv
    port, seconds = int(port_text), float(seconds_text)
    if kind == REFERENCE:
        other = subprocess.Popen([sys.executable, "-m", "bench.abuse", "--spin", seconds_text])
        print("ready", flush=True)
        started = time.monotonic()
        spin(seconds)
        other.wait()
        print(json.dumps({"kind": kind, "seconds": time.monotonic() - started}), flush=True)
        return
    rng = random.Random(15)
    batches = flood_batches(kind, table, rng)
    sent_bytes = packets = connections = refused = 0
    per_batch = {"hello": BATCH, "payload": 1, "fuzz": BATCH, "garbage": 0, "subscribe": BATCH}
    started = time.monotonic()
    deadline = started + seconds
    announced = False
    while time.monotonic() < deadline:
        try:
            connection = socket.create_connection((host, port), timeout=2.0)
        except OSError:
            time.sleep(0.01)
            continue
        with connection:
            try:
                connection.sendall(
                    connect_packet(ATTACKER, password, client_id=f"{ATTACKER}-{connections}")
                )
                connack = connection.recv(4)
            except OSError:
                continue
            if len(connack) < 4 or connack[3] != 0:
                refused += 1
                time.sleep(0.01)
                continue
            connections += 1
            if not announced:
                print("ready", flush=True)
                announced = True
                started = time.monotonic()
                deadline = started + seconds
            connection.settimeout(0.2)
            while time.monotonic() < deadline:
                batch = next(batches)
                try:
                    connection.sendall(batch)
                except TimeoutError:
                    continue  # the broker reads slower than we write: try again
                except OSError:
                    break
                sent_bytes += len(batch)
                packets += per_batch[kind]
    elapsed = time.monotonic() - started
    tally = {
        "kind": kind,
        "seconds": elapsed,
        "bytes": sent_bytes,
        "packets": packets,
        "connections": connections,
        "refused": refused,
    }
    print(json.dumps(tally), flush=True)


# --- the server and the brokers ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Setup:
    """One broker with the server on it."""

    kind: str
    url: str
    server: subprocess.Popen[bytes]
    log: Path
    player_password: str
    mosquitto: subprocess.Popen[bytes] | None = None
    without_plugin: str = ""
    """Why Mosquitto runs without deploy/mosquitto's publish rate plugin (empty: with it)."""

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by the server and by Mosquitto."""
        used = {"server": process_usage(self.server.pid).run}
        if self.mosquitto is not None:
            used["broker"] = process_usage(self.mosquitto.pid).run
        return used

    def cores_since(self, used: dict[str, float], seconds: float) -> dict[str, float]:
        """Cores each process kept busy since :meth:`cpu` gave ``used``, ``seconds`` ago."""
        now = self.cpu()
        return {name: (now[name] - before) / max(seconds, 1e-9) for name, before in used.items()}

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.url.removeprefix("mqtt://").rpartition(":")
        return host, int(port)


def start_setup(kind: str, folder: Path) -> Setup:
    """The server (``python -m server.cli serve``) on the embedded broker or on Mosquitto.

    Raises:
        RuntimeError: the server did not say it serves within 60 s.
    """
    server_password = random_password()
    player_password = random_password()
    mosquitto = None
    without_plugin = ""
    environment = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "RAMINO_STORE": f"sqlite:///{folder / f'events-{kind}.db'}",
        "RAMINO_SERVER_USER": SERVER_USER,
        "RAMINO_SERVER_PASSWORD": server_password,
    }
    if kind == "mosquitto":
        from tests.net.conftest import (
            DEPLOY,
            HOST,
            PLUGIN_UNAVAILABLE,
            _start_mosquitto,
            limits_plugin,
        )

        if shutil.which("mosquitto") is None:
            raise SystemExit("bench.abuse: the mosquitto binary is not installed")
        shutil.copyfile(DEPLOY / "acl", folder / "acl")
        accounts = Accounts()
        accounts.add(SERVER_USER, server_password)
        for name in (*PROBE, ATTACKER):
            accounts.add(name, player_password)
        accounts.save(folder / "passwords")
        mosquitto, port = _start_mosquitto(folder, server_password)
        without_plugin = "" if limits_plugin() is not None else "; ".join(PLUGIN_UNAVAILABLE)
        environment["RAMINO_BROKER"] = f"mqtt://{HOST}:{port}"
    else:
        environment["RAMINO_BROKER"] = "embedded"
        environment["RAMINO_PORT"] = str(free_port())
    log = folder / f"server-{kind}.log"
    with log.open("ab") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve"],
            cwd=ROOT,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("ramino: serving on"):
                url = next(word for word in line.split() if word.startswith("mqtt://"))
                return Setup(
                    kind,
                    url.rstrip(","),
                    server,
                    log,
                    player_password,
                    mosquitto,
                    without_plugin,
                )
        if server.poll() is not None:
            break
        time.sleep(0.05)
    stop_process(server)
    if mosquitto is not None:
        stop_process(mosquitto)
    raise RuntimeError(f"the server did not start; its output:\n{log.read_text()}")


def stop_setup(setup: Setup) -> None:
    stop_process(setup.server)
    if setup.mosquitto is not None:
        stop_process(setup.mosquitto)


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# --- the probe -----------------------------------------------------------------------------------


@dataclass
class Probe:
    """Two players at one table, game after game; every move's latency with its time."""

    moves: list[tuple[float, float]] = field(default_factory=list)
    """(answered at, seconds from command to reply)."""
    timeouts: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def window(self, start: float, end: float) -> list[float]:
        return [latency for at, latency in self.moves if start <= at < end]

    def timeouts_in(self, start: float, end: float) -> int:
        return sum(1 for at in self.timeouts if start <= at < end)


async def play(client: Client, table: str, is_host: bool, policy: str, probe: Probe) -> None:
    """Play ``client``'s seat as fast as the server answers, game after game."""
    rng = random.Random(client.username)
    async for session, command in turns(client, table, is_host, policy, rng):
        sent = time.monotonic()
        try:
            await session.act(command, check=False)
        except RequestFailed:
            probe.timeouts.append(time.monotonic())
            continue
        answered = time.monotonic()
        probe.moves.append((answered, answered - sent))


# --- one broker ----------------------------------------------------------------------------------


@dataclass
class CaseResult:
    """One flood (or the quiet window) as the probe saw it."""

    case: str
    seconds: float
    latencies: list[float]
    timeouts: int
    tally: dict[str, float] = field(default_factory=dict)
    rss_after: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    """Cores each process kept busy meanwhile: ``server``, and ``broker`` for Mosquitto."""

    @property
    def p50(self) -> float:
        return percentile(self.latencies, 0.5)

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 0.99)


@dataclass
class BrokerResult:
    kind: str
    quiet: CaseResult
    floods: list[CaseResult]
    rss: dict[str, float]


async def flood(setup: Setup, kind: str, table: str, seconds: float, probe: Probe) -> CaseResult:
    """One flood from its own process; the probe's moves answered meanwhile."""
    host, port = setup.host_port
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.abuse",
        "--flood-child",
        kind,
        host,
        str(port),
        setup.player_password,
        table,
        str(seconds),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    started = time.monotonic()
    async with asyncio.timeout(seconds + 30):
        ready = await process.stdout.readline()
    if ready.strip() == b"ready":  # else the broker took no connection: the tally follows
        started = time.monotonic()
    used = setup.cpu()
    output = (b"" if ready.strip() == b"ready" else ready) + await process.stdout.read()
    await process.wait()
    ended = time.monotonic()
    tally = json.loads(output.decode().strip().splitlines()[-1])
    return CaseResult(
        kind,
        ended - started,
        probe.window(started, ended),
        probe.timeouts_in(started, ended),
        tally,
        rss_after=rss_mb(setup.server.pid),
        cpu=setup.cores_since(used, ended - started),
    )


async def run_broker(setup: Setup, arguments: argparse.Namespace, say: Say) -> BrokerResult:
    """The probe quiet, under each flood, and the server's memory."""
    probe = Probe()
    clients = [
        Client(name, setup.player_password, broker=setup.url, request_timeout=REQUEST_TIMEOUT)
        for name in PROBE
    ]
    for client in clients:
        await client.connect()
    host, guest = clients
    created = await host.create_table(arguments.variant, seats=2)
    await guest.table(created.table).sit()
    players = [
        asyncio.create_task(play(client, created.table, client is host, arguments.policy, probe))
        for client in clients
    ]
    await host.table(created.table).start()
    rss: dict[str, float] = {}
    try:
        await asyncio.sleep(1.0)  # warm-up
        rss["start"] = rss_mb(setup.server.pid)
        started = time.monotonic()
        used = setup.cpu()
        await asyncio.sleep(arguments.quiet)
        ended = time.monotonic()
        quiet = CaseResult(
            "quiet",
            ended - started,
            probe.window(started, ended),
            probe.timeouts_in(started, ended),
            cpu=setup.cores_since(used, ended - started),
        )
        say(
            f"  quiet: {len(quiet.latencies)} moves, p50 {milliseconds(quiet.p50)} ms, "
            f"p99 {milliseconds(quiet.p99)} ms",
            flush=True,
        )
        floods = []
        for kind in arguments.cases:
            result = await flood(setup, kind, created.table, arguments.seconds, probe)
            floods.append(result)
            say(
                f"  {kind}: {result.tally.get('packets', 0) / max(result.seconds, 1e-9):,.0f} "
                f"packets/s, {result.tally.get('bytes', 0) / max(result.seconds, 1e-9) / 1e6:.1f}"
                f" MB/s in {result.tally.get('connections', 0)} connection(s); probe: "
                f"{len(result.latencies)} moves, p50 {milliseconds(result.p50)} ms, p99 "
                f"{milliseconds(result.p99)} ms, {result.timeouts} timeouts; server RSS "
                f"{result.rss_after:.0f} MB",
                flush=True,
            )
            await asyncio.sleep(arguments.pause)
        rss["after floods"] = rss_mb(setup.server.pid)
        await asyncio.sleep(arguments.settle)
        rss[f"after {arguments.settle:g} s settle"] = rss_mb(setup.server.pid)
        settled_start = time.monotonic() - min(arguments.settle, arguments.quiet)
        after = probe.window(settled_start, time.monotonic())
        say(
            f"  quiet again (last {min(arguments.settle, arguments.quiet):g} s of the settle): "
            f"{len(after)} moves, p50 {milliseconds(percentile(after, 0.5))} ms, "
            f"p99 {milliseconds(percentile(after, 0.99))} ms",
            flush=True,
        )
    finally:
        for task in players:
            task.cancel()
        for outcome in await asyncio.gather(*players, return_exceptions=True):
            if isinstance(outcome, Exception) and not isinstance(outcome, asyncio.CancelledError):
                probe.errors.append(repr(outcome))
        for client in clients:
            await client.close()
    if probe.errors:
        say(f"  probe errors: {probe.errors[:3]}")
    return BrokerResult(setup.kind, quiet, floods, rss)


# --- the report ----------------------------------------------------------------------------------


class Say:
    def __call__(self, text: str = "", flush: bool = False) -> None:
        print(text, flush=flush)


def judge(results: Sequence[BrokerResult], say: Say) -> bool:
    """The table of ratios, PASS/MISS per case against goal 8; whether all passed."""
    say(
        f"{'broker':<10}{'flood':<10}{'packets/s':>11}{'moves':>7}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'p99/quiet':>11}{'p99/cpu':>9}{'goal':>6}{'timeouts':>9}{'cores srv+brk':>15}  verdict"
    )
    met = True
    for result in results:
        quiet = result.quiet
        goal = GOAL[result.kind]
        reference = next((case for case in result.floods if case.case == REFERENCE), None)
        say(
            f"{result.kind:<10}{'quiet':<10}{'-':>11}{len(quiet.latencies):>7}"
            f"{milliseconds(quiet.p50):>9}{milliseconds(quiet.p99):>9}{'1.00':>11}{'':>9}"
            f"{'':>6}{quiet.timeouts:>9}{cores(quiet):>15}"
        )
        for case in result.floods:
            ratio = case.p99 / quiet.p99 if quiet.p99 else float("inf")
            to_cpu = (
                f"{case.p99 / reference.p99:.2f}"
                if reference is not None and reference.p99
                else "-"
            )
            rate = case.tally.get("packets", 0) / max(case.seconds, 1e-9)
            if case.case == REFERENCE:
                judged = "(reference)"
            else:
                ok = ratio <= goal and case.timeouts == 0 and len(case.latencies) > 0
                met = met and ok
                judged = verdict(ok)
            say(
                f"{'':<10}{case.case:<10}{rate:>11,.0f}{len(case.latencies):>7}"
                f"{milliseconds(case.p50):>9}{milliseconds(case.p99):>9}{ratio:>11.2f}"
                f"{to_cpu:>9}{goal:>5g}x{case.timeouts:>9}{cores(case):>15}  {judged}"
            )
    say()
    for result in results:
        figures = ", ".join(f"{name} {value:.0f} MB" for name, value in result.rss.items())
        say(f"{result.kind} server RSS: {figures}")
    return met


def cores(case: CaseResult) -> str:
    """The server's and the broker's busy cores, as ``0.42+0.97`` (the server alone on the
    embedded broker)."""
    return "+".join(f"{case.cpu[name]:.2f}" for name in ("server", "broker") if name in case.cpu)


def header(arguments: argparse.Namespace, say: Say) -> None:
    from bench.engine import cpu_model

    say(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    say(f"python {platform.python_implementation()} {sys.version.split()[0]}")
    say(f"machine: {platform.platform()}, {cpu_model()}, {os.cpu_count()} logical CPUs")
    say(f"command: python -m bench.abuse {' '.join(sys.argv[1:])}".rstrip())
    say(f"code: {git_state()}")
    say(
        f"probe: {arguments.variant}, 2 {arguments.policy} players; quiet {arguments.quiet:g} s, "
        f"each flood {arguments.seconds:g} s then {arguments.pause:g} s pause, settle "
        f"{arguments.settle:g} s; server: ramino serve, default limits"
    )
    say(f"load average at start: {load()}")


async def main_run(arguments: argparse.Namespace) -> bool:
    say = Say()
    began = time.monotonic()
    header(arguments, say)
    results = []
    unplugged: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ramino-bench-abuse-") as temporary:
        for kind in arguments.brokers:
            folder = Path(temporary) / kind
            folder.mkdir()
            setup = await asyncio.to_thread(start_setup, kind, folder)
            say()
            say(f"== {kind}: server pid {setup.server.pid} on {setup.url} ==", flush=True)
            if setup.without_plugin:
                unplugged.append(setup.without_plugin)
                say(f"  WITHOUT the publish rate plugin: {setup.without_plugin}")
            try:
                results.append(await run_broker(setup, arguments, say))
            finally:
                stop_setup(setup)
            if arguments.show_log:
                lines = setup.log.read_text(errors="replace").splitlines()
                say(f"  server log: {len(lines)} lines; last ones:")
                for line in lines[-arguments.show_log :]:
                    say(f"    {line[:200]}")
    say()
    met = judge(results, say)
    say(f"goal 8 {'MET' if met else 'NOT MET'}")
    if unplugged:
        say(
            "  Mosquitto ran without deploy/mosquitto/ramino_limits.c, so its rows measure a "
            "broker that forwards every flood to the server (docs/operations.md, Hardening)"
        )
    say(f"load average at end: {load()}; total {time.monotonic() - began:.0f} s")
    return met


def main() -> None:
    if sys.argv[1:2] == ["--spin"]:
        spin(float(sys.argv[2]))
        return
    if sys.argv[1:2] == ["--flood-child"]:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        flood_child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        prog="python -m bench.abuse", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--brokers", nargs="+", choices=("embedded", "mosquitto"), default=["embedded", "mosquitto"]
    )
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds per flood")
    parser.add_argument("--quiet", type=float, default=6.0, help="seconds of the quiet window")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds after each flood")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before the last RSS")
    parser.add_argument("--variant", default="basic")
    parser.add_argument("--policy", default="random")
    parser.add_argument(
        "--show-log", type=int, default=0, metavar="N", help="print the server log's last N lines"
    )
    arguments = parser.parse_args()
    logging.getLogger("gmqtt").setLevel(logging.ERROR)
    met = asyncio.run(main_run(arguments))
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
