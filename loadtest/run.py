"""``ramino loadtest``: run a named scenario of ``loadtest/locustfile.py`` and judge it.

With ``--local`` it first starts a server of its own on this machine (``ramino serve`` on a
SQLite store in a temporary folder), on the embedded broker or, with ``--mosquitto``, on a
Mosquitto started from ``deploy/mosquitto/`` with an account for every load player. Then it
runs Locust headless (``python -m locust``, with ``--processes`` for several worker processes),
prints Locust's report and the summary, and exits 1 when a threshold is missed (the p99 of
command -> reply, the error rate), 0 otherwise. Locust itself is never imported here: it patches
the standard library with gevent as it is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SCENARIOS", "Scenario", "locust_command", "run_command"]

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILE = Path(__file__).resolve().with_name("locustfile.py")
DEPLOY = ROOT / "deploy" / "mosquitto"
START_SECONDS = 60.0
"""Longest the local broker or server may take to start."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named load: its Locust user classes and default size."""

    classes: tuple[str, ...]
    users: int
    spawn_rate: float
    run_time: str
    help: str


SCENARIOS: dict[str, Scenario] = {
    "steady": Scenario(("SteadyPlayer",), 60, 10, "2m", "steady play, mixed variants and sizes"),
    "join-storm": Scenario(
        ("JoinStormPlayer",), 100, 100, "1m", "everyone arrives at once, new connection a table"
    ),
    "reconnect-storm": Scenario(
        ("ReconnectPlayer",), 60, 20, "2m", "every player drops at once every 20 s and resyncs"
    ),
    "chat": Scenario(("ChatPlayer",), 60, 10, "2m", "play and chat, chat lines timed"),
    "hostile": Scenario(
        ("SteadyPlayer", "HostilePlayer"), 60, 10, "2m", "steady play with 1 hostile in 13"
    ),
    "mixed": Scenario(
        (
            "SteadyPlayer",
            "JoinStormPlayer",
            "ReconnectPlayer",
            "ChatPlayer",
            "HostilePlayer",
        ),
        60,
        10,
        "2m",
        "all of the above by their weights",
    ),
}


def locust_command(
    args: argparse.Namespace, scenario: Scenario, host: str, summary: Path, prefix: str = ""
) -> list[str]:
    """The ``locust`` command line of a run (the players' password goes in the environment,
    ``LOCUST_RAMINO_PASSWORD``: a command line shows in ps)."""
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--only-summary",
        "-u",
        str(args.users or scenario.users),
        "-r",
        str(args.spawn_rate or scenario.spawn_rate),
        "-t",
        args.run_time or scenario.run_time,
        "--stop-timeout",
        "5",
        "--host",
        host,
        "--ramino-summary",
        str(summary),
        "--ramino-p99-ms",
        str(args.p99_ms),
        "--ramino-max-error-rate",
        str(args.max_error_rate),
        "--ramino-generator-cpu-limit",
        str(args.generator_cpu_limit),
        "--ramino-policy",
        args.policy,
        "--ramino-games",
        str(args.games),
    ]
    if prefix:
        command += ["--ramino-prefix", prefix]
    if args.variants:
        command += ["--ramino-variants", args.variants]
    if getattr(args, "think", 0.0):
        command += ["--ramino-think", str(args.think)]
    if getattr(args, "timeline", ""):
        command += ["--ramino-timeline", args.timeline]
        command += ["--ramino-timeline-every", str(getattr(args, "timeline_every", 10.0))]
        if getattr(args, "server_metrics", ""):
            command += ["--ramino-server-metrics", args.server_metrics]
    if args.csv:
        command += ["--csv", args.csv]
    if args.html:
        command += ["--html", args.html]
    if args.processes:
        # The master and its workers talk over loopback only: no port open to the network.
        command += ["--processes", str(args.processes), "--master-bind-host", "127.0.0.1"]
    return command + list(scenario.classes)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _stop(process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"the broker did not listen on 127.0.0.1:{port}")


@contextlib.contextmanager
def _mosquitto(folder: Path, names: Sequence[str], password: str) -> Iterator[tuple[int, str]]:
    """Mosquitto with deploy/mosquitto's config on a free port, the server account and
    ``names`` (all with ``password``); yields its port and the server's password."""
    from server.net.accounts import Accounts, local_mosquitto_config, random_password
    from server.net.embedded import SERVER_USER
    from server.net.mosquitto_plugin import PluginUnavailable, build_plugin

    binary = shutil.which("mosquitto")
    if binary is None:
        raise RuntimeError("--mosquitto needs the mosquitto binary (apt install mosquitto)")
    server_password = random_password()
    accounts = Accounts()
    accounts.add(SERVER_USER, server_password)
    for name in names:
        accounts.add(name, password)
    accounts.save(folder / "passwords")
    shutil.copyfile(DEPLOY / "acl", folder / "acl")
    port = _free_port()
    try:
        plugin: Path | None = build_plugin(folder)
    except PluginUnavailable as error:
        print(f"ramino loadtest: Mosquitto runs without its publish rate plugin: {error}")
        plugin = None
    (folder / "mosquitto.conf").write_text(
        local_mosquitto_config(
            DEPLOY / "mosquitto.conf",
            port,
            "127.0.0.1",
            folder / "passwords",
            folder / "acl",
            plugin=plugin,
        )
    )
    with (folder / "mosquitto.log").open("ab") as log:
        process = subprocess.Popen(
            [binary, "-c", str(folder / "mosquitto.conf")], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        _wait_for_port(port, process)
        yield port, server_password
    finally:
        _stop(process)


@contextlib.contextmanager
def _server(arguments: Sequence[str], env: dict[str, str]) -> Iterator[str]:
    """``ramino serve ARGUMENTS`` with ``env`` added to its environment; yields the broker URL
    it announces once ready."""
    process = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve", *arguments],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError("ramino serve did not start in time") from None
            found = re.search(r"serving on .*?(mqtt://[\w.:-]+)", line)
            if found:
                yield found.group(1)
                return
    finally:
        _stop(process)


def player_names(prefix: str, workers: int, users: int) -> list[str]:
    """The names the load players of a run take: ``PREFIX<worker>-<n>``."""
    return [f"{prefix}{worker}-{n}" for worker in range(workers) for n in range(1, users + 1)]


def run_command(args: argparse.Namespace) -> int:
    """Run ``ramino loadtest``; the exit status (0 pass, 1 a threshold missed, 2 bad use)."""
    scenario = SCENARIOS[args.scenario]
    with contextlib.ExitStack() as stack:
        password = args.password or os.environ.get("RAMINO_LOADTEST_PASSWORD", "")
        # Made up: on a guest-mode server the first password binds a name, so the names are
        # fresh ones too.
        prefix = "" if password or args.local else f"load-{secrets.token_hex(3)}-"
        password = password or secrets.token_urlsafe(12)
        secret_env: dict[str, str] = {}
        if args.local:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ramino-lt-")))
            store = ["--store", getattr(args, "store", "") or f"sqlite:///{folder / 'events.db'}"]
            if args.mosquitto:
                users = args.users or scenario.users
                names = player_names("load", max(1, args.processes or 1), users)
                port, server_password = stack.enter_context(_mosquitto(folder, names, password))
                serve = ["--broker", f"mqtt://127.0.0.1:{port}"]
                secret_env["RAMINO_SERVER_PASSWORD"] = server_password  # not in ps
            else:
                serve = ["--port", str(_free_port())]
            # The server's info lines (one per table change) would drown Locust's report.
            quiet = ["--log-level", "warning"]
            if getattr(args, "timeline", ""):
                metrics_port = _free_port()
                serve += ["--metrics", f"127.0.0.1:{metrics_port}"]
                args.server_metrics = f"http://127.0.0.1:{metrics_port}/metrics"
            host = stack.enter_context(_server([*serve, *store, *quiet], secret_env))
            print(f"ramino loadtest: local server on {host}", flush=True)
        elif args.host:
            host = args.host
        else:
            print("ramino loadtest: name the broker with --host, or use --local", file=sys.stderr)
            return 2
        summary = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "summary.json"
        command = locust_command(args, scenario, host, summary, prefix)
        players_env = {**os.environ, "LOCUST_RAMINO_PASSWORD": password}
        status = subprocess.run(command, check=False, env=players_env).returncode
        if not summary.exists():
            print(f"ramino loadtest: locust ended ({status}) without a summary", file=sys.stderr)
            return 1
        data = json.loads(summary.read_text())
    passed = bool(data["passed"]) and status == 0
    print(
        f"ramino loadtest: scenario {args.scenario}: {'PASS' if passed else 'FAIL'} "
        f"(p99 command -> reply {data['p99_command_ms']:.0f} ms, limit {args.p99_ms:.0f} ms; "
        f"error rate {data['error_rate']:.4%}, limit {args.max_error_rate:.2%}; "
        f"{data['games_finished']} games finished"
        f"{'; LOAD GENERATOR SATURATED' if data.get('generator_saturated') else ''})"
    )
    return 0 if passed else 1
