"""``mc``: determinized Monte Carlo over the ``heuristic``'s knock decisions.

Theory of operation. ``mc`` plays as ``heuristic`` except where it searches: by default *which*
knock, once the heuristic has decided to knock (every legal knock worth considering: they differ
in what the defender can lay off), and the wall (knock with the upcard or void the hand);
``search`` may add knocking against playing on (``play_on``), close draws and close discards.
Each candidate is played out in sampled *worlds*: the hidden cards dealt out consistently with
everything seen (``determinize.sample_world``: the opponent's known picks in his hand, the rest
weighted by what his discards, declines and picks suggest, and in Gin Rummy preferably no hand
he could have knocked with). From each world every candidate is played to the end of the hand by
a cheap rollout policy (the opponent as ``simple``: take the upcard only when it melds, throw
the card that leaves least deadwood, knock at once; this seat a little better: it also takes an
upcard that lets it knock or cuts its deadwood a lot, and weighs the danger of its discards). A
knock needs no rollout: the engine settles it in the world. Every candidate meets the same world
and the same chance (common random numbers), so the comparison is sharper than the outcomes. A
candidate's value is the mean of ``my points - the opponent's`` at the end of the hand, plus
``game_weight`` when that hand would end the game with this seat winning (minus it for a loss).

Sampling stops after ``samples`` worlds, when the leader is ahead of every other candidate by
``stop_z`` standard errors of the paired differences (after ``min_samples``), or when
``budget_ms`` is spent, whichever comes first; so a decision never takes much more than the
budget, and a run is reproducible as long as the budget is not what stops it.

Why not search every draw and discard, or whether to knock: with rollouts cheap enough for the
budget (this seat playing ``simple``-like after the candidate move), searching close draws and
discards chose worse than ``heuristic``'s own judgement, and so did weighing a knock against
playing on once the heuristic's knock rule was tuned (see docs/bots.md): the rollouts
undervalue what the heuristic's potential term sees, and so playing on.

Version 2 (``version2``, spec ``mc:MS:v2``, the ladder's ``mc@2``) plays for the hand, as a
game of ``ramino duel`` without a target and every ladder game is one hand: a world's value is
this seat's share of the hand's win (``hand_share``: 1 to the winner, a tie split) plus
``points_weight`` per point of margin (a tie-break), and every knock worth considering is
weighed against the heuristic's best discard (``play_on``), so it knocks where the heuristic
waits for gin and plays on where the sampled defenders would undercut. Its budget counts
process time (``time.process_time``), so a loaded machine does not shorten the search. Its
points per hand are lower than the heuristic's (it gives up gins for surer wins): it is built
for single hands, not for games to 100.

Variants: Gin Rummy and Knock Rummy (one deck, no table melds), where a hand plays out in a
millisecond. Other presets have long hands with table melds; ``mc`` does not play them.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from bots.policies.determinize import sample_world
from bots.policies.evaluation import Knowledge, fast_joins_meld
from bots.policies.heuristic import GinTurn, HeuristicPolicy, KnockTurn
from bots.policies.knock_model import choice as knock_choice
from protocol.cards import Card, card_face
from server.engine import (
    Command,
    Discard,
    DrawStock,
    Event,
    GameEnded,
    HandEnded,
    Knock,
    Pass,
    Phase,
    RuleError,
    Rules,
    State,
    TakeDiscard,
    View,
    chance,
    chance_pending,
    decide,
    evolve,
)
from server.engine.solver import deadwood, discard_deadwoods

__all__ = ["MonteCarloPolicy", "hand_share", "rollout", "version2", "version3", "version4"]

_MAX_ROLLOUT_STEPS = 400
"""A rollout still running after this many moves is scored as it stands (no one out)."""
_SEARCH_SHARE = 0.8
"""Share of the budget the search may plan to use (the rest is headroom for the heuristic's
candidates and a slow world)."""
_TAKE_CUT = 6
"""Deadwood an upcard must cut for the searching seat's rollout play to take it."""
_DANGER_WEIGHT = 4.0
"""Points per unit of danger in the searching seat's rollout discards (as ``heuristic``)."""


@dataclass
class _Candidate:
    command: Command
    wait: bool = False
    """Play on, this seat's rollout waiting for gin (``gin_wait``)."""
    total: float = 0.0
    count: int = 0


class MonteCarloPolicy:
    """Searches the heuristic's best candidates with determinized rollouts."""

    name = "mc"
    variants = frozenset({"gin", "knock"})

    def __init__(
        self,
        budget_ms: float = 200.0,
        samples: int = 256,
        min_samples: int = 32,
        stop_z: float = 3.0,
        draw_window: float = 4.0,
        discard_window: float = 3.0,
        max_candidates: int = 3,
        game_weight: float = 40.0,
        search: frozenset[str] = frozenset({"knock", "wall"}),
        knock_candidates: int = 3,
        objective: str = "points",
        points_weight: float = 0.002,
        gin_wait: bool = False,
        wait_stock: int = 10,
        deviate_z: float = 0.0,
        opponent_wait: int = -1,
        kept_hands: bool = False,
        knock_model: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.heuristic = HeuristicPolicy()
        self.budget = budget_ms / 1000
        self.samples = samples
        self.min_samples = min_samples
        self.stop_z = stop_z
        self.draw_window = draw_window
        self.discard_window = discard_window
        self.max_candidates = max_candidates
        self.game_weight = game_weight
        self.search = search
        self.knock_candidates = knock_candidates
        if objective not in ("points", "hand"):
            raise ValueError(f"unknown objective {objective!r}; known: points, hand")
        self.objective = objective
        self.points_weight = points_weight
        self.gin_wait = gin_wait
        self.wait_stock = wait_stock
        self.deviate_z = deviate_z
        self.opponent_wait = opponent_wait
        self.kept_hands = kept_hands
        self.knock_model = knock_model
        self.clock = clock
        self._danger: Callable[[Card], float] | None = None
        self.trace: Callable[[View, list[tuple[Command, float]], Command], None] | None = None
        """Called after every search with the view, each candidate's mean value over the
        worlds played (``nan`` if none) and the command chosen (``bench.mc_knocks``); and
        after each decision of version 4's knock rule, with the heuristic's move first, the
        rule's next if it differs, both valued ``nan``."""

    def observe(self, seat: int, event: Event) -> None:
        """Track ``event`` for ``seat`` (the heuristic's card tracking)."""
        self.heuristic.observe(seat, event)

    def choose(
        self, rules: Rules, seen: View, actions: Sequence[Command], rng: random.Random
    ) -> Command:
        """The candidate with the best mean rollout outcome (the heuristic's move when the
        choice is clear or the variant is not searched)."""
        started = self.clock()
        tracker = self.heuristic.tracker
        memory = tracker.sync(seen)
        if len(actions) == 1 or not rules.knocking:
            command = self.heuristic.choose(rules, seen, actions, rng)
            return command
        if rules.knocking == "gin":
            turn: GinTurn | KnockTurn = GinTurn(rules, seen, actions, memory, self.heuristic.gin)
        else:
            turn = KnockTurn(rules, seen, actions, memory)
        default = turn.choose()
        if self.knock_model and isinstance(turn, GinTurn):
            learned = knock_choice(turn, default)
            if learned is not None:
                if self.trace is not None:  # the rule's two moves, as a search without values
                    other = [(learned, math.nan)] if learned != default else []
                    self.trace(seen, [(default, math.nan), *other], learned)
                tracker.note_command(seen, learned)
                return learned
        candidates = [_Candidate(command) for command in self._candidates(turn, default)]
        if self.deviate_z > 0:  # the heuristic's move first: it is kept unless clearly worse
            candidates.sort(key=lambda candidate: candidate.command != default)
        if self.gin_wait and rules.knocking == "gin":
            # Playing on may mean waiting for gin: weigh that as well as knocking soon.
            candidates += [
                _Candidate(c.command, wait=True)
                for c in candidates
                if isinstance(c.command, Discard)
                and any(isinstance(other.command, Knock) for other in candidates)
            ]
        if len(candidates) > 1:
            command = self._search(rules, seen, turn.knowledge, candidates, rng, started)
            if self.trace is not None:
                means = [
                    (c.command, c.total / c.count if c.count else math.nan) for c in candidates
                ]
                self.trace(seen, means, command)
        else:
            command = default
        tracker.note_command(seen, command)
        return command

    # Candidates --------------------------------------------------------------------------------

    def _candidates(self, turn: GinTurn | KnockTurn, default: Command) -> list[Command]:
        seen, actions = turn.seen, turn.actions
        hand = seen.hand
        if seen.phase in ("draw", "first_upcard"):
            take = next((a for a in actions if isinstance(a, TakeDiscard)), None)
            other = next((a for a in actions if isinstance(a, DrawStock | Pass)), None)
            if take is None or other is None:
                return [default]
            if not any(isinstance(a, DrawStock) for a in actions) and seen.phase == "draw":
                # The wall: knock with the upcard, or void the hand.
                return [take, other] if "wall" in self.search else [default]
            if "draw" not in self.search:
                return [default]
            upcard = seen.pile[-1]
            best_take = min(
                turn.score([held for held in hand if held != card] + [upcard], card)
                for card in hand
            )
            best_keep = turn.score(hand, None)
            if abs(best_take - best_keep) > self.draw_window:
                return [default]
            return [default, other if default is take else take]
        discards = [a for a in actions if isinstance(a, Discard)]
        knocks = [a for a in actions if isinstance(a, Knock)]
        if any(knock.card == -1 for knock in knocks):
            return [default]
        scores = {
            action.card: turn.score([held for held in hand if held != action.card], action.card)
            for action in discards
        }
        ranked = sorted(discards, key=lambda action: (scores[action.card], action.card))
        candidates: list[Command] = [default]
        if ranked and "discard" in self.search:
            best = scores[ranked[0].card]
            for action in ranked:
                if len(candidates) >= self.max_candidates:
                    break
                if scores[action.card] <= best + self.discard_window and action not in candidates:
                    candidates.append(action)
        if knocks:
            left = discard_deadwoods(hand, turn.rules.meld_rules, turn.rules.values)
            by_left = sorted(knocks, key=lambda action: (left[action.card], action.card))
            if left[by_left[0].card] == 0:
                return [by_left[0]]
            if "knock" not in self.search:
                return candidates
            if "play_on" not in self.search:
                # The heuristic decides whether to knock; the search only which knock.
                if not isinstance(default, Knock):
                    return candidates
                candidates = [default]
            # Every knock worth considering (they differ in what the defender can lay off),
            # and (``play_on``) the best discard, so knocking is weighed against playing on.
            for knock in by_left[: self.knock_candidates]:
                if knock not in candidates:
                    candidates.append(knock)
            if "play_on" in self.search and ranked and ranked[0] not in candidates:
                candidates.append(ranked[0])
        return candidates

    # Search ------------------------------------------------------------------------------------

    def _search(
        self,
        rules: Rules,
        seen: View,
        knowledge: Knowledge,
        candidates: list[_Candidate],
        rng: random.Random,
        started: float,
    ) -> Command:
        differences: list[list[float]] = [[] for _ in candidates]
        # Stop early enough that the next world would not overrun the budget: a world costs
        # about what the last one did.
        deadline = started + _SEARCH_SHARE * self.budget
        seat = seen.seat
        plausible = _would_not_have_knocked(knowledge) if rules.knocking == "gin" else None
        cache: dict[Card, float] = {}

        def danger(card: Card) -> float:
            value = cache.get(card)
            if value is None:
                value = cache[card] = knowledge.danger(card)
            return value

        self._danger = danger
        clock = self.clock
        last = 0.0
        for sample in range(self.samples):
            begun = clock()
            if begun + last > deadline:
                break
            world = sample_world(knowledge, rng, plausible)
            if world is None:
                break
            if self.kept_hands and rules.knocking == "gin":
                world = _kept(world, knowledge, rng)
            seed = rng.getrandbits(32)
            outcomes = []
            for candidate in candidates:
                value = self._play_out(world, seat, candidate, seed)
                candidate.total += value
                candidate.count += 1
                outcomes.append(value)
            for index, value in enumerate(outcomes):
                differences[index].append(value - outcomes[0])
            last = clock() - begun
            if sample + 1 >= self.min_samples and self._decided(candidates, differences):
                break
        if candidates[0].count == 0:
            return candidates[0].command
        best = max(range(len(candidates)), key=lambda i: candidates[i].total / candidates[i].count)
        if self.deviate_z > 0 and best != 0 and candidates[best].command != candidates[0].command:
            # Leave the first candidate (the heuristic's move) only when the search is sure.
            paired = differences[best]
            count = len(paired)
            mean = sum(paired) / count
            variance = sum((value - mean) ** 2 for value in paired) / max(1, count - 1)
            if mean < self.deviate_z * math.sqrt(variance / count):
                return candidates[0].command
        return candidates[best].command

    def _decided(self, candidates: list[_Candidate], differences: list[list[float]]) -> bool:
        """Whether the leader is ahead of every other candidate by ``stop_z`` standard
        errors of the paired differences."""
        means = [c.total / c.count for c in candidates]
        leader = max(range(len(candidates)), key=lambda index: means[index])
        for index in range(len(candidates)):
            if index == leader:
                continue
            paired = [a - b for a, b in zip(differences[leader], differences[index])]
            count = len(paired)
            mean = sum(paired) / count
            variance = sum((value - mean) ** 2 for value in paired) / max(1, count - 1)
            if variance == 0:
                if mean <= 0:
                    return False
                continue
            if mean < self.stop_z * math.sqrt(variance / count):
                return False
        return True

    def _play_out(self, world: State, seat: int, candidate: _Candidate, seed: int) -> float:
        try:
            events = decide(world, seat, candidate.command)
        except RuleError:
            return -1000.0
        state = world
        for event in events:
            state = evolve(state, event)
            if isinstance(event, HandEnded):
                return self._value(world, event, seat)
        wait = self.wait_stock if candidate.wait else -1
        ended = rollout(state, random.Random(seed), seat, self._danger, wait, self.opponent_wait)
        if ended is None:
            return 0.0 if self.objective == "points" else 1 / sum(world.active)
        return self._value(world, ended, seat)

    def _value(self, world: State, ended: HandEnded, seat: int) -> float:
        points = [float(Fraction(point)) for point in ended.points]
        others = [point for index, point in enumerate(points) if index != seat]
        value = points[seat] - (sum(others) / len(others) if others else 0.0)
        if self.objective == "hand":
            return hand_share(ended, world.rules, seat) + self.points_weight * value
        target = world.rules.target
        if target is not None and self.game_weight:
            totals = [float(Fraction(total)) for total in ended.totals]
            if totals[seat] >= target and totals[seat] == max(totals):
                value += self.game_weight
            elif max(totals) >= target:
                value -= self.game_weight
        return value


def hand_share(ended: HandEnded, rules: Rules, seat: int) -> float:
    """``seat``'s share of the win of the hand ``ended``: 1 for its winner, else split among
    the seats with the best count (as a one-hand game of ``ramino duel`` and the ladder)."""
    if ended.winner >= 0:
        return 1.0 if ended.winner == seat else 0.0
    points = [Fraction(point) for point in ended.points]
    best = min(points) if rules.scoring == "penalty" else max(points)
    tied = [index for index, point in enumerate(points) if point == best]
    return 1 / len(tied) if seat in tied else 0.0


def _would_not_have_knocked(knowledge: Knowledge) -> Callable[[State], bool] | None:
    """Gin Rummy: a world is plausible when no opponent who has discarded this hand holds a
    hand he could have knocked with (most players knock when they can)."""
    seen = knowledge.seen
    rules = knowledge.rules
    limit = seen.knock_limit
    watched = [
        seat
        for seat, cards in knowledge.memory.discarded.items()
        if seat != seen.seat and cards and seen.hand_sizes[seat] == rules.hand_size
    ]
    if not watched or limit < 0:
        return None

    def plausible(world: State) -> bool:
        return all(
            deadwood(world.hands[seat], rules.meld_rules, rules.values) > limit for seat in watched
        )

    return plausible


def _kept(world: State, knowledge: Knowledge, rng: random.Random) -> State:
    """Gin Rummy: ``world`` with each opponent's hand as he would have kept it. A sampled
    hand is as loose as cards dealt at random, while a player who has drawn and thrown once
    per turn holds far less deadwood (at the decisions ``mc`` searches, a ``heuristic``
    opponent held 13 on average where the sampled hands held 43). So, once per discard he
    has made this hand, the opponent draws a random card of the stock and throws back into
    it the card that leaves him the least deadwood (never a card he is known to hold): the
    unseen cards stay where they may be, and his hand is one a drawing player could have
    kept."""
    rules = knowledge.rules
    seen = knowledge.seen
    memory = knowledge.memory
    hands = list(world.hands)
    stock = list(world.stock)
    if not stock:
        return world
    for seat in range(seen.players):
        if seat == seen.seat:
            continue
        known = set(memory.known(seat))
        hand = list(hands[seat])
        for _ in range(len(memory.discarded.get(seat, ()))):
            index = rng.randrange(len(stock))
            drawn = stock[index]
            after = discard_deadwoods((*hand, drawn), rules.meld_rules, rules.values)
            thrown = min(
                (card for card in after if card not in known),
                key=lambda card: (after[card], -rules.values[card_face(card)], card),
                default=drawn,
            )
            if thrown != drawn:
                hand.remove(thrown)
                hand.append(drawn)
                stock[index] = thrown
        hands[seat] = tuple(sorted(hand))
    rng.shuffle(stock)
    return dataclasses.replace(world, hands=tuple(hands), stock=tuple(stock))


def _rollout_command(
    state: State,
    me: int,
    danger: Callable[[Card], float] | None = None,
    wait: int = -1,
    opponent_wait: int = -1,
) -> Command:
    """The cheap rollout move of the seat to move: ``simple``'s rules on the full state. Seat
    ``me`` plays a little better: it also takes an upcard that lets it knock at once or cuts
    its deadwood by ``_TAKE_CUT``, and weighs ``danger`` (the chance the opponent melds the
    card, as estimated at the decision) into its discards; with ``wait`` of 0 or more, in Gin
    Rummy it knocks only with gin until the stock is down to ``wait`` cards."""
    rules = state.rules
    seat = state.turn
    hand = state.hands[seat]
    phase = state.phase
    if phase is Phase.FIRST_UPCARD or phase is Phase.DRAW:
        upcard = state.pile[-1] if state.pile else None
        faces = {card_face(card) for card in hand}
        joins = upcard is not None and fast_joins_meld(faces, upcard)
        if phase is Phase.FIRST_UPCARD:
            return TakeDiscard() if joins else Pass()
        if state.upcard_passes >= 2 or upcard is None:
            return DrawStock() if state.stock else Pass()
        if rules.wall and len(state.stock) <= rules.wall:
            after = discard_deadwoods((*hand, upcard), rules.meld_rules, rules.values)
            least = min(left for card, left in after.items() if card != upcard)
            return TakeDiscard() if least <= state.knock_limit else Pass()
        if joins:
            return TakeDiscard()
        if seat == me and rules.knocking == "gin":
            after = discard_deadwoods((*hand, upcard), rules.meld_rules, rules.values)
            least = min(left for card, left in after.items() if card != upcard)
            if least <= state.knock_limit or least <= after[upcard] - _TAKE_CUT:
                return TakeDiscard()
        return DrawStock() if state.stock else Pass()
    forbidden = state.taken[0] if state.taken else -1
    after = discard_deadwoods(hand, rules.meld_rules, rules.values)
    values = rules.values
    best: Card = -1
    best_key: tuple[int, int] | None = None
    weigh = danger if seat == me else None
    best_cost = 0.0
    for card, left in after.items():
        if card == forbidden:
            continue
        key = (left, -values[card_face(card)])
        cost = left + _DANGER_WEIGHT * weigh(card) if weigh is not None else float(left)
        if best_key is None or (cost, key) < (best_cost, best_key):
            best, best_key, best_cost = card, key, cost
    assert best_key is not None
    limit = state.knock_limit if rules.knocking == "gin" else _knock_threshold(state)
    waiting = wait if seat == me else opponent_wait
    if waiting >= 0 and rules.knocking == "gin" and len(state.stock) > waiting:
        limit = 0
    least = min(left for card, left in after.items() if card != forbidden)
    if least <= limit or state.must_knock:
        best = min(
            (card for card, left in after.items() if card != forbidden and left == least),
            key=lambda card: -values[card_face(card)],
        )
        return Knock(card=best)
    return Discard(card=best)


def _knock_threshold(state: State) -> int:
    opponents = sum(state.active) - 1
    return max(0, 10 - 2 * opponents)


def rollout(
    state: State,
    rng: random.Random,
    me: int = -1,
    danger: Callable[[Card], float] | None = None,
    wait: int = -1,
    opponent_wait: int = -1,
) -> HandEnded | None:
    """Play ``state`` to the end of its hand with the cheap rollout policy (``rng`` turns a
    shuffled stock; ``me`` plays a little better, and with ``wait`` waits for gin: see
    ``_rollout_command``); the hand's end (``None`` if it did not end within the step cap or
    the game was already over)."""
    for _ in range(_MAX_ROLLOUT_STEPS):
        if state.phase is Phase.DEAL or state.phase is Phase.GAME_OVER:
            return None
        if chance_pending(state):
            state = evolve(state, chance(state, rng))
            continue
        command = _rollout_command(state, me, danger, wait, opponent_wait)
        for event in decide(state, state.turn, command):
            state = evolve(state, event)
            if isinstance(event, HandEnded):
                return event
            if isinstance(event, GameEnded):  # pragma: no cover - follows a HandEnded
                return None
    return None


def version2(budget_ms: float = 200.0) -> MonteCarloPolicy:
    """``mc`` version 2 (``mc:MS:v2``, the ladder's ``mc@2``): plays to win the hand."""
    return MonteCarloPolicy(
        budget_ms=budget_ms,
        search=frozenset({"knock", "play_on", "wall"}),
        objective="hand",
        clock=time.process_time,
    )


def version3(budget_ms: float = 200.0) -> MonteCarloPolicy:
    """``mc`` version 3 (``mc:MS:v3``, the ladder's ``mc@3``): plays for the points margin of
    the hand (ladder matches break split wins by points), with the opponents' hands sampled as
    they would have kept them (``_kept``), and leaves the heuristic's move only for a
    candidate better by 2 standard errors of the paired differences."""
    return MonteCarloPolicy(
        budget_ms=budget_ms,
        search=frozenset({"knock", "play_on", "wall"}),
        objective="points",
        game_weight=0.0,
        kept_hands=True,
        deviate_z=2.0,
        clock=time.process_time,
    )


def version4(budget_ms: float = 200.0) -> MonteCarloPolicy:
    """``mc`` version 4 (``mc:MS:v4``, the ladder's ``mc@4``): version 3, with knocking or
    playing on in two-player Gin Rummy decided by the rule fitted to playouts ahead of time
    (``bots.policies.knock_model``) instead of the heuristic's undercut table; the wall and, in
    Knock Rummy, which knock are still searched as in version 3."""
    policy = version3(budget_ms)
    policy.knock_model = True
    return policy
