"""``ramino ladder``: the readers' JSON and the coded errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from server.cli import main
from server.ladder.commands import _wins
from server.ladder.pairing import PairingSettings
from server.ladder.pools import parse_pools
from server.ladder.service import Ladder, RunSettings
from server.tables.store import open_store
from tests.ladder.test_ladder import FakeClock, ScriptedRunner


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


async def _fill(url: str) -> None:
    store = await open_store(url)
    try:
        ladder = await Ladder.open(store, "main", FakeClock())
        settings = RunSettings(
            parse_pools("knock-2,rummy500-3"),
            matches=40,
            seed="cli",
            pairing=PairingSettings(min_matches=4),
        )
        await ladder.run(settings, ScriptedRunner())
    finally:
        await store.close()


@pytest.fixture
def filled(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ladder.db'}"
    asyncio.run(_fill(url))
    return url


def test_status_and_leaderboard_json(filled: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``status --json`` counts results per pool and lists entrants with ``min_matches``
    results, best ordinal first; ``leaderboard --pool`` is that pool's list."""
    status, out, _ = _run(capsys, "ladder", "status", "--store", filled, "--json")
    assert 0 == status
    data = json.loads(out)
    assert 40 == data["results"]
    assert [] == data["pending"]
    assert 4 == data["min_matches"]
    assert {"knock-2", "rummy500-3"} == set(data["pools"])
    assert 40 == sum(pool["results"] for pool in data["pools"].values())
    board = data["pools"]["knock-2"]["leaderboard"]
    ordinals = [row["ordinal"] for row in board]
    assert sorted(ordinals, reverse=True) == ordinals
    assert all(row["matches"] >= 4 for row in board)
    assert all(
        round(row["mu"] - 3 * row["sigma"], 2) == pytest.approx(row["ordinal"], abs=0.01)
        for row in board
    )
    status, out, _ = _run(
        capsys, "ladder", "leaderboard", "--store", filled, "--pool", "knock-2", "--json"
    )
    assert board == json.loads(out)


def test_history_follows_an_entrants_rating(
    filled: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``history NAME`` lists each result of the entrant with its rating after it."""
    status, out, _ = _run(
        capsys, "ladder", "history", "heuristic@1", "--store", filled, "--pool", "knock-2", "--json"
    )
    assert 0 == status
    rows = json.loads(out)
    assert rows
    assert all("heuristic@1" not in row["opponents"] for row in rows)
    _, board, _ = _run(
        capsys, "ladder", "leaderboard", "--store", filled, "--pool", "knock-2", "--all", "--json"
    )
    mine = next(row for row in json.loads(board) if row["entrant"] == "heuristic@1")
    assert mine["matches"] == len(rows)
    assert mine["mu"] == pytest.approx(rows[-1]["mu"], abs=1e-3)


def test_entrants_add_remove_list(filled: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Removing an entrant keeps it listed as removed; adding it back makes it active."""
    assert 0 == _run(capsys, "ladder", "entrants", "remove", "mc@4", "--store", filled)[0]
    _, out, _ = _run(capsys, "ladder", "entrants", "list", "--store", filled, "--json")
    removed = {
        "name": "mc@4",
        "kind": "builtin",
        "spec": "mc:200:v4",
        "active": False,
        "failures": 0,
        "suspended_until": 0.0,
        "suspended_for": "",
    }
    assert removed in json.loads(out)
    assert 0 == _run(capsys, "ladder", "entrants", "add", "mc@4", "--store", filled)[0]
    _, out, _ = _run(capsys, "ladder", "entrants", "list", "--store", filled, "--json")
    assert all(row["active"] for row in json.loads(out))


def test_export_holds_every_result(filled: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``export`` is one JSON document with every result and a refit difference of 0."""
    status, out, _ = _run(capsys, "ladder", "export", "--store", filled)
    assert 0 == status
    data = json.loads(out)
    assert 40 == len(data["matches"])
    assert 0.0 == data["refit_max_difference"]


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["run", "--pools", "gin-3", "--matches", "1"], "ladder/bad_pool"),
        (["run", "--pools", "chess-2", "--matches", "1"], "ladder/bad_pool"),
        (["run", "--pools", "gin", "--matches", "1"], "ladder/bad_pool"),
        (["entrants", "add", "alphago@1"], "ladder/unknown_entrant"),
        (["entrants", "add", "random@1"], "ladder/duplicate_entrant"),
        (["entrants", "remove", "nobody@1"], "ladder/unknown_entrant"),
        (["history", "nobody@1"], "ladder/unknown_entrant"),
        (["status", "--ladder", "no/such"], "ladder/bad_name"),
    ],
)
def test_bad_requests_get_coded_errors(
    filled: str, capsys: pytest.CaptureFixture[str], argv: list[str], code: str
) -> None:
    """Each refusal exits 2 and names its code."""
    status, _, err = _run(capsys, "ladder", *argv, "--store", filled)
    assert 2 == status
    assert f"[{code}]" in err


def test_an_empty_leaderboard_says_when_entrants_are_listed(
    filled: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a minimum above every entrant's matches (40 matches over two pools cannot give
    anyone 1,000), the text board names the minimum and ``--all`` instead of a bare "nobody"."""
    status, out, _ = _run(
        capsys,
        "ladder",
        "leaderboard",
        "--store",
        filled,
        "--pool",
        "knock-2",
        "--min-matches",
        "1000",
    )
    assert 0 == status
    assert "an entrant is listed after 1000 matches; --all lists all" in out


def test_history_text_counts_wins_in_words(filled: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The text ``history`` says ``1 win`` and ``N wins`` as the JSON's ``wins`` has it, one
    line a result."""
    _, out, _ = _run(capsys, "ladder", "history", "heuristic@1", "--store", filled, "--json")
    rows = json.loads(out)
    status, text, _ = _run(capsys, "ladder", "history", "heuristic@1", "--store", filled)
    assert 0 == status
    lines = text.splitlines()
    assert len(rows) == len(lines)
    for row, line in zip(rows, lines):
        count = row["wins"]
        words = f"{count:g} win," if count == 1 else f"{count:g} wins,"
        assert f": {words} " in line


def test_a_win_count_reads_as_words() -> None:
    """One win is singular; none, several and shares of split hands are plural."""
    assert "1 win" == _wins(1)
    assert "0 wins" == _wins(0)
    assert "2 wins" == _wins(2)
    assert "1.5 wins" == _wins(1.5)


def test_the_text_leaderboard_shows_the_share_of_games_won(
    filled: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The text board's last column, ``games won``, is the JSON's ``win_share`` as a
    percentage, one row per listed entrant in the JSON's order."""
    _, out, _ = _run(
        capsys, "ladder", "leaderboard", "--store", filled, "--pool", "knock-2", "--json"
    )
    board = json.loads(out)
    status, text, _ = _run(capsys, "ladder", "leaderboard", "--store", filled, "--pool", "knock-2")
    assert 0 == status
    lines = text.splitlines()
    assert lines[1].rstrip().endswith("games won")
    rows = lines[2:]
    assert len(board) == len(rows)
    for row, line in zip(board, rows):
        assert row["entrant"] == line.split()[1]
        assert f"{row['win_share']:.0%}" == line.split()[-1]
