"""A load player's answer to a claim window that closed while it was deciding (a subprocess of
tests/loadtest/test_player.py: Locust's client runs under gevent, which patches the standard
library as it is imported).

``python -m tests.loadtest.claim_race mqtt://HOST:PORT PREFIX PASSWORD SEED``: three load
players (``PREFIX1`` .. ``PREFIX3``) play Rummy 500 at random among their legal moves until a
claim window opens, and leave it unanswered. The server (with a short claim time) passes for
them and the game goes on. Then the first seat that could answer sends the answer it would
have chosen from the window's update, through ``Player.act`` with that update; and, as a load
player used to, the same choice with the newer seq its track has reached (the present). Prints one
JSON object: both replies' codes and the failures the players reported to Locust.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

from locust.env import Environment  # noqa: E402

from loadtest.player import Player, Seen, TableTrack  # noqa: E402
from protocol.game import Claim, Pass  # noqa: E402
from protocol.messages import Created, CreateTable, Hello, Sit, Start  # noqa: E402
from protocol.transport import parse_broker_url  # noqa: E402

WAIT = 20.0
"""Longest wait for any one update (seconds)."""
MOVES = 5000
"""Most moves played before giving up on a claim window."""


def _check(condition: bool, what: object) -> None:
    if not condition:
        raise RuntimeError(f"unexpected: {what!r}")


def _window_open(seen: Seen | None) -> bool:
    return seen is None or seen.view is None or bool(seen.view.claim_kind)


def main(url: str, prefix: str, password: str, seed: int) -> dict[str, Any]:
    environment = Environment()
    failures: list[str] = []

    def count(request_type: str, name: str, exception: Exception | None, **_: Any) -> None:
        if exception is not None:
            failures.append(f"{request_type} {name}: {exception}")

    hook: Any = environment.events.request
    hook.add_listener(count)
    address = parse_broker_url(url)
    players = [Player(environment, f"{prefix}{n}", password, address) for n in (1, 2, 3)]
    for player in players:
        player.connect()
        player.request(Hello(client="claim-race"))
    created = players[0].request(CreateTable(variant="rummy500", seats=3))
    _check(created is not None and isinstance(created.result, Created), created)
    assert created is not None
    assert isinstance(created.result, Created)
    table = created.result.table
    tracks: list[TableTrack] = [players[0].table(table)]
    for player in players[1:]:
        tracks.append(player.table(table))
        sat = player.request(Sit(), table)
        _check(sat is not None and sat.ok, sat)
    started = players[0].request(Start(), table)
    _check(started is not None and started.ok, started)
    assert started is not None
    rng = random.Random(seed)
    at = started.seq
    window: tuple[int, Seen] | None = None
    for _ in range(MOVES):
        for track in tracks:  # every seat sees every change: wait until all have seen ``at``
            while track.seq < at:
                assert track.next(timeout=WAIT) is not None, f"no update after {track.seq}"
        waiting = [
            (index, track.last)
            for index, track in enumerate(tracks)
            if track.last is not None and track.last.legal
        ]
        assert waiting, f"no seat may move at {at}"
        index, seen = waiting[0]
        if seen.view is not None and seen.view.claim_kind:
            window = (index, seen)  # leave it unanswered
            break
        reply = players[index].act(tracks[index], seen, rng.choice(seen.legal))
        _check(reply is not None and reply.ok, reply)
        assert reply is not None
        at = reply.seq
    assert window is not None, "no claim window opened"
    index, seen = window
    player, track = players[index], tracks[index]
    # The server closes the window (passing for everyone) after its claim time: wait until
    # this seat has seen it closed, as a player pausing before its answer would.
    while _window_open(track.last):
        _check(track.next(timeout=WAIT) is not None, f"no update after {track.seq}")
    moved_on = track.seq
    answer = next((command for command in seen.legal if isinstance(command, Claim)), Pass())
    decided = player.act(track, seen, answer)
    failures_of_act = list(failures)
    old_way = player.request(answer, table, seq=track.seq)  # the present, from the refusal
    for each in players:
        each.close()
    return {
        "window_seq": seen.seq,
        "moved_on_seq": moved_on,
        "answer": type(answer).__name__,
        "decided_code": decided.code if decided is not None else "no reply",
        "decided_synced": track.seq >= moved_on,
        "old_way_code": old_way.code if old_way is not None else "no reply",
        "failures": failures_of_act,
    }


if __name__ == "__main__":
    url, prefix, password, seed = sys.argv[1:5]
    print(json.dumps(main(url, prefix, password, int(seed))), flush=True)
