"""Random-playout simulation with invariant checks after every event (``ramino simulate``).

Every game is played by uniformly random legal moves from a generator seeded by the run's seed
and the game's number, so the same seed gives the same games. After each event the checker
verifies that cards are conserved, that no view or redacted event shows a seat another seat's
cards or the stock, and that a second state folded from the msgpack-encoded events equals the
live one (the log alone determines the game).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from server.engine import (
    Command,
    Event,
    GameEnded,
    HandEnded,
    State,
    advance,
    chance_pending,
    evolve,
    is_over,
    legal_actions,
    make_rules,
    new_game,
    to_move,
)
from server.engine.invariants import (
    check_conservation,
    check_event_secrecy,
    check_view_secrecy,
)

__all__ = ["GameOutcome", "SimulationSummary", "play_random_game", "simulate"]

MAX_STEPS_PER_GAME = 1_000_000
"""A game still running after this many steps counts as a violation (it should have ended)."""

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Event)


@dataclass
class GameOutcome:
    """What one simulated game produced."""

    final: State
    events: list[Event]
    moves: int
    hands: int
    violations: list[str]
    end_reasons: Counter[str] = field(default_factory=Counter)
    rummies: int = 0


def play_random_game(
    state: State,
    rng: random.Random,
    check: bool = True,
    on_event: Callable[[State, Event, State], None] | None = None,
) -> GameOutcome:
    """Play ``state`` to the end with random legal moves, checking invariants if ``check``."""
    events: list[Event] = []
    violations: list[str] = []
    replayed = state
    moves = 0
    outcome = GameOutcome(state, events, 0, 0, violations)

    actions: list[Command] = []

    def choose(state: State, seat: int) -> Command:
        nonlocal moves
        moves += 1
        return rng.choice(actions)

    for _ in range(MAX_STEPS_PER_GAME):
        if is_over(state):
            break
        if not chance_pending(state):
            actions = legal_actions(state, to_move(state))
            if not actions:
                violations.append(f"seat {to_move(state)} has no legal action in {state.phase}")
                break
        produced = advance(state, rng, choose)
        for event in produced:
            before, state = state, evolve(state, event)
            events.append(event)
            if on_event is not None:
                on_event(before, event, state)
            if isinstance(event, HandEnded):
                outcome.hands += 1
                outcome.end_reasons[event.reason] += 1
                outcome.rummies += event.rummy
            if check:
                violations.extend(check_conservation(state))
                violations.extend(check_view_secrecy(state))
                violations.extend(check_event_secrecy(before, event, state))
                replayed = evolve(replayed, _decoder.decode(_encoder.encode(event)))
                if replayed != state:
                    violations.append(f"replaying event {len(events)} gives a different state")
                    replayed = state
        if violations:
            break
    else:
        violations.append(f"game did not end within {MAX_STEPS_PER_GAME} steps")
    outcome.final = state
    outcome.moves = moves
    return outcome


@dataclass
class SimulationSummary:
    """Totals over a simulation run; ``as_json`` is the machine-readable form."""

    variant: str
    players: int
    options: Mapping[str, object]
    seed: str
    games: int
    completed: int = 0
    hands: int = 0
    moves: int = 0
    seconds: float = 0.0
    invariant_violations: int = 0
    violations: list[str] = field(default_factory=list)
    wins: list[float] = field(default_factory=list)
    end_reasons: Counter[str] = field(default_factory=Counter)
    rummies: int = 0

    @property
    def games_per_s(self) -> float:
        """Completed games per second of wall time."""
        return self.completed / self.seconds if self.seconds > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        """The summary as one JSON-ready object."""
        return {
            "variant": self.variant,
            "players": self.players,
            "options": dict(self.options),
            "seed": self.seed,
            "games": self.games,
            "completed": self.completed,
            "hands": self.hands,
            "moves": self.moves,
            "seconds": round(self.seconds, 3),
            "games_per_s": round(self.games_per_s, 2),
            "invariant_violations": self.invariant_violations,
            "violations": self.violations[:10],
            "wins": [round(win, 3) for win in self.wins],
            "hand_end_reasons": dict(sorted(self.end_reasons.items())),
            "rummies": self.rummies,
        }


def simulate(
    variant: str,
    players: int,
    games: int,
    seed: str | int = 0,
    options: Mapping[str, object] | None = None,
    check: bool = True,
    on_game: Callable[[int, GameOutcome], None] | None = None,
) -> SimulationSummary:
    """Play ``games`` random games and gather a summary.

    Raises:
        VariantError: unknown variant, bad options or player count.
    """
    rules = make_rules(variant, options or {}, players)
    summary = SimulationSummary(variant, players, dict(rules.options), str(seed), games)
    summary.wins = [0.0] * players
    started = time.perf_counter()
    for number in range(games):
        rng = random.Random(f"{seed}:{number}")
        outcome = play_random_game(new_game(rules), rng, check)
        summary.moves += outcome.moves
        summary.hands += outcome.hands
        summary.end_reasons.update(outcome.end_reasons)
        summary.rummies += outcome.rummies
        if outcome.violations:
            summary.invariant_violations += len(outcome.violations)
            summary.violations.extend(f"game {number}: {text}" for text in outcome.violations)
        ended = [event for event in outcome.events if isinstance(event, GameEnded)]
        if ended and not outcome.violations:
            summary.completed += 1
            for seat in ended[-1].winners:
                summary.wins[seat] += 1 / len(ended[-1].winners)
        if on_game is not None:
            on_game(number, outcome)
    summary.seconds = time.perf_counter() - started
    return summary
