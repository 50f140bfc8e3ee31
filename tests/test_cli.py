"""The ``ramino`` command: variants, simulate and watch, and its error handling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server.cli import build_parser, main
from server.engine import VARIANTS
from server.net.accounts import Accounts
from server.net.commands import serve_config


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_variants_json_lists_every_preset_with_typed_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``ramino variants --json`` names each preset and each option with its type and default."""
    status, out, _ = _run(capsys, "variants", "--json")
    data = json.loads(out)
    assert 0 == status
    assert sorted(VARIANTS) == sorted(preset["name"] for preset in data)
    basic = next(preset for preset in data if preset["name"] == "basic")
    options = {option["name"]: option for option in basic["options"]}
    assert "double" == options["going_rummy"]["default"]
    assert ["none", "double", "plus10"] == options["going_rummy"]["choices"]
    assert "choice" == options["stock_exhausted"]["type"]


def test_simulate_json_summary_has_the_documented_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The last line of ``simulate --json`` is one JSON object with the documented keys."""
    status, out, _ = _run(
        capsys, "simulate", "--variant", "block", "--players", "3", "--games", "3", "--json"
    )
    summary = json.loads(out.strip().splitlines()[-1])
    assert 0 == status
    for key in (
        "variant",
        "players",
        "games",
        "completed",
        "hands",
        "moves",
        "seconds",
        "games_per_s",
        "invariant_violations",
    ):
        assert key in summary
    assert ("block", 3, 3, 3, 0) == (
        summary["variant"],
        summary["players"],
        summary["games"],
        summary["completed"],
        summary["invariant_violations"],
    )


def test_simulate_with_the_same_seed_gives_the_same_games(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two runs with one seed agree on everything but the timing."""
    argv = (
        "simulate",
        "--variant",
        "wrotham",
        "--players",
        "2",
        "--games",
        "2",
        "--seed",
        "7",
        "--json",
    )
    first = json.loads(_run(capsys, *argv)[1].splitlines()[-1])
    second = json.loads(_run(capsys, *argv)[1].splitlines()[-1])
    for summary in (first, second):
        del summary["seconds"], summary["games_per_s"]
    assert first == second


def test_simulate_with_another_seed_plays_other_games(capsys: pytest.CaptureFixture[str]) -> None:
    """The seed matters: different seeds give different move counts."""
    base = ("simulate", "--variant", "basic", "--games", "2", "--json")
    first = json.loads(_run(capsys, *base, "--seed", "1")[1].splitlines()[-1])
    second = json.loads(_run(capsys, *base, "--seed", "2")[1].splitlines()[-1])
    assert first["moves"] != second["moves"]


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (("simulate", "--variant", "nope"), "variant/unknown"),
        (("simulate", "--variant", "basic", "--option", "ace=sideways"), "variant/bad_option"),
        (("simulate", "--variant", "basic", "--option", "colour=red"), "variant/unknown_option"),
        (("simulate", "--variant", "basic", "--players", "9"), "variant/bad_players"),
        (
            ("simulate", "--variant", "basic", "--option", "target=50", "--option", "deals=3"),
            "variant/contradictory_options",
        ),
        (("watch", "--variant", "basic", "--option", "going_rummy"), "variant/bad_option"),
        (("watch", "gin", "--policies", "greedy,nope"), "watch/unknown_policy"),
        (("watch", "basic", "--policies", "mc"), "watch/unsupported_variant"),
        (("watch", "knock", "--players", "3", "--policies", "mc,greedy"), "watch/bad_policies"),
    ],
)
def test_bad_variant_or_option_exits_2_with_the_code(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], code: str
) -> None:
    """A bad variant, option or player count exits 2 and prints the error code."""
    status, _, err = _run(capsys, *argv)
    assert 2 == status
    assert f"[{code}]" in err


def test_watch_prints_a_whole_game_move_by_move(capsys: pytest.CaptureFixture[str]) -> None:
    """``ramino watch`` narrates the deal, moves, each hand's end and the game's end."""
    status, out, _ = _run(capsys, "watch", "--players", "3", "--seed", "1")
    lines = out.splitlines()
    assert 0 == status
    assert any("deals (52 cards)" in line for line in lines)
    assert any("discards" in line for line in lines)
    assert any(line.strip().startswith("hand 1 over:") for line in lines)
    assert lines[-1].strip().startswith("game over:")


def test_watch_seats_the_policies_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    """``--policies A,B`` seats A in seat 1 and B in seat 2 and names each seat by its
    policy; the card-tracking ``heuristic`` sees the game's events and plays it to the end."""
    status, out, _ = _run(
        capsys, "watch", "gin", "--players", "2", "--policies", "heuristic,simple", "--seed", "2"
    )
    lines = out.splitlines()
    assert 0 == status
    assert "gin: heuristic(1), simple(2) (seed 2)" == lines[0]
    assert any(line.strip().startswith("heuristic(1) ") for line in lines)
    assert any(line.strip().startswith("simple(2) ") for line in lines)
    assert lines[-1].strip().startswith("game over:")


def test_watch_takes_the_variant_as_its_argument(capsys: pytest.CaptureFixture[str]) -> None:
    """``ramino watch knock`` plays Knock Rummy: a knock ends each hand (basic has none)."""
    status, out, _ = _run(capsys, "watch", "knock", "--players", "2", "--seed", "1")
    assert 0 == status
    assert " knocks " in out
    assert "deals (52 cards)" in out


def test_serve_reads_the_server_password_from_a_file_or_the_environment(
    tmp_path: Path,
) -> None:
    """``--server-password-file``, ``RAMINO_SERVER_PASSWORD_FILE`` or
    ``RAMINO_SERVER_PASSWORD``: the password stays out of the command line (and ps). The
    file's first line is the password; the command line wins over the environment."""
    secret = tmp_path / "server-password"
    secret.write_text("from-the-file\n")
    parser = build_parser()
    by_flag = parser.parse_args(["serve", "--server-password-file", str(secret)])
    bare = parser.parse_args(["serve"])
    environment = {"RAMINO_SERVER_PASSWORD": "from-the-environment"}
    assert "from-the-file" == serve_config(by_flag, environment).server_password
    assert "from-the-environment" == serve_config(bare, environment).server_password
    by_variable = {**environment, "RAMINO_SERVER_PASSWORD_FILE": str(secret)}
    assert "from-the-file" == serve_config(bare, by_variable).server_password
    assert "" == serve_config(bare, {}).server_password


def test_serve_refuses_a_missing_or_empty_password_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A password file that is missing or empty stops ``ramino serve`` before it starts."""
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path in (tmp_path / "missing", empty):
        status, _, err = _run(capsys, "serve", "--server-password-file", str(path))
        assert 2 == status
        assert str(path) in err


def test_accounts_add_reads_the_password_from_a_file(tmp_path: Path) -> None:
    """``ramino accounts add NAME --password-file PATH`` sets the password in the file."""
    secret = tmp_path / "alice-password"
    secret.write_text("s3cret\n")
    accounts = tmp_path / "passwords"
    status = main(
        ["accounts", "--file", str(accounts), "add", "alice", "--password-file", str(secret)]
    )
    assert 0 == status
    assert Accounts.load(accounts).check("alice", "s3cret")


def test_serve_refuses_a_guest_names_file_it_cannot_read_or_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A guest names file that does not parse, or one in a missing folder, stops ``ramino
    serve`` with a message naming the file, before any client can log in."""
    corrupt = tmp_path / "corrupt.guests"
    corrupt.write_text("alice\n")
    for path in (corrupt, tmp_path / "missing" / "ramino.guests"):
        status, _, err = _run(
            capsys, "serve", "--port", "0", "--store", "sqlite:///:memory:", "--guests", str(path)
        )
        assert 2 == status
        assert str(path) in err


def test_a_knock_s_end_shows_what_the_defender_showed_and_laid_off() -> None:
    """The hand-end line of a Gin knock names the defender's melds, the cards laid off on the
    knocker's and the unmatched points left; the knocker's melds were in the knock's line.

    The case: bot1 knocks with 4 unmatched; bot2 shows 2C 3C 4C, lays JH off and keeps KD (10)
    and 9S (9): 19 unmatched, so bot1 scores 19 - 4 = 15 (RULES.md, Gin Rummy: the knocker wins
    the difference)."""
    from protocol.cards import parse_card, parse_cards
    from protocol.game import HandEnded, MeldSpec
    from server.narration import describe_event

    run = parse_cards("2C 3C 4C")
    event = HandEnded(
        hand=1,
        winner=0,
        reason="knock",
        rummy=False,
        hands=((), ()),
        counts=(4, 19),
        points=("15", "0"),
        totals=("15", "0"),
        shown=((), (MeldSpec(run, tuple(run)),)),
        laid_off=(parse_card("JH"),),
        ended_by=0,
    )
    line = describe_event(event, ["bot1", "bot2"])
    assert line == (
        "hand 1 over: bot1 knocks; bot1 wins the hand; bot2 shows [2C 3C 4C], lays off JH,"
        " 19 unmatched; points: bot1 15, bot2 0"
    )
