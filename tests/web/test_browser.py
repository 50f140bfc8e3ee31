"""The web page in a real browser: Debian's Chromium, headless, driven by Playwright.

``ramino serve --web 127.0.0.1:0 --house-bots`` runs as a subprocess (the page and MQTT over
WebSockets on one port; house bots take the free seats of public tables). A person opens the
page, creates a Knock Rummy table of one deal, a bot sits, and the person plays the hand to its
end by clicking the moves the page offers; then sees the score sheet. Along the way the tab is
closed and reopened (same seat, same hand) and a spectator sees no card of the person's hand.
Screenshots are taken along the way, into the test's temporary folder; with
``RAMINO_SCREENSHOTS=1`` (``make screenshots``) into docs/web/, for docs/web.md.

Without /usr/bin/chromium the tests are skipped, except under CI=true, where they fail
(.ci/run installs it).
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("RAMINO_CHROMIUM", "/usr/bin/chromium"))
DOCS = Path(__file__).resolve().parents[2] / "docs" / "web"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: docs/web/ with ``RAMINO_SCREENSHOTS=1``, else a temporary folder
    (a test run leaves the tree as it found it)."""
    folder = DOCS if os.environ.get("RAMINO_SCREENSHOTS") == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


STEP = 15_000
"""Milliseconds to wait for the page to show something (a bot thinks 0.3 s a move)."""

if not CHROMIUM.exists():
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium", pytrace=False)
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


def _announced_url(lines: queue.Queue[str], timeout: float) -> str:
    """The page's address from the server's ``play in a browser at URL`` line."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if not line:
            break
        seen.append(line)
        found = re.search(r"play in a browser at (http://\S+)", line)
        if found:
            return found.group(1)
    raise AssertionError(f"the server did not announce its page: {''.join(seen)}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = tmp_path_factory.mktemp("web") / "web.db"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "server.cli",
            "serve",
            "--web",
            "127.0.0.1:0",
            "--port",
            "0",
            "--house-bots",
            "--store",
            f"sqlite:///{store}",
            "--log-format",
            "text",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield _announced_url(lines, 30)
    finally:
        process.terminate()
        process.wait(timeout=15)
        reader.join(timeout=15)
        assert process.stdout is not None
        process.stdout.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


def _log_in(page: Page, site: str, name: str) -> None:
    page.goto(site)
    page.fill("#name", name)
    page.fill("#password", "secret")
    page.click("#login-button")
    expect(page.locator("#lobby")).to_be_visible(timeout=STEP)


def _create(page: Page, variant: str, button: str = "#create-button", **options: str) -> None:
    page.select_option("#variant", variant)
    for name, value in options.items():
        page.fill(f"[data-option={name}]", value)
    page.click(button)
    expect(page.locator("#game")).to_be_visible(timeout=STEP)


def _hand(page: Page) -> list[str]:
    return sorted(page.locator("#hand .card").all_inner_texts())


def _my_move_or_end(page: Page) -> None:
    expect(
        page.locator("#actions button, #hand button.legal, #turn:has-text('Game over')").first
    ).to_be_visible(timeout=STEP)


def _play_one_move(page: Page, turns: int) -> bool:
    """Click one offered move; False once the game is over. Moves that use cards are offered
    once their cards are selected: a card is selected, then its knock (from the fourth turn)
    or its discard clicked."""
    _my_move_or_end(page)
    if "Game over" in page.inner_text("#turn"):
        return False
    actions = page.locator("#actions button")
    if actions.filter(has_text="Draw from the stock").count():
        actions.filter(has_text="Draw from the stock").click()
        return True
    for card in page.locator("#hand button.legal").all():
        card.click()
        knock, discard = actions.filter(has_text="Knock"), actions.filter(has_text="Discard")
        if turns >= 3 and knock.count():
            knock.first.click()
            return True
        if discard.count():
            discard.first.click()
            return True
        card.click()  # not this one: unselect
    actions.first.click()
    return True


def test_lobby_create_play_a_knock_game_reconnect_and_spectate(
    site: str, browser: Browser, shots: Path
) -> None:
    context = browser.new_context(viewport={"width": 900, "height": 800})
    page = context.new_page()
    _log_in(page, site, "alice")
    page.screenshot(path=str(shots / "lobby.png"))
    _create(page, "knock", target="unlimited", deals="1")
    # A house bot takes the second seat and starts the game: alice is dealt ten cards.
    expect(page.locator("#hand .card")).to_have_count(10, timeout=STEP)
    expect(page.locator("#seats-view")).to_contain_text("house-", timeout=STEP)

    page.fill("#chat", "good luck")
    page.click("#chat-button")
    expect(page.locator("#log")).to_contain_text("alice: good luck", timeout=STEP)

    # The tab is closed in the middle of the game and opened again: same seat, same hand.
    _my_move_or_end(page)
    before = _hand(page)
    page.close()
    page = context.new_page()
    page.goto(site)
    expect(page.locator("#game")).to_be_visible(timeout=STEP)
    expect(page.locator("#hand .card")).to_have_count(len(before), timeout=STEP)
    assert before == _hand(page)
    expect(page.locator("#seats-view")).to_contain_text("You")

    # A spectator sees the table but no card of alice's hand.
    watcher = browser.new_context(viewport={"width": 360, "height": 740})
    spectator = watcher.new_page()
    _log_in(spectator, site, "carol")
    table = page.inner_text("#game-title").split()[1].rstrip(":")
    row = spectator.locator("#tables tr", has_text=table)
    expect(row).to_contain_text("playing", timeout=STEP)
    row.get_by_role("button", name="Watch").click()
    expect(spectator.locator("#game")).to_be_visible(timeout=STEP)
    expect(spectator.locator("#hand .card")).to_have_count(0)
    shown = spectator.inner_text("#game")
    for card in _hand(page):
        assert card not in shown
    watcher.close()

    turns = 0
    while _play_one_move(page, turns):
        turns += 1
        assert turns < 200, "the game did not end"
    expect(page.locator("#score-sheet")).to_be_visible(timeout=STEP)
    expect(page.locator("#score-sheet tbody tr")).to_have_count(1)
    page.screenshot(path=str(shots / "knock-score-sheet.png"), full_page=True)
    context.close()


def test_a_gin_hand_on_a_phone_screen(site: str, browser: Browser, shots: Path) -> None:
    context = browser.new_context(viewport={"width": 360, "height": 780})
    page = context.new_page()
    _log_in(page, site, "dora")
    _create(page, "gin", button="#bots-button")
    expect(page.locator("#hand .card")).to_have_count(10, timeout=STEP)
    _my_move_or_end(page)
    # The keyboard moves a card within the hand: Alt+Right on the first card makes it second.
    first, second = page.locator("#hand .card").all_inner_texts()[:2]
    page.locator("#hand .card").first.focus()
    page.keyboard.press("Alt+ArrowRight")
    assert [second, first] == page.locator("#hand .card").all_inner_texts()[:2]
    expect(page.locator("#hand .card").nth(1)).to_be_focused()
    page.screenshot(path=str(shots / "gin-hand.png"), full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, f"the page is {width} px wide on a 360 px screen"
    context.close()


def test_a_private_table_is_joined_by_its_invite_link(site: str, browser: Browser) -> None:
    host = browser.new_context().new_page()
    _log_in(host, site, "bob")
    host.check("#private")
    _create(host, "gin")
    link = host.inner_text("#invite").removeprefix("Invite link: ").strip()
    assert "#join=" in link
    guest = browser.new_context().new_page()
    guest.goto(link)
    guest.fill("#name", "erin")
    guest.fill("#password", "secret")
    guest.click("#login-button")
    guest.get_by_role("button", name="Take a seat").click(timeout=STEP)
    host.get_by_role("button", name="Start the game").click(timeout=STEP)
    for page in (host, guest):
        expect(page.locator("#hand .card")).to_have_count(10, timeout=STEP)
        expect(page.locator("#seats-view")).not_to_contain_text("house-")
    host.context.close()
    guest.context.close()
