"""The lobby and table commands over a real broker: versions, variants, listings, private
tables and invite codes, seats, chat, rematch; and ``ramino accounts``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from protocol import topics
from protocol.client import RequestFailed
from protocol.codec import decode_listing
from protocol.messages import ChatSay
from server.cli import main
from server.engine import VARIANTS
from server.net.accounts import Accounts
from tests.net.conftest import BrokerUnderTest, client_for, ensure_users, serving
from tests.net.players import Inbox, play_seat


async def test_hello_variants_and_listings(broker: BrokerUnderTest, tmp_path: Path) -> None:
    await ensure_users(broker, ["alice", "bob"])
    listings = Inbox("bob")
    async with serving(broker, tmp_path):
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob", tap=listings)
        for client in (alice, bob):
            await client.connect()
        try:
            welcome = await alice.hello()
            assert 1 == welcome.version
            variants = await alice.variants()
            assert set(VARIANTS) == {info.name for info in variants.variants}
            gin = next(info for info in variants.variants if info.name == "gin")
            assert (2, 2) == (gin.min_players, gin.max_players)
            bob.transport.subscribe(f"{topics.PREFIX}/tables/+")
            public = await alice.create_table("rummy500", seats=3)
            secret = await alice.create_table("gin", private=True)
            assert "" == public.invite_code
            assert secret.invite_code
            listed = {listing.table: listing for listing in await bob.tables()}
            assert public.table in listed
            assert secret.table not in listed
            assert ("alice", "", "") == listed[public.table].seats
            assert [public.table] == [t.table for t in await bob.tables(variant="rummy500")]
            assert [] == list(await bob.tables(status="playing"))
            await bob.table(public.table).sit()
            await bob.hello()  # the listing of the sit was published before this reply
        finally:
            for client in (alice, bob):
                await client.close()
    retained = [
        decode_listing(message.payload)
        for message in listings.messages
        if message.topic == topics.lobby_listing(public.table) and message.payload
    ]
    assert ("alice", "bob", "") == retained[-1].seats
    assert not any(
        message.topic == topics.lobby_listing(secret.table) and message.payload
        for message in listings.messages
    )


async def test_private_tables_need_the_invite_code(broker: BrokerUnderTest, tmp_path: Path) -> None:
    await ensure_users(broker, ["alice", "bob"])
    async with serving(broker, tmp_path):
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        for client in (alice, bob):
            await client.connect()
        try:
            created = await alice.create_table("gin", private=True)
            table = bob.table(created.table)
            with pytest.raises(RequestFailed) as refused:
                await table.sit()
            assert "lobby/bad_invite" == refused.value.code
            with pytest.raises(RequestFailed) as watched:
                await table.join()
            assert "lobby/bad_invite" == watched.value.code
            seen = await table.join(created.invite_code)
            assert -1 == seen.seat
            await table.sit(invite_code=created.invite_code)
            synced = await table.resync()
            assert 1 == synced.seat
        finally:
            for client in (alice, bob):
                await client.close()


async def test_seats_chat_and_a_rematch(broker: BrokerUnderTest, tmp_path: Path) -> None:
    await ensure_users(broker, ["alice", "bob", "carol"])
    heard = Inbox("carol")
    async with serving(broker, tmp_path) as server:
        alice, bob = client_for(broker, "alice"), client_for(broker, "bob")
        carol = client_for(broker, "carol", tap=heard)
        for client in (alice, bob, carol):
            await client.connect()
        try:
            created = await alice.create_table("knock")
            table = created.table
            with pytest.raises(RequestFailed) as early:
                await alice.table(table).start()
            assert "table/not_full" == early.value.code
            await carol.table(table).sit()
            await carol.table(table).stand()
            await carol.table(table).leave()
            await bob.table(table).sit()
            carol.transport.subscribe(topics.chat(table))
            await carol.hello()
            await bob.table(table).chat("good luck")
            replies = [
                await bob.request(ChatSay(text="spam"), table, check=False) for _ in range(10)
            ]
            assert "limit/chat_rate" in {reply.code for reply in replies}
            await alice.table(table).start()
            with pytest.raises(RequestFailed) as busy:
                await bob.table(table).stand()
            assert "table/game_running" == busy.value.code
            await asyncio.gather(play_seat(alice, table, 1), play_seat(bob, table, 2))
            assert 1 == server.service.actors[table].table.game_number
            await bob.table(table).rematch()
            assert 2 == server.service.actors[table].table.game_number
            assert "playing" == server.service.actors[table].table.status
            await carol.hello()
        finally:
            for client in (alice, bob, carol):
                await client.close()
    lines = [
        msgspec.msgpack.decode(message.payload)
        for message in heard.messages
        if message.topic == topics.chat(table)
    ]
    assert "good luck" == lines[0]["text"]
    assert "bob" == lines[0]["sender"]


def test_accounts_command_maintains_the_password_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "passwd"
    assert 0 == main(["accounts", "--file", str(path), "add", "alice", "--password", "s3cret"])
    assert 0 == main(["accounts", "--file", str(path), "add", "bob"])
    name, password = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert "bob" == name
    accounts = Accounts.load(path)
    assert accounts.check("alice", "s3cret")
    assert accounts.check("bob", password)
    assert 0 == main(["accounts", "--file", str(path), "remove", "alice"])
    assert 1 == main(["accounts", "--file", str(path), "remove", "alice"])
    capsys.readouterr()
    assert 0 == main(["accounts", "--file", str(path), "list"])
    assert ["bob"] == capsys.readouterr().out.split()
    assert 2 == main(["accounts", "--file", str(path), "add", "no/slash", "--password", "x"])
