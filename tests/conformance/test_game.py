"""Whole games (Rummy 500, Knock Rummy) for three fast players and a spectator, checked
against §6 and §9-12: one reply per command, updates numbered without gaps, `legal` commands
accepted, no hidden card where it may not be seen, deck commitments that match, and retained
state that equals the final state."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass, field

import pytest

from tests.conformance.deployment import Deployment
from tests.conformance.play import SeatRecord, card_leaks, play_game, seat_players
from tests.conformance.wire import (
    Map,
    Peer,
    Received,
    events_topic,
    listing_topic,
    peers,
    state_topic,
)

SETTLE_SECONDS = 2.5
"""How long the retained state is watched after the game: over two of the server's
once-a-second snapshot republications (§11)."""


@dataclass
class PlayedGame:
    """Everything the players and the spectator received during one game, and after it."""

    table: str
    records: list[SeatRecord]
    seat_messages: list[list[Received]]
    spectator: list[Received]
    final_seq: int
    later_state: list[Received] = field(default_factory=list)
    retained_state: Map | None = None
    retained_listing: Map | None = None
    synced: Map | None = None

    def updates(self, seat: int) -> list[Map]:
        """Seat ``seat``'s updates of the table."""
        return [
            message.data
            for message in self.seat_messages[seat]
            if message.data is not None
            and message.data.get("type") == "update"
            and message.data.get("table") == self.table
        ]


def _stale(message: Received, final_seq: int) -> bool:
    data = message.data
    if data is None:
        return True
    if data.get("type") == "snapshot":
        return bool(data["seq"] != final_seq or data["table"]["status"] != "finished")
    if data.get("type") == "listing":
        return bool(data["status"] != "finished")
    return False


GAMES = {
    "rummy500": {"target": 250, "idle_turn_cap": 30},
    "knock": {"deals": 2},
}
"""The games played: Rummy 500 (claim windows, deep draws, jokers) to 250 points, and two
deals of Knock Rummy (melds shown only at the knock)."""


async def _play(deployment: Deployment, variant: str) -> PlayedGame:
    accounts = deployment.take(4)
    async with peers(deployment.host, deployment.port, accounts) as (host, bob, carol, watcher):
        table = await host.create(variant, seats=3, options=GAMES[variant])
        for topic in (events_topic(table), state_topic(table), listing_topic(table)):
            await watcher.subscribe(topic)
        await seat_players(host, [bob, carol], table)
        records = await play_game([host, bob, carol], table, seed=5)
        final_seq = max(int(update["seq"]) for update in host.updates(table))
        game = PlayedGame(
            table,
            records,
            [list(player.received) for player in (host, bob, carol)],
            [],
            final_seq,
        )
        # The last snapshot must arrive, and nothing older may replace it afterwards.
        state, listing = state_topic(table), listing_topic(table)
        found = await watcher.wait_for(
            lambda message: (
                message.topic == state
                and message.data is not None
                and message.data["seq"] == final_seq
                and message.data["table"]["status"] == "finished"
            ),
            within=5.0,
        )
        mark = watcher.received.index(found) + 1
        with contextlib.suppress(TimeoutError):
            await watcher.wait_for(
                lambda message: message.topic in (state, listing) and _stale(message, final_seq),
                after=mark,
                within=SETTLE_SECONDS,
            )
        game.later_state = [
            message
            for message in watcher.received[mark:]
            if message.topic in (state, listing) and _stale(message, final_seq)
        ]
        game.spectator = list(watcher.received)
        game.synced = (await watcher.table(table, {"type": "resync"}))["result"]
    (late,) = deployment.take(1)
    async with Peer(late, deployment.host, deployment.port).connected(state, listing) as reader:
        got_state = await reader.wait_for(lambda message: message.topic == state)
        got_listing = await reader.wait_for(lambda message: message.topic == listing)
        game.retained_state = got_state.data
        game.retained_listing = got_listing.data
    return game


@pytest.fixture(scope="module", params=sorted(GAMES))
def played(deployment: Deployment, request: pytest.FixtureRequest) -> PlayedGame:
    """Each game once per deployment, played before this module's checks."""
    return asyncio.run(_play(deployment, request.param))


def test_every_legal_command_is_accepted(played: PlayedGame) -> None:
    """§9: `legal` holds exactly the commands that would be accepted; only a race with another
    seat (`table/stale_seq`) may refuse one."""
    assert [] == [refused for record in played.records for refused in record.refused_legal]


def test_each_request_gets_exactly_one_reply(played: PlayedGame) -> None:
    """§6: exactly one reply per request: no id is answered twice."""
    for messages in played.seat_messages:
        ids = [
            message.data["id"]
            for message in messages
            if message.data is not None and message.data.get("type") == "reply"
        ]
        assert sorted(set(ids)) == sorted(ids)


def test_updates_are_numbered_without_gaps(played: PlayedGame) -> None:
    """§6 and §12: each update's events follow the previous update's `seq` without a gap, and
    the update's `seq` is its last event's."""
    for seat in range(len(played.records)):
        updates = played.updates(seat)
        assert updates
        previous = int(updates[0]["events"][0]["seq"]) - 1
        for update in updates:
            numbers = [int(logged["seq"]) for logged in update["events"]]
            assert list(range(previous + 1, previous + 1 + len(numbers))) == numbers
            assert numbers[-1] == update["seq"]
            assert seat == update["seat"]
            previous = update["seq"]
        assert played.final_seq == previous


def test_public_events_come_in_order(played: PlayedGame) -> None:
    """§11: the public stream numbers events like the log (QoS 0 may lose a message, never
    reorder one)."""
    topic = events_topic(played.table)
    numbers = [
        int(logged["seq"])
        for message in played.spectator
        if message.topic == topic and message.data is not None
        for logged in message.data["events"]
    ]
    assert numbers
    assert sorted(set(numbers)) == numbers
    assert played.final_seq == numbers[-1]


def test_no_player_sees_another_seats_hidden_cards(played: PlayedGame) -> None:
    """§5 and §10: a card in another seat's hand that was never public in this hand shows as
    -1 in every update and reply a player gets."""
    seats = [played.updates(seat) for seat in range(len(played.records))]
    receivers = dict(enumerate(played.seat_messages))
    assert [] == card_leaks(seats, receivers)


def test_the_spectator_sees_no_hidden_card(played: PlayedGame) -> None:
    """§11: no public message holds a card of a hand in play."""
    seats = [played.updates(seat) for seat in range(len(played.records))]
    assert [] == card_leaks(seats, {-1: played.spectator})


def test_players_see_their_own_cards(played: PlayedGame) -> None:
    """§10: a seat's own `drew` event shows the card it drew (to the others it is -1)."""
    drawn = [
        logged["event"]["card"]
        for seat in range(len(played.records))
        for update in played.updates(seat)
        for logged in update["events"]
        if logged["event"]["type"] == "drew" and logged["event"]["seat"] == seat
    ]
    assert drawn
    assert all(card >= 0 for card in drawn)


def test_deck_commitments_match_the_revealed_decks(played: PlayedGame) -> None:
    """§10: `deck_committed.salt` is blank when published, and `deck_revealed` after the hand
    gives the salt and order whose SHA-256 is the commitment."""
    topic = events_topic(played.table)
    events = [
        logged["event"]
        for message in played.spectator
        if message.topic == topic and message.data is not None
        for logged in message.data["events"]
    ]
    committed = [event for event in events if event["type"] == "deck_committed"]
    revealed = [event for event in events if event["type"] == "deck_revealed"]
    assert committed
    assert len(committed) == len(revealed)
    for commitment, reveal in zip(committed, revealed):
        assert "" == commitment["salt"]
        text = reveal["salt"] + ":" + ",".join(str(card) for card in reveal["order"])
        assert commitment["commitment"] == hashlib.sha256(text.encode()).hexdigest()


def test_final_snapshot_is_never_replaced_by_an_older_one(played: PlayedGame) -> None:
    """§11: the retained snapshot is republished "always after its last change": once the
    game is over no older `playing` snapshot, and no listing other than `finished`, follows."""
    assert [] == [message.data for message in played.later_state]


def test_retained_snapshot_and_listing_equal_the_final_state(played: PlayedGame) -> None:
    """§11: a late subscriber reads the final snapshot and a `finished` listing, equal to what
    `resync` says."""
    assert played.retained_state is not None
    assert played.retained_listing is not None
    assert played.synced is not None
    assert played.final_seq == played.retained_state["seq"]
    assert "finished" == played.retained_state["table"]["status"]
    assert played.synced["view"] == played.retained_state["view"]
    assert played.synced["table"] == played.retained_listing
    assert "finished" == played.retained_listing["status"]
