"""Meld solver throughput: solves per second for each hand kind, against a brute-force oracle.

Run with ``python -m bench.solver [--hands N] [--seed S]``. Every hand kind is timed on fresh,
seeded random hands (single thread); the oracle (every set of disjoint melds from
``enumerate_melds``) is timed on the first hands of the same list, as a same-run reference,
and the solver's least deadwood is compared with the oracle's on those hands (column
``differ``; it must be 0).

``python -m bench.solver --against FILE`` instead compares ``deadwood`` of another version of
``server/engine/solver.py`` (say ``git show REV:server/engine/solver.py > /tmp/old.py``) with
the current one in one process, on 13-card ``ramino`` hands in the protocol of
``bench.engine`` (seed 0, 5,000 warm-up hands, then batches of 5,000 fresh hands, each solved
twice), both solvers on the same hands, interleaved, timed by ``time.process_time``.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from protocol.cards import JOKER, Card, card_face, make_deck
from server.engine import make_rules, solver
from server.engine.melds import AceMode, MeldRules, enumerate_melds

GIN_VALUES: tuple[int, ...] = (*(min(face % 13 + 1, 10) for face in range(52)), 0)
RAMINO_VALUES: tuple[int, ...] = (
    *(15 if face % 13 == 0 else min(face % 13 + 1, 10) for face in range(52)),
    30,
)
GIN = MeldRules(AceMode.LOW, 1)
RAMINO = MeldRules(AceMode.HIGH_OR_LOW, 2)

Hand = tuple[Card, ...]


def oracle_deadwood(cards: Sequence[Card], rules: MeldRules, values: Sequence[int]) -> int:
    """Least deadwood by trying every multiset of disjoint melds from ``enumerate_melds``."""
    shapes: dict[tuple[tuple[int, int], ...], Counter[int]] = {}
    for meld in enumerate_melds(cards, rules):
        need = Counter(card_face(card) for card in meld.cards)
        shapes.setdefault(tuple(sorted(need.items())), need)
    needs = list(shapes.values())
    available = Counter(card_face(card) for card in cards)
    total = sum(values[card_face(card)] for card in cards)

    def most_melded(start: int, used: Counter[int]) -> int:
        best = sum(values[face] * count for face, count in used.items())
        for index in range(start, len(needs)):
            after = used + needs[index]
            if all(after[face] <= available[face] for face in needs[index]):
                best = max(best, most_melded(index, after))
        return best

    return total - most_melded(0, Counter())


def oracle_discards(cards: Sequence[Card], rules: MeldRules, values: Sequence[int]) -> int:
    """Least deadwood over every discard, by brute force."""
    return min(
        oracle_deadwood([other for other in cards if other != card], rules, values)
        for card in cards
    )


@dataclass(frozen=True)
class Kind:
    """One benchmarked hand kind: how hands are dealt, what is solved, and its oracle."""

    name: str
    deck: tuple[Card, ...]
    size: int
    solve: Callable[[Hand], object]
    oracle: Callable[[Hand], object] | None
    oracle_hands: int
    target: int


def deal(rng: random.Random, deck: Sequence[Card], size: int, count: int) -> list[Hand]:
    """``count`` random hands of ``size`` cards from ``deck``."""
    return [tuple(rng.sample(deck, size)) for _ in range(count)]


def rate(function: Callable[[Hand], object], hands: Sequence[Hand]) -> float:
    """Calls per second of ``function`` over ``hands``."""
    start = time.perf_counter()
    for hand in hands:
        function(hand)
    elapsed = time.perf_counter() - start
    return len(hands) / elapsed if elapsed else float("inf")


def _record(function: Callable[[Hand], object], answers: list[object], hand: Hand) -> None:
    answers.append(function(hand))


def least_of(answer: object) -> int:
    """The least deadwood in a solver's answer: ``deadwood``'s number, the second item of
    ``best_melds``' or ``best_discard``'s pair, the least of ``discard_deadwoods``' values."""
    if isinstance(answer, int):
        return answer
    if isinstance(answer, dict):
        return min(cast("dict[object, int]", answer).values())
    return cast("tuple[object, int]", answer)[1]


def knocker_melds(rng: random.Random) -> Callable[[Hand], object]:
    """The defender's problem against the melds of a random, well-melded knocker hand."""
    deck = make_deck(1)
    for _ in range(1000):
        knocker = rng.sample(deck, 10)
        melds, _ = solver.best_melds(knocker, GIN, GIN_VALUES)
        if len(melds) >= 2:
            break
    taken = {card for meld in melds for card in meld.cards}

    def defend(hand: Hand) -> object:
        return solver.best_layoff_deadwood(
            [card for card in hand if card not in taken], melds, GIN, GIN_VALUES
        )

    return defend


def kinds(rng: random.Random) -> list[Kind]:
    """The hand kinds, each with its target rate from the solver's brief."""
    one_deck = make_deck(1)
    ramino_deck = make_deck(2, 6)
    # Meld-rich hands (aces to sevens only), like the hands of a playout that collects melds.
    rich_deck = tuple(card for card in one_deck if card % 13 < 7)
    rich_ramino = tuple(card for card in ramino_deck if card_face(card) % 13 < 7)
    return [
        Kind(
            "gin 10 cards deadwood",
            one_deck,
            10,
            lambda hand: solver.deadwood(hand, GIN, GIN_VALUES),
            lambda hand: oracle_deadwood(hand, GIN, GIN_VALUES),
            2000,
            30_000,
        ),
        Kind(
            "gin 10 cards best_melds",
            one_deck,
            10,
            lambda hand: solver.best_melds(hand, GIN, GIN_VALUES),
            lambda hand: oracle_deadwood(hand, GIN, GIN_VALUES),
            2000,
            0,
        ),
        Kind(
            "gin 11 cards best_discard",
            one_deck,
            11,
            lambda hand: solver.best_discard(hand, GIN, GIN_VALUES),
            lambda hand: oracle_discards(hand, GIN, GIN_VALUES),
            300,
            10_000,
        ),
        Kind(
            "gin 11 cards discard_deadwoods",
            one_deck,
            11,
            lambda hand: solver.discard_deadwoods(hand, GIN, GIN_VALUES),
            lambda hand: oracle_discards(hand, GIN, GIN_VALUES),
            300,
            3_000,
        ),
        Kind(
            "gin 10 cards A-7 only deadwood",
            rich_deck,
            10,
            lambda hand: solver.deadwood(hand, GIN, GIN_VALUES),
            lambda hand: oracle_deadwood(hand, GIN, GIN_VALUES),
            300,
            0,
        ),
        Kind(
            "gin 11 cards A-7 only best_discard",
            rich_deck,
            11,
            lambda hand: solver.best_discard(hand, GIN, GIN_VALUES),
            lambda hand: oracle_discards(hand, GIN, GIN_VALUES),
            30,
            0,
        ),
        Kind(
            "gin 10 cards defender lay-offs",
            one_deck,
            10,
            knocker_melds(rng),
            None,
            0,
            0,
        ),
        Kind(
            "ramino 13 cards (2 decks + 6 jokers) deadwood",
            ramino_deck,
            13,
            lambda hand: solver.deadwood(hand, RAMINO, RAMINO_VALUES),
            lambda hand: oracle_deadwood(hand, RAMINO, RAMINO_VALUES),
            30,
            1_000,
        ),
        Kind(
            "ramino 13 cards A-7 only deadwood",
            rich_ramino,
            13,
            lambda hand: solver.deadwood(hand, RAMINO, RAMINO_VALUES),
            None,
            0,
            0,
        ),
        Kind(
            "ramino 13 cards best_melds",
            ramino_deck,
            13,
            lambda hand: solver.best_melds(hand, RAMINO, RAMINO_VALUES),
            None,
            0,
            0,
        ),
        Kind(
            "ramino 14 cards best_discard",
            ramino_deck,
            14,
            lambda hand: solver.best_discard(hand, RAMINO, RAMINO_VALUES),
            None,
            0,
            0,
        ),
    ]


def against(path: str, batches: int, size: int) -> None:
    """Old (the solver module at ``path``) against new ``deadwood`` on fresh 13-card ramino
    hands: solves/s per batch (CPU time), medians, and the answers compared."""
    spec = importlib.util.spec_from_file_location("solver_against", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}")
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    ramino = make_rules("ramino", {}, 2)
    rules, values = ramino.meld_rules, ramino.values
    pack = make_deck(ramino.decks, ramino.jokers)
    rng = random.Random(0)
    warmup = deal(rng, pack, 13, size)
    fresh = [deal(rng, pack, 13, size) for _ in range(batches)]
    solvers = (("old", other.deadwood), ("new", solver.deadwood))
    for _, deadwood in solvers:
        for hand in warmup:
            deadwood(hand, rules, values)
    rates: dict[tuple[str, int], list[float]] = {}
    by_jokers: dict[tuple[str, int], float] = {}
    counts: Counter[int] = Counter()
    for hands in fresh:
        groups: dict[int, list[Hand]] = {}
        for hand in hands:
            groups.setdefault(min(3, sum(card_face(card) == JOKER for card in hand)), []).append(
                hand
            )
        counts.update({jokers: len(group) for jokers, group in groups.items()})
        for name, deadwood in solvers:
            elapsed = 0.0
            for jokers, group in sorted(groups.items()):  # fresh hands, by joker count
                start = time.process_time()
                for hand in group:
                    deadwood(hand, rules, values)
                spent = time.process_time() - start
                by_jokers[name, jokers] = by_jokers.get((name, jokers), 0.0) + spent
                elapsed += spent
            rates.setdefault((name, 0), []).append(len(hands) / elapsed)
            start = time.process_time()
            for hand in hands:  # the same hands again
                deadwood(hand, rules, values)
            rates.setdefault((name, 1), []).append(len(hands) / (time.process_time() - start))
    disagree = sum(
        other.deadwood(hand, rules, values) != solver.deadwood(hand, rules, values)
        for hands in fresh
        for hand in hands
    )
    print(f"ramino 13 cards, {size:,} warm-up hands, {batches} batches of {size:,} fresh hands")
    for second, label in ((0, "fresh hands"), (1, "the same hands again")):
        old = statistics.median(rates["old", second])
        new = statistics.median(rates["new", second])
        spread = ", ".join(
            f"{a:,.0f}/{b:,.0f}" for a, b in zip(rates["old", second], rates["new", second])
        )
        print(f"{label:22} old {old:9,.0f}/s  new {new:9,.0f}/s  {new / old:.2f}x  ({spread})")
    total = sum(counts.values())
    for jokers, count in sorted(counts.items()):
        old_us = by_jokers["old", jokers] / count * 1e6
        new_us = by_jokers["new", jokers] / count * 1e6
        share = by_jokers["new", jokers] / sum(by_jokers["new", j] for j in counts)
        print(
            f"  {jokers}{'+' if jokers == 3 else ' '} jokers: {count / total:4.0%} of hands, "
            f"old {old_us:6.1f} us, new {new_us:6.1f} us per fresh hand "
            f"({old_us / new_us:.2f}x; {share:.0%} of the new time)"
        )
    print(f"answers that differ: {disagree} of {batches * size:,}")


def main() -> None:
    """Print solves/s per hand kind, the oracle's rate on the same hands and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hands", type=int, default=20_000, help="hands per kind")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--against", metavar="FILE", help="old solver module to compare with")
    parser.add_argument("--batches", type=int, default=3, help="fresh batches for --against")
    arguments = parser.parse_args()
    if arguments.against:
        against(arguments.against, arguments.batches, 5_000)
        return
    rng = random.Random(arguments.seed)
    print(
        f"{'hand kind':48} {'solves/s':>10} {'target':>8} {'oracle/s':>10} {'ratio':>8} "
        f"{'differ':>11}"
    )
    differ_total = 0
    for kind in kinds(rng):
        count = arguments.hands if kind.size < 13 else max(1, arguments.hands // 10)
        hands = deal(rng, kind.deck, kind.size, count)
        fast = rate(kind.solve, hands)
        target = f"{kind.target:,}" if kind.target else "-"
        if kind.oracle is not None and kind.oracle_hands:
            checked = hands[: kind.oracle_hands]
            expected: list[object] = []
            slow = rate(functools.partial(_record, kind.oracle, expected), checked)
            differ = sum(
                least_of(kind.solve(hand)) != answer
                for hand, answer in zip(checked, expected, strict=True)
            )
            differ_total += differ
            oracle, ratio = f"{slow:10,.0f}", f"{fast / slow:7,.0f}x"
            shown = f"{differ} of {len(checked)}"
        else:
            oracle, ratio, shown = f"{'-':>10}", f"{'-':>8}", "-"
        print(f"{kind.name:48} {fast:10,.0f} {target:>8} {oracle} {ratio} {shown:>11}")
    print(f"(differ: hands whose least deadwood differs from the oracle's; {differ_total} in all)")


if __name__ == "__main__":
    main()
