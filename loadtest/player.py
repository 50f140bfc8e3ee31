"""A protocol v1 player for Locust: one MQTT connection, its requests and its tables.

A ``Player`` speaks to the server exactly as a real client does (docs/protocol.md): it connects
with its account and a presence will, subscribes to its inbox at QoS 0, publishes
``Presence{online: true}``, and sends each ``Request`` with a fresh id, resending the same id
after a timeout, a ``limit/rate`` refusal or a reconnection. Each table it sits at has a
``TableTrack`` that keeps the last ``seq`` and resyncs on a gap, after a reconnection and on a
stale command.

It runs under gevent, as Locust does: the MQTT client is Locust's own ``MqttClient`` (paho-mqtt
with its selector loop, which lifts paho's ``select`` cap of about 340 connections a process),
whose network loop is a greenlet. Replies are handed to the waiting greenlet through a gevent
``AsyncResult``, updates through a gevent ``Queue``.

Every measurement is a Locust request event, so the web UI, the CSV files and the HTML report
show it. The request types (the "Type" column) are the ``KIND_*`` constants below.
"""

from __future__ import annotations

import logging
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
import paho.mqtt.client as mqtt
from gevent.event import AsyncResult, Event
from gevent.queue import Empty, Queue
from locust.contrib.mqtt import MqttClient
from locust.env import Environment

from loadtest.recording import Recorder
from protocol import topics
from protocol.codec import MalformedMessage, decode_chat, decode_inbox, decode_status, encode
from protocol.game import Command as GameCommand
from protocol.game import View
from protocol.messages import AnyCommand, Presence, Reply, Request, Resync, Synced, Update
from protocol.transport import BrokerAddress

__all__ = [
    "KIND_CHAT",
    "KIND_COMMAND",
    "KIND_CONNECTION",
    "KIND_GAME",
    "KIND_HOSTILE",
    "KIND_LOBBY",
    "KIND_REFUSED",
    "KIND_RESYNC",
    "KIND_TURN",
    "ConnectFailed",
    "Player",
    "Refused",
    "Seen",
    "TableTrack",
    "command_name",
]

KIND_COMMAND = "command"
"""Command -> its reply, named by the command's type (``draw_stock``, ``sit``, ...)."""
KIND_TURN = "turn"
"""A discard -> the update that hands the turn to another seat."""
KIND_LOBBY = "lobby"
"""Joining through the lobby -> the game starting, and the outcomes of the search."""
KIND_RESYNC = "resync"
"""A catch-up, named by its cause (``gap``, ``reconnect``, ``stale``, ``server restart``): the
time until caught up."""
KIND_GAME = "game"
"""A game finished (counted once per table, by seat 0), named by its variant: its duration."""
KIND_CHAT = "chat"
"""A chat line sent -> the same line read back on the table's chat topic."""
KIND_REFUSED = "refused"
"""Refusals the protocol expects in normal play (``table/stale_seq``, a lost race for a seat),
named by code. Unexpected refusals are failures of the command itself."""
KIND_HOSTILE = "hostile"
"""Garbage payloads, replayed requests, floods: the server must answer them as documented."""
KIND_CONNECTION = "connection"
"""Connecting (CONNECT -> CONNACK) and deliberate drops."""

_log = logging.getLogger(__name__)

CONNECT_SECONDS = 10.0
"""Longest a connection (or a reconnection) may take."""


def command_name(command: AnyCommand | GameCommand) -> str:
    """The ``type`` of a command on the wire (``draw_stock``, ``create_table``, ...)."""
    tag = type(command).__struct_config__.tag
    return str(tag)


class Refused(Exception):
    """A reply with an error the scenario did not expect; its text is the code, so Locust's
    failure table counts errors by code."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(code)
        self.code = code
        self.detail = message


class ConnectFailed(Exception):
    """The broker did not accept the connection in time."""


class _LocustMqttClient(MqttClient):
    """Locust's MQTT client, with one Locust stats row per kind of topic (not one per player
    and table, which would flood the tables with thousands of rows)."""

    def _generate_event_name(self, event_type: str, qos: int, topic: str) -> str:
        return f"{event_type}:{qos}:{_topic_kind(topic)}"


def _topic_kind(topic: str) -> str:
    levels = topic.split("/")
    if len(levels) >= 5 and levels[2] == "table":
        return f"table/{levels[4] if levels[4] != 'cmd' else 'cmd'}"
    return levels[2] if len(levels) > 2 else topic


@dataclass(frozen=True, slots=True)
class Seen:
    """What one seat knows after a change: its view and what it may do now."""

    table: str
    seq: int
    seat: int
    view: View | None
    legal: tuple[GameCommand, ...]
    status: str
    resync: bool = False


@dataclass
class _Pending:
    topic: str
    payload: bytes
    result: AsyncResult


@dataclass
class TableTrack:
    """One table as a player sees it: its updates in order, resyncing on a gap."""

    player: Player
    table: str
    seq: int = 0
    seat: int = -1
    last: Seen | None = None
    queue: Queue = field(default_factory=Queue)
    resyncing: bool = False
    discard_sent: float = 0.0
    """When our last discard left (0: none awaiting the next turn)."""
    discard_seq: int = 0

    def receive(self, update: Update, received: float) -> None:
        """Take an ``Update``: queue it, or resync when events were missed."""
        if update.seq <= self.seq:
            return  # old news, overtaken by a resync
        first = update.events[0].seq if update.events else update.seq
        if self.seq and first != self.seq + 1:
            self.need_resync("gap", received)
            return
        self._turn_passed(update.seq, update.view, update.status, received)
        self.accept(
            Seen(update.table, update.seq, update.seat, update.view, update.legal, update.status)
        )

    def _turn_passed(self, seq: int, view: View | None, status: str, received: float) -> None:
        """Time a discard of ours until the update that awaits another seat."""
        if not self.discard_sent or seq <= self.discard_seq:
            return
        if status != "playing" or view is None:
            self.discard_sent = 0.0  # the hand or game ended with it: no next turn to time
            return
        if view.to_move != self.seat:
            self.player.fire(KIND_TURN, "discard -> next turn", received - self.discard_sent)
            self.discard_sent = 0.0

    def accept(self, seen: Seen) -> None:
        """Make ``seen`` the present and queue it for the player."""
        self.seq = seen.seq
        self.seat = seen.seat
        self.last = seen
        self.queue.put(seen)

    def accept_synced(self, synced: Synced) -> bool:
        """Take a ``Synced`` present if it is not older than ours; whether it was taken."""
        if synced.seq < self.seq:
            return False
        self.accept(
            Seen(
                self.table,
                synced.seq,
                synced.seat,
                synced.view,
                synced.legal,
                synced.table.status,
                resync=True,
            )
        )
        return True

    def need_resync(self, reason: str, since: float) -> None:
        """Catch up in another greenlet (the network loop must not wait for a reply)."""
        if not self.resyncing:
            self.resyncing = True
            gevent.spawn(self._resync, reason, since)

    def _resync(self, reason: str, since: float) -> None:
        try:
            reply = self.player.request(Resync(), self.table)
            if reply is not None and reply.ok and isinstance(reply.result, Synced):
                self.accept_synced(reply.result)
                self.player.fire(KIND_RESYNC, reason, time.perf_counter() - since)
        finally:
            self.resyncing = False

    def next(self, timeout: float) -> Seen | None:
        """The next update, or ``None`` after ``timeout`` seconds without one."""
        try:
            seen: Seen = self.queue.get(timeout=timeout)
        except Empty:
            return None
        return seen

    def drain(self) -> Seen | None:
        """Drop the queued updates but the newest (a player that fell behind skips ahead)."""
        newest: Seen | None = None
        while not self.queue.empty():
            newest = self.queue.get_nowait()
        return newest


class Player:
    """One player's connection: see the module docstring."""

    def __init__(
        self,
        environment: Environment,
        username: str,
        password: str,
        address: BrokerAddress,
        recorder: Recorder | None = None,
        request_timeout: float = 10.0,
        attempts: int = 3,
    ) -> None:
        self.environment = environment
        self.username = username
        self.address = address
        self.recorder = recorder
        self.request_timeout = request_timeout
        self.attempts = attempts
        self.inbox = topics.inbox(username)
        self.tables: dict[str, TableTrack] = {}
        self.extra_topics: set[str] = set()
        """Public topics to (re)subscribe on each connection (a table's chat)."""
        self.on_chat: Callable[[str, str, float], None] | None = None
        """Called with (table, text, arrival) for each chat line read."""
        self.shards = 1
        """Lobby shards (``Welcome.shards``): our lobby topic is ``crc32(name) mod shards``."""
        self.server_link: tuple[float, float] | None = None
        """``started_at`` of the server's retained status: a new one means a restart."""
        self._pending: dict[str, _Pending] = {}
        self._connected = Event()
        self._connections = 0
        self._dropped_at = 0.0
        self._closing = False
        self.client = _LocustMqttClient(
            environment=environment,
            client_id=f"{username}-{secrets.token_hex(4)}",
            protocol=mqtt.MQTTv311,
            use_loop_selectors=True,
        )
        self.client.username_pw_set(username, password)
        self.client.will_set(
            topics.presence(username), encode(Presence(online=False)), qos=1, retain=False
        )
        self.client.reconnect_delay_set(1, 4)
        self._locust_on_connect: Any = self.client.on_connect
        self._locust_on_disconnect: Any = self.client.on_disconnect
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.on_socket_open = self._on_socket_open

    # Metrics ---------------------------------------------------------------------------------

    def fire(
        self,
        kind: str,
        name: str,
        seconds: float,
        length: int = 0,
        exception: Exception | None = None,
    ) -> None:
        """Report one measurement to Locust (``seconds`` is shown in milliseconds)."""
        hook: Any = self.environment.events.request  # Locust's EventHook is untyped
        hook.fire(
            request_type=kind,
            name=name,
            response_time=seconds * 1000.0,
            response_length=length,
            exception=exception,
            context={"player": self.username},
        )

    # Connection ------------------------------------------------------------------------------

    def connect(self) -> None:
        """Connect, subscribe to the inbox and say we are online.

        Raises:
            ConnectFailed: no CONNACK within ``CONNECT_SECONDS``.
        """
        started = time.perf_counter()
        self.client.connect_async(self.address.host, self.address.port, keepalive=30)
        self.client.loop_start()
        if not self._connected.wait(CONNECT_SECONDS):
            error = ConnectFailed(f"no connection to {self.address.url} as {self.username!r}")
            self.fire(KIND_CONNECTION, "connect", time.perf_counter() - started, exception=error)
            self.close()
            raise error
        self.fire(KIND_CONNECTION, "connect", time.perf_counter() - started)

    def close(self) -> None:
        """Say we are offline and disconnect cleanly."""
        self._closing = True
        if self._connected.is_set():
            self.client.publish(topics.presence(self.username), encode(Presence(online=False)))
        self.client.disconnect()
        self.client.loop_stop()
        if self.recorder is not None:
            self.recorder.close()

    def drop(self) -> None:
        """Lose the connection abruptly (no DISCONNECT: the broker publishes our will), as a
        network failure would; the client reconnects by itself, then resyncs every table."""
        sock = self.client.socket()
        if sock is None or not self._connected.is_set():
            return
        self._dropped_at = time.perf_counter()
        self._connected.clear()
        self.fire(KIND_CONNECTION, "drop", 0.0)
        if isinstance(sock, socket.socket):
            sock.shutdown(socket.SHUT_RDWR)

    def wait_connected(self, timeout: float = CONNECT_SECONDS) -> bool:
        """Whether the connection is up (waiting at most ``timeout`` seconds for it)."""
        return bool(self._connected.wait(timeout))

    def subscribe(self, topic: str) -> None:
        """Read a public topic from now on (and after each reconnection)."""
        self.extra_topics.add(topic)
        if self._connected.is_set():
            self.client.subscribe(topic, qos=0)

    def _on_socket_open(self, client: mqtt.Client, userdata: Any, sock: Any) -> None:
        # Every message is small: without TCP_NODELAY a command can wait ~40 ms (protocol §2).
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, rc: Any) -> None:
        self._locust_on_connect(client, userdata, flags, rc)
        if rc != 0:
            return
        self._connections += 1
        wanted = [self.inbox, topics.server_status(), *self.extra_topics]
        client.subscribe([(topic, 0) for topic in wanted])
        client.publish(topics.presence(self.username), encode(Presence(online=True)), qos=1)
        self._connected.set()
        if self._connections > 1:
            # Clean session: what was sent while we were away is lost. Resend what waits for
            # a reply (same ids) and catch up on every table (protocol §12).
            for pending in list(self._pending.values()):
                client.publish(pending.topic, pending.payload, qos=1)
            since = self._dropped_at or time.perf_counter()
            for track in self.tables.values():
                track.need_resync("reconnect", since)

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, rc: Any) -> None:
        self._connected.clear()
        if self._dropped_at or self._closing:
            return  # our own doing: not a failure of the system under test
        self._locust_on_disconnect(client, userdata, rc)

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        received = time.perf_counter()
        topic, payload = message.topic, bytes(message.payload)
        if self.recorder is not None:
            self.recorder.write(topic, payload)
        if topic == self.inbox:
            try:
                inbox = decode_inbox(payload)
            except MalformedMessage as error:
                self.fire(KIND_HOSTILE, "undecodable inbox message", 0.0, exception=error)
                return
            if isinstance(inbox, Reply):
                pending = self._pending.get(inbox.id)
                if pending is not None and not pending.result.ready():
                    pending.result.set(inbox)
            else:
                self.table(inbox.table).receive(inbox, received)
        elif topic == topics.server_status():
            self._server_status(payload, received)
        elif topic.endswith("/chat") and self.on_chat is not None:
            try:
                line = decode_chat(payload)
            except MalformedMessage:
                return
            self.on_chat(line.table, line.text, received)

    def _server_status(self, payload: bytes, received: float) -> None:
        """A server that restarted or reconnected may not have sent every update: resync."""
        try:
            status = decode_status(payload)
        except MalformedMessage:
            return
        if not status.online:
            return
        link = (status.started_at, status.reconnected_at)
        if self.server_link and link != self.server_link:
            for track in self.tables.values():
                track.need_resync("server restart", received)
        self.server_link = link

    @property
    def lobby(self) -> str:
        """Our lobby command topic."""
        return topics.lobby_command(self.username, topics.shard_of(self.username, self.shards))

    # Requests --------------------------------------------------------------------------------

    def table(self, table: str) -> TableTrack:
        """The track of ``table`` (created on first use)."""
        track = self.tables.get(table)
        if track is None:
            track = TableTrack(self, table)
            self.tables[table] = track
        return track

    def send_raw(
        self, topic: str, payload: bytes, request_id: str, aliases: tuple[str, ...] = ()
    ) -> AsyncResult:
        """Publish ``payload`` as is and return where the reply with ``request_id`` (or one of
        ``aliases``) will land (the hostile scenarios send what ``request`` never builds)."""
        result = AsyncResult()
        pending = _Pending(topic, payload, result)
        for key in (request_id, *aliases):
            self._pending[key] = pending
        self.client.publish(topic, payload, qos=1)
        return result

    def forget(self, request_id: str) -> None:
        """Stop waiting for the reply to ``request_id``."""
        self._pending.pop(request_id, None)

    def request(
        self,
        command: AnyCommand | GameCommand,
        table: str = "",
        seq: int | None = None,
        expect: frozenset[str] = frozenset(),
        request_id: str = "",
    ) -> Reply | None:
        """Send ``command`` (to ``table``, or the lobby) and return its reply, or ``None`` when
        none came after ``attempts`` sends of the same id.

        The time to the reply is reported as a ``command`` request named by the command's type;
        a refusal whose code is not in ``expect`` (nor ``table/stale_seq`` for a command sent
        with a ``seq``) is reported as its failure, by code.
        """
        name = command_name(command)
        request = Request(id=request_id or secrets.token_hex(8), cmd=command, seq=seq)
        topic = topics.table_command(table, self.username) if table else self.lobby
        payload = encode(request)
        started = time.perf_counter()
        reply: Reply | None = None
        try:
            for attempt in range(self.attempts):
                result = self.send_raw(topic, payload, request.id)
                reply = result.wait(self.request_timeout)
                if reply is None:
                    continue  # lost, or the connection dropped: send the same id again
                if reply.code != "limit/rate":
                    break
                self.fire(KIND_REFUSED, reply.code, 0.0)
                reply = None
                gevent.sleep(0.05 * 2**attempt)  # over the rate: back off, resend the same id
        finally:
            self.forget(request.id)
        elapsed = time.perf_counter() - started
        if reply is None:
            self.fire(KIND_COMMAND, name, elapsed, exception=Refused("client/timeout"))
            return None
        if reply.ok:
            self.fire(KIND_COMMAND, name, elapsed, len(payload))
        elif reply.code in expect or (seq is not None and reply.code == "table/stale_seq"):
            self.fire(KIND_COMMAND, name, elapsed, len(payload))
            self.fire(KIND_REFUSED, reply.code, 0.0)
        else:
            error = Refused(reply.code, reply.message)
            _log.info(
                "%s: %s refused at %r: %s %s", self.username, name, table, reply.code, reply.message
            )
            self.fire(KIND_COMMAND, name, elapsed, len(payload), exception=error)
        return reply

    def act(
        self, track: TableTrack, seen: Seen, command: GameCommand, request_id: str = ""
    ) -> Reply | None:
        """Play ``command``, chosen from ``seen``, at ``seen``'s seq.

        The seq is the one the choice was made from, not the track's latest: when the table
        moved on meanwhile (another seat's answer closed a claim window, a timer fired), the
        server refuses the command with ``table/stale_seq`` and the present (protocol §12,
        stale commands), an expected refusal, instead of judging the old choice against the
        new state (``rules/not_your_turn`` for a claim after the window closed). A stale one
        catches up from the refusal.
        """
        started = time.perf_counter()
        if command_name(command) == "discard":
            track.discard_sent, track.discard_seq = started, seen.seq
        reply = self.request(command, track.table, seq=seen.seq, request_id=request_id)
        if reply is not None and reply.code == "table/stale_seq":
            if isinstance(reply.result, Synced):  # the refusal carries the present
                if track.accept_synced(reply.result):
                    self.fire(KIND_RESYNC, "stale", time.perf_counter() - started)
            else:
                track.need_resync("stale", started)
        return reply
