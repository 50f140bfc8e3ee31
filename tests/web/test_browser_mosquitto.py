"""The web page in a real browser with Mosquitto as the broker: ``ramino serve --broker
mqtt://... --web 127.0.0.1:0 --web-broker ws://.../mqtt`` serves the page, which connects to
Mosquitto's WebSocket listener (deploy/mosquitto/mosquitto.conf) with an account.

Two people log in with their Mosquitto accounts; one creates a private Gin Rummy table, the
other joins it by its invite link, the game starts and each sees a hand of ten cards. Skipped
like test_browser.py without Chromium (failed under CI=true), and without Mosquitto.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from server.net.web import MQTT_PATH
from tests.net.conftest import MosquittoBroker, mosquitto
from tests.tables.conftest import postgres_url_sync
from tests.web.test_browser import STEP, _create, browser, serving_page

__all__ = [
    "browser",
    "mosquitto",
    "postgres_url_sync",
]  # fixtures used here (test_browser skips without Chromium)


@pytest.fixture
def mosquitto_site(mosquitto: MosquittoBroker, tmp_path: Path) -> Iterator[str]:
    """``ramino serve`` on the session's Mosquitto with the page on a free port, pointing at
    Mosquitto's WebSocket listener; the page's address. One test's server at a time: two
    servers on one broker would both answer the lobby."""
    store = tmp_path / "web.db"
    arguments = [
        "--broker",
        mosquitto.url,
        "--web",
        "127.0.0.1:0",
        "--web-broker",
        f"ws://127.0.0.1:{mosquitto.websockets_port}{MQTT_PATH}",
        "--store",
        f"sqlite:///{store}",
    ]
    with serving_page(arguments, {"RAMINO_SERVER_PASSWORD": mosquitto.server_password}) as url:
        yield url


def test_two_accounts_play_through_mosquitto_websockets(
    mosquitto: MosquittoBroker, mosquitto_site: str, browser: Browser
) -> None:
    """alice opens a private table; bob, by her invite link, takes a seat; she starts the game
    and both see ten cards (Gin Rummy deals ten), all over Mosquitto's WebSocket listener."""
    _alice_invites_bob_to_gin(mosquitto, mosquitto_site, browser)


def _alice_invites_bob_to_gin(mosquitto: MosquittoBroker, site: str, browser: Browser) -> None:
    """alice logs in at ``site``, opens a private Gin Rummy table with no error shown; bob
    takes a seat by her invite link; she starts the game and both pages show ten cards."""
    host = browser.new_context().new_page()
    host.goto(site)
    host.fill("#name", "alice")
    host.fill("#password", mosquitto.users["alice"])
    host.click("#login-button")
    expect(host.locator("#lobby")).to_be_visible(timeout=STEP)
    host.check("#private")
    _create(host, "gin")
    expect(host.locator("#error")).to_have_text("")
    link = host.inner_text("#invite").removeprefix("Invite link: ").strip()
    assert link.startswith(f"{site}#join=")
    guest = browser.new_context().new_page()
    guest.goto(link)
    guest.fill("#name", "bob")
    guest.fill("#password", mosquitto.users["bob"])
    guest.click("#login-button")
    guest.get_by_role("button", name="Take a seat").click(timeout=STEP)
    host.get_by_role("button", name="Start the game").click(timeout=STEP)
    for page in (host, guest):
        expect(page.locator("#hand .card")).to_have_count(10, timeout=STEP)
    host.context.close()
    guest.context.close()


@pytest.fixture
def worker_site(mosquitto: MosquittoBroker, postgres_url_sync: str) -> Iterator[str]:
    """One worker (``--worker``) serving four lobby shards on a fresh PostgreSQL database, with
    the page pointing at Mosquitto's WebSocket listener; the page's address."""
    arguments = [
        "--broker",
        mosquitto.url,
        "--store",
        postgres_url_sync,
        "--worker",
        "w1",
        "--shards",
        "4",
        "--web",
        "127.0.0.1:0",
        "--web-broker",
        f"ws://127.0.0.1:{mosquitto.websockets_port}{MQTT_PATH}",
    ]
    with serving_page(arguments, {"RAMINO_SERVER_PASSWORD": mosquitto.server_password}) as url:
        yield url


def test_the_page_uses_its_own_lobby_shard(
    mosquitto: MosquittoBroker, worker_site: str, browser: Browser
) -> None:
    """With four lobby shards, alice's lobby commands belong on shard crc32("alice") mod 4 = 3
    (protocol §3) and bob's on shard 0: alice creates a table and bob joins it by its invite
    link, and the game starts, so both pages sent their lobby commands where a worker reads
    them."""
    _alice_invites_bob_to_gin(mosquitto, worker_site, browser)
