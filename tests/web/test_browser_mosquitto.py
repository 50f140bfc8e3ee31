"""The web page in a real browser with Mosquitto as the broker: ``ramino serve --broker
mqtt://... --web 127.0.0.1:0 --web-broker ws://.../mqtt`` serves the page, which connects to
Mosquitto's WebSocket listener (deploy/mosquitto/mosquitto.conf) with an account.

Two people log in with their Mosquitto accounts; one creates a private Gin Rummy table, the
other joins it by its invite link, the game starts and each sees a hand of ten cards. Skipped
like test_browser.py without Chromium (failed under CI=true), and without Mosquitto.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from server.net.web import MQTT_PATH
from tests.net.conftest import MosquittoBroker, mosquitto
from tests.web.test_browser import STEP, _create, browser, serving_page

__all__ = ["browser", "mosquitto"]  # fixtures used here (test_browser skips without Chromium)


@pytest.fixture(scope="module")
def mosquitto_site(
    mosquitto: MosquittoBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``ramino serve`` on the session's Mosquitto with the page on a free port, pointing at
    Mosquitto's WebSocket listener; the page's address."""
    store = tmp_path_factory.mktemp("web-mosquitto") / "web.db"
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
    host = browser.new_context().new_page()
    host.goto(mosquitto_site)
    host.fill("#name", "alice")
    host.fill("#password", mosquitto.users["alice"])
    host.click("#login-button")
    expect(host.locator("#lobby")).to_be_visible(timeout=STEP)
    host.check("#private")
    _create(host, "gin")
    link = host.inner_text("#invite").removeprefix("Invite link: ").strip()
    assert link.startswith(f"{mosquitto_site}#join=")
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
