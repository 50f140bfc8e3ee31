"""Every policy returns one of the legal actions, in every preset at every player count.

A seeded random playout of each preset (with a few house rules that open claim windows or
change the knock limit) stops at positions spread over the game; at each, every policy that
plays the preset is asked for a move, having watched the game so far through ``observe``
(redacted events) and through its earlier views. The move must be one of ``legal_actions``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from bots.policies import Policy, find_policy
from bots.policies.base import POLICY_NAMES, supports
from bots.policies.mc import MonteCarloPolicy
from server.engine import (
    VARIANTS,
    Command,
    Event,
    State,
    chance,
    chance_pending,
    decide,
    describe_command,
    evolve,
    is_over,
    legal_actions,
    make_rules,
    new_game,
    redact,
    to_move,
    view,
)

CASES: list[tuple[str, int, Mapping[str, object]]] = [
    (name, players, {})
    for name, preset in sorted(VARIANTS.items())
    for players in range(preset.min_players, preset.max_players + 1)
]
CASES += [
    ("ramino", 4, {"bussare": True, "open_to_take_upcard": True}),
    ("ramino", 3, {"chiudere_in_mano": False, "bussare": True}),
    ("rummy500", 3, {"top_discard_must_be_used": True, "floating": True}),
    ("rummy500", 4, {"unplayable_last_discard": True, "values": "5_10_15"}),
    ("gin", 2, {"oklahoma": True}),
    ("gin", 2, {"big_gin_bonus": 0, "box_bonus": 0, "game_bonus": 0, "shutout": "off"}),
    ("basic", 3, {"layoff_requires_own_meld": True, "must_discard_to_go_out": True}),
    ("basic", 4, {"ace": "around", "melds_per_turn": "unlimited", "stock_exhausted": "shuffle"}),
    ("knock", 3, {"tie_goes_to": "opponent", "rummy_bonus": 25}),
]

POSITIONS = 8
"""Positions checked per case."""
STRIDE = 9
"""Random moves between two checked positions."""


def _policies(players: int) -> dict[str, list[Policy]]:
    """One instance of every policy per seat (``mc`` with a tiny budget, to stay fast)."""
    made: dict[str, list[Policy]] = {}
    for name in POLICY_NAMES:
        if name == "mc":
            made[name] = [
                MonteCarloPolicy(budget_ms=15, samples=6, min_samples=2) for _ in range(players)
            ]
        else:
            made[name] = [find_policy(name) for _ in range(players)]
    return made


def _advance(state: State, rng: random.Random, watchers: dict[str, list[Policy]]) -> State:
    """One step of the random playout, shown to every watching policy."""
    events: tuple[Event, ...]
    if chance_pending(state):
        events = (chance(state, rng),)
    else:
        seat = to_move(state)
        events = decide(state, seat, rng.choice(legal_actions(state, seat)))
    for event in events:
        for policies in watchers.values():
            for seat, policy in enumerate(policies):
                policy.observe(seat, redact(state, event, seat))
        state = evolve(state, event)
    return state


@pytest.mark.parametrize(
    ("variant", "players", "options"),
    CASES,
    ids=[
        f"{v}-{p}" + ("-" + ",".join(f"{k}={x}" for k, x in o.items()) if o else "")
        for v, p, o in CASES
    ],
)
def test_every_policy_chooses_a_legal_action(
    variant: str, players: int, options: Mapping[str, object]
) -> None:
    """At positions spread over a random game, each policy picks one of the legal actions."""
    rules = make_rules(variant, options, players)
    rng = random.Random(f"policies:{variant}:{players}:{sorted(options.items())}")
    state = new_game(rules)
    watchers = _policies(players)
    playing = {
        name: policies for name, policies in watchers.items() if supports(policies[0], rules)
    }
    assert {"random", "greedy", "simple", "heuristic"} <= set(playing)
    checked = 0
    while checked < POSITIONS and not is_over(state):
        for _ in range(rng.randrange(1, STRIDE)):
            if is_over(state):
                break
            state = _advance(state, rng, watchers)
        if is_over(state) or chance_pending(state):
            continue
        seat = to_move(state)
        actions = legal_actions(state, seat)
        seen = view(state, seat)
        for name, policies in playing.items():
            chosen: Command = policies[seat].choose(rules, seen, actions, random.Random(checked))
            assert chosen in actions, (
                f"{name} chose {describe_command(chosen)} in phase {state.phase}; legal:"
                f" {[describe_command(action) for action in actions]}"
            )
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_find_policy_returns_a_fresh_instance_named_as_asked(name: str) -> None:
    """``find_policy`` builds a new policy each call, whose ``name`` is the one asked for."""
    first, second = find_policy(name), find_policy(name)
    assert name == first.name
    assert first is not second


def test_find_policy_rejects_unknown_names() -> None:
    """An unknown name (or an argument to a policy that takes none) is a ``KeyError``."""
    with pytest.raises(KeyError, match="unknown policy"):
        find_policy("clever")
    with pytest.raises(KeyError, match="takes no argument"):
        find_policy("greedy:5")


def test_mc_takes_a_budget_in_milliseconds() -> None:
    """``mc:50`` is the Monte Carlo policy with a 50 ms budget per decision."""
    policy = find_policy("mc:50")
    assert isinstance(policy, MonteCarloPolicy)
    assert 0.05 == policy.budget
