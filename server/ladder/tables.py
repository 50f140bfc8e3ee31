"""Matches with external entrants, played at real tables of the table service.

Theory of operation. ``TableRunner`` is the ``MatchRunner`` of a ladder inside
``ramino serve``. A match of built-in entrants only goes to the in-process runner it wraps
(worker processes, no tables). A match with an external entrant plays its rotations one after
the other, each at a new private table of the server's table service:

1. the table is created with the host ``ladder:NAME`` (a name no MQTT account can have), the
   pool's preset and defaults, the ladder's move timer (``move_seconds``, ``max_timeouts``)
   and a long hand pause, so that nothing is dealt after the match's one hand;
2. its deal generator is seeded from the match seed (``chance_key(seed, 1)``), so every
   rotation of the match gets the same deal, as in-process matches do;
3. each entrant sits in its seat of the rotation: an external entrant under its MQTT username,
   which makes the server send it ``Update``s (its first one, ``player_sat``, names the table
   and the seat: that is the invitation); a built-in one under its entrant name, which holds an
   ``@`` and so is no MQTT account, and is played here by its policy through the service;
4. the game is started, and the runner plays the built-in seats until the table's log holds
   the hand's ``hand_ended``; the move timer plays for an external seat that does not answer
   and forfeits it after ``max_timeouts`` timeouts in a row, as at any table;
5. the table is closed (``table_closed``), and the rotation's win shares, points and
   forfeited seats are read from its log.

An entrant that forfeited a seat in any rotation ranks below the others
(``matches.rank_totals``); the ladder counts such matches and suspends an external entrant
that forfeits too many in a row (``Ladder.record``).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import secrets
import time
from collections.abc import Sequence
from fractions import Fraction

from bots.duel import hand_winners
from bots.policies.base import Policy, find_policy
from server.engine import HandEnded, Rules, SeatForfeited, is_over, legal_actions, view
from server.engine.game import awaiting
from server.ladder.entrants import Entrant
from server.ladder.errors import LadderError
from server.ladder.matches import GameRecord, MatchOutcome, chance_key, rank_totals, rotations
from server.ladder.pools import Pool
from server.ladder.runner import MatchRunner
from server.tables.actor import TableActor
from server.tables.records import decode_record
from server.tables.service import TableService
from server.tables.table import CreateTable, Sit, StartGame, TableCommand

__all__ = ["HAND_PAUSE", "HOST_PREFIX", "TableRunner"]

HOST_PREFIX = "ladder:"
"""A ladder's tables are hosted by ``ladder:NAME`` (no MQTT account can have that name)."""

HAND_PAUSE = 3600.0
"""The hand pause of a ladder table: longer than any hand, so the next hand is never dealt
before the runner closes the table."""


class TableRunner:
    """Plays matches with external entrants at tables of ``service``; see the module
    docstring."""

    def __init__(
        self,
        service: TableService,
        ladder: str,
        builtin: MatchRunner,
        move_seconds: float = 10.0,
        max_timeouts: int = 2,
        game_seconds: float = 1800.0,
    ) -> None:
        self.service = service
        self.ladder = ladder
        self.builtin = builtin
        self.move_seconds = move_seconds
        self.max_timeouts = max_timeouts
        self.game_seconds = game_seconds
        """A game still unfinished after this long is abandoned and the match fails."""
        self.tables: dict[str, tuple[str, ...]] = {}
        """Ladder tables being played now -> the accounts seated there."""

    async def play(self, pool: Pool, entrants: Sequence[Entrant], seed: str) -> MatchOutcome:
        """Play the match of ``seed``: in-process if every entrant is built in, else at
        tables."""
        if all(entrant.kind == "builtin" for entrant in entrants):
            return await self.builtin.play(pool, entrants, seed)
        started = time.perf_counter()
        rules = pool.rules()
        games = []
        for index, order in enumerate(rotations(pool.players)):
            games.append(await self._play_table(rules, pool, entrants, order, seed, index))
        players = pool.players
        wins = [Fraction(0)] * players
        points = [Fraction(0)] * players
        forfeits = [False] * players
        for game in games:
            for seat, entrant in enumerate(game.order):
                wins[entrant] += game.wins[seat]
                points[entrant] += game.points[seat]
                forfeits[entrant] = forfeits[entrant] or game.forfeited[seat]
        ranks = rank_totals(wins, points, rules.scoring == "penalty", forfeits)
        return MatchOutcome(
            tuple(games),
            tuple(wins),
            tuple(points),
            ranks,
            time.perf_counter() - started,
            tuple(forfeits),
        )

    async def close(self) -> None:
        """Release the in-process runner."""
        await self.builtin.close()

    async def _play_table(
        self,
        rules: Rules,
        pool: Pool,
        entrants: Sequence[Entrant],
        order: tuple[int, ...],
        seed: str,
        rotation: int,
    ) -> GameRecord:
        service = self.service
        table_id = secrets.token_hex(6)
        # Command ids are kept with the table's log: short, and unique to this table.
        prefix = "ladder-" + hashlib.sha256(f"{seed}:{rotation}".encode()).hexdigest()[:12]
        create = CreateTable(
            variant=pool.variant,
            options={},
            seats=pool.players,
            private=True,
            move_seconds=self.move_seconds,
            max_timeouts=self.max_timeouts,
            hand_pause_seconds=HAND_PAUSE,
        )
        host = f"{HOST_PREFIX}{self.ladder}"
        _, reply = await service.create(host, create, f"{prefix}:create", table_id)
        if not reply.ok:
            raise LadderError(f"could not open a table: [{reply.code}] {reply.message}")
        actor = await service.actor(table_id)
        assert actor is not None
        actor.rng = random.Random(chance_key(seed, 1))  # every rotation gets the same deal
        seated = tuple(entrants[index] for index in order)
        accounts = tuple(entrant.account for entrant in seated)
        self.tables[table_id] = accounts
        try:
            for seat, account in enumerate(accounts):
                await self._submit(table_id, account, Sit(seat), f"{prefix}:sit{seat}")
            await self._submit(table_id, accounts[0], StartGame(), f"{prefix}:start")
            policies: dict[int, Policy] = {
                seat: find_policy(entrant.spec)
                for seat, entrant in enumerate(seated)
                if entrant.kind == "builtin"
            }
            rngs = {seat: random.Random(f"{seed}:{rotation}:{seat}") for seat in policies}
            async with asyncio.timeout(self.game_seconds):
                ended, forfeited, decisions = await self._drive(
                    actor, rules, accounts, policies, rngs, prefix
                )
        finally:
            await actor.close("the ladder's hand is over", f"{prefix}:close")
            del self.tables[table_id]
        winners = hand_winners(ended, rules)
        share = Fraction(1, len(winners)) if winners else Fraction(0)
        return GameRecord(
            order=order,
            wins=tuple(share if seat in winners else Fraction(0) for seat in range(pool.players)),
            points=tuple(Fraction(point) for point in ended.points),
            decisions=decisions,
            forfeited=tuple(seat in forfeited for seat in range(pool.players)),
        )

    async def _submit(
        self, table_id: str, sender: str, command: TableCommand, command_id: str
    ) -> None:
        reply = await self.service.submit(table_id, sender, command, command_id)
        if not reply.ok:
            raise LadderError(f"table {table_id}: [{reply.code}] {reply.message}")

    async def _drive(
        self,
        actor: TableActor,
        rules: Rules,
        accounts: tuple[str, ...],
        policies: dict[int, Policy],
        rngs: dict[int, random.Random],
        prefix: str,
    ) -> tuple[HandEnded, set[int], int]:
        """Play the built-in seats until the hand ends; return its ``HandEnded``, the seats
        forfeited and the decisions made here."""
        table_id = actor.table.table_id
        store = self.service.store
        read = 0
        forfeited: set[int] = set()
        decisions = 0
        over = False
        while True:
            # The table is appended to the store before its state changes: what the state
            # shows, the log holds.
            table = actor.table
            for row in await store.read(table_id, read):
                read = row.seq
                event = decode_record(row.payload).event
                if isinstance(event, SeatForfeited):
                    forfeited.add(event.seat)
                elif isinstance(event, HandEnded):
                    return event, forfeited, decisions
            game = table.game
            if table.closed or game is None or is_over(game):
                if over:
                    raise LadderError(f"table {table_id} ended without a hand")
                over = True  # read the log once more
                continue
            for seat in awaiting(game):
                policy = policies.get(seat)
                if policy is None or game.forfeited[seat]:
                    continue
                seen = view(game, seat)
                actions = legal_actions(game, seat)
                if not actions:
                    continue
                command = await asyncio.to_thread(policy.choose, rules, seen, actions, rngs[seat])
                decisions += 1
                # Refused only if the table moved meanwhile (the timer): the loop looks again.
                await self.service.submit(
                    table_id, accounts[seat], command, f"{prefix}:{table.seq}:{seat}", table.seq
                )
            if actor.table.seq == table.seq:
                await actor.wait_for_seq(table.seq + 1)
