"""``mc`` version 4's knock rule (``bots.policies.knock_model``) and its fitting bench."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from bench import knock_model as bench
from bots.policies import find_policy, knock_model
from bots.policies.heuristic import GinTurn, HeuristicPolicy
from bots.policies.knock_model import FEATURES, KnockModel
from bots.policies.mc import MonteCarloPolicy
from protocol.cards import parse_card, parse_cards
from server.engine import Discard, Knock, legal_actions, view
from tests.bots.test_strategies import GIN, _knock_position


def _turn() -> tuple[GinTurn, Discard | Knock]:
    """Seat 1's decision in ``_knock_position`` (the opponent threw KS) and the heuristic's
    move there."""
    policy = HeuristicPolicy()
    state = _knock_position("KS", policy)
    seen = view(state, 1)
    actions = legal_actions(state, 1)
    memory = policy.tracker.sync(seen)
    turn = GinTurn(GIN, seen, actions, memory, policy.gin)
    default = turn.choose()
    assert isinstance(default, Discard | Knock)
    return turn, default


def test_the_features_of_a_worked_position() -> None:
    """Seat 1 holds AC AD AH 5S 6S 7S 9C TC JC KH 9H. Knocking with KH leaves 9H: 9 deadwood,
    and shows A-A-A (the fourth ace, AS, lays off), 5-6-7S (4S, 8S) and 9-T-JC (8C, QC): five
    lay-off cards, none of them seen by seat 1 (it has seen its hand and the pile 3H QS KS).
    The stock: 52 - 20 dealt - 1 upcard = 31, less three draws = 28. The opponent has thrown
    one card, KS (mean value 10, none of 5 or less, the lowest of his last two 10), declined
    two upcards (the first one, 3H, and QS, which seat 1 threw before he drew from the stock)
    and picked nothing; the heuristic plays on here (it waits for gin)."""
    turn, default = _turn()
    assert isinstance(default, Discard)
    pair = knock_model.candidates(turn, default)
    assert pair is not None
    knock, on = pair
    assert Knock(card=parse_card("KH")) == knock
    raw = knock_model.raw_features(turn, knock, on, heuristic_knocks=False)
    assert 9 == raw["left"]
    assert 28 == raw["stock"]
    assert 3 == raw["melds"]
    assert 5 == raw["layoff_cards"]
    assert 0 == raw["picks"]
    assert 1 == raw["discards"]
    assert 2 == raw["declines"]
    assert 10.0 == raw["discard_mean"]
    assert 0 == raw["low_discards"]
    assert 10 == raw["last_discards_low"]
    assert 0.0 == raw["heuristic_knocks"]
    values = knock_model.features(turn, knock, on, heuristic_knocks=False)
    assert len(FEATURES) == len(values)
    assert 9 * 28 / 30 == values[FEATURES.index("left x stock / 30")]


def test_the_rule_follows_the_sign_of_the_estimate() -> None:
    """A model that only has an intercept knocks when it is positive and plays on (with the
    heuristic's best discard) when it is negative."""
    turn, default = _turn()
    flat = (0.0,) * len(FEATURES)
    scale = (1.0,) * len(FEATURES)
    knocking = KnockModel(flat, scale, (5.0, *flat))
    waiting = KnockModel(flat, scale, (-5.0, *flat))
    assert Knock(card=parse_card("KH")) == knock_model.choice(turn, default, knocking)
    assert default == knock_model.choice(turn, default, waiting)


def test_gin_is_not_the_rule_s_to_decide() -> None:
    """With gin on the hand there is nothing to weigh: the rule does not apply."""
    policy = HeuristicPolicy()
    state = _knock_position("KS", policy)
    seen = view(state, 1)
    # Replace the 9H by 8C: 8-9-T-J C is a run and KH the card to throw, leaving nothing.
    hand = tuple(sorted((*parse_cards("AC AD AH 5S 6S 7S 9C TC JC KH"), parse_card("8C"))))
    assert parse_card("8C") not in seen.pile
    seen = msgspec.structs.replace(seen, hand=hand)
    actions = [Discard(card) for card in hand] + [Knock(card) for card in hand]
    turn = GinTurn(GIN, seen, actions, policy.tracker.sync(seen), policy.gin)
    assert knock_model.candidates(turn, Knock(parse_card("KH"))) is None


def test_mc_v4_is_version_3_with_the_knock_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = find_policy("mc:50:v4")
    assert isinstance(policy, MonteCarloPolicy)
    assert policy.knock_model
    assert 0.05 == policy.budget
    assert policy.kept_hands
    assert "points" == policy.objective
    # It asks the rule: with a rule that always knocks, it knocks where the heuristic waits.
    flat = (0.0,) * len(FEATURES)
    monkeypatch.setattr(
        knock_model, "MODEL", KnockModel(flat, (1.0,) * len(FEATURES), (5.0, *flat))
    )
    state = _knock_position("KS", policy)
    chosen = policy.choose(GIN, view(state, 1), legal_actions(state, 1), random.Random(0))
    assert Knock(card=parse_card("KH")) == chosen


def test_the_shipped_model_fits_its_feature_list() -> None:
    model = knock_model.MODEL
    assert len(FEATURES) == len(model.mean) == len(model.scale) == len(model.weights) - 1
    assert all(scale > 0 for scale in model.scale)
    assert any(weight != 0 for weight in model.weights)


def test_the_fit_recovers_a_linear_target() -> None:
    """Rows whose target is 3 + 2 x the first feature - the second: the fitted model's
    estimates are those (the ridge term is small against 2,000 rows)."""
    rng = random.Random(1)
    rows = []
    for match in range(2000):
        values = tuple(rng.uniform(-5, 5) for _ in FEATURES)
        target = 3 + 2 * values[0] - values[1]
        rows.append(bench.Row(values, target, target, False, match))
    model = bench.fit(rows)
    for row in rows[:20]:
        assert model.value(row.features) == pytest.approx(row.target, abs=0.2)
    figures = bench.cross_validate(rows)
    assert figures["right"] > 0.95


def test_the_written_model_is_read_back(tmp_path: Path) -> None:
    source = Path(knock_model.__file__).read_text()
    target = tmp_path / "knock_model.py"
    target.write_text(source)
    model = KnockModel(
        (1.5,) * len(FEATURES), (2.0,) * len(FEATURES), (0.25,) * (len(FEATURES) + 1)
    )
    bench.write(model, target)
    namespace: dict[str, object] = {}
    exec(compile(target.read_text(), str(target), "exec"), namespace)
    written = namespace["MODEL"]
    assert (model.mean, model.scale, model.weights) == (
        written.mean,  # type: ignore[attr-defined]
        written.scale,  # type: ignore[attr-defined]
        written.weights,  # type: ignore[attr-defined]
    )
