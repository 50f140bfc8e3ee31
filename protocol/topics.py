"""Topic names of protocol v1, and who may publish or read each (the broker's ACL model).

::

    ramino/v1/lobby/{shard}/{client}      client -> server   lobby commands (shard 0 by default)
    ramino/v1/table/{table}/cmd/{client}  client -> server   commands for one table
    ramino/v1/presence/{client}           client -> server   online/offline (the will message)
    ramino/v1/inbox/{client}              server -> client   replies and private updates
    ramino/v1/table/{table}/events        server -> all      public event stream
    ramino/v1/table/{table}/state         server -> all      public snapshot (retained)
    ramino/v1/table/{table}/chat          server -> all      table chat
    ramino/v1/tables/{table}              server -> all      lobby listing (retained)
    ramino/v1/server/status               server -> all      server status (retained)

A client's identity is its MQTT username: it may publish only on the topics that end in its own
name and read only its own inbox and the public topics. The server account reads and writes
everything under ``ramino/v1/``. Nothing private is ever retained.
"""

from __future__ import annotations

import re
import zlib

__all__ = [
    "CLIENT_READ_FILTERS",
    "CLIENT_WRITE_FILTERS",
    "NAME_PATTERN",
    "PREFIX",
    "SERVER_SUBSCRIPTIONS",
    "chat",
    "client_subscriptions",
    "inbox",
    "lobby_command",
    "lobby_listing",
    "may_publish",
    "may_read",
    "parse_command_topic",
    "presence",
    "server_status",
    "shard_of",
    "table_command",
    "table_events",
    "table_state",
    "valid_name",
]

PREFIX = "ramino/v1"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""Client (MQTT username) and table ids: letters, digits, ``_ . -``; at most 64 characters."""

SERVER_SUBSCRIPTIONS = (
    f"{PREFIX}/lobby/+/+",
    f"{PREFIX}/table/+/cmd/+",
    f"{PREFIX}/presence/+",
)
"""What the server subscribes to."""


def valid_name(name: str) -> bool:
    """Whether ``name`` may be a client or table id (it is one topic level, no wildcards)."""
    return NAME_PATTERN.match(name) is not None


def shard_of(client: str, shards: int = 1) -> int:
    """The lobby shard of ``client``: crc32 of its name (UTF-8) modulo ``shards``."""
    return zlib.crc32(client.encode()) % shards


def lobby_command(client: str, shard: int = 0) -> str:
    """Where ``client`` publishes lobby commands."""
    return f"{PREFIX}/lobby/{shard}/{client}"


def table_command(table: str, client: str) -> str:
    """Where ``client`` publishes commands for ``table``."""
    return f"{PREFIX}/table/{table}/cmd/{client}"


def presence(client: str) -> str:
    """``client``'s presence topic (its will message goes here)."""
    return f"{PREFIX}/presence/{client}"


def inbox(client: str) -> str:
    """``client``'s private topic: replies and private table updates."""
    return f"{PREFIX}/inbox/{client}"


def table_events(table: str) -> str:
    """The public event stream of ``table``."""
    return f"{PREFIX}/table/{table}/events"


def table_state(table: str) -> str:
    """The retained public snapshot of ``table``."""
    return f"{PREFIX}/table/{table}/state"


def chat(table: str) -> str:
    """The chat of ``table``."""
    return f"{PREFIX}/table/{table}/chat"


def lobby_listing(table: str) -> str:
    """The retained lobby listing of ``table`` (an empty retained payload removes it)."""
    return f"{PREFIX}/tables/{table}"


def server_status() -> str:
    """The retained server status."""
    return f"{PREFIX}/server/status"


def client_subscriptions(client: str) -> tuple[str, ...]:
    """What a client subscribes to on connecting (table topics are added per table)."""
    return (inbox(client), f"{PREFIX}/tables/+", server_status())


def parse_command_topic(topic: str) -> tuple[str, str, str] | None:
    """``(kind, client, table)`` of a topic the server reads; ``None`` if it is not one.

    ``kind`` is ``lobby``, ``table`` or ``presence``; ``table`` is ``""`` unless ``kind`` is
    ``table``.
    """
    levels = topic.split("/")
    if len(levels) < 4 or levels[0] != "ramino" or levels[1] != "v1":
        return None
    match levels[2:]:
        case ["lobby", shard, client] if shard.isdigit() and valid_name(client):
            return "lobby", client, ""
        case ["table", table, "cmd", client] if valid_name(table) and valid_name(client):
            return "table", client, table
        case ["presence", client] if valid_name(client):
            return "presence", client, ""
    return None


_PUBLIC_READ = (
    re.compile(rf"^{PREFIX}/table/[^/]+/(events|state|chat)$"),
    re.compile(rf"^{PREFIX}/tables/[^/]+$"),
    re.compile(rf"^{PREFIX}/server/status$"),
)


CLIENT_WRITE_FILTERS = (
    f"{PREFIX}/lobby/+/{{user}}",
    f"{PREFIX}/table/+/cmd/{{user}}",
    f"{PREFIX}/presence/{{user}}",
)
"""The ACL of a client ``{user}`` as topic filters: where it may publish (what
:func:`may_publish` allows, and ``deploy/mosquitto/acl``'s ``pattern write`` lines). Brokers
that take filters (the NATS config of ``server.net.nats``) are generated from these."""

CLIENT_READ_FILTERS = (
    f"{PREFIX}/inbox/{{user}}",
    f"{PREFIX}/table/+/events",
    f"{PREFIX}/table/+/state",
    f"{PREFIX}/table/+/chat",
    f"{PREFIX}/tables/+",
    f"{PREFIX}/server/status",
)
"""What a client ``{user}`` may read, as topic filters (:func:`may_read`, the ACL's
``pattern read`` lines). The server account reads and writes ``ramino/v1/#``."""


def may_publish(user: str, topic: str, server_user: str) -> bool:
    """Whether ``user`` may publish on ``topic`` (the embedded broker's ACL; Mosquitto's
    ``deploy/mosquitto/acl`` says the same with ``%u`` patterns)."""
    if user == server_user:
        return topic.startswith(f"{PREFIX}/")
    parsed = parse_command_topic(topic)
    return parsed is not None and parsed[1] == user


def may_read(user: str, topic: str, server_user: str) -> bool:
    """Whether ``user`` may receive a message published on the concrete topic ``topic``."""
    if user == server_user:
        return topic.startswith(f"{PREFIX}/")
    if topic == inbox(user):
        return True
    return any(pattern.match(topic) for pattern in _PUBLIC_READ)
