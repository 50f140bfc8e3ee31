"""Prometheus metrics: ``ramino serve --metrics HOST:PORT`` serves them on ``/metrics``.

Theory of operation. A ``Metrics`` holds a ``CollectorRegistry`` of its own (never the global
one, so several servers in one process, and tests, do not clash). The gateway, the table
actors and the store call small hooks on it as things happen (``command``, ``reply``,
``presence``, ``timer_fired``, ``store_commit``); without ``--metrics`` they hold
``NO_METRICS``, whose hooks do nothing. The hooks only add to plain numbers (the server's CPU
per move matters); the metric families are built from them when ``/metrics`` is scraped, and
what is cheaper to read than to count (the tables by status and variant, the messages the
gateway refused) is read then. The HTTP endpoint (``serve_metrics``) is a few lines of asyncio
server in the server's own event loop, so a scrape reads the server's state between two
callbacks (only the SQLite writer's thread adds to its two histograms meanwhile); it also runs
the probe that measures the event loop's lag. docs/operations.md, "Metrics", lists every
metric.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from protocol.game import COMMAND_TYPES as GAME_COMMANDS
from protocol.messages import Resync
from server.net.memory import sqlite_memory_bytes, traced_bytes
from server.net.wire import AnyReply

if TYPE_CHECKING:
    from server.net.gateway import Gateway
    from server.tables.service import TableService
    from server.tables.store import EventStore

__all__ = [
    "NO_METRICS",
    "BotMetrics",
    "Metrics",
    "MetricsAddressError",
    "NoMetrics",
    "parse_listen",
    "serve_metrics",
]

LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)
"""Command latency buckets (seconds): a move takes about a millisecond on an idle server."""
COMMIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
LAG_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
LAG_INTERVAL = 1.0
"""Seconds between two probes of the event loop's lag."""


class MetricsAddressError(ValueError):
    """A ``--metrics`` address that is not ``HOST:PORT``, or that cannot be listened on."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; ``:PORT``: every interface) as host and port.

    >>> parse_listen("127.0.0.1:9464")
    ('127.0.0.1', 9464)

    Raises:
        MetricsAddressError: not a host and a port from 0 to 65535.
    """
    host, colon, port = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise MetricsAddressError(f"metrics address {text!r}: HOST:PORT is needed, e.g. :9464")
    return host, int(port)


class NoMetrics:
    """The hooks of ``Metrics``, doing nothing: what the server holds without ``--metrics``."""

    def command(self, command: object, reply: AnyReply, received: float) -> None:
        """A command was answered (``received``: ``time.perf_counter()`` when it came in)."""

    def reply(self, reply: AnyReply) -> None:
        """A reply was published (any reply: refusals before decoding too)."""

    def presence(self, client: str, online: bool) -> None:
        """``client`` said it is online, or went away."""

    def timer_fired(self, kind: str) -> None:
        """A table's timer ran out and the server acted (``turn``, ``claim``, ``ready``)."""

    def store_commit(self, seconds: float, writes: int) -> None:
        """A store transaction of ``writes`` writes committed in ``seconds``."""


NO_METRICS = NoMetrics()


class _Exposed:
    """A registry of its own, with the process' CPU and memory and the event loop's lag."""

    def __init__(self, prefix: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.loop_lag = Histogram(
            f"{prefix}_event_loop_lag_seconds",
            "How late the event loop ran a callback due now (probed every second).",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)

    async def probe_loop_lag(self, interval: float = LAG_INTERVAL) -> None:
        """Every ``interval`` seconds, measure how late the loop wakes a sleeper (forever)."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + interval
            await asyncio.sleep(interval)
            self.loop_lag.observe(max(0.0, loop.time() - due))


class _Histogram:
    """Bucket counts and a sum, kept as plain numbers: an observation costs a bisection and
    two additions (``prometheus_client``'s take a lock each, ten times the time). One thread
    observes; a scrape reads between two observations at worst."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative counts by upper bound, ``+Inf`` last."""
        running = 0
        cumulative: list[tuple[str, float]] = []
        for bound, count in zip((*map(floatToGoString, self.bounds), "+Inf"), self.counts):
            running += count
            cumulative.append((bound, running))
        return cumulative


class Metrics(_Exposed, NoMetrics):
    """The server's metrics, in a registry of their own (``registry``).

    The hooks only add to plain counters (the server's CPU per move matters); the metric
    families are built from them when scraped (``_ServerCollector``).
    """

    def __init__(self) -> None:
        super().__init__("ramino")
        self.gateway: Gateway | None = None
        self.service: TableService | None = None
        self.commands: dict[str, int] = {}
        self.moves: dict[str, int] = {}
        self.latency: dict[str, _Histogram] = {}
        self.errors: dict[str, int] = {}
        self.resyncs = {"request": 0, "stale_seq": 0}
        self.timers = {"turn": 0, "claim": 0, "ready": 0}
        self.commit_seconds = _Histogram(COMMIT_BUCKETS)
        self.batch_writes = _Histogram(BATCH_BUCKETS)
        self.present: set[str] = set()
        self.registry.register(_ServerCollector(self))

    def attach(self, gateway: Gateway, service: TableService, store: EventStore) -> None:
        """Have ``gateway``, ``service`` and ``store`` report here."""
        self.gateway = gateway
        self.service = service
        gateway.metrics = self
        service.metrics = self
        stats = getattr(store, "stats", None)
        if stats is not None:
            stats.observer = self.store_commit

    # Hooks ----------------------------------------------------------------------------------

    def command(self, command: object, reply: AnyReply, received: float) -> None:
        """A command was answered (``received``: ``time.perf_counter()`` when it came in)."""
        kind = type(command).__name__
        latency = self.latency.get(kind)
        if latency is None:
            latency = self.latency[kind] = _Histogram(LATENCY_BUCKETS)
        latency.observe(time.perf_counter() - received)
        self.commands[kind] = self.commands.get(kind, 0) + 1
        if reply.ok:
            if isinstance(command, GAME_COMMANDS):
                self.moves[kind] = self.moves.get(kind, 0) + 1
            elif isinstance(command, Resync):
                self.resyncs["request"] += 1
        elif reply.code == "table/stale_seq":
            self.resyncs["stale_seq"] += 1

    def reply(self, reply: AnyReply) -> None:
        """A reply was published: refusals are counted by code."""
        if not reply.ok:
            code = reply.code or "unknown"
            self.errors[code] = self.errors.get(code, 0) + 1

    def presence(self, client: str, online: bool) -> None:
        """``client`` said it is online, or went away."""
        if online:
            self.present.add(client)
        else:
            self.present.discard(client)

    def timer_fired(self, kind: str) -> None:
        """A table's timer ran out and the server acted."""
        self.timers[kind] = self.timers.get(kind, 0) + 1

    def store_commit(self, seconds: float, writes: int) -> None:
        """A store transaction committed (the SQLite writer's thread calls it: only it writes
        these two)."""
        self.commit_seconds.observe(seconds)
        self.batch_writes.observe(writes)


class BotMetrics(_Exposed):
    """What ``ramino bots --metrics`` serves: the bots' moves, refusals and round trips as the
    clients see them (``ramino_bots_*``), and ``games()`` finished so far when scraped."""

    def __init__(self, games: Callable[[], int] = lambda: 0) -> None:
        super().__init__("ramino_bots")
        registry = self.registry
        self.moves = Counter(
            "ramino_bots_moves", "Moves the server accepted, by kind.", ["kind"], registry=registry
        )
        self.errors = Counter(
            "ramino_bots_errors", "Moves the server refused, by code.", ["code"], registry=registry
        )
        self.latency = Histogram(
            "ramino_bots_command_latency_seconds",
            "From a move's publication to its reply, as the bot sees it, by kind.",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        Gauge(
            "ramino_bots_games_finished", "Games the bots finished.", registry=registry
        ).set_function(lambda: games())

    def acted(self, command: object, reply: AnyReply, seconds: float) -> None:
        """A bot's move got ``reply`` after ``seconds``."""
        kind = type(command).__name__
        self.latency.labels(kind).observe(seconds)
        if reply.ok:
            self.moves.labels(kind).inc()
        else:
            self.errors.labels(reply.code or "unknown").inc()


class _ServerCollector(Collector):
    """The server's metric families, built from ``Metrics``' counters and the server's state
    when scraped (on the event loop: nothing changes meanwhile but the store's two)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        metrics = self.metrics
        yield _counter("ramino_commands", "Commands answered, by kind.", "kind", metrics.commands)
        yield _counter("ramino_moves", "Game commands accepted, by kind.", "kind", metrics.moves)
        latency = HistogramMetricFamily(
            "ramino_command_latency_seconds",
            "From a command's arrival to its reply's publication, by kind.",
            labels=["kind"],
        )
        for kind, histogram in sorted(metrics.latency.items()):
            latency.add_metric([kind], histogram.buckets(), histogram.total)
        yield latency
        yield _counter("ramino_errors", "Error replies, by code.", "code", metrics.errors)
        yield _counter(
            "ramino_resyncs",
            "Resynchronisations: asked for (request) or sent with a stale_seq refusal.",
            "reason",
            metrics.resyncs,
        )
        yield _counter(
            "ramino_timers_fired",
            "Table timers that ran out and made the server act, by kind.",
            "kind",
            metrics.timers,
        )
        for name, documentation, histogram in (
            (
                "ramino_store_commit_seconds",
                "Duration of the store's group-commit transactions.",
                metrics.commit_seconds,
            ),
            (
                "ramino_store_batch_writes",
                "Writes (appends, snapshots; SQLite: saved refusals too) per store transaction.",
                metrics.batch_writes,
            ),
        ):
            family = HistogramMetricFamily(name, documentation)
            family.add_metric([], histogram.buckets(), histogram.total)
            yield family
        yield GaugeMetricFamily(
            "ramino_connected_clients",
            "Clients whose last presence message said online.",
            value=len(metrics.present),
        )
        tables = GaugeMetricFamily(
            "ramino_tables",
            "Tables the server holds, by status and variant.",
            labels=["status", "variant"],
        )
        counts: dict[tuple[str, str], int] = {}
        actors = metrics.service.actors.values() if metrics.service is not None else ()
        for actor in actors:
            state = actor.table
            if state.created is not None:
                key = (state.status, state.created.variant)
                counts[key] = counts.get(key, 0) + 1
        for (status, variant), count in sorted(counts.items()):
            tables.add_metric([status, variant], count)
        yield tables
        sqlite = sqlite_memory_bytes()
        if sqlite is not None:
            yield GaugeMetricFamily(
                "ramino_sqlite_memory_bytes",
                "Bytes SQLite holds in this process (page caches, statements), all connections.",
                value=sqlite,
            )
        traced = traced_bytes()
        if traced is not None:
            yield GaugeMetricFamily(
                "ramino_python_traced_bytes",
                "Bytes of live Python objects, while RAMINO_TRACEMALLOC traces allocations.",
                value=traced,
            )
        gateway = metrics.gateway
        yield CounterMetricFamily(
            "ramino_refused_messages",
            "Messages refused or dropped before running: over a limit or undecodable.",
            value=gateway.refused if gateway is not None else 0,
        )


def _counter(name: str, documentation: str, label: str, values: dict[str, int]) -> Metric:
    family = CounterMetricFamily(name, documentation, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


@contextlib.asynccontextmanager
async def serve_metrics(
    metrics: _Exposed, host: str, port: int, lag_interval: float = LAG_INTERVAL
) -> AsyncIterator[int]:
    """Serve ``GET /metrics`` on ``host:port`` (``""``: every interface) and probe the loop's
    lag while in the block; yield the port listened on (``port`` 0: a free one).

    Raises:
        MetricsAddressError: the address cannot be listened on.
    """
    handler = _handler(metrics.exposition)
    try:
        server = await asyncio.start_server(handler, host or None, port)
    except OSError as error:
        raise MetricsAddressError(f"cannot serve metrics on {host}:{port}: {error}") from error
    probe = asyncio.create_task(metrics.probe_loop_lag(lag_interval), name="metrics-lag-probe")
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        probe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probe
        server.close()
        await server.wait_closed()


HEADER_LINES = 100
REQUEST_SECONDS = 5.0
"""A scrape that does not finish sending its request within this is dropped."""


def _handler(
    exposition: Callable[[], bytes],
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_SECONDS):
                request = await reader.readline()
                for _ in range(HEADER_LINES):
                    if (await reader.readline()).strip() == b"":
                        break
            parts = request.split()
            method = parts[0] if parts else b""
            path = parts[1].split(b"?")[0] if len(parts) > 1 else b""
            if method not in (b"GET", b"HEAD"):
                status, body, kind = "405 Method Not Allowed", b"GET /metrics\n", "text/plain"
            elif path != b"/metrics":
                status, body, kind = "404 Not Found", b"see /metrics\n", "text/plain"
            else:
                status, body, kind = "200 OK", exposition(), CONTENT_TYPE_LATEST
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + (body if method != b"HEAD" else b""))
            await writer.drain()
        except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError):
            pass  # a client that went away or sent too much: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return handle
