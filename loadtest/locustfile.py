"""Locust load tests of a Ramino deployment: players that speak protocol v1 over MQTT.

::

    locust -f loadtest/locustfile.py --headless -u 200 -r 20 -t 5m \\
        --host mqtt://127.0.0.1:1883 --csv out/run --html out/run.html

``--host`` names the broker. Each Locust user is one player with its own MQTT connection: it
connects (as ``PREFIX<worker>-<n>``, with ``--ramino-password`` or the password of its name in
``--ramino-accounts``; the embedded broker's guest mode takes any), says hello, finds a waiting
table of its plan in the lobby (variant, seats and options) or creates one, starts the game when
the table is full, plays whole games choosing among ``legal`` with a light policy, answers the
claim windows the same way, asks for a rematch (seat 0) and, after ``--ramino-games`` games,
leaves for another table. The user classes are the scenarios:

- ``SteadyPlayer``: steady play over mixed variants and table sizes;
- ``JoinStormPlayer``: a fresh connection for every table (run it with a high spawn rate);
- ``ReconnectPlayer``: every 20 s all of them drop their connections (no DISCONNECT, so the
  wills fire), reconnect and resync: a reconnect storm;
- ``ChatPlayer``: chats at its tables and times each line back on the chat topic;
- ``HostilePlayer``: plays, and now and then sends garbage, invalid or oversized payloads,
  replays a move, uses a wrong topic, or floods (once); the server must answer as documented.

Without class names on the command line Locust runs them all by their weights (hostile players
are a small share). Every measurement is a Locust request; see ``loadtest/README.md``.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import math
import os
import random
import secrets
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import gevent
from locust import User, constant, events, task
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

from bots.policies.base import Policy, find_policy
from loadtest.player import (
    KIND_CHAT,
    KIND_COMMAND,
    KIND_GAME,
    KIND_HOSTILE,
    KIND_LOBBY,
    Player,
    Refused,
    Seen,
    TableTrack,
)
from loadtest.recording import Recorder
from loadtest.summary import GENERATOR_CPU_LIMIT, Thresholds, summarize
from loadtest.timeline import FIELDS, Window, read_server_metrics
from protocol import topics
from protocol.codec import encode
from protocol.game import Command as GameCommand
from protocol.game import View
from protocol.messages import (
    ChatSay,
    Created,
    CreateTable,
    Hello,
    Leave,
    ListTables,
    ListVariants,
    Rematch,
    Request,
    Sit,
    Start,
    TableListing,
    Tables,
    Welcome,
)
from protocol.transport import parse_broker_url
from server.engine import Rules, make_rules

# Locust's MqttClient registers paho's version-1 callbacks, which paho flags on every client.
warnings.filterwarnings("ignore", "Callback API version 1 is deprecated", DeprecationWarning)

__all__ = [
    "PLANS",
    "ChatPlayer",
    "HostilePlayer",
    "JoinStormPlayer",
    "ReconnectPlayer",
    "SteadyPlayer",
    "TablePlan",
]


@dataclass(frozen=True, slots=True)
class TablePlan:
    """A kind of table the players open and fill: variant, seats and options."""

    variant: str
    seats: int
    options: dict[str, bool | int | float | str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``variant/seats``: the name of its rows in the stats."""
        return f"{self.variant}/{self.seats}"


PLANS: tuple[TablePlan, ...] = (
    TablePlan("basic", 2, {"deals": 1}),
    TablePlan("basic", 4, {"deals": 1}),
    TablePlan("gin", 2, {"deals": 1}),
    TablePlan("knock", 3, {"deals": 1}),
    TablePlan("rummy500", 3, {"target": 50}),  # claim windows ("Rummy!") after discards
)
"""The table mix of steady play: one-deal games (a few seconds each) so that whole games,
rematches and new tables all happen within a run."""


def _fullness(listing: TableListing) -> tuple[int, str]:
    """The order of waiting tables, fullest first: free seats, then the lowest id."""
    return listing.seats.count(""), listing.table


RACE_CODES = frozenset({"table/full", "table/seat_taken", "table/game_running", "table/unknown"})
"""Refusals of ``sit`` when another player took the seat first."""
HOSTILE_ACTS = ("garbage", "invalid", "oversized", "wrong topic", "replay", "flood")
START_CODES = frozenset({"table/not_full", "table/game_running", "table/game_over"})
"""Refusals of ``start``/``rematch`` when another seat started first, or a seat is still free."""
LEAVE_CODES = frozenset({"table/game_running"})
"""Refusal of ``leave`` when the table's game started first."""


def _arguments(parser: Any) -> None:
    parser.add_argument(
        "--ramino-password",
        default="",
        env_var="LOCUST_RAMINO_PASSWORD",
        help="password of every load player",
    )
    parser.add_argument(
        "--ramino-accounts", default="", help="file of 'NAME PASSWORD' lines (overrides)"
    )
    parser.add_argument("--ramino-prefix", default="load", help="player names PREFIX<w>-<n>")
    parser.add_argument("--ramino-policy", default="greedy", help="random or greedy")
    parser.add_argument(
        "--ramino-variants", default="", help="only these variants (comma-separated)"
    )
    parser.add_argument("--ramino-games", type=int, default=2, help="games per table")
    parser.add_argument(
        "--ramino-tables", type=int, default=0, help="tables per user, then it stops (0: no cap)"
    )
    parser.add_argument("--ramino-record", default="", help="record received messages here")
    parser.add_argument("--ramino-summary", default="", help="write the JSON summary here")
    parser.add_argument("--ramino-p99-ms", type=float, default=1000.0)
    parser.add_argument("--ramino-max-error-rate", type=float, default=0.01)
    parser.add_argument(
        "--ramino-generator-cpu-limit",
        type=float,
        default=GENERATOR_CPU_LIMIT,
        help="percent of a core above which a player process counts as saturated",
    )
    parser.add_argument(
        "--ramino-drop-every", type=float, default=20.0, help="ReconnectPlayer's storm period"
    )
    parser.add_argument(
        "--ramino-stall-seconds", type=float, default=30.0, help="longest wait for an update"
    )
    parser.add_argument(
        "--ramino-think",
        type=float,
        default=0.0,
        help="mean seconds a player waits before each move (uniform, half to 1.5 times)",
    )
    parser.add_argument(
        "--ramino-timeline", default="", help="write command p50/p99 every few seconds (CSV)"
    )
    parser.add_argument("--ramino-timeline-every", type=float, default=10.0)
    parser.add_argument(
        "--ramino-server-metrics", default="", help="the server's /metrics URL, for the timeline"
    )


@dataclass(frozen=True)
class Settings:
    """The ``--ramino-*`` options of a run."""

    password: str
    accounts: dict[str, str]
    prefix: str
    policy: str
    plans: tuple[TablePlan, ...]
    games: int
    tables: int
    record: Path | None
    stall_seconds: float
    drop_every: float
    think: float = 0.0

    @classmethod
    def of(cls, environment: Environment) -> Settings:
        """The settings of ``environment``'s parsed options (defaults without them), read
        once per set of options (a worker gets the master's at the start of a run)."""
        options = environment.parsed_options
        cached = _settings.get(id(options))
        if cached is not None:
            return cached
        settings = cls._read(options)
        _settings[id(options)] = settings
        return settings

    @classmethod
    def _read(cls, options: Any) -> Settings:
        def get(name: str, default: Any) -> Any:
            value = getattr(options, name, default) if options is not None else default
            return default if value is None else value

        accounts: dict[str, str] = {}
        if get("ramino_accounts", ""):
            for line in Path(get("ramino_accounts", "")).read_text().splitlines():
                name, _, password = line.strip().partition(" ")
                if name:
                    accounts[name] = password.strip()
        wanted = {v for v in str(get("ramino_variants", "")).split(",") if v}
        plans = tuple(plan for plan in PLANS if not wanted or plan.variant in wanted)
        if not plans:
            raise ValueError(f"no table plan plays {sorted(wanted)}")
        record = str(get("ramino_record", ""))
        return cls(
            password=str(get("ramino_password", "")),
            accounts=accounts,
            prefix=str(get("ramino_prefix", "load")),
            policy=str(get("ramino_policy", "greedy")),
            plans=plans,
            games=max(1, int(get("ramino_games", 2))),
            tables=int(get("ramino_tables", 0)),
            record=Path(record) if record else None,
            stall_seconds=float(get("ramino_stall_seconds", 30.0)),
            drop_every=float(get("ramino_drop_every", 20.0)),
            think=max(0.0, float(get("ramino_think", 0.0))),
        )


_settings: dict[int, Settings] = {}
_numbers = itertools.count(1)
_free_numbers: list[int] = []


def _take_number() -> int:
    """A player number of this process, reusing those of stopped users (so a fixed set of
    accounts serves however often users are stopped and started)."""
    if _free_numbers:
        _free_numbers.sort(reverse=True)
        return _free_numbers.pop()
    return next(_numbers)


class RaminoPlayer(User):
    """A player: connects, finds tables through the lobby, plays whole games."""

    abstract = True
    wait_time = constant(0)
    reconnect_between_tables: ClassVar[bool] = False
    drop_every: ClassVar[float] = 0.0
    """Drop the connection at the first move after each multiple of this many seconds of the
    clock: every such player drops within a move of the others, a reconnect storm (0: never)."""
    chat_chance: ClassVar[float] = 0.0
    hostile_chance: ClassVar[float] = 0.0
    start_wait: ClassVar[float] = 20.0
    """Longest wait at a table for its game to start before trying elsewhere."""

    def on_start(self) -> None:
        """Connect and say hello."""
        self.settings = Settings.of(self.environment)
        self.number = _take_number()
        runner = self.environment.runner
        worker = max(0, getattr(runner, "worker_index", 0))
        self.username = f"{self.settings.prefix}{worker}-{self.number}"
        self.rng = random.Random()
        self.policy: Policy = find_policy(self.settings.policy)
        self.rules: dict[tuple[str, str, int], Rules] = {}
        self.tables_played = 0
        self.chat_sent: dict[str, float] = {}
        self.last_chat = 0.0
        self.hostile_acts = 0
        self.flooded = False
        self.drop_period = 0
        self.player = self._connect()

    def on_stop(self) -> None:
        """Disconnect cleanly and free the player number."""
        player = getattr(self, "player", None)
        if player is not None:
            player.close()
        _free_numbers.append(self.number)

    def _connect(self) -> Player:
        if not self.host:
            raise ValueError("name the broker with --host mqtt://HOST:PORT")
        recorder = None
        if self.settings.record is not None:
            recorder = Recorder(self.settings.record, self.username)
        password = self.settings.accounts.get(self.username, self.settings.password)
        player = Player(
            self.environment, self.username, password, parse_broker_url(self.host), recorder
        )
        player.on_chat = self._chat_read
        self.connecting_since = time.perf_counter()
        player.connect()
        hello = player.request(Hello(client="ramino-loadtest"))
        if hello is not None and isinstance(hello.result, Welcome):
            player.shards = hello.result.shards
        return player

    @task
    def play_a_table(self) -> None:
        """Find or open a table, play its games, leave."""
        if self.settings.tables and self.tables_played >= self.settings.tables:
            raise StopUser()
        plan = self.rng.choice(self.settings.plans)
        joined = self._join(plan)
        if joined is not None:
            track, first, plan = joined
            try:
                self._play(track, first, plan)
            finally:
                self._leave(track.table)
            self.tables_played += 1
        if self.reconnect_between_tables:
            self.player.close()
            self.player = self._connect()

    # The lobby -------------------------------------------------------------------------------

    def _join(self, plan: TablePlan) -> tuple[TableTrack, Seen, TablePlan] | None:
        """Sit at a waiting table of ``plan`` (or open one) and wait for its game to start.

        Players that arrive together each open a table; while waiting, each moves to the
        fullest waiting table of its plan, and after a few seconds to that of any plan when it
        is fuller than its own (ties: the lowest id), so they gather instead of waiting apart.
        The table's last player starts the game. Returns the table, its first update and the
        plan it has (the one asked for, or the plan of the table moved to).
        """
        started = time.perf_counter()
        player = self.player
        table = ""
        rounds = 0
        while time.perf_counter() - started < self.start_wait:
            waiting = self._waiting_tables(plan)
            mine = next((listing for listing in waiting if listing.table == table), None)
            rounds += 1
            if mine is not None and "" in mine.seats and rounds > 2:
                # Still waiting after a few seconds: few players, each at a kind of table of
                # its own. The one at the emptier table moves to the fullest of any plan, so
                # that they gather (with many players tables fill before this).
                fullest = next((t for t in self._waiting_tables(None) if "" in t.seats), None)
                other = self._plan_of(fullest) if fullest is not None else None
                if (
                    fullest is not None
                    and other is not None
                    and other != plan
                    and _fullness(fullest) < _fullness(mine)
                    and self._leave(table)
                ):
                    plan, table = other, ""
                    waiting = self._waiting_tables(plan)
            if table:
                table = self._move_or_start(table, waiting)
            else:
                table = self._sit_or_create(plan, waiting)
            if not table:
                gevent.sleep(self.rng.uniform(0.2, 0.5))  # lost a race or was refused: retry
                continue
            track = player.table(table)
            until = time.perf_counter() + self.rng.uniform(1.0, 2.0)
            while (left := until - time.perf_counter()) > 0:
                seen = track.next(timeout=left)
                if seen is not None and seen.status == "playing":
                    self._game_started(started)
                    if self.chat_chance:
                        player.subscribe(topics.chat(table))
                    return track, seen, plan
        if table and not self._leave(table):
            track = player.table(table)
            seen = track.drain() or track.last
            if seen is not None:
                self._game_started(started)
                return track, seen, plan
        player.fire(KIND_LOBBY, "gave up waiting", time.perf_counter() - started)
        return None

    def _game_started(self, lobby_since: float) -> None:
        now = time.perf_counter()
        self.player.fire(KIND_LOBBY, "join -> game start", now - lobby_since)
        if self.reconnect_between_tables:
            self.player.fire(KIND_LOBBY, "connect -> game start", now - self.connecting_since)

    def _waiting_tables(self, plan: TablePlan | None) -> list[TableListing]:
        """The waiting tables of ``plan`` (``None``: of any plan of the run) opened by load
        players, fullest first."""
        variant = plan.variant if plan is not None else ""
        reply = self.player.request(ListTables(status="waiting", variant=variant))
        if reply is None or not isinstance(reply.result, Tables):
            return []
        found = [
            listing
            for listing in reply.result.tables
            if listing.host.startswith(self.settings.prefix)
            and (self._plan_of(listing) == plan if plan is not None else self._plan_of(listing))
        ]
        found.sort(key=_fullness)
        return found

    def _plan_of(self, listing: TableListing) -> TablePlan | None:
        """The plan of the run that ``listing``'s table was opened with, if any."""
        return next(
            (
                plan
                for plan in self.settings.plans
                if plan.variant == listing.variant
                and plan.seats == len(listing.seats)
                and plan.options == listing.options
            ),
            None,
        )

    def _sit_or_create(self, plan: TablePlan, waiting: list[TableListing]) -> str:
        """Sit at the fullest waiting table with a free seat, or open a table; its id."""
        player = self.player
        for listing in waiting[:3]:
            if "" not in listing.seats:
                continue
            player.table(listing.table)
            sat = player.request(Sit(), listing.table, expect=RACE_CODES)
            if sat is not None and sat.ok:
                if listing.seats.count("") == 1:  # we took the last seat
                    self._start(listing.table)
                return listing.table
            player.tables.pop(listing.table, None)
        created = player.request(
            CreateTable(variant=plan.variant, options=dict(plan.options), seats=plan.seats)
        )
        if created is None or not isinstance(created.result, Created):
            return ""
        return created.result.table

    def _move_or_start(self, table: str, waiting: list[TableListing]) -> str:
        """At ``table``, still waiting: start it if full, or move to a fuller table (ties: the
        lowest id); the table we are at afterwards ("" if we lost the race for a seat)."""
        mine = next((listing for listing in waiting if listing.table == table), None)
        if mine is None:
            return table  # no longer waiting: its game has started
        if "" not in mine.seats:
            self._start(table)
            return table
        better = next(
            (
                listing
                for listing in waiting
                if "" in listing.seats
                and listing.table != table
                and _fullness(listing) < _fullness(mine)
            ),
            None,
        )
        if better is None or not self._leave(table):
            return table
        self.player.table(better.table)
        sat = self.player.request(Sit(), better.table, expect=RACE_CODES)
        if sat is None or not sat.ok:
            self.player.tables.pop(better.table, None)
            return ""
        if better.seats.count("") == 1:
            self._start(better.table)
        return better.table

    def _start(self, table: str) -> None:
        """Start the game of a full table (a table whose players left after their games takes
        a rematch instead)."""
        reply = self.player.request(Start(), table, expect=START_CODES)
        if reply is not None and reply.code == "table/game_over":
            self.player.request(Rematch(), table, expect=START_CODES)

    def _leave(self, table: str) -> bool:
        """Stand up and stop following ``table``; ``False`` if its game started first (then we
        still sit there, and stay)."""
        track = self.player.tables.get(table)
        # A game started by the player who took the last seat while we decided to move is a
        # race the protocol allows: the refusal is expected, and we stay.
        self.player.request(Leave(), table, expect=LEAVE_CODES)
        # Updates come before the reply on our inbox: a game that started is known by now.
        if track is not None and track.last is not None and track.last.status == "playing":
            return False
        self.player.tables.pop(table, None)
        chat = topics.chat(table)
        if chat in self.player.extra_topics:
            self.player.extra_topics.discard(chat)
            self.player.client.unsubscribe(chat)
        return True

    # Playing ---------------------------------------------------------------------------------

    def _play(self, track: TableTrack, first: Seen, plan: TablePlan) -> None:
        """Play ``settings.games`` games at ``track``'s table (seat 0 asks for the rematches)."""
        games = 0
        in_game, game_started = True, time.perf_counter()
        seen: Seen | None = first
        while seen is not None:
            if seen.status == "playing" and not in_game:
                in_game, game_started = True, time.perf_counter()
            if seen.status == "finished" and in_game and seen.seq == track.seq:
                in_game = False
                games += 1
                if track.seat == 0:
                    self.player.fire(KIND_GAME, plan.label, time.perf_counter() - game_started)
                if games >= self.settings.games:
                    return
                if track.seat == 0:
                    self.player.request(Rematch(), track.table, expect=START_CODES)
            elif (
                seen.status == "playing"
                and seen.legal
                and seen.view is not None
                and seen.seq == track.seq
            ):
                self._move(track, seen, seen.view)
            seen = track.next(timeout=self.settings.stall_seconds)
        # No update for stall_seconds: the table (or the server) is stuck.
        error = Refused("client/stalled", f"no update at {track.table} after seq {track.seq}")
        self.player.fire(KIND_GAME, "stalled", self.settings.stall_seconds, exception=error)

    def _rules(self, seen: View) -> Rules:
        key = (seen.variant, json.dumps(seen.options, sort_keys=True), seen.players)
        rules = self.rules.get(key)
        if rules is None:
            rules = make_rules(seen.variant, seen.options, seen.players)
            self.rules[key] = rules
        return rules

    def _move(self, track: TableTrack, seen: Seen, view: View) -> None:
        if self.settings.think:
            gevent.sleep(self.settings.think * self.rng.uniform(0.5, 1.5))
            if track.seq != seen.seq:
                return  # the table moved on while we thought: its newer update is queued
        command = self.policy.choose(self._rules(view), view, seen.legal, self.rng)
        if self.drop_every:
            period = int(time.time() // (self.settings.drop_every or self.drop_every))
            if self.drop_period and period != self.drop_period:
                self.player.drop()
                self.player.wait_connected()
            self.drop_period = period
        if self.chat_chance and self.rng.random() < self.chat_chance:
            self._chat(track.table)
        request_id = secrets.token_hex(8)
        seq = seen.seq
        reply = self.player.act(track, seen, command, request_id)
        if (
            reply is not None
            and reply.ok
            and self.hostile_chance
            and self.rng.random() < self.hostile_chance
        ):
            self._hostile(track, command, seq, request_id, reply.seq)

    # Chat ------------------------------------------------------------------------------------

    def _chat(self, table: str) -> None:
        now = time.perf_counter()
        if now - self.last_chat < 1.5:
            return  # the server takes one line a second per client
        self.last_chat = now
        text = f"{self.username} says hello {secrets.token_hex(3)}"
        self.chat_sent[text] = now
        self.player.request(ChatSay(text=text), table, expect=frozenset({"limit/chat_rate"}))

    def _chat_read(self, table: str, text: str, arrival: float) -> None:
        sent = self.chat_sent.pop(text, None)
        if sent is not None:
            self.player.fire(KIND_CHAT, "chat -> line", arrival - sent)

    # Hostile ---------------------------------------------------------------------------------

    def _hostile(
        self, track: TableTrack, command: GameCommand, seq: int, request_id: str, done_seq: int
    ) -> None:
        """One hostile act (at most 20 a user): the server must answer as documented."""
        if self.hostile_acts >= 20:
            return
        self.hostile_acts += 1
        player = self.player
        lobby = player.lobby
        kind = self.rng.choice(HOSTILE_ACTS)
        if kind == "replay":
            # The same request id again: the first outcome, never a second move (§12).
            started = time.perf_counter()
            again = player.request(command, track.table, seq=seq, request_id=request_id)
            ok = again is not None and again.ok and again.seq == done_seq
            error = None if ok else Refused("hostile/replay_acted_twice")
            player.fire(KIND_HOSTILE, "replayed move", time.perf_counter() - started, 0, error)
            return
        if kind == "flood":
            if not self.flooded:
                self.flooded = True
                self._flood(lobby)
            return
        rid = secrets.token_hex(8)
        if kind == "garbage":
            payload, want, topic = b"\xc1" + secrets.token_bytes(15), "protocol/malformed", lobby
        elif kind == "invalid":
            payload = encode({"id": rid, "cmd": {"type": "no_such_command"}})
            want, topic = "protocol/invalid", lobby
        elif kind == "oversized":
            payload = encode({"id": rid, "cmd": {"type": "hello", "client": "x" * 20_000}})
            want, topic = "limit/payload", lobby
        else:
            payload = encode({"id": rid, "cmd": {"type": "list_variants"}})
            want, topic = "protocol/wrong_topic", topics.table_command(track.table, self.username)
        started = time.perf_counter()
        # A reply to a request the server could not read carries the id "" (protocol §6).
        result = player.send_raw(topic, payload, rid, aliases=("",))
        reply = result.wait(player.request_timeout)
        player.forget(rid)
        player.forget("")
        code = "client/timeout" if reply is None else reply.code
        error = None if code == want else Refused(f"hostile/{code or 'ok'}", f"wanted {want}")
        player.fire(KIND_HOSTILE, kind, time.perf_counter() - started, len(payload), error)

    def _flood(self, lobby: str) -> None:
        """150 requests at once: each is answered, or refused with ``limit/rate``, or dropped
        unread past the second bucket; nothing else."""
        player = self.player
        started = time.perf_counter()
        waits = []
        for _ in range(150):
            rid = secrets.token_hex(8)
            waits.append((rid, player.send_raw(lobby, encode_list_variants(rid), rid)))
        gevent.sleep(2.0)
        codes = {result.value.code for _, result in waits if result.ready()}
        for rid, _ in waits:
            player.forget(rid)
        unexpected = codes - {"", "limit/rate"}
        error = Refused(f"hostile/{sorted(unexpected)[0]}") if unexpected else None
        player.fire(KIND_HOSTILE, "flood", time.perf_counter() - started, 150, error)


def encode_list_variants(request_id: str) -> bytes:
    """A ``list_variants`` request with ``request_id``."""
    return encode(Request(id=request_id, cmd=ListVariants()))


class SteadyPlayer(RaminoPlayer):
    """Steady play over the mixed tables of ``PLANS``."""

    weight = 12


class JoinStormPlayer(RaminoPlayer):
    """A new connection and a new table each time: with a high spawn rate, a join storm."""

    weight = 2
    reconnect_between_tables = True


class ReconnectPlayer(RaminoPlayer):
    """Drops its connection every 20 s, all together; reconnects and resyncs."""

    weight = 2
    drop_every = 20.0


class ChatPlayer(RaminoPlayer):
    """Chats at about one move in ten (at most a line every 1.5 s)."""

    weight = 2
    chat_chance = 0.1


class HostilePlayer(RaminoPlayer):
    """Plays, and after about one move in five does something hostile (20 at most)."""

    weight = 1
    hostile_chance = 0.2


def _summary(environment: Environment, **_: Any) -> None:
    """Print the summary and its thresholds; the exit status is 1 when one is missed."""
    if isinstance(environment.runner, WorkerRunner):
        return  # the master sums up the workers' numbers
    options = environment.parsed_options
    thresholds = Thresholds(
        p99_ms=float(getattr(options, "ramino_p99_ms", 1000.0)),
        max_error_rate=float(getattr(options, "ramino_max_error_rate", 0.01)),
    )
    summary = summarize(
        environment.stats,
        thresholds,
        _generator.figures(environment),
        float(getattr(options, "ramino_generator_cpu_limit", GENERATOR_CPU_LIMIT)),
    )
    for line in summary.lines():
        print(f"ramino loadtest: {line}")
    path = str(getattr(options, "ramino_summary", "") or "")
    if path:
        Path(path).write_text(json.dumps(summary.to_json(), indent=2) + "\n")
    environment.process_exit_code = 0 if summary.passed else 1


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


class _GeneratorCpu:
    """The CPU of the load generator's processes. A player process that runs out of CPU
    queues its own messages: its latencies then measure it as much as the server."""

    def __init__(self) -> None:
        self.since: tuple[float, float] | None = None  # (wall, CPU) at the test's start
        self.until: tuple[float, float] | None = None  # at its stop
        self.peak = 0.0  # the highest of Locust's samples in this process
        self.workers: dict[str, tuple[float, float]] = {}  # on a master: each worker's

    def start(self, **_: Any) -> None:
        self.since, self.until = (time.monotonic(), _cpu_seconds()), None

    def stop(self, **_: Any) -> None:
        self.until = (time.monotonic(), _cpu_seconds())

    def sample(self, cpu_usage: float, **_: Any) -> None:
        self.peak = max(self.peak, float(cpu_usage))

    def average(self) -> float:
        """Percent of one core this process used between the test's start and stop."""
        if self.since is None:
            return 0.0
        wall, cpu = self.until or (time.monotonic(), _cpu_seconds())
        elapsed = wall - self.since[0]
        return 100.0 * (cpu - self.since[1]) / elapsed if elapsed > 0 else 0.0

    def report(self, data: dict[str, Any], **_: Any) -> None:
        """On a worker: our figures go with each report to the master."""
        data["ramino_cpu"] = [self.average(), self.peak]

    def worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        figures = data.get("ramino_cpu")
        if isinstance(figures, list) and len(figures) == 2:
            self.workers[client_id] = (float(figures[0]), float(figures[1]))

    def figures(self, environment: Environment) -> tuple[float, float]:
        """(average, peak) of the busiest player process: the workers' on a master."""
        if isinstance(environment.runner, MasterRunner):
            known = list(self.workers.values())
            return max((a for a, _ in known), default=0.0), max((p for _, p in known), default=0.0)
        return self.average(), self.peak


_generator = _GeneratorCpu()
_window: Window | None = None


def _request(request_type: str, response_time: float, **_: Any) -> None:
    if _window is not None and request_type == KIND_COMMAND:
        _window.latencies_ms.append(response_time)


def _timeline(environment: Environment, **_: Any) -> None:
    """With ``--ramino-timeline``: write a row of figures every few seconds.

    One process writes the rows: a local runner's, or the master's with its workers' command
    times, which each worker sends with its reports (every few seconds, Locust's
    ``WORKER_REPORT_INTERVAL``): a time lands in the window its report reaches.
    """
    global _window
    options = environment.parsed_options
    path = str(getattr(options, "ramino_timeline", "") or "")
    if not path or _window is not None:
        return
    _window = window = Window()
    if isinstance(environment.runner, WorkerRunner):
        return  # the master writes; this worker's times go with its reports
    every = max(1.0, float(getattr(options, "ramino_timeline_every", 10.0)))
    metrics = str(getattr(options, "ramino_server_metrics", "") or "")
    started = window.started

    def write() -> None:
        with Path(path).open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            writer.writeheader()
            while True:
                gevent.sleep(every)
                rss = cpu = sqlite = traced = math.nan
                # A server that is busy or gone leaves the cells empty.
                if metrics:
                    with contextlib.suppress(OSError):
                        rss, cpu, sqlite, traced = read_server_metrics(metrics)
                now = time.monotonic()
                runner = environment.runner
                users = runner.user_count if runner is not None else 0
                writer.writerow(window.row(now, now - started, users, rss, cpu, sqlite, traced))
                handle.flush()

    gevent.spawn(write)


def _timeline_report(data: dict[str, Any], **_: Any) -> None:
    """On a worker with ``--ramino-timeline``: the command times since the last report."""
    if _window is not None:
        data["ramino_latencies_ms"], _window.latencies_ms = _window.latencies_ms, []


def _timeline_worker_report(data: dict[str, Any], **_: Any) -> None:
    """On the master: a worker's command times join the current window."""
    latencies = data.get("ramino_latencies_ms")
    if _window is not None and isinstance(latencies, list):
        _window.latencies_ms.extend(float(value) for value in latencies)


_hooks: Any = events  # Locust's EventHook is untyped
_hooks.init_command_line_parser.add_listener(_arguments)
_hooks.quitting.add_listener(_summary)
_hooks.test_start.add_listener(_timeline)
_hooks.request.add_listener(_request)
_hooks.report_to_master.add_listener(_timeline_report)
_hooks.worker_report.add_listener(_timeline_worker_report)
_hooks.test_start.add_listener(_generator.start)
_hooks.test_stop.add_listener(_generator.stop)
_hooks.usage_monitor.add_listener(_generator.sample)
_hooks.report_to_master.add_listener(_generator.report)
_hooks.worker_report.add_listener(_generator.worker_report)
