"""Engine throughput: Gin Rummy against OpenSpiel and RLCard, ``simulate`` per preset, the solver.

Run with ``python -m bench.engine [--hands N] [--seed S] [--quick]`` (``--profile N`` instead
profiles N of our Gin hands with ``cProfile``). One run prints three tables, every figure and
ratio measured in that run, single thread:

1. Gin Rummy, N complete hands of uniformly random legal moves in each engine: OpenSpiel's
   ``gin_rummy`` (C++ via ``pyspiel``; chance outcomes drawn uniformly from ``legal_actions``),
   RLCard's raw ``GinRummyGame`` loop (its deal shuffled by ``np_random``), and ours (the
   ``gin`` preset set to OpenSpiel's one-hand rules, deals from ``chance``). Every engine picks
   with its own ``random.Random(seed)``; only the game loops are timed (game construction,
   imports and a short untimed warm-up are not). Each measurement is repeated, interleaved
   (OpenSpiel, RLCard, ours, OpenSpiel, ...), on the same seed, and the median is reported.
2. ``ramino simulate`` games/s for every preset at one player count, invariant checks off and on.
3. Meld solver solves/s (``solver.deadwood``) on random hands, with OpenSpiel's
   ``GinRummyUtils.min_deadwood`` on the same 10-card hands as the reference.

The three Gin Rummy engines play slightly different rules (OpenSpiel: first-upcard offer, wall
at two stock cards, discarding the card just taken; RLCard: no first upcard, eleven cards to the
starter, no lay-offs, dead hand at two stock cards), so hands differ in length; the decisions
per hand are printed next to the rates.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.metadata
import io
import os
import platform
import pstats
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyspiel
from rlcard.games.gin_rummy.game import GinRummyGame

from server.engine import (
    VARIANTS,
    AceMode,
    Card,
    MeldRules,
    Rules,
    chance,
    chance_pending,
    compiled,
    decide,
    evolve,
    is_over,
    legal_actions,
    make_deck,
    make_rules,
    new_game,
    to_move,
)
from server.engine.solver import Solver, best_melds, deadwood
from server.simulation import simulate

OUR_GIN_OPTIONS: dict[str, object] = {"deals": 1, "undercut_on_tie": False, "big_gin_bonus": 0}
"""Our ``gin`` preset set to OpenSpiel's rules: one hand, a tie is no undercut, no big gin."""

TARGETS: tuple[tuple[str, float], ...] = (("target", 1.0), ("stretch", 2.0))
"""Required ratios of our hands/s to each reference engine's."""

DEAL_CHANCE_ACTIONS = 21
"""OpenSpiel deals with 21 chance actions (ten cards each and the upcard)."""

SIM_GAMES: dict[str, int] = {"gin": 5, "knock": 100}
"""Games per preset in the simulate table (others: ``SIM_GAMES_DEFAULT``), checks off and on."""
SIM_GAMES_DEFAULT = 10
SIM_GAMES_QUICK: dict[str, int] = {"gin": 1, "knock": 10}
SIM_GAMES_QUICK_DEFAULT = 1
SIM_PLAYERS = 4
"""Player count of the simulate table where the preset allows it (Gin Rummy: 2)."""

SOLVER_HANDS = (50_000, 50_000, 5_000)
"""Hands per solver row: 10 cards, 13 cards one deck, 13 cards Ramino."""
SOLVER_HANDS_QUICK = (2_000, 2_000, 200)


# --- Gin Rummy: three engines -------------------------------------------------------------------


@dataclass
class GinRun:
    """One timed batch of random-legal-move Gin Rummy hands in one engine."""

    hands: int
    seconds: float
    decisions: int
    """Player moves (OpenSpiel: player-node actions; RLCard: steps; ours: ``decide`` calls)."""
    actions: int
    """Every action applied, chance included (OpenSpiel's deal is 21 actions)."""
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def hands_per_s(self) -> float:
        """Completed hands per second."""
        return self.hands / self.seconds


def openspiel_hands(hands: int, seed: int) -> GinRun:
    """``hands`` OpenSpiel ``gin_rummy`` hands, chance and moves uniform from ``legal_actions``."""
    game = pyspiel.load_game("gin_rummy")
    draw_stock = int(pyspiel.gin_rummy.DRAW_STOCK_ACTION)
    rng = random.Random(seed)
    choice = rng.choice
    actions = 0
    stock_draws = 0
    knocks = 0
    start = time.perf_counter()
    for _ in range(hands):
        state = game.new_initial_state()
        while not state.is_terminal():
            action = choice(state.legal_actions())
            state.apply_action(action)
            actions += 1
            if action == draw_stock:  # a chance node (the card drawn) follows
                stock_draws += 1
        knocks += any(state.knocked())
    seconds = time.perf_counter() - start
    chance_actions = DEAL_CHANCE_ACTIONS * hands + stock_draws
    outcomes = Counter({"knock": knocks, "no knock": hands - knocks})
    return GinRun(hands, seconds, actions - chance_actions, actions, outcomes)


def rlcard_hands(hands: int, seed: int) -> GinRun:
    """``hands`` RLCard ``GinRummyGame`` hands through the raw game loop."""
    game = GinRummyGame()
    game.np_random = np.random.RandomState(seed)
    rng = random.Random(seed)
    choice = rng.choice
    judge = game.judge
    steps = 0
    outcomes: Counter[str] = Counter()
    start = time.perf_counter()
    for _ in range(hands):
        game.init_game()
        while not game.is_over():
            game.step(choice(judge.get_legal_actions()))
            steps += 1
        outcomes[type(game.round.going_out_action).__name__] += 1
    seconds = time.perf_counter() - start
    return GinRun(hands, seconds, steps, steps, outcomes)


def our_gin_rules() -> Rules:
    """Our ``gin`` preset with OpenSpiel's rules, two players."""
    return make_rules("gin", OUR_GIN_OPTIONS, 2)


def our_hands(hands: int, seed: int) -> GinRun:
    """``hands`` one-hand ``gin`` games of ours: ``legal_actions``, ``decide``, ``evolve``."""
    rules = our_gin_rules()
    rng = random.Random(seed)
    choice = rng.choice
    decisions = 0
    chances = 0
    outcomes: Counter[str] = Counter()
    start = time.perf_counter()
    for _ in range(hands):
        state = new_game(rules)
        while not is_over(state):
            if chance_pending(state):
                state = evolve(state, chance(state, rng))
                chances += 1
                continue
            seat = to_move(state)
            for event in decide(state, seat, choice(legal_actions(state, seat))):
                state = evolve(state, event)
            decisions += 1
        result = state.last_result
        outcomes[result.reason if result is not None else "none"] += 1
    seconds = time.perf_counter() - start
    return GinRun(hands, seconds, decisions, decisions + chances, outcomes)


ENGINES: tuple[tuple[str, Callable[[int, int], GinRun]], ...] = (
    ("OpenSpiel (C++ via pyspiel)", openspiel_hands),
    ("RLCard raw GinRummyGame", rlcard_hands),
    ("ours (gin, deals=1)", our_hands),
)


def verdict(ratio: float, goal: float) -> str:
    """PASS or MISS for ``ratio`` against ``goal``, with the shortfall when missed."""
    if ratio >= goal:
        return "PASS"
    return f"MISS (by {(1 - ratio / goal) * 100:.0f}%)"


def gin_table(hands: int, seed: int, repeats: int) -> dict[str, float]:
    """Time every engine ``repeats`` times, interleaved, and print medians and ratios.

    Returns our median hands/s over each reference engine's, by the reference's first word.
    """
    warmup = min(20, hands)
    for _, run in ENGINES:
        run(warmup, seed + 1)
    runs: dict[str, list[GinRun]] = {name: [] for name, _ in ENGINES}
    for repeat in range(repeats):
        for name, run in ENGINES:
            result = run(hands, seed)
            runs[name].append(result)
            print(
                f"  repeat {repeat + 1}/{repeats}  {name:30} {result.hands_per_s:9,.1f} hands/s",
                flush=True,
            )
    print()
    print(
        f"{'engine':30} {'hands/s':>9} {'min-max':>13} {'decisions/hand':>15} "
        f"{'decisions/s':>12} {'actions/hand':>13}"
    )
    medians: dict[str, float] = {}
    per_decision: dict[str, float] = {}
    for name, _ in ENGINES:
        rates = [run.hands_per_s for run in runs[name]]
        medians[name] = statistics.median(rates)
        first = runs[name][0]
        decisions_per_hand = first.decisions / first.hands
        per_decision[name] = medians[name] * decisions_per_hand
        spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
        print(
            f"{name:30} {medians[name]:9,.1f} {spread:>13} {decisions_per_hand:15.1f} "
            f"{per_decision[name]:12,.0f} {first.actions / first.hands:13.1f}"
        )
    print()
    for name, _ in ENGINES:
        outcomes = ", ".join(
            f"{key} {count}" for key, count in sorted(runs[name][0].outcomes.items())
        )
        print(f"hand endings, {name}: {outcomes}")
    print()
    ours = ENGINES[-1][0]
    ratios: dict[str, float] = {}
    for name, _ in ENGINES[:-1]:
        ratio = medians[ours] / medians[name]
        ratios[name.split()[0]] = ratio
        decision_ratio = per_decision[ours] / per_decision[name]
        verdicts = ", ".join(
            f"{label} {goal:.0f}x: {verdict(ratio, goal)}" for label, goal in TARGETS
        )
        print(
            f"ours/{name.split()[0]}: {ratio:.2f}x hands/s ({decision_ratio:.2f}x decisions/s)"
            f"  -> {verdicts}"
        )
    return ratios


# --- ramino simulate --------------------------------------------------------------------------


def simulate_players(name: str) -> int:
    """The player count of ``name``'s row: ``SIM_PLAYERS`` within the preset's range."""
    preset = VARIANTS[name]
    return max(preset.min_players, min(SIM_PLAYERS, preset.max_players))


def simulate_table(seed: int, quick: bool) -> None:
    """``simulate`` every preset with checks off and on; print games/s and the check cost."""
    counts, default = (
        (SIM_GAMES_QUICK, SIM_GAMES_QUICK_DEFAULT) if quick else (SIM_GAMES, SIM_GAMES_DEFAULT)
    )
    print(
        f"{'variant':16}{'players':>8}{'games':>6}{'hands':>7}{'moves':>8}"
        f"{'games/s off':>12}{'moves/s off':>12}{'games/s on':>11}{'checks':>8}{'violations':>11}"
    )
    started = time.perf_counter()
    for name in sorted(VARIANTS):
        players = simulate_players(name)
        games = counts.get(name, default)
        sim_seed = f"bench-{seed}"
        off = simulate(name, players, games, seed=sim_seed, check=False)
        on = simulate(name, players, games, seed=sim_seed, check=True)
        moves_per_s = off.moves / off.seconds if off.seconds else 0.0
        slowdown = off.games_per_s / on.games_per_s if on.games_per_s else 0.0
        print(
            f"{name:16}{players:>8}{games:>6}{off.hands:>7}{off.moves:>8}"
            f"{off.games_per_s:>12,.2f}{moves_per_s:>12,.0f}{on.games_per_s:>11,.2f}"
            f"{slowdown:>7.1f}x{on.invariant_violations:>11}",
            flush=True,
        )
    print(
        f"(checks: how many times slower with invariant checks on; seed {f'bench-{seed}'!r}; "
        f"section took {time.perf_counter() - started:.0f} s)"
    )


# --- meld solver ------------------------------------------------------------------------------


def to_openspiel(card: Card) -> int:
    """OpenSpiel's id of a one-deck card: its suits go s c d h, ours C D H S."""
    return (card + 13) % 52


def solve_rate(solve: Callable[[Any], object], hands: Sequence[Any]) -> tuple[float, float]:
    """Calls per second of ``solve`` over ``hands``: by the wall clock, and by the process's
    CPU time (which leaves out the time other processes hold the cores)."""
    start = time.perf_counter()
    cpu = time.process_time()
    for hand in hands:
        solve(hand)
    cpu = time.process_time() - cpu
    return len(hands) / (time.perf_counter() - start), len(hands) / cpu if cpu else float("inf")


SOLVER_CHUNKS = 10
"""Slices of a repeat's hands that the solver rows take turns on."""


@dataclass
class SolverRates:
    """The solver figures the targets are judged on (median solves/s of the repeats)."""

    deadwood10: float
    """``Solver(rules, values).deadwood`` on the 10-card Gin hands (bound like OpenSpiel's
    ``GinRummyUtils(...).min_deadwood``)."""
    openspiel10: float
    best_melds10: float
    """``Solver(rules, values).best_melds`` on the same hands."""
    module_deadwood10: float
    """The module function ``deadwood(hand, rules, values)`` on the same hands."""
    module_best_melds10: float
    """The module function ``best_melds(hand, rules, values)`` on the same hands."""
    ramino: float
    """``deadwood`` on 13-card ramino hands, fresh hands in every repeat."""
    ramino_again: float
    """The same, on hands already solved once (every suit pattern and set choice memoised)."""
    ramino_best_melds: float
    cpu: dict[str, float] = field(default_factory=dict)
    """The same figures (by field name) by the process's CPU time: the targets are judged on
    these, which the other processes of a loaded machine disturb much less."""
    ramino_cold: float = 0.0
    """``deadwood`` on the first 13-card ramino hands of the process, every memo empty."""
    ramino_cold_cpu: float = 0.0


def solver_table(seed: int, repeats: int, counts: tuple[int, int, int]) -> SolverRates:
    """Solves/s of ``deadwood`` and ``best_melds`` per hand kind and of OpenSpiel's
    ``min_deadwood`` (median of ``repeats`` interleaved runs).

    The 13-card ramino hands are fresh in every repeat (the solver memoises suit patterns and
    set choices across hands, so hands seen before are cheaper); one more row times a repeat's
    hands a second time, to show what those memos do.
    """
    rng = random.Random(seed)
    gin = our_gin_rules()
    ramino = make_rules("ramino", {}, 2)
    one_deck = make_deck(1)
    ramino_deck = make_deck(ramino.decks, ramino.jokers)
    low = MeldRules(AceMode.LOW, 1)

    def deal(deck: Sequence[Card], size: int, count: int) -> list[tuple[Card, ...]]:
        return [tuple(rng.sample(deck, size)) for _ in range(count)]

    gin10 = deal(one_deck, 10, counts[0])
    os10 = [[to_openspiel(card) for card in hand] for hand in gin10]
    low13 = deal(one_deck, 13, counts[1])
    ramino_warmup = deal(ramino_deck, 13, counts[2])
    ramino_fresh: list[Sequence[Any]] = [deal(ramino_deck, 13, counts[2]) for _ in range(repeats)]
    utils = pyspiel.gin_rummy.GinRummyUtils(13, 4, 10)
    disagree = sum(
        int(utils.min_deadwood(theirs)) != deadwood(ours, gin.meld_rules, gin.values)
        for ours, theirs in zip(gin10, os10)
    )
    gin_rules, gin_values = gin.meld_rules, gin.values
    ramino_rules, ramino_values = ramino.meld_rules, ramino.values
    # Bound to the rules once, as OpenSpiel's ``utils`` is bound to its game's sizes.
    gin_solver = Solver(gin_rules, gin_values)
    rows: list[tuple[str, Callable[[Any], object], list[Sequence[Any]]]] = [
        ("ours, 10 cards, 1 deck, ace low, Gin values", gin_solver.deadwood, [gin10] * repeats),
        ("OpenSpiel min_deadwood, same 10-card hands", utils.min_deadwood, [os10] * repeats),
        ("ours best_melds, same 10-card hands", gin_solver.best_melds, [gin10] * repeats),
        (
            "  deadwood(hand, rules, values), same hands",
            lambda hand: deadwood(hand, gin_rules, gin_values),
            [gin10] * repeats,
        ),
        (
            "  best_melds(hand, rules, values), same hands",
            lambda hand: best_melds(hand, gin_rules, gin_values),
            [gin10] * repeats,
        ),
        (
            "ours, 13 cards, 1 deck, ace low, no jokers",
            lambda hand: deadwood(hand, low, gin_values),
            [low13] * repeats,
        ),
        (
            "ours, 13 cards, ramino: 2 decks + 6 jokers",
            lambda hand: deadwood(hand, ramino_rules, ramino_values),
            ramino_fresh,
        ),
        (
            "  the same hands a second time",
            lambda hand: deadwood(hand, ramino_rules, ramino_values),
            ramino_fresh,
        ),
        (
            "ours best_melds, 13 cards, ramino",
            lambda hand: best_melds(hand, ramino_rules, ramino_values),
            [ramino_warmup] * repeats,
        ),
    ]
    # Warm-up: tables built before timing; the ramino memo sees one batch of other hands, and
    # the one-deck memos (runs by suit pattern, for best_melds) a batch of other 10-card hands
    # (from another generator, so that the timed hands stay those of the seed).
    for _, solve, batches in rows[:6]:
        for hand in batches[0][:100]:
            solve(hand)
    other = random.Random(f"{seed}-warm-up")
    for _ in range(counts[0]):
        gin_solver.best_melds(other.sample(one_deck, 10))
    # The compiled meld search is loaded (or compiled) first: a process does that once, and
    # ``make`` compiles it when it sets up the environment.
    loaded = None
    if compiled.AVAILABLE:
        started = time.perf_counter()
        compiled.warm()
        loaded = time.perf_counter() - started
    # The warm-up batch is the cold figure: the first ramino hands of the process, every memo
    # empty (and the tables of the ramino rules built on the first call).
    cold, cold_cpu = solve_rate(
        lambda hand: deadwood(hand, ramino_rules, ramino_values), ramino_warmup
    )
    rates: dict[str, list[float]] = {name: [] for name, *_ in rows}
    cpu_rates: dict[str, list[float]] = {name: [] for name, *_ in rows}
    # Each repeat is cut into SOLVER_CHUNKS slices, and the rows take turns slice by slice, so
    # that a change of the machine's load during the repeat falls on every row alike.
    for repeat in range(repeats):
        wall_times = dict.fromkeys(rates, 0.0)
        cpu_times = dict.fromkeys(rates, 0.0)
        for chunk in range(SOLVER_CHUNKS):
            for name, solve, batches in rows:
                hands = batches[repeat]
                size = -(-len(hands) // SOLVER_CHUNKS)
                part = hands[chunk * size : (chunk + 1) * size]
                if part:
                    wall, cpu = solve_rate(solve, part)
                    wall_times[name] += len(part) / wall
                    cpu_times[name] += len(part) / cpu
        for name, _, batches in rows:
            rates[name].append(len(batches[repeat]) / wall_times[name])
            cpu_rates[name].append(len(batches[repeat]) / cpu_times[name])
    print(f"{'hand kind':46} {'hands':>7} {'solves/s':>11} {'min-max':>17} {'CPU solves/s':>13}")
    medians: dict[str, float] = {}
    for name, _, batches in rows:
        medians[name] = statistics.median(rates[name])
        spread = f"{min(rates[name]):,.0f}-{max(rates[name]):,.0f}"
        cpu_median = statistics.median(cpu_rates[name])
        print(
            f"{name:46} {len(batches[0]):>7,} {medians[name]:>11,.0f} {spread:>17} "
            f"{cpu_median:>13,.0f}"
        )
    print(
        f"{'  ramino cold: the first hands, memos empty':46} {len(ramino_warmup):>7,} "
        f"{cold:>11,.0f} {'(one run)':>17} {cold_cpu:>13,.0f}"
    )
    names = [name for name, *_ in rows]
    fields = [
        "deadwood10",
        "openspiel10",
        "best_melds10",
        "module_deadwood10",
        "module_best_melds10",
        "",
        "ramino",
        "ramino_again",
        "ramino_best_melds",
    ]
    result = SolverRates(
        **{key: medians[name] for key, name in zip(fields, names, strict=True) if key},
        cpu={
            key: statistics.median(cpu_rates[name])
            for key, name in zip(fields, names, strict=True)
            if key
        },
        ramino_cold=cold,
        ramino_cold_cpu=cold_cpu,
    )
    for label, rates_of in (("wall clock", vars(result)), ("CPU time", result.cpu)):
        print(
            f"{label}: ours/OpenSpiel on 10-card hands "
            f"{rates_of['deadwood10'] / rates_of['openspiel10']:.2f}x (module function "
            f"{rates_of['module_deadwood10'] / rates_of['openspiel10']:.2f}x); "
            f"deadwood/best_melds {rates_of['deadwood10'] / rates_of['best_melds10']:.2f}x "
            "(module functions "
            f"{rates_of['module_deadwood10'] / rates_of['module_best_melds10']:.2f}x)"
        )
    print(f"deadwood disagreements with OpenSpiel: {disagree} of {len(gin10):,}")
    print(
        f"compiled meld search (server.engine.compiled): loaded in {loaded:.2f} s before the "
        "cold row"
        if loaded is not None
        else f"compiled meld search not used ({compiled.WHY_NOT}): ramino rows in pure Python"
    )
    print(
        "(the first rows call a Solver(rules, values) made once, as OpenSpiel's rows call a "
        "GinRummyUtils made once; the indented rows call the module functions)"
    )
    print(
        "(ramino: ace high or low, min_natural 2, ace 15, joker 30; "
        f"{ramino.decks} decks, {ramino.jokers} jokers; fresh hands in every repeat after "
        f"{len(ramino_warmup):,} warm-up hands, timed as the cold row; best_melds on the "
        "warm-up hands; CPU solves/s: by the process's CPU time, median of the repeats)"
    )
    return result


# --- targets ------------------------------------------------------------------------------------


GIN_GOAL = 2.0
"""Target 1: our random Gin hands/s over OpenSpiel's and over RLCard's."""
DEADWOOD_GOAL = 1.0
"""Target 2: ``deadwood`` solves/s over OpenSpiel's ``min_deadwood`` on 10-card hands."""
BEST_MELDS_GOAL = 1.5
"""Target 2: ``best_melds`` at most this many times slower than ``deadwood`` (same hands)."""
RAMINO_GOAL = 100_000.0
"""Target 3: 13-card ramino hands solved per second (fresh random hands)."""
PROFILE_LINES = 15


def profile_top(work: Callable[[], object], lines: int = PROFILE_LINES) -> str:
    """``cProfile`` of ``work``, the top ``lines`` functions by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    work()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(lines)
    return out.getvalue()


def targets(gin: dict[str, float], solver: SolverRates, seed: int) -> None:
    """Print the three targets with the same-run ratios, PASS or MISS, and for a miss the top
    of its profile."""
    rng = random.Random(seed + 7)
    gin_rules = our_gin_rules()
    ramino = make_rules("ramino", {}, 2)
    ramino_deck = make_deck(ramino.decks, ramino.jokers)
    one_deck = make_deck(1)
    hands10 = [tuple(rng.sample(one_deck, 10)) for _ in range(20_000)]
    hands13 = [tuple(rng.sample(ramino_deck, 13)) for _ in range(2_000)]

    def gin_work() -> object:
        return our_hands(200, seed)

    gin_solver = Solver(gin_rules.meld_rules, gin_rules.values)

    def deadwood_work() -> object:
        return [gin_solver.deadwood(hand) for hand in hands10]

    def best_melds_work() -> object:
        return [gin_solver.best_melds(hand) for hand in hands10]

    def ramino_work() -> object:
        return [deadwood(hand, ramino.meld_rules, ramino.values) for hand in hands13]

    cpu = solver.cpu
    checks: list[tuple[str, float, float, str, Callable[[], object]]] = [
        ("1. random Gin hands, ours/OpenSpiel", gin["OpenSpiel"], GIN_GOAL, "x", gin_work),
        ("1. random Gin hands, ours/RLCard", gin["RLCard"], GIN_GOAL, "x", gin_work),
        (
            "2. deadwood / OpenSpiel min_deadwood, 10 cards",
            cpu["deadwood10"] / cpu["openspiel10"],
            DEADWOOD_GOAL,
            "x",
            deadwood_work,
        ),
        (
            "2. best_melds within 1.5x of deadwood (speed ratio)",
            cpu["best_melds10"] / cpu["deadwood10"] * BEST_MELDS_GOAL,
            1.0,
            "",
            best_melds_work,
        ),
        (
            "3. ramino 13-card solves/s (fresh hands)",
            cpu["ramino"],
            RAMINO_GOAL,
            "/s",
            ramino_work,
        ),
    ]
    profiled: set[str] = set()
    misses: list[tuple[str, Callable[[], object]]] = []
    for label, value, goal, unit, work in checks:
        passed = value >= goal
        if unit == "/s":
            shown = (
                f"{value:,.0f}/s CPU (goal {goal:,.0f}/s; wall clock {solver.ramino:,.0f}/s; "
                f"cold {solver.ramino_cold_cpu:,.0f}/s CPU)"
            )
        elif unit == "x" and label.startswith("2."):
            shown = (
                f"{value:.2f}x CPU (goal {goal:.1f}x; wall clock "
                f"{solver.deadwood10 / solver.openspiel10:.2f}x)"
            )
        elif unit == "x":
            shown = f"{value:.2f}x (goal {goal:.1f}x)"
        else:
            slower = cpu["deadwood10"] / cpu["best_melds10"]
            shown = (
                f"best_melds {slower:.2f}x slower CPU (goal <= {BEST_MELDS_GOAL}; wall clock "
                f"{solver.deadwood10 / solver.best_melds10:.2f}x)"
            )
        print(f"{label:52} {shown:44} {'PASS' if passed else verdict(value, goal)}")
        if not passed and work.__name__ not in profiled:
            profiled.add(work.__name__)
            misses.append((label, work))
    for label, work in misses:
        print()
        print(f"-- profile of the miss: {label} (cProfile, by own time) --")
        print(profile_top(work))


# --- the report ---------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def header(arguments: argparse.Namespace) -> None:
    """What a reader needs to reproduce the run."""
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}" for name in ("open_spiel", "rlcard", "numpy")
    )
    print(f"python {platform.python_implementation()} {sys.version.split()[0]}; {versions}")
    print(f"machine: {platform.platform()}, {cpu_model()}, {os.cpu_count()} logical CPUs")
    print(f"command: python -m bench.engine {' '.join(sys.argv[1:])}".rstrip())
    print(f"hands {arguments.hands}, seed {arguments.seed}, repeats {arguments.repeats}")
    print(f"load average at start: {load()}")


def profile(hands: int, seed: int, top: int = 25) -> None:
    """Profile ``hands`` of our Gin hands and print the top functions by own time."""
    our_hands(min(20, hands), seed + 1)
    profiler = cProfile.Profile()
    profiler.enable()
    run = our_hands(hands, seed)
    profiler.disable()
    print(f"cProfile, {hands} of our gin hands (seed {seed}), {run.decisions} decisions")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print(out.getvalue())


def main() -> None:
    """Print the three tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=2_000, help="Gin Rummy hands per engine")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (median)")
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke test")
    parser.add_argument(
        "--profile", type=int, metavar="N", help="only profile N of our Gin hands (cProfile)"
    )
    arguments = parser.parse_args()
    if arguments.profile:
        profile(arguments.profile, arguments.seed)
        return
    if arguments.quick:
        arguments.hands = min(arguments.hands, 50)
    header(arguments)
    started = time.perf_counter()
    print()
    print(f"== 1. Gin Rummy, {arguments.hands} random-legal-move hands per engine ==")
    gin = gin_table(arguments.hands, arguments.seed, arguments.repeats)
    print()
    print(f"== 2. ramino simulate, checks off and on ({SIM_PLAYERS} players, gin 2) ==")
    simulate_table(arguments.seed, arguments.quick)
    print()
    print(f"== 3. Meld solver, random hands (median of {arguments.repeats}) ==")
    solver = solver_table(
        arguments.seed, arguments.repeats, SOLVER_HANDS_QUICK if arguments.quick else SOLVER_HANDS
    )
    print()
    print("== Targets (same-run ratios) ==")
    targets(gin, solver, arguments.seed)
    print()
    print(f"load average at end: {load()}; total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
