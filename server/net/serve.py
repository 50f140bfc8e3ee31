"""``ramino serve``: the table service on a store, spoken to through an MQTT broker.

Settings come from the command line or ``RAMINO_*`` environment variables (the command line
wins): the broker (``embedded``, the default, runs an amqtt broker in this process; or
``mqtt://HOST:PORT``, or several, comma-separated: the nodes of a broker cluster, tried in
turn), the store URL, the server account's name and password, the accounts file of the embedded
broker (none: guests) or where it keeps its guest names, timers, table lifetimes and limits, the
embedded broker's connection limits (:class:`~server.net.broker_limits.BrokerLimits`), and where
to serve Prometheus metrics
(``--metrics HOST:PORT``, ``server.net.metrics``; none by default). At start the process raises
its soft file limit to the hard one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from protocol import topics
from protocol.codec import encode
from protocol.messages import PROTOCOL_VERSION, ServerStatus
from protocol.runtime import tune_gc
from protocol.transport import BrokerAddress, Transport, parse_broker_url, parse_broker_urls
from server.net.accounts import Accounts, AccountsError
from server.net.broker_limits import BrokerLimits, raise_file_limit
from server.net.embedded import SERVER_USER, BrokerPortBusy, EmbeddedBroker
from server.net.gateway import SERVER_NAME, Gateway, Limits
from server.net.guests import Guests
from server.net.metrics import Metrics, parse_listen, serve_metrics
from server.net.web import ReplaySource, parse_web, static_site
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
    """``HOST:PORT`` of the web page and of MQTT over WebSockets (embedded broker); "": none."""
    house_bots: bool = False
    """Seat bots at the public tables waiting for players (``bots.house``)."""
    mqtt5: bool | None = None
    """Whether the server's connection speaks MQTT 5 (``None``: on an external broker only). It
    needs MQTT 5 to tell a retained command from a new one on an external broker; the embedded
    broker (MQTT 3.1.1) drops retained commands itself."""
    metrics: str = ""
    """``HOST:PORT`` to serve Prometheus metrics on (``/metrics``); "": none."""

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
            ("grace_seconds", float),
            ("claim_seconds", float),
            ("waiting_ttl", float),
            ("finished_ttl", float),
            ("metrics", str),
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


@contextlib.asynccontextmanager
async def running(config: ServeConfig, clock: Clock | None = None) -> AsyncIterator[Running]:
    """Start everything ``config`` asks for, yield it running, and stop it all cleanly.

    Raises:
        BrokerPortBusy: the embedded broker found no port to listen on.
        AccountsError: the accounts file or the guest names file does not parse, or the
            latter cannot be written.
        TransportError: the broker is not reachable or refuses the server account.
        StoreError: the store cannot be opened.
        MetricsAddressError: ``config.metrics`` is not ``HOST:PORT`` or cannot be listened on.
    """
    clock = clock or SystemClock()
    listen = parse_listen(config.metrics) if config.metrics else None
    web_url = ""
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
            replays = ReplaySource()
            broker = await _embedded(
                config.port,
                accounts,
                password,
                config.server_user,
                config.broker_limits,
                guests,
                web,
                replays,
            )
            stack.push_async_callback(_bounded, "the embedded broker", broker.stop)
            addresses: tuple[BrokerAddress, ...] = (parse_broker_url(broker.url),)
            if web is not None:
                shown = "127.0.0.1" if web[0] in ("", "0.0.0.0", "::") else web[0]
                web_url = f"http://{shown}:{broker.web_port}/"
        else:
            if config.web:
                raise ValueError("--web needs the embedded broker (see docs/web.md)")
            addresses = parse_broker_urls(config.broker)
        store = await open_store(config.store)
        stack.push_async_callback(store.close)
        if config.broker == "embedded":
            replays.store = store  # the page's replays (GET /replay/TABLE) read this store
        # On an external broker the will says "offline" when this process dies without a word.
        # The embedded broker dies with the process: there a will could only arrive during a
        # clean stop, as a second status after the real one.
        embedded = config.broker == "embedded"
        will = None if embedded else (topics.server_status(), encode(_offline_status()))
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
        )


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
    replays: ReplaySource | None = None,
) -> EmbeddedBroker:
    """The embedded broker on ``port``, or on a free port if that one is taken."""
    http = static_site(replays=replays) if web is not None else None
    broker = EmbeddedBroker(
        port=port,
        accounts=accounts,
        server_password=password,
        server_user=server_user,
        limits=limits,
        guests=guests,
        web=web,
        http=http,
    )
    try:
        await broker.start()
    except BrokerPortBusy:
        if port == 0 and (web is None or web[1] == 0):
            raise
        free_web = None if web is None else (web[0], 0)
        broker = EmbeddedBroker(
            port=0,
            accounts=accounts,
            server_password=password,
            server_user=server_user,
            limits=limits,
            guests=guests,
            web=free_web,
            http=http,
        )
        await broker.start()
        where = f"the embedded broker listens on {broker.port}"
        if web is not None:
            where += f" and the web page on {broker.web_port}"
        print(
            f"ramino: port {port}{'' if web is None else f' or {web[1]}'} is taken; {where} "
            f"instead (or connect to a broker of your own with --broker mqtt://HOST:PORT)",
            file=sys.stderr,
        )
    return broker


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
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    async with running(config) as server:
        tune_gc()  # after start-up and recovery: no long collector pauses under load
        where = "embedded broker" if config.broker == "embedded" else "broker"
        announce(
            f"ramino: serving on {where} {server.address.url}, store {config.store}, "
            f"{len(server.resumed)} table(s) resumed; Ctrl-C stops"
        )
        if server.metrics is not None:
            host = parse_listen(config.metrics)[0] or "0.0.0.0"
            announce(f"ramino: metrics on http://{host}:{server.metrics_port}/metrics")
        if server.web_url:
            announce(f"ramino: play in a browser at {server.web_url}")
        await stop.wait()
        announce("ramino: stopping")
