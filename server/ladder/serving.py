"""A ladder inside ``ramino serve``: external bots join over MQTT and play at server tables.

``serve_ladder`` opens the ladder ``NAME`` on the server's own store, runs it in the
background with a ``TableRunner`` (matches of built-in entrants only still play in worker
processes) and answers the lobby's ladder commands (``LadderServer.command``): ``ladder_join``
enters the sender as ``ext:USERNAME``, ``ladder_leave`` stops pairing it, ``ladder_status``
tells it where it stands. An external entrant is paired only once its account has sent
``ladder_join`` to this server run, and while it is online (no offline presence since its last
message); it plays one match at a time. At start, the ladder tables a stopped server left open
are closed, and its pending matches with an external entrant cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from protocol.messages import LadderEntry, LadderJoin, LadderLeave, LadderStanding, LadderStatus
from server.ladder.entrants import Entrant, external
from server.ladder.errors import LadderError
from server.ladder.events import MatchCancelled, MatchResult
from server.ladder.pairing import PairingSettings
from server.ladder.pools import DEFAULT_POOLS, Pool, parse_pools
from server.ladder.runner import ProcessRunner
from server.ladder.service import MAX_FORFEITS, Ladder, RunSettings
from server.ladder.tables import HOST_PREFIX, TableRunner
from server.net.gateway import Gateway
from server.tables.service import TableService
from server.tables.store import EventStore

__all__ = ["LadderServer", "LadderSettings", "serve_ladder"]

_log = logging.getLogger(__name__)

RESTARTED = "the server restarted"
"""Why a ladder table or match left unfinished by a stopped server was closed or cancelled."""


@dataclass(frozen=True, slots=True)
class LadderSettings:
    """What ``ramino serve --ladder NAME`` runs."""

    name: str
    pools: str = ",".join(DEFAULT_POOLS)
    concurrency: int = 1
    """Matches played at once (built-in-only ones in that many worker processes)."""
    move_seconds: float = 10.0
    """The move timer of ladder tables."""
    max_timeouts: int = 2
    """Timeouts in a row after which a ladder table forfeits the seat."""
    max_forfeits: int = MAX_FORFEITS
    """Matches forfeited in a row that suspend an external entrant (0: never)."""
    suspend_seconds: float = 3600.0
    seed: str = "ladder"
    min_matches: int = 10


class LadderServer:
    """The running ladder of a server: answers the lobby's ladder commands."""

    def __init__(self, ladder: Ladder, runner: TableRunner, pools: tuple[Pool, ...]) -> None:
        self.ladder = ladder
        self.runner = runner
        self.pools = pools
        self.task: asyncio.Task[int] | None = None
        self.joined: set[str] = set()
        """Accounts that sent ``ladder_join`` since this server started: only they are
        paired (a bot that has not reconnected after a restart is not)."""

    async def command(
        self, client: str, command: LadderJoin | LadderLeave | LadderStatus
    ) -> LadderEntry:
        """Carry out a ladder command of ``client``.

        Raises:
            LadderError: another ladder's name (``ladder/not_running``), a pool this ladder
                does not run (``ladder/bad_pool``), a suspended entrant joining
                (``ladder/suspended``), leaving without having joined (``ladder/not_joined``).
        """
        if command.ladder and command.ladder != self.ladder.name:
            raise LadderError(
                f"this server runs ladder {self.ladder.name!r}, not {command.ladder!r}",
                "ladder/not_running",
            )
        if self.task is not None and self.task.done():
            raise LadderError(f"ladder {self.ladder.name!r} has stopped", "ladder/not_running")
        if isinstance(command, LadderJoin):
            offered = tuple(pool.name for pool in self.pools)
            await self.ladder.join_external(client, tuple(command.pools), offered)
            self.joined.add(client)
        elif isinstance(command, LadderLeave):
            self.joined.discard(client)
            await self.ladder.leave_external(client)
        return self.entry(client)

    def entry(self, client: str) -> LadderEntry:
        """Where ``client``'s external entrant stands."""
        state = self.ladder.state
        name = external(client, ()).name
        entrant = state.entrants.get(name)
        suspended = state.suspended.get(name)
        standings = []
        for pool, rows in state.standings.items():
            standing = rows.get(name)
            if standing is None:
                continue
            listed = [row.name for row in state.leaderboard(pool, self.min_matches)]
            standings.append(
                LadderStanding(
                    pool=pool,
                    mu=standing.rating.mu,
                    sigma=standing.rating.sigma,
                    ordinal=standing.rating.ordinal,
                    matches=standing.matches,
                    forfeits=standing.forfeits,
                    rank=listed.index(name) + 1 if name in listed else 0,
                )
            )
        return LadderEntry(
            ladder=self.ladder.name,
            entrant=name,
            pools=entrant.pools if entrant is not None else (),
            active=bool(state.active.get(name)),
            failures=state.failing[name],
            suspended_until=suspended.until if suspended is not None else 0.0,
            tables=tuple(table for table, seated in self.runner.tables.items() if client in seated),
            standings=tuple(standings),
        )

    def html(self) -> str:
        """The ladder's leaderboard page (``ramino ladder export --html``), from its state now
        (without the batch refit's check)."""
        from server.ladder.commands import export_json
        from server.ladder.html import render_html

        return render_html(export_json(self.ladder.state, self.ladder.name, refit=False))

    @property
    def min_matches(self) -> int:
        """Results a pool's leaderboard needs to list an entrant."""
        config = self.ladder.state.config
        return config.min_matches if config is not None else 10


@contextlib.asynccontextmanager
async def serve_ladder(
    settings: LadderSettings, service: TableService, gateway: Gateway, store: EventStore
) -> AsyncIterator[LadderServer]:
    """Run the ladder ``settings.name`` on ``store`` with ``service``'s tables and answer the
    ladder commands ``gateway`` receives, until the block exits.

    Raises:
        LadderError: a bad ladder name or pool, or a log that does not fold.
    """
    pools = parse_pools(settings.pools)
    ladder = await Ladder.open(store, settings.name)
    ladder.max_forfeits = settings.max_forfeits
    ladder.suspend_seconds = settings.suspend_seconds
    await _clean_up(ladder, service)
    runner = TableRunner(
        service,
        settings.name,
        ProcessRunner(settings.concurrency),
        move_seconds=settings.move_seconds,
        max_timeouts=settings.max_timeouts,
    )
    server = LadderServer(ladder, runner, pools)

    def available(entrant: Entrant) -> bool:
        account = entrant.account
        return entrant.kind != "external" or (account in server.joined and gateway.online(account))

    ladder.available = available
    run = RunSettings(
        pools=pools,
        matches=0,
        concurrency=settings.concurrency,
        seed=settings.seed,
        pairing=PairingSettings(min_matches=settings.min_matches),
    )

    def on_result(result: MatchResult) -> None:
        _log.info(
            "ladder %s: %s %s %s ranks %s",
            settings.name,
            result.match_id,
            result.pool,
            " ".join(result.entrants),
            result.ranks,
        )

    server.task = asyncio.create_task(ladder.run(run, runner, on_result), name="ladder")
    server.task.add_done_callback(_report)
    gateway.ladder = server
    try:
        yield server
    finally:
        gateway.ladder = None
        server.task.cancel()
        with contextlib.suppress(BaseException):
            await server.task
        await runner.close()


async def _clean_up(ladder: Ladder, service: TableService) -> None:
    """What a stopped server left unfinished: its ladder tables still open (resumed by the
    table service) are closed, and the pending matches with an external entrant are cancelled
    (the bot may not be back; the built-in ones are played again)."""
    host = f"{HOST_PREFIX}{ladder.name}"
    for actor in list(service.actors.values()):
        created = actor.table.created
        if created is not None and created.host == host and not actor.table.closed:
            await actor.close(RESTARTED, f"ladder-restart-{actor.table.seq}")
    for match in ladder.state.pending():
        entrants = [ladder.state.entrants.get(name) for name in match.entrants]
        if any(entrant is not None and entrant.kind == "external" for entrant in entrants):
            await ladder.append(MatchCancelled(match.match_id, RESTARTED, ladder.clock()))


def _report(task: asyncio.Task[int]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        _log.error("the ladder stopped: %s", error, exc_info=error)
