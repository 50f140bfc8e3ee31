"""The third-party example client (examples/random_client.py) against the real thing: copies of
it, each in its own process, play whole games through Mosquitto and a Ramino server."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import re
import signal
import sys
from asyncio.subprocess import PIPE, Process
from collections.abc import AsyncIterator
from pathlib import Path
from typing import NamedTuple

import pytest

from server.engine import view
from server.net.gateway import Limits
from server.tables.store import open_store
from tests.net.conftest import BrokerUnderTest, ensure_users, serving
from tests.net.players import states_by_seq

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "examples" / "random_client.py"
DEADLINE = 30.0
"""Seconds for the server to come up, for a whole game, and for the server to stop."""
PLAYERS = ["example-host", "example-guest", "example-third"]
THIRD_PARTY = frozenset({"aiomqtt", "msgpack"})


class Exit(NamedTuple):
    """How a process ended."""

    status: int
    out: str
    err: str


def _environment(unbuffered: bool) -> dict[str, str]:
    """Our environment without ``RAMINO_*`` settings (the command line is the whole config)
    and with ``PYTHONUNBUFFERED`` only when asked for."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAMINO_")}
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


async def _spawn(*args: str, unbuffered: bool = False, log: Path | None = None) -> Process:
    """``python ARGS`` from the repository's root, stdout piped, stderr piped or to ``log``."""
    with contextlib.ExitStack() as files:
        stderr = files.enter_context(log.open("wb")) if log is not None else PIPE
        return await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            stdout=PIPE,
            stderr=stderr,
            cwd=ROOT,
            env=_environment(unbuffered),
        )


async def _line_starting(process: Process, prefix: str) -> str:
    """The first line of ``process``'s stdout that starts with ``prefix`` (fails at EOF)."""
    assert process.stdout is not None
    while line := (await process.stdout.readline()).decode():
        if line.startswith(prefix):
            return line.strip()
    ended = await _finish(process)
    raise AssertionError(f"the output ended before a {prefix!r} line: {ended}")


async def _finish(process: Process) -> Exit:
    """Wait for ``process`` to exit: its status, the rest of its stdout, and its stderr."""
    out, err = await process.communicate()
    assert process.returncode is not None
    return Exit(process.returncode, out.decode(), (err or b"").decode())


@contextlib.asynccontextmanager
async def _reaped() -> AsyncIterator[list[Process]]:
    """A list to put processes in; those still running when the block ends are killed."""
    processes: list[Process] = []
    try:
        yield processes
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _play(
    broker: BrokerUnderTest, players: int, variant: str, *options: str
) -> tuple[str, list[Exit]]:
    """A game of ``variant`` between ``players`` example clients: the first creates the table,
    the others join it with the id it printed; returns the table and how each client ended."""
    names = PLAYERS[:players]
    await ensure_users(broker, names)

    def client(seat: int, *args: str) -> list[str]:
        name = names[seat]
        login = ["--broker", broker.url, "--user", name, "--password", broker.password(name)]
        return [str(CLIENT), *login, "--seed", str(seat), *args]

    async with _reaped() as processes, asyncio.timeout(DEADLINE):
        settings = [f"--option={option}" for option in options]
        creator = await _spawn(*client(0, "--create", variant, "--seats", str(players), *settings))
        processes.append(creator)
        table = (await _line_starting(creator, "table ")).split()[1]
        for seat in range(1, players):
            processes.append(await _spawn(*client(seat, "--join", table)))
        exits = await asyncio.gather(*(_finish(process) for process in processes))
    for ended in exits:
        assert 0 == ended.status, ended.err
    return table, exits


async def _final_lines(store_url: str, table: str) -> list[str]:
    """The ``scores`` and ``winners`` lines a client should print, from the server's store."""
    store = await open_store(store_url)
    try:
        states = await states_by_seq(store, table)
    finally:
        await store.close()
    final = states[max(states)].state
    assert "finished" == final.status
    assert final.game is not None
    truth = view(final.game)
    names = final.seats
    scores = " ".join(f"{name}={score}" for name, score in zip(names, truth.scores))
    return [f"scores {scores}", f"winners {' '.join(names[seat] for seat in truth.winners)}"]


def _result(ended: Exit) -> list[str]:
    """The ``scores`` and ``winners`` lines a client printed at the end of its game."""
    return [line for line in ended.out.splitlines() if line.startswith(("scores ", "winners "))]


async def test_two_example_clients_play_knock_on_ramino_serve(
    mosquitto: BrokerUnderTest, tmp_path: Path
) -> None:
    """``ramino serve`` announces itself; a creator (``--create knock``) and a joiner (with the
    table id the creator printed) play to the end and print the same scores and winners, the
    ones in the server's store; SIGINT then stops the server with status 0."""
    store = f"sqlite:///{tmp_path / 'events.db'}"
    log = tmp_path / "server.log"
    async with _reaped() as processes:
        # The server's log (stderr) goes to a file: a pipe nobody reads could fill up and block
        # it. PYTHONUNBUFFERED: `ramino serve` prints its "serving on" line without a flush,
        # so through a pipe it would sit in the buffer.
        server = await _spawn(
            *("-m", "server.cli", "serve", "--broker", mosquitto.url, "--store", store),
            *("--server-user", mosquitto.server_user),
            *("--server-password", mosquitto.server_password),
            unbuffered=True,
            log=log,
        )
        processes.append(server)
        try:
            async with asyncio.timeout(DEADLINE):
                await _line_starting(server, "ramino: serving on")
        except TimeoutError:
            pytest.fail(f"the server did not announce itself; its log:\n{log.read_text()}")

        table, (host, guest) = await _play(mosquitto, 2, "knock")

        server.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            stopped = await _finish(server)
        assert 0 == stopped.status, log.read_text()
    assert "ramino: stopping" in stopped.out
    assert await _final_lines(store, table) == _result(host) == _result(guest)


async def test_example_clients_back_off_when_rate_limited(
    mosquitto: BrokerUnderTest, tmp_path: Path
) -> None:
    """At one command per 100 ms with no burst, the server refuses many commands with
    ``limit/rate``; the clients back off, send them again and still finish the game."""
    async with serving(mosquitto, tmp_path, limits=Limits(rate=10, burst=1)) as server:
        table, exits = await _play(mosquitto, 2, "knock")
        refused = server.gateway.refused
    assert refused > 0
    assert any("over the rate limit" in ended.err for ended in exits)
    expected = await _final_lines(f"sqlite:///{tmp_path / 'events.db'}", table)
    assert [expected] * 2 == [_result(ended) for ended in exits]


async def test_three_example_clients_play_rummy_500_with_its_claim_windows(
    mosquitto: BrokerUnderTest, tmp_path: Path
) -> None:
    """Rummy 500 for three: after a playable discard both other seats may call "Rummy!" at
    once, and the later answer is refused as ``table/stale_seq`` (the clients resync and go
    on); the game still ends the same for everyone. (How many windows open depends on the
    deal, so the refusals are not counted.)"""
    async with serving(mosquitto, tmp_path):
        table, exits = await _play(mosquitto, 3, "rummy500", "target=50")
    expected = await _final_lines(f"sqlite:///{tmp_path / 'events.db'}", table)
    assert [expected] * 3 == [_result(ended) for ended in exits]


def test_the_example_client_uses_nothing_of_this_repository() -> None:
    """It imports only aiomqtt, msgpack and the standard library (grep, then the syntax tree)."""
    source = CLIENT.read_text()
    ours = re.compile(r"^\s*(from|import)\s+(protocol|server|bots|tests)\b", re.MULTILINE)
    assert [] == ours.findall(source)
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert 0 == node.level
            assert node.module is not None
            imported.add(node.module.split(".")[0])
    assert set() == imported - set(sys.stdlib_module_names) - THIRD_PARTY
