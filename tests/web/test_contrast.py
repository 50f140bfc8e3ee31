"""The page's colours meet WCAG 2.1 AA: 4.5:1 for text, 3:1 for the focus outline and the
outline of the seat to move (non-text contrast), computed by WCAG's relative luminance formula."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STYLE = Path(__file__).resolve().parents[2] / "web" / "src" / "style.css"

TEXT = 4.5
NON_TEXT = 3.0

PAIRS = (
    ("fg", "bg", TEXT),  # body text
    ("muted", "bg", TEXT),  # hints
    ("red", "bg", TEXT),  # errors
    ("red", "white", TEXT),  # red suits on a card
    ("red", "selected", TEXT),  # red suits on a selected card
    ("fg", "selected", TEXT),  # black suits on a selected card
    ("accent", "white", TEXT),  # buttons
    ("white", "accent", TEXT),  # move buttons
    ("white", "header", TEXT),  # the header, card backs
    ("focus", "bg", NON_TEXT),  # focus outline, seat to move
    ("focus", "white", NON_TEXT),
)


def _variables() -> dict[str, str]:
    root = re.search(r":root\s*{([^}]*)}", STYLE.read_text())
    assert root is not None
    return dict(re.findall(r"--([a-z]+):\s*(#[0-9a-fA-F]{6})", root.group(1)))


def _luminance(colour: str) -> float:
    def channel(hex_pair: str) -> float:
        value = int(hex_pair, 16) / 255
        return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4

    red, green, blue = (channel(colour[i : i + 2]) for i in (1, 3, 5))
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def _ratio(first: str, second: str) -> float:
    high, low = sorted((_luminance(first), _luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_ratio_matches_wcag_examples() -> None:
    assert 21.0 == pytest.approx(_ratio("#000000", "#ffffff"))
    assert 1.0 == pytest.approx(_ratio("#777777", "#777777"))


@pytest.mark.parametrize(("text", "background", "minimum"), PAIRS)
def test_colour_pairs_meet_aa(text: str, background: str, minimum: float) -> None:
    colours = _variables()
    ratio = _ratio(colours[text], colours[background])
    assert ratio >= minimum, f"--{text} on --{background}: {ratio:.2f}:1 < {minimum}:1"
