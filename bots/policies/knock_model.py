"""The knock rule of ``mc`` version 4: knock or play on, by a value fitted to playouts.

Theory of operation. In two-player Gin Rummy, once a knock other than gin is legal, the choice
between knocking (with the knock that leaves least deadwood, or the heuristic's) and playing on
(the heuristic's best discard) is worth more points than any other: the heuristic makes it with
a table of undercut risks. This rule instead estimates *knock less play on*, in points of the
hand's margin, as a linear function of what the seat knows at the decision (``features``):
the deadwood it would knock with, the stock left, the heuristic's undercut risk and alarm,
the judgement of the hand it would keep by playing on (deadwood, potential, knock and gin
chance), what the opponent has picked, thrown and declined, how many unseen cards could be laid
off on the melds it would show (and how likely the opponent holds them), the danger of the card
it would throw, and products of these. It knocks when the estimate is positive.

The weights come from ``python -m bench.knock_model`` (see its docstring): ``heuristic``
against ``heuristic`` in ladder matches of the ``gin-2`` pool; at every such decision the hand
is played on from the *true* cards after each of the two moves, both seats as ``heuristic``,
over 8 shuffles of the stock, and the mean difference of the margins is the target of a ridge
regression on the standardised features. So the rule is a Monte Carlo evaluation done ahead of
time: at play time it costs one judgement of the kept hand, well under a millisecond.

Only two-player Gin Rummy with one deck uses it (the rule knows one opponent). It was fitted on
single hands, as the ladder plays them: in games to a target it does not know the score, and
does not knock for the game as the heuristic does when the opponent is near it. The weights
are tied to the feature list below, so a change to either means running the bench again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bots.policies.heuristic import GinTurn, undercut_risk
from protocol.cards import card_face
from server.engine import Command, Discard, Knock
from server.engine.melds import layoff_faces
from server.engine.solver import best_melds, discard_deadwoods

__all__ = ["FEATURES", "MODEL", "KnockModel", "choice", "features", "raw_features"]

FEATURES: tuple[str, ...] = (
    "left",
    "stock",
    "risk",
    "alarm",
    "gin",
    "knock_chance",
    "potential",
    "kept_deadwood",
    "picks",
    "discards",
    "declines",
    "heuristic_knocks",
    "left x stock / 30",
    "risk x alarm",
    "gin x stock / 30",
    "kept_deadwood - left",
    "left^2 / 10",
    "risk x (1 + 3 alarm)",
    "picks x left / 10",
    "stock^2 / 900",
    "left x alarm",
    "layoff_chance",
    "layoff_cards",
    "discard_mean",
    "low_discards",
    "last_discards_low",
    "throw_danger",
    "melds",
    "layoff_chance x left / 10",
    "discard_mean x left / 10",
    "last_discards_low x left / 10",
    "throw_danger x stock / 30",
)
"""The features, in the order of the weights."""


@dataclass(frozen=True)
class KnockModel:
    """A linear estimate of knock less play on, in points, on standardised features."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    """The intercept, then one weight per feature."""

    def value(self, values: Sequence[float]) -> float:
        """The estimate for the features ``values`` (in ``FEATURES`` order)."""
        total = self.weights[0]
        for value, mean, scale, weight in zip(values, self.mean, self.scale, self.weights[1:]):
            total += (value - mean) / scale * weight
        return total


def raw_features(
    turn: GinTurn, knock: Knock, on: Discard, heuristic_knocks: bool
) -> dict[str, float]:
    """What the seat of ``turn`` knows, for knocking with ``knock`` against playing on by
    discarding ``on`` (the named measures before their products)."""
    rules, seen = turn.rules, turn.seen
    memory = turn.knowledge.memory
    holders = turn.knowledge.holders
    opponent = 1 - seen.seat
    left = discard_deadwoods(seen.hand, rules.meld_rules, rules.values)[knock.card]
    kept = [card for card in seen.hand if card != on.card]
    deadwood, potential, knock_chance, gin = turn.evaluator.judge(kept)
    # The cards the opponent could lay off on the melds this knock would show.
    shown = [card for card in seen.hand if card != knock.card]
    melds, _ = best_melds(shown, rules.meld_rules, rules.values)
    # One deck: a card is its face.
    extensions = {face for meld in melds for face in layoff_faces(meld, rules.meld_rules)}
    thrown = [rules.values[card_face(card)] for card in memory.discarded.get(opponent, [])]
    return {
        "left": left,
        "stock": seen.stock_size,
        "risk": undercut_risk(left, seen.stock_size),
        "alarm": turn.alarm,
        "gin": gin,
        "knock_chance": knock_chance,
        "potential": potential,
        "kept_deadwood": deadwood,
        "picks": len(memory.known(opponent)),
        "discards": len(thrown),
        "declines": len(memory.declined.get(opponent, [])),
        "heuristic_knocks": float(heuristic_knocks),
        "layoff_chance": sum(holders.get(card, 0.0) for card in extensions),
        "layoff_cards": sum(1 for card in extensions if card in holders),
        "discard_mean": sum(thrown) / len(thrown) if thrown else 10.0,
        "low_discards": sum(1 for value in thrown if value <= 5),
        "last_discards_low": min(thrown[-2:]) if thrown else 10,
        "throw_danger": turn.knowledge.danger(on.card),
        "melds": len(melds),
    }


def features(turn: GinTurn, knock: Knock, on: Discard, heuristic_knocks: bool) -> list[float]:
    """The model's inputs, in ``FEATURES`` order."""
    raw = raw_features(turn, knock, on, heuristic_knocks)
    left, stock, risk, alarm = raw["left"], raw["stock"], raw["risk"], raw["alarm"]
    return [float(raw[name]) for name in FEATURES[:12]] + [
        left * stock / 30,
        risk * alarm,
        raw["gin"] * stock / 30,
        raw["kept_deadwood"] - left,
        left * left / 10,
        risk * (1 + 3 * alarm),
        raw["picks"] * left / 10,
        stock * stock / 900,
        left * alarm,
        raw["layoff_chance"],
        raw["layoff_cards"],
        raw["discard_mean"],
        raw["low_discards"],
        raw["last_discards_low"],
        raw["throw_danger"],
        raw["melds"],
        raw["layoff_chance"] * left / 10,
        raw["discard_mean"] * left / 10,
        raw["last_discards_low"] * left / 10,
        raw["throw_danger"] * stock / 30,
    ]


def candidates(turn: GinTurn, default: Command) -> tuple[Knock, Discard] | None:
    """The knock and the play-on discard the rule chooses between, or ``None`` where it does
    not apply: not a two-player one-deck Gin Rummy play, no knock or no discard allowed, a gin
    (always taken) or the big gin's knock without a discard."""
    rules, seen, actions = turn.rules, turn.seen, turn.actions
    if seen.phase != "play" or seen.players != 2 or rules.decks != 1 or rules.jokers:
        return None
    knocks = [action for action in actions if isinstance(action, Knock)]
    discards = [action for action in actions if isinstance(action, Discard)]
    if not knocks or not discards or any(knock.card < 0 for knock in knocks):
        return None
    left = discard_deadwoods(seen.hand, rules.meld_rules, rules.values)
    if min(left.values()) == 0:
        return None
    scores = {
        action.card: turn.score([card for card in seen.hand if card != action.card], action.card)
        for action in discards
    }
    on = min(discards, key=lambda action: (scores[action.card], action.card))
    if isinstance(default, Knock):
        return default, on
    knock = min(
        knocks, key=lambda action: (left[action.card], scores.get(action.card, 0.0), action.card)
    )
    return knock, on


def choice(turn: GinTurn, default: Command, model: KnockModel | None = None) -> Command | None:
    """Knock or play on, by ``model`` (``MODEL``); ``None`` where the rule does not apply."""
    pair = candidates(turn, default)
    if pair is None:
        return None
    knock, on = pair
    value = (model or MODEL).value(features(turn, knock, on, isinstance(default, Knock)))
    return knock if value > 0 else on


# Written by ``python -m bench.knock_model`` (see the module docstring); do not edit by hand.
MODEL = KnockModel(
    mean=(
        5.591290479162333,
        16.258373205741627,
        0.053054573191864136,
        0.39730947923173804,
        0.08318336158991965,
        0.999983027859042,
        1.0576923901010922,
        5.677761597670065,
        1.2605921919423064,
        8.52153110047847,
        7.485819291311282,
        0.08563899868247694,
        3.16143124609944,
        0.020750433395740845,
        0.03923838220427406,
        0.08647111850773179,
        4.009264267387923,
        0.11530587337909436,
        0.6487344844324301,
        0.33777608271886467,
        2.119221967963394,
        0.5769140694345181,
        2.1731502669717773,
        8.476550457360263,
        1.1364676513417933,
        5.970459746203454,
        0.16477652153190142,
        2.2492198876638234,
        0.2957796695483145,
        4.7957743296965925,
        3.47071631648288,
        0.09271966731131209,
    ),
    scale=(
        2.971550682296052,
        6.297918319762841,
        0.06234465353798904,
        0.2581392096380461,
        0.07062482741736228,
        0.001487972507886921,
        0.6767013693208778,
        2.9591860954074645,
        0.9226628555302673,
        3.360796972777224,
        3.199385712411522,
        0.2798302362984764,
        2.282834142898842,
        0.03199622244344001,
        0.032333962499929085,
        0.4300586658982645,
        3.344144478726127,
        0.14914605691467492,
        0.6118430735121819,
        0.22836168154648756,
        1.8325666467441122,
        0.3782166777438635,
        1.0902879503288097,
        0.8684235501089305,
        1.3143743896101316,
        2.3808317344215055,
        0.18663390307032893,
        0.44426585207879565,
        0.24581390306136666,
        2.6784831441353294,
        2.4900039193184824,
        0.10630808433531568,
    ),
    weights=(
        -7.566191251905995,
        -7.397889159337211,
        3.1643190139282393,
        0.08182062213769659,
        0.804876028055016,
        -0.9055766450277534,
        -0.17107681462017157,
        -2.0846580782222195,
        -7.1326721462906715,
        -0.38023584221508494,
        -0.16405305309660417,
        -2.510216786585767,
        -0.2476498112528745,
        3.008865970774347,
        0.24993997227227727,
        -4.513305916951097,
        2.037625119742087,
        -0.018041307583765247,
        0.19506035752627532,
        -2.102634507919749,
        -3.325942588966908,
        -1.1321168889692887,
        1.0200262956780686,
        -1.9262898551911343,
        0.6115544697470805,
        -0.34874479923460444,
        -0.22478602438255538,
        3.19120868001345,
        -0.9963709589949749,
        -0.7655627922052158,
        8.566351346906538,
        3.658322421612023,
        -0.8210131578053856,
    ),
)
