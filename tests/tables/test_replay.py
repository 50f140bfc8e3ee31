"""Replay, export and the fairness check over real stores, and the commands that print them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bots.policies import GreedyPolicy
from server.cli import main
from server.engine import (
    Card,
    Dealt,
    HandEnded,
    is_over,
    legal_actions,
    parse_card,
    to_move,
    view,
)
from server.engine.views import HIDDEN, visible_cards
from server.tables.actor import TableActor
from server.tables.records import DeckCommitted, DeckRevealed, Record, encode_record
from server.tables.replay import (
    LogRow,
    ReplayError,
    ReplayLine,
    Viewer,
    format_line,
    format_summary,
    read_rows,
    replay_rows,
    verify_deals,
)
from server.tables.store import EventStore, NewEvent, open_store
from server.tables.table import CreateTable, Rematch, Sit, StartGame, TableState, empty_table, fold
from server.tables.timers import ManualClock
from tests.tables.test_actor import RecordingOutbox

PLAYERS = ("p0", "p1", "p2")
START = 1_700_000_000.0
"""The fixed clock of the games below: 2023-11-14 22:13:20 UTC."""

MOVES_INTO_THE_REMATCH = 6

CARD_KEYS = frozenset(
    {"card", "cards", "order", "cuts", "stock_cards", "joker", "hands", "laid_off"}
)
CARD_TOKEN = re.compile(r"\b(?:[A2-9TJQK][CDHS]|JK)\d*\b")


async def _play(store: EventStore) -> None:
    """Table ``t1``: a finished two-deal game of basic rummy, then a rematch a few moves in."""
    actor = TableActor(
        empty_table("t1"),
        store,
        RecordingOutbox(store),
        clock=ManualClock(START),
        rng=random.Random(7),
        snapshot_every=25,
    )
    actor.start()
    try:
        create = CreateTable(variant="basic", seats=len(PLAYERS), options={"deals": 2})
        assert (await actor.submit(PLAYERS[0], create, "create")).ok
        for player in PLAYERS:
            assert (await actor.submit(player, Sit(), f"sit-{player}")).ok
        assert (await actor.submit(PLAYERS[0], StartGame(), "start")).ok
        await _play_moves(actor, 10_000)
        assert (await actor.submit(PLAYERS[0], Rematch(), "rematch")).ok
        await _play_moves(actor, MOVES_INTO_THE_REMATCH)
    finally:
        await actor.stop()


async def _play_moves(actor: TableActor, count: int) -> None:
    policy = GreedyPolicy()
    rng = random.Random(actor.table.seq)
    for _ in range(count):
        game = actor.table.game
        if game is None or is_over(game):
            return
        seat = to_move(game)
        command = policy.choose(game.rules, view(game, seat), legal_actions(game, seat), rng)
        player = actor.table.seats[seat]
        reply = await actor.submit(player, command, f"move-{actor.table.seq}", actor.table.seq)
        assert reply.ok, reply


@pytest.fixture
async def rows(store: EventStore) -> list[LogRow]:
    """The log of table ``t1`` after the games of ``_play``, on each real store."""
    await _play(store)
    return await read_rows(store, "t1")


@pytest.fixture
def sqlite_game(sqlite_url: str) -> str:
    """The URL of a SQLite file holding the games of ``_play`` (for the commands)."""

    async def build() -> None:
        store = await open_store(sqlite_url)
        try:
            await _play(store)
        finally:
            await store.close()

    asyncio.run(build())
    return sqlite_url


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _json_cards(value: Any, is_card: bool = False) -> set[Card]:
    """Every card id under a card-holding key of a JSON value (hidden cards left out)."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value} if is_card and value != HIDDEN else set()
    if isinstance(value, list):
        return set().union(*(_json_cards(item, is_card) for item in value))
    if isinstance(value, dict):
        return set().union(
            *(_json_cards(item, is_card or key in CARD_KEYS) for key, item in value.items())
        )
    return set()


def _text_cards(text: str) -> set[Card]:
    """Every card written in card notation in a text."""
    return {parse_card(token) for token in CARD_TOKEN.findall(text)}


def _secrets_by_seq(rows: list[LogRow]) -> dict[int, tuple[TableState, set[Card]]]:
    """For each seq during a hand: the table after it and every card held out of public view."""
    secrets: dict[int, tuple[TableState, set[Card]]] = {}
    table = empty_table("t1")
    in_hand = False
    for row in rows:
        before, table = table, fold(table, row.record, row.seq)
        event = row.record.event
        if isinstance(event, Dealt):
            in_hand = True
        if isinstance(event, HandEnded):
            in_hand = False
        if not in_hand:
            continue
        assert table.game is not None
        public = set(visible_cards(view(table.game)))
        if not isinstance(event, Dealt) and before.game is not None:
            public |= visible_cards(view(before.game))
        held = set().union(*table.game.hands)
        secrets[row.seq] = (table, held - public)
    return secrets


def _shown(line: ReplayLine) -> set[Card]:
    exported = json.loads(json.dumps(line.to_json()))
    return _json_cards(exported["event"]) | _text_cards(format_line(line))


async def test_a_seat_never_sees_another_seats_hidden_cards_in_text_or_json(
    rows: list[LogRow],
) -> None:
    """Every card a seat's (or a spectator's) replay shows mid-hand is public or his own."""
    secrets = _secrets_by_seq(rows)
    viewers: list[Viewer] = [0, 1, 2, "spectator"]
    for viewer in viewers:
        for line in replay_rows(rows, viewer):
            if line.seq not in secrets:
                continue
            table, hidden = secrets[line.seq]
            assert table.game is not None
            own = set(table.game.hands[viewer]) if isinstance(viewer, int) else set()
            leaked = _shown(line) & (hidden - own)
            assert set() == leaked, (viewer, line)
            if isinstance(line.event, Dealt):
                assert own <= _shown(line), (viewer, line)


async def test_a_reveal_logged_before_the_hands_end_is_hidden_from_the_seats(
    rows: list[LogRow],
) -> None:
    """A ``DeckRevealed`` moved to just after its deal shows the seats no card of the deck."""
    reveal = next(row for row in rows if isinstance(row.record.event, DeckRevealed))
    deal = next(row for row in rows if isinstance(row.record.event, Dealt))
    moved = [row for row in rows if row is not reveal]
    moved.insert(moved.index(deal) + 1, reveal)
    renumbered = [dataclasses.replace(row, seq=seq) for seq, row in enumerate(moved, 1)]
    line = replay_rows(renumbered, 0, to_seq=deal.seq + 1)[-1]
    assert isinstance(line.event, DeckRevealed)
    expected = ("", {HIDDEN})
    assert expected == (line.event.salt, set(line.event.order))
    assert "BEFORE the hand ended" in line.text


async def test_everything_is_shown_for_a_finished_game(rows: list[LogRow]) -> None:
    """``all`` replays a finished game unredacted: every card of every deal is shown."""
    lines = replay_rows(rows, "all", game=1)
    deals = [line.event for line in lines if isinstance(line.event, Dealt)]
    expected_hands = [1, 2]
    assert expected_hands == [deal.hand for deal in deals]
    assert all(HIDDEN not in deal.order for deal in deals)
    expected_details = [f"{player} is dealt" for player in PLAYERS]
    first_deal = next(line for line in lines if isinstance(line.event, Dealt))
    assert expected_details == [
        detail[: len(expected_details[0])] for detail in first_deal.details[:3]
    ]


async def test_everything_is_refused_while_a_hand_is_in_progress(rows: list[LogRow]) -> None:
    """``all`` is refused when the range includes the rematch's unfinished first hand."""
    for hand in (None, 1):
        with pytest.raises(ReplayError) as caught:
            replay_rows(rows, "all", hand=hand)
        expected = "replay/hand_in_progress"
        assert expected == caught.value.code


async def test_to_and_hand_limit_the_replay(rows: list[LogRow]) -> None:
    """``to_seq`` stops at a seq; ``hand`` keeps one hand, of the last game unless told."""
    expected_seqs = list(range(1, 11))
    assert expected_seqs == [line.seq for line in replay_rows(rows, 0, to_seq=10)]
    second = replay_rows(rows, "spectator", hand=2, game=1)
    expected_places = {(1, 2)}
    assert expected_places == {(line.game, line.hand) for line in second}
    kinds = [type(line.event) for line in second]
    assert (DeckCommitted, Dealt) == (kinds[0], kinds[1])
    assert HandEnded in kinds
    rematch = replay_rows(rows, 1, hand=1)
    expected_rematch = {(2, 1)}
    assert expected_rematch == {(line.game, line.hand) for line in rematch}


async def test_the_salt_is_stripped_from_every_commitment(rows: list[LogRow]) -> None:
    """No viewer sees a commitment's salt; the reveal after the hand carries it."""
    viewers: list[Viewer] = [0, "spectator"]
    for viewer in viewers:
        salts = {
            line.event.salt
            for line in replay_rows(rows, viewer)
            if isinstance(line.event, DeckCommitted)
        }
        expected = {""}
        assert expected == salts


async def test_an_unknown_seat_is_refused(rows: list[LogRow]) -> None:
    """A seat the table does not have is a coded error."""
    with pytest.raises(ReplayError) as caught:
        replay_rows(rows, 3)
    expected = "replay/bad_viewer"
    assert expected == caught.value.code


async def test_verify_deal_passes_on_a_real_game(rows: list[LogRow]) -> None:
    """Both hands of the finished game check out; the rematch's hand in progress is unrevealed."""
    checks = verify_deals(rows)
    expected = [("ok", 1, 1), ("ok", 1, 2), ("in_progress", 2, 1)]
    assert expected == [(check.status, check.game, check.hand) for check in checks]


async def test_verify_deal_reports_a_deal_that_is_not_the_committed_one(
    rows: list[LogRow],
) -> None:
    """A log whose first deal differs from the committed and revealed order is a mismatch."""
    tampered = []
    for row in rows:
        event = row.record.event
        if isinstance(event, Dealt) and (row.record.game, event.hand) == (1, 1):
            order = (event.order[1], event.order[0], *event.order[2:])
            record = Record(
                row.record.v, row.record.game, msgspec.structs.replace(event, order=order)
            )
            row = LogRow(row.table_id, row.seq, row.at, row.command_id, record)
        tampered.append(row)
    (check,) = verify_deals(tampered, hand=1, game=1)
    assert check.mismatch
    assert any("is not the order dealt" in problem for problem in check.problems)


async def test_the_store_lists_the_table(rows: list[LogRow], store: EventStore) -> None:
    """``tables`` shows the table with its status, variant, seats, last seq and time."""
    lines = format_summary(await store.tables())
    expected = f"t1     playing  basic    p0, p1, p2  {rows[-1].seq:<8}  2023-11-14 22:13:20 UTC"
    assert expected == lines[1]


def test_the_replay_command_prints_a_hand_history_and_json_lines(
    sqlite_game: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ramino replay`` prints readable lines and, with ``--format json``, one object each."""
    base = ["replay", "--store", sqlite_game, "--table", "t1", "--game", "1", "--hand", "1"]
    status, out, _ = _run(capsys, *base, "--as", "p0")
    assert 0 == status
    assert "hand 1: the deck order is committed, sha256 " in out
    assert re.search(r"^ {18}p0 is dealt (\S\S ){6}\S\S$", out, re.MULTILINE)
    assert "hand 1 over:" in out
    status, out, _ = _run(capsys, *base, "--as", "1", "--format", "json", "--to", "8")
    objects = [json.loads(line) for line in out.splitlines()]
    assert 0 == status
    expected_keys = {"seq", "time", "at", "game", "hand", "type", "event", "text", "details"}
    assert all(expected_keys == set(item) for item in objects)
    expected_last = (8, "2023-11-14T22:13:20.000Z", 1)
    assert expected_last == (objects[-1]["seq"], objects[-1]["time"], objects[-1]["game"])


def test_the_replay_command_refuses_everything_for_a_hand_in_progress(
    sqlite_game: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--as all`` over the rematch in progress exits 2 with a coded error."""
    status, out, err = _run(
        capsys, "replay", "--store", sqlite_game, "--table", "t1", "--as", "all"
    )
    assert (2, "") == (status, out)
    assert err.startswith("ramino: error [replay/hand_in_progress]: ")
    status, _, _ = _run(
        capsys, "replay", "--store", sqlite_game, "--table", "t1", "--as", "all", "--game", "1"
    )
    assert 0 == status


def test_verify_deal_exits_1_after_a_forged_reveal(
    sqlite_game: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A genuine log passes; a forged ``DeckRevealed`` appended to it is a mismatch."""
    status, out, _ = _run(capsys, "verify-deal", "--store", sqlite_game, "--table", "t1")
    assert 0 == status
    assert out.startswith("game 1 hand 1: ok (commitment ")

    async def forge() -> None:
        store = await open_store(sqlite_game)
        try:
            rows = await read_rows(store, "t1")
            reveal = next(
                row.record.event
                for row in rows
                if isinstance(row.record.event, DeckRevealed)
                and (row.record.event.game, row.record.event.hand) == (1, 1)
            )
            forged = DeckRevealed(
                game=1, hand=1, salt=reveal.salt, order=tuple(reversed(reveal.order))
            )
            payload = encode_record(forged, 1)
            await store.append("t1", rows[-1].seq, [NewEvent(payload, START)])
        finally:
            await store.close()

    asyncio.run(forge())
    status, out, _ = _run(
        capsys, "verify-deal", "--store", sqlite_game, "--table", "t1", "--game", "1", "--hand", "1"
    )
    assert 1 == status
    assert out.startswith("game 1 hand 1: MISMATCH: the deck was revealed 2 times")


def test_the_tables_command_lists_the_table(
    sqlite_game: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ramino tables`` prints a header and the table; ``--json`` gives the same as objects."""
    status, out, _ = _run(capsys, "tables", "--store", sqlite_game)
    assert 0 == status
    header, line = out.splitlines()
    assert header.startswith("TABLE  STATUS   VARIANT  SEATS")
    assert line.startswith("t1     playing  basic    p0, p1, p2")
    status, out, _ = _run(capsys, "tables", "--store", sqlite_game, "--json")
    (table,) = json.loads(out)
    expected = ("t1", "playing", "basic", ["p0", "p1", "p2"], "2023-11-14T22:13:20.000Z")
    assert expected == (
        table["table_id"],
        table["status"],
        table["variant"],
        table["seats"],
        table["last_activity"],
    )


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["replay", "--table", "nope"], "table/unknown"),
        (["verify-deal", "--table", "nope"], "table/unknown"),
        (["replay", "--table", "t1", "--as", "nobody"], "replay/bad_viewer"),
        (["replay", "--table", "t1", "--hand", "9"], "replay/no_such_hand"),
    ],
)
def test_bad_requests_exit_2_with_a_code(
    sqlite_game: str, capsys: pytest.CaptureFixture[str], argv: list[str], code: str
) -> None:
    """An unknown table, viewer or hand is a coded error with exit status 2."""
    status, _, err = _run(capsys, *argv[:1], "--store", sqlite_game, *argv[1:])
    assert 2 == status
    assert err.startswith(f"ramino: error [{code}]: ")


def test_a_missing_store_file_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A read-only command given a path with no store says so and leaves no file behind."""
    missing = tmp_path / "typo.db"
    status, _, err = _run(capsys, "tables", "--store", f"sqlite:///{missing}")
    assert 2 == status
    assert err.startswith("ramino: error [store/not_found]: ")
    assert not missing.exists()
