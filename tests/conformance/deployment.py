"""The deployments the conformance suite talks to.

Either one given on the command line (``--broker mqtt://HOST:PORT`` with ``--user NAME:PASSWORD``
accounts), or one this module starts the way an operator would: ``ramino serve`` as a
subprocess, with its embedded broker in guest mode, or with Mosquitto running
``deploy/mosquitto/``'s config and a password file written here. Only the CLI is used; the
project's packages are never imported.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conformance.wire import Account

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "mosquitto"
HOST = "127.0.0.1"
START_SECONDS = 20.0
"""How long a broker or server may take to start or stop."""
GRACE_SECONDS = 1.0
"""The disconnect grace of the servers started here (``--grace-seconds``)."""
CLAIM_SECONDS = 3.0
"""The claim window of the servers started here (``--claim-seconds``)."""
SERVER_USER = "ramino-server"
MOSQUITTO_ACCOUNTS = 300
"""Accounts written into Mosquitto's password file: enough for every test to use fresh names."""


@dataclass
class Deployment:
    """A server reachable over MQTT, and the accounts the suite may log in with.

    ``own`` is true for a server this suite started (and may stop); ``grace_seconds`` is the
    server's disconnect grace as far as the suite knows it.
    """

    kind: str
    host: str
    port: int
    accounts: list[Account]
    own: bool
    grace_seconds: float
    _used: int = 0

    def take(self, count: int = 1) -> list[Account]:
        """``count`` distinct accounts, fresh ones while any are left (given accounts are
        reused in turn).

        Raises:
            ValueError: fewer accounts than ``count`` exist.
        """
        if count > len(self.accounts):
            raise ValueError(f"{count} accounts wanted, {len(self.accounts)} given (--user)")
        start = self._used
        self._used += count
        return [self.accounts[(start + offset) % len(self.accounts)] for offset in range(count)]


def mosquitto_hash(password: str) -> str:
    """A Mosquitto 2 ``password_file`` entry's hash: ``$7$101$salt$digest`` (PBKDF2-SHA512,
    12-byte salt, standard base64), what ``mosquitto_passwd`` writes."""
    salt = secrets.token_bytes(12)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 101)
    return f"$7$101${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def free_port() -> int:
    """A TCP port on HOST nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def stop(process: subprocess.Popen[bytes]) -> int:
    """Stop ``process`` with SIGTERM (SIGKILL if it hangs) and return its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=START_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _build_limits_plugin(folder: Path) -> Path | None:
    """deploy/mosquitto's publish rate plugin (ramino_limits.c) compiled into ``folder``, or
    ``None`` where there is no C compiler or no Mosquitto headers (the broker then runs
    without it, as a deployment that did not install it would)."""
    compiler = shutil.which("cc")
    if compiler is None:
        return None
    target = folder / "ramino_limits.so"
    built = subprocess.run(
        [compiler, "-O2", "-fPIC", "-shared", "-o", str(target), str(DEPLOY / "ramino_limits.c")],
        capture_output=True,
        check=False,
    )
    return target if built.returncode == 0 else None


def start_mosquitto(folder: Path, accounts: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """Mosquitto with deploy/mosquitto's config (listener moved to a free port on HOST, the
    WebSocket listener left out, absolute password and ACL paths, no user switch), ``accounts``
    in its password file.

    Raises:
        RuntimeError: it did not start.
    """
    binary = shutil.which("mosquitto")
    assert binary is not None
    (folder / "passwords").write_text(
        "".join(f"{name}:{mosquitto_hash(password)}\n" for name, password in accounts.items())
    )
    (folder / "passwords").chmod(0o600)
    shutil.copyfile(DEPLOY / "acl", folder / "acl")
    log = folder / "mosquitto.log"
    plugin = _build_limits_plugin(folder)
    for _attempt in range(3):
        port = free_port()
        lines = []
        # The WebSocket listener's block (up to its blank line) is left out: TCP only here.
        blocks = (DEPLOY / "mosquitto.conf").read_text().split("\n\n")
        text = "\n\n".join(block for block in blocks if "\nprotocol websockets" not in block)
        for line in text.splitlines():
            key = line.split(" ", 1)[0]
            if key == "listener":
                line = f"listener {port} {HOST}"
            elif key == "password_file":
                line = f"password_file {folder / 'passwords'}"
            elif key == "acl_file":
                line = f"acl_file {folder / 'acl'}"
            elif key == "user":
                continue
            elif key == "plugin" or key.startswith("plugin_opt_"):
                if plugin is None:
                    continue
                if key == "plugin":
                    line = f"plugin {plugin}"
            lines.append(line)
        lines.append(f"user {getpass.getuser()}")
        (folder / "mosquitto.conf").write_text("\n".join(lines) + "\n")
        with log.open("ab") as output:
            process = subprocess.Popen(
                [binary, "-c", str(folder / "mosquitto.conf")],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_SECONDS
        while process.poll() is None and time.monotonic() < deadline:
            if _listening(port):
                return process, port
            time.sleep(0.02)
        stop(process)
    raise RuntimeError(f"mosquitto did not start; its log:\n{log.read_text()}")


def ramino_binary() -> str:
    """The ``ramino`` script installed next to this Python."""
    return str(Path(sys.executable).with_name("ramino"))


def start_server(
    folder: Path, broker: str, server_password: str | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """``ramino serve`` on ``broker`` (``embedded``: its own broker on a free port) with a
    SQLite store in ``folder``; returns the process and the MQTT port once it says it serves.

    Raises:
        RuntimeError: it exited or stayed silent.
    """
    command = [
        ramino_binary(),
        "serve",
        "--store",
        f"sqlite:///{folder / 'events.db'}",
        "--grace-seconds",
        str(GRACE_SECONDS),
        "--claim-seconds",
        str(CLAIM_SECONDS),
        "--log-format",
        "json",
        "--log-level",
        "warning",
    ]
    if broker == "embedded":
        command += ["--port", "0"]
    else:
        command += ["--broker", broker]
    if server_password is not None:
        # As an operator would: a file only we may read (a command line shows in ps).
        secret = folder / "server-password"
        secret.touch(mode=0o600)
        secret.write_text(server_password + "\n")
        command += ["--server-password-file", str(secret)]
    environment = {key: value for key, value in os.environ.items() if key.startswith("RAMINO_")}
    clean = {key: value for key, value in os.environ.items() if key not in environment}
    output = folder / "server.out"
    with output.open("wb") as stdout, (folder / "server.log").open("ab") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=clean)
    # The server prints one line once it serves: "ramino: serving on ... mqtt://HOST:PORT, ...".
    deadline = time.monotonic() + START_SECONDS
    while "serving on" not in (text := output.read_text()):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"ramino serve did not start: {text!r}, see {folder}/server.log")
        time.sleep(0.02)
    line = next(line for line in text.splitlines() if "serving on" in line)
    url = next(word for word in line.split() if word.startswith("mqtt://"))
    port = int(url.rstrip(",").rsplit(":", 1)[1])
    return process, port


@dataclass
class Launched:
    """A deployment this suite started: its processes (server last) and how to reach it."""

    deployment: Deployment
    server: subprocess.Popen[bytes]
    broker: subprocess.Popen[bytes] | None
    folder: Path

    def stop(self) -> None:
        """Stop the server, then its broker."""
        stop(self.server)
        if self.broker is not None:
            stop(self.broker)


def launch(kind: str, folder: Path) -> Launched:
    """Start ``ramino serve`` with its embedded broker (``kind`` "embedded", guest mode: any
    name logs in) or with Mosquitto (``kind`` "mosquitto", MOSQUITTO_ACCOUNTS accounts).

    Raises:
        RuntimeError: a process did not start.
    """
    tag = secrets.token_hex(3)
    names = [f"c{tag}-{number}" for number in range(MOSQUITTO_ACCOUNTS)]
    accounts = [Account(name, secrets.token_hex(12)) for name in names]
    if kind == "embedded":
        server, port = start_server(folder, "embedded")
        return Launched(
            Deployment(kind, HOST, port, accounts, True, GRACE_SECONDS),
            server,
            None,
            folder,
        )
    server_password = secrets.token_hex(16)
    table = {account.name: account.password for account in accounts}
    table[SERVER_USER] = server_password
    broker, port = start_mosquitto(folder, table)
    try:
        server, _ = start_server(folder, f"mqtt://{HOST}:{port}", server_password)
    except BaseException:
        stop(broker)
        raise
    return Launched(
        Deployment(kind, HOST, port, accounts, True, GRACE_SECONDS),
        server,
        broker,
        folder,
    )
