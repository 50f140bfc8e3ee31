"""The Python SDK: an async client of a Ramino server over MQTT.

::

    async with Client("alice", broker="mqtt://127.0.0.1:1883") as client:
        created = await client.create_table("gin")
        table = client.table(created.table)
        await table.start()            # once every seat is taken
        async for update in table.updates():
            if update.legal:
                await table.act(pick(update.view, update.legal))

Without a password the client makes up a random one for its lifetime: on a guest-mode server
(``ramino serve`` without accounts) the first password a name logs in with binds the name, so
give a password of your own to log in with the same name again from another process.

Every request carries a fresh id and is sent again with the same id until its reply comes
(the server answers a repeated id with the first reply and never acts twice), so a command
survives a dropped connection or a restarted server. Each table keeps the last ``seq`` it saw;
an update that skips one, a reconnection, or a refused stale command makes it resync.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from protocol import topics
from protocol.codec import MalformedMessage, decode_inbox, decode_status, encode
from protocol.errors import CodedError
from protocol.game import Command as GameCommand
from protocol.game import View
from protocol.messages import (
    AnyCommand,
    ChatSay,
    Created,
    CreateTable,
    Hello,
    Join,
    Leave,
    ListTables,
    ListVariants,
    Logged,
    Presence,
    Ready,
    Rematch,
    Reply,
    Request,
    Resync,
    Sit,
    Stand,
    Start,
    Synced,
    TableListing,
    Tables,
    Update,
    Variants,
    Welcome,
)
from protocol.transport import BrokerAddress, Message, Transport, parse_broker_urls

__all__ = ["Client", "GameUpdate", "RequestFailed", "TableSession"]

_log = logging.getLogger(__name__)


class RequestFailed(CodedError):
    """The server refused a request: ``code`` and ``message`` are its error reply's."""

    default_code = "error"

    def __init__(self, message: str, code: str | None = None, reply: Reply | None = None):
        super().__init__(message, code)
        self.reply = reply


@dataclass(frozen=True, slots=True)
class GameUpdate:
    """What a seat knows after a change: new events, its view and what it may do now."""

    table: str
    seq: int
    seat: int
    events: tuple[Logged, ...]
    view: View | None
    legal: tuple[GameCommand, ...]
    deadline: float
    status: str
    resync: bool = False
    """This update comes from a resync (``events`` is then empty)."""


@dataclass
class _Pending:
    request: Request
    topic: str
    future: asyncio.Future[Reply]


class Client:
    """One player's connection; see the module docstring."""

    def __init__(
        self,
        username: str,
        password: str = "",
        broker: str | BrokerAddress = "mqtt://127.0.0.1:1883",
        shards: int = 1,
        request_timeout: float = 5.0,
        attempts: int = 6,
        tap: Callable[[Message], None] | None = None,
    ) -> None:
        if not topics.valid_name(username):
            raise ValueError(f"a client name is 1-64 of A-Z a-z 0-9 _ . - ; got {username!r}")
        self.username = username
        self.addresses = (
            (broker,) if isinstance(broker, BrokerAddress) else parse_broker_urls(broker)
        )
        self.address = self.addresses[0]
        self.shard = topics.shard_of(username, shards)
        self.request_timeout = request_timeout
        self.attempts = attempts
        self.closed = False
        """True once ``close`` was called."""
        offline = encode(Presence(online=False))
        # A guest name is bound to its first password: an empty one would let anyone in.
        password = password or secrets.token_urlsafe(18)
        self.transport = Transport(
            username, password, will=(topics.presence(username), offline), tap=tap
        )
        self._pending: dict[str, _Pending] = {}
        self.server_link: tuple[float, float] | None = None
        """When the server we last heard of started and last reconnected to the broker (its
        retained status says)."""
        self._sessions: dict[str, TableSession] = {}
        self._reader: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Connect, subscribe to the inbox and say we are online.

        Raises:
            TransportError: the broker is not reachable or refuses us.
        """
        self.transport.subscribe(topics.inbox(self.username), topics.server_status(), qos=0)
        await self.transport.connect(self.addresses)
        self._reader = asyncio.create_task(self._read(), name=f"client-{self.username}")
        self._watcher = asyncio.create_task(self._watch(), name=f"client-{self.username}-link")
        self._online()

    async def close(self) -> None:
        """Disconnect cleanly."""
        self.closed = True
        for task in (self._reader, self._watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        with contextlib.suppress(Exception):
            self.transport.publish(
                topics.presence(self.username), encode(Presence(online=False)), qos=0
            )
        await self.transport.close()

    def _online(self) -> None:
        self.transport.publish(topics.presence(self.username), encode(Presence(online=True)))

    # Requests -------------------------------------------------------------------------------

    async def request(
        self,
        command: AnyCommand,
        table: str = "",
        seq: int | None = None,
        check: bool = True,
        command_id: str = "",
    ) -> Reply:
        """Send ``command`` (to ``table``, or the lobby) and return its reply.

        The request is sent again with the same id after each ``request_timeout`` without a
        reply, ``attempts`` times in all. ``command_id`` defaults to a fresh random id.

        Raises:
            RequestFailed: the reply is an error (when ``check``), or no reply came
                (``client/timeout``).
        """
        request = Request(id=command_id or secrets.token_hex(8), cmd=command, seq=seq)
        topic = (
            topics.table_command(table, self.username)
            if table
            else topics.lobby_command(self.username, self.shard)
        )
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[request.id] = _Pending(request, topic, future)
        payload = encode(request)
        try:
            for attempt in range(self.attempts):
                self.transport.publish(topic, payload, qos=1)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.request_timeout):
                        reply = await asyncio.shield(future)
                    if reply.code == "lobby/wrong_shard" and isinstance(reply.result, Welcome):
                        # Several workers share the lobby: go to our own shard, same id.
                        self.shard = topics.shard_of(self.username, reply.result.shards)
                        topic = topics.lobby_command(self.username, self.shard)
                        future = asyncio.get_running_loop().create_future()
                        self._pending[request.id] = _Pending(request, topic, future)
                        continue
                    if reply.ok or reply.code != "limit/rate":
                        break
                    # Over the server's rate: back off, then send the same request again.
                    future = asyncio.get_running_loop().create_future()
                    self._pending[request.id].future = future
                    await asyncio.sleep(0.05 * 2**attempt)
            else:
                raise RequestFailed(
                    f"no reply to {type(command).__name__} after {self.attempts} attempts",
                    "client/timeout",
                )
        finally:
            self._pending.pop(request.id, None)
        if check and not reply.ok:
            raise RequestFailed(reply.message, reply.code, reply)
        return reply

    async def hello(self) -> Welcome:
        """Negotiate the protocol version."""
        result = (await self.request(Hello(client="ramino-sdk"))).result
        assert isinstance(result, Welcome)
        self.shard = topics.shard_of(self.username, result.shards)
        return result

    async def variants(self) -> Variants:
        """The variants the server plays."""
        result = (await self.request(ListVariants())).result
        assert isinstance(result, Variants)
        return result

    async def tables(self, status: str = "", variant: str = "") -> tuple[TableListing, ...]:
        """Public tables, optionally filtered."""
        result = (await self.request(ListTables(status=status, variant=variant))).result
        assert isinstance(result, Tables)
        return result.tables

    async def create_table(self, variant: str, **settings: Any) -> Created:
        """Create a table (``settings`` are ``CreateTable``'s fields) and, by default, sit."""
        result = (await self.request(CreateTable(variant=variant, **settings))).result
        assert isinstance(result, Created)
        return result

    @property
    def sessions(self) -> dict[str, TableSession]:
        """The table sessions of this client, by table id."""
        return self._sessions

    def table(self, table: str) -> TableSession:
        """The session of ``table`` (one per table; updates for it are routed there)."""
        session = self._sessions.get(table)
        if session is None:
            session = TableSession(self, table)
            self._sessions[table] = session
        return session

    # Inbound --------------------------------------------------------------------------------

    async def _read(self) -> None:
        inbox_topic = topics.inbox(self.username)
        async for message in self.transport.messages():
            if message.topic == topics.server_status():
                self._server_status(message.payload)
                continue
            if message.topic != inbox_topic:
                continue  # public topics subscribed to by the caller: read through ``tap``
            try:
                inbox = decode_inbox(message.payload)
            except MalformedMessage as error:
                _log.warning("undecodable message on %s: %s", message.topic, error)
                continue
            if isinstance(inbox, Reply):
                pending = self._pending.get(inbox.id)
                if pending is not None and not pending.future.done():
                    pending.future.set_result(inbox)
            else:
                self.table(inbox.table).receive(inbox)

    def _server_status(self, payload: bytes) -> None:
        """A server that restarted or reconnected may have lost updates: resync."""
        try:
            status = decode_status(payload)
        except MalformedMessage:
            return
        if not status.online:
            return
        self.shard = topics.shard_of(self.username, max(1, status.shards))
        link = (status.started_at, status.reconnected_at)
        if self.server_link is not None and link != self.server_link:
            for session in self._sessions.values():
                session.need_resync()
        self.server_link = link

    async def _watch(self) -> None:
        """After each reconnection: say we are online again and resync every table."""
        seen = self.transport.connections
        while True:
            await self.transport.lost.wait()
            await self.transport.connected.wait()
            if self.transport.connections != seen:
                seen = self.transport.connections
                self._online()
                for session in self._sessions.values():
                    session.need_resync()


@dataclass
class TableSession:
    """One table as this client sees it: its updates in order, and the commands to it."""

    client: Client
    table: str
    seq: int = 0
    seat: int = -1
    last: GameUpdate | None = None
    _queue: asyncio.Queue[GameUpdate] = field(default_factory=asyncio.Queue)
    _resyncing: bool = False
    resyncs: int = 0
    """How many times this session caught up by a resync."""

    def receive(self, update: Update) -> None:
        """Take an ``Update`` from the inbox: queue it, or resync if events were missed."""
        if update.seq <= self.seq:
            return  # already known (a resync overtook it)
        first = update.events[0].seq if update.events else update.seq
        if self.seq and first != self.seq + 1:
            self.need_resync()
            return
        self._accept(
            GameUpdate(
                update.table,
                update.seq,
                update.seat,
                update.events,
                update.view,
                update.legal,
                update.deadline,
                update.status,
            )
        )

    def _accept(self, update: GameUpdate) -> None:
        self.seq = update.seq
        self.seat = update.seat
        self.last = update
        self._queue.put_nowait(update)

    def need_resync(self) -> None:
        """Catch up in the background (a gap, a reconnection, a stale command)."""
        if not self._resyncing:
            self._resyncing = True
            asyncio.get_running_loop().create_task(self._resync_now())

    async def _resync_now(self) -> None:
        # Unanswered resyncs are sent again until one is answered or the client closes: the
        # server may still be reconnecting (a broker node lost, a server restarting), and a
        # seat that never catches up would wait for ever for a turn it already has.
        try:
            while True:
                try:
                    await self.resync()
                    return
                except RequestFailed as error:
                    if error.code != "client/timeout" or self.client.closed:
                        _log.warning("resync of %s failed: %s", self.table, error)
                        return
                    _log.warning("resync of %s unanswered, asking again", self.table)
        finally:
            self._resyncing = False

    async def resync(self) -> GameUpdate:
        """Fetch the table's present and make it the next update."""
        reply = await self.client.request(Resync(), self.table)
        assert isinstance(reply.result, Synced)
        update = self._from_synced(reply.result)
        if update.seq >= self.seq:
            self.resyncs += 1
            self._accept(update)
        return update

    def _from_synced(self, synced: Synced) -> GameUpdate:
        return GameUpdate(
            self.table,
            synced.seq,
            synced.seat,
            (),
            synced.view,
            synced.legal,
            synced.deadline,
            synced.table.status,
            resync=True,
        )

    async def updates(self) -> AsyncIterator[GameUpdate]:
        """Every update of this table, in order, forever (stop iterating to leave)."""
        while True:
            yield await self._queue.get()

    async def next_update(self) -> GameUpdate:
        """The next update (wrap it in ``asyncio.timeout`` to bound the wait)."""
        return await self._queue.get()

    async def join(self, invite_code: str = "") -> GameUpdate:
        """Watch the table: returns its present (as a spectator unless seated)."""
        reply = await self.client.request(Join(invite_code=invite_code), self.table)
        assert isinstance(reply.result, Synced)
        update = self._from_synced(reply.result)
        if update.seq >= self.seq:
            self._accept(update)
        return update

    async def sit(self, seat: int = -1, invite_code: str = "") -> Reply:
        """Take a seat (-1: the first free one)."""
        return await self.client.request(Sit(seat=seat, invite_code=invite_code), self.table)

    async def stand(self) -> Reply:
        """Give up the seat (not during a game)."""
        return await self.client.request(Stand(), self.table)

    async def leave(self) -> Reply:
        """Stop watching (and stand up when no game is on)."""
        return await self.client.request(Leave(), self.table)

    async def start(self) -> Reply:
        """Start the game (every seat must be taken)."""
        return await self.client.request(Start(), self.table)

    async def ready(self) -> Reply:
        """Ready for the next hand (tables with a hand pause)."""
        return await self.client.request(Ready(), self.table)

    async def rematch(self) -> Reply:
        """A new game with the same players."""
        return await self.client.request(Rematch(), self.table)

    async def chat(self, text: str) -> Reply:
        """Say something at the table."""
        return await self.client.request(ChatSay(text=text), self.table)

    async def act(self, command: GameCommand, check: bool = True) -> Reply:
        """Play ``command`` at the last seq seen; a stale one triggers a resync.

        Raises:
            RequestFailed: the server refused it (when ``check``).
        """
        reply = await self.client.request(command, self.table, seq=self.seq, check=False)
        if not reply.ok and reply.code == "table/stale_seq":
            if isinstance(reply.result, Synced):  # the refusal carries the present
                caught_up = self._from_synced(reply.result)
                if caught_up.seq > self.seq:
                    self.resyncs += 1
                    self._accept(caught_up)
            else:
                self.need_resync()
        if check and not reply.ok:
            raise RequestFailed(reply.message, reply.code, reply)
        return reply
