"""Record encoding over time: a stored version-1 log stays readable, upcasters run, garbage fails.

``data/v1_game.msgpack`` is a whole Gin Rummy game as a version-1 server wrote it, and
``data/v1_game.json`` the facts about it (see ``data/README.md``); they must never be
regenerated, since they stand for logs already in the field.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from server.engine import is_over, scores
from server.tables import records
from server.tables.actor import TableActor
from server.tables.records import (
    GameStarted,
    PlayerSat,
    Record,
    TableCreated,
    decode_record,
    encode_record,
)
from server.tables.store import EventStore, NewEvent
from server.tables.table import Rematch, TableState, empty_table, fold

DATA = Path(__file__).resolve().parent / "data"
FUZZ_SEED = 5_317


class StoredRow(msgspec.Struct, frozen=True):
    """One row of the stored log, as ``data/make_v1_game.py`` wrote it."""

    seq: int
    at: float
    command_id: str
    payload: bytes


class NullOutbox:
    """Publishes nothing."""

    async def publish(
        self, before: TableState, seq: int, record: Record, after: TableState
    ) -> None:
        """Drop the record."""

    async def flush(self, table: TableState) -> None:
        """Nothing to flush."""


def _v1_rows() -> list[StoredRow]:
    return msgspec.msgpack.decode((DATA / "v1_game.msgpack").read_bytes(), type=list[StoredRow])


def _v1_facts() -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((DATA / "v1_game.json").read_text())
    return facts


def _fold(table_id: str, rows: list[StoredRow]) -> TableState:
    table = empty_table(table_id)
    for row in rows:
        table = fold(table, decode_record(row.payload), row.seq)
    return table


def _raw(record: object) -> bytes:
    return msgspec.msgpack.encode(record)


# The stored version-1 log ---------------------------------------------------------------------


def test_every_stored_v1_payload_decodes_to_a_current_record() -> None:
    """Each row of the old log decodes to a ``Record`` of the current version, in seq order."""
    rows = _v1_rows()
    facts = _v1_facts()
    decoded = [decode_record(row.payload) for row in rows]
    expected_seqs = list(range(1, facts["records"] + 1))
    assert expected_seqs == [row.seq for row in rows]
    expected_versions = {records.RECORD_VERSION}
    assert expected_versions == {record.v for record in decoded}
    kinds = Counter(type(record.event).__name__ for record in decoded)
    assert facts["kinds"] == dict(sorted(kinds.items()))


def test_the_stored_v1_log_folds_to_its_finished_game_with_the_recorded_totals() -> None:
    """Folding the old log gives the game over, with the totals, winners and seats it ended on."""
    facts = _v1_facts()
    table = _fold(facts["table_id"], _v1_rows())
    game = table.game
    assert game is not None
    assert is_over(game)
    expected = (
        "finished",
        facts["records"],
        tuple(facts["seats"]),
        facts["games"],
        facts["hands"],
        facts["totals"],
        facts["winners"],
    )
    actual = (
        table.status,
        table.seq,
        table.seats,
        table.game_number,
        game.hand_number,
        [str(total) for total in scores(game)],
        list(game.winners),
    )
    assert expected == actual
    assert table.created is not None
    expected_table = (facts["variant"], facts["options"])
    assert expected_table == (table.created.variant, table.created.options)


async def test_a_stored_v1_log_in_a_store_answers_old_command_ids_and_takes_a_rematch(
    store: EventStore,
) -> None:
    """Loaded into a real store, the old table recovers, knows its command ids and plays on."""
    facts = _v1_facts()
    table_id = facts["table_id"]
    rows = _v1_rows()
    for row in rows:
        event = NewEvent(row.payload, row.at)
        await store.append(table_id, row.seq - 1, [event], row.command_id)
    actor = await TableActor.load(store, table_id, NullOutbox(), rng=random.Random(1))
    assert _fold(table_id, rows) == actor.table
    actor.start()
    try:
        old = rows[-1]
        again = await actor.submit("bob", Rematch(), old.command_id, 0)
        host = facts["seats"][0]
        rematch = await actor.submit(host, Rematch(), "rematch", actor.table.seq)
    finally:
        await actor.stop()
    first = min(row.seq for row in rows if row.command_id == old.command_id)
    expected_again = (True, True, first)
    assert expected_again == (again.ok, again.duplicate, again.first_seq)
    expected_rematch = (True, facts["records"] + 1, 2, "playing")
    actual_rematch = (rematch.ok, rematch.first_seq, actor.table.game_number, actor.table.status)
    assert expected_rematch == actual_rematch


# The upcasting mechanism ----------------------------------------------------------------------


def test_a_current_record_decodes_without_any_upcaster(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record of the current version never goes through the upcasters."""

    def refuse(raw: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError(f"upcaster called on {raw!r}")

    monkeypatch.setitem(records._UPCASTERS, records.RECORD_VERSION - 1, refuse)
    expected = Record(records.RECORD_VERSION, 3, PlayerSat(seat=1, player="bob"))
    assert expected == decode_record(encode_record(PlayerSat(seat=1, player="bob"), 3))


def test_an_old_record_that_no_longer_fits_is_upcast_to_the_current_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under a version 2 where ``player_sat`` renamed ``name`` to ``player``, a v1 row converts."""
    seen: list[dict[str, Any]] = []

    def rename(raw: dict[str, Any]) -> dict[str, Any]:
        seen.append(raw)
        event = dict(raw["event"])
        event["player"] = event.pop("name")
        return {**raw, "event": event}

    monkeypatch.setattr(records, "RECORD_VERSION", 2)
    monkeypatch.setitem(records._UPCASTERS, 1, rename)
    old = {"v": 1, "game": 0, "event": {"type": "player_sat", "seat": 1, "name": "bob"}}
    expected = Record(2, 0, PlayerSat(seat=1, player="bob"))
    assert expected == decode_record(_raw(old))
    assert [old] == seen


def test_upcasters_run_in_order_from_the_records_version_to_the_current_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A v1 record under version 3 goes through the 1->2 and then the 2->3 upcaster."""
    calls: list[tuple[str, int]] = []

    def one_to_two(raw: dict[str, Any]) -> dict[str, Any]:
        calls.append(("1->2", raw["v"]))
        event = {**raw["event"], "players": raw["event"].pop("names")}
        return {**raw, "event": event}

    def two_to_three(raw: dict[str, Any]) -> dict[str, Any]:
        calls.append(("2->3", raw["v"]))
        return {**raw, "game": raw["event"]["game"]}

    monkeypatch.setattr(records, "RECORD_VERSION", 3)
    monkeypatch.setitem(records._UPCASTERS, 1, one_to_two)
    monkeypatch.setitem(records._UPCASTERS, 2, two_to_three)
    old = {"v": 1, "game": 0, "event": {"type": "game_started", "game": 2, "names": ["a", "b"]}}
    expected = Record(3, 2, GameStarted(game=2, players=("a", "b")))
    assert expected == decode_record(_raw(old))
    expected_calls = [("1->2", 1), ("2->3", 2)]
    assert expected_calls == calls


def test_an_old_record_that_still_fits_the_schema_is_upcast_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under a version 2 that counts seats from 0 instead of 1, a v1 ``player_sat`` converts."""

    def renumber(raw: dict[str, Any]) -> dict[str, Any]:
        return {**raw, "event": {**raw["event"], "seat": raw["event"]["seat"] - 1}}

    monkeypatch.setattr(records, "RECORD_VERSION", 2)
    monkeypatch.setitem(records._UPCASTERS, 1, renumber)
    old = {"v": 1, "game": 0, "event": {"type": "player_sat", "seat": 1, "player": "bob"}}
    expected = Record(2, 0, PlayerSat(seat=0, player="bob"))
    assert expected == decode_record(_raw(old))


def test_a_record_newer_than_the_server_is_refused() -> None:
    """A record of a later version, whether or not it fits, fails with ``DecodeError``."""
    newer = records.RECORD_VERSION + 1
    fitting = {"v": newer, "game": 0, "event": {"type": "table_closed", "reason": "x"}}
    changed = {"v": newer, "game": 0, "event": {"type": "table_burnt", "ashes": 3}}
    for record in (fitting, changed):
        with pytest.raises(msgspec.DecodeError):
            decode_record(_raw(record))


# Garbage --------------------------------------------------------------------------------------


_SAT = {"type": "player_sat", "seat": 0, "player": "ann"}


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\xc1", id="never-used-byte"),
        pytest.param(b"\x83\xa1v\x01", id="truncated-map"),
        pytest.param(encode_record(PlayerSat(0, "ann"))[:-2], id="truncated-record"),
        pytest.param(encode_record(PlayerSat(0, "ann")) + b"\x00", id="trailing-byte"),
        pytest.param(_raw(5), id="int"),
        pytest.param(_raw("record"), id="str"),
        pytest.param(_raw([1, 0, _SAT]), id="array"),
        pytest.param(_raw({}), id="empty-map"),
        pytest.param(_raw({1: 2}), id="int-keys"),
        pytest.param(_raw({"v": 1}), id="only-version"),
        pytest.param(_raw({"v": "1", "game": 0, "event": _SAT}), id="version-as-text"),
        pytest.param(_raw({"v": True, "game": 0, "event": _SAT}), id="version-as-bool"),
        pytest.param(_raw({"v": None, "game": 0, "event": _SAT}), id="version-null"),
        pytest.param(_raw({"v": 0, "game": 0, "event": _SAT}), id="version-0-fitting"),
        pytest.param(_raw({"v": 1, "game": 0, "event": {"type": "nope"}}), id="unknown-tag"),
        pytest.param(_raw({"v": 1, "game": 0, "event": {"seat": 0}}), id="untagged-event"),
        pytest.param(_raw({"v": 1, "game": "0", "event": _SAT}), id="game-as-text"),
        pytest.param(
            _raw({"v": 0, "game": 0, "event": {"type": "nope"}}),
            id="version-0-not-fitting",
        ),
        pytest.param(
            _raw({"v": -3, "game": 0}),
            id="negative-version",
        ),
    ],
)
def test_garbage_fails_to_decode_with_a_msgspec_decode_error(payload: bytes) -> None:
    """Whatever is wrong with a payload, decoding it raises ``msgspec.DecodeError`` (or its
    subclass ``ValidationError``) and nothing else."""
    with pytest.raises(msgspec.DecodeError):
        decode_record(payload)


def test_mutated_v1_payloads_decode_or_fail_with_a_msgspec_decode_error() -> None:
    """Seeded byte flips, cuts and insertions in real payloads never raise anything else."""
    print(f"\nmutation seed {FUZZ_SEED}")
    rng = random.Random(FUZZ_SEED)
    payloads = [row.payload for row in _v1_rows()]
    outcomes: Counter[str] = Counter()
    for _ in range(3_000):
        payload = bytearray(rng.choice(payloads))
        at = rng.randrange(len(payload))
        match rng.randrange(3):
            case 0:
                payload[at] = rng.randrange(256)
            case 1:
                del payload[at:]
            case _:
                payload[at:at] = rng.randbytes(rng.randint(1, 4))
        try:
            decoded = decode_record(bytes(payload))
        except msgspec.DecodeError as error:
            outcomes[type(error).__name__] += 1
        else:
            assert isinstance(decoded, Record)
            outcomes["decoded"] += 1
    print(f"mutation outcomes {dict(outcomes)}")
    assert set(outcomes) <= {"decoded", "DecodeError", "ValidationError"}


def test_a_table_created_record_round_trips_through_the_encoding() -> None:
    """``encode_record`` then ``decode_record`` gives back the record with its game number."""
    created = TableCreated("t", "knock", {"deals": 2}, 3, "ann", True, "abc", 20.0)
    expected = Record(records.RECORD_VERSION, 0, created)
    assert expected == decode_record(encode_record(created))
