"""Playing whole games the way the simplest client of docs/protocol.md does, and checking what
every client received.

A seat answers each update that lists `legal` commands with one of them (picked by a seeded
random generator, melds first so hands end), carrying the update's `seq`; it resends the same
request after `limit/rate` (§13) and drops a command refused `table/stale_seq` (a newer update is
on its way). :func:`card_leaks` then checks every message every client received against what
that client may see (§5, §10, §11).
"""

from __future__ import annotations

import asyncio
import bisect
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.conformance.wire import Map, Peer, Received, fresh_id, inbox_topic

GAME_SECONDS = 90.0
"""The longest a whole game may take."""
BACK_OFF = 0.05
"""Seconds a client waits before resending a request refused with `limit/rate`."""
CARD_KEYS = frozenset(
    {"card", "cards", "order", "cuts", "hand", "pile", "taken", "stock_cards", "joker", "required"}
)
"""Keys whose values are cards (an int or a list of ints) in events, views and commands."""
REVEALING_EVENTS = frozenset({"hand_ended", "deck_revealed", "knocked"})
"""Events that show cards of a hand by design as it ends: the knocker's melds, every hand, the
deck."""
PREFERRED = ("meld", "lay_off", "claim", "swap_joker")
"""Commands that lay cards down (so hands end); a knock is chosen now and then only, so that
Knock Rummy hands last a few turns."""


@dataclass
class SeatRecord:
    """What one seat did: every reply to its game commands and every refusal of a `legal`
    command that was not a race (`table/stale_seq`)."""

    seat: int
    replies: list[Map] = field(default_factory=list)
    refused_legal: list[tuple[Map, Map]] = field(default_factory=list)


def choose(legal: list[Map], rng: random.Random) -> Map:
    """A command from ``legal``: one that lays cards down when there is one, else any (a knock
    one time in eight)."""
    eager = [command for command in legal if command.get("type") in PREFERRED]
    passes = [command for command in legal if command.get("type") == "pass"]
    knocks = [command for command in legal if command.get("type") == "knock"]
    others = [command for command in legal if command.get("type") != "knock"] or knocks
    if knocks and rng.random() < 0.125:
        return rng.choice(knocks)
    if eager and rng.random() < 0.9:
        return rng.choice(eager)
    if passes and rng.random() < 0.5:
        return rng.choice(passes)
    return rng.choice(others)


def game_over(update: Map) -> bool:
    """Whether this update ends the game."""
    view = update.get("view")
    if view is not None and view.get("phase") == "game_over":
        return True
    return any(logged["event"].get("type") == "game_ended" for logged in update["events"])


def _newer_update(inbox: str, table: str, seq: int) -> Callable[[Received], bool]:
    """Whether a message is an update of ``table`` on ``inbox`` past ``seq``."""

    def newer(message: Received) -> bool:
        return (
            message.topic == inbox
            and message.kind == "update"
            and message.data is not None
            and message.data["table"] == table
            and message.data["seq"] > seq
        )

    return newer


async def _send_until_answered(
    peer: Peer, table: str, command: Map, seq: int, record: SeatRecord
) -> None:
    request_id = fresh_id()
    while True:
        reply = await peer.table(table, command, seq=seq, request_id=request_id)
        record.replies.append(reply)
        if reply["code"] != "limit/rate":
            break
        # §13: back off, then resend the same request.
        await asyncio.sleep(BACK_OFF)
    if not reply["ok"] and reply["code"] != "table/stale_seq":
        record.refused_legal.append((command, reply))


async def play_seat(
    peer: Peer, table: str, rng: random.Random, record: SeatRecord, *, pipelined: bool = False
) -> None:
    """Answer ``peer``'s updates of ``table`` until the game is over: each time with the
    newest update, after the previous command's reply; or, ``pipelined``, every update with
    `legal` at once, without waiting for replies (a fast client)."""
    inbox = inbox_topic(peer.name)
    cursor = 0
    acted = -1
    async with asyncio.TaskGroup() as pending:
        while True:
            found = await peer.wait_for(_newer_update(inbox, table, acted), after=cursor)
            cursor = peer.received.index(found, cursor) + 1
            assert found.data is not None
            latest = (
                found.data
                if pipelined
                else max(peer.updates(table), key=lambda update: int(update["seq"]))
            )
            if game_over(latest):
                return
            acted = int(latest["seq"])
            if not latest["legal"]:
                continue
            command = choose(list(latest["legal"]), rng)
            answer = _send_until_answered(peer, table, command, acted, record)
            if pipelined:
                pending.create_task(answer)
            else:
                await answer


async def play_game(
    players: list[Peer], table: str, seed: int, *, pipelined: bool = False
) -> list[SeatRecord]:
    """Start ``table`` (its seats taken by ``players`` in order) and play it to the end.

    Raises:
        TimeoutError: the game took longer than GAME_SECONDS.
        AssertionError: the server refused to start it.
    """
    records = [SeatRecord(seat) for seat in range(len(players))]
    started = await players[0].table(table, {"type": "start"})
    assert started["ok"], started
    async with asyncio.timeout(GAME_SECONDS), asyncio.TaskGroup() as group:
        for seat, player in enumerate(players):
            group.create_task(
                play_seat(
                    player,
                    table,
                    random.Random(seed * 16 + seat),
                    records[seat],
                    pipelined=pipelined,
                ),
                name=f"seat-{seat}",
            )
    return records


async def seat_players(host: Peer, others: list[Peer], table: str) -> None:
    """Seat ``others`` at ``table`` in order (the host already sits in seat 0).

    Raises:
        AssertionError: a `sit` was refused.
    """
    for player in others:
        reply = await player.table(table, {"type": "sit"})
        assert reply["ok"], reply
    del host


def _cards(value: Any, key: str = "", listed: bool = False) -> Iterator[int]:
    if isinstance(value, dict):
        if value.get("type") in REVEALING_EVENTS:
            return
        for inner_key, inner in value.items():
            if inner_key == "last_result":
                continue
            yield from _cards(inner, inner_key)
    elif isinstance(value, list):
        for item in value:
            yield from _cards(item, key, listed=True)
    # `hand` is a list of cards in a view but the hand's number in events.
    elif (
        isinstance(value, int)
        and not isinstance(value, bool)
        and key in CARD_KEYS
        and (key != "hand" or listed)
    ):
        yield value


def sightings(message: Map) -> Iterator[tuple[int, int]]:
    """Every ``(seq, card)`` a message shows: cards of each logged event at the event's
    ``seq``; cards of views, legal commands and results at the message's ``seq``. Events that
    reveal the hand after its end and a view's ``last_result`` are left out."""
    for logged in message.get("events") or []:
        if isinstance(logged, dict) and "seq" in logged:
            for card in _cards(logged.get("event")):
                yield int(logged["seq"]), card
    seq = int(message.get("seq") or 0)
    for key in ("view", "legal", "result"):
        result = message.get(key)
        if isinstance(result, dict) and result.get("type") == "synced":
            seq = int(result["seq"])
        for card in _cards(result, key):
            yield seq, card


@dataclass(frozen=True)
class SeatState:
    """A seat's hand and the public cards (pile and table melds), as the seat's own update at
    ``seq`` shows them."""

    seq: int
    hand_number: int
    hand: frozenset[int]
    public: frozenset[int]


def seat_states(updates: Iterable[Map]) -> list[SeatState]:
    """One state per update that has a view, by `seq`."""
    states = []
    for update in updates:
        view = update.get("view")
        if view is None:
            continue
        public = set(view["pile"])
        for meld in view["melds"]:
            public.update(meld["cards"])
        states.append(
            SeatState(
                int(update["seq"]),
                int(view["hand_number"]),
                frozenset(view["hand"]),
                frozenset(public),
            )
        )
    return sorted(states, key=lambda state: state.seq)


def _state_at(
    states: list[SeatState], seqs: list[int], deals: list[int], seq: int
) -> SeatState | None:
    """The seat's state at ``seq``: its first update at or after it; None when a new deal came
    in between (the hand at ``seq`` is then not known from the seat's views)."""
    index = bisect.bisect_left(seqs, seq)
    if index == len(states):
        return None
    after = states[index]
    next_deal = bisect.bisect_right(deals, seq)
    if next_deal < len(deals) and deals[next_deal] <= after.seq:
        return None
    return after


def card_leaks(
    seats: list[list[Map]], receivers: dict[int, list[Received]]
) -> list[tuple[int, str, int, int, int]]:
    """Every sighting of a card that sat in another seat's hand and had not been public in
    that hand before: ``(receiver seat or -1, topic, seq, card, owner seat)``.

    ``seats`` gives each seat's updates (its own true hand, from its own view);
    ``receivers`` maps a seat (-1: a spectator) to everything it received.
    """
    states = [seat_states(updates) for updates in seats]
    seqs = [[state.seq for state in owner_states] for owner_states in states]
    deals = sorted(
        {
            int(logged["seq"])
            for updates in seats
            for update in updates
            for logged in update["events"]
            if logged["event"].get("type") == "dealt"
        }
    )
    # Per hand, the cards public so far after each seq (any seat's view shows pile and melds).
    timeline: dict[int, list[tuple[int, frozenset[int]]]] = {}
    for state in sorted((s for seat in states for s in seat), key=lambda s: s.seq):
        history = timeline.setdefault(state.hand_number, [])
        known = history[-1][1] if history else frozenset()
        history.append((state.seq, known | state.public))

    timeline_seqs = {number: [entry[0] for entry in items] for number, items in timeline.items()}

    def public_before(hand_number: int, seq: int) -> frozenset[int]:
        history = timeline.get(hand_number, [])
        index = bisect.bisect_left(timeline_seqs.get(hand_number, []), seq)
        return history[index - 1][1] if index else frozenset()

    leaks = []
    for receiver, messages in receivers.items():
        for message in messages:
            if message.data is None:
                continue
            for seq, card in sightings(message.data):
                if card < 0:
                    continue
                for owner, owner_states in enumerate(states):
                    if owner == receiver:
                        continue
                    held = _state_at(owner_states, seqs[owner], deals, seq)
                    if held is None:
                        continue
                    if card in held.hand and card not in public_before(held.hand_number, seq):
                        leaks.append((receiver, message.topic, seq, card, owner))
    return leaks


async def started(host: Peer, guest: Peer, variant: str = "knock", **fields: Any) -> str:
    """A two-seat table of ``variant`` created by ``host``, ``guest`` seated, game 1 started.

    Raises:
        AssertionError: the server refused a step.
    """
    table = await host.create(variant, seats=2, **fields)
    sat = await guest.table(table, {"type": "sit"})
    assert sat["ok"], sat
    start = await host.table(table, {"type": "start"})
    assert start["ok"], start
    return table


async def latest_update(peer: Peer, table: str, seq: int) -> Map:
    """``peer``'s first update of ``table`` with `seq` at least ``seq``, waiting for it.

    Raises:
        TimeoutError: none came within WAIT seconds.
    """
    inbox = inbox_topic(peer.name)
    found = await peer.wait_for(
        lambda message: (
            message.topic == inbox
            and message.kind == "update"
            and message.data is not None
            and message.data["table"] == table
            and message.data["seq"] >= seq
        )
    )
    assert found.data is not None
    return found.data


async def to_move(players: list[Peer], table: str, seq: int) -> tuple[Peer, Peer, Map]:
    """Which of two seated players is awaited once the table reached ``seq``: ``(mover,
    other, mover's update)``."""
    updates = [await latest_update(player, table, seq) for player in players]
    for index, update in enumerate(updates):
        if update["legal"]:
            return players[index], players[1 - index], update
    raise AssertionError(f"no seat may move at seq {seq}: {updates!r}")
