"""One-deck hand judgement in machine code (numba): ``GinEvaluator.judge`` for plain decks.

Theory of operation. In a one-deck hand without jokers and with aces low (every Gin Rummy and
Knock Rummy hand), a meld is a set of three or four cards of a rank or a run of three or more
cards of a suit. The most value a hand can meld is then the best, over the ways of taking sets
out of it, of the value of those sets plus, suit by suit, the most its remaining cards of that
suit can meld in runs. The runs part is a table per suit and 13-bit rank pattern (built once
per card-value list, 4 x 8,192 entries, by a dynamic programme over the lowest card: left over,
or the lowest card of a run). The sets part is tiny: only a rank held three or four times can
give one (at most three such ranks in an 11-card hand), and the choices per rank are none, all
four, or one of the three-card subsets, tried as a mixed-radix counter.

On that, :func:`judge` computes what the pure-Python ``GinEvaluator.judge`` does, in one call:
the hand's deadwood, its best discard's, and for every unseen card the deadwood after drawing
it and throwing the best card. The answers are the same integers and the same float divisions
(``tests/bots/test_gin_compiled.py`` compares them on random hands). Like
``server.engine.compiled``, numba compiles the kernels on first use and caches the machine
code; ``make`` does it when it sets up the environment. Without numba (or with
``NUMBA_DISABLE_JIT=1``) :data:`AVAILABLE` is false and the evaluator keeps its Python path.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from server.engine.compiled import AVAILABLE, _jit, numpy

__all__ = ["AVAILABLE", "Judge", "run_tables", "warm"]

_SUIT = (1 << 13) - 1


def _run_table(values: Sequence[int], suit: int) -> list[int]:
    """Most value melded in runs by each rank pattern of ``suit`` (ace low)."""
    best = [0] * (1 << 13)
    for pattern in range(1, 1 << 13):
        low = pattern & -pattern
        rank = low.bit_length() - 1
        value = best[pattern ^ low]  # the lowest card left over
        run = 0
        length = 0
        while rank + length < 13 and pattern >> (rank + length) & 1:
            run += values[suit * 13 + rank + length]
            length += 1
            if length >= 3:
                bits = ((1 << length) - 1) << rank
                value = max(value, run + best[pattern ^ bits])
        best[pattern] = value
    return best


@functools.cache
def run_tables(values: tuple[int, ...]) -> Any:
    """The four suits' run tables for ``values`` (a numpy array 4 x 8,192)."""
    return numpy.asarray([_run_table(values, suit) for suit in range(4)], dtype=numpy.int64)


@_jit
def _melded(mask: int, values: Any, runs: Any, scratch: Any) -> int:  # pragma: no cover
    """Most value meldable from the 52-bit face mask ``mask`` (``scratch``: 12 int64s)."""
    # Ranks held three or four times, how many choices each has, and the counter over them.
    ranks = scratch[0:4]
    choices = scratch[4:8]
    counter = scratch[8:12]
    count = 0
    for rank in range(13):
        held = 0
        for suit in range(4):
            held += mask >> (suit * 13 + rank) & 1
        if held >= 3:
            ranks[count] = rank
            choices[count] = 2 if held == 3 else 6  # none, all; four-held: + four triples
            counter[count] = 0
            count += 1
    best = 0
    while True:
        rest = mask
        value = 0
        for index in range(count):
            rank = ranks[index]
            choice = counter[index]
            if choice == 0:
                continue
            skip = choice - 2  # the suit left out of a triple (-1: none)
            for suit in range(4):
                face = suit * 13 + rank
                if rest >> face & 1 and suit != skip:
                    rest ^= 1 << face
                    value += values[face]
        for suit in range(4):
            value += runs[suit, rest >> (suit * 13) & 0x1FFF]
        if value > best:
            best = value
        index = 0
        while index < count:
            counter[index] += 1
            if counter[index] < choices[index]:
                break
            counter[index] = 0
            index += 1
        if index == count:
            break
    return best


@_jit
def _joins(mask: int, face: int) -> bool:  # pragma: no cover - compiled
    """Whether ``face`` forms a meld with the faces of ``mask`` (``fast_joins_meld``)."""
    rank = face % 13
    suit = face // 13
    same = 0
    for other in range(4):
        if other != suit and mask >> (other * 13 + rank) & 1:
            same += 1
    if same >= 2:
        return True
    base = suit * 13
    below1 = rank >= 1 and mask >> (base + rank - 1) & 1 == 1
    below2 = rank >= 2 and mask >> (base + rank - 2) & 1 == 1
    above1 = rank <= 11 and mask >> (base + rank + 1) & 1 == 1
    above2 = rank <= 10 and mask >> (base + rank + 2) & 1 == 1
    return (below1 and (below2 or above1)) or (above1 and above2)


@_jit
def _least_after_discard(
    mask: int, total: int, values: Any, runs: Any, scratch: Any
) -> int:  # pragma: no cover - compiled
    """Least deadwood of ``mask`` (value ``total``) after throwing its best card."""
    least = -1
    rest = mask
    while rest:
        bit = rest & -rest
        rest ^= bit
        face = 0
        while (bit >> face) != 1:
            face += 1
        after = total - values[face] - _melded(mask ^ bit, values, runs, scratch)
        if least < 0 or after < least:
            least = after
    return least


@_jit
def _judge(
    mask: int, unseen: Any, values: Any, runs: Any, limit: int
) -> tuple[int, int, int, int, int]:  # pragma: no cover - compiled
    scratch = numpy.zeros(12, dtype=numpy.int64)
    total = 0
    for face in range(52):
        if mask >> face & 1:
            total += values[face]
    now = total - _melded(mask, values, runs, scratch)
    drop = now - _least_after_discard(mask, total, values, runs, scratch) if mask else 0
    gains = 0
    knocks = 0
    gins = 0
    for index in range(unseen.shape[0]):
        face = unseen[index]
        value = values[face]
        if _joins(mask, face):
            best = _least_after_discard(mask | 1 << face, total + value, values, runs, scratch)
            gain = now - best
        else:
            gain = drop - value
        if gain > 0:
            gains += gain
            if now - gain <= limit:
                knocks += 1
            if now == gain:
                gins += 1
        elif now <= limit:
            knocks += 1
            if now == 0:
                gins += 1
    return now, gains, knocks, gins, unseen.shape[0]


class Judge:
    """``GinEvaluator.judge`` for one list of unseen cards, card values and knock limit."""

    __slots__ = ("_limit", "_runs", "_unseen", "_values")

    def __init__(self, unseen: Sequence[int], values: tuple[int, ...], limit: int) -> None:
        """``unseen``: the unseen faces (distinct, no joker); ``values``: the 53 card values."""
        self._unseen = numpy.asarray(unseen, dtype=numpy.int64)
        self._values = _values(values)
        self._runs = run_tables(values)
        self._limit = limit

    def __call__(self, hand: Sequence[int]) -> tuple[int, float, float, float]:
        """``(deadwood, potential, knock chance, gin chance)`` of the faces ``hand``
        (distinct, no joker)."""
        mask = 0
        for face in hand:
            mask |= 1 << face
        now, gains, knocks, gins, count = _judge(
            mask, self._unseen, self._values, self._runs, self._limit
        )
        if not count:
            return int(now), 0.0, 0.0, 0.0
        return int(now), float(gains) / count, int(knocks) / count, int(gins) / count


@functools.cache
def _values(values: tuple[int, ...]) -> Any:
    return numpy.asarray(values, dtype=numpy.int64)


def warm() -> None:
    """Compile the kernels, or load them from numba's cache."""
    gin = tuple(min(face % 13 + 1, 10) for face in range(52)) + (0,)
    Judge([3, 39], gin, 10)([0, 1, 2, 13, 26, 40, 41, 50])


if __name__ == "__main__":
    if AVAILABLE:
        warm()
        print("bots.gin_compiled: hand judgement compiled (or loaded from numba's cache)")
    else:
        print("bots.gin_compiled: not used; hands are judged in pure Python")
