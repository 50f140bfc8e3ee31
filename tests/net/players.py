"""Players for the network tests: SDK clients choosing moves with a bot policy, and the
secrecy check of everything they received."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from bots.policies.base import find_policy
from protocol import topics
from protocol.client import Client, GameUpdate
from protocol.game import Dealt, StockRebuilt
from protocol.transport import Message
from server.engine import make_rules
from server.tables.replay import LogRow, read_rows
from server.tables.store import EventStore, open_store
from server.tables.table import TableState, empty_table, fold

__all__ = [
    "Inbox",
    "Truth",
    "card_leaks",
    "logged_table",
    "play_seat",
    "start_table",
    "states_by_seq",
]

GAME_SECONDS = 120.0
"""Longest a whole test game may take."""


@dataclass
class Inbox:
    """Every message one client received, in order (a ``Transport`` tap)."""

    name: str
    messages: list[Message] = field(default_factory=list)

    def __call__(self, message: Message) -> None:
        self.messages.append(message)


async def start_table(
    clients: Sequence[Client], variant: str, options: dict[str, Any] | None = None, **settings: Any
) -> str:
    """Create a table for ``clients`` (the first is the host), seat them all and start."""
    host = clients[0]
    created = await host.create_table(
        variant, seats=len(clients), options=options or {}, **settings
    )
    for client in clients[1:]:
        await client.table(created.table).sit()
    await host.table(created.table).start()
    return created.table


async def play_seat(
    client: Client, table: str, seed: int, policy: str = "greedy", stop_at_seq: int = 0
) -> GameUpdate:
    """Play ``client``'s seat until the game is over (or the table passes ``stop_at_seq``);
    return the last update."""
    chooser = find_policy(policy)
    rng = random.Random(seed)
    session = client.table(table)
    async with asyncio.timeout(GAME_SECONDS):
        async for update in session.updates():
            if update.status == "finished" or (stop_at_seq and update.seq >= stop_at_seq):
                return update
            if update.legal and update.view is not None and update.seq == session.seq:
                seen = update.view
                rules = make_rules(seen.variant, seen.options, seen.players)
                command = chooser.choose(rules, seen, update.legal, rng)
                reply = await session.act(command, check=False)
                assert reply.ok or reply.code == "table/stale_seq", (reply.code, reply.message)
    raise AssertionError("the updates ended")  # pragma: no cover


@dataclass(frozen=True, slots=True)
class Truth:
    """The table at one seq, and the cards everyone has seen in the pile this hand (a card
    taken from the pile is known to be in its taker's hand)."""

    state: TableState
    seen: frozenset[int]


async def logged_table(store_url: str, table: str) -> tuple[list[LogRow], TableState]:
    """The log of ``table`` in the store at ``store_url``, and the table folded from it."""
    store = await open_store(store_url)
    try:
        rows = await read_rows(store, table)
    finally:
        await store.close()
    state = empty_table(table)
    for row in rows:
        state = fold(state, row.record, row.seq)
    return rows, state


async def states_by_seq(store: EventStore, table: str) -> dict[int, Truth]:
    """The truth after each seq of the log (what the secrecy check compares with)."""
    state = empty_table(table)
    seen: frozenset[int] = frozenset()
    truths = {0: Truth(state, seen)}
    for row in await read_rows(store, table):
        state = fold(state, row.record, row.seq)
        pile = frozenset(state.game.pile) if state.game is not None else frozenset()
        # A new hand, or the pile's cards shuffled back out of sight, starts afresh.
        fresh = isinstance(row.record.event, Dealt | StockRebuilt)
        seen = pile if fresh else seen | pile
        truths[row.seq] = Truth(state, seen)
    return truths


_CARD = "card"
_CARD_LISTS = frozenset({"cards", "order", "hand", "pile", "taken", "stock_cards"})
_REVEALS = frozenset({"hand_ended", "deck_revealed", "knocked"})
"""Events that show cards as the hand ends (a knock is the showdown): allowed."""


def _cards(value: Any) -> Iterator[int]:
    """Every card number in a decoded message, outside the end-of-hand reveals."""
    if isinstance(value, dict):
        if value.get("type") in _REVEALS:
            return
        for key, item in value.items():
            if key == "last_result":
                continue
            if key == _CARD and isinstance(item, int):
                yield item
            elif key in _CARD_LISTS and isinstance(item, list):
                yield from (card for card in item if isinstance(card, int))
            else:
                yield from _cards(item)
    elif isinstance(value, list):
        for item in value:
            yield from _cards(item)


def _table_of(message: dict[str, Any]) -> str:
    """The table a decoded message is about ("" for none)."""
    table = message.get("table", "")
    if isinstance(table, dict):  # a snapshot carries the table's listing
        table = table.get("table", "")
    return table if isinstance(table, str) else ""


def _seq_of(message: dict[str, Any]) -> int:
    if message.get("type") == "events":
        return max(int(item["seq"]) for item in message["events"])
    if message.get("type") == "snapshot":
        return int(message["seq"])
    return int(message.get("seq", 0))


def card_leaks(inbox: Inbox, seat: int | None, states: dict[int, Truth], table: str) -> list[str]:
    """Each message of ``inbox`` that shows a card hidden from ``seat`` (None: spectator).

    A card is hidden at a seq when it is in another seat's hand or in the stock then, and was
    not seen in the discard pile since the deal (or the last rebuilt stock). Each event of a
    message is checked against the table at its own seq, the rest of the message (view,
    legal actions) against the table at the message's seq; the end-of-hand reveals are
    allowed.
    """
    leaks = []
    for message in inbox.messages:
        decoded = msgspec.msgpack.decode(message.payload) if message.payload else None
        if not isinstance(decoded, dict) or _table_of(decoded) != table:
            continue
        parts = [(int(item["seq"]), item["event"]) for item in decoded.get("events", ())]
        rest = {key: value for key, value in decoded.items() if key != "events"}
        parts.append((_seq_of(decoded), rest))
        for seq, part in parts:
            shown = {card for card in _cards(part) if card >= 0} & _hidden(states, seq, seat)
            if shown:
                leaks.append(f"{inbox.name} saw {sorted(shown)} at seq {seq} on {message.topic}")
    return leaks


def _hidden(states: dict[int, Truth], seq: int, seat: int | None) -> set[int]:
    truth = states.get(seq)
    if truth is None or truth.state.game is None:
        return set()
    game = truth.state.game
    hidden = set(game.stock)
    for other, hand in enumerate(game.hands):
        if other != seat:
            hidden.update(hand)
    return hidden - truth.seen


def public_topics(table: str) -> tuple[str, str]:
    """The public topics of ``table`` a spectator follows."""
    return topics.table_events(table), topics.table_state(table)
