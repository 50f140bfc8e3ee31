"""The table actor: one asyncio task per table that runs its commands one at a time.

Theory of operation. ``submit`` queues a command with the sender's identity (from the
transport, never from the payload), its client-chosen id and the last ``seq`` the client saw;
the actor's task takes commands in order and for each:

1. a known command id returns the original result rebuilt from the log (nothing is redone),
   or its original refusal: a seated player's refusals are stored with the log, an outsider's
   (a client with no seat here) are only kept in memory, the last ``OUTSIDER_REFUSALS`` of them;
2. a stale ``seq`` is refused with ``table/stale_seq`` and the current ``seq``;
3. the table or the engine decides the records (a refusal is a coded error; the log and the
   state are untouched);
4. the records, with any chance they make due (the deck commitment and the deal) and the
   reveal of a finished hand's deck, are appended to the store under the command id;
5. only then are they folded into the state and handed to the outbox, which sends each
   recipient his own projection: persist first, publish after.

A table is loaded from its latest snapshot plus the events after it; snapshots are written
every ``snapshot_every`` events and are only a cache.

Lifetimes. A table still waiting for players that sees no command (and no ``touch``: a join or
a resync) for ``waiting_ttl`` seconds is closed: the actor appends ``table_closed`` with the
reason ``EXPIRED``. A finished or closed table that sees no activity for ``finished_ttl``
seconds tells ``on_idle`` (the service then unloads it; it is loaded back on demand). Both
count from the later of the table's last event and its last activity, on the injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from server.engine import Command, HandEnded, decide, forfeit
from server.engine.errors import CodedError
from server.engine.game import Phase, awaiting
from server.engine.position import from_position, to_position
from server.tables.errors import LeaseLost, StaleSeq, TableError
from server.tables.records import (
    RECORD_VERSION,
    GameStarted,
    PlayerReady,
    Record,
    RecordEvent,
    SeatBack,
    TableClosed,
    TableCreated,
    TimedOut,
    decode_record,
    encode_record,
)
from server.tables.store import EventStore, NewEvent, TableSummary, Tail
from server.tables.table import (
    CreateTable,
    Ready,
    Rematch,
    Sit,
    Stand,
    StartGame,
    TableCommand,
    TableState,
    between_hands,
    chance_records,
    decide_table,
    empty_table,
    fold,
    reveal_records,
)
from server.tables.timers import NO_TIMER_METRICS, Clock, SystemClock, auto_command, deadline

__all__ = [
    "EXPIRED",
    "OUTSIDER_REFUSALS",
    "Outbox",
    "Reply",
    "TableActor",
    "build_table",
    "load_table",
    "load_tables",
    "read_tails",
]

OUTSIDER_REFUSALS = 256
"""Refusals of clients with no seat a table keeps (in memory, the latest) for their retries."""

EXPIRED = "expired: no activity while waiting for players"
"""The reason of the ``table_closed`` appended to a waiting table that expired."""


class Outbox(Protocol):
    """Receives each appended record after it is durable, with the table before and after."""

    async def publish(
        self, before: TableState, seq: int, record: Record, after: TableState
    ) -> None:
        """Deliver the record's projections to its recipients."""
        ...

    async def flush(self, table: TableState) -> None:
        """Every record of one append has been given to ``publish``; ``table`` is the result."""
        ...


class Reply(msgspec.Struct, frozen=True):
    """The one reply to a command: ok with the table ``seq`` after it, or a coded error."""

    ok: bool
    command_id: str
    seq: int
    first_seq: int = 0
    """First seq the command produced (0: none)."""
    code: str = ""
    message: str = ""
    duplicate: bool = False


_REPLY_DECODER = msgspec.msgpack.Decoder(Reply)


@dataclass
class _Timeout:
    """The table's timer ran out while the table was at ``seq``; ``done`` is set once handled."""

    seq: int
    done: asyncio.Future[None]


@dataclass
class _Close:
    """Close the table (``close``); ``done`` is set once the record is appended."""

    reason: str
    command_id: str
    done: asyncio.Future[None]


Answer = Callable[[Reply | LeaseLost], None]
"""Called by the actor with a posted command's reply (``TableActor.post``), or with the
``LeaseLost`` that means another worker serves the table now and answers the retry."""


@dataclass
class _Job:
    sender: str
    command_id: str
    last_seq: int | None
    command: Command | TableCommand
    answer: Answer


_log = logging.getLogger(__name__)
_SNAPSHOT = msgspec.msgpack.Encoder()
_REPLY_ENCODER = msgspec.msgpack.Encoder()
_TABLE_COMMANDS = (CreateTable, Sit, Stand, StartGame, Ready, Rematch)


class _SnapshotBody(msgspec.Struct):
    seats: tuple[str, ...]
    game_number: int
    game: str
    salt: str
    deck: tuple[int, ...]
    closed: bool
    created: bytes
    timeouts: tuple[int, ...] = ()
    ready: tuple[bool, ...] = ()


async def load_table(store: EventStore, table_id: str) -> TableState:
    """A table rebuilt from its latest snapshot and the events after it."""
    table = empty_table(table_id)
    snapshot = await store.latest_snapshot(table_id)
    if snapshot is not None:
        table = _from_snapshot(table_id, snapshot.seq, snapshot.payload)
    for row in await store.read(table_id, after_seq=table.seq):
        table = fold(table, decode_record(row.payload), row.seq)
    return table


async def read_tails(store: EventStore, table_ids: Sequence[str]) -> dict[str, Tail]:
    """What ``build_table`` needs for each of ``table_ids``: in one query when the store reads
    many tables at once (PostgreSQL's ``read_tails``), else two reads a table. Tables with no
    events are left out."""
    many = getattr(store, "read_tails", None)
    if many is not None:
        tails: dict[str, Tail] = await many(table_ids)
        return tails
    found: dict[str, Tail] = {}
    for table_id in table_ids:
        snapshot = await store.latest_snapshot(table_id)
        # From the snapshot's own event on: its time is the last event's when nothing follows.
        rows = await store.read(table_id, after_seq=snapshot.seq - 1 if snapshot else 0)
        if rows:
            found[table_id] = Tail(
                snapshot,
                [row.seq for row in rows],
                [row.at for row in rows],
                [row.payload for row in rows],
            )
    return found


def build_table(table_id: str, tail: Tail) -> tuple[TableState, float | None]:
    """The table ``load_table`` rebuilds, from what ``read_tails`` read, and the time of its
    last event."""
    snapshot = tail.snapshot
    table = (
        _from_snapshot(table_id, snapshot.seq, snapshot.payload)
        if snapshot is not None
        else empty_table(table_id)
    )
    seq = table.seq
    for row_seq, payload in zip(tail.seqs, tail.payloads):
        if row_seq > seq:
            table = fold(table, decode_record(payload), row_seq)
    return table, (tail.ats[-1] if tail.ats else None)


async def load_tables(
    store: EventStore, table_ids: Sequence[str]
) -> dict[str, tuple[TableState, float | None]]:
    """Many tables as ``load_table`` rebuilds them, each with the time of its last event (see
    ``read_tails``). Tables with no events are left out."""
    loaded: dict[str, tuple[TableState, float | None]] = {}
    for table_id, tail in (await read_tails(store, table_ids)).items():
        table, last_at = build_table(table_id, tail)
        if table.seq:
            loaded[table_id] = (table, last_at)
    return loaded


def _to_snapshot(table: TableState) -> bytes:
    assert table.created is not None
    body = _SnapshotBody(
        seats=table.seats,
        game_number=table.game_number,
        game=to_position(table.game) if table.game is not None else "",
        salt=table.salt,
        deck=table.deck,
        closed=table.closed,
        created=encode_record(table.created),
        timeouts=table.timeouts,
        ready=table.ready,
    )
    return _SNAPSHOT.encode(body)


def _from_snapshot(table_id: str, seq: int, payload: bytes) -> TableState:
    body = msgspec.msgpack.decode(payload, type=_SnapshotBody)
    created = decode_record(body.created).event
    assert isinstance(created, TableCreated)
    return TableState(
        table_id=table_id,
        seq=seq,
        created=created,
        seats=body.seats,
        game_number=body.game_number,
        game=from_position(body.game) if body.game else None,
        salt=body.salt,
        deck=body.deck,
        timeouts=body.timeouts,
        ready=body.ready,
        closed=body.closed,
    )


class TableActor:
    """Runs one table's commands one at a time; see the module docstring."""

    def __init__(
        self,
        table: TableState,
        store: EventStore,
        outbox: Outbox,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        snapshot_every: int = 200,
        new_salt: Callable[[], str] | None = None,
        claim_seconds: float = 10.0,
        last_at: float | None = None,
        grace_seconds: float = 30.0,
        waiting_ttl: float = 0.0,
        finished_ttl: float = 0.0,
        on_idle: Callable[[TableActor], None] | None = None,
        active_at: float | None = None,
    ) -> None:
        self.table = table
        self.store = store
        self.outbox = outbox
        self.clock = clock or SystemClock()
        self.rng: random.Random = rng if rng is not None else secrets.SystemRandom()
        """Chance (deals, reshuffled stocks): the OS CSPRNG unless a seeded generator is given."""
        self.snapshot_every = snapshot_every
        self.new_salt = new_salt or (lambda: secrets.token_hex(16))
        self.claim_seconds = claim_seconds
        self.last_at = self.clock.now() if last_at is None else last_at
        self._born_here = table.seq == 0
        """The table's whole log was written by this actor: every id it holds is in ``_ids``."""
        self._ids: set[str] = set()
        """Time of the table's last event: the timers count from it."""
        self._outsiders: OrderedDict[str, Reply] = OrderedDict()
        """The latest refusals of clients without a seat, by command id (never stored: anyone
        may send them, as many as his rate allows)."""
        self._jobs: asyncio.Queue[_Job | _Timeout | _Close | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._seq_waiters: list[tuple[int, asyncio.Future[None]]] = []
        """``wait_for_seq`` callers: the seq each waits for (a move with none costs nothing)."""
        self.grace_seconds = grace_seconds
        """How long a disconnected player's seat waits before the server plays for it."""
        self._absent_since: dict[str, float] = {}
        self._presence_changes = 0
        # ``due()``'s answer and what it was worked out from (it is asked two or three times a
        # move: by the timer's re-arming, for the updates' deadline, by the metrics).
        self._due_table: TableState | None = None
        self._due_key: tuple[float, int, float, float] = (0.0, 0, 0.0, 0.0)
        self._due_value: float | None = None
        self._poke = asyncio.Event()
        self._armed: float | None = None
        """The deadline the timer waits for (``None``: none). A move that leaves it as it is
        or puts it later does not wake the timer: when it wakes, the timer works the deadline
        out again and sleeps on if the table moved meanwhile."""
        self.metrics = NO_TIMER_METRICS
        self.waiting_ttl = waiting_ttl
        """Seconds a waiting table lives without activity before it is closed (0: forever)."""
        self.finished_ttl = finished_ttl
        """Seconds a finished or closed table stays idle before ``on_idle`` (0: never)."""
        self.on_idle = on_idle
        self._active_at = self.clock.now() if active_at is None else active_at
        """Time of the last command, join or resync (the timers count from the later of this
        and ``last_at``)."""
        self._idle_told = False
        self._stopping = False

    @classmethod
    async def load(
        cls,
        store: EventStore,
        table_id: str,
        outbox: Outbox,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        snapshot_every: int = 200,
        claim_seconds: float = 10.0,
        grace_seconds: float = 30.0,
        waiting_ttl: float = 0.0,
        finished_ttl: float = 0.0,
        on_idle: Callable[[TableActor], None] | None = None,
    ) -> TableActor:
        """An actor for ``table_id`` as its log says (recovery after a restart).

        Its timers count from the time of the last event in the log, so a deadline that passed
        while the server was down fires at once (a waiting table's expiry too).
        """
        table = await load_table(store, table_id)
        rows = await store.read(table_id, after_seq=max(0, table.seq - 1))
        last_at = rows[-1].at if rows else None
        return cls(
            table,
            store,
            outbox,
            clock,
            rng,
            snapshot_every=snapshot_every,
            claim_seconds=claim_seconds,
            last_at=last_at,
            grace_seconds=grace_seconds,
            waiting_ttl=waiting_ttl,
            finished_ttl=finished_ttl,
            on_idle=on_idle,
            active_at=last_at,
        )

    def start(self) -> None:
        """Start the actor's task."""
        self._task = asyncio.create_task(self._run(), name=f"table-{self.table.table_id}")
        self._timer = asyncio.create_task(
            self._run_timer(), name=f"table-{self.table.table_id}-timer"
        )

    async def stop(self) -> None:
        """Finish the queued commands and stop."""
        if self._task is None:
            return
        self._stopping = True
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None
        await self._jobs.put(None)
        await self._task
        self._task = None

    async def wait_for_seq(self, seq: int) -> None:
        """Return once the table has reached ``seq`` (tests and tools; wrap in a timeout)."""
        if self.table.seq >= seq:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (seq, future)
        self._seq_waiters.append(waiter)
        try:
            await future
        finally:
            if waiter in self._seq_waiters:
                self._seq_waiters.remove(waiter)

    def _reached(self, seq: int) -> None:
        """The table is at ``seq``: wake the ``wait_for_seq`` callers waiting for it."""
        waiting = []
        for waiter in self._seq_waiters:
            if waiter[0] <= seq:
                if not waiter[1].done():
                    waiter[1].set_result(None)
            else:
                waiting.append(waiter)
        self._seq_waiters = waiting

    def set_absent(self, player: str, absent: bool) -> None:
        """Presence: ``player`` went away (his grace period starts now) or is back.

        Once the grace period is over, the server plays the player's turns as they come, as if
        his move timer had run out each time (so they count towards forfeiting the seat).
        """
        if absent:
            self._absent_since.setdefault(player, self.clock.now())
        elif self._absent_since.pop(player, None) is None:
            return
        self._presence_changes += 1
        self._poke.set()

    def touch(self) -> None:
        """Activity at the table that leaves no event (a join, a resync): a waiting table's
        expiry and a finished table's unloading count from now."""
        self._active_at = self.clock.now()
        told, self._idle_told = self._idle_told, False
        if told or (self._armed is None and self.table.status != "playing"):
            # Activity moves only the idle deadline (none while a game is played), and only
            # later: the timer finds it when it wakes. Where it waits for none, it is told.
            self._poke.set()

    @property
    def quiet(self) -> bool:
        """No command is queued (the table may be unloaded)."""
        return self._jobs.empty() and not self._stopping

    def idle_deadline(self) -> float | None:
        """When the table expires (waiting) or may leave memory (finished or closed), counted
        from its last activity; ``None`` when neither applies."""
        if self.table.created is None:
            return None
        active = max(self.last_at, self._active_at)
        status = self.table.status
        if status == "waiting":
            return active + self.waiting_ttl if self.waiting_ttl > 0 else None
        if status in ("finished", "closed") and self.on_idle is not None and not self._idle_told:
            return active + self.finished_ttl if self.finished_ttl > 0 else None
        return None

    def _deadline(self) -> float | None:
        """What the timer waits for: the next move's deadline, else the idle deadline."""
        due = self.due()
        return due if due is not None else self.idle_deadline()

    def absent(self, player: str) -> bool:
        """Whether ``player`` is marked as gone."""
        return player in self._absent_since

    def due(self) -> float | None:
        """When the server next plays for an awaited seat (``None``: no timer runs)."""
        key = (self.last_at, self._presence_changes, self.claim_seconds, self.grace_seconds)
        if self._due_table is self.table and self._due_key == key:
            return self._due_value
        self._due_table, self._due_key = self.table, key
        self._due_value = self._work_out_due()
        return self._due_value

    def _work_out_due(self) -> float | None:
        created = self.table.created
        if self.table.closed:
            return None
        move_seconds = created.move_seconds if created is not None else 0.0
        game = self.table.game
        if created is not None and between_hands(self.table):
            return self.last_at + created.hand_pause_seconds
        due = deadline(game, self.last_at, move_seconds, self.claim_seconds)
        if game is None or game.phase is Phase.CLAIM or not awaiting(game):
            return due
        for seat in awaiting(game):
            if game.forfeited[seat]:
                return self.last_at  # the server plays for a forfeited seat at once
            since = self._absent_since.get(self.table.seats[seat])
            if since is not None:
                gone = max(since + self.grace_seconds, self.last_at)
                due = gone if due is None else min(due, gone)
        return due

    async def _run_timer(self) -> None:
        """Wait for the current deadline; when it passes unchanged, queue a timeout.

        The deadline is worked out again when it passes, and at once when presence changes or
        the table moves to an earlier deadline than the one waited for (``_rearm``): a move
        mostly puts it later, and the timer then sleeps on from its old one.
        """
        while True:
            self._poke.clear()
            seq = self.table.seq
            due = self._armed = self._deadline()
            if due is None:
                await self._poke.wait()  # no timer runs: wait for the next change
                continue
            sleeper = asyncio.ensure_future(self.clock.sleep_until(due))
            poked = asyncio.ensure_future(self._poke.wait())
            try:
                await asyncio.wait({sleeper, poked}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                poked.cancel()
            if sleeper.done() and not sleeper.cancelled():
                if self.table.seq != seq:
                    continue  # the table moved meanwhile: its deadline is worked out again
                ran = asyncio.get_running_loop().create_future()
                await self._jobs.put(_Timeout(seq, ran))
                await ran  # the table moved, or nothing was due after all

    def _rearm(self) -> None:
        """Wake the timer when the deadline is now earlier than the one it waits for (or there
        is one where it waits for none); a later one it finds when its sleep ends."""
        due = self._deadline()
        armed = self._armed
        if due is not None and (armed is None or due < armed):
            self._poke.set()

    async def submit(
        self,
        sender: str,
        command: Command | TableCommand,
        command_id: str = "",
        last_seq: int | None = None,
    ) -> Reply:
        """Queue ``command`` from ``sender`` and wait for its reply."""
        if self._stopping:
            raise RuntimeError(f"the actor of table {self.table.table_id!r} is stopping")
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.post(sender, command, command_id, last_seq, functools.partial(_resolve, future))
        return await future

    def post(
        self,
        sender: str,
        command: Command | TableCommand,
        command_id: str,
        last_seq: int | None,
        answer: Answer,
    ) -> None:
        """Queue ``command`` like ``submit`` without waiting for it: the actor's task calls
        ``answer`` with the reply once the command is decided and, if it moved the table,
        persisted and published (the caller's own task and future are saved: the gateway's
        path for game commands)."""
        if self._stopping:
            raise RuntimeError(f"the actor of table {self.table.table_id!r} is stopping")
        self._jobs.put_nowait(_Job(sender, command_id, last_seq, command, answer))

    @property
    def stopping(self) -> bool:
        """Whether ``stop`` was called: no more commands are taken."""
        return self._stopping

    async def close(self, reason: str, command_id: str) -> None:
        """Close the table whatever it is doing (a service's decision, e.g. a ladder whose
        one-hand game is over): ``table_closed`` with ``reason`` is appended, after which no
        timer runs and only ``join``, ``resync`` and ``chat`` are answered. Closing a closed
        table does nothing."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self._jobs.put(_Close(reason, command_id, done))
        await done

    async def _run(self) -> None:
        while True:
            job = await self._jobs.get()
            if job is None:
                return
            if isinstance(job, _Close):
                try:
                    if not self.table.closed and self.table.created is not None:
                        await self._append([TableClosed(reason=job.reason)], job.command_id)
                    if not job.done.done():
                        job.done.set_result(None)
                except Exception as error:  # a failed store: tell the caller
                    if not job.done.done():
                        job.done.set_exception(error)
                continue
            if isinstance(job, _Timeout):
                try:
                    if not await self._idle(job.seq):
                        await self._play_for_absent(job.seq)
                except LeaseLost:
                    pass  # another worker serves the table now (it runs the timers)
                except Exception:  # our bug or a failed store: log it, keep the table as it was
                    _log.exception("automatic move failed", extra={"table": self.table.table_id})
                finally:
                    if not job.done.done():
                        job.done.set_result(None)
                continue
            try:
                reply = await self._handle(job)
            except LeaseLost as error:  # another worker serves the table now: no answer here
                _settle(job, error)
                continue
            except Exception as error:  # our bug: answer it and keep the table as it was
                _log.exception(
                    "command failed",
                    extra={"table": self.table.table_id, "command_id": job.command_id},
                )
                reply = Reply(
                    ok=False,
                    command_id=job.command_id,
                    seq=self.table.seq,
                    code="server/internal",
                    message=f"internal error: {type(error).__name__}",
                )
            _settle(job, reply)

    async def _handle(self, job: _Job) -> Reply:
        table = self.table
        kept = self._outsiders.get(job.command_id) if job.command_id else None
        if kept is not None:
            return msgspec.structs.replace(kept, duplicate=True)
        self.touch()
        if job.command_id and (not self._born_here or job.command_id in self._ids):
            seqs = await self.store.command_seqs(table.table_id, job.command_id)
            if seqs is not None:
                return Reply(True, job.command_id, seqs[1], seqs[0], duplicate=True)
            refused = await self.store.refusal(table.table_id, job.command_id)
            if refused is not None:
                original = _REPLY_DECODER.decode(refused)
                return msgspec.structs.replace(original, duplicate=True)
        try:
            if job.last_seq is not None and job.last_seq != table.seq:
                raise StaleSeq(
                    f"you saw seq {job.last_seq}, the table is at {table.seq}: resync",
                )
            events = self._decide(table, job.sender, job.command)
        except CodedError as error:
            refusal = Reply(
                False, job.command_id, table.seq, code=error.code, message=error.message
            )
            if job.command_id and table.created is not None:
                # Remembered so that a retry is refused the same way, even once it would pass.
                if job.sender in table.seats:
                    await self.store.save_refusal(
                        table.table_id, job.command_id, _REPLY_ENCODER.encode(refusal)
                    )
                    self._ids.add(job.command_id)
                else:
                    self._outsiders[job.command_id] = refusal
                    if len(self._outsiders) > OUTSIDER_REFUSALS:
                        self._outsiders.popitem(last=False)
            return refusal
        first = table.seq + 1
        await self._append(events, job.command_id)
        return Reply(True, job.command_id, self.table.seq, first)

    async def _idle(self, seq: int) -> bool:
        """Time is up at ``seq`` for a table no game timer runs at: close a waiting table that
        expired, or tell ``on_idle`` that a finished one may leave memory. ``False``: this
        timeout is a game timer's."""
        if self.due() is not None:
            return False
        idle = self.idle_deadline()
        if self.table.seq != seq or idle is None or idle > self.clock.now():
            return True  # something happened meanwhile; the timer starts again
        if self.table.status == "waiting":
            await self._append([TableClosed(reason=EXPIRED)], f"timeout:{seq}:expired")
        elif self.on_idle is not None:
            self._idle_told = True
            self.on_idle(self)
        return True

    async def _play_for_absent(self, seq: int) -> None:
        """Time is up at ``seq``: play the awaited seat's turn, or pass open claims."""
        game = self.table.game
        due = self.due()
        if self.table.seq == seq and between_hands(self.table):
            if due is not None and due <= self.clock.now():
                waiting = self.table.ready or (False,) * len(self.table.seats)
                assert game is not None
                late: list[RecordEvent] = [
                    PlayerReady(seat)
                    for seat, playing in enumerate(game.active)
                    if playing and not waiting[seat]
                ]
                await self._append(late, f"timeout:{seq}:ready")
                self.metrics.timer_fired("ready")
            return
        if (
            self.table.seq != seq
            or game is None
            or not awaiting(game)
            or due is None
            or due > self.clock.now()
        ):
            return  # someone moved or came back meanwhile; the timer starts again
        player = awaiting(game)[0]
        claim = game.phase is Phase.CLAIM
        self.metrics.timer_fired("claim" if claim else "turn")
        created = self.table.created
        if not claim and not game.forfeited[player]:
            # A missed turn counts towards forfeiting the seat (claim windows do not count).
            missed: list[RecordEvent] = [TimedOut(player)]
            limit = created.max_timeouts if created is not None else 0
            if limit and self.table.timeouts[player] + 1 >= limit:
                missed.append(forfeit(game, player))
            await self._append(missed, f"timeout:{seq}:missed")
        for step in range(64):
            game = self.table.game
            if game is None or not awaiting(game):
                return
            if claim and game.phase is not Phase.CLAIM:
                return  # the window is closed
            target = awaiting(game)[0]
            if not claim and target != player:
                return  # the seat's turn is over
            events = list(decide(game, target, auto_command(game, target)))
            await self._append(events, f"timeout:{seq}:{step}")

    def _decide(
        self, table: TableState, sender: str, command: Command | TableCommand
    ) -> list[RecordEvent]:
        if isinstance(command, _TABLE_COMMANDS):
            return decide_table(table, sender, command)
        if table.created is None:
            raise TableError(f"there is no table {table.table_id!r}", "table/unknown")
        if table.closed:
            raise TableError("the table is closed", "table/closed")
        if table.game is None:
            raise TableError("no game is being played here", "table/no_game")
        seat = table.seat_of(sender)
        if table.game.forfeited[seat]:
            raise TableError(
                "you missed too many turns: the server plays for your seat", "table/forfeited"
            )
        events: list[RecordEvent] = list(decide(table.game, seat, command))
        if table.timeouts and table.timeouts[seat]:
            events.insert(0, SeatBack(seat))
        return events

    async def _append(self, events: Sequence[RecordEvent], command_id: str) -> None:
        """Persist ``events`` and what chance makes due after them, then apply and publish."""
        table = self.table
        pending: list[tuple[Record, TableState, TableState]] = []
        queue = list(events)
        ended: list[tuple[TableState, RecordEvent]] = []
        while queue:
            event = queue.pop(0)
            game = event.game if isinstance(event, GameStarted) else table.game_number
            record = Record(RECORD_VERSION, game, event)
            before = table
            table = fold(table, record, table.seq + 1)
            pending.append((record, before, table))
            if isinstance(event, HandEnded):
                ended.append((before, event))
            if not queue:
                # A finished hand's deck is revealed (after its HandEnded and any GameEnded),
                # then chance deals the next hand if one is due.
                for state_then, hand_end in ended:
                    queue.extend(reveal_records(state_then, [hand_end]))
                ended.clear()
                if not queue:
                    queue.extend(chance_records(table, self.rng, self.new_salt))
        now = self.clock.now()
        rows = [NewEvent(encode_record(record.event, record.game), now) for record, _, _ in pending]
        summary = _summary(table)
        await self.store.append(self.table.table_id, self.table.seq, rows, command_id, summary)
        self._ids.add(command_id)
        self.last_at = now
        for record, before, after in pending:
            self.table = after
            if self._seq_waiters:
                self._reached(after.seq)
            await self.outbox.publish(before, after.seq, record, after)
        self._rearm()
        await self.outbox.flush(self.table)
        if (
            self.snapshot_every
            and table.seq // self.snapshot_every > (table.seq - len(pending)) // self.snapshot_every
        ):
            await self.store.save_snapshot(table.table_id, table.seq, _to_snapshot(table))


def _settle(job: _Job, outcome: Reply | LeaseLost) -> None:
    """Give ``job``'s caller its outcome."""
    try:
        job.answer(outcome)
    except Exception:  # the caller's bug must not stop the table
        _log.exception("answering a command failed", extra={"command_id": job.command_id})


def _resolve(future: asyncio.Future[Reply], outcome: Reply | LeaseLost) -> None:
    """``submit``'s answer: the outcome into the future it waits on."""
    if future.done():  # the caller gave up waiting
        return
    if isinstance(outcome, LeaseLost):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _summary(table: TableState) -> TableSummary:
    created = table.created
    if created is None:
        return TableSummary(table.table_id, "", table.status, table.seats)
    return TableSummary(
        table.table_id, created.variant, table.status, table.seats, host=created.host
    )
