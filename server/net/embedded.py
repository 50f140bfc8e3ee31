"""The embedded broker: an in-process amqtt broker on 127.0.0.1 with Ramino's ACL.

Theory of operation. amqtt (0.12, MQTT 3.1.1 only) has four questions (the last three it asks
its plugins), and we answer each from :mod:`protocol.topics`:

- *authenticate* (on CONNECT): with an :class:`~server.net.accounts.Accounts` file, a client needs
  its password; without one (guest mode) a valid name (``topics.valid_name``) that is not bound
  yet gets in with any non-empty password, which binds it (:mod:`server.net.guests`): later
  logins with that name need that password. The server account always needs
  ``server_password`` and is never a guest name. A will message must be on a topic the client
  may publish on, otherwise the connection is refused (amqtt publishes wills without asking the
  topic plugins). The broker subclass judges each CONNECT itself (see below), so no amqtt
  authentication plugin is configured.
- *topic_filtering* with ``Action.PUBLISH`` (each PUBLISH): ``topics.may_publish``; a refused
  message is dropped (the client is not told, as with Mosquitto).
- ``Action.SUBSCRIBE`` (each filter of a SUBSCRIBE): :func:`may_subscribe`, which grants a
  filter only if every topic it can match is readable (so a client's ``ramino/v1/#`` is refused
  with SUBACK 0x80, where Mosquitto grants it and delivers only what the client may read).
- ``Action.RECEIVE`` (each delivery of a message to a subscriber): ``topics.may_read``, so the
  ACL also holds at delivery time.

``RaminoTopicPlugin`` is the one topic plugin configured; the broker subclass asks its policy
directly (the same answer, without amqtt's task per plugin per message), and finds a message's
subscribers by looking its topic up (``_Snapshots.matching``) instead of trying every filter.

Where amqtt bypasses its plugins we close the gap in a ``Broker`` subclass:

- retained messages are sent to a new subscriber without a RECEIVE check, and on every CONNECT
  amqtt replays the retained messages of *every* subscription in the broker, whoever holds it;
  so only messages on public topics are ever retained (a retained will on any other topic is
  delivered but not kept; a retained PUBLISH on any other topic, a command, is dropped: amqtt
  would deliver it live without the retain flag, and the server, which ignores retained
  commands, could not tell it from a new one), and the replay on CONNECT is limited to the
  subscriptions the connecting session holds;
- amqtt reads a CONNECT and, before it asks whether the client may connect, deletes the session
  of the same client id (clean session) or writes the newcomer's will and credentials into it
  (persistent session): one refused CONNECT reusing a connected client's id took that client's
  subscriptions and will and left its connection deaf. Here the CONNECT is judged first, and a
  refused one is answered (CONNACK 5, or 3 when no more guest names can be bound) without
  touching any session. A client id is also tied to its username: a CONNECT with the client id
  of another user's connected client, or of another user's persistent session (clean session
  off), is refused, so no connection or queued private message changes hands. (Mosquitto lets
  valid credentials take over any client id.)

Limits (:mod:`server.net.broker_limits`, settings in :class:`BrokerLimits`), hooked into the
same subclass: an accepted socket over ``max_connections`` is closed at once; a socket without a
complete CONNECT after ``connect_timeout`` is closed (amqtt waits forever); an otherwise accepted
CONNECT of a user already holding ``max_connections_per_user`` connections gets CONNACK 5 (it is
judged with the credentials, before amqtt touches any session); a clean session taking over one
of its user's client ids closes the old socket (amqtt leaves it open); a client's filters beyond
``max_subscriptions`` get SUBACK 0x80. The server account is exempt from the per-user and
subscription limits. Each socket's task carries its counted
:class:`~server.net.broker_limits.Connection` in a context variable, so the CONNECT hook knows
which socket it is admitting.

What one client may push (packet size, framing, a rate per username) is checked as its packets
are read, before amqtt decodes them: :mod:`server.net.publish_guard`.

A second listener, MQTT over WebSockets (``web=(host, port)``, ``ramino serve --web``), runs the
same authentication and topic plugins; its plain HTTP requests go to an ``http`` handler (the
web page, :mod:`server.net.web`). Its MQTT connections count against the same limits (the
HTTP requests for the page do not); the publish guard reads only the TCP listener's packets.

Accepted sockets get TCP_NODELAY explicitly (asyncio also sets it on TCP transports by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import hmac
import logging
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any

import websockets
from amqtt.adapters import StreamWriterAdapter
from amqtt.broker import Broker
from amqtt.contexts import Action, ListenerType
from amqtt.errors import AMQTTError, BrokerError, MQTTError, NoDataError
from amqtt.mqtt.connack import ConnackPacket
from amqtt.mqtt.constants import QOS_1, QOS_2
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.plugins.base import BaseTopicPlugin
from amqtt.session import Session
from amqtt.utils import gen_client_id
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from protocol import topics
from server.net.accounts import Accounts
from server.net.broker_limits import (
    BrokerLimits,
    Connection,
    FailureLogFilter,
    LimitsBook,
    connection_cap,
)
from server.net.guests import Admission, Guests
from server.net.publish_guard import PublishGuard, PublishLimits

__all__ = [
    "HOST",
    "SERVER_USER",
    "BrokerLimits",
    "BrokerPortBusy",
    "EmbeddedBroker",
    "HttpHandler",
    "may_subscribe",
]

HOST = "127.0.0.1"
SERVER_USER = "ramino-server"
"""The server's MQTT username (the ``user`` section of ``deploy/mosquitto/acl``)."""

_log = logging.getLogger(__name__)

SHUTDOWN_SECONDS = 3.0
"""How long amqtt's own shutdown may take before the remaining client sockets are closed."""

_QUIET_LOGGERS = ("amqtt", "transitions", "websockets")
_NOT_A_CLIENT = "#"
"""A user that no client can be (``#`` is not a valid name): it may read only public topics."""
CONNECTION_ACCEPTED = 0
SERVER_UNAVAILABLE = 3
NOT_AUTHORIZED = 5
"""CONNACK return codes (MQTT 3.1.1): a refused login is "not authorised", as with Mosquitto;
a new guest name when no more can be bound is "server unavailable"."""
_CONNACK = "_ramino_connack"
"""The attribute of an amqtt ``Session`` that holds the CONNACK code its CONNECT was given."""
_REFUSED = 0x80
"""SUBACK return code of a refused filter."""
_connection: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "ramino_broker_connection", default=None
)
"""The socket whose task is running (amqtt handles each connection in one task)."""


HttpHandler = Callable[[ServerConnection, Request], Response | Awaitable[Response | None] | None]
"""Answers the plain HTTP requests of the WebSocket listener (``None``: go on with the
WebSocket handshake), at once or as a coroutine."""


class BrokerPortBusy(RuntimeError):
    """The port asked for the embedded broker is taken (often by a broker already running)."""


def may_subscribe(user: str, topic_filter: str, server_user: str) -> bool:
    """Whether ``user`` may subscribe to ``topic_filter``: every topic it can match is readable.

    The server reads everything under ``ramino/v1/``. A client's filter may not hold ``#`` (it
    matches topics of any depth, and no readable topic family is unbounded); a ``+`` level
    matches any level, so a filter is readable exactly when the topic spelled with a literal
    ``+`` in those levels is readable: ``+`` is no literal level of a readable topic and no
    client's name, and the public patterns of ``topics.may_read`` accept any level where a
    table id goes. (A ``+`` also matches an empty level, which ``may_read`` refuses; deliveries
    are checked again one by one, so no message on such a topic reaches a client.)

    >>> may_subscribe("alice", "ramino/v1/table/+/events", "ramino-server")
    True
    >>> may_subscribe("alice", "ramino/v1/inbox/+", "ramino-server")
    False
    """
    if user == server_user:
        return topics.may_read(user, topic_filter, server_user)
    return "#" not in topic_filter and topics.may_read(user, topic_filter, server_user)


@dataclass(frozen=True, slots=True)
class _Policy:
    """Who gets in and what they may do; shared by the plugins and the broker subclass."""

    accounts: Accounts | None
    server_user: str
    server_password: str
    guests: Guests | None = None
    """Bound guest names, used when there is no accounts file."""

    def connack(self, session: Session) -> int:
        """The CONNACK return code of the CONNECT of ``session`` (0: accepted). A guest name is
        bound only when everything else about the CONNECT is accepted."""
        username: str | None = session.username
        password: str = session.password or ""
        if username is None or not topics.valid_name(username):
            return NOT_AUTHORIZED
        if session.will_flag and not topics.may_publish(
            username, session.will_topic or "", self.server_user
        ):
            return NOT_AUTHORIZED
        if username == self.server_user:
            accepted = hmac.compare_digest(password.encode(), self.server_password.encode())
        elif self.accounts is not None:
            accepted = self.accounts.check(username, password)
        elif self.guests is not None:
            admission = self.guests.admit(username, password)
            if admission is Admission.FULL:
                _log.warning("guest names full: a new name is refused", extra={"user": username})
                return SERVER_UNAVAILABLE
            accepted = admission is Admission.ACCEPTED
        else:
            accepted = False
        return CONNECTION_ACCEPTED if accepted else NOT_AUTHORIZED

    def allows(self, session: Session | None, topic: str | None, action: Action) -> bool:
        username = session.username if session is not None else None
        if username is None or topic is None:
            return False
        if action == Action.PUBLISH:
            return topics.may_publish(username, topic, self.server_user)
        if action == Action.SUBSCRIBE:
            return may_subscribe(username, topic, self.server_user)
        if action == Action.RECEIVE:
            return topics.may_read(username, topic, self.server_user)
        return False

    def may_retain(self, topic: str) -> bool:
        return topics.may_read(_NOT_A_CLIENT, topic, self.server_user)


class RaminoTopicPlugin(BaseTopicPlugin):  # type: ignore[misc]
    """amqtt topic plugin: ``protocol.topics``' ACL on publish, subscribe and delivery."""

    @dataclass
    class Config:
        """Filled in by :class:`EmbeddedBroker`."""

        policy: _Policy

    async def topic_filtering(
        self,
        *,
        session: Session | None = None,
        topic: str | None = None,
        action: Action | None = None,
    ) -> bool:
        """Whether ``session``'s user may do ``action`` on ``topic``."""
        policy: _Policy = self.context.config.policy
        return action is not None and policy.allows(session, topic, action)


def _has_wildcard(topic_filter: str) -> bool:
    return "+" in topic_filter or "#" in topic_filter


class _Snapshots(dict[str, Any]):
    """amqtt's subscription table (topic filter -> subscriptions), whose iteration runs over a
    copy of its items, and which finds the filters that match a topic without trying each.

    amqtt iterates its subscription table across ``await``s while broadcasting, so a client
    subscribing meanwhile raised "dictionary changed size during iteration" and the message
    was lost for everyone. And it tried every filter of every client against every message
    (a debug line built for each miss): the broker's work per message grew with its clients.
    ``matching`` looks the topic itself up and tries only the filters with a wildcard, a list
    kept until a filter is added or removed.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._wildcards: tuple[str, ...] | None = None

    def __iter__(self) -> Iterator[str]:
        return iter(list(super().keys()))

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        return list(super().items())

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self:
            self._wildcards = None
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._wildcards = None

    def clear(self) -> None:
        super().clear()
        self._wildcards = None

    def pop(self, key: str, *default: Any) -> Any:
        self._wildcards = None
        return super().pop(key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._wildcards = None
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._wildcards = None
        super().update(*args, **kwargs)

    def popitem(self) -> tuple[str, Any]:
        self._wildcards = None
        return super().popitem()

    def matching(
        self, topic: str, matches: Callable[[str, str], bool]
    ) -> list[list[tuple[Session, int]]]:
        """A copy of the subscriptions of every filter that matches ``topic``: the filter equal
        to it first, then those with wildcards that ``matches`` (amqtt's rule) accepts."""
        found: list[list[tuple[Session, int]]] = []
        exact = super().get(topic)
        if exact:
            found.append(list(exact))
        wildcards = self._wildcards
        if wildcards is None:
            wildcards = tuple(filter(_has_wildcard, dict.keys(self)))
            self._wildcards = wildcards
        for a_filter in wildcards:
            if matches(topic, a_filter):
                subscriptions = super().get(a_filter)
                if subscriptions:
                    found.append(list(subscriptions))
        return found


class _WebSocketCloser:
    """A WebSocket as the limits close a connection taken over: ``close()`` without waiting."""

    def __init__(self, websocket: ServerConnection) -> None:
        self._websocket = websocket
        self._closing: asyncio.Task[None] | None = None

    def close(self) -> None:
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self._websocket.close())


class _RaminoBroker(Broker):  # type: ignore[misc]
    """amqtt's broker with its ACL bypasses closed (see the module docstring)."""

    def __init__(
        self,
        config: dict[str, Any],
        policy: _Policy,
        book: LimitsBook,
        guard: PublishGuard,
        http: HttpHandler | None = None,
    ) -> None:
        super().__init__(config)
        self._ramino_http = http
        self._ramino_policy = policy
        self._ramino_limits = book
        self._ramino_guard = guard
        # Bounded, where amqtt's are not: what does not fit is dropped (and counted).
        self._broadcast_queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(
            guard.limits.max_queued
        )
        self.__dict__["_subscriptions"] = _Snapshots(self.__dict__["_subscriptions"])
        self._writers: set[Any] = set()

    async def _create_server_instance(
        self,
        listener_name: str,
        listener_type: ListenerType,
        address: str | None,
        port: int,
        ssl_context: Any,
    ) -> Any:
        if listener_type != ListenerType.WS or self._ramino_http is None:
            return await super()._create_server_instance(
                listener_name, listener_type, address, port, ssl_context
            )
        # amqtt's WebSocket listener, which also answers plain HTTP requests (the web page).
        return await websockets.serve(
            partial(self.ws_connected, listener_name=listener_name),
            address,
            port,
            ssl=ssl_context,
            subprotocols=[websockets.Subprotocol("mqtt")],
            process_request=self._ramino_http,
        )

    async def ws_connected(self, websocket: ServerConnection, listener_name: str) -> None:
        counted = self._ramino_limits.open_socket()
        if counted is None:
            await websocket.close()  # over max_connections
            return
        counted.writer = _WebSocketCloser(websocket)
        _connection.set(counted)
        try:
            await super().ws_connected(websocket, listener_name)
        finally:
            self._ramino_limits.close_socket(counted)

    async def stream_connected(self, reader: Any, writer: Any, listener_name: str) -> None:
        counted = self._ramino_limits.open_socket()
        if counted is None:
            writer.close()  # over max_connections: closed before reading a byte
            return
        counted.writer = writer
        _connection.set(counted)
        connection = writer.get_extra_info("socket")
        if connection is not None and connection.family in (socket.AF_INET, socket.AF_INET6):
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._writers.add(writer)
        try:
            # amqtt's stream_connected, with the reader that applies the publish limits.
            guarded = self._ramino_guard.reader(reader, writer)
            await self._client_connected(listener_name, guarded, StreamWriterAdapter(writer))
        finally:
            # amqtt leaves some connections open when its handler ends or at shutdown.
            self._writers.discard(writer)
            writer.close()
            self._ramino_limits.close_socket(counted)

    async def _initialize_client_session(self, reader: Any, writer: Any, *address: Any) -> Any:
        timeout = self._ramino_limits.limits.connect_timeout or None
        try:
            async with asyncio.timeout(timeout):
                return await self._judged_client_session(reader, writer, *address)
        except TimeoutError:
            raise AMQTTError(f"no CONNECT within {timeout:g} s") from None

    async def add_subscription(self, subscription: tuple[str, int], session: Session) -> int:
        topic_filter, client_id = subscription[0], session.client_id or ""
        if not self._ramino_limits.may_subscribe(session.username, client_id, topic_filter):
            return _REFUSED
        code: int = await super().add_subscription(subscription, session)
        if code != _REFUSED:
            self._ramino_limits.subscribed(client_id, topic_filter)
        return code

    def _del_subscription(self, a_filter: str, session: Session) -> int:
        deleted: int = super()._del_subscription(a_filter, session)
        if deleted:
            self._ramino_limits.unsubscribed(session.client_id or "", a_filter)
        return deleted

    async def close_connections(self) -> None:
        """Close every client connection still open (amqtt's shutdown leaves them)."""
        writers, self._writers = self._writers, set()
        for writer in writers:
            writer.close()
        for writer in writers:
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _broadcast_message(
        self,
        session: Session | None,
        topic: str | None,
        data: bytes | bytearray | None,
        force_qos: int | None = None,
    ) -> None:
        broadcast: dict[str, Any] = {"session": session, "topic": topic, "data": data}
        if force_qos is not None:
            broadcast["qos"] = force_qos
        try:
            self._broadcast_queue.put_nowait(broadcast)
        except asyncio.QueueFull:
            self._ramino_guard.note_overflow("the broadcast queue")

    async def _run_broadcast(self, running_tasks: deque[asyncio.Task[Any]]) -> None:
        """amqtt's delivery of one message to its subscribers, with the subscriptions found by
        ``_Snapshots.matching`` instead of by trying every filter (see ``_Snapshots``)."""
        broadcast = await self._broadcast_queue.get()
        topic = broadcast["topic"]
        subscriptions: _Snapshots = self.__dict__["_subscriptions"]
        for matched in subscriptions.matching(topic, self._matches):
            for target_session, sub_qos in matched:
                qos = broadcast.get("qos", sub_qos)
                if not await self._topic_filtering(target_session, topic, Action.RECEIVE):
                    continue
                connected = target_session.transitions.state == "connected"
                if (
                    not connected
                    and not target_session.clean_session
                    and qos in (QOS_1, QOS_2)
                    and not target_session.is_anonymous
                ):
                    # Kept for a persistent session while it is away [MQTT-3.1.2.4].
                    await self._retain_broadcast_message(broadcast, qos, target_session)
                    continue
                if not connected:
                    continue
                handler = self._get_handler(target_session)
                if handler:
                    running_tasks.append(
                        asyncio.ensure_future(
                            handler.mqtt_publish(topic, broadcast["data"], qos, retain=False)
                        )
                    )

    async def _topic_filtering(self, session: Session, topic: str, action: Action) -> bool:
        # What amqtt's plugin manager would answer, asking the one topic plugin configured
        # (``RaminoTopicPlugin``, on the same policy), without a task per plugin per message.
        allowed = self._ramino_policy.allows(session, topic, action)
        username = session.username
        if allowed and action == Action.RECEIVE and username and topic == topics.inbox(username):
            self._ramino_guard.credit(username)  # a reply or an update: one answer paid for
        return allowed

    def _get_handler(self, session: Session) -> Any:
        """The connection of ``session``; ``None`` (nothing is sent to it) while it has more
        deliveries waiting to be written than ``max_queued``: a subscriber that does not read
        loses messages instead of piling them up here (as with Mosquitto's
        ``max_queued_messages``)."""
        handler = super()._get_handler(session)
        lock = getattr(handler, "_write_lock", None)
        waiting = getattr(lock, "_waiters", None)
        if waiting is not None and len(waiting) >= self._ramino_guard.limits.max_queued:
            self._ramino_guard.note_overflow(f"{session.client_id}'s deliveries")
            return None
        return handler

    async def _judged_client_session(
        self, reader: Any, writer: Any, remote_address: str, remote_port: int
    ) -> tuple[Any, Session]:
        """amqtt's ``_initialize_client_session``, with the CONNECT judged first: amqtt deletes
        the session of the same client id (clean session) or writes the newcomer's will and
        credentials into it (persistent session) before it asks whether the newcomer may
        connect, so a refused CONNECT took a connected client's subscriptions and will. A
        refused CONNECT touches no session here (:meth:`_handle_client_session` answers it),
        and a client id held by a connected client, or by a persistent session, of another
        user is refused. The limits' admission is part of the judgement."""
        try:
            handler, session = await BrokerProtocolHandler.init_from_connect(
                reader, writer, self.plugins_manager
            )
        except MQTTError as exc:
            await writer.close()
            raise MQTTError(exc) from exc
        except (AMQTTError, NoDataError) as exc:
            raise AMQTTError(exc) from exc
        code = self._connack(session)
        setattr(session, _CONNACK, code)
        session.parent = 0
        if code != CONNECTION_ACCEPTED:
            return handler, session
        client_id: str = session.client_id or ""
        if session.clean_session:
            if client_id:
                await self._delete_session(client_id)
            else:
                session.client_id = gen_client_id()
        elif client_id in self._sessions:
            existing, _ = self._sessions[client_id]
            for name in (
                "will_flag",
                "will_message",
                "will_topic",
                "will_qos",
                "will_retain",
                "keep_alive",
                "username",
                "password",
            ):
                setattr(existing, name, getattr(session, name))
            setattr(existing, _CONNACK, code)
            session = existing
            session.parent = 1
        delay = self.config.get("timeout-disconnect-delay", 0)
        if session.keep_alive > 0 and isinstance(delay, int):
            session.keep_alive += delay
        return handler, session

    def _connack(self, session: Session) -> int:
        held = self._sessions.get(session.client_id) if session.client_id else None
        if held is not None:
            holder: Session = held[0]
            in_use = holder.transitions.is_connected() or not holder.clean_session
            if in_use and holder.username != session.username:
                return NOT_AUTHORIZED
        code = self._ramino_policy.connack(session)
        if code != CONNECTION_ACCEPTED:
            return code
        connection = _connection.get()
        book = self._ramino_limits
        user, client_id = session.username or "", session.client_id or ""
        if not book.admit(connection, user, client_id, session.clean_session):
            return NOT_AUTHORIZED
        if connection is not None and session.clean_session:
            # amqtt leaves the socket of a connection taken over open (and counted).
            for old in book.taken_over(connection):
                old.writer.close()
        return CONNECTION_ACCEPTED

    async def _handle_client_session(
        self,
        reader: Any,
        writer: Any,
        client_session: Session,
        handler: Any,
        server: Any,
        listener_name: str,
    ) -> None:
        code: int = getattr(client_session, _CONNACK, NOT_AUTHORIZED)
        if code != CONNECTION_ACCEPTED:
            with contextlib.suppress(OSError):  # the client may be gone already
                await ConnackPacket.build(0, code).to_stream(writer)
                await writer.close()
            return
        await super()._handle_client_session(
            reader, writer, client_session, handler, server, listener_name
        )

    async def _authenticate(self, session: Session, listener: Any) -> bool:
        # Judged by _initialize_client_session (every CONNECT goes through it first).
        return bool(getattr(session, _CONNACK, NOT_AUTHORIZED) == CONNECTION_ACCEPTED)

    async def retain_message(
        self,
        source_session: Session | None,
        topic_name: str | None,
        data: bytes | bytearray | None,
        qos: int | None = None,
    ) -> None:
        if topic_name is None or not self._ramino_policy.may_retain(topic_name):
            return
        await super().retain_message(source_session, topic_name, data, qos)

    async def _handle_message_delivery(
        self, client_session: Session, handler: Any, wait_deliver: Any
    ) -> bool:
        message = wait_deliver.result()
        packet = getattr(message, "publish_packet", None)
        topic = getattr(message, "topic", None)
        if (
            packet is not None
            and packet.retain_flag
            and topic
            and not self._ramino_policy.may_retain(topic)
        ):
            # A retained command is an old message for whoever subscribes later, so it is never
            # run: amqtt delivers it live without the flag, where the server could not tell it
            # from a new one, so it is dropped here.
            return True
        result: bool = await super()._handle_message_delivery(client_session, handler, wait_deliver)
        return result

    async def _publish_retained_messages_for_subscription(
        self, subscription: tuple[str, int], session: Session
    ) -> None:
        holders = self._subscriptions.get(subscription[0], ())
        if any(holder.client_id == session.client_id for holder, _ in holders):
            await super()._publish_retained_messages_for_subscription(subscription, session)


class EmbeddedBroker:
    """An amqtt broker inside this process, listening on 127.0.0.1, with Ramino's ACL.

    ::

        async with EmbeddedBroker(port=0, server_password=password) as broker:
            ...  # connect to broker.url

    ``port=0`` picks a free port (read it from :attr:`port`). ``accounts=None`` is guest mode:
    a name is bound to the first password it logs in with, in ``guests`` (default: in memory),
    except the server account (``server_user``), which always needs ``server_password``.
    :meth:`stop` writes what ``guests`` has not written yet.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        accounts: Accounts | None = None,
        server_password: str,
        server_user: str = SERVER_USER,
        limits: BrokerLimits | None = None,
        publish_limits: PublishLimits | None = None,
        guests: Guests | None = None,
        web: tuple[str, int] | None = None,
        http: HttpHandler | None = None,
    ) -> None:
        """Configure the broker; :meth:`start` (or ``async with``) starts it. ``limits``:
        :class:`~server.net.broker_limits.BrokerLimits` (its defaults when ``None``).
        ``web``: also listen for MQTT over WebSockets on this (host, port), where ``http``
        answers the plain HTTP requests (the web page).

        ``publish_limits`` bound what each client may push (:mod:`server.net.publish_guard`;
        the server account has no limit).

        Raises:
            ValueError: ``server_password`` is empty or ``server_user`` is not a valid name.
        """
        if not server_password:
            raise ValueError("the embedded broker needs a non-empty server_password")
        if not topics.valid_name(server_user):
            raise ValueError(f"invalid server user {server_user!r}")
        self._requested_port = port
        if accounts is None and guests is None:
            guests = Guests()
        self._guests = None if accounts is not None else guests
        self._policy = _Policy(accounts, server_user, server_password, self._guests)
        self._limits = limits or BrokerLimits()
        self._book: LimitsBook | None = None
        self._log_filter = FailureLogFilter()
        self.guard = PublishGuard(publish_limits, exempt=(server_user,))
        """The per-client publish limits and their counters."""
        self._broker: _RaminoBroker | None = None
        self._port: int | None = None
        self._web = web
        self._http = http
        self._web_port: int | None = None

    @property
    def port(self) -> int:
        """The port the broker listens on.

        Raises:
            RuntimeError: the broker is not running.
        """
        if self._port is None:
            raise RuntimeError("the embedded broker is not running")
        return self._port

    @property
    def web_port(self) -> int:
        """The port of the WebSocket listener.

        Raises:
            RuntimeError: the broker is not running or has no WebSocket listener.
        """
        if self._web_port is None:
            raise RuntimeError("the embedded broker has no WebSocket listener running")
        return self._web_port

    @property
    def limits(self) -> BrokerLimits:
        """The limits this broker enforces (its connection cap may be lower: see
        :func:`~server.net.broker_limits.connection_cap`)."""
        return self._limits

    @property
    def book(self) -> LimitsBook:
        """The counts behind the limits (open sockets, refusals).

        Raises:
            RuntimeError: the broker is not running.
        """
        if self._book is None:
            raise RuntimeError("the embedded broker is not running")
        return self._book

    @property
    def url(self) -> str:
        """``mqtt://127.0.0.1:PORT``."""
        return f"mqtt://{HOST}:{self.port}"

    async def start(self) -> None:
        """Start listening.

        Raises:
            BrokerPortBusy: the requested port is taken.
            amqtt.errors.BrokerError: amqtt failed to start for another reason.
        """
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        policy = {"policy": self._policy}
        listeners: dict[str, dict[str, str]] = {
            "default": {"type": "tcp", "bind": f"{HOST}:{self._requested_port}"},
        }
        if self._web is not None:
            listeners["web"] = {"type": "ws", "bind": f"{self._web[0]}:{self._web[1]}"}
        config = {
            "listeners": listeners,
            "plugins": {
                f"{__name__}.RaminoTopicPlugin": policy,
            },
        }
        book = LimitsBook(self._limits, self._policy.server_user, connection_cap(self._limits))
        broker = _RaminoBroker(config, self._policy, book, self.guard, self._http)
        broker_logger = logging.getLogger("amqtt.broker")
        level = broker_logger.level
        # A busy port is reported by BrokerPortBusy; amqtt would also log it with a traceback.
        broker_logger.setLevel(logging.CRITICAL)
        try:
            await broker.start()
        except BrokerError as exc:
            if _is_address_in_use(exc):
                if self._web is not None and self._requested_port == 0:
                    host, port = self._web
                    raise BrokerPortBusy(
                        f"cannot start the web listener: {host}:{port} is already in use"
                    ) from exc
                raise BrokerPortBusy(
                    f"cannot start the embedded broker: {HOST}:{self._requested_port} is already"
                    " in use (by another broker?). Use that broker with"
                    f" --broker mqtt://{HOST}:{self._requested_port}, or choose another port."
                ) from exc
            raise
        finally:
            broker_logger.setLevel(level)
        self._broker, self._book = broker, book
        logging.getLogger("amqtt.broker").addFilter(self._log_filter)
        # amqtt keeps its listening servers private; port 0 is only known from the socket.
        self._port = broker._servers["default"].instance.sockets[0].getsockname()[1]
        if self._web is not None:
            self._web_port = broker._servers["web"].instance.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Disconnect every client and stop listening (nothing is kept)."""
        broker, self._broker, self._port = self._broker, None, None
        self._web_port = None
        logging.getLogger("amqtt.broker").removeFilter(self._log_filter)
        if broker is not None:
            # amqtt warns of the messages it drops as it stops (the last wills and presences
            # of clients it disconnects): expected at a shutdown, not worth a warning.
            quiet = logging.getLogger("amqtt.broker")
            level = quiet.level
            quiet.setLevel(logging.ERROR)
            try:
                # amqtt's shutdown stops each session's handler, and one can wait for a client
                # that has nothing more to say: it gets a few seconds, then the sockets close.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(SHUTDOWN_SECONDS):
                        await broker.shutdown()
                await broker.close_connections()
            finally:
                quiet.setLevel(level)
        if self._guests is not None:
            await self._guests.close()

    def backlog(self) -> int:
        """Messages amqtt holds on their way: read from a client and not yet broadcast, or
        broadcast and not yet written to a subscriber (0 when the broker is not running)."""
        broker = self._broker
        if broker is None:
            return 0
        held: int = broker._broadcast_queue.qsize()
        for session, _ in list(broker._sessions.values()):
            held += session.delivered_message_queue.qsize()
        return held + sum(1 for task in list(broker._tasks_queue) if not task.done())

    async def __aenter__(self) -> EmbeddedBroker:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()


def _is_address_in_use(exc: BaseException) -> bool:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
            return True
        cause = cause.__cause__
    return False
