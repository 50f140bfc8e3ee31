"""Connection and subscription limits of the embedded broker.

A hostile client must not exhaust the process's file descriptors (the embedded broker *is* the
game server), hold thousands of connections under one name, or slow every delivery with
thousands of subscriptions. :class:`BrokerLimits` holds the settings; :class:`LimitsBook` keeps
the counts that :mod:`server.net.embedded` consults:

- **connect timeout**: a socket that has not sent a complete CONNECT within
  ``connect_timeout`` seconds is closed (amqtt itself waits forever);
- **max connections**: sockets beyond ``max_connections`` open at once (whatever state they
  are in) are closed as soon as they are accepted, before a byte is read. The cap is lowered to
  fit the process's file limit (:func:`connection_cap`), and :func:`raise_file_limit` lifts the
  soft file limit to the hard one at start;
- **per user**: a CONNECT of a user who already holds ``max_connections_per_user`` connections
  is refused with CONNACK 5 (not authorised); the user's other connections are not touched. A
  CONNECT that takes over one of the user's own connections (same client id) does not count.
  The server account is exempt;
- **subscriptions**: a client holds at most ``max_subscriptions`` topic filters; a SUBSCRIBE
  beyond that gets SUBACK 0x80 for each extra filter (the filters it already holds stay). The
  server account is exempt.

amqtt logs one or two lines for every socket that fails before or at CONNECT, so an attacker
could fill the logs at will: :class:`FailureLogFilter` lets one such line through per kind and
interval, with the count of those it held back.
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FILE_RESERVE",
    "BrokerLimits",
    "Connection",
    "FailureLogFilter",
    "LimitsBook",
    "connection_cap",
    "raise_file_limit",
]

_log = logging.getLogger(__name__)

FILE_RESERVE = 64
"""File descriptors kept out of the connection cap for everything else in the process (the
store, the listening socket, logs, the server's own broker connection, asyncio's self-pipe)."""


@dataclass(frozen=True, slots=True)
class BrokerLimits:
    """Limits of the embedded broker (see the module docstring); 0 turns a limit off."""

    connect_timeout: float = 10.0
    """Seconds a new socket has to send its CONNECT."""
    max_connections: int = 1000
    """Sockets open at once, all users together (lowered to fit the file limit)."""
    max_connections_per_user: int = 8
    """Connections of one username at once (the server account is exempt)."""
    max_subscriptions: int = 64
    """Topic filters one client may hold (the server account is exempt)."""

    def __post_init__(self) -> None:
        if self.connect_timeout < 0:
            raise ValueError(f"connect_timeout must be >= 0, not {self.connect_timeout}")
        for name in ("max_connections", "max_connections_per_user", "max_subscriptions"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")


def raise_file_limit() -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit; return the soft limit now
    in force (logged). Where the limit cannot be changed, the current one is returned."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError) as exc:
            _log.warning("cannot raise the file limit from %d to %d: %s", soft, target, exc)
    _log.info("file limit (RLIMIT_NOFILE): %d open files", soft)
    return soft


def connection_cap(limits: BrokerLimits, file_limit: int | None = None) -> int:
    """The number of sockets the broker keeps open at most: ``limits.max_connections``, lowered
    to leave :data:`FILE_RESERVE` descriptors of ``file_limit`` (default: the current soft
    ``RLIMIT_NOFILE``) to the rest of the process. 0: no cap (``max_connections`` 0)."""
    if limits.max_connections == 0:
        return 0
    if file_limit is None:
        file_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if file_limit == resource.RLIM_INFINITY or file_limit <= 0:
        return limits.max_connections
    room = max(1, file_limit - FILE_RESERVE)
    if room < limits.max_connections:
        _log.warning(
            "max_connections %d does not fit the file limit %d: the embedded broker keeps at"
            " most %d connections (raise LimitNOFILE / ulimit -n)",
            limits.max_connections,
            file_limit,
            room,
        )
        return room
    return limits.max_connections


@dataclass(eq=False, slots=True)
class Connection:
    """One accepted socket, as the limits see it."""

    user: str | None = None
    """The username once its CONNECT is accepted (counted against the per-user limit)."""
    client_id: str | None = None
    writer: Any = field(default=None, repr=False)
    """Its stream (closed when a newer connection takes its client id over)."""


@dataclass(slots=True)
class LimitsBook:
    """The counts behind the limits: open sockets, connections per user, filters per client."""

    limits: BrokerLimits
    server_user: str
    cap: int = 0
    """Sockets open at once at most (:func:`connection_cap`); 0: none."""
    sockets: int = 0
    users: dict[str, set[Connection]] = field(default_factory=dict)
    filters: dict[str, set[str]] = field(default_factory=dict)
    """client id -> the topic filters its session holds."""
    refused_sockets: int = 0
    refused_connects: int = 0
    refused_filters: int = 0
    _full: bool = False
    _warned: set[str] = field(default_factory=set)

    def open_socket(self) -> Connection | None:
        """Count a newly accepted socket; ``None`` if the broker is full (close it)."""
        if self.cap and self.sockets >= self.cap:
            self.refused_sockets += 1
            if not self._full:
                self._full = True
                _log.warning(
                    "embedded broker full: %d connections open, new ones are closed at once",
                    self.sockets,
                )
            return None
        self.sockets += 1
        return Connection()

    def close_socket(self, connection: Connection) -> None:
        """Forget a socket counted by :meth:`open_socket` and its user's connection."""
        self.sockets -= 1
        if self._full and self.sockets < self.cap * 9 // 10:
            self._full = False
            _log.info("embedded broker accepts connections again (%d open)", self.sockets)
        if connection.user is not None:
            held = self.users.get(connection.user)
            if held is not None:
                held.discard(connection)
                if not held:
                    del self.users[connection.user]
                    self._warned.discard(connection.user)
            connection.user = None

    def admit(
        self, connection: Connection | None, user: str, client_id: str, clean: bool = True
    ) -> bool:
        """Whether ``user`` may hold one more connection (this one, whose CONNECT was
        otherwise accepted); if so it is counted until :meth:`close_socket`. A clean session
        taking over one of the user's connections (same client id) is always admitted: the
        broker closes the old one (:meth:`taken_over`)."""
        if connection is None or user == self.server_user:
            return True
        held = self.users.setdefault(user, set())
        takeover = clean and any(other.client_id == client_id for other in held)
        limit = self.limits.max_connections_per_user
        if limit and not takeover and len(held) >= limit:
            if not held:
                del self.users[user]
            self.refused_connects += 1
            if user not in self._warned:
                self._warned.add(user)  # once until the user's connections are all gone
                _log.warning(
                    "CONNECT of %r refused: it already holds %d connections", user, len(held)
                )
            return False
        connection.user, connection.client_id = user, client_id
        held.add(connection)
        return True

    def taken_over(self, connection: Connection) -> list[Connection]:
        """The other connections of ``connection``'s user with its client id: the CONNECT of
        ``connection`` takes them over, so they are to be closed (MQTT-3.1.4-2)."""
        held = self.users.get(connection.user or "", ())
        return [
            other
            for other in held
            if other is not connection and other.client_id == connection.client_id
        ]

    def may_subscribe(self, user: str | None, client_id: str, topic_filter: str) -> bool:
        """Whether the session ``client_id`` may hold ``topic_filter`` (one it holds already is
        always granted again)."""
        limit = self.limits.max_subscriptions
        if not limit or user == self.server_user:
            return True
        held = self.filters.get(client_id, ())
        if topic_filter in held or len(held) < limit:
            return True
        self.refused_filters += 1
        return False

    def subscribed(self, client_id: str, topic_filter: str) -> None:
        """The session ``client_id`` now holds ``topic_filter``."""
        self.filters.setdefault(client_id, set()).add(topic_filter)

    def unsubscribed(self, client_id: str, topic_filter: str) -> None:
        """The session ``client_id`` no longer holds ``topic_filter``."""
        held = self.filters.get(client_id)
        if held is not None:
            held.discard(topic_filter)
            if not held:
                del self.filters[client_id]


_FAILURES = (
    "Failed to initialize client session",
    "Error while handling client session",
    "No data from",
    "Invalid connection from",
    "[MQTT-3.1.0-1]",
)
"""How amqtt's per-connection failure lines begin (amqtt.broker, 0.12)."""


class FailureLogFilter(logging.Filter):
    """A filter for the ``amqtt.broker`` logger: at most one line of each per-connection
    failure kind (:data:`_FAILURES`) every ``interval`` seconds; the next one let through
    tells how many were held back. Other lines pass."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval = interval
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        kind = next((prefix for prefix in _FAILURES if message.startswith(prefix)), None)
        if kind is None:
            return True
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        if held:
            record.msg = f"{record.getMessage()} ({held} more like it not logged)"
            record.args = ()
        return True
