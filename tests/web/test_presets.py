"""Every preset that tests/web/test_browser.py does not play (knock, gin and rummy500 are played
there) played in Chromium by clicking: a person opens a two-seat table, a house bot takes the
other seat, and the person plays the first hand to its end with the page's own buttons (draw,
a meld of three when the page offers one for the selected cards, a lay-off when offered, the
first discard offered) until the score sheet shows that hand.

The hand is kept short by the table's safety cap: with ``idle_turn_cap`` at 12 the hand ends
after twelve turns in a row in which no card is melded or laid off (docs/variants.md, "Safety
cap"), if nobody goes out first. Without Chromium the module is skipped (see test_browser.py).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.web.test_browser import (
    STEP,
    _card,
    _create,
    _log_in,
    _my_move_or_end,
    _three,
    browser,
    site,
    store,
)

__all__ = ["browser", "site", "store"]  # the fixtures, imported for pytest

CAP = 12
"""Turns in a row without a meld or lay-off after which the hand ends (``idle_turn_cap``)."""

TURNS = 200
"""The most moves the person makes before the test gives up: far more than a capped hand."""

CARDS = {"basic": 10, "block": 10, "wrotham": 7, "ramino": 13, "ramino_classic": 10}
"""Cards dealt to each of two players (RULES.md): Rummy, Block Rummy and Ramino (classic) deal
ten each to two players; Wrotham seven (the starter gets an eighth, so at least seven show);
Italian Ramino thirteen."""


def _try_meld(page: Page) -> bool:
    """Select three cards that make a set or an ace-low run (the first such three of the hand)
    and lay them down if the page offers a meld of exactly them; else unselect them."""
    texts = page.locator("#hand .card").all_inner_texts()
    trio = _three(texts, meld=True)
    if trio is None:
        return False
    chosen = [_card(page, text) for text in trio]
    for card in chosen:
        card.click()
    meld = page.locator("#actions button", has_text="Meld")
    if meld.count():
        meld.first.click()
        return True
    for card in chosen:
        card.click()  # no meld offered (e.g. Ramino's opening needs 30 points): unselect
    return False


def _play_a_turn_step(page: Page) -> None:
    """Click one move the page offers: the draw, else a meld, a lay-off or the first discard
    of the first card whose selection offers one, else the first button offered."""
    actions = page.locator("#actions button")
    draw = actions.filter(has_text="Draw from the stock")
    if draw.count():
        draw.click()
        return
    if _try_meld(page):
        return
    for card in page.locator("#hand button.legal").all():
        card.click()
        for label in ("Lay off", "Discard"):
            offered = actions.filter(has_text=label)
            if offered.count():
                offered.first.click()
                return
        card.click()  # not this one: unselect
    actions.first.click()


def _hand_over(page: Page) -> bool:
    return page.locator("#score-sheet tbody tr").count() > 0


@pytest.mark.parametrize("variant", sorted(CARDS))
def test_a_hand_of_each_preset_played_by_clicking(
    variant: str, site: str, browser: Browser
) -> None:
    context = browser.new_context(viewport={"width": 900, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    _log_in(page, site, f"p-{variant}")
    _create(page, variant, button="#bots-button", idle_turn_cap=str(CAP))
    expect(page.locator("#seats-view")).to_contain_text("house-", timeout=STEP)
    expect(page.locator("#hand .card").nth(CARDS[variant] - 1)).to_be_visible(timeout=STEP)
    error = page.locator("#error")
    for _ in range(TURNS):
        _my_move_or_end(page)
        if _hand_over(page):
            break
        assert not error.inner_text(), error.inner_text()
        if page.locator("#actions button, #hand button.legal").count() == 0:
            continue  # the game ended between the wait and now: the loop's check sees it
        _play_a_turn_step(page)
        assert not error.inner_text(), error.inner_text()
    else:
        pytest.fail(f"{variant}: the first hand did not end in {TURNS} moves")
    sheet = page.locator("#score-sheet")
    expect(sheet).to_be_visible(timeout=STEP)
    # One column per seat (the person's is "You", the bot's its name) after Hand and Ended,
    # and the first hand's line has a cell for each seat.
    heads = sheet.locator("thead th").all_inner_texts()
    assert heads[:3] == ["Hand", "Ended", "You"], heads
    assert len(heads) == 4, heads
    assert heads[3].startswith("house-"), heads
    first = sheet.locator("tbody tr").first.locator("td")
    expect(first).to_have_count(4)
    expect(first.first).to_have_text("1")
    assert not error.inner_text(), error.inner_text()
    assert not problems, problems
    context.close()
