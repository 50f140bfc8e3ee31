"""The gateway's pre-encoded messages (``server.net.wire``) are the bytes of protocol v1.

Each wire struct must encode to exactly what the protocol's own struct encodes for the same
content: the events of real games (every preset), seen by each seat and by spectators, with
each seat's view and legal actions.
"""

from __future__ import annotations

import random

import pytest

from protocol.codec import encode
from protocol.game import Event
from protocol.messages import Logged, Reply, Synced, TableEvents, TableListing, Update
from server.engine import VARIANTS, legal_actions, new_game, redact, view
from server.engine.game import State
from server.net.wire import (
    EMPTY_EVENTS,
    EventsOut,
    ReplyOut,
    UpdateOut,
    decode_events,
    encode_events,
)
from server.simulation import play_random_game

pytestmark = pytest.mark.filterwarnings("error")


def _game_steps(variant: str, players: int, seed: str) -> list[tuple[State, int, Event, State]]:
    steps: list[tuple[State, int, Event, State]] = []

    def keep(before: State, event: Event, after: State) -> None:
        steps.append((before, len(steps) + 3, event, after))

    game = new_game(variant, {}, players)
    play_random_game(game, random.Random(seed), check=False, on_event=keep)
    return steps


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_update_events_and_reply_encode_as_the_protocol_structs(variant: str) -> None:
    """Every step of a random game: the seat's ``UpdateOut`` and ``ReplyOut`` and the
    spectators' ``EventsOut`` give the bytes of ``Update``, ``Reply`` and ``TableEvents``,
    and the events decode back to what was encoded."""
    players = 3 if variant in {"rummy500", "ramino"} else 2
    steps = _game_steps(variant, players, f"wire-{variant}")
    assert len(steps) > 20
    for index, (before, seq, event, after) in enumerate(steps):
        public = (Logged(seq, redact(before, event)),)
        raw_public = encode_events(public)
        assert decode_events(raw_public) == public
        assert encode(EventsOut("t1", raw_public)) == encode(TableEvents("t1", public))
        for seat in range(players):
            events = (Logged(seq, redact(before, event, seat)),)
            raw = encode_events(events)
            shown = view(after, seat)
            legal = tuple(legal_actions(after, seat))
            deadline = 0.0 if index % 2 else 1.7e9 + index / 7
            assert encode(
                UpdateOut("t1", seq, seat, raw, shown, legal, deadline, "playing")
            ) == encode(Update("t1", seq, seat, events, shown, legal, deadline, "playing"))
            assert encode(ReplyOut(f"id{index}", True, table="t1", seq=seq, events=raw)) == encode(
                Reply(f"id{index}", True, table="t1", seq=seq, events=events)
            )


def test_reply_defaults_and_results_encode_as_the_protocol_reply() -> None:
    """A refusal (defaults, no events) and a reply with a result: the same bytes."""
    assert encode(ReplyOut("x", False, "table/unknown", "no table", "t", 4)) == encode(
        Reply("x", False, "table/unknown", "no table", "t", 4)
    )
    game = new_game("gin", {}, 2)
    listing = TableListing("t", "gin", {}, ("ann", "bob"), "playing", "ann", 0.0, 1)
    synced = Synced(listing, 9, 1, view(game, 1), (), 0.0)
    assert encode(ReplyOut("y", True, table="t", seq=9, result=synced)) == encode(
        Reply("y", True, table="t", seq=9, result=synced)
    )
    assert encode(ReplyOut("z", True, events=EMPTY_EVENTS)) == encode(Reply("z", True))
