"""Golden games: a seed and a command list give a known final position and scores.

Each file in ``tests/golden/`` holds the variant, options, players and chance seed, every
command in order (as msgspec JSON), and what must come out: the final position, the totals
and the winners. Regenerate after a deliberate rules change with
``python -m tests.engine.golden`` and review the diff.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bots.policies import GreedyPolicy
from server.engine import (
    Command,
    State,
    advance,
    apply,
    is_over,
    legal_actions,
    new_game,
    view,
)
from server.engine.position import to_position

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"

CASES: list[dict[str, Any]] = [
    {"name": "basic-3", "variant": "basic", "players": 3, "options": {}, "seed": 11},
    {
        "name": "basic-house-rules-4",
        "variant": "basic",
        "players": 4,
        "options": {"going_rummy": "plus10", "ace": "high_or_low", "scoring": "penalty"},
        "seed": 12,
    },
    {"name": "block-2", "variant": "block", "players": 2, "options": {}, "seed": 13},
    {"name": "wrotham-3", "variant": "wrotham", "players": 3, "options": {}, "seed": 14},
    {
        "name": "ramino-classic-4",
        "variant": "ramino_classic",
        "players": 4,
        "options": {},
        "seed": 15,
    },
    {"name": "rummy500-3", "variant": "rummy500", "players": 3, "options": {}, "seed": 16},
    {
        "name": "ramino-3",
        "variant": "ramino",
        "players": 3,
        "options": {"bussare": True},
        "seed": 17,
    },
    {"name": "knock-3", "variant": "knock", "players": 3, "options": {}, "seed": 18},
    {"name": "gin-2", "variant": "gin", "players": 2, "options": {}, "seed": 19},
    {
        "name": "gin-oklahoma-2",
        "variant": "gin",
        "players": 2,
        "options": {"oklahoma": True, "shutout": "plus100"},
        "seed": 20,
    },
]

_command_encoder = msgspec.json.Encoder()
_command_decoder = msgspec.json.Decoder(Command)


@dataclass
class Replay:
    """The end of a game replayed from a seed and a command list."""

    final: State
    commands: int


def replay(case: dict[str, Any], commands: list[Command]) -> Replay:
    """Play ``case`` from its seed, taking the seat commands from ``commands`` in order."""
    state = new_game(case["variant"], case["options"], case["players"])
    rng = random.Random(case["seed"])
    queue = iter(commands)
    used = 0

    def next_command(_state: State, _seat: int) -> Command:
        nonlocal used
        used += 1
        return next(queue)

    while not is_over(state):
        state = apply(state, advance(state, rng, next_command))
    return Replay(state, used)


def record(case: dict[str, Any]) -> dict[str, Any]:
    """Play ``case`` with greedy bots and return its golden record."""
    state = new_game(case["variant"], case["options"], case["players"])
    rng = random.Random(case["seed"])
    policy_rng = random.Random(case["seed"] + 1)
    policy = GreedyPolicy()
    commands: list[Command] = []

    def choose(state: State, seat: int) -> Command:
        command = policy.choose(
            state.rules, view(state, seat), legal_actions(state, seat), policy_rng
        )
        commands.append(command)
        return command

    while not is_over(state):
        state = apply(state, advance(state, rng, choose))
    return {
        **case,
        "commands": [json.loads(_command_encoder.encode(command)) for command in commands],
        "expected": {
            "position": to_position(state),
            "totals": [str(score) for score in state.scores],
            "winners": list(state.winners),
            "hands": state.hand_number,
        },
    }


def load(path: Path) -> tuple[dict[str, Any], list[Command]]:
    """A golden file and its decoded commands."""
    data = json.loads(path.read_text())
    commands = [_command_decoder.decode(json.dumps(item)) for item in data["commands"]]
    return data, commands


def _dump(data: dict[str, Any]) -> str:
    """JSON with one command per line, so a diff shows which moves changed."""
    head = {key: value for key, value in data.items() if key != "commands"}
    lines = [json.dumps(command, separators=(",", ":")) for command in data["commands"]]
    body = json.dumps(head, indent=1)[:-2]
    return body + ',\n "commands": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"


def main() -> int:
    """Regenerate every golden file."""
    GOLDEN_DIR.mkdir(exist_ok=True)
    for case in CASES:
        path = GOLDEN_DIR / f"{case['name']}.json"
        path.write_text(_dump(record(case)))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
