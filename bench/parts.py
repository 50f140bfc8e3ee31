"""The parts DESIGN.md chose, measured against the alternative each replaced, in one run.

Run with ``python -m bench.parts [--quick]``. Three tables, every figure from this run:

1. **Codec**: a command as the server receives it (``Request`` of a ``discard``) and a batch of
   table events as every client receives it (``TableEvents`` of five events), encoded and
   decoded N times: msgspec with the protocol's typed decoders (which validate every field)
   against the ``msgpack`` package (``packb``/``unpackb`` of the same data as plain dicts, no
   validation at all).
2. **MQTT client library**: gmqtt (under ``protocol.transport``) against aiomqtt, each
   publishing M QoS 1 messages to a topic it subscribes to itself, on a Mosquitto started here
   with deploy/'s config; messages per second from the first publish to the last delivery.
   Both publish in windows of ``--window`` messages (under Mosquitto's queue of 1,000 per
   client) and wait for the window's deliveries before the next; gmqtt's ``publish`` queues
   and returns, aiomqtt's awaits its PUBACK, so aiomqtt runs a window's publishes concurrently.
3. **Broker**: the same gmqtt loop against Mosquitto and against the embedded broker (amqtt,
   run in a child process as ``ramino serve`` runs it), both with the server's account.

The ratios printed are ours over the alternative (above 1: the chosen part is faster).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import multiprocessing
import os
import shutil
import socket
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from protocol import codec
from protocol.game import Discard, Discarded, Drew, TookDiscard
from protocol.messages import Logged, Request, TableEvents
from server.net.accounts import Accounts, random_password
from server.net.embedded import SERVER_USER

HOST = "127.0.0.1"
TOPIC = "ramino/v1/inbox/benchparts"
WINDOW_SECONDS = 10.0
"""How long a window's deliveries are awaited; what has not arrived by then counts as lost."""
LOST: list[int] = []
"""Messages lost in the gmqtt loops of the current case."""
_quiet = logging.getLogger("bench.parts.aiomqtt")
_quiet.setLevel(logging.ERROR)


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def best_of(repeats: int, work: Callable[[], float]) -> float:
    """The median of ``repeats`` rates (each run of ``work`` returns a rate)."""
    return statistics.median(work() for _ in range(repeats))


# --- 1. codec ----------------------------------------------------------------------------------


def codec_table(count: int, repeats: int) -> None:
    import msgpack  # type: ignore[import-untyped]  # the alternative (dev group)

    request = Request(id="c-000123", cmd=Discard(card=37), seq=41)
    events = TableEvents(
        table="t-8f3a2c",
        events=(
            Logged(seq=42, event=Discarded(seat=0, card=37)),
            Logged(seq=43, event=Drew(seat=1, card=-1)),
            Logged(seq=44, event=Discarded(seat=1, card=12)),
            Logged(seq=45, event=TookDiscard(seat=0, cards=(12,))),
            Logged(seq=46, event=Discarded(seat=0, card=51)),
        ),
    )
    print(f"## 1. Codec: {count:,} encode+decode round trips, median of {repeats}\n")
    print(f"{'message':28} {'msgspec typed /s':>17} {'msgpack dicts /s':>17} {'ratio':>7}")
    for name, message, decode in (
        ("Request(discard)", request, codec.decode_request),
        ("TableEvents(5 events)", events, codec.decode_events),
    ):
        as_dict = msgspec.to_builtins(message)
        payload = codec.encode(message)
        if decode(payload) != message:
            raise SystemExit(f"bench.parts: {name} does not round-trip")

        def ours(message: Any = message, decode: Any = decode) -> float:
            start = time.perf_counter()
            for _ in range(count):
                decode(codec.encode(message))
            return rate(count, time.perf_counter() - start)

        def theirs(as_dict: Any = as_dict) -> float:
            start = time.perf_counter()
            for _ in range(count):
                msgpack.unpackb(msgpack.packb(as_dict))
            return rate(count, time.perf_counter() - start)

        mine, other = best_of(repeats, ours), best_of(repeats, theirs)
        print(f"{name:28} {mine:17,.0f} {other:17,.0f} {mine / other:6.2f}x")
    print()


# --- brokers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def mosquitto(folder: Path, password: str) -> Iterator[int]:
    from tests.net.conftest import DEPLOY, _start_mosquitto, _stop

    if shutil.which("mosquitto") is None:
        raise SystemExit("bench.parts: the mosquitto binary is not installed")
    shutil.copyfile(DEPLOY / "acl", folder / "acl")
    accounts = Accounts()
    accounts.add(SERVER_USER, password)
    accounts.save(folder / "passwords")
    process, port = _start_mosquitto(folder, password)
    try:
        yield port
    finally:
        _stop(process)


def _embedded_child(port: int, password: str, ready: Any) -> None:
    from server.net.embedded import EmbeddedBroker

    async def main() -> None:
        async with EmbeddedBroker(port=port, server_password=password):
            ready.set()
            await asyncio.Event().wait()

    asyncio.run(main())


@contextlib.contextmanager
def embedded(password: str) -> Iterator[int]:
    port = free_port()
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    child = context.Process(target=_embedded_child, args=(port, password, ready), daemon=True)
    child.start()
    try:
        if not ready.wait(30):
            raise SystemExit("bench.parts: the embedded broker did not start")
        yield port
    finally:
        child.terminate()
        child.join(10)


async def gmqtt_loop(port: int, password: str, count: int, window: int) -> float:
    import gmqtt

    received = 0
    caught_up = asyncio.Event()
    wanted = 0

    def on_message(*_: Any) -> int:
        nonlocal received
        received += 1
        if received >= wanted:
            caught_up.set()
        return 0

    client = gmqtt.Client(f"bench-{os.getpid()}-{time.monotonic_ns()}")
    client.set_auth_credentials(SERVER_USER, password)
    client.on_message = on_message
    subscribed = asyncio.Event()
    client.on_subscribe = lambda *_: subscribed.set()
    await client.connect(HOST, port, version=gmqtt.constants.MQTTv311)
    client.subscribe(TOPIC, qos=1)
    await asyncio.wait_for(subscribed.wait(), 10)
    payload = b"x" * 64
    start = time.perf_counter()
    for first in range(0, count, window):
        wanted = min(count, first + window)
        caught_up.clear()
        for _ in range(wanted - first):
            client.publish(TOPIC, payload, qos=1)
        try:
            await asyncio.wait_for(caught_up.wait(), WINDOW_SECONDS)
        except TimeoutError:
            LOST.append(wanted - received)
            received = wanted
    elapsed = time.perf_counter() - start
    await client.disconnect()
    return rate(count, elapsed)


async def aiomqtt_loop(port: int, password: str, count: int, window: int) -> float:
    import aiomqtt

    async with aiomqtt.Client(
        HOST,
        port,
        username=SERVER_USER,
        password=password,
        max_inflight_messages=window,
        logger=_quiet,
    ) as client:
        await client.subscribe(TOPIC, qos=1)
        payload = b"x" * 64

        async def receive(wanted: int) -> None:
            received = 0
            async for _ in client.messages:
                received += 1
                if received == wanted:
                    return

        start = time.perf_counter()
        for first in range(0, count, window):
            size = min(window, count - first)
            receiver = asyncio.create_task(receive(size))
            await asyncio.gather(*(client.publish(TOPIC, payload, qos=1) for _ in range(size)))
            await asyncio.wait_for(receiver, 60)
        return rate(count, time.perf_counter() - start)


def run(repeats: int, loop: Callable[[], Awaitable[float]]) -> float:
    return best_of(repeats, lambda: asyncio.run(loop()))  # type: ignore[arg-type]


def client_table(port: int, password: str, count: int, window: int, repeats: int) -> None:
    print(f"## 2. MQTT client library: {count:,} QoS 1 messages to itself, on Mosquitto\n")
    ours = run(repeats, lambda: gmqtt_loop(port, password, count, window))
    theirs = run(repeats, lambda: aiomqtt_loop(port, password, count, window))
    print(f"{'gmqtt msgs/s':>14} {'aiomqtt msgs/s':>15} {'ratio':>7}")
    print(f"{ours:14,.0f} {theirs:15,.0f} {ours / theirs:6.2f}x\n")


def broker_table(mosquitto_port: int, password: str, count: int, window: int, repeats: int) -> None:
    print(f"## 3. Broker: {count:,} QoS 1 messages through gmqtt, server account\n")
    ours = run(repeats, lambda: gmqtt_loop(mosquitto_port, password, count, window))
    lost_ours = sum(LOST)
    LOST.clear()
    with embedded(password) as port:
        theirs = run(repeats, lambda: gmqtt_loop(port, password, count, window))
    lost_theirs = sum(LOST)
    LOST.clear()
    print(f"{'Mosquitto msgs/s':>17} {'embedded (amqtt) msgs/s':>24} {'ratio':>7}   lost")
    print(
        f"{ours:17,.0f} {theirs:24,.0f} {ours / theirs:6.2f}x   "
        f"{lost_ours:,} / {lost_theirs:,} of {count * repeats:,}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.parts", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument(
        "--window", type=int, default=500, help="messages in flight (both libraries)"
    )
    arguments = parser.parse_args()
    repeats = 1 if arguments.quick else 3
    codec_count = 5_000 if arguments.quick else 100_000
    messages = 1_000 if arguments.quick else 20_000
    print(f"# bench.parts ({'quick' if arguments.quick else 'full'} run)\n")
    codec_table(codec_count, repeats)
    password = random_password()
    with tempfile.TemporaryDirectory() as folder, mosquitto(Path(folder), password) as port:
        client_table(port, password, messages, arguments.window, repeats)
        broker_table(port, password, messages, arguments.window, repeats)


if __name__ == "__main__":
    main()
