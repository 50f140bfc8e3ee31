"""``ramino demo``: the embedded broker, the server on a SQLite store and bots playing several
tables of several variants, with a live view in the terminal.

Everything runs in this process and talks MQTT through the embedded broker exactly as remote
clients would. At the end (or on Ctrl-C) it stops everything cleanly and prints how to replay
a table and how to connect a client of your own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bots.client import Stats, TablePlan, TableProgress, run_bots
from bots.house import HouseBots
from protocol.runtime import tune_gc
from server.engine import make_rules
from server.net.serve import MEMORY, ServeConfig, running

__all__ = ["DEFAULT_PLANS", "DEMO_STORE", "DemoOptions", "run_demo"]

DEMO_STORE = "sqlite:///.ramino/demo.db"
"""The demo's store: a file under ``.ramino/`` in the current folder, kept between runs."""

DEFAULT_PLANS = (
    TablePlan("gin", 2),
    TablePlan("basic", 3),
    TablePlan("rummy500", 3),
    TablePlan("ramino", 4),
    TablePlan("knock", 2),
    TablePlan("block", 2),
)
"""The tables the demo opens: six tables, six presets, sixteen bots."""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``ramino demo`` runs."""

    store: str = DEMO_STORE
    port: int = 1883
    policy: str = "greedy"
    games: int = 1
    think_ms: float = 40.0
    plans: tuple[TablePlan, ...] = DEFAULT_PLANS
    refresh: float = 0.25
    metrics: str = ""
    """``HOST:PORT`` to serve the server's Prometheus metrics on ("": none)."""
    web: str = ""
    """``HOST:PORT`` of the web page ("": none). With it, house bots play against the people
    who open public tables there, and the demo runs until Ctrl-C."""


async def run_demo(options: DemoOptions, out: TextIO = sys.stdout) -> int:
    """Run the demo until every table has played its games, or until Ctrl-C."""
    _store_folder(options.store)
    stats = Stats()
    live = out.isatty()
    # The bots' names are the same every run, their passwords new: the guest names of this
    # private broker live as long as it does.
    config = ServeConfig(
        broker="embedded",
        store=options.store,
        port=options.port,
        guests=MEMORY,
        metrics=options.metrics,
        web=options.web,
    )
    async with running(config) as server:
        tune_gc()  # server and bots in one process: no long collector pauses
        broker = server.address.url
        print(f"Ramino demo: embedded broker on {broker}, store {options.store}", file=out)
        if server.metrics is not None:
            print(f"Metrics on port {server.metrics_port} (/metrics)", file=out)
        house: HouseBots | None = None
        if server.web_url:
            # The demo's own bots open their tables as demo-N: house bots leave those alone.
            house = HouseBots(broker, ignore_hosts=("demo-",))
            await house.start()
            print(
                f"Play in a browser: open {server.web_url} , create a public table and a"
                " bot takes the other seats.",
                file=out,
                flush=True,
            )
        print(
            f"{sum(p.seats for p in options.plans)} {options.policy} bots at "
            f"{len(options.plans)} tables; Ctrl-C stops.\n",
            file=out,
        )
        bots = asyncio.create_task(
            run_bots(
                broker,
                options.plans,
                policy=options.policy,
                games=options.games,
                think_ms=options.think_ms,
                prefix="demo",
                stats=stats,
            )
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signal.SIGINT, stop.set)
        stopper = asyncio.create_task(stop.wait())
        drawn = 0
        last_line = 0.0
        interrupted = False
        try:
            while not bots.done():
                await asyncio.wait(
                    {bots, stopper}, timeout=options.refresh, return_when="FIRST_COMPLETED"
                )
                if stop.is_set():
                    interrupted = True
                    bots.cancel()
                    break
                if live:
                    drawn = _draw(out, stats, drawn)
                elif time.monotonic() - last_line > 5:
                    last_line = time.monotonic()
                    print(stats.line(), file=out, flush=True)
            with contextlib.suppress(asyncio.CancelledError):
                await bots
        finally:
            stopper.cancel()
            with contextlib.suppress(NotImplementedError):
                loop.remove_signal_handler(signal.SIGINT)
        # What is left to do is closing connections: gmqtt would warn of each packet that no
        # longer has a socket to go to.
        logging.getLogger("gmqtt").setLevel(logging.ERROR)
        if live:
            _draw(out, stats, drawn)
        print(("\nStopped. " if interrupted else "\nDone. ") + stats.line(), file=out)
        stays_up = house is not None and not interrupted
        _epilogue(out, options, stats, broker, stays_up)
        if house is not None:
            if not interrupted:
                # Ctrl-C is caught before it is offered (a prompt reader may press it at once).
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(signal.SIGINT, stop.set)
                print(f"\nThe web page stays up at {server.web_url} ; Ctrl-C stops.", file=out)
                await stop.wait()
            await house.stop()
            if not interrupted:
                print("Stopping: the web page, the broker and the server.", file=out)
    return 130 if interrupted else 0


def _store_folder(store: str) -> None:
    if store.startswith("sqlite:///") and not store.startswith("sqlite:////"):
        Path(store.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


def _bar(fraction: float, width: int = 20) -> str:
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "#" * filled + "-" * (width - filled)


def _fraction(progress: TableProgress) -> float:
    if progress.status == "finished":
        return 1.0
    try:
        rules = make_rules(progress.variant, {}, max(2, len(progress.players)))
    except Exception:  # a preset that needs options we do not pass: show hands only
        return 0.0
    if rules.target:
        best = max((abs(float(score.split("/")[0])) for score in progress.scores), default=0.0)
        return best / rules.target
    if rules.deals:
        return progress.hand / rules.deals
    return 0.0


def _rows(stats: Stats) -> list[str]:
    rows = [stats.line()]
    for progress in sorted(stats.tables.values(), key=lambda item: item.variant):
        scores = " / ".join(progress.scores) or "-"
        rows.append(
            f"  {progress.variant:<9} {progress.table}  [{_bar(_fraction(progress))}] "
            f"hand {progress.hand:<3} games {progress.games}  {progress.status:<9} "
            f"scores {scores}"
        )
    return rows


def _draw(out: TextIO, stats: Stats, drawn: int) -> int:
    """Redraw the live view in place; return how many lines it has."""
    rows = _rows(stats)
    if drawn:
        out.write(f"\x1b[{drawn}F")
    for row in rows:
        out.write("\x1b[2K" + row + "\n")
    out.flush()
    return len(rows)


def _runnable(path: Path) -> str:
    """``path`` as the user would type it here: relative below the current directory."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _epilogue(out: TextIO, options: DemoOptions, stats: Stats, broker: str, stays_up: bool) -> None:
    """What to do next. ``stays_up``: the web page, and so the broker, keep serving."""
    tables: Sequence[TableProgress] = list(stats.tables.values())
    bin_dir = Path(sys.executable).parent
    ramino, python = _runnable(bin_dir / "ramino"), _runnable(bin_dir / "python")
    if tables:
        table = tables[0].table
        print(
            f"\nReplay a table move by move:\n"
            f"  {ramino} replay --store {options.store} --table {table}\n"
            f"List every table of the store:\n"
            f"  {ramino} tables --store {options.store}",
            file=out,
        )
    client = _runnable(Path(__file__).resolve().parent.parent / "examples" / "random_client.py")
    if stays_up:
        print(
            "\nPlay against the bots yourself while the page is up: connect any MQTT client as"
            " described in docs/protocol.md\nto this demo's broker, which serves until Ctrl-C:"
            f" {broker}; for example:\n"
            f"  {python} {client} --broker {broker} --user me --password any --create knock\n"
            "and a house bot takes the other seat of the table, as on the web page.",
            file=out,
        )
        return
    print(
        f"\nPlay against the server yourself: `{ramino} serve` runs it (embedded broker,"
        " guests welcome) and prints its broker's address;\nthen connect any MQTT client as"
        " described in docs/protocol.md to that address (1883 when it is free), for example:\n"
        f"  {python} {client} --broker mqtt://127.0.0.1:PORT --user me --password any"
        " --create knock\n"
        "and a second player, in another terminal, with --user you --join TABLE (the id the"
        f" first prints).\n(this demo's broker, {broker}, stopped with it).",
        file=out,
    )
