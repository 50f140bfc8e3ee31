#!/usr/bin/env python3
"""A Ramino player that makes uniformly random legal moves: an example third-party client.

It needs only ``aiomqtt``, ``msgpack`` and the standard library, nothing of the server's code,
and speaks the whole client side of the protocol (``examples/README.md`` walks through it).
Exit status: 0 when the game finished (the final scores and winners are printed), 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import secrets
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

import aiomqtt
import msgpack  # type: ignore[import-untyped]  # (msgpack ships no type hints)

PREFIX = "ramino/v1"
REQUEST_TIMEOUT = 5.0  # seconds without a reply before a request is sent again (same id)
ATTEMPTS = 6  # sends of one request in all, counting resends after rate-limit refusals
IDLE_TIMEOUT = 120.0  # give up when nothing happens at the table for this long

Message = dict[str, Any]  # every protocol message is a msgpack map with a "type" key


class Failed(Exception):
    """Something this client cannot carry on after."""


class Connection:
    """Requests out (each answered by one ``reply`` with its id), ``update``s in."""

    def __init__(self, mqtt: aiomqtt.Client, user: str) -> None:
        self.mqtt = mqtt
        self.user = user
        self.replies: dict[str, asyncio.Future[Message]] = {}
        self.updates: asyncio.Queue[Message] = asyncio.Queue()

    async def read_inbox(self) -> None:
        """Route everything arriving on our inbox: replies to their request, updates queued."""
        async for message in self.mqtt.messages:
            if not isinstance(message.payload, bytes | bytearray):
                continue
            try:
                data = msgpack.unpackb(message.payload, raw=False)
            except (ValueError, msgpack.UnpackException):
                continue  # not msgpack: nothing we can use
            if not isinstance(data, dict):
                continue
            if data.get("type") == "reply":
                future = self.replies.get(data.get("id", ""))
                if future is not None and not future.done():
                    future.set_result(data)
            elif data.get("type") == "update":
                self.updates.put_nowait(data)
        raise Failed("the connection closed")

    async def request(self, cmd: Message, table: str = "", seq: int | None = None) -> Message:
        """Send ``cmd`` to the lobby (or to ``table``) and return its reply (ok or error)."""
        # A fresh random id per request: the server treats a repeated id as the same command
        # (it answers with the first reply and never acts twice), so resending is always safe.
        request_id = secrets.token_hex(8)
        body: Message = {"id": request_id, "cmd": cmd}
        if seq is not None:
            body["seq"] = seq  # the last seq we saw: a stale one is refused (table/stale_seq)
        where = f"table/{table}/cmd" if table else "lobby/0"  # table commands, or lobby shard 0
        topic = f"{PREFIX}/{where}/{self.user}"
        backoff = 0.1
        for _ in range(ATTEMPTS):
            future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
            self.replies[request_id] = future
            await self.mqtt.publish(topic, msgpack.packb(body), qos=1)
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT):
                    reply = await future
            except TimeoutError:
                continue  # lost on the way? send the same id again
            finally:
                self.replies.pop(request_id, None)
            if reply.get("ok") or reply.get("code") != "limit/rate":
                return reply
            print(f"{self.user}: over the rate limit, retrying", file=sys.stderr)
            await asyncio.sleep(backoff)  # over the server's rate: back off, resend the same id
            backoff *= 2
        raise Failed(f"no answer to {cmd['type']} after {ATTEMPTS} attempts")


def checked(reply: Message) -> Message:
    """``reply`` if it is ok; else stop with its error code and message."""
    if not reply.get("ok"):
        raise Failed(f"refused: [{reply.get('code')}] {reply.get('message')}")
    return reply


class Table:
    """What we know of our table: the last seq seen, the latest state and who sits where."""

    def __init__(self, table_id: str) -> None:
        self.id = table_id
        self.seq = 0
        self.state: Message | None = None  # the latest update (or resync) not yet acted on
        self.seats: dict[int, str] = {}

    def accept(self, update: Message) -> bool:
        """Take an update; ``False`` if events were missed (a seq gap: resync then)."""
        if update.get("table") != self.id or update["seq"] <= self.seq:
            return True  # another table's, or old news
        events = update["events"]
        if self.seq and (events[0]["seq"] if events else update["seq"]) != self.seq + 1:
            return False
        for logged in events:  # follow who sits where (the creator starts once all are seated)
            event = logged["event"]
            if event["type"] == "player_sat":
                self.seats[event["seat"]] = event["player"]
            elif event["type"] == "player_stood":
                self.seats.pop(event["seat"], None)
            elif event["type"] == "game_started":
                self.seats = dict(enumerate(event["players"]))
        self.seq, self.state = update["seq"], update
        return True

    async def resync(self, connection: Connection) -> None:
        """Fetch the table's present (a ``synced`` result) and continue from it."""
        synced = checked(await connection.request({"type": "resync"}, self.id))["result"]
        listing = synced["table"]
        self.seats = {seat: name for seat, name in enumerate(listing["seats"]) if name}
        self.seq = synced["seq"]
        self.state = {**synced, "status": listing["status"], "events": []}


async def play(connection: Connection, args: argparse.Namespace) -> None:
    """Create or join a table, then play random legal moves until the game finishes."""
    checked(await connection.request({"type": "hello", "versions": [1], "client": "random_client"}))
    if args.create:
        create = {"type": "create_table", "variant": args.create, "seats": args.seats}
        create["options"] = dict(option_value(pair) for pair in args.option)
        created = checked(await connection.request(create))["result"]  # we sit in seat 0
        table = Table(created["table"])
        print(f"table {table.id}", flush=True)  # for the other players' --join
    else:
        table = Table(args.join)
        checked(await connection.request({"type": "sit", "seat": -1}, table.id))
    rng = random.Random(args.seed)
    started, refusals = False, 0
    while True:
        if table.state is None:  # wait for news, then read everything queued at once
            async with asyncio.timeout(IDLE_TIMEOUT):
                batch = [await connection.updates.get()]
            while not connection.updates.empty():
                batch.append(connection.updates.get_nowait())
            if not all(table.accept(update) for update in batch):
                print(f"{args.user}: missed events after seq {table.seq}", file=sys.stderr)
                await table.resync(connection)
            continue
        state, table.state = table.state, None
        if state["status"] == "finished":
            view = state["view"]
            names = [table.seats.get(seat, f"seat{seat}") for seat in range(len(view["scores"]))]
            print("scores " + " ".join(f"{n}={s}" for n, s in zip(names, view["scores"])))
            print("winners " + " ".join(names[seat] for seat in view["winners"]), flush=True)
            return
        if state["status"] == "closed":
            raise Failed("the table was closed")
        everyone = len(table.seats) == args.seats
        if args.create and not started and state["status"] == "waiting" and everyone:
            started = True  # every seat is taken: the host starts the game (once)
            checked(await connection.request({"type": "start"}, table.id))
        if state["legal"]:  # our move: any of the ready-made legal commands will do
            command = rng.choice(state["legal"])
            if args.verbose:
                print(f"{args.user} plays {describe(command)}", file=sys.stderr)
            reply = await connection.request(command, table.id, seq=state["seq"])
            if reply["ok"]:
                refusals = 0
                continue
            # Refused: table/stale_seq (someone moved first, as in a claim window) or another
            # refusal. Either way, catch up from the table's present and choose again.
            print(f"{args.user}: {command['type']} refused [{reply['code']}]", file=sys.stderr)
            refusals += 1
            if refusals > 20:
                raise Failed(f"refused {refusals} times in a row: {reply['message']}")
            await table.resync(connection)


def card_name(card: int) -> str:
    """``7H``, ``TD``, ``JK2``: the text form of a card int (docs/protocol.md §5)."""
    if card < 0:
        return "-"  # no card (a big gin's discard) or a hidden one
    face, copy = card & 63, card >> 6
    name = "JK" if face == 52 else "A23456789TJQK"[face % 13] + "CDHS"[face // 13]
    return name + (str(copy + 1) if copy else "")


def describe(command: Message) -> str:
    """A command as a person reads it: ``discard 7H``, ``meld [7H 8H 9H]``, ``lay_off 9H
    target=2 face=34``."""
    words = [command["type"]]
    for key, value in command.items():
        if key == "type":
            continue
        if key == "card" and isinstance(value, int):
            words.append(card_name(value))
        elif key == "melds" and isinstance(value, list):
            words += ["[" + " ".join(map(card_name, meld["cards"])) + "]" for meld in value]
        else:
            words.append(f"{key}={value}")
    return " ".join(words)


def option_value(pair: str) -> tuple[str, bool | int | str]:
    """``KEY=VALUE`` of a table option, the value as the bool, int or text it reads as."""
    key, _, text = pair.partition("=")
    value: bool | int | str = {"true": True, "false": False}.get(text, text)
    return key, int(text) if text.lstrip("-").isdigit() else value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A Ramino player that moves at random.")
    parser.add_argument("--broker", default="mqtt://127.0.0.1:1883", help="mqtt://HOST:PORT")
    parser.add_argument("--user", required=True, help="your account (the MQTT username)")
    parser.add_argument(
        "--password",
        default="",
        help="its password (default: a random one; a guest-mode server binds a name to the "
        "first password it logs in with, so give one to play under the same name again)",
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--create", metavar="VARIANT", help="open a table of VARIANT and sit")
    what.add_argument("--join", metavar="TABLE", help="sit at table TABLE")
    parser.add_argument("--seats", type=int, default=2, help="players at a created table (2)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--seed", type=int, default=None, help="seed of the random choices")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each move")
    return parser.parse_args(argv)


async def main(args: argparse.Namespace) -> int:
    offline = msgpack.packb({"type": "presence", "online": False})
    presence = f"{PREFIX}/presence/{args.user}"
    try:
        url = urlsplit(args.broker)
        if url.scheme != "mqtt" or not url.hostname:
            raise Failed(f"--broker must be mqtt://HOST:PORT, not {args.broker}")
        async with aiomqtt.Client(
            url.hostname,
            url.port or 1883,
            username=args.user,  # the username is our identity on every topic
            password=args.password or secrets.token_urlsafe(18),
            protocol=aiomqtt.ProtocolVersion.V311,
            will=aiomqtt.Will(presence, offline, qos=1),  # the broker says it if we vanish
            # Small messages both ways: without TCP_NODELAY, Nagle's algorithm holds a command
            # back until the broker acknowledges the last packet (up to 40 ms a move).
            socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
        ) as mqtt:
            connection = Connection(mqtt, args.user)
            await mqtt.subscribe(f"{PREFIX}/inbox/{args.user}", qos=1)
            await mqtt.publish(presence, msgpack.packb({"type": "presence", "online": True}))
            reader = asyncio.create_task(connection.read_inbox())
            player = asyncio.create_task(play(connection, args))
            # Whichever ends first ends both: the game, or the reader (the connection is lost).
            done, _ = await asyncio.wait((reader, player), return_when=asyncio.FIRST_COMPLETED)
            for task in (reader, player):
                task.cancel()
            try:
                done.pop().result()  # raises what ended the game early, if anything did
            finally:
                with contextlib.suppress(aiomqtt.MqttError):  # a clean exit sends no will
                    await mqtt.publish(presence, offline, qos=1)
    except (Failed, aiomqtt.MqttError, TimeoutError) as error:
        print(f"random_client: {args.user}: {error or type(error).__name__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
