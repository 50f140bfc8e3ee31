"""``mc`` versions 2 and 3: their objectives, specs and knock search."""

from __future__ import annotations

import random

import pytest

from bots.policies import find_policy
from bots.policies.heuristic import HeuristicPolicy
from bots.policies.mc import MonteCarloPolicy, _rollout_command, hand_share, version2, version3
from protocol.game import HandEnded
from server.engine import (
    Command,
    Discard,
    Knock,
    legal_actions,
    make_rules,
    parse_card,
    view,
)
from tests.bots.test_strategies import _knock_position

GIN = make_rules("gin", {}, 2)
RAMINO = make_rules("ramino", {}, 3)


def _ended(winner: int, points: tuple[str, ...]) -> HandEnded:
    players = len(points)
    return HandEnded(
        hand=1,
        winner=winner,
        reason="knock",
        rummy=False,
        hands=((),) * players,
        counts=(0,) * players,
        points=points,
        totals=points,
    )


def test_hand_share_is_the_win_of_a_one_hand_game() -> None:
    """The winner takes 1; with no winner the best count shares it: two seats level at the top
    get one half each, the third nothing; under penalty scoring (Ramino) the fewest points are
    best, so 0 and 0 against 12 share."""
    assert 1.0 == hand_share(_ended(1, ("0", "18")), GIN, 1)
    assert 0.0 == hand_share(_ended(1, ("0", "18")), GIN, 0)
    assert 0.5 == hand_share(_ended(-1, ("0", "0")), GIN, 0)
    assert 0.5 == hand_share(_ended(-1, ("0", "0", "12")), RAMINO, 1)
    assert 0.0 == hand_share(_ended(-1, ("0", "0", "12")), RAMINO, 2)


def test_mc_v2_is_found_by_its_spec() -> None:
    """``mc:50:v2`` is version 2 with a 50 ms budget: the hand objective, knocking weighed
    against playing on, the budget in process time; ``mc:50`` and ``mc:50:v1`` stay version 1;
    an unknown version or a budget that is not positive is a ``KeyError``."""
    policy = find_policy("mc:50:v2")
    assert isinstance(policy, MonteCarloPolicy)
    assert 0.05 == policy.budget
    assert "hand" == policy.objective
    assert {"knock", "play_on", "wall"} == policy.search
    for spec in ("mc:50", "mc:50:v1"):
        old = find_policy(spec)
        assert isinstance(old, MonteCarloPolicy)
        assert "points" == old.objective
        assert {"knock", "wall"} == old.search
    with pytest.raises(KeyError, match="versions"):
        find_policy("mc:50:v5")
    with pytest.raises(KeyError, match="positive"):
        find_policy("mc:0:v2")


def test_an_unknown_objective_is_refused() -> None:
    """Only ``points`` and ``hand`` are objectives."""
    with pytest.raises(ValueError, match="objective"):
        MonteCarloPolicy(objective="gin")


def _searching(**settings: object) -> MonteCarloPolicy:
    """Version 2 stopped by its sample count, not by the clock (so the test does not depend
    on the machine's speed)."""
    policy = version2(budget_ms=600_000)
    policy.samples = 48
    policy.min_samples = 48
    for key, value in settings.items():
        setattr(policy, key, value)
    return policy


def _choice(policy: HeuristicPolicy | MonteCarloPolicy) -> Command:
    """Seat 1's choice in ``_knock_position`` (28 cards left in the stock)."""
    state = _knock_position("KS", policy)
    return policy.choose(GIN, view(state, 1), legal_actions(state, 1), random.Random(0))


def test_mc_v2_knocks_where_the_heuristic_waits_for_gin() -> None:
    """Early (28 cards left), 9 deadwood after throwing KH and five live gin cards: the
    heuristic plays on for the gin bonus (``test_heuristic_waits_for_gin_instead_of_knocking``).
    To win the hand, knocking now is better: it loses only to an undercut, which needs the
    defender at 9 or less after lay-offs this early, while playing on keeps that risk for the
    knock a turn later and adds the opponent's chance to knock or go gin first. Version 2
    knocks, and with KH (the knock that leaves 9; any other leaves more)."""
    assert isinstance(_choice(HeuristicPolicy()), Discard)
    assert Knock(card=parse_card("KH")) == _choice(_searching())


def test_mc_v2_chooses_a_legal_command_with_a_tiny_budget() -> None:
    """With 1 ms the search stops at once and still returns one of the legal commands."""
    policy = version2(budget_ms=1)
    state = _knock_position("KS", policy)
    seen = view(state, 1)
    actions = legal_actions(state, 1)
    assert policy.choose(GIN, seen, actions, random.Random(0)) in actions


def test_mc_v3_is_found_by_its_spec() -> None:
    """``mc:50:v3`` is version 3 with a 50 ms budget: the points objective (the ladder breaks
    split wins by points) with no game term (a ladder game is one hand), knocking weighed
    against playing on, opponents' hands sampled as kept, the heuristic's move left only for a
    candidate 2 standard errors better."""
    policy = find_policy("mc:50:v3")
    assert isinstance(policy, MonteCarloPolicy)
    assert 0.05 == policy.budget
    assert "points" == policy.objective
    assert 0.0 == policy.game_weight
    assert policy.kept_hands
    assert 2.0 == policy.deviate_z
    assert {"knock", "play_on", "wall"} == policy.search


def test_a_waiting_rollout_knocks_only_with_gin_until_the_stock_runs_low() -> None:
    """Seat 1 in ``_knock_position`` may knock with 9 deadwood (28 cards in the stock): the
    rollout play knocks at once, the waiting one (``wait`` 10) discards, and knocks again
    once the stock is down to 10 cards."""
    state = _knock_position("KS", HeuristicPolicy())
    assert len(state.stock) > 10
    assert isinstance(_rollout_command(state, 1), Knock)
    assert isinstance(_rollout_command(state, 1, wait=10), Discard)
    assert isinstance(_rollout_command(state, 1, wait=len(state.stock)), Knock)
    # The opponent's waiting is its own setting.
    assert isinstance(_rollout_command(state, 0, wait=10), Knock)
    assert isinstance(_rollout_command(state, 0, opponent_wait=10), Discard)


def test_mc_v3_leaves_the_heuristic_only_when_the_search_is_sure() -> None:
    """With a deviation threshold no search can reach, version 3 plays the heuristic's move
    (here: play on for the gin bonus); with none, it plays the candidate of best mean."""
    sure = version3(budget_ms=600_000)
    sure.samples = sure.min_samples = 48
    sure.deviate_z = 1e9
    assert isinstance(_choice(sure), Discard)
    free = version3(budget_ms=600_000)
    free.samples = free.min_samples = 48
    free.deviate_z = 0.0
    assert _choice(free) in legal_actions(_knock_position("KS", free), 1)


def test_kept_hands_hold_less_deadwood_than_random_ones() -> None:
    """Seat 1's worlds in ``_knock_position``: the opponent has discarded once, so a kept
    world lets him draw and throw once, which never raises his deadwood; over 50 worlds it
    lowers it on average, and every kept world still holds the same cards in all."""
    from bots.policies.determinize import sample_world
    from bots.policies.evaluation import Knowledge
    from bots.policies.mc import _kept
    from server.engine.solver import deadwood

    heuristic = HeuristicPolicy()
    state = _knock_position("KS", heuristic)
    seen = view(state, 1)
    knowledge = Knowledge.build(GIN, seen, heuristic.tracker.sync(seen))
    rng = random.Random(3)
    raw_total = kept_total = 0
    for _ in range(50):
        world = sample_world(knowledge, rng)
        assert world is not None
        kept = _kept(world, knowledge, rng)
        raw = deadwood(world.hands[0], GIN.meld_rules, GIN.values)
        tight = deadwood(kept.hands[0], GIN.meld_rules, GIN.values)
        assert tight <= raw
        assert kept.hands[1] == world.hands[1]
        assert sorted((*kept.hands[0], *kept.stock)) == sorted((*world.hands[0], *world.stock))
        raw_total += raw
        kept_total += tight
    assert kept_total < raw_total


def test_the_trace_sees_every_candidate_and_the_choice() -> None:
    """A search reports each candidate's mean over the worlds played, the heuristic's move
    first (here: play on, a discard), and the command it returns."""
    policy = version3(budget_ms=600_000)
    policy.samples = policy.min_samples = 16
    seen_calls: list[tuple[list[tuple[Command, float]], Command]] = []
    policy.trace = lambda _seen, means, chosen: seen_calls.append((means, chosen))
    chosen = _choice(policy)
    assert 1 == len(seen_calls)
    means, traced = seen_calls[0]
    assert traced == chosen
    assert isinstance(means[0][0], Discard)
    assert any(isinstance(command, Knock) for command, _ in means)
    assert all(-200 < value < 200 for _, value in means)
