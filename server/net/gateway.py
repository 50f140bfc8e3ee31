"""The MQTT shell of the server: commands in from the broker, replies and updates out.

Theory of operation. The gateway reads every client's command topics (``protocol.topics``);
the sender is the last level of the topic, which the broker's ACL lets only that user publish
on, so no identity in a payload is ever trusted. Messages come straight from the transport's
callback (``Transport.deliver``), with no queue in between. For each message it

1. applies the sender's rate limit and the payload limit (coded errors, throttled);
2. decodes the ``Request`` (``protocol/malformed``, ``protocol/invalid`` on failure);
3. runs it: lobby commands here, table and game commands through the ``TableService``; a
   game command for a table already loaded goes straight to its actor (``TableActor.post``),
   which calls back with the reply, without a task or a future of its own;
4. answers on the sender's inbox with exactly one ``Reply``.

As the table's ``Outbox`` it receives each durable record and, once a command's records are
all in (``flush``), publishes: an ``Update`` to each seated player (the events as his seat may
see them, his whole view and his legal actions), the spectator's ``TableEvents`` on the public
stream, the retained ``TableSnapshot`` and, when it changed, the retained lobby listing.
Nothing private is retained. Presence messages (a will on disconnect) mark players absent at
their tables, which starts their grace period (``TableActor.set_absent``).

Quotas. From the states it publishes the gateway keeps, per account, the waiting tables it
created and the open (waiting or playing) tables it sits at; ``create_table``, ``sit`` and
``rematch`` beyond ``Limits.max_waiting_tables`` or ``Limits.max_open_tables`` are refused with
``limit/tables``. A worker of several counts them in the store instead, over every worker's
tables (``Leases.claim_places``). The count of open tables is the retained ``ServerStatus.tables``,
republished when it changes (at most every ``STATUS_SECONDS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from protocol import topics
from protocol.codec import (
    MalformedMessage,
    decode_listing,
    decode_presence,
    decode_request,
    encode,
    request_id,
)
from protocol.errors import CodedError
from protocol.game import COMMAND_TYPES as GAME_COMMANDS
from protocol.game import Command as GameCommand
from protocol.messages import (
    MAX_ID,
    PROTOCOL_VERSION,
    ChatLine,
    ChatSay,
    Created,
    CreateTable,
    Hello,
    Join,
    LadderEntry,
    LadderJoin,
    LadderLeave,
    LadderStatus,
    Leave,
    ListTables,
    ListVariants,
    Logged,
    OptionInfo,
    Ready,
    Rematch,
    Reply,
    Request,
    Result,
    Resync,
    ServerStatus,
    Sit,
    Stand,
    Start,
    Synced,
    TableListing,
    Tables,
    TableSnapshot,
    Update,
    VariantInfo,
    Variants,
    Welcome,
)
from protocol.transport import Message, Transport
from server.engine import OPTIONS, VARIANTS, is_over, legal_actions, view
from server.engine.views import View, seat_view
from server.net.logs import get_logger
from server.net.metrics import NO_METRICS, NoMetrics
from server.net.wire import (
    EMPTY_EVENTS,
    AnyReply,
    EventsOut,
    ReplyOut,
    UpdateOut,
    decode_events,
    encode_events,
)
from server.tables import table as tables
from server.tables.actor import Reply as TableReply
from server.tables.actor import TableActor, load_table
from server.tables.errors import LeaseLost
from server.tables.records import Record
from server.tables.replay import SPECTATOR, Viewer, project
from server.tables.service import TableService
from server.tables.table import TableState
from server.tables.timers import Clock, SystemClock

if TYPE_CHECKING:
    from server.net.workers import Worker

__all__ = ["Gateway", "Limits", "RateLimiter"]

_log = logging.getLogger(__name__)
_EVENTS = "ramino.gateway"
_events = get_logger(_EVENTS)
_events_level = logging.getLogger(_EVENTS)
"""The standard logger behind ``_events``: asked before building a per-request line."""
SERVER_NAME = "ramino/0.1"


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-client limits.

    A client that only answers what the server sends is never refused: every ``Update`` sent
    to a client gives it back ``update_credit`` commands (up to ``burst``), so play goes as fast
    as the server moves. ``rate`` and ``burst`` bound what no update prompts: lobby commands, a
    resync per table after a reconnection, a whole turn sent without waiting for its updates
    (docs/operations.md, "Sizing the rate limit").
    """

    rate: float = 50.0
    """Commands per second a client may send, on average."""
    burst: int = 100
    """Commands a client may send at once."""
    update_credit: float = 2.0
    """Commands given back for each ``Update`` sent to the client: one to answer it, one for a
    resync (a command refused as stale because another update was on its way)."""
    chat_rate: float = 1.0
    chat_burst: int = 5
    max_payload: int = 16 * 1024
    max_waiting_tables: int = 10
    """Tables still waiting for players that one account may have created (0: no limit)."""
    max_open_tables: int = 50
    """Open (waiting or playing) tables one account may sit at (0: no limit)."""


@dataclass
class RateLimiter:
    """Token buckets, one per key, refilled at ``rate`` per second up to ``burst``."""

    rate: float
    burst: int
    now: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)

    def credit(self, key: str, tokens: float) -> None:
        """Give ``key`` back ``tokens`` (its bucket still holds at most ``burst``)."""
        level = self._buckets.get(key)
        if level is not None:
            self._buckets[key] = (min(float(self.burst), level[0] + tokens), level[1])

    def allow(self, key: str) -> bool:
        """Take one token from ``key``'s bucket; ``False`` when it is empty."""
        now = self.now()
        tokens, then = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return False
        self._buckets[key] = (tokens - 1.0, now)
        if len(self._buckets) > 100_000:  # forget idle clients now and then
            self._buckets = {
                name: (level, at) for name, (level, at) in self._buckets.items() if now - at < 60
            }
        return True


class _Batch(msgspec.Struct, frozen=True, gc=False):
    """The events of one append (seqs ``first`` to ``last``), encoded once: for each seat as
    it may see them (``private``, parallel to ``seats``, the table's seats then) and for
    spectators (``public``). Bytes only: nothing here for the garbage collector to visit."""

    first: int
    last: int
    seats: tuple[str, ...]
    private: tuple[msgspec.Raw, ...]
    public: msgspec.Raw

    def shown_to(self, client: str) -> msgspec.Raw:
        """The events as ``client`` may see them: his seat's, else a spectator's."""
        seats = self.seats
        return self.private[seats.index(client)] if client in seats else self.public


_LOBBY_COMMANDS = (
    Hello,
    ListVariants,
    CreateTable,
    ListTables,
    LadderJoin,
    LadderLeave,
    LadderStatus,
)


class LadderDesk(Protocol):
    """What answers ``ladder_join``, ``ladder_leave`` and ``ladder_status``
    (``server.ladder.serving``)."""

    async def command(
        self, client: str, command: LadderJoin | LadderLeave | LadderStatus
    ) -> LadderEntry:
        """Carry out ``command`` for ``client``.

        Raises:
            CodedError: refused (``ladder/*``).
        """
        ...


class Gateway:
    """See the module docstring. Set ``service`` before ``start``."""

    def __init__(
        self,
        transport: Transport,
        clock: Clock | None = None,
        limits: Limits | None = None,
        shards: int = 1,
    ) -> None:
        self.transport = transport
        self.clock = clock or SystemClock()
        self.limits = limits or Limits()
        self.shards = shards
        self.service: TableService | None = None
        self.ladder: LadderDesk | None = None
        """Answers the ladder commands when the server runs a ladder (``--ladder``)."""
        self._limiter = RateLimiter(self.limits.rate, self.limits.burst)
        self._chat = RateLimiter(self.limits.chat_rate, self.limits.chat_burst)
        self._warned = RateLimiter(self.limits.rate, self.limits.burst)
        self._pending: dict[str, list[tuple[TableState, int, Record]]] = {}
        self._batches: dict[str, deque[_Batch]] = {}
        self._listings: dict[str, TableListing] = {}
        self._listing_keys: dict[str, tuple[tuple[str, ...], str, int]] = {}
        """What each published listing was made from that changes after creation."""
        self._absent: set[str] = set()
        self._said: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._cooling: dict[str, tuple[TableState, float] | None] = {}
        """Tables whose snapshot was published less than ``SNAPSHOT_SECONDS`` ago, with the
        state to publish when the pause is over."""
        self._settled: dict[str, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._moving = 0
        """Moves posted to their actors (``admit``) and not answered yet."""
        self._moved_all: asyncio.Event | None = None
        """Set when ``_moving`` falls to 0 while ``stop`` waits for it."""
        self._open: dict[str, tuple[str, tuple[str, ...]]] = {}
        """Each open table: the account whose waiting table it is ("" once it plays) and the
        accounts seated there."""
        self._hosting: dict[str, set[str]] = {}
        """Account -> the waiting tables it created."""
        self._sitting: dict[str, set[str]] = {}
        """Account -> the open tables it sits at."""
        self._claims: dict[str, dict[str, set[str]]] = {"host": {}, "seat": {}}
        """Kind ("host", "seat") -> account -> the tables of its creates and sits under way
        (counted with the tables above until they are done)."""
        self._status_task: asyncio.Task[None] | None = None
        self._status_at = 0.0
        self._announced = False
        """The online status was published (from then on it is republished on changes)."""
        self._started_at = self.clock.now()
        self._reconnected_at = 0.0
        self._link_task: asyncio.Task[None] | None = None
        self.handled = 0
        """Requests answered so far."""
        self.refused = 0
        """Messages dropped or refused for a limit or a bad payload."""
        self.metrics: NoMetrics = NO_METRICS
        self.failed = 0
        """Messages whose handling raised (logged with their traceback, one a second)."""
        self._failures_logged = RateLimiter(1.0, 1)
        self.worker: Worker | None = None
        """Set when this process is one worker of several (``server.net.workers``): it then
        reads only the lobby shards and tables it holds leases for."""
        self.offline_on_stop = True
        """Whether ``stop`` publishes the offline status (a worker leaving others running does
        not)."""
        self._known: dict[str, TableListing] = {}
        """Every table's retained listing as the broker has it (workers: the lobby lists the
        tables of every worker)."""
        self._at_table: dict[str, set[asyncio.Task[None]]] = {}
        """Workers: the requests being run at each table."""
        self._status_tables: int | None = None
        """The open tables of the whole store, as the worker holding shard 0 counted them."""

    @property
    def running(self) -> int:
        """Requests being run now (each took a token of its sender's rate)."""
        return len(self._tasks) + self._moving

    # Life -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Subscribe, list the tables, resume the unfinished ones and announce the server."""
        service = self._service()
        if self.worker is not None:  # the worker adopts its tables and takes its shards
            self.transport.deliver = self._receive
            self.transport.subscribe(topics.presence("+"), topics.lobby_listing("+"), qos=0)
            self._announced = True
            return
        service.on_unload = self._unloaded
        await service.start()
        for actor in list(service.actors.values()):
            # The broker may have lost the retained messages (a restart without persistence).
            self._track(actor.table)
            self._publish_public(actor.table, actor.due() or 0.0)
        self.transport.deliver = self._receive
        self.transport.subscribe(*topics.SERVER_SUBSCRIPTIONS, qos=0)
        self._publish_status()
        self._announced = True
        self._link_task = asyncio.create_task(self._watch_link(), name="gateway-link")

    async def _watch_link(self) -> None:
        """After each reconnection to the broker: announce it in the status. What was
        published while the link was down may be lost (and on an external broker the will
        has set the status offline): clients resync on a new ``reconnected_at``."""
        seen = self.transport.connections
        while True:
            await self.transport.lost.wait()
            await self.transport.connected.wait()
            if self.transport.connections != seen:
                seen = self.transport.connections
                self._reconnected_at = self.clock.now()
                _log.warning("reconnected to the broker", extra={"connections": seen})
                self._publish_status()
                if self.worker is not None:
                    # Only the worker holding shard 0 speaks in the status: each worker sends
                    # its own players the present of its tables, as after a takeover.
                    for actor in list(self._service().actors.values()):
                        if actor.table.status == "playing":
                            self.adopted(actor)

    async def stop(self) -> None:
        """Stop reading, let running commands finish, and say the server is offline."""
        self.transport.deliver = _ignore
        if self._link_task is not None:
            self._link_task.cancel()
        with contextlib.suppress(TimeoutError):  # at most 5 s: then it stops all the same
            async with asyncio.timeout(5):
                if self._tasks:
                    await asyncio.wait(self._tasks)
                if self._moving:
                    self._moved_all = asyncio.Event()
                    await self._moved_all.wait()
        if self._status_task is not None:
            self._status_task.cancel()
        if self.offline_on_stop:
            self.transport.publish(topics.server_status(), encode(self.status(False)), retain=True)

    def status(self, online: bool) -> ServerStatus:
        """The server status message."""
        return ServerStatus(
            online=online,
            server=SERVER_NAME,
            versions=(PROTOCOL_VERSION,),
            shards=self.shards,
            tables=len(self._open) if self._status_tables is None else self._status_tables,
            started_at=self._started_at,
            reconnected_at=self._reconnected_at,
        )

    def set_started_at(self, started_at: float) -> None:
        """The ``started_at`` to announce (workers: the first worker's start)."""
        self._started_at = started_at

    def publish_worker_status(self, tables: int) -> None:
        """Publish the retained status with ``tables`` open tables (the worker holding shard 0
        counts those of the whole store)."""
        self._status_tables = tables
        self._publish_status()

    def adopted(self, actor: TableActor, handed: bool = False) -> None:
        """This worker took ``actor``'s table over: republish its retained snapshot and
        listing, and send each seated player the table's present (an ``Update`` without
        events), since the worker that died may not have sent the last one. ``handed``: the
        other worker handed the table over after publishing all it did (nothing is sent;
        its listing is known here as that worker published it). Neither logs a ``table``
        line: the listing did not change (the worker logs one line for all it took over)."""
        table = actor.table
        self._track(table)
        if handed:
            self._listings[table.table_id] = _listing(table)
            self._listing_keys[table.table_id] = _listing_key(table)
            return
        deadline = actor.due() or 0.0
        self._publish_public(table, deadline, quiet=True)
        game = table.game
        spectator = view(game) if game is not None else None
        for seat, player in enumerate(table.seats):
            if not player:
                continue
            update = Update(
                table=table.table_id,
                seq=table.seq,
                seat=seat,
                events=(),
                view=seat_view(spectator, game, seat) if game is not None and spectator else None,
                legal=_legal(table, seat),
                deadline=deadline,
                status=table.status,
            )
            self.transport.publish(topics.inbox(player), encode(update), qos=INBOX_QOS)

    def forget(self, table_id: str) -> None:
        """Another worker serves ``table_id`` now: forget what was kept about it here (its
        retained messages stay: they are the new owner's to change)."""
        self._batches.pop(table_id, None)
        self._listings.pop(table_id, None)
        self._listing_keys.pop(table_id, None)
        self._pending.pop(table_id, None)
        if table_id in self._cooling:
            self._cooling[table_id] = None  # no older state may follow the new owner's
        old = self._open.pop(table_id, None)
        if old is not None:
            _discard(self._hosting, old[0], table_id)
            for player in old[1]:
                _discard(self._sitting, player, table_id)

    def unloaded(self, table_id: str) -> None:
        """``table_id`` left the service's memory (see ``_unloaded``)."""
        self._unloaded(table_id)

    def _publish_status(self) -> None:
        if self.worker is not None and not self.worker.serves_shard(0):
            return  # the worker holding shard 0 speaks for all
        self._status_at = self.clock.now()
        self.transport.publish(topics.server_status(), encode(self.status(True)), retain=True)

    async def _publish_status_later(self) -> None:
        """Republish the status once ``STATUS_SECONDS`` have passed since the last time."""
        await self.clock.sleep_until(self._status_at + STATUS_SECONDS)
        self._status_task = None
        self._publish_status()

    def _service(self) -> TableService:
        if self.service is None:
            raise RuntimeError("the gateway has no table service")
        return self.service

    def _receive(self, message: Message) -> None:
        if message.topic.startswith(_LISTINGS):
            self._listing_seen(message)
            return
        if message.retain:
            # A command retained on the client's own topic (Mosquitto lets it) is an old
            # message replayed: clear it, never run it.
            if message.payload:
                self.transport.publish(message.topic, b"", qos=1, retain=True)
            return
        try:
            self.handle(message.topic, message.payload)
        except Exception:  # a bug on one message must not stop the server
            self.failed += 1
            if self._failures_logged.allow(""):  # a flood of them must not flood the log
                _log.exception(
                    "failed to handle a message",
                    extra={"topic": message.topic, "failed": self.failed},
                )

    # Inbound --------------------------------------------------------------------------------

    def handle(self, topic: str, payload: bytes) -> None:
        """Take one message from the broker (see the module docstring)."""
        # The sender is the topic's last level on every topic the server reads (the broker's
        # ACL sees to it): the rate limit comes first, before the topic is parsed, so that a
        # flood costs as little as it can.
        client = topic[topic.rfind("/") + 1 :]
        if not self._limiter.allow(client):
            # Told (with the request's id, so the client can back off and retry) up to a
            # point; a flood beyond that is dropped unread.
            self.refused += 1
            if self._warned.allow(client) and topics.parse_command_topic(topic) is not None:
                message = f"over {self.limits.rate:g} commands a second: slow down"
                self._reply(client, _error(_guess_id(payload), "limit/rate", message))
            return
        self.admit(topic, payload)

    def admit(self, topic: str, payload: bytes) -> None:
        """Take one message that passed the rate limit (a worker also calls it for the
        messages it kept for a table on its way here)."""
        parsed = topics.parse_command_topic(topic)
        if parsed is None:
            return
        kind, client, table = parsed
        if kind == "presence":
            self._presence(client, payload)
            return
        shard = -1
        worker = self.worker
        if worker is not None:
            if kind == "table" and not (worker.serves_table(table) or worker.watches(table)):
                # On its way here before the unsubscription: its owner answers it. Or on its
                # way to this worker (another hands the table over): kept until it arrives.
                worker.keep(table, topic, payload)
                return
            if kind == "lobby":
                shard = int(topic.split("/", 4)[3])
                if not worker.serves_shard(shard):
                    return
        try:
            if len(payload) > self.limits.max_payload:
                raise MalformedMessage(
                    f"payload of {len(payload)} bytes is over the limit of "
                    f"{self.limits.max_payload}",
                    "limit/payload",
                )
            request = decode_request(payload, self.limits.max_payload)
        except MalformedMessage as error:
            self.refused += 1
            self._reply(client, _error(_guess_id(payload), error.code, error.message))
            return
        if client in self._absent:
            self._set_absent(client, False)
        started = time.perf_counter()
        if table and worker is None and isinstance(request.cmd, GAME_COMMANDS):
            # A move at a loaded table goes straight to its actor, which calls back with the
            # reply: no task or future of its own (what _table_command would do for it).
            actor = self.service.actors.get(table) if self.service is not None else None
            if actor is not None and actor.table.created is not None and not actor.stopping:
                answer = functools.partial(self._moved, client, actor, request, started)
                actor.post(client, request.cmd, _scoped(client, request.id), request.seq, answer)
                self._moving += 1
                return
        task = asyncio.create_task(self._run(client, table, request, started, shard))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if table and worker is not None:
            running = self._at_table.setdefault(table, set())
            running.add(task)
            task.add_done_callback(lambda done: _discard_task(self._at_table, table, done))

    def running_at(self, table_id: str) -> bool:
        """Whether a request to ``table_id`` is being run (workers)."""
        return table_id in self._at_table

    async def finish(self, table_id: str) -> None:
        """Return once the requests to ``table_id`` under way are answered (workers: before
        handing the table over; at most ``FINISH_SECONDS``)."""
        running = self._at_table.get(table_id)
        if running:
            await asyncio.wait(set(running), timeout=FINISH_SECONDS)

    async def _run(
        self, client: str, table: str, request: Request, started: float, shard: int = -1
    ) -> None:
        try:
            if shard >= 0 and not isinstance(request.cmd, Hello):
                self._check_shard(client, shard)
            worker = self.worker
            if table and worker is not None and not await worker.wake(table):
                return  # a parked table another worker took: it answers the retry
            reply = await self._dispatch(client, table, request)
        except LeaseLost as error:
            # Another worker took the table: it answers the client's retry of this request.
            if self.worker is not None:
                self.worker.lost(error.table_id)
            return
        except _WrongShard as error:
            reply = msgspec.structs.replace(
                _error(request.id, error.code, error.message), result=self._welcome()
            )
        except CodedError as error:
            reply = _error(request.id, error.code, error.message, table)
        except Exception as error:  # our bug: answer it, keep serving
            reply = _internal_error(client, request, error)
        self._answered(client, table, request, reply, started)

    def _moved(
        self,
        client: str,
        actor: TableActor,
        request: Request,
        started: float,
        outcome: TableReply | LeaseLost,
    ) -> None:
        """The actor's answer to a move ``admit`` posted to it."""
        self._moving -= 1
        if not self._moving and self._moved_all is not None:
            self._moved_all.set()
        if isinstance(outcome, LeaseLost):  # another worker took the table: it answers
            return
        try:
            reply = self._table_reply(client, actor, request.id, outcome)
        except Exception as error:  # our bug: answer it, keep serving
            reply = _internal_error(client, request, error)
        self._answered(client, actor.table.table_id, request, reply, started)

    def _answered(
        self, client: str, table: str, request: Request, reply: AnyReply, started: float
    ) -> None:
        """Publish ``reply`` to ``request`` and count it."""
        self.handled += 1
        self._reply(client, reply)
        self.metrics.command(request.cmd, reply, started)
        if not _events_level.isEnabledFor(logging.DEBUG):
            return
        _events.debug(
            "request",
            client=client,
            table=table or reply.table,
            id=request.id,
            command=type(request.cmd).__name__,
            ok=reply.ok,
            code=reply.code,
            seq=reply.seq,
            ms=round((time.perf_counter() - started) * 1000, 2),
        )

    def _reply(self, client: str, reply: AnyReply) -> None:
        # Inbox messages go at QoS 0 (docs/protocol.md §3): with clean sessions QoS 1 would
        # only add a packet id, a kept copy and an acknowledgement to every message.
        self.transport.publish(topics.inbox(client), encode(reply), qos=INBOX_QOS)
        self.metrics.reply(reply)

    async def _dispatch(self, client: str, table: str, request: Request) -> AnyReply:
        command = request.cmd
        lobby = isinstance(command, _LOBBY_COMMANDS)
        if lobby != (table == ""):
            where = (
                "the lobby topic"
                if lobby
                else f"a table topic ({topics.table_command('ID', client)})"
            )
            raise CodedError(f"{type(command).__name__} goes on {where}", "protocol/wrong_topic")
        match command:
            case Hello(versions=versions):
                return self._hello(request.id, versions)
            case ListVariants():
                return _ok(request.id, result=_variants())
            case ListTables(status=status, variant=variant):
                known = (
                    {**self._known, **self._listings} if self.worker is not None else self._listings
                )
                listed = tuple(
                    listing
                    for listing in sorted(known.values(), key=lambda item: item.table)
                    if listing.status != "closed"
                    and (not status or listing.status == status)
                    and (not variant or listing.variant == variant)
                    and not self._private(listing.table)
                )
                return _ok(request.id, result=Tables(listed[:200]))
            case CreateTable():
                return await self._create(client, request.id, command)
            case LadderJoin() | LadderLeave() | LadderStatus():
                if self.ladder is None:
                    raise CodedError("this server runs no ladder", "ladder/not_running")
                return _ok(request.id, result=await self.ladder.command(client, command))
        return await self._table_command(client, table, request)

    def _hello(self, command_id: str, versions: Iterable[int]) -> Reply:
        if PROTOCOL_VERSION not in versions:
            raise CodedError(
                f"this server speaks protocol versions [{PROTOCOL_VERSION}]", "protocol/version"
            )
        return _ok(command_id, result=self._welcome())

    def _welcome(self) -> Welcome:
        return Welcome(
            version=PROTOCOL_VERSION,
            server=SERVER_NAME,
            shards=self.shards,
            max_payload=self.limits.max_payload,
            rate_per_second=self.limits.rate,
            burst=self.limits.burst,
        )

    def _check_shard(self, client: str, shard: int) -> None:
        """Lobby commands other than ``hello`` go on the sender's own shard (workers)."""
        right = topics.shard_of(client, self.shards)
        if shard != right:
            raise _WrongShard(
                f"{client}'s lobby shard is {right} of {self.shards}: send lobby commands to "
                f"{topics.lobby_command(client, right)} (the result is the welcome, with shards)",
                "lobby/wrong_shard",
            )

    def _listing_seen(self, message: Message) -> None:
        """A retained lobby listing from the broker (any worker's table)."""
        table_id = message.topic[len(_LISTINGS) :]
        if not message.payload:
            self._known.pop(table_id, None)
            return
        try:
            self._known[table_id] = decode_listing(message.payload)
        except MalformedMessage:
            return

    async def _create(self, client: str, command_id: str, command: CreateTable) -> AnyReply:
        service = self._service()
        # The table id follows from the request id, so a retried create finds its table.
        table_id = hashlib.sha256(f"{client}\0{command_id}".encode()).hexdigest()[:12]
        kinds = ("host", "seat") if command.sit else ("host",)
        async with self._places(table_id, [(client, kind) for kind in kinds]) as over:
            if over and await service.store.last_seq(table_id) == 0:  # not a retry: refused
                raise CodedError(over, "limit/tables")
            if self.worker is not None and not await self.worker.claim(table_id):
                return await self._created_elsewhere(client, command_id, table_id)
            return await self._create_table(client, command_id, command, table_id)

    async def _create_table(
        self, client: str, command_id: str, command: CreateTable, table_id: str
    ) -> AnyReply:
        service = self._service()
        create = tables.CreateTable(
            variant=command.variant,
            options=dict(command.options),
            seats=command.seats,
            private=command.private,
            move_seconds=command.move_seconds,
            max_timeouts=command.max_timeouts,
            hand_pause_seconds=command.hand_pause_seconds,
        )
        _, reply = await service.create(client, create, _scoped(client, command_id), table_id)
        if not reply.ok and reply.code != "table/exists":
            return _error(command_id, reply.code, reply.message)
        seat = -1
        if command.sit:
            sit_id = _scoped(client, f"{command_id}:sit")
            sat = await service.submit(table_id, client, tables.Sit(0), sit_id)
            if not sat.ok and sat.code != "table/already_seated":
                return _error(command_id, sat.code, sat.message, table_id)
        actor = await service.actor(table_id)
        assert actor is not None
        if client in actor.table.seats:
            seat = actor.table.seats.index(client)
        created = actor.table.created
        invite = created.invite_code if created is not None and created.host == client else ""
        return _ok(command_id, table_id, actor.table.seq, result=Created(table_id, invite, seat))

    async def _created_elsewhere(self, client: str, command_id: str, table_id: str) -> AnyReply:
        """A retried ``create_table`` whose table another worker holds (the lobby shard moved
        between the tries): answer from the log."""
        state = await load_table(self._service().store, table_id)
        created = state.created
        if created is None:
            raise CodedError("the table is being created elsewhere: retry", "server/busy")
        seat = state.seats.index(client) if client in state.seats else -1
        invite = created.invite_code if created.host == client else ""
        return _ok(command_id, table_id, state.seq, result=Created(table_id, invite, seat))

    async def _table_command(self, client: str, table_id: str, request: Request) -> AnyReply:
        service = self._service()
        actor = await service.actor(table_id)
        if actor is None or actor.table.created is None:
            raise CodedError(f"there is no table {table_id!r}", "table/unknown")
        command = request.cmd
        match command:
            case Join(invite_code=code):
                self._check_invite(actor.table, client, code)
                actor.touch()
                return self._sync_reply(request.id, actor, client)
            case Resync():
                self._check_invite(actor.table, client, "")
                actor.touch()
                return self._sync_reply(request.id, actor, client)
            case ChatSay(text=text):
                return self._say(client, actor.table, request.id, text)
            case Leave():
                state = actor.table
                if client not in state.seats or (
                    state.game is not None and not is_over(state.game)
                ):
                    return _ok(request.id, table_id, state.seq)
                table_command: tables.TableCommand | GameCommand = tables.Stand()
            case Sit(seat=seat, invite_code=code):
                self._check_invite(actor.table, client, code)
                if client not in actor.table.seats:
                    return await self._sit(client, actor, request, tables.Sit(seat))
                table_command = tables.Sit(seat)
            case Stand():
                table_command = tables.Stand()
            case Start():
                table_command = tables.StartGame()
            case Rematch():
                if actor.table.table_id in self._open:  # nothing opens again
                    table_command = tables.Rematch()
                else:
                    return await self._rematch(client, actor, request)
            case Ready():
                table_command = tables.Ready()
            case _:
                if not isinstance(command, GAME_COMMANDS):
                    raise CodedError(
                        f"{type(command).__name__} is not a table command", "protocol/wrong_topic"
                    )
                table_command = command
        reply = await service.submit(
            table_id, client, table_command, _scoped(client, request.id), request.seq
        )
        return self._table_reply(client, actor, request.id, reply)

    async def _sit(
        self, client: str, actor: TableActor, request: Request, command: tables.Sit
    ) -> AnyReply:
        """``sit``, counted against the sender's open tables while it runs."""
        table_id = actor.table.table_id
        async with self._places(table_id, [(client, "seat")]) as over:
            if over:
                raise CodedError(over, "limit/tables")
            reply = await self._service().submit(
                table_id, client, command, _scoped(client, request.id), request.seq
            )
        return self._table_reply(client, actor, request.id, reply)

    async def _rematch(self, client: str, actor: TableActor, request: Request) -> AnyReply:
        """``rematch`` of a table that is not open: it opens again for every seated player,
        each counted against his open tables while it runs."""
        table_id = actor.table.table_id
        players = sorted({player for player in actor.table.seats if player})
        async with self._places(table_id, [(player, "seat") for player in players]) as over:
            if over:
                raise CodedError(over, "limit/tables")
            reply = await self._service().submit(
                table_id, client, tables.Rematch(), _scoped(client, request.id), request.seq
            )
        return self._table_reply(client, actor, request.id, reply)

    @contextlib.asynccontextmanager
    async def _places(self, table_id: str, wanted: list[tuple[str, str]]) -> AsyncIterator[str]:
        """Count ``table_id`` in the quota of each ``(account, kind)`` of ``wanted`` while the
        block runs; yields why one of them is over its quota ("" when none is, and only then
        are they counted). One server counts the tables it holds (``_over_quota``); workers
        count in the store, over the tables of every worker (``Leases.claim_places``)."""
        several = len({account for account, _ in wanted}) > 1  # a rematch: name the player
        worker = self.worker
        if worker is not None:
            limits = {"host": self.limits.max_waiting_tables, "seat": self.limits.max_open_tables}
            counted = [(account, kind, limits[kind]) for account, kind in wanted if limits[kind]]
            refused = await worker.claim_places(table_id, counted)
            if refused is not None:
                message = self._quota_text(refused[1])
                yield f"{refused[0]}: {message}" if several else message
                return
            try:
                yield ""
            finally:
                await worker.release_places(table_id, [(a, k) for a, k, _ in counted])
            return
        for account, kind in wanted:
            message = self._over_quota(account, kind)
            if message:
                yield f"{account}: {message}" if several else message
                return
        for account, kind in wanted:
            self._claims[kind].setdefault(account, set()).add(table_id)
        try:
            yield ""
        finally:
            for account, kind in wanted:
                _discard(self._claims[kind], account, table_id)

    def _quota_text(self, kind: str) -> str:
        """The refusal of one more table of quota ``kind`` ("host" or "seat")."""
        if kind == "host":
            limit, what = self.limits.max_waiting_tables, "tables waiting for players"
        else:
            limit, what = self.limits.max_open_tables, "open tables (waiting or playing)"
        return f"an account may have at most {limit} {what}"

    def _over_quota(self, client: str, kind: str = "seat") -> str:
        """Why one more waiting table created by ``client`` (``kind`` "host") or one more open
        table where it sits ("seat") is over its quota; "" when it is not."""
        if kind == "host":
            limit, counted = self.limits.max_waiting_tables, self._hosting
        else:
            limit, counted = self.limits.max_open_tables, self._sitting
        if limit <= 0:
            return ""
        tables = counted.get(client, set())
        under_way = self._claims[kind].get(client)
        if (len(tables | under_way) if under_way else len(tables)) < limit:
            return ""
        return self._quota_text(kind)

    def _track(self, table: TableState) -> None:
        """Count ``table`` for its host's and players' quotas and for the open tables."""
        table_id = table.table_id
        status = table.status
        created = table.created
        if status in ("waiting", "playing") and created is not None:
            entry = (
                created.host if status == "waiting" else "",
                tuple(player for player in table.seats if player),
            )
        else:
            entry = None
        old = self._open.get(table_id)
        if old == entry:
            return
        if old is not None:
            _discard(self._hosting, old[0], table_id)
            for player in old[1]:
                _discard(self._sitting, player, table_id)
        if entry is None:
            del self._open[table_id]
        else:
            self._open[table_id] = entry
            if entry[0]:
                self._hosting.setdefault(entry[0], set()).add(table_id)
            for player in entry[1]:
                self._sitting.setdefault(player, set()).add(table_id)
        away = self._absent.intersection(entry[1]) if old is None and entry is not None else ()
        actor = self._service().actors.get(table_id) if away else None
        if actor is not None:
            for player in away:  # a table loaded again (a rematch) learns who is away
                actor.set_absent(player, True)
        if (
            (old is None) != (entry is None)
            and self._announced
            and self._status_task is None
            and self.worker is None  # a worker's status counts the whole store's tables
        ):
            self._status_task = asyncio.create_task(self._publish_status_later())

    def _unloaded(self, table_id: str) -> None:
        """``table_id`` left the service's memory: forget it here too, and take its listing
        out of the lobby."""
        self._batches.pop(table_id, None)
        self._listing_keys.pop(table_id, None)
        listing = self._listings.pop(table_id, None)
        if listing is not None and listing.status != "closed":  # a closed one is cleared
            self.transport.publish(topics.lobby_listing(table_id), b"", qos=1, retain=True)

    def _say(self, client: str, state: TableState, command_id: str, text: str) -> Reply:
        """Chat: players and the host only; a repeated request id is not said twice."""
        created = state.created
        if client not in state.seats and (created is None or client != created.host):
            raise CodedError("only the players of a table chat there", "table/not_seated")
        key = (client, command_id)
        if key not in self._said:
            if not self._chat.allow(client):
                raise CodedError("you are chatting too fast", "limit/chat_rate")
            self._said[key] = None
            if len(self._said) > 10_000:
                self._said.popitem(last=False)
            line = ChatLine(state.table_id, client, text, self.clock.now())
            self.transport.publish(topics.chat(state.table_id), encode(line), qos=0)
        return _ok(command_id, state.table_id, state.seq)

    def _sync_reply(self, command_id: str, actor: TableActor, client: str) -> Reply:
        synced = self._synced(actor, client)
        return _ok(command_id, actor.table.table_id, actor.table.seq, result=synced)

    def _table_reply(
        self, client: str, actor: TableActor, command_id: str, reply: TableReply
    ) -> AnyReply:
        table_id = actor.table.table_id
        if not reply.ok:
            refusal = _error(command_id, reply.code, reply.message, table_id, reply.seq)
            if reply.code == "table/stale_seq":  # with what it takes to catch up
                return msgspec.structs.replace(refusal, result=self._synced(actor, client))
            return refusal
        if not reply.first_seq:
            return _ok(command_id, table_id, reply.seq)
        found: list[_Batch] = []
        for batch in reversed(self._batches.get(table_id, ())):  # newest first
            if batch.last < reply.first_seq:
                break
            if batch.first == reply.first_seq and batch.last == reply.seq:
                # One command, one append: its events as they were sent in the update.
                return ReplyOut(
                    command_id, True, table=table_id, seq=reply.seq, events=batch.shown_to(client)
                )
            if batch.first <= reply.seq:
                found.append(batch)
        events = [
            item
            for batch in reversed(found)
            for item in decode_events(batch.shown_to(client))
            if reply.first_seq <= item.seq <= reply.seq
        ]
        return _ok(command_id, table_id, reply.seq, events=tuple(events))

    def _check_invite(self, state: TableState, client: str, code: str) -> None:
        created = state.created
        if created is None or not created.private:
            return
        if client == created.host or client in state.seats:
            return
        if code != created.invite_code:
            raise CodedError("this table is private: its invite code is needed", "lobby/bad_invite")

    def _private(self, table_id: str) -> bool:
        actor = self.service.actors.get(table_id) if self.service is not None else None
        created = actor.table.created if actor is not None else None
        return created is not None and created.private

    def _synced(self, actor: TableActor, client: str) -> Synced:
        state = actor.table
        seat = state.seats.index(client) if client in state.seats else -1
        game = state.game
        return Synced(
            table=_listing(state),
            seq=state.seq,
            seat=seat,
            view=view(game, seat if seat >= 0 else None) if game is not None else None,
            legal=_legal(state, seat),
            deadline=actor.due() or 0.0,
        )

    def online(self, client: str) -> bool:
        """Whether ``client`` has not said it went away (its will or an offline presence)
        since its last message."""
        return client not in self._absent

    def _presence(self, client: str, payload: bytes) -> None:
        try:
            presence = decode_presence(payload)
        except MalformedMessage:
            return
        self._set_absent(client, not presence.online)

    def _set_absent(self, client: str, absent: bool) -> None:
        self.metrics.presence(client, not absent)
        if absent:
            self._absent.add(client)
        else:
            self._absent.discard(client)
        for actor in self._service().actors.values():
            if client in actor.table.seats:
                actor.set_absent(client, absent)

    # Outbound (the tables' outbox) ----------------------------------------------------------

    def _publish_snapshot(
        self,
        table: TableState,
        deadline: float,
        listing: TableListing | None = None,
        spectator: View | None = None,
    ) -> None:
        game = table.game
        if spectator is None and game is not None:
            spectator = view(game)
        snapshot = TableSnapshot(listing or _listing(table), table.seq, spectator, deadline)
        self.transport.publish(
            topics.table_state(table.table_id), encode(snapshot), qos=0, retain=True
        )

    def _cooled(self, table_id: str) -> None:
        """The snapshot pause of ``table_id`` is over: publish what changed meanwhile."""
        latest = self._cooling.pop(table_id, None)
        if latest is not None:
            self._publish_public(*latest)  # starts another pause
        if table_id not in self._cooling:
            settled = self._settled.pop(table_id, None)
            if settled is not None:
                settled.set()

    async def settled(self, table_id: str) -> None:
        """Return once no republish of ``table_id``'s snapshot is pending, so that the
        retained snapshot and listing are its latest state (tests and tools)."""
        while table_id in self._cooling:
            await self._settled.setdefault(table_id, asyncio.Event()).wait()

    async def publish(
        self, before: TableState, seq: int, record: Record, after: TableState
    ) -> None:
        """Keep the record until its append is complete (``flush``)."""
        self._pending.setdefault(after.table_id, []).append((before, seq, record))

    async def flush(self, table: TableState) -> None:
        """Publish the updates of one append (see the module docstring)."""
        pending = self._pending.pop(table.table_id, [])
        if not pending:
            return
        seats = table.seats
        private: list[list[Logged]] = [[] for _ in seats]
        public: list[Logged] = []
        for before, seq, record in pending:
            event = record.event
            public.append(Logged(seq, project(event, SPECTATOR, before)))
            for seat, player in enumerate(seats):
                if player:
                    viewer: Viewer = seat
                    private[seat].append(Logged(seq, project(event, viewer, before)))
        batch = _Batch(
            pending[0][1],
            pending[-1][1],
            seats,
            tuple(encode_events(events) if events else EMPTY_EVENTS for events in private),
            encode_events(public),
        )
        self._batches.setdefault(table.table_id, deque(maxlen=32)).append(batch)
        self._track(table)
        actor = self.service.actors.get(table.table_id) if self.service is not None else None
        deadline = (actor.due() if actor is not None else None) or 0.0
        game = table.game
        spectator = view(game) if game is not None else None
        for seat, player in enumerate(seats):
            if not player or not topics.valid_name(player):
                # A seat the server plays itself (a ladder's built-in entrant, named with an
                # "@" no account can have) has no inbox: its cards go nowhere.
                continue
            update = UpdateOut(
                table=table.table_id,
                seq=table.seq,
                seat=seat,
                events=batch.private[seat],
                view=seat_view(spectator, game, seat) if game is not None and spectator else None,
                legal=_legal(table, seat),
                deadline=deadline,
                status=table.status,
            )
            self.transport.publish(topics.inbox(player), encode(update), qos=INBOX_QOS)
            # What the client sends in answer is paid for: answering is never refused.
            self._limiter.credit(player, self.limits.update_credit)
        stream = EventsOut(table.table_id, batch.public)
        self.transport.publish(topics.table_events(table.table_id), encode(stream), qos=0)
        self._publish_public(table, deadline, spectator)

    def _publish_public(
        self,
        table: TableState,
        deadline: float,
        spectator: View | None = None,
        quiet: bool = False,
    ) -> None:
        """The retained snapshot of ``table`` (at most every ``SNAPSHOT_SECONDS``, the latest
        one last) and, when it changed, its lobby listing (at once, with a snapshot) and a
        ``table`` log line (not when ``quiet``). ``spectator``: ``view(table.game)`` when the
        caller has it."""
        key = _listing_key(table)
        known = self._listings.get(table.table_id)
        if known is not None and self._listing_keys.get(table.table_id) == key:
            listing, changed = known, False  # what a listing shows besides is set at creation
        else:
            listing = _listing(table)
            changed = known != listing
            self._listing_keys[table.table_id] = key
        if table.table_id in self._cooling and not changed:
            self._cooling[table.table_id] = (table, deadline)
            return
        self._publish_snapshot(table, deadline, listing, spectator)
        # Published now, so nothing older is left to publish when the pause is over (an older
        # state kept here was republished after a table's last change and left it stale).
        if table.table_id not in self._cooling:
            asyncio.get_running_loop().call_later(SNAPSHOT_SECONDS, self._cooled, table.table_id)
        self._cooling[table.table_id] = None
        if changed:
            self._listings[table.table_id] = listing
            if not quiet:
                _events.info(
                    "table",
                    table=table.table_id,
                    variant=listing.variant,
                    status=listing.status,
                    seats=list(listing.seats),
                    game=listing.game,
                    seq=table.seq,
                )
            unlisted = table.closed or (table.created is not None and table.created.private)
            self.transport.publish(
                topics.lobby_listing(table.table_id),
                b"" if unlisted else encode(listing),
                qos=1,
                retain=True,
            )


class _WrongShard(CodedError):
    """A lobby command on another shard than the sender's."""

    default_code = "lobby/wrong_shard"


_LISTINGS = topics.lobby_listing("")


def _ignore(message: Message) -> None:
    """What the server does with the messages that arrive while it stops."""


INBOX_QOS = 0
"""The QoS of every message on a client's inbox (replies and updates): see docs/protocol.md §3,
"Inboxes are QoS 0"."""
SNAPSHOT_SECONDS = 1.0
"""A table's retained snapshot is republished at most this often (and after its last change)."""
FINISH_SECONDS = 5.0
"""Longest a worker handing a table over waits for the requests under way there."""
STATUS_SECONDS = 1.0
"""The retained server status is republished at most this often when its count of tables
changes."""


def _discard_task(
    index: dict[str, set[asyncio.Task[None]]], key: str, task: asyncio.Task[None]
) -> None:
    """Take ``task`` out of ``index[key]``, dropping the key once its set is empty."""
    tasks = index.get(key)
    if tasks is not None:
        tasks.discard(task)
        if not tasks:
            del index[key]


def _discard(index: dict[str, set[str]], key: str, item: str) -> None:
    """Take ``item`` out of ``index[key]``, dropping the key once its set is empty."""
    items = index.get(key)
    if items is not None:
        items.discard(item)
        if not items:
            del index[key]


def _legal(state: TableState, seat: int) -> tuple[GameCommand, ...]:
    game = state.game
    if seat < 0 or game is None or is_over(game) or game.forfeited[seat]:
        return ()
    return tuple(legal_actions(game, seat))


def _listing_key(state: TableState) -> tuple[tuple[str, ...], str, int]:
    """What a table's listing changes with besides what is set at its creation."""
    return (state.seats, state.status, state.game_number)


def _listing(state: TableState) -> TableListing:
    created = state.created
    return TableListing(
        table=state.table_id,
        variant=created.variant if created is not None else "",
        options=dict(created.options) if created is not None else {},
        seats=state.seats,
        status=state.status,
        host=created.host if created is not None else "",
        move_seconds=created.move_seconds if created is not None else 0.0,
        game=state.game_number,
    )


def _variants() -> Variants:
    infos = []
    for preset in VARIANTS.values():
        options = tuple(
            OptionInfo(
                name=spec.name,
                kind=spec.kind,
                help=spec.help,
                choices=spec.choices,
                minimum=spec.minimum,
                maximum=spec.maximum,
            )
            for spec in (OPTIONS[name] for name in preset.options)
        )
        infos.append(
            VariantInfo(
                name=preset.name,
                title=preset.title,
                description=preset.description,
                min_players=preset.min_players,
                max_players=preset.max_players,
                defaults=dict(preset.defaults),
                options=options,
            )
        )
    return Variants(tuple(infos))


def _scoped(client: str, command_id: str) -> str:
    """A request id as the table log keeps it: ids are the client's own, so two clients may
    both send "1"."""
    return f"{client}/{command_id}"


def _ok(
    command_id: str,
    table: str = "",
    seq: int = 0,
    events: tuple[Logged, ...] = (),
    result: Result | None = None,
) -> Reply:
    return Reply(id=command_id, ok=True, table=table, seq=seq, events=events, result=result)


def _internal_error(client: str, request: Request, error: Exception) -> Reply:
    """The reply to ``request`` that failed on our bug ``error``, logged."""
    _log.exception("request failed", extra={"client": client, "id": request.id})
    return _error(request.id, "server/internal", f"internal error: {type(error).__name__}")


def _error(command_id: str, code: str, message: str, table: str = "", seq: int = 0) -> Reply:
    return Reply(id=command_id, ok=False, code=code, message=message, table=table, seq=seq)


_ID_ONLY = msgspec.msgpack.Decoder(dict[str, Any])


def _guess_id(payload: bytes) -> str:
    """The ``id`` of a request that failed to decode, when it can be read (else ``""``).

    An id over ``MAX_ID`` characters is echoed cut to its first ``MAX_ID``: the client can still
    match the refusal to its request (``""`` is kept for ids that cannot be read at all).
    """
    if len(payload) > 64 * 1024:
        return ""
    try:
        raw = _ID_ONLY.decode(payload)
    except msgspec.DecodeError:
        return ""
    except RecursionError:  # nested deeper than the decoder goes: read the id alone
        raw = {"id": request_id(payload)}
    value = raw.get("id")
    return value[:MAX_ID] if isinstance(value, str) else ""
