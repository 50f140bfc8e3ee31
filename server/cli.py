"""The ``ramino`` command.

Subcommands: ``variants`` (presets and options), ``simulate`` (random playouts with invariant
checks) and ``demo`` (a game played by bots, printed move by move); over an event store,
``tables`` (every table), ``replay`` (a table's log as one viewer saw it, as text or JSON) and
``verify-deal`` (the fairness check of each hand's deck), ``ladder`` (bot ladders,
docs/ladder.md); ``loadtest`` runs a Locust load test
scenario (loadtest/README.md). Exit status: 0 on success, 1 when a simulation finds invariant
violations, a deal fails its check or a load test misses a threshold, 2 for bad arguments,
variants, options, stores or replay requests (the message names the error code).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from protocol.errors import CodedError
from server.engine import (
    OPTIONS,
    VARIANTS,
    Command,
    EngineError,
    HandEnded,
    State,
    advance,
    evolve,
    find_variant,
    format_cards,
    is_over,
    legal_actions,
    make_rules,
    new_game,
    redact,
    view,
)
from server.engine.variants import parse_option_value
from server.narration import describe_event

if TYPE_CHECKING:
    from server.tables.replay import LogRow

__all__ = ["main"]


class WatchError(CodedError):
    """``ramino watch`` asked for bots it cannot seat (code ``watch/*``)."""

    default_code = "watch/invalid"


def _parse_options(pairs: Sequence[str]) -> dict[str, object]:
    options: dict[str, object] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator:
            raise EngineError(f"an option is KEY=VALUE, got {pair!r}", "variant/bad_option")
        options[key.strip()] = parse_option_value(key.strip(), value)
    return options


def _variants_json() -> list[dict[str, Any]]:
    result = []
    for preset in VARIANTS.values():
        options = []
        for name in preset.options:
            spec = OPTIONS[name]
            options.append(
                {
                    "name": name,
                    "type": spec.kind,
                    "choices": list(spec.choices),
                    "default": preset.defaults.get(name),
                    "help": spec.help,
                }
            )
        result.append(
            {
                "name": preset.name,
                "title": preset.title,
                "description": preset.description,
                "players": [preset.min_players, preset.max_players],
                "options": options,
            }
        )
    return result


def _command_variants(args: argparse.Namespace) -> int:
    data = _variants_json()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    for preset in data:
        low, high = preset["players"]
        print(f"{preset['name']} - {preset['title']} ({low}-{high} players)")
        print(f"  {preset['description']}")
        for option in preset["options"]:
            spec = OPTIONS[option["name"]]
            default = option["default"]
            shown = "unlimited" if default is None else json.dumps(default)
            print(f"  --option {option['name']}=...  [{spec.describe_type()}] default {shown}")
        print()
    return 0


def _command_simulate(args: argparse.Namespace) -> int:
    from server.simulation import simulate

    options = _parse_options(args.option)

    def progress(number: int, _outcome: object) -> None:
        if not args.json and args.games >= 20 and (number + 1) % max(1, args.games // 10) == 0:
            print(f"  {number + 1}/{args.games} games", file=sys.stderr)

    summary = simulate(
        args.variant,
        args.players,
        args.games,
        seed=args.seed,
        options=options,
        check=not args.no_check,
        on_game=progress,
    )
    data = summary.as_json()
    if args.json:
        print(json.dumps(data, sort_keys=True))
    else:
        print(f"variant {summary.variant}, {summary.players} players, seed {summary.seed}")
        print(
            f"games {summary.completed}/{summary.games} completed, {summary.hands} hands,"
            f" {summary.moves} moves in {summary.seconds:.2f} s"
            f" ({summary.games_per_s:.1f} games/s)"
        )
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(summary.end_reasons.items()))
        print(f"hands ended: {reasons}; rummies {summary.rummies}")
        print("wins by seat: " + ", ".join(f"{w:g}" for w in summary.wins))
        print(f"invariant violations: {summary.invariant_violations}")
        for line in summary.violations[:10]:
            print(f"  {line}")
    return 1 if summary.invariant_violations else 0


def _command_watch(args: argparse.Namespace) -> int:
    from bots.policies import checked_policy

    if args.preset:
        args.variant = args.preset
    players = args.players
    if players is None:
        preset = find_variant(args.variant)
        players = max(preset.min_players, min(3, preset.max_players))
    rules = make_rules(args.variant, _parse_options(args.option), players)
    specs = [spec.strip() for spec in args.policies.split(",") if spec.strip()]
    if len(specs) == 1:
        specs *= players
    if len(specs) != players:
        raise WatchError(
            f"--policies names one policy or one per seat ({players}), got {len(specs)}",
            "watch/bad_policies",
        )
    policies = [checked_policy(spec, rules, WatchError) for spec in specs]
    if len(set(specs)) == 1:
        names = [f"bot{seat + 1}" for seat in range(players)]
        print(f"{rules.preset} with {players} {specs[0]} bots (seed {args.seed})")
    else:
        names = [f"{spec}({seat + 1})" for seat, spec in enumerate(specs)]
        print(f"{rules.preset}: {', '.join(names)} (seed {args.seed})")
    rng = random.Random(args.seed)
    choices = [random.Random(f"{args.seed}:{seat}") for seat in range(players)]
    state = new_game(rules)

    def choose(state: State, seat: int) -> Command:
        actions = legal_actions(state, seat)
        return policies[seat].choose(rules, view(state, seat), actions, choices[seat])

    while not is_over(state):
        for event in advance(state, rng, choose):
            print("  " + describe_event(event, names, len(state.melds)))
            for watcher, policy in enumerate(policies):
                policy.observe(watcher, redact(state, event, watcher))
            state = evolve(state, event)
            if args.show_hands and state.turn >= 0 and not isinstance(event, HandEnded):
                hand = format_cards(state.hands[state.turn])
                print(f"      {names[state.turn]} holds {hand}")
    return 0


def _command_duel(args: argparse.Namespace) -> int:
    from bots.duel import run_command

    return run_command(args, _parse_options(args.option))


async def _read_log(url: str, table_id: str) -> list[LogRow]:
    from server.tables.replay import open_existing_store, read_rows

    store = await open_existing_store(url)
    try:
        return await read_rows(store, table_id)
    finally:
        await store.close()


def _command_replay(args: argparse.Namespace) -> int:
    from server.tables.replay import format_line, parse_viewer, replay_rows

    rows = asyncio.run(_read_log(args.store, args.table))
    viewer = parse_viewer(args.viewer, rows)
    lines = replay_rows(rows, viewer, hand=args.hand, to_seq=args.to, game=args.game)
    for line in lines:
        print(json.dumps(line.to_json()) if args.format == "json" else format_line(line))
    return 0


def _command_verify_deal(args: argparse.Namespace) -> int:
    from server.tables.replay import format_deal_check, verify_deals

    rows = asyncio.run(_read_log(args.store, args.table))
    checks = verify_deals(rows, hand=args.hand, game=args.game)
    if args.json:
        print(json.dumps([check.to_json() for check in checks], indent=2))
    else:
        for check in checks:
            print(format_deal_check(check))
        if not checks:
            print(f"table {args.table}: no hand has been dealt yet")
    return 1 if any(check.mismatch for check in checks) else 0


def _command_tables(args: argparse.Namespace) -> int:
    from server.tables.replay import format_summary, open_existing_store, summary_to_json
    from server.tables.store import TableSummary

    async def read() -> list[TableSummary]:
        store = await open_existing_store(args.store)
        try:
            return await store.tables()
        finally:
            await store.close()

    summaries = asyncio.run(read())
    if args.json:
        print(json.dumps([summary_to_json(summary) for summary in summaries], indent=2))
    else:
        for line in format_summary(summaries):
            print(line)
    return 0


def _command_loadtest(args: argparse.Namespace) -> int:
    from loadtest.run import run_command

    return run_command(args)


def _add_loadtest(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    scenarios = ("steady", "join-storm", "reconnect-storm", "chat", "hostile", "mixed")
    loadtest = commands.add_parser(
        "loadtest",
        help="run a Locust load test scenario and check its thresholds (loadtest/README.md)",
    )
    loadtest.add_argument("--scenario", choices=scenarios, default="steady")
    loadtest.add_argument("--host", help="the broker under test, mqtt://HOST:PORT")
    loadtest.add_argument(
        "--local", action="store_true", help="start a server (and broker) here to test"
    )
    loadtest.add_argument(
        "--mosquitto", action="store_true", help="with --local: Mosquitto, not the embedded one"
    )
    loadtest.add_argument("-u", "--users", type=int, default=0, help="players (scenario's)")
    loadtest.add_argument("-r", "--spawn-rate", type=float, default=0.0, help="players a second")
    loadtest.add_argument("-t", "--run-time", default="", help="e.g. 90s, 5m (scenario's)")
    loadtest.add_argument("--processes", type=int, default=0, help="Locust worker processes")
    loadtest.add_argument("--password", default="", help="password of the load players")
    loadtest.add_argument("--policy", default="greedy", choices=("random", "greedy"))
    loadtest.add_argument("--games", type=int, default=2, help="games per table")
    loadtest.add_argument("--variants", default="", help="only these variants, comma-separated")
    loadtest.add_argument("--csv", default="", metavar="PREFIX", help="Locust's CSV files")
    loadtest.add_argument("--html", default="", metavar="FILE", help="Locust's HTML report")
    loadtest.add_argument(
        "--p99-ms", type=float, default=1000.0, help="threshold: p99 of command -> reply"
    )
    loadtest.add_argument(
        "--max-error-rate", type=float, default=0.01, help="threshold: failed requests share"
    )
    loadtest.add_argument(
        "--generator-cpu-limit",
        type=float,
        default=90.0,
        metavar="PERCENT",
        help="a player process above this share of a core is reported saturated",
    )
    loadtest.add_argument(
        "--think", type=float, default=0.0, help="mean seconds a player waits before a move"
    )
    loadtest.add_argument(
        "--timeline", default="", metavar="FILE", help="figures every 10 s as CSV (a soak)"
    )
    loadtest.add_argument(
        "--timeline-every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds between the timeline's rows (at least 1)",
    )
    loadtest.add_argument(
        "--store", default="", metavar="URL", help="with --local: the server's store URL"
    )
    loadtest.set_defaults(handler=_command_loadtest)


def _add_ladder(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from server.ladder.commands import add_commands

    add_commands(commands)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ramino`` command."""
    parser = argparse.ArgumentParser(
        prog="ramino", description="Ramino: an authoritative server for rummy-family card games."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from bots.commands import add_commands as add_bot_commands
    from server.net.commands import add_commands as add_net_commands

    add_net_commands(commands)
    add_bot_commands(commands)
    _add_loadtest(commands)
    _add_ladder(commands)

    variants = commands.add_parser("variants", help="list every preset with its options")
    variants.add_argument("--json", action="store_true", help="machine-readable output")
    variants.set_defaults(handler=_command_variants)

    simulate = commands.add_parser(
        "simulate", help="play random games and check the engine's invariants after every event"
    )
    simulate.add_argument("--variant", required=True)
    simulate.add_argument("--players", type=int, default=2)
    simulate.add_argument("--games", type=int, default=100)
    simulate.add_argument("--seed", default="0")
    simulate.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="a table option"
    )
    simulate.add_argument("--json", action="store_true", help="end with one JSON summary line")
    simulate.add_argument(
        "--no-check", action="store_true", help="skip the invariant checks (measure raw speed)"
    )
    simulate.set_defaults(handler=_command_simulate)

    demo = commands.add_parser(
        "watch", help="watch bots play one game in this process, move by move (no network)"
    )
    demo.add_argument(
        "preset", nargs="?", default=None, help="the variant (`ramino variants` lists them)"
    )
    demo.add_argument("--variant", default="basic", help="the same, as an option (default basic)")
    demo.add_argument(
        "--players", type=int, default=None, help="default: 3, or what the variant allows"
    )
    demo.add_argument("--seed", default="demo")
    demo.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    demo.add_argument(
        "--show-hands", action="store_true", help="print the hand of the seat to move"
    )
    demo.add_argument(
        "--policies",
        default="greedy",
        metavar="A[,B,...]",
        help="the bots: one policy for every seat or one per seat (default greedy;"
        " random, greedy, simple, heuristic, mc, mc:MS:v3, ...)",
    )
    demo.set_defaults(handler=_command_watch)

    duel = commands.add_parser(
        "duel", help="duplicate duels between bot policies, played in-process"
    )
    duel.add_argument("--variant", required=True)
    duel.add_argument("--players", type=int, default=2)
    duel.add_argument(
        "--policies", required=True, metavar="A,B[,...]", help="random, greedy, simple, ..."
    )
    duel.add_argument("--deals", type=int, default=100, help="deals, each in every seat order")
    duel.add_argument("--seed", default="0")
    duel.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    duel.add_argument(
        "--target", type=int, default=None, metavar="POINTS", help="whole games to POINTS"
    )
    duel.add_argument("--game", action="store_true", help="whole games (default: one hand)")
    duel.add_argument("--eaai", action="store_true", help="gin: EAAI scoring (no box bonuses)")
    duel.add_argument("--orders", choices=["auto", "all", "cyclic"], default="auto")
    duel.add_argument("--jobs", type=int, default=1, help="worker processes")
    duel.add_argument("--sprt", default=None, metavar="ELO0,ELO1", help="SPRT of A against B")
    duel.add_argument("--json", action="store_true", help="one JSON summary")
    duel.set_defaults(handler=_command_duel)

    store_help = "sqlite:///relative.db, sqlite:////abs/path.db or postgresql://user@host/db"
    tables = commands.add_parser("tables", help="list the tables of an event store")
    tables.add_argument("--store", required=True, metavar="URL", help=store_help)
    tables.add_argument("--json", action="store_true", help="machine-readable output")
    tables.set_defaults(handler=_command_tables)

    replay = commands.add_parser(
        "replay", help="a table's log as one seat, a spectator or everyone may see it"
    )
    replay.add_argument("--store", required=True, metavar="URL", help=store_help)
    replay.add_argument("--table", required=True, metavar="ID")
    replay.add_argument(
        "--game", type=int, default=None, metavar="G", help="only game G (a rematch is game 2)"
    )
    replay.add_argument(
        "--hand", type=int, default=None, metavar="N", help="only hand N (of the last game)"
    )
    replay.add_argument("--to", type=int, default=None, metavar="SEQ", help="stop at seq SEQ")
    replay.add_argument(
        "--as",
        dest="viewer",
        default="spectator",
        metavar="SEAT|spectator|all",
        help="a seat number or player name, a spectator (default), or all (finished hands only)",
    )
    replay.add_argument("--format", choices=["text", "json"], default="text")
    replay.set_defaults(handler=_command_replay)

    verify = commands.add_parser(
        "verify-deal", help="check each revealed deck against the commitment made before the deal"
    )
    verify.add_argument("--store", required=True, metavar="URL", help=store_help)
    verify.add_argument("--table", required=True, metavar="ID")
    verify.add_argument("--game", type=int, default=None, metavar="G")
    verify.add_argument(
        "--hand", type=int, default=None, metavar="N", help="only hand N (of the last game)"
    )
    verify.add_argument("--json", action="store_true", help="machine-readable output")
    verify.set_defaults(handler=_command_verify_deal)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ramino`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.handler(args)
    except CodedError as error:
        print(f"ramino: error [{error.code}]: {error.message}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    return status


if __name__ == "__main__":
    sys.exit(main())
