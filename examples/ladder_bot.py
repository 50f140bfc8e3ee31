#!/usr/bin/env python3
"""A ladder bot: joins the ladder of a ``ramino serve --ladder`` server and plays every table
the ladder seats it at, choosing a random entry of ``legal`` (docs/ladder.md, "Bot authors").

It needs only ``aiomqtt``, ``msgpack`` and the standard library. It runs until stopped (or
until the connection is lost, or the server refuses to enter it: exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import socket
import sys

import aiomqtt
import msgpack  # type: ignore[import-untyped]  # (msgpack ships no type hints)

PREFIX = "ramino/v1"


async def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    lobby, inbox = f"{PREFIX}/lobby/0/{args.user}", f"{PREFIX}/inbox/{args.user}"
    offline = msgpack.packb({"type": "presence", "online": False})
    async with aiomqtt.Client(
        args.host,
        args.port,
        username=args.user,  # the account is the bot's identity: it plays as ext:USER
        password=args.password,
        will=aiomqtt.Will(f"{PREFIX}/presence/{args.user}", offline, qos=1),
        socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
    ) as mqtt:
        await mqtt.subscribe(inbox, qos=1)
        online = msgpack.packb({"type": "presence", "online": True})
        await mqtt.publish(f"{PREFIX}/presence/{args.user}", online, qos=1)
        hello = {"type": "hello", "versions": [1], "client": "ladder_bot"}
        await mqtt.publish(lobby, msgpack.packb({"id": "hello", "cmd": hello}), qos=1)
        join = {"type": "ladder_join", "ladder": args.ladder, "pools": args.pools}
        await mqtt.publish(lobby, msgpack.packb({"id": "join", "cmd": join}), qos=1)
        newest: dict[str, int] = {}  # table -> the newest seq seen there
        async for message in mqtt.messages:
            data = msgpack.unpackb(message.payload, raw=False)
            if data["type"] == "reply":
                if not data["ok"]:  # a refused join, or a move the table had moved past
                    print(f"{data['id']}: [{data['code']}] {data['message']}", file=sys.stderr)
                    if data["id"] == "join":
                        return 1
                elif data["id"] == "join":
                    print(f"joined as {data['result']['entrant']}", flush=True)
                continue
            table, seq = data["table"], data["seq"]  # an update: one of our ladder tables
            if seq <= newest.get(table, 0):
                continue  # old news
            newest[table] = seq
            if any(item["event"]["type"] == "hand_ended" for item in data["events"]):
                print(f"table {table}: the hand is over", flush=True)
            if data["legal"]:  # our move: any ready-made legal command will do
                move = {"id": secrets.token_hex(8), "cmd": rng.choice(data["legal"]), "seq": seq}
                await mqtt.publish(f"{PREFIX}/table/{table}/cmd/{args.user}", msgpack.packb(move))
    return 1  # the connection closed


def main() -> int:
    parser = argparse.ArgumentParser(description="A random bot for a Ramino ladder.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1883)
    parser.add_argument("--user", required=True, help="the MQTT account")
    parser.add_argument("--password", required=True)
    parser.add_argument("--ladder", default="", help="the ladder's name ('': the server's)")
    parser.add_argument("--pools", nargs="*", default=[], help="pools to play (default: all)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    try:
        return asyncio.run(run(args))
    except aiomqtt.MqttError as error:
        print(f"ladder_bot: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
