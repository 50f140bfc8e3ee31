"""The bot subcommands of ``ramino``: ``demo`` and ``bots``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time

from bots.client import Stats, TablePlan, run_bots
from bots.demo import DEMO_STORE, DemoOptions, run_demo
from protocol.runtime import tune_gc
from protocol.transport import TransportError
from server.engine import VARIANTS, find_variant
from server.net.commands import SecretError, read_secret
from server.net.embedded import BrokerPortBusy
from server.net.logs import configure_logging
from server.net.metrics import BotMetrics, MetricsAddressError, parse_listen, serve_metrics

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``demo`` and ``bots`` on the ``ramino`` parser."""
    demo = commands.add_parser(
        "demo",
        help="embedded broker + server + bots playing several tables, with a live view",
    )
    demo.add_argument("--store", default=DEMO_STORE, help="(%(default)s)")
    demo.add_argument(
        "--port", type=int, default=1883, help="embedded broker port (a free one if taken)"
    )
    demo.add_argument("--policy", default="greedy", help="bot policy (%(default)s)")
    demo.add_argument("--games", type=int, default=1, help="games per table (%(default)s)")
    demo.add_argument(
        "--think-ms", type=float, default=40.0, help="pause before each move (%(default)s)"
    )
    demo.add_argument(
        "--metrics", default="", metavar="HOST:PORT", help="serve the server's Prometheus metrics"
    )
    demo.set_defaults(handler=_command_demo)

    bots = commands.add_parser(
        "bots", help="run headless bot players against a server, like any client"
    )
    bots.add_argument("--broker", default="mqtt://127.0.0.1:1883", help="(%(default)s)")
    bots.add_argument("--count", type=int, default=2, help="how many bots (%(default)s)")
    bots.add_argument("--policy", default="greedy", help="random, greedy, simple, heuristic, mc")
    bots.add_argument("--variant", default="gin", choices=sorted(VARIANTS))
    bots.add_argument(
        "--seats", type=int, default=0, help="bots per table (default: the fewest players)"
    )
    bots.add_argument(
        "--tables",
        nargs="+",
        default=["auto"],
        metavar="auto|ID",
        help="'auto' opens tables; IDs seat the bots at those tables",
    )
    bots.add_argument("--think-ms", type=float, default=0.0)
    bots.add_argument("--games", type=int, default=1, help="games per table (%(default)s)")
    password = bots.add_mutually_exclusive_group()
    password.add_argument(
        "--password-file",
        metavar="PATH",
        help="file holding the bots' password (Mosquitto accounts, or guest names to log in "
        "with again; default: a random one per bot)",
    )
    password.add_argument(
        "--password", default="", help="the bots' password on the command line (shows in ps)"
    )
    bots.add_argument("--prefix", default="", help="bot names are PREFIX-1, PREFIX-2, ...")
    bots.add_argument(
        "--metrics", default="", metavar="HOST:PORT", help="serve the bots' Prometheus metrics"
    )
    bots.set_defaults(handler=_command_bots)


def _command_demo(args: argparse.Namespace) -> int:
    configure_logging("text", "warning")
    options = DemoOptions(
        store=args.store,
        port=args.port,
        policy=args.policy,
        games=args.games,
        think_ms=args.think_ms,
        metrics=args.metrics,
    )
    try:
        return asyncio.run(run_demo(options))
    except (BrokerPortBusy, MetricsAddressError) as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2


def _command_bots(args: argparse.Namespace) -> int:
    configure_logging("auto", "warning")
    seats = args.seats or max(2, find_variant(args.variant).min_players)
    tables = [] if args.tables == ["auto"] else list(args.tables)
    count = args.count
    if tables:
        count = max(count, seats * len(tables))
    plans = [TablePlan(args.variant, seats) for _ in range(max(1, count // seats))]
    stats = Stats()
    try:
        if args.password_file:
            args.password = read_secret(args.password_file)
        return asyncio.run(_bots_with_metrics(args, plans, tables, stats))
    except SecretError as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2
    except (TransportError, MetricsAddressError) as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2


async def _bots_with_metrics(
    args: argparse.Namespace, plans: list[TablePlan], tables: list[str], stats: Stats
) -> int:
    if not args.metrics:
        return await _bots(args, plans, tables, stats)
    listen = parse_listen(args.metrics)
    stats.metrics = BotMetrics(games=lambda: stats.games)
    async with serve_metrics(stats.metrics, *listen) as port:
        print(f"metrics on port {port} (/metrics)", file=sys.stderr, flush=True)
        return await _bots(args, plans, tables, stats)


async def _bots(
    args: argparse.Namespace, plans: list[TablePlan], tables: list[str], stats: Stats
) -> int:
    tune_gc()  # many clients in one process: no long collector pauses
    task = asyncio.create_task(
        run_bots(
            args.broker,
            plans,
            policy=args.policy,
            games=args.games,
            think_ms=args.think_ms,
            password=args.password,
            prefix=args.prefix,
            stats=stats,
            tables=tables,
        )
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
    stopper = asyncio.create_task(stop.wait())
    last = 0.0
    while not task.done() and not stop.is_set():
        await asyncio.wait({task, stopper}, timeout=1.0, return_when="FIRST_COMPLETED")
        if time.monotonic() - last >= 5 or task.done():
            last = time.monotonic()
            print(stats.line(), file=sys.stderr, flush=True)
    stopper.cancel()
    if stop.is_set():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        print("stopped: " + stats.line(), file=sys.stderr)
        return 130
    await task
    print(stats.line())
    return 1 if stats.errors else 0
