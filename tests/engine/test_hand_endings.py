"""End-of-hand scores: worked cases, each one move before a hand ends, checked against the engine.

``tests/golden/hand_endings.toml`` holds ``[[case]]`` tables: a position in the
notation of ``docs/variants.md`` section 6, the move that ends the hand, and what the hand's
``HandEnded`` (and the game's ``GameEnded``, when the hand ends it) must say. The expected
numbers are worked out by hand from the rules, each with its derivation in the case.

A case's fields: ``name`` (unique, kebab-case, starting with the preset's name, ``_`` written
``-``), ``position``, ``move``, optional ``seat`` (default: the seat to move), ``points``,
``winner``, ``ended_by``, ``reason``, ``derivation``, and the optional ``totals``,
``game_winners``, ``game_totals``, ``eliminated`` and ``rummy``.

Move text, parsed into the commands of ``protocol/game.py``:

- ``draw`` | ``take`` | ``take N`` | ``pass`` | ``claim`` | ``claim N``
- ``discard 5C``
- ``meld 7H.8H.9H|JK=7C.8C.9C`` (one command; a joker with the face it stands for)
- ``lay_off 9C on 2`` | ``lay_off JK=TC on 2`` (table meld index, 0-based)
- ``swap 7H on 1`` (joker swap)
- ``knock 5C`` | ``knock 5C melds 7H.8H.9H|...`` | ``knock -`` (no discard: big gin)
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from server.engine import (
    VARIANTS,
    Claim,
    Command,
    Discard,
    DrawStock,
    Event,
    GameEnded,
    HandEnded,
    Knock,
    LayOff,
    MeldCommand,
    MeldSpec,
    Pass,
    State,
    SwapJoker,
    TakeDiscard,
    card_face,
    decide,
    evolve,
    parse_card,
    parse_face,
    to_move,
)
from server.engine.position import from_position

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
FILES = sorted(GOLDEN_DIR.glob("hand_endings*.toml"))
MIN_CASES_PER_PRESET = 10
NAME_PATTERN = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
REQUIRED_FIELDS = (
    "name",
    "position",
    "move",
    "points",
    "winner",
    "ended_by",
    "reason",
    "derivation",
)
KNOWN_FIELDS = frozenset(
    (
        *REQUIRED_FIELDS,
        "seat",
        "totals",
        "game_winners",
        "game_totals",
        "eliminated",
        "rummy",
    )
)


@dataclass(frozen=True)
class Case:
    """One worked hand ending, read from a TOML file."""

    source: str
    data: dict[str, Any]

    @property
    def name(self) -> str:
        """The case's unique kebab-case name."""
        return str(self.data["name"])

    @property
    def position(self) -> str:
        """The position text with any line breaks of a multi-line TOML string made spaces."""
        return " ".join(str(self.data["position"]).split())

    @property
    def preset(self) -> str:
        """The preset named by the position's variant field (``basic`` in ``basic:ace=...``)."""
        return self.position.split()[1].partition(":")[0]


def load_cases() -> list[Case]:
    """Every case of the golden file, in file order."""
    cases: list[Case] = []
    for path in FILES:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
        for data in document.get("case", []):
            cases.append(Case(source=path.name, data=data))
    return cases


CASES = load_cases()


def _spec(text: str) -> MeldSpec:
    """One meld: cards joined by ``.``; a joker names its face after ``=`` (``JK=7C``)."""
    cards = []
    faces = []
    for item in text.split("."):
        card_text, _, face_text = item.partition("=")
        card = parse_card(card_text)
        cards.append(card)
        faces.append(parse_face(face_text) if face_text else card_face(card))
    return MeldSpec(cards=tuple(cards), faces=tuple(faces))


def _specs(text: str) -> tuple[MeldSpec, ...]:
    """Melds joined by ``|``."""
    return tuple(_spec(part) for part in text.split("|"))


def parse_move(text: str) -> Command:
    """The command a move text names (see the module docstring).

    Raises:
        ValueError: the text names no command or has the wrong arguments.
    """
    words = text.split()
    if not words:
        raise ValueError(f"empty move {text!r}")
    verb, args = words[0], words[1:]
    match verb, args:
        case "draw", []:
            return DrawStock()
        case "take", []:
            return TakeDiscard()
        case "take", [count]:
            return TakeDiscard(count=int(count))
        case "pass", []:
            return Pass()
        case "claim", []:
            return Claim()
        case "claim", [count]:
            return Claim(count=int(count))
        case "discard", [discarded]:
            return Discard(parse_card(discarded))
        case "meld", [melds]:
            return MeldCommand(melds=_specs(melds))
        case "lay_off", [card_text, "on", target]:
            laid_text, _, face_text = card_text.partition("=")
            laid = parse_card(laid_text)
            face = parse_face(face_text) if face_text else card_face(laid)
            return LayOff(card=laid, target=int(target), face=face)
        case "swap", [natural, "on", target]:
            return SwapJoker(card=parse_card(natural), target=int(target))
        case "knock", ["-"]:
            return Knock(card=-1)
        case "knock", [knock_card]:
            return Knock(card=parse_card(knock_card))
        case "knock", [knock_card, "melds", melds]:
            discard = -1 if knock_card == "-" else parse_card(knock_card)
            return Knock(card=discard, melds=_specs(melds))
    raise ValueError(f"cannot read move {text!r}")


def play_case(case: Case) -> tuple[State, tuple[Event, ...]]:
    """Read the case's position, decide its move for its seat and evolve every event."""
    state = from_position(case.position)
    seat = int(case.data.get("seat", to_move(state)))
    events = decide(state, seat, parse_move(str(case.data["move"])))
    for event in events:
        state = evolve(state, event)
    return state, events


def _only(events: tuple[Event, ...], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def test_cases_are_found() -> None:
    """The golden files exist and hold cases, so the parametrised test is not silently empty."""
    assert FILES, f"no hand_endings*.toml in {GOLDEN_DIR}"
    assert CASES


def test_cases_are_well_formed() -> None:
    """Names are unique kebab-case starting with the preset; fields are known and complete."""
    counts = Counter(case.name for case in CASES)
    assert [name for name, count in counts.items() if count > 1] == []
    for case in CASES:
        missing = [field for field in REQUIRED_FIELDS if field not in case.data]
        assert missing == [], f"{case.name} ({case.source}) lacks {missing}"
        unknown = sorted(set(case.data) - KNOWN_FIELDS)
        assert unknown == [], f"{case.name} ({case.source}) has unknown fields {unknown}"
        assert NAME_PATTERN.fullmatch(case.name), f"{case.name!r} is not kebab-case"
        prefix = case.preset.replace("_", "-") + "-"
        assert case.name.startswith(prefix), f"{case.name!r} should start with {prefix!r}"


def test_case_totals_add_up() -> None:
    """Each case is consistent with itself: one amount per seat, and totals = scores + points.

    This checks the hand-worked numbers against each other, not against the engine.
    """
    for case in CASES:
        # Read from the text, not through ``from_position``: a position the engine refuses is
        # reported by its own case, not here.
        tokens = case.position.split()
        players = int(tokens[2])
        scores_text = next(token for token in tokens if token.startswith("scores="))
        scores = [Fraction(amount) for amount in scores_text.removeprefix("scores=").split(",")]
        points = [Fraction(amount) for amount in case.data["points"]]
        assert len(points) == players, f"{case.name}: {len(points)} points for {players} seats"
        if "totals" in case.data:
            expected = [str(score + point) for score, point in zip(scores, points, strict=True)]
            assert list(case.data["totals"]) == expected, case.name


@pytest.mark.parametrize("preset", sorted(VARIANTS))
def test_every_preset_has_enough_cases(preset: str) -> None:
    """Each preset has at least ``MIN_CASES_PER_PRESET`` worked endings."""
    names = [case.name for case in CASES if case.preset == preset]
    assert len(names) >= MIN_CASES_PER_PRESET, f"{preset}: {len(names)} cases: {names}"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hand_ending(case: Case) -> None:
    """The move ends the hand, and the engine's result matches the hand-worked one."""
    data = case.data
    state, events = play_case(case)
    ended = _only(events, HandEnded)
    assert len(ended) == 1, f"the move ended no hand (events: {events!r})"
    result: HandEnded = ended[0]
    assert list(result.points) == list(data["points"]), data["derivation"]
    assert result.reason == data["reason"]
    if "rummy" in data:
        assert result.rummy is data["rummy"]
    if "totals" in data:
        assert list(result.totals) == list(data["totals"])
    if "eliminated" in data:
        assert list(result.eliminated) == list(data["eliminated"])
    assert data["ended_by"] == result.ended_by
    games = _only(events, GameEnded)
    if "game_winners" in data or "game_totals" in data:
        assert len(games) == 1, f"the move did not end the game (events: {events!r})"
        game: GameEnded = games[0]
        if "game_winners" in data:
            assert list(game.winners) == list(data["game_winners"])
        if "game_totals" in data:
            assert list(game.totals) == list(data["game_totals"])
        assert state.winners == game.winners
    else:
        assert games == [], f"the move also ended the game: {games!r}"
    # Last, so that a case written for the new meaning of ``winner`` (the seat that does best
    # in the hand) still checks everything else while the engine has the old one.
    assert result.winner == data["winner"]
