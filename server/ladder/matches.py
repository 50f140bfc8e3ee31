"""Duplicate matches: one deal played in every seat rotation, reported as one result.

Theory of operation. A match seats ``k`` entrants (``k`` = the pool's player count) and plays
one game per *rotation*: ``order[seat]`` is the index of the entrant in that seat. Two players
play both orders, three all six permutations, four (and more) the ``k`` cyclic rotations, so
every entrant holds every seat's cards equally often. All the games of a match draw their
chance events from the same keys (``{seed}:hand{n}`` for a deal, ``{seed}:hand{n}:rebuild{r}``
for a rebuilt stock), so each rotation sees the same dealer and the same deck order: the luck
of the deal cancels out. Each seat's policy gets its own generator
(``{seed}:{rotation}:{seat}``), so a match is reproducible from its seed (``mc``'s time budget
aside).

A game is one hand. Each game gives every seat a win share (1 split among the hand's winners:
the ``HandEnded`` winner, else the best count, ties sharing) and its hand points. An entrant's
result is the sum of both over its seats in every rotation; entrants are ranked by win share,
then by points (fewest first under penalty scoring), equal totals sharing a rank.

The games are played in this process by the engine, not through the table service: a match of
built-in entrants needs no network, is replayable from its seed alone, and plays in
milliseconds, which is what rates many entrants in a day. External entrants will play through
``ramino serve`` tables (``server.ladder.runner``).
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from bots.duel import hand_winners
from bots.policies.base import Policy, find_policy
from server.engine import (
    Event,
    HandEnded,
    Phase,
    RuleError,
    Rules,
    chance,
    chance_pending,
    decide,
    describe_command,
    evolve,
    is_over,
    legal_actions,
    new_game,
    redact,
    to_move,
    view,
)

__all__ = [
    "GameRecord",
    "MatchOutcome",
    "chance_key",
    "play_match",
    "rank_totals",
    "rotations",
]

Watcher = Callable[[int, Event], None]
"""Called with (rotation index, event) for every event of every game, in order."""


def rotations(players: int) -> list[tuple[int, ...]]:
    """The seat orders of a match: ``order[seat]`` is the entrant index in that seat.

    >>> rotations(2)
    [(0, 1), (1, 0)]
    >>> len(rotations(3)), rotations(4)[1]
    (6, (1, 2, 3, 0))

    Raises:
        ValueError: fewer than two players.
    """
    if players < 2:
        raise ValueError(f"a match needs at least two players, got {players}")
    base = tuple(range(players))
    if players == 3:
        return list(itertools.permutations(base))
    return [base[shift:] + base[:shift] for shift in range(players)]


def chance_key(seed: str, hand: int, rebuild: int | None = None) -> str:
    """The key of the generator of a match's chance event: the deal of hand ``hand`` or its
    ``rebuild``-th rebuilt stock."""
    if rebuild is None:
        return f"{seed}:hand{hand}"
    return f"{seed}:hand{hand}:rebuild{rebuild}"


@dataclass(frozen=True, slots=True)
class GameRecord:
    """One rotation of a match: who sat where and what each seat got."""

    order: tuple[int, ...]
    wins: tuple[Fraction, ...]
    points: tuple[Fraction, ...]
    decisions: int
    forfeited: tuple[bool, ...] = ()
    """Per seat: whether the seat was forfeited (games at server tables only)."""


@dataclass(frozen=True, slots=True)
class MatchOutcome:
    """Every rotation of a match and each entrant's totals."""

    games: tuple[GameRecord, ...]
    wins: tuple[Fraction, ...]
    points: tuple[Fraction, ...]
    ranks: tuple[int, ...]
    seconds: float
    forfeits: tuple[bool, ...] = ()
    """Per entrant: whether it forfeited a seat in any game (empty: nobody could)."""


def play_game(
    rules: Rules,
    specs: Sequence[str],
    order: tuple[int, ...],
    seed: str,
    rotation: int,
    watch: Watcher | None = None,
    make: Callable[[str], Policy] = find_policy,
) -> GameRecord:
    """Play one hand with seat ``s`` played by a new ``specs[order[s]]`` policy (made by
    ``make``: ``find_policy`` unless a bench wants to watch a policy's insides).

    Raises:
        AssertionError: a policy chose an illegal command (a bug; the message names it).
    """
    players = rules.players
    policies = [make(specs[index]) for index in order]
    rngs = [random.Random(f"{seed}:{rotation}:{seat}") for seat in range(players)]
    state = new_game(rules)
    decisions = 0
    ended: HandEnded | None = None
    while ended is None and not is_over(state):
        if chance_pending(state):
            if state.phase is Phase.DEAL:
                key = chance_key(seed, state.hand_number + 1)
            else:
                key = chance_key(seed, state.hand_number, state.reuses)
            events: tuple[Event, ...] = (chance(state, random.Random(key)),)
        else:
            seat = to_move(state)
            actions = legal_actions(state, seat)
            command = policies[seat].choose(rules, view(state, seat), actions, rngs[seat])
            decisions += 1
            try:
                events = decide(state, seat, command)
            except RuleError as error:
                raise AssertionError(
                    f"policy {specs[order[seat]]!r} in seat {seat} chose the illegal"
                    f" {describe_command(command)!r} (seed {seed!r}, rotation {rotation}):"
                    f" [{error.code}] {error.message}"
                ) from error
        for event in events:
            if watch is not None:
                watch(rotation, event)
            for watcher, policy in enumerate(policies):
                policy.observe(watcher, redact(state, event, watcher))
            state = evolve(state, event)
            if isinstance(event, HandEnded):
                ended = event
                break
    assert ended is not None, "a hand always ends"
    winners = hand_winners(ended, rules)
    share = Fraction(1, len(winners)) if winners else Fraction(0)
    return GameRecord(
        order=order,
        wins=tuple(share if seat in winners else Fraction(0) for seat in range(players)),
        points=tuple(Fraction(point) for point in ended.points),
        decisions=decisions,
    )


def rank_totals(
    wins: Sequence[Fraction],
    points: Sequence[Fraction],
    penalty: bool,
    forfeits: Sequence[bool] = (),
) -> tuple[int, ...]:
    """Competition ranks (1 is best; equal totals share the better rank, the next is skipped)
    by win share, then points (fewest first when ``penalty``); an entrant that forfeited
    ranks below every one that did not, whatever its totals.

    >>> rank_totals([Fraction(1), Fraction(1), Fraction(0)], [Fraction(5), Fraction(5), 0], False)
    (1, 1, 3)
    >>> rank_totals([Fraction(2), Fraction(0)], [Fraction(9), Fraction(0)], False, [True, False])
    (2, 1)
    """
    lost = list(forfeits) or [False] * len(wins)
    keys = [
        (forfeit, -win, point if penalty else -point)
        for win, point, forfeit in zip(wins, points, lost)
    ]
    return tuple(1 + sum(1 for other in keys if other < key) for key in keys)


def play_match(
    rules: Rules,
    specs: Sequence[str],
    seed: str,
    watch: Watcher | None = None,
    make: Callable[[str], Policy] = find_policy,
) -> MatchOutcome:
    """Play the match of ``seed`` between the policies ``specs`` (one per seat).

    Raises:
        ValueError: not one policy spec per seat.
        AssertionError: a policy chose an illegal command.
    """
    players = rules.players
    if len(specs) != players:
        raise ValueError(f"{players} seats need {players} entrants, got {len(specs)}")
    started = time.perf_counter()
    games = tuple(
        play_game(rules, specs, order, seed, index, watch, make)
        for index, order in enumerate(rotations(players))
    )
    wins = [Fraction(0)] * players
    points = [Fraction(0)] * players
    for game in games:
        for seat, entrant in enumerate(game.order):
            wins[entrant] += game.wins[seat]
            points[entrant] += game.points[seat]
    ranks = rank_totals(wins, points, rules.scoring == "penalty")
    return MatchOutcome(games, tuple(wins), tuple(points), ranks, time.perf_counter() - started)
