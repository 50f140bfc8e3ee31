"""The least deadwood of two-deck hands with jokers, compiled (numba).

Theory of operation. The pure-Python solver (``solver._Split``) memoises suit patterns across
hands, so a hand it has met before is cheap and a fresh one is not. This module instead
searches each hand from scratch, in machine code: a depth-first search over the hand's cards in
face order, with a bound.

- The first card left (lowest face) is either deadwood, or the lowest natural card of the meld
  it is in: a set of its rank (it and any of the later suits' cards of that rank), or a run of
  its suit (it and a chain of higher ranks, each a natural card or a joker in a gap; an ace may
  also head a chain down from the king, as the ace above it). Every earlier face is used up, so
  no meld needs one.
- A meld takes only the jokers it needs: a run its gaps, and as many more as bring it to three
  cards; a set as many as bring it to three. Each meld records its *room*, the jokers it could
  still take (a set up to four cards, a run up to ``MAX_RUN``); when the naturals are all
  placed, the jokers left fill the room, and the rest are deadwood. No meld rule limits the
  jokers of a meld but ``min_natural``, so where a joker sits changes nothing else.
- Bound: the value melded so far plus every card not yet placed (jokers included) must beat
  the best partition found; melds are tried before deadwood, runs before sets.

Ace modes ``low`` and ``high_or_low`` are handled (a run is at most ``MAX_RUN`` long and fits
in either); ``around`` is left to the pure-Python solver, as are hands of three decks or more.
The answers are the pure-Python solver's, checked on random hands of every supported rule set
and against a brute-force oracle in ``tests/engine/test_compiled.py``.

numba compiles :func:`_least_deadwood` on its first call (2-6 s) and caches the machine code
next to this file, so later processes only load it (well under a second, numba's import
included). ``make`` compiles it once when it sets up the environment (``python -m
server.engine.compiled``), so no game waits for it. Without numba (a Python for which it has
no wheel yet), or with numba's ``NUMBA_DISABLE_JIT=1``, :data:`AVAILABLE` is false and the solver
keeps its pure-Python path.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["AVAILABLE", "WHY_NOT", "bind", "least_deadwood", "warm"]

_MAX_RUN = 13
_MAX_SET = 4

WHY_NOT = ""
"""Why the compiled search is not used (empty when it is)."""
numba: Any = None
numpy: Any = None
try:
    numba = importlib.import_module("numba")
    numpy = importlib.import_module("numpy")
except ImportError as error:
    AVAILABLE = False
    WHY_NOT = str(error)
else:
    # numba's own switch, NUMBA_DISABLE_JIT=1, turns the compiled search off: the solver then
    # takes its pure-Python path (the kernel run as Python would be far slower).
    AVAILABLE = not numba.config.DISABLE_JIT
    if not AVAILABLE:
        WHY_NOT = "switched off by NUMBA_DISABLE_JIT=1"
        numba = None


def _jit(function: Any) -> Any:
    """``numba.njit(cache=True)`` where numba is installed; the plain function otherwise."""
    if numba is None:
        return function
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:
        # No folder numba may write its cache to (a read-only install and home): compile in
        # each process instead.
        return numba.njit(nogil=True)(function)


_LEVELS = 106
"""Most nested calls of the search: each places at least one natural card (at most 104)."""

# The columns of the search's frame table (one row a nesting level): the card placed; the
# jokers, melded value, joker room and value left it started with; where its choices stand:
# the phase, the run chain's depth, naturals, gaps and value, the set subset tried and the
# subset applied (0: none).
_FIRST = 0
_JOKERS = 1
_MELDED = 2
_ROOM = 3
_LEFT = 4
_PHASE = 5
_DEPTH = 6
_NATURALS = 7
_GAPS = 8
_CHAIN = 9
_SUBSET = 10
_APPLIED = 11
_FIELDS = 12


@_jit
def _least_deadwood(
    present: int, twice: int, jokers: int, values: Any, high: bool, min_natural: int
) -> int:
    """Least deadwood of the hand (see :func:`least_deadwood`).

    The search is a loop over an explicit stack of frames (numba cannot cache the machine code
    of a recursive function). A frame is one placed card (``first``) and where its choices
    stand: ``phase`` 0 and 1 walk the run chains (up; down from the king for an ace above
    it), 2 is the run of one natural and two jokers, 3 the sets, 4 deadwood, 5 done. A frame
    asks for a nested search by setting ``pending`` and the ``call_*`` values.
    """
    counts = numpy.zeros(52, numpy.int64)
    total: int = 0
    for face in range(52):
        copies = (present >> face & 1) + (twice >> face & 1)
        counts[face] = copies
        total += copies * values[face]
    joker_value = values[52]
    left_start = total
    total += jokers * joker_value
    frame = numpy.zeros((_LEVELS, _FIELDS), numpy.int64)
    tried = numpy.zeros((_LEVELS, _MAX_RUN + 1), numpy.int64)
    taken = numpy.zeros((_LEVELS, _MAX_RUN + 1), numpy.int64)
    best: int = 0
    level = -1
    pending = True
    call_start = 0
    call_jokers = jokers
    call_melded = 0
    call_room = 0
    call_left = left_start
    while True:
        if pending:
            pending = False
            if call_melded + call_left + call_jokers * joker_value > best:
                first = call_start
                while first < 52 and counts[first] == 0:
                    first += 1
                if first == 52:
                    placed = call_jokers if call_jokers < call_room else call_room
                    found = call_melded + placed * joker_value
                    if found > best:
                        best = found
                else:
                    level += 1
                    counts[first] -= 1
                    frame[level, _FIRST] = first
                    frame[level, _JOKERS] = call_jokers
                    frame[level, _MELDED] = call_melded
                    frame[level, _ROOM] = call_room
                    frame[level, _LEFT] = call_left - values[first]
                    frame[level, _PHASE] = 0
                    frame[level, _DEPTH] = 0
                    frame[level, _NATURALS] = 1
                    frame[level, _GAPS] = 0
                    frame[level, _CHAIN] = values[first]
                    tried[level, 0] = 0
                    frame[level, _SUBSET] = 0
                    frame[level, _APPLIED] = 0
            if level < 0:
                break
            continue
        first = frame[level, _FIRST]
        suit = first // 13
        rank = first - suit * 13
        base = suit * 13
        phase = frame[level, _PHASE]
        held_jokers = frame[level, _JOKERS]
        if phase <= 1:
            # A run chain headed by ``first``: up the ranks (phase 0), or for an ace above the
            # king, down from the king (phase 1). Each depth is a natural card (tried first) or
            # a joker in a gap; a chain ending in a natural card closes a run.
            if phase == 1 and not (high and rank == 0):
                frame[level, _PHASE] = 2
                continue
            step = 1 if phase == 0 else -1
            position = rank + 1 if phase == 0 else 12
            stop = 12 if phase == 0 else 1
            depth = frame[level, _DEPTH]
            naturals = frame[level, _NATURALS]
            gaps = frame[level, _GAPS]
            chain_value = frame[level, _CHAIN]
            left = frame[level, _LEFT]
            while True:
                at = position + step * depth
                advanced = False
                if depth + 1 < _MAX_RUN and (at - stop) * step <= 0:
                    face = base + at
                    while tried[level, depth] < 2 and not advanced:
                        option = tried[level, depth]
                        tried[level, depth] += 1
                        if option == 0 and counts[face] > 0:
                            counts[face] -= 1
                            taken[level, depth] = 1
                            naturals += 1
                            chain_value += values[face]
                            left -= values[face]
                            advanced = True
                        elif option == 1 and gaps < held_jokers:
                            taken[level, depth] = 0
                            gaps += 1
                            advanced = True
                if advanced:
                    depth += 1
                    tried[level, depth] = 0
                    if taken[level, depth - 1] == 1:
                        span = depth + 1
                        extra = 3 - span if span < 3 else 0
                        used = gaps + extra
                        if naturals >= min_natural and used <= held_jokers:
                            pending = True
                            call_start = first
                            call_jokers = held_jokers - used
                            call_melded = frame[level, _MELDED] + chain_value + used * joker_value
                            call_room = frame[level, _ROOM] + _MAX_RUN - span - extra
                            call_left = left
                            break
                    continue
                if depth == 0:
                    break
                depth -= 1
                if taken[level, depth] == 1:
                    face = base + position + step * depth
                    counts[face] += 1
                    naturals -= 1
                    chain_value -= values[face]
                    left += values[face]
                else:
                    gaps -= 1
            frame[level, _DEPTH] = depth
            frame[level, _NATURALS] = naturals
            frame[level, _GAPS] = gaps
            frame[level, _CHAIN] = chain_value
            frame[level, _LEFT] = left
            if not pending:  # this chain is done: the next phase starts afresh
                frame[level, _PHASE] = phase + 1
                frame[level, _DEPTH] = 0
                frame[level, _NATURALS] = 1
                frame[level, _GAPS] = 0
                frame[level, _CHAIN] = values[first]
                tried[level, 0] = 0
            continue
        if phase == 2:
            # The card and two jokers (when one natural card makes a meld).
            frame[level, _PHASE] = 3
            if min_natural <= 1 and held_jokers >= 2:
                pending = True
                call_start = first
                call_jokers = held_jokers - 2
                call_melded = frame[level, _MELDED] + values[first] + 2 * joker_value
                call_room = frame[level, _ROOM] + _MAX_RUN - 3
                call_left = frame[level, _LEFT]
            continue
        if phase == 3:
            # Sets: the card and any of the later suits' cards of its rank (``subset``: bit i
            # for suit ``suit + 1 + i``), with the jokers that bring it to three.
            applied = frame[level, _APPLIED]
            if applied:
                for other in range(3):
                    if applied >> other & 1:
                        counts[(suit + 1 + other) * 13 + rank] += 1
                frame[level, _APPLIED] = 0
            subset = frame[level, _SUBSET]
            while subset < 8 and not pending:
                naturals = 1
                set_value = values[first]
                ok = True
                for other in range(3):
                    if subset >> other & 1:
                        other_suit = suit + 1 + other
                        if other_suit > 3 or counts[other_suit * 13 + rank] == 0:
                            ok = False
                            break
                        naturals += 1
                        set_value += values[other_suit * 13 + rank]
                extra = 3 - naturals if naturals < 3 else 0
                if ok and naturals >= min_natural and extra <= held_jokers:
                    for other in range(3):
                        if subset >> other & 1:
                            counts[(suit + 1 + other) * 13 + rank] -= 1
                    frame[level, _APPLIED] = subset if subset else 8
                    pending = True
                    call_start = first
                    call_jokers = held_jokers - extra
                    call_melded = frame[level, _MELDED] + set_value + extra * joker_value
                    call_room = frame[level, _ROOM] + _MAX_SET - naturals - extra
                    call_left = frame[level, _LEFT] - (set_value - values[first])
                subset += 1
            frame[level, _SUBSET] = subset
            if not pending:
                frame[level, _PHASE] = 4
            continue
        if phase == 4:
            # Deadwood.
            frame[level, _PHASE] = 5
            pending = True
            call_start = first
            call_jokers = held_jokers
            call_melded = frame[level, _MELDED]
            call_room = frame[level, _ROOM]
            call_left = frame[level, _LEFT]
            continue
        counts[first] += 1
        level -= 1
        if level < 0:
            break
    return total - best


def least_deadwood(
    present: int, twice: int, jokers: int, values: Sequence[int], high: bool, min_natural: int
) -> int:
    """Least deadwood of a hand given as face masks and a joker count.

    ``present``: the faces held (bit ``suit * 13 + rank - 1``); ``twice``: those held twice;
    ``values``: the 53 card values (the joker's last); ``high``: an ace may sit above the king
    (``high_or_low``; else ``low``); ``min_natural``: the natural cards a meld needs (1 or
    more). Without numba this runs as plain Python, slowly.
    """
    return bind(values, high, min_natural)(present, twice, jokers)


def bind(values: Sequence[int], high: bool, min_natural: int) -> Callable[[int, int, int], int]:
    """:func:`least_deadwood` with its rules and values bound: ``solve(present, twice,
    jokers)``."""
    if min_natural < 1:
        raise ValueError(f"min_natural must be 1 or more, got {min_natural}")
    array = numpy.asarray(values, dtype=numpy.int64) if numpy is not None else tuple(values)
    kernel = _least_deadwood

    def solve(present: int, twice: int, jokers: int) -> int:
        return int(kernel(present, twice, jokers, array, high, min_natural))

    return solve


def warm() -> None:
    """Compile :func:`_least_deadwood`, or load it from numba's cache (a process does it once,
    on its first two-deck hand; this does it now)."""
    values = (*range(1, 53), 30)
    # 7H 8H 9H and a joker: the search runs through every phase once.
    bind(values, True, 2)(0b111 << 32, 0, 1)


if __name__ == "__main__":
    if AVAILABLE:
        warm()
        print("server.engine.compiled: meld search compiled (or loaded from numba's cache)")
    else:
        print(f"server.engine.compiled: not used ({WHY_NOT}); deadwood runs in pure Python")
