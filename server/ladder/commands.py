"""``ramino ladder``: run a ladder and read it (docs/ladder.md).

Subcommands: ``run`` (play and rate matches), ``status``, ``leaderboard``, ``entrants``
(``list``, ``add``, ``remove``), ``history`` (an entrant's results and rating over time) and
``export`` (everything as one JSON document). Each takes ``--store URL`` (the event store of
the tables) and ``--ladder NAME`` (default ``main``); the readers print a table, or JSON with
``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from server.ladder.errors import LadderError
from server.ladder.events import MatchResult, event_json
from server.ladder.pairing import MAX_EXPLORATION, PairingSettings
from server.ladder.pools import DEFAULT_POOLS, parse_pools
from server.ladder.service import Ladder, RunSettings, max_refit_difference
from server.ladder.state import LadderState
from server.ladder.stats import head_to_head, shared_scores

__all__ = ["add_commands", "export_json", "leaderboard_json", "status_json"]

T = TypeVar("T")

STORE_HELP = "sqlite:///relative.db, sqlite:////abs/path.db or postgresql://user@host/db"
DEFAULT_MIN_MATCHES = 10


async def _with_ladder(
    url: str, name: str, work: Callable[[Ladder], Awaitable[T]], create: bool = False
) -> T:
    from server.tables.replay import open_existing_store
    from server.tables.store import open_store

    store = await (open_store(url) if create else open_existing_store(url))
    try:
        ladder = await Ladder.open(store, name)
        return await work(ladder)
    finally:
        await store.close()


def _wins(count: float) -> str:
    """``1 win``, ``0 wins``, ``1.5 wins`` (a match's win share may be a fraction)."""
    return f"{count:g} {'win' if count == 1 else 'wins'}"


def _min_matches(state: LadderState, given: int | None) -> int:
    if given is not None:
        return given
    return state.config.min_matches if state.config is not None else DEFAULT_MIN_MATCHES


def _pools_of(state: LadderState) -> list[str]:
    names = list(state.config.pools) if state.config is not None else []
    names += [pool for pool in state.standings if pool not in names]
    return names


def leaderboard_json(state: LadderState, pool: str, min_matches: int) -> list[dict[str, Any]]:
    """The listed entrants of ``pool``, best first (``rank`` counts from 1)."""
    rows = state.leaderboard(pool, min_matches)
    return [
        {
            "rank": index + 1,
            "entrant": row.name,
            "ordinal": round(row.rating.ordinal, 3),
            "mu": round(row.rating.mu, 3),
            "sigma": round(row.rating.sigma, 3),
            "matches": row.matches,
            "games": row.games,
            "win_share": round(row.wins / row.games, 4) if row.games else 0.0,
            "first": row.first,
            "forfeits": row.forfeits,
        }
        for index, row in enumerate(rows)
    ]


def status_json(state: LadderState, min_matches: int) -> dict[str, Any]:
    """What ``ramino ladder status --json`` prints."""
    config = state.config
    pools = {}
    for pool in _pools_of(state):
        standings = state.standings.get(pool, {})
        pools[pool] = {
            "results": sum(1 for result in state.order if result.pool == pool),
            "entrants_rated": len(standings),
            "listed": len(state.leaderboard(pool, min_matches)),
            "leaderboard": leaderboard_json(state, pool, min_matches),
        }
    last_refit = state.refits[-1] if state.refits else None
    return {
        "config": event_json(config) if config is not None else None,
        "entrants": _entrants_json(state),
        "scheduled": len(state.scheduled),
        "results": len(state.results),
        "cancelled": len(state.cancelled),
        "pending": [match.match_id for match in state.pending()],
        "min_matches": min_matches,
        "last_refit": event_json(last_refit) if last_refit is not None else None,
        "pools": pools,
    }


def _entrants_json(state: LadderState) -> list[dict[str, Any]]:
    rows = []
    for name, entrant in state.entrants.items():
        suspended = state.suspended.get(name)
        rows.append(
            {
                "name": name,
                "kind": entrant.kind,
                "spec": entrant.spec,
                "active": state.active[name],
                "failures": state.failing[name],
                "suspended_until": suspended.until if suspended is not None else 0.0,
                "suspended_for": suspended.reason if suspended is not None else "",
            }
        )
    return rows


def _history(state: LadderState, name: str, pool: str | None) -> list[dict[str, Any]]:
    rows = []
    for result in state.order:
        if name not in result.entrants or (pool is not None and result.pool != pool):
            continue
        index = result.entrants.index(name)
        mu, sigma = result.mu[index], result.sigma[index]
        rows.append(
            {
                "match": result.match_id,
                "pool": result.pool,
                "at": result.at,
                "opponents": [other for other in result.entrants if other != name],
                "rank": result.ranks[index],
                "wins": result.wins[index],
                "points": result.points[index],
                "games": result.games,
                "forfeited": bool(result.forfeits and result.forfeits[index]),
                "mu": round(mu, 4),
                "sigma": round(sigma, 4),
                "ordinal": round(mu - 3 * sigma, 4),
            }
        )
    return rows


def export_json(state: LadderState, name: str, refit: bool = True) -> dict[str, Any]:
    """The whole ladder: status, every pool's full standings and every result (and how far
    a batch refit is from the ratings, unless not ``refit``: ``None`` then)."""
    data = status_json(state, _min_matches(state, None))
    data["ladder"] = name
    data["refit_max_difference"] = max_refit_difference(state) if refit else None
    data["standings"] = {pool: leaderboard_json(state, pool, 0) for pool in state.standings}
    data["head_to_head"] = {
        pool: [row.as_json() for row in head_to_head(state.order, pool)] for pool in state.standings
    }
    data["matches"] = [event_json(result) for result in state.order]
    return data


# Handlers ----------------------------------------------------------------------------------


def _command_run(args: argparse.Namespace) -> int:
    from server.ladder.runner import ProcessRunner

    pools = parse_pools(args.pools)
    if args.matches < 0 or args.concurrency < 1:
        raise LadderError(
            "--matches must be 0 or more and --concurrency 1 or more", "ladder/bad_arguments"
        )
    if not 0 <= args.exploration <= MAX_EXPLORATION:
        raise LadderError(
            f"--exploration is a chance in [0, {MAX_EXPLORATION}]", "ladder/bad_arguments"
        )
    settings = RunSettings(
        pools=pools,
        matches=args.matches,
        concurrency=args.concurrency,
        seed=args.seed,
        pairing=PairingSettings(
            pair_cap_per_day=args.pair_cap,
            min_matches=args.min_matches,
            exploration=args.exploration,
        ),
        refit_every=args.refit_every,
    )

    recorded = [0]

    def report(result: MatchResult) -> None:
        recorded[0] += 1
        if args.json:
            print(json.dumps(event_json(result)), flush=True)
            return
        cells = ", ".join(
            f"{name} #{rank} ({_wins(wins)}, {points:g} pts)"
            for name, rank, wins, points in zip(
                result.entrants, result.ranks, result.wins, result.points
            )
        )
        print(f"{result.match_id} {result.pool}: {cells}", flush=True)

    async def work(ladder: Ladder) -> None:
        runner = ProcessRunner(settings.concurrency)
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if task is not None:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, task.cancel)
        try:
            await ladder.run(settings, runner, report)
        except asyncio.CancelledError:
            print("ladder stopped; pending matches are played at the next start", file=sys.stderr)
        finally:
            await runner.close()

    asyncio.run(_with_ladder(args.store, args.ladder, work, create=True))
    print(f"{recorded[0]} results recorded", file=sys.stderr)
    return 0


def _command_status(args: argparse.Namespace) -> int:
    state = asyncio.run(_with_ladder(args.store, args.ladder, _state))
    data = status_json(state, _min_matches(state, args.min_matches))
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"ladder {args.ladder}: {data['results']} results, {len(data['pending'])} pending,"
        f" {data['cancelled']} cancelled; entrants listed after {data['min_matches']} matches"
    )
    refit = data["last_refit"]
    if refit is not None:
        print(f"last refit at {refit['results']} results: max difference {refit['max_difference']}")
    for entrant in data["entrants"]:
        if entrant["suspended_until"]:
            until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(entrant["suspended_until"]))
            print(f"{entrant['name']} is suspended until {until}: {entrant['suspended_for']}")
    for pool, info in data["pools"].items():
        print()
        print(f"{pool}: {info['results']} results, {info['entrants_rated']} entrants rated")
        _print_board(info["leaderboard"], data["min_matches"])
    return 0


def _print_board(rows: list[dict[str, Any]], minimum: int) -> None:
    if not rows:
        print(
            f"  (nobody listed yet: an entrant is listed after {minimum} matches; --all lists all)"
        )
        return
    print(
        f"  {'#':>2} {'entrant':<16} {'mu-3s':>7} {'mu':>7} {'sigma':>6} {'matches':>7}"
        f" {'games won':>9}"
    )
    for row in rows:
        print(
            f"  {row['rank']:>2} {row['entrant']:<16} {row['ordinal']:>7.2f} {row['mu']:>7.2f}"
            f" {row['sigma']:>6.2f} {row['matches']:>7} {row['win_share']:>9.0%}"
        )


async def _state(ladder: Ladder) -> LadderState:
    return ladder.state


def _command_leaderboard(args: argparse.Namespace) -> int:
    state = asyncio.run(_with_ladder(args.store, args.ladder, _state))
    minimum = 0 if args.all else _min_matches(state, args.min_matches)
    pools = [args.pool] if args.pool else _pools_of(state)
    boards = {pool: leaderboard_json(state, pool, minimum) for pool in pools}
    if args.json:
        print(json.dumps(boards if not args.pool else boards[args.pool], indent=2))
        return 0
    for pool, rows in boards.items():
        print(f"{pool}:")
        _print_board(rows, minimum)
    return 0


def _command_entrants(args: argparse.Namespace) -> int:
    async def work(ladder: Ladder) -> LadderState:
        if args.action == "add":
            for name in args.names:
                await ladder.add_entrant(name)
        elif args.action == "remove":
            for name in args.names:
                await ladder.remove_entrant(name)
        return ladder.state

    if args.action != "list" and not args.names:
        raise LadderError(f"entrants {args.action} needs entrant names", "ladder/bad_arguments")
    state = asyncio.run(_with_ladder(args.store, args.ladder, work, create=args.action != "list"))
    rows = _entrants_json(state)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            shown = "active" if row["active"] else "removed"
            shown = "suspended" if row["suspended_until"] else shown
            print(f"{row['name']:<16} {row['kind']:<8} {row['spec']:<12} {shown}")
    return 0


def _command_history(args: argparse.Namespace) -> int:
    state = asyncio.run(_with_ladder(args.store, args.ladder, _state))
    if args.entrant not in state.entrants:
        raise LadderError(f"no entrant {args.entrant!r} on this ladder", "ladder/unknown_entrant")
    rows = _history(state, args.entrant, args.pool)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        print(
            f"{row['match']:<8} {row['pool']:<12} #{row['rank']} vs {', '.join(row['opponents'])}:"
            f" {_wins(row['wins'])}, {row['points']:g} pts -> mu {row['mu']:.2f}"
            f" sigma {row['sigma']:.2f} (ordinal {row['ordinal']:.2f})"
        )
    return 0


def compare_json(
    state: LadderState,
    first: str,
    second: str,
    pool: str | None,
    elo0: float,
    elo1: float,
    alpha: float,
    beta: float,
) -> dict[str, Any]:
    """The SPRT of ``first`` against ``second`` over the matches they shared (in ``pool``, or
    every pool): what ``ramino ladder compare --json`` prints.

    Raises:
        LadderError: an entrant the ladder does not have (``ladder/unknown_entrant``), the
            same entrant twice, or bad SPRT settings (``ladder/bad_arguments``).
    """
    from bots.duel import elo_from_score, sprt

    for name in (first, second):
        if name not in state.entrants:
            raise LadderError(f"no entrant {name!r} on this ladder", "ladder/unknown_entrant")
    if first == second:
        raise LadderError("compare needs two different entrants", "ladder/bad_arguments")
    scores = shared_scores(state.order, first, second, pool)
    try:
        test = sprt(scores, elo0, elo1, alpha, beta)
    except ValueError as error:
        raise LadderError(str(error), "ladder/bad_arguments") from None
    mean = sum(scores) / len(scores) if scores else None
    return {
        "first": first,
        "second": second,
        "pool": pool,
        "matches": len(scores),
        "score": round(mean, 4) if mean is not None else None,
        "elo": round(elo_from_score(mean), 1) if mean is not None and 0 < mean < 1 else None,
        "elo0": elo0,
        "elo1": elo1,
        "alpha": alpha,
        "beta": beta,
        "llr": round(test.llr, 4),
        "bounds": [round(test.lower, 4), round(test.upper, 4)],
        "verdict": test.verdict,
    }


def _command_compare(args: argparse.Namespace) -> int:
    state = asyncio.run(_with_ladder(args.store, args.ladder, _state))
    data = compare_json(
        state, args.first, args.second, args.pool, args.elo0, args.elo1, args.alpha, args.beta
    )
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    where = f"in {args.pool}" if args.pool else "in every pool"
    if not data["matches"]:
        print(f"{args.first} and {args.second} shared no match {where}")
    else:
        print(
            f"{args.first} against {args.second} {where}: {data['matches']} shared matches,"
            f" score {data['score']:.4f}"
        )
    verdict = {
        "H1": f"H1: {args.first} is at least {args.elo1:g} Elo stronger",
        "H0": f"H0: {args.first} is at most {args.elo0:g} Elo stronger",
        "continue": "continue: not decided yet, more matches are needed",
    }[data["verdict"]]
    print(
        f"SPRT elo0={args.elo0:g} elo1={args.elo1:g} alpha={args.alpha:g} beta={args.beta:g}:"
        f" LLR {data['llr']:.3f}, bounds [{data['bounds'][0]:.3f}, {data['bounds'][1]:.3f}]"
    )
    print(verdict)
    return 0


def _command_export(args: argparse.Namespace) -> int:
    state = asyncio.run(_with_ladder(args.store, args.ladder, _state))
    document = export_json(state, args.ladder)
    if args.html:
        from server.ladder.html import render_html

        with open(args.html, "w", encoding="utf-8") as file:
            file.write(render_html(document))
        if not args.output:
            return 0
    text = json.dumps(document, indent=2)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as file:
            file.write(text + "\n")
    else:
        print(text)
    return 0


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ladder`` and its subcommands to the ``ramino`` parser."""
    ladder = commands.add_parser("ladder", help="rate bots on a ladder (docs/ladder.md)")
    actions = ladder.add_subparsers(dest="ladder_command", required=True, metavar="ACTION")

    def common(parser: argparse.ArgumentParser, json_flag: bool = True) -> None:
        parser.add_argument("--store", required=True, metavar="URL", help=STORE_HELP)
        parser.add_argument("--ladder", default="main", metavar="NAME", help="default: main")
        if json_flag:
            parser.add_argument("--json", action="store_true", help="machine-readable output")

    run = actions.add_parser("run", help="play and rate matches")
    common(run)
    run.add_argument(
        "--pools",
        default=",".join(DEFAULT_POOLS),
        metavar="POOL,...",
        help=f"VARIANT-PLAYERS pools (default {','.join(DEFAULT_POOLS)})",
    )
    run.add_argument(
        "--matches", type=int, default=0, help="stop when the ladder holds N results (0: never)"
    )
    run.add_argument("--concurrency", type=int, default=1, help="matches played at once")
    run.add_argument("--seed", default="ladder", help="the seed of every match's deals")
    run.add_argument("--pair-cap", type=int, default=0, help="matches per pair per day (0: any)")
    run.add_argument(
        "--min-matches", type=int, default=DEFAULT_MIN_MATCHES, help="results before listed"
    )
    run.add_argument(
        "--exploration",
        type=float,
        default=PairingSettings().exploration,
        help=f"chance of seating the least-shared pair (at most {MAX_EXPLORATION})",
    )
    run.add_argument("--refit-every", type=int, default=100, help="results between refits")
    run.set_defaults(handler=_command_run)

    status = actions.add_parser("status", help="results, pending matches and leaderboards")
    common(status)
    status.add_argument("--min-matches", type=int, default=None)
    status.set_defaults(handler=_command_status)

    board = actions.add_parser("leaderboard", help="each pool's listed entrants, best first")
    common(board)
    board.add_argument("--pool", default=None, metavar="POOL")
    board.add_argument("--min-matches", type=int, default=None)
    board.add_argument("--all", action="store_true", help="list entrants with few results too")
    board.set_defaults(handler=_command_leaderboard)

    entrants = actions.add_parser("entrants", help="list, add or remove entrants")
    common(entrants)
    entrants.add_argument("action", choices=["list", "add", "remove"])
    entrants.add_argument("names", nargs="*", metavar="NAME@VERSION")
    entrants.set_defaults(handler=_command_entrants)

    history = actions.add_parser("history", help="an entrant's results and rating over time")
    common(history)
    history.add_argument("entrant", metavar="NAME@VERSION")
    history.add_argument("--pool", default=None)
    history.set_defaults(handler=_command_history)

    compare = actions.add_parser(
        "compare", help="SPRT of one entrant against another over their shared matches"
    )
    common(compare)
    compare.add_argument("first", metavar="A", help="the entrant tested as the stronger")
    compare.add_argument("second", metavar="B")
    compare.add_argument("--pool", default=None, help="only this pool (default: every pool)")
    compare.add_argument("--elo0", type=float, default=0.0, help="H0: A at most this (0)")
    compare.add_argument("--elo1", type=float, default=50.0, help="H1: A at least this (50)")
    compare.add_argument("--alpha", type=float, default=0.05, help="false H1 rate (0.05)")
    compare.add_argument("--beta", type=float, default=0.05, help="false H0 rate (0.05)")
    compare.set_defaults(handler=_command_compare)

    export = actions.add_parser("export", help="the whole ladder as JSON (or an HTML page)")
    common(export, json_flag=False)
    export.add_argument("--output", default="", metavar="FILE", help="default: standard output")
    export.add_argument(
        "--html",
        default="",
        metavar="FILE",
        help="write the leaderboard page there instead (with --output: the JSON too)",
    )
    export.set_defaults(handler=_command_export)
