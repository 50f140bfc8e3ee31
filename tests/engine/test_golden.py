"""Golden files: a seed and a move list give a known final state and scores."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.engine.position import to_position
from tests.engine.golden import CASES, GOLDEN_DIR, load, replay

FILES = sorted(GOLDEN_DIR.glob("*.json"))


def test_every_golden_case_has_a_file() -> None:
    """Each declared case is checked in, so none is silently skipped."""
    assert sorted(f"{case['name']}.json" for case in CASES) == [path.name for path in FILES]


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_golden_game_replays_to_its_recorded_end(path: Path) -> None:
    """Replaying the recorded commands from the seed reaches the recorded position and scores."""
    data, commands = load(path)
    expected = data["expected"]
    result = replay(data, commands)
    assert len(commands) == result.commands
    assert expected["position"] == to_position(result.final)
    assert expected["totals"] == [str(score) for score in result.final.scores]
    assert expected["winners"] == list(result.final.winners)
    assert expected["hands"] == result.final.hand_number
