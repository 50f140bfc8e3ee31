"""Prometheus metrics (``ramino serve --metrics``): a real server on a real broker, played with
the SDK, its ``/metrics`` scraped over HTTP; the Grafana dashboard's metric names."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bots.client import Stats, TablePlan, run_bots
from protocol import topics
from protocol.messages import Resync
from server.cli import build_parser, main
from server.engine import awaiting, legal_actions
from server.net.gateway import Limits
from server.net.metrics import BotMetrics, serve_metrics
from server.net.serve import Running, ServeConfig, running
from server.tables.timers import Clock, ManualClock
from tests.net.conftest import BrokerUnderTest, client_for, ensure_users
from tests.net.players import start_table

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "ramino.json"
WAIT = 10.0
"""Seconds a metric gets to reach the value a test waits for."""


@dataclass(frozen=True)
class Scrape:
    """One scrape of ``/metrics``: every sample, and every metric family with its type."""

    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]
    families: dict[str, str]

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples named ``name`` whose labels include ``labels`` (0: none)."""
        wanted = set(labels.items())
        return sum(
            value
            for (sample, sample_labels), value in self.samples.items()
            if sample == name and wanted <= sample_labels
        )


async def scrape(port: int, path: str = "/metrics") -> tuple[str, Scrape]:
    """GET ``path`` over HTTP: the status line and the parsed exposition."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
        await writer.drain()
        async with asyncio.timeout(WAIT):
            response = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    head, _, body = response.partition(b"\r\n\r\n")
    status = head.split(b"\r\n")[0].decode()
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    families: dict[str, str] = {}
    if status.endswith("200 OK"):
        for family in text_string_to_metric_families(body.decode()):
            families[family.name] = family.type
            for sample in family.samples:
                samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return status, Scrape(samples, families)


async def wait_for(port: int, condition: Callable[[Scrape], bool]) -> Scrape:
    """Scrape until ``condition`` holds (within ``WAIT`` seconds); the last scrape."""
    async with asyncio.timeout(WAIT):
        while True:
            _, seen = await scrape(port)
            if condition(seen):
                return seen
            await asyncio.sleep(0.02)  # polling the endpoint, not waiting for an event


@contextlib.asynccontextmanager
async def serving_metrics(
    broker: BrokerUnderTest, folder: Path, clock: Clock | None = None
) -> AsyncIterator[Running]:
    """``ramino serve --metrics 127.0.0.1:0`` in this process on ``broker``."""
    config = ServeConfig(
        broker=broker.url,
        store=f"sqlite:///{folder / 'events.db'}",
        server_user=broker.server_user,
        server_password=broker.server_password,
        limits=Limits(rate=10_000, burst=10_000),
        mqtt5=broker.kind == "mosquitto",
        metrics="127.0.0.1:0",
    )
    async with running(config, clock=clock) as server:
        assert server.metrics is not None
        assert server.metrics_port > 0
        yield server


async def test_the_counters_follow_what_was_played(broker: BrokerUnderTest, tmp_path: Path) -> None:
    """Commands by kind, accepted moves, refusals by code, resyncs, latency histograms, store
    commits, tables and clients present all move by what the clients did."""
    await ensure_users(broker, ["alice", "bob"])
    async with serving_metrics(broker, tmp_path) as server:
        port = server.metrics_port
        clients = [client_for(broker, "alice"), client_for(broker, "bob")]
        for client in clients:
            await client.connect()
        try:
            await wait_for(port, lambda seen: seen.value("ramino_connected_clients") == 2)
            _, before = await scrape(port)
            alice = clients[0]
            await alice.hello()
            table = await start_table(clients, "gin")
            moves: Counter[str] = Counter()
            for _ in range(4):
                state = server.service.actors[table].table
                assert state.game is not None
                seat = awaiting(state.game)[0]
                command = legal_actions(state.game, seat)[0]
                reply = await clients[seat].request(command, table, seq=state.seq)
                assert reply.ok
                moves[type(command).__name__] += 1
            state = server.service.actors[table].table
            assert state.game is not None
            seat = awaiting(state.game)[0]
            stale = legal_actions(state.game, seat)[0]
            refused = await clients[seat].request(stale, table, seq=state.seq - 1, check=False)
            assert "table/stale_seq" == refused.code
            assert (await alice.request(Resync(), table)).ok
            unknown = await alice.request(Resync(), "no-such-table", check=False)
            assert "table/unknown" == unknown.code
            alice.transport.publish(topics.table_command(table, "alice"), b"\xc1")
            after = await wait_for(
                port, lambda seen: seen.value("ramino_errors_total", code="protocol/malformed") > 0
            )
            after = await wait_for(
                port, lambda seen: seen.value("ramino_event_loop_lag_seconds_count") > 0
            )
        finally:
            for client in clients:
                await client.close()
        gone = await wait_for(port, lambda seen: seen.value("ramino_connected_clients") == 0)
    assert 0 == gone.value("ramino_connected_clients")

    def grew(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    sent = Counter(
        {"Hello": 1, "CreateTable": 1, "Sit": 1, "Start": 1, "Resync": 2, **moves}
    ) + Counter({type(stale).__name__: 1})
    for kind, count in sent.items():
        assert count == grew("ramino_commands_total", kind=kind), kind
        assert count == grew("ramino_command_latency_seconds_count", kind=kind), kind
        assert count == grew("ramino_command_latency_seconds_bucket", kind=kind, le="+Inf")
    assert sum(sent.values()) == grew("ramino_commands_total")
    for kind, count in moves.items():
        assert count == grew("ramino_moves_total", kind=kind), kind
    assert sum(moves.values()) == grew("ramino_moves_total")
    assert 1 == grew("ramino_errors_total", code="table/stale_seq")
    assert 1 == grew("ramino_errors_total", code="table/unknown")
    assert 1 == grew("ramino_errors_total", code="protocol/malformed")
    assert 3 == grew("ramino_errors_total")
    assert 1 == grew("ramino_resyncs_total", reason="stale_seq")
    assert 1 == grew("ramino_resyncs_total", reason="request")
    assert 1 == grew("ramino_refused_messages_total")
    assert 1 == after.value("ramino_tables", status="playing", variant="gin")
    # Appends: the table (1), alice sits (1), bob sits (1), the start (1), four moves.
    assert grew("ramino_store_batch_writes_sum") >= 8
    assert grew("ramino_store_commit_seconds_count") >= 1
    assert after.value("process_resident_memory_bytes") > 0
    assert ("process_cpu_seconds_total", frozenset()) in after.samples


async def test_a_timer_that_runs_out_is_counted(
    embedded_broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """The move timer of a seat runs out: ``ramino_timers_fired_total{kind="turn"}`` grows by
    one."""
    clock = ManualClock()
    broker = embedded_broker
    async with serving_metrics(broker, tmp_path, clock=clock) as server:
        port = server.metrics_port
        clients = [client_for(broker, "alice"), client_for(broker, "bob")]
        for client in clients:
            await client.connect()
        try:
            table = await start_table(clients, "gin", move_seconds=5.0)
            actor = server.service.actors[table]
            seq = actor.table.seq
            _, before = await scrape(port)
            async with asyncio.timeout(WAIT):
                await clock.wait_for_sleeper()
                clock.advance(6.0)
                await actor.wait_for_seq(seq + 1)
            after = await wait_for(
                port, lambda seen: seen.value("ramino_timers_fired_total", kind="turn") > 0
            )
        finally:
            for client in clients:
                await client.close()
    assert 0 == before.value("ramino_timers_fired_total")
    assert 1 == after.value("ramino_timers_fired_total", kind="turn")
    assert 1 == after.value("ramino_timers_fired_total")


def dashboard_metrics() -> set[str]:
    """Every metric name the dashboard's PromQL expressions use."""
    model = json.loads(DASHBOARD.read_text())
    expressions = [
        target["expr"]
        for panel in model["panels"]
        for target in panel.get("targets", ())
        if "expr" in target
    ]
    assert expressions, "the dashboard has no PromQL expressions"
    expressions += [
        variable["definition"]
        for variable in model["templating"]["list"]
        if variable.get("type") == "query"
    ]
    names: set[str] = set()
    for expression in expressions:
        without_labels = re.sub(r"\{[^}]*\}", "", expression)
        without_strings = re.sub(r'"[^"]*"', "", without_labels)
        names.update(re.findall(r"\b(?:ramino|process|python)_[a-zA-Z0-9_]+", without_strings))
    return names


SUFFIXES = {
    "_bucket": ("histogram",),
    "_sum": ("histogram", "summary"),
    "_count": ("histogram", "summary"),
    "_total": ("counter",),
}


def exposed(name: str, families: dict[str, str]) -> bool:
    """Whether ``name`` is a family of ``families`` or one of its series (``_bucket``, ...)."""
    if families.get(name) in ("gauge", "untyped"):
        return True
    for suffix, kinds in SUFFIXES.items():
        if name.endswith(suffix) and families.get(name.removesuffix(suffix)) in kinds:
            return True
    return False


async def test_every_metric_of_the_dashboard_exists(
    embedded_broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """deploy/grafana/ramino.json uses only metrics a running server exposes."""
    async with serving_metrics(embedded_broker, tmp_path) as server:
        status, seen = await scrape(server.metrics_port)
    assert "HTTP/1.1 200 OK" == status
    used = dashboard_metrics()
    assert {"ramino_moves_total", "ramino_command_latency_seconds_bucket"} <= used
    assert [] == sorted(name for name in used if not exposed(name, seen.families))


async def test_only_metrics_is_served(embedded_broker: BrokerUnderTest, tmp_path: Path) -> None:
    """Another path is a 404; the server goes on serving ``/metrics``."""
    async with serving_metrics(embedded_broker, tmp_path) as server:
        missing, _ = await scrape(server.metrics_port, "/other")
        found, seen = await scrape(server.metrics_port)
    assert "HTTP/1.1 404 Not Found" == missing
    assert "HTTP/1.1 200 OK" == found
    assert "counter" == seen.families["ramino_commands"]


async def test_ramino_serve_announces_and_serves_its_metrics(tmp_path: Path) -> None:
    """``ramino serve --metrics 127.0.0.1:0`` says where ``/metrics`` is, serves it, and stops
    cleanly on SIGTERM."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server.cli",
        "serve",
        "--port",
        "0",
        "--store",
        f"sqlite:///{tmp_path / 'events.db'}",
        "--metrics",
        "127.0.0.1:0",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(60):
            while True:
                line = (await process.stdout.readline()).decode()
                assert line, "ramino serve ended before announcing its metrics"
                found = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", line)
                if found:
                    break
            status, seen = await scrape(int(found.group(1)))
            process.send_signal(signal.SIGTERM)
            assert 0 == await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert "HTTP/1.1 200 OK" == status
    assert "histogram" == seen.families["ramino_command_latency_seconds"]


def test_metrics_comes_from_the_command_line_or_the_environment() -> None:
    """``--metrics`` and ``RAMINO_METRICS`` set where metrics are served (none by default)."""
    assert "" == ServeConfig.from_env({}).metrics
    assert ":9464" == ServeConfig.from_env({"RAMINO_METRICS": ":9464"}).metrics
    assert (
        "127.0.0.1:1"
        == ServeConfig.from_env({"RAMINO_METRICS": ":9464"}, metrics="127.0.0.1:1").metrics
    )


def test_a_bad_metrics_address_is_refused_clearly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``ramino serve --metrics nonsense`` exits with 2 and says what is expected."""
    status = main(["serve", "--metrics", "nonsense", "--store", f"sqlite:///{tmp_path / 'e.db'}"])
    assert 2 == status
    assert "HOST:PORT" in capsys.readouterr().err


async def test_no_metrics_by_default(embedded_broker: BrokerUnderTest, tmp_path: Path) -> None:
    """Without ``--metrics`` nothing is served and the hooks are the no-op ones."""
    config = ServeConfig(
        broker=embedded_broker.url,
        store=f"sqlite:///{tmp_path / 'events.db'}",
        server_user=embedded_broker.server_user,
        server_password=embedded_broker.server_password,
        mqtt5=False,
    )
    async with running(config) as server:
        assert server.metrics is None
        assert 0 == server.metrics_port
        assert "NoMetrics" == type(server.gateway.metrics).__name__


async def test_bots_count_what_the_server_counts(
    embedded_broker: BrokerUnderTest, tmp_path: Path
) -> None:
    """``ramino bots --metrics``: the moves the bots count as accepted are the moves the server
    counts; every move has a round trip; the finished game is counted."""
    broker = embedded_broker
    stats = Stats()
    stats.metrics = BotMetrics(games=lambda: stats.games)
    async with (
        serving_metrics(broker, tmp_path) as server,
        serve_metrics(stats.metrics, "127.0.0.1", 0) as port,
    ):
        async with asyncio.timeout(120):
            await run_bots(broker.url, [TablePlan("knock", 2)], prefix="mb", stats=stats)
        _, bots = await scrape(port)
        _, served = await scrape(server.metrics_port)
    assert 1 == stats.games == bots.value("ramino_bots_games_finished")
    assert stats.moves > 0
    assert stats.moves == bots.value("ramino_bots_moves_total")
    assert stats.moves == served.value("ramino_moves_total")
    refused = bots.value("ramino_bots_errors_total")
    assert stats.moves + refused == bots.value("ramino_bots_command_latency_seconds_count")
    assert served.value("ramino_errors_total") >= refused


def test_the_demo_takes_a_metrics_address() -> None:
    """``ramino demo --metrics HOST:PORT`` is passed on to its server."""
    args = build_parser().parse_args(["demo", "--metrics", "127.0.0.1:9464"])
    assert "127.0.0.1:9464" == args.metrics


def test_bots_refuse_a_bad_metrics_address(capsys: pytest.CaptureFixture[str]) -> None:
    """``ramino bots --metrics nonsense`` exits with 2 before connecting, saying what is
    expected."""
    status = main(["bots", "--broker", "mqtt://127.0.0.1:1", "--metrics", "nonsense"])
    assert 2 == status
    assert "HOST:PORT" in capsys.readouterr().err
