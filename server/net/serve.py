"""``ramino serve``: the table service on a store, spoken to through an MQTT broker.

Settings come from the command line or ``RAMINO_*`` environment variables (the command line
wins): the broker (``embedded``, the default, runs an amqtt broker in this process; or
``mqtt://HOST:PORT``, or several, comma-separated: the nodes of a broker cluster, tried in
turn), the store URL, the server account's name and password, the accounts file of the embedded
broker (none: guests) or where it keeps its guest names, timers, table lifetimes and limits, the
embedded broker's connection limits (:class:`~server.net.broker_limits.BrokerLimits`), and where
to serve Prometheus metrics
(``--metrics HOST:PORT``, ``server.net.metrics``; none by default), and, for one worker of
several sharing a PostgreSQL store and a broker, its name, the lobby shards and the lease time
(``--worker NAME --shards N --lease-ttl SECONDS``, ``server.net.workers``). At start the process
raises its soft file limit to the hard one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from protocol import topics
from protocol.codec import encode
from protocol.messages import PROTOCOL_VERSION, ServerStatus
from protocol.runtime import tune_gc
from protocol.transport import BrokerAddress, Transport, parse_broker_url, parse_broker_urls
from server.ladder.serving import LadderServer, LadderSettings, serve_ladder
from server.net.accounts import Accounts, AccountsError
from server.net.broker_limits import BrokerLimits, raise_file_limit
from server.net.embedded import HOST, SERVER_USER, BrokerPortBusy, EmbeddedBroker
from server.net.gateway import SERVER_NAME, Gateway, Limits
from server.net.guests import Guests
from server.net.memory import install_report_signal, start_tracing
from server.net.metrics import Metrics, parse_listen, serve_metrics
from server.net.web import ReplaySource, page_url, parse_web, serve_page, static_site
from server.net.workers import DEFAULT_TTL, Worker, WorkerError
from server.tables.postgres_store import PostgresStore
from server.tables.service import TableService
from server.tables.store import EventStore, open_store, store_options
from server.tables.timers import Clock, SystemClock

__all__ = ["MEMORY", "Running", "ServeConfig", "guests_path", "running", "serve"]

_log = logging.getLogger(__name__)

_LIMITS: tuple[tuple[str, type], ...] = (
    ("rate", float),
    ("burst", int),
    ("max_waiting_tables", int),
    ("max_open_tables", int),
)
"""The ``Limits`` fields settable from the environment (and ``from_env``'s overrides)."""

MEMORY = ":memory:"
"""``ServeConfig.guests`` for guest names kept in memory only."""

WRITE_SPACING = 0.001
"""The server's socket writes to the broker are at least this far apart (seconds): under load
one write carries the messages of many commands, at the cost of at most this much latency."""


_BROKER_LIMITS: tuple[tuple[str, Callable[[str], object]], ...] = (
    ("connect_timeout", float),
    ("max_connections", int),
    ("max_connections_per_user", int),
    ("max_subscriptions", int),
)
"""The fields of ``BrokerLimits`` read from ``RAMINO_<NAME>`` variables and flags."""


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything ``ramino serve`` needs; see the module docstring."""

    broker: str = "embedded"
    """``embedded`` or ``mqtt://HOST:PORT[,mqtt://HOST:PORT...]`` (a cluster's nodes)."""
    store: str = "sqlite:///ramino.db"
    port: int = 1883
    """Port of the embedded broker (taken: a free one is used and printed)."""
    server_user: str = SERVER_USER
    server_password: str = ""
    accounts: str = ""
    """Accounts file of the embedded broker (Mosquitto's password_file format); "": guests."""
    guests: str = ""
    """Where the embedded broker keeps its guest names (:mod:`server.net.guests`): "" next to
    a SQLite store file (``PATH.guests``), in memory with an in-memory store, ``ramino.guests``
    in the working folder with another store; ``:memory:`` in memory."""
    grace_seconds: float = 30.0
    claim_seconds: float = 10.0
    waiting_ttl: float = 1800.0
    """Seconds a table waiting for players lives without activity before it is closed (0:
    forever)."""
    finished_ttl: float = 300.0
    """Seconds a finished or closed table stays in memory without activity (0: forever)."""
    limits: Limits = field(default_factory=Limits)
    broker_limits: BrokerLimits = field(default_factory=BrokerLimits)
    """Connection and subscription limits of the embedded broker."""
    web: str = ""
    """``HOST:PORT`` of the web page (with the embedded broker, also of MQTT over WebSockets);
    "": none."""
    web_broker: str = ""
    """The broker's WebSocket URL the page connects to (``ws://HOST:PORT/mqtt``); "": ``/mqtt``
    on the page's own address (the embedded broker's listener). Needed for ``web`` with an
    external broker."""
    house_bots: bool = False
    """Seat bots at the public tables waiting for players (``bots.house``)."""
    mqtt5: bool | None = None
    """Whether the server's connection speaks MQTT 5 (``None``: on an external broker only). It
    needs MQTT 5 to tell a retained command from a new one on an external broker; the embedded
    broker (MQTT 3.1.1) drops retained commands itself."""
    metrics: str = ""
    """``HOST:PORT`` to serve Prometheus metrics on (``/metrics``); "": none."""
    worker: str = ""
    """This process's name as one worker of several (``server.net.workers``); "": the only
    server."""
    shards: int = 1
    """Lobby shards the workers share (workers only)."""
    lease_ttl: float = DEFAULT_TTL
    """Seconds a worker's leases last without renewal (workers only)."""
    ladder: str = ""
    """The ladder to run in this server (docs/ladder.md); "": none."""
    ladder_pools: str = ""
    """Its pools, comma-separated; "": the ladder's default pools."""
    ladder_concurrency: int = 1
    ladder_move_seconds: float = 10.0
    ladder_max_timeouts: int = 2
    ladder_max_forfeits: int = 3

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: object) -> ServeConfig:
        """Settings from ``RAMINO_*`` variables, then ``overrides`` (``None`` values skipped)."""
        env = dict(os.environ) if env is None else env
        values: dict[str, object] = {}
        settings: tuple[tuple[str, Callable[[str], object]], ...] = (
            ("broker", str),
            ("store", str),
            ("port", int),
            ("server_user", str),
            ("server_password", str),
            ("accounts", str),
            ("guests", str),
            ("web", str),
            ("web_broker", str),
            ("grace_seconds", float),
            ("claim_seconds", float),
            ("waiting_ttl", float),
            ("finished_ttl", float),
            ("metrics", str),
            ("worker", str),
            ("shards", int),
            ("lease_ttl", float),
            ("ladder", str),
            ("ladder_pools", str),
            ("ladder_concurrency", int),
            ("ladder_move_seconds", float),
            ("ladder_max_timeouts", int),
            ("ladder_max_forfeits", int),
            *_LIMITS,
            *_BROKER_LIMITS,
        )
        for name, cast in settings:
            text = env.get(f"RAMINO_{name.upper()}")
            if text:
                values[name] = cast(text)
        values.update({key: value for key, value in overrides.items() if value is not None})
        limits = {name: values.pop(name) for name, _ in _LIMITS if name in values}
        if limits:
            values["limits"] = replace(Limits(), **limits)  # type: ignore[arg-type]
        broker_limits = {name: values.pop(name) for name, _cast in _BROKER_LIMITS if name in values}
        if broker_limits:
            base = values.get("broker_limits", BrokerLimits())
            values["broker_limits"] = replace(base, **broker_limits)  # type: ignore[type-var]
        return cls(**values)  # type: ignore[arg-type]


@dataclass
class Running:
    """A running server: where its broker is, its service and its gateway."""

    address: BrokerAddress
    service: TableService
    gateway: Gateway
    store: EventStore
    server_password: str
    resumed: list[str]
    metrics: Metrics | None = None
    metrics_port: int = 0
    """The port ``/metrics`` is served on (0: no metrics)."""
    web_url: str = ""
    """The web page's address (``http://HOST:PORT/``), "" without ``--web``."""
    worker: Worker | None = None
    """This process as one worker of several (``--worker``), else ``None``."""
    ladder: LadderServer | None = None
    """The ladder run here (``--ladder``)."""


@contextlib.asynccontextmanager
async def running(
    config: ServeConfig,
    clock: Clock | None = None,
    announce: Callable[[str], None] | None = None,
) -> AsyncIterator[Running]:
    """Start everything ``config`` asks for, yield it running, and stop it all cleanly.

    Raises:
        BrokerPortBusy: the embedded broker found no port to listen on.
        AccountsError: the accounts file or the guest names file does not parse, or the
            latter cannot be written.
        TransportError: the broker is not reachable or refuses the server account.
        StoreError: the store cannot be opened.
        MetricsAddressError: ``config.metrics`` is not ``HOST:PORT`` or cannot be listened on.
        WorkerError: ``config.worker`` without a PostgreSQL store or an external broker, or a
            live worker of the same name.
    """
    check_worker(config)
    clock = clock or SystemClock()
    listen = parse_listen(config.metrics) if config.metrics else None
    web_url = ""
    pages: dict[str, Callable[[], str]] = {}
    """Generated pages of the web listener (``/ladder`` while a ladder runs here)."""
    replays = ReplaySource()
    """The page's replays (``GET /replay/TABLE``), read from the store once it is open."""
    async with contextlib.AsyncExitStack() as stack:
        password = config.server_password
        if config.broker == "embedded":
            password = password or secrets.token_urlsafe(16)
            accounts = Accounts.load(config.accounts) if config.accounts else None
            guests = None
            if accounts is None:
                path = guests_path(config.guests, config.store)
                guests = Guests(None) if path is None else Guests.load(path)
                try:
                    guests.save()  # a folder we cannot write to fails now, not at a login
                except OSError as error:
                    raise AccountsError(
                        f"cannot write the guest names to {path}: {error} (see --guests)"
                    ) from None
            web = parse_web(config.web) if config.web else None
            broker = await _embedded(
                config.port,
                accounts,
                password,
                config.server_user,
                config.broker_limits,
                guests,
                web,
                config.web_broker,
                pages,
                replays,
            )
            stack.push_async_callback(_bounded, "the embedded broker", broker.stop)
            addresses: tuple[BrokerAddress, ...] = (parse_broker_url(broker.url),)
            if web is not None:
                web_url = page_url(web[0], broker.web_port)
        else:
            addresses = parse_broker_urls(config.broker)
            if config.web:
                if not config.web_broker:
                    raise ValueError(
                        "--web with an external broker needs --web-broker (docs/web.md)"
                    )
                host, port = parse_web(config.web)
                site = static_site(replays=replays, broker_url=config.web_broker, pages=pages)
                web_url = page_url(
                    host, await stack.enter_async_context(serve_page(host, port, site))
                )
        store = await open_store(config.store)
        stack.push_async_callback(store.close)
        replays.store = store
        # On an external broker the will says "offline" when this process dies without a word.
        # The embedded broker dies with the process: there a will could only arrive during a
        # clean stop, as a second status after the real one.
        embedded = config.broker == "embedded"
        # A worker's will would say the whole server is offline while the others serve.
        will = (
            None
            if embedded or config.worker
            else (topics.server_status(), encode(_offline_status()))
        )
        transport = Transport(
            config.server_user,
            password,
            client_id=f"{config.server_user}-{secrets.token_hex(4)}",
            will=will,
            will_retain=True,
            write_spacing=WRITE_SPACING,
            mqtt5=not embedded if config.mqtt5 is None else config.mqtt5,
        )
        await transport.connect(addresses)
        stack.push_async_callback(_bounded, "the broker connection", transport.close)
        gateway = Gateway(transport, clock=clock, limits=config.limits)
        worker: Worker | None = None
        service = TableService(
            store,
            gateway,
            clock=clock,
            claim_seconds=config.claim_seconds,
            grace_seconds=config.grace_seconds,
            waiting_ttl=config.waiting_ttl,
            finished_ttl=config.finished_ttl,
        )
        gateway.service = service
        metrics, metrics_port = None, 0
        if listen is not None:
            metrics = Metrics()
            metrics.attach(gateway, service, store)
            metrics_port = await stack.enter_async_context(serve_metrics(metrics, *listen))
        if config.worker:
            assert isinstance(store, PostgresStore)
            worker = Worker(
                config.worker,
                store.url,
                store,
                gateway,
                service,
                shards=config.shards,
                ttl=config.lease_ttl,
                announce=announce or (lambda line: None),
            )
            await worker.start()
            stack.push_async_callback(_bounded, "the worker", worker.stop)
        else:
            await gateway.start()
            stack.push_async_callback(_bounded, "the tables", service.stop)
            stack.push_async_callback(_bounded, "the gateway", gateway.stop)
        resumed = list(service.actors)
        address = transport.address or addresses[0]
        if config.house_bots:
            from bots.house import HouseBots

            house = HouseBots(address.url)
            await house.start()
            stack.push_async_callback(_bounded, "the house bots", house.stop)
        ladder = None
        if config.ladder:
            ladder = await stack.enter_async_context(
                serve_ladder(_ladder_settings(config), service, gateway, store)
            )
            pages["/ladder"] = ladder.html
            stack.callback(pages.pop, "/ladder", None)
        yield Running(
            address,
            service,
            gateway,
            store,
            password,
            resumed,
            metrics,
            metrics_port,
            web_url,
            worker,
            ladder,
        )


def check_worker(config: ServeConfig) -> None:
    """Refuse worker settings that cannot work, with the reason.

    Raises:
        WorkerError: ``--worker`` without PostgreSQL or with the embedded broker, a bad name,
            or fewer than one shard or a lease time under a second.
    """
    if not config.worker:
        if config.shards != 1:
            raise WorkerError("--shards needs --worker (one server has one lobby shard)")
        return
    url, _ = store_options(config.store)
    if not url.startswith(("postgresql://", "postgres://")):
        raise WorkerError(
            "--worker needs a PostgreSQL store shared by the workers "
            "(--store postgresql://...); SQLite is for a single server"
        )
    if config.broker == "embedded":
        raise WorkerError("--worker needs a broker shared by the workers (--broker mqtt://...)")
    if config.ladder:
        raise WorkerError("--ladder runs in a single server, not in a worker (docs/ladder.md)")
    if not topics.valid_name(config.worker):
        raise WorkerError("a worker name is 1-64 of A-Z a-z 0-9 _ . -")
    if config.shards < 1:
        raise WorkerError("--shards must be at least 1")
    if config.lease_ttl < 1.0:
        raise WorkerError("--lease-ttl must be at least 1 second")


def _ladder_settings(config: ServeConfig) -> LadderSettings:
    settings = LadderSettings(
        config.ladder,
        concurrency=config.ladder_concurrency,
        move_seconds=config.ladder_move_seconds,
        max_timeouts=config.ladder_max_timeouts,
        max_forfeits=config.ladder_max_forfeits,
    )
    return replace(settings, pools=config.ladder_pools) if config.ladder_pools else settings


def guests_path(guests: str, store: str) -> Path | None:
    """Where the embedded broker keeps its guest names (``None``: in memory); see
    :attr:`ServeConfig.guests`.

    >>> guests_path("", "sqlite:///data/ramino.db"), guests_path("", "sqlite:///:memory:")
    (PosixPath('data/ramino.db.guests'), None)
    """
    if guests == MEMORY:
        return None
    if guests:
        return Path(guests)
    url, _ = store_options(store)
    if url.startswith(("postgresql://", "postgres://")):
        return Path("ramino.guests")
    path = url
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        path = path[1:] if path.startswith("/") else path  # sqlite:///rel, sqlite:////abs
    if path in ("", MEMORY) or "://" in path:
        return None
    return Path(f"{path}.guests")


async def _embedded(
    port: int,
    accounts: Accounts | None,
    password: str,
    server_user: str,
    limits: BrokerLimits,
    guests: Guests | None,
    web: tuple[str, int] | None = None,
    web_broker: str = "",
    pages: dict[str, Callable[[], str]] | None = None,
    replays: ReplaySource | None = None,
) -> EmbeddedBroker:
    """The embedded broker on ``port``, or on a free port if that one is taken."""
    http = (
        static_site(replays=replays, broker_url=web_broker, pages=pages)
        if web is not None
        else None
    )

    def make(port: int, web: tuple[str, int] | None) -> EmbeddedBroker:
        return EmbeddedBroker(
            port=port,
            accounts=accounts,
            server_password=password,
            server_user=server_user,
            limits=limits,
            guests=guests,
            web=web,
            http=http,
        )

    broker = make(port, web)
    try:
        await broker.start()
    except BrokerPortBusy:
        if port == 0 and (web is None or web[1] == 0):
            raise
        move_broker = _taken(HOST, port)
        move_web = web is not None and _taken(*web)
        if not (move_broker or move_web):  # freed meanwhile, or a bind cannot tell: move both
            move_broker, move_web = True, web is not None
        broker = make(
            0 if move_broker else port,
            None if web is None else (web[0], 0 if move_web else web[1]),
        )
        await broker.start()
        moves = []
        if move_broker:
            moves.append(
                f"port {port} is taken, so the embedded broker listens on {broker.port} instead"
                " (or connect to a broker of your own with --broker mqtt://HOST:PORT)"
            )
        if web is not None and move_web:
            moves.append(f"port {web[1]} is taken, so the web page is on {broker.web_port} instead")
        print(f"ramino: {'; '.join(moves)}", file=sys.stderr)
    return broker


def _taken(host: str, port: int) -> bool:
    """Whether something listens on ``host:port`` (a bind there fails)."""
    if port == 0:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


STOP_SECONDS = 10.0
"""How long each part of the server gets to stop before the rest goes on without it."""


async def _bounded(part: str, stop: Callable[[], Awaitable[None]]) -> None:
    """``await stop()``, given up (with a warning) after ``STOP_SECONDS``: a part that hangs
    (a peer that never answers, a library waiting for a socket) must not keep the process from
    stopping. The store is closed unbounded: it writes what was acknowledged."""
    try:
        async with asyncio.timeout(STOP_SECONDS):
            await stop()
    except TimeoutError:
        _log.warning("stopping %s took over %g s; going on without it", part, STOP_SECONDS)


def _offline_status() -> ServerStatus:
    return ServerStatus(
        online=False,
        server=SERVER_NAME,
        versions=(PROTOCOL_VERSION,),
        shards=1,
        tables=0,
        started_at=0.0,
    )


def _say(line: str) -> None:
    print(line, flush=True)  # whoever started us may wait for this line through a pipe


async def serve(config: ServeConfig, announce: Callable[[str], None] | None = None) -> None:
    """Run until SIGINT or SIGTERM, then stop cleanly."""
    if announce is None:
        announce = _say
    raise_file_limit()  # idle sockets must not run out of file descriptors (logged)
    frames = start_tracing()  # RAMINO_TRACEMALLOC (server.net.memory)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    with contextlib.suppress(NotImplementedError, AttributeError):
        install_report_signal(loop)  # kill -USR1: a memory report in the log
    async with running(config, announce=announce) as server:
        tune_gc()  # after start-up and recovery: no long collector pauses under load
        where = "embedded broker" if config.broker == "embedded" else "broker"
        if server.worker is not None:
            announce(
                f"ramino: worker {config.worker} serving on {where} {server.address.url}, "
                f"{len(server.worker.tables)} table(s) taken over, lobby shard(s) "
                f"{sorted(server.worker.shards)} of {config.shards}; Ctrl-C stops"
            )
        else:
            announce(
                f"ramino: serving on {where} {server.address.url}, store {config.store}, "
                f"{len(server.resumed)} table(s) resumed; Ctrl-C stops"
            )
        if server.metrics is not None:
            host = parse_listen(config.metrics)[0] or "0.0.0.0"
            announce(f"ramino: metrics on http://{host}:{server.metrics_port}/metrics")
        if server.web_url:
            announce(f"ramino: play in a browser at {server.web_url}")
        if frames:
            announce(f"ramino: tracing Python's allocations ({frames} frame(s)); SIGUSR1 reports")
        await stop.wait()
        announce("ramino: stopping")
