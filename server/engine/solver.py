"""The meld solver: best partition of a hand into melds, deadwood, best discard and lay-offs.

Theory of operation. Minimising deadwood means choosing disjoint melds that leave the least value
over. The search always decides the *lowest* undecided face first: either it is left over, or it
goes into one meld, and every meld that can hold it is tried. Because every other card of such a
meld is higher, the melds to try for a face are looked up in a table rather than searched for.
Results are memoised on what is left of the hand, so the search is a dynamic programme over
sub-hands.

There are two paths:

- *Fast path* (no jokers, no two cards of one face; every Gin Rummy hand): a hand is a 52-bit
  mask of faces. Cards that belong to no meld at all (computed with a few table look-ups and bit
  operations) are deadwood at once; only the rest, usually a handful of cards, is searched, and
  those searches are memoised across calls (the memo is a pure cache, bounded in size).
- *General path* (jokers, several decks): the hand is a multiset of faces kept as nested masks
  (``layers[k]`` holds the faces present at least ``k + 1`` times) plus a joker count. A meld is
  chosen as its natural faces ``S``; the jokers it then takes can be any number from ``g`` (the
  gaps of the shortest set or run window around ``S``) up to ``cap`` (the longest). Joker
  declarations do not interact across melds, so the search only has to track the jokers still
  free for gaps and the total capacity of the melds chosen: the jokers left in hand are
  ``max(0, jokers - capacity)``, provided the gaps fit in the jokers held. Concrete declarations
  are assigned afterwards.

Ties (several partitions with the least deadwood) are broken by a fixed rule: scanning faces
from the lowest, a face goes into a meld rather than being left over whenever an optimum allows
it, into the first such meld in the solver's fixed order; physical copies and jokers are used
lowest first; spare jokers go to the first melds with room; a joker in a set stands for the
first missing suit (clubs, diamonds, hearts, spades) and in a run for a face of the lowest
window that holds the run's naturals. Equal inputs therefore always give equal outputs.

Every function is pure and sans-IO. ``values`` is a table of 53 non-negative card values indexed
by face (index 52 is a joker held in hand).
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import cast

from protocol.cards import FACE_MASK, JOKER, Card, Face, card_face, is_joker
from server.engine.melds import (
    AceMode,
    Meld,
    MeldKind,
    MeldRules,
    check_meld,
    layoff_faces,
    with_layoff,
)

__all__ = [
    "Solver",
    "best_discard",
    "best_layoff_deadwood",
    "best_melds",
    "deadwood",
    "discard_deadwoods",
    "layoff_targets",
]

_SUIT_BITS = 13
_SUIT_MASK = (1 << _SUIT_BITS) - 1
_NATURAL_FACES = 52
_VALUE_COUNT = 53
_SPREAD = 1 | 1 << 13 | 1 << 26 | 1 << 39
"""Multiplying a 13-bit rank mask by this copies it into all four suits."""
_MEMO_LIMIT = 200_000
_CONTEXT_LIMIT = 64
_MAX_SET = 4
_CLUSTER_FILL = 256
"""``run_clusters`` misses for one joker count after which its whole table is computed."""
_MAX_RUN = 13


# --- Tables that depend on the meld rules only -------------------------------------------------


def _window_masks(ace: AceMode, length: int) -> tuple[int, ...]:
    """Suit-local rank masks (bit ``rank - 1``) of every run window of ``length`` cards."""
    if ace is AceMode.AROUND:
        firsts = range(1, 14) if length < _MAX_RUN else range(1, 2)
    else:
        positions = 14 if ace is AceMode.HIGH_OR_LOW else 13
        firsts = range(1, positions - length + 2)
    masks: list[int] = []
    for first in firsts:
        mask = 0
        for offset in range(length):
            mask |= 1 << ((first + offset - 1) % 13)
        if mask not in masks:
            masks.append(mask)
    return tuple(masks)


def _span(mask: int) -> int:
    low = (mask & -mask).bit_length() - 1
    return mask.bit_length() - low


@functools.cache
def _arcs(ace: AceMode) -> tuple[int, ...]:
    """For every suit-local rank mask, the length of the shortest run window holding it."""
    arcs = [0] * (1 << _SUIT_BITS)
    for mask in range(1, 1 << _SUIT_BITS):
        if ace is AceMode.LOW:
            arcs[mask] = _span(mask)
        elif ace is AceMode.HIGH_OR_LOW:
            best = _span(mask)
            if mask & 1:
                best = min(best, _span((mask & ~1) | 1 << _SUIT_BITS))
            arcs[mask] = best
        else:
            best = _SUIT_BITS
            for shift in range(_SUIT_BITS):
                if mask >> shift & 1:
                    rotated = (mask >> shift | mask << (_SUIT_BITS - shift)) & _SUIT_MASK
                    best = min(best, rotated.bit_length())
            arcs[mask] = best
    return tuple(arcs)


class _Tables:
    """Everything the solver precomputes for one ``MeldRules``."""

    __slots__ = (
        "ace",
        "cluster_misses",
        "clusters",
        "melds_by_lowest",
        "min_natural",
        "rules",
        "run_core",
        "run_options",
        "set_masks",
        "set_need",
        "sets_of",
        "windows",
    )

    def __init__(self, rules: MeldRules) -> None:
        self.rules = rules
        self.ace = rules.ace
        self.min_natural = max(rules.min_natural, 1)
        shortest = max(3, self.min_natural)
        windows = _window_masks(self.ace, shortest) if shortest <= _MAX_RUN else ()
        # Cards of a suit that lie in some run of the suit: the union of the shortest windows
        # (every card of a longer run lies in one of its shortest sub-windows).
        core = [0] * (1 << _SUIT_BITS)
        for pattern in range(1 << _SUIT_BITS):
            union = 0
            for window in windows:
                if window & pattern == window:
                    union |= window
            core[pattern] = union
        self.run_core: tuple[int, ...] = tuple(core)
        self.set_need = shortest
        self.set_masks: tuple[tuple[tuple[int, ...], ...], ...] = tuple(
            tuple(
                (
                    0,
                    *(
                        sum(1 << (suit * 13 + rank) for suit in range(4) if chosen >> suit & 1)
                        for chosen in range(1, 16)
                        if chosen & suits == chosen and shortest <= chosen.bit_count() <= _MAX_SET
                    ),
                )
                for suits in range(16)
            )
            for rank in range(13)
        )
        """Per rank and 4-bit mask of the suits held: 0 and the face mask of every set."""
        self.sets_of: dict[int, tuple[int, ...]] = {
            sum(1 << (suit * 13 + rank) for suit in range(4) if suits >> suit & 1): choices[1:]
            for rank, by_suits in enumerate(self.set_masks)
            for suits, choices in enumerate(by_suits)
        }
        """The same without the 0, keyed by the face mask of the rank's cards held."""
        by_lowest: list[list[int]] = [[] for _ in range(_NATURAL_FACES)]
        for rank in range(13):
            for suits in range(1, 16):
                size = suits.bit_count()
                if shortest <= size <= _MAX_SET:
                    mask = sum(1 << (suit * 13 + rank) for suit in range(4) if suits >> suit & 1)
                    by_lowest[(mask & -mask).bit_length() - 1].append(mask)
        for length in range(shortest, _MAX_RUN + 1):
            for window in _window_masks(self.ace, length):
                for suit in range(4):
                    mask = window << (suit * 13)
                    lowest = by_lowest[(mask & -mask).bit_length() - 1]
                    if mask not in lowest:
                        lowest.append(mask)
        self.melds_by_lowest: tuple[tuple[int, ...], ...] = tuple(
            tuple(sorted(masks)) for masks in by_lowest
        )
        self.run_options: dict[tuple[int, int, int, int], tuple[tuple[int, int, int], ...]] = {}
        self.windows: tuple[tuple[int, ...], ...] = tuple(
            _window_masks(self.ace, length) if length >= 3 else () for length in range(_MAX_RUN + 1)
        )
        """Suit-local masks of the run windows of each length."""
        self.clusters: dict[int, tuple[int, ...]] = {}
        """``run_clusters`` by ``jokers << 13 | pattern``."""
        self.cluster_misses: dict[int, int] = {}
        """``clusters_of`` misses by joker count."""

    def core(self, mask: int) -> int:
        """The faces of ``mask`` (one deck, no jokers) that belong to at least one meld in it."""
        table = self.run_core
        clubs = mask & _SUIT_MASK
        diamonds = mask >> 13 & _SUIT_MASK
        hearts = mask >> 26 & _SUIT_MASK
        spades = mask >> 39 & _SUIT_MASK
        result = table[clubs] | table[diamonds] << 13 | table[hearts] << 26 | table[spades] << 39
        need = self.set_need
        if need == 3:
            ranks = clubs & diamonds & (hearts | spades) | hearts & spades & (clubs | diamonds)
        elif need == _MAX_SET:
            ranks = clubs & diamonds & hearts & spades
        else:
            ranks = 0
        if ranks:
            result |= ranks * _SPREAD & mask
        return result

    def groups(self, present: int, jokers: int) -> list[int]:
        """Groups of the faces ``present`` that one meld could join, with ``jokers`` jokers:
        per suit, the clusters of faces that runs could join; per rank, the faces of a set.
        Faces in no group fit in no meld."""
        clusters = self.clusters
        need = max(self.min_natural, 3 - jokers)
        found: list[int] = []
        for suit in range(4):
            pattern = present >> (suit * 13) & _SUIT_MASK
            if pattern:
                key = jokers << _SUIT_BITS | pattern
                local = clusters.get(key)
                if local is None:
                    local = self.clusters_of(pattern, jokers)
                found.extend(cluster << (suit * 13) for cluster in local)
        if need <= _MAX_SET:
            clubs = present & _SUIT_MASK
            diamonds = present >> 13 & _SUIT_MASK
            hearts = present >> 26 & _SUIT_MASK
            spades = present >> 39
            if need <= 1:
                ranks = clubs | diamonds | hearts | spades
            elif need == 2:
                ranks = (clubs | diamonds) & (hearts | spades) | clubs & diamonds | hearts & spades
            elif need == 3:
                ranks = clubs & diamonds & (hearts | spades) | hearts & spades & (clubs | diamonds)
            else:
                ranks = clubs & diamonds & hearts & spades
            while ranks:
                low = ranks & -ranks
                found.append(present & low * _SPREAD)
                ranks ^= low
        return found

    def clusters_of(self, pattern: int, jokers: int) -> tuple[int, ...]:
        """``run_clusters``, kept in ``clusters``; after ``_CLUSTER_FILL`` misses for one joker
        count, computed at once for every pattern (a long-lived solver then never misses)."""
        key = jokers << _SUIT_BITS | pattern
        found = self.clusters.get(key)
        if found is not None:
            return found
        misses = self.cluster_misses[jokers] = self.cluster_misses.get(jokers, 0) + 1
        if misses == _CLUSTER_FILL:
            for other in range(1 << _SUIT_BITS):
                if jokers << _SUIT_BITS | other not in self.clusters:
                    self.clusters[jokers << _SUIT_BITS | other] = self.run_clusters(other, jokers)
            return self.clusters[key]
        found = self.clusters[key] = self.run_clusters(pattern, jokers)
        return found

    def run_clusters(self, pattern: int, jokers: int) -> tuple[int, ...]:
        """The clusters of a suit's rank mask that runs with at most ``jokers`` gaps could join:
        the faces of overlapping feasible windows, merged."""
        need = self.min_natural
        clusters: list[int] = []
        # A window longer than the faces held plus the jokers has too many gaps.
        for length in range(3, min(_MAX_RUN, pattern.bit_count() + jokers) + 1):
            for window in self.windows[length]:
                held = window & pattern
                naturals = held.bit_count()
                if naturals >= need and length - naturals <= jokers:
                    merged = held
                    kept = []
                    for cluster in clusters:
                        if cluster & merged:
                            merged |= cluster
                        else:
                            kept.append(cluster)
                    kept.append(merged)
                    clusters = kept
        return tuple(clusters)

    def runs_with(
        self, suit: int, present: int, lowest: int, budget: int
    ) -> tuple[tuple[int, int, int], ...]:
        """Run options ``(faces mask, gaps, capacity)`` for the general path.

        ``present`` is the suit-local mask of faces still available, ``lowest`` the local bit
        of the face being decided (which every option holds), ``budget`` the jokers free for gaps.
        """
        key = (suit, present, lowest, budget)
        options = self.run_options.get(key)
        if options is not None:
            return options
        arcs = _arcs(self.ace)
        found: list[tuple[int, int, int]] = []
        rest = present & ~lowest
        subset = rest
        while True:
            faces = subset | lowest
            size = faces.bit_count()
            if size >= self.min_natural:
                gaps = max(3, arcs[faces]) - size
                if gaps <= budget:
                    found.append((faces << (suit * 13), gaps, _MAX_RUN - size))
            if not subset:
                break
            subset = (subset - 1) & rest
        options = tuple(sorted(found))
        if len(self.run_options) > _MEMO_LIMIT:
            self.run_options.clear()
        self.run_options[key] = options
        return options


@functools.cache
def _tables(rules: MeldRules) -> _Tables:
    return _Tables(rules)


# --- Tables that also depend on the card values -------------------------------------------------


class _Context:
    """The tables for one ``(rules, values)`` pair, and the fast path's memo."""

    __slots__ = (
        "best_melds",
        "by_lowest",
        "compiled",
        "compiled_bound",
        "deadwood",
        "joker_value",
        "long_sets",
        "melds",
        "memo",
        "outcomes",
        "rules",
        "run_deadwood",
        "run_melds",
        "searches",
        "split",
        "tables",
        "values",
    )

    def __init__(self, rules: MeldRules, values: tuple[int, ...]) -> None:
        self.tables = _tables(rules)
        self.rules = rules
        self.values = values
        self.joker_value = values[JOKER]
        self.long_sets = self.tables.set_need > 3
        """Three cards of a rank are no set (``min_natural`` 4 or more)."""
        self.by_lowest: tuple[tuple[tuple[int, int], ...], ...] = tuple(
            tuple((mask, _mask_value(mask, values)) for mask in masks)
            for masks in self.tables.melds_by_lowest
        )
        self.memo: dict[int, int] = {}
        """Fast path: most value that can be melded out of a face mask."""
        self.run_deadwood: tuple[Sequence[int], ...] = tuple(
            _run_deadwood_table(self.tables, values, suit) for suit in range(4)
        )
        """Per suit, indexed by the suit's 13-bit rank mask: the least deadwood of those cards
        melded in runs only. When no rank is held in enough suits for a set, a one-deck hand's
        deadwood is the sum of its four suits' entries."""
        self.outcomes: dict[tuple[int, ...], dict[tuple[int, int], int]] = {}
        """General path: a component's outcome table by ``(jokers, *layers)``."""
        self.searches: dict[int, _Search] = {}
        self.split: _Split | None = None
        """``deadwood`` of two-deck and joker hands, made on first use."""
        self.compiled: Callable[[int, int, int], int] | None = None
        """The compiled search for two-deck and joker hands (``server.engine.compiled``),
        bound on first use; None where numba is missing or the ace goes around."""
        self.compiled_bound = False
        self.melds: dict[int, Meld] = {}
        """The ``Meld`` of first-deck cards for a face mask, built (and checked) once."""
        self.run_melds: tuple[list[tuple[Meld, ...] | None], ...] = tuple(
            [None] * (1 << _SUIT_BITS) for _ in range(4)
        )
        """Per suit and rank mask: the runs the tie rule picks (``suit_melds``), sorted; None
        until first asked for."""
        self.deadwood = _bind_deadwood(self)
        """``deadwood`` for these rules and values."""
        self.best_melds = _bind_best_melds(self)
        """``best_melds`` for these rules and values."""

    def search(self, jokers: int) -> _Search:
        """The general path's search for hands of ``jokers`` jokers, kept across hands (its
        memo depends on the faces only); cleared when it grows past the memo limit."""
        search = self.searches.get(jokers)
        if search is None or len(search.outcome_memo) > _MEMO_LIMIT:
            search = self.searches[jokers] = _Search(self, jokers)
        return search

    def meld(self, faces: int) -> Meld:
        """The meld of the first-deck cards of the face mask ``faces`` (a set or run)."""
        meld = self.melds.get(faces)
        if meld is None:
            meld = self.melds[faces] = check_meld(tuple(_bits(faces)), self.rules)
        return meld

    def runs(self, suit: int, pattern: int) -> tuple[Meld, ...]:
        """``suit_melds``, looked up in ``run_melds`` (computed on the first look-up)."""
        found = self.run_melds[suit][pattern]
        return self.suit_melds(suit, pattern) if found is None else found

    def suit_melds(self, suit: int, pattern: int) -> tuple[Meld, ...]:
        """The runs of an optimal partition of a suit's rank mask, by the tie rule, sorted,
        stored in ``run_melds``.

        Scanning from the lowest card: the first run holding it (in the solver's fixed order)
        after which the rest still reaches the least deadwood, or else it is left over.
        """
        table = self.run_deadwood[suit]
        offset = suit * _SUIT_BITS
        rest = pattern
        target = table[rest]
        chosen: list[Meld] = []
        while rest:
            low = rest & -rest
            rank = low.bit_length() - 1
            for meld in self.tables.melds_by_lowest[offset + rank]:
                run = meld >> offset
                if run & rest == run and run <= _SUIT_MASK and table[rest ^ run] == target:
                    chosen.append(self.meld(meld))
                    rest ^= run
                    break
            else:
                target -= self.values[offset + rank]
                rest ^= low
        found = self.run_melds[suit][pattern] = _sorted_melds(chosen)
        return found

    def melded(self, mask: int) -> int:
        """Most value that can be melded from a one-deck, joker-free face mask."""
        memo = self.memo
        best = memo.get(mask)
        if best is not None:
            return best
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        return _fast_melded(mask, memo, self.by_lowest)


def _run_deadwood_table(tables: _Tables, values: Sequence[int], suit: int) -> Sequence[int]:
    """Least deadwood of every rank mask of ``suit`` with runs only (a dynamic programme over
    the masks in increasing order: the lowest card is left over or starts one of its runs)."""
    offset = suit * _SUIT_BITS
    runs_by_lowest = [
        [(mask, _mask_value(mask << offset, values)) for mask in masks if mask <= _SUIT_MASK]
        for masks in tables.melds_by_lowest[:_SUIT_BITS]
    ]
    melded = [0] * (1 << _SUIT_BITS)
    dead = [0] * (1 << _SUIT_BITS)
    for pattern in range(1, 1 << _SUIT_BITS):
        low = pattern & -pattern
        rank = low.bit_length() - 1
        rest = pattern ^ low
        best = melded[rest]
        for run, value in runs_by_lowest[rank]:
            if run & pattern == run:
                total = value + melded[pattern ^ run]
                if total > best:
                    best = total
        melded[pattern] = best
        dead[pattern] = dead[rest] + values[offset + rank]
    table = [total - best for total, best in zip(dead, melded)]
    # Bytes when the values allow: 8 KB per suit stays in the CPU cache, a tuple of 8,192
    # references does not (the look-ups are random), which shows in the solve rate.
    return bytes(table) if max(table) < 256 else tuple(table)


_contexts: dict[tuple[MeldRules, tuple[int, ...]], _Context] = {}
_last: _Context = cast("_Context", None)
_last_rules: object = object()
_last_values: object = object()
"""The context used last, when its values were a tuple (so they cannot change); ``_last`` is
only read once ``_last_rules`` has been set with it."""


def _context(rules: MeldRules, values: Sequence[int]) -> _Context:
    """The cached context for ``rules`` and ``values``.

    Raises:
        ValueError: ``values`` does not hold 53 non-negative integers.
    """
    global _last, _last_rules, _last_values
    if values is _last_values and rules is _last_rules:
        return _last
    key_values = values if type(values) is tuple else tuple(values)
    key = (rules, key_values)
    context = _contexts.get(key)
    if context is None:
        if len(key_values) != _VALUE_COUNT or any(value < 0 for value in key_values):
            raise ValueError(f"values must be 53 non-negative card values, got {values!r}")
        if len(_contexts) >= _CONTEXT_LIMIT:
            _contexts.clear()
        context = _contexts[key] = _Context(rules, key_values)
    if type(values) is tuple:
        _last, _last_rules, _last_values = context, rules, values
    return context


def _mask_value(mask: int, values: Sequence[int]) -> int:
    total = 0
    while mask:
        low = mask & -mask
        total += values[low.bit_length() - 1]
        mask ^= low
    return total


def _fast_melded(
    mask: int, memo: dict[int, int], by_lowest: tuple[tuple[tuple[int, int], ...], ...]
) -> int:
    """Most value meldable from ``mask``: the lowest face is left over or goes into a meld."""
    best = memo.get(mask)
    if best is not None:
        return best
    low = mask & -mask
    rest = mask ^ low
    best = _fast_melded(rest, memo, by_lowest) if rest else 0
    for meld, value in by_lowest[low.bit_length() - 1]:
        if meld & mask == meld:
            left = mask ^ meld
            total = (value + _fast_melded(left, memo, by_lowest)) if left else value
            if total > best:
                best = total
    memo[mask] = best
    return best


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


# --- Reading a hand -----------------------------------------------------------------------------

_MAX_COPIES = 16
_FACES = (1 << _NATURAL_FACES) - 1
_COPY_FLAG = 1 << 60
_CARD_BIT = {
    copy << 6 | face: (1 << face if face < _NATURAL_FACES else 0) | (_COPY_FLAG if copy else 0)
    for copy in range(_MAX_COPIES)
    for face in range(_VALUE_COUNT)
}.__getitem__
"""A card's bit in a one-deck face mask (a joker: none), plus ``_COPY_FLAG`` for a copy other
than the first; KeyError for a non-card. Summed over a hand, the low 52 bits hold one bit per
card unless a face repeats (two equal bits carry, losing one) or a joker is held."""


def _fast_mask(cards: Sequence[Card], values: Sequence[int]) -> tuple[int, int] | None:
    """``(face mask, total value)`` if the hand has no jokers and no repeated face, else None."""
    mask = 0
    total = 0
    for card in cards:
        face = card & FACE_MASK
        bit = 1 << face
        if face >= _NATURAL_FACES or mask & bit:
            return None
        mask |= bit
        total += values[face]
    return mask, total


class _Hand:
    """A hand for the general path: faces as nested masks, jokers counted, cards by face."""

    __slots__ = ("by_face", "jokers", "layers")

    def __init__(self, cards: Sequence[Card]) -> None:
        """Read ``cards``.

        Raises:
            ValueError: a card appears twice or is not a card.
        """
        if len(set(cards)) != len(cards):
            raise ValueError(f"a card appears twice in the hand: {sorted(cards)!r}")
        layers: list[int] = []
        self.by_face: dict[Face, list[Card]] = {}
        self.jokers: list[Card] = []
        for card in sorted(cards):
            face = card_face(card)
            if card < 0 or face > JOKER:
                raise ValueError(f"not a card: {card!r}")
            if face == JOKER:
                self.jokers.append(card)
                continue
            self.by_face.setdefault(face, []).append(card)
            bit = 1 << face
            for index, layer in enumerate(layers):
                if not layer & bit:
                    layers[index] = layer | bit
                    break
            else:
                layers.append(bit)
        self.layers: tuple[int, ...] = tuple(layers) or (0,)


def _remove(layers: tuple[int, ...], faces: int) -> tuple[int, ...]:
    """``layers`` with one copy of each face in ``faces`` (all present) taken out."""
    if len(layers) == 1:
        return (layers[0] & ~faces,)
    result = [(layer & ~faces) | (above & faces) for layer, above in itertools.pairwise(layers)]
    top = layers[-1] & ~faces
    if top:
        result.append(top)
    while len(result) > 1 and not result[-1]:
        result.pop()
    return tuple(result)


_State = tuple[tuple[int, ...], int, int]
_Option = tuple[int, int, int]


class _Search:
    """The general path's search for one hand's joker count; memoised on the state.

    A state is ``(layers, budget, capacity)``: the faces still undecided, the jokers still free
    to fill gaps, and the joker capacity of the melds chosen so far (capped at the jokers held).
    Its value is the least deadwood of the undecided faces plus the jokers left in hand.
    """

    __slots__ = ("context", "jokers", "memo", "outcome_memo", "tables")

    def __init__(self, context: _Context, jokers: int) -> None:
        self.context = context
        self.tables = context.tables
        self.jokers = jokers
        self.memo: dict[_State, int] = {}
        self.outcome_memo: dict[tuple[int, ...], dict[tuple[int, int], int]] = {}

    def options(self, layers: tuple[int, ...], budget: int) -> list[_Option]:
        """Melds ``(faces mask, gaps, capacity)`` holding the lowest undecided face."""
        present = layers[0]
        face = (present & -present).bit_length() - 1
        suit, rank = divmod(face, 13)
        found: list[_Option] = []
        others = [
            1 << (other * 13 + rank)
            for other in range(suit + 1, 4)
            if present >> (other * 13 + rank) & 1
        ]
        if others:
            for chosen in range(1, 1 << len(others)):
                size = chosen.bit_count() + 1
                gaps = max(0, 3 - size)
                if size >= self.tables.min_natural and gaps <= budget:
                    faces = 1 << face
                    for index, bit in enumerate(others):
                        if chosen >> index & 1:
                            faces |= bit
                    found.append((faces, gaps, _MAX_SET - size))
        found.extend(
            self.tables.runs_with(suit, present >> (suit * 13) & _SUIT_MASK, 1 << rank, budget)
        )
        return found

    def solve(self, layers: tuple[int, ...], budget: int, capacity: int) -> int:
        """Least deadwood from this state on."""
        key = (layers, budget, capacity)
        best = self.memo.get(key)
        if best is not None:
            return best
        present = layers[0]
        if not present:
            return self.context.joker_value * max(0, self.jokers - capacity)
        low = present & -present
        best = self.context.values[low.bit_length() - 1] + self.solve(
            _remove(layers, low), budget, capacity
        )
        if best:
            for faces, gaps, room in self.options(layers, budget):
                total = self.solve(
                    _remove(layers, faces), budget - gaps, min(self.jokers, capacity + room)
                )
                if total < best:
                    best = total
                    if not best:
                        break
        self.memo[key] = best
        return best

    def outcomes(self, layers: tuple[int, ...]) -> dict[tuple[int, int], int]:
        """Every way to decide ``layers`` (all of its faces), as ``(jokers spent on gaps, joker
        capacity gained) -> least natural deadwood``; gaps at most, capacity capped at, the
        jokers held. Dominated outcomes (no fewer gaps, no more capacity, no less deadwood than
        another) are dropped."""
        memo = self.outcome_memo
        found = memo.get(layers)
        if found is not None:
            return found
        jokers = self.jokers
        present = layers[0]
        if not present:
            return {(0, 0): 0}
        low = present & -present
        value = self.context.values[low.bit_length() - 1]
        result = {
            outcome: least + value for outcome, least in self.outcomes(_remove(layers, low)).items()
        }
        for faces, gaps, room in self.options(layers, jokers):
            for (spent, capacity), least in self.outcomes(_remove(layers, faces)).items():
                if spent + gaps <= jokers:
                    outcome = (spent + gaps, min(jokers, capacity + room))
                    known = result.get(outcome)
                    if known is None or least < known:
                        result[outcome] = least
        if len(result) > 1:
            # Sweep by gaps: an outcome is kept only if it beats every one with fewer or equal
            # gaps on capacity or deadwood.
            kept: dict[tuple[int, int], int] = {}
            ordered = sorted(result.items(), key=_by_gaps)
            for outcome, least in ordered:
                if not any(
                    other[1] >= outcome[1] and other_least <= least
                    for other, other_least in kept.items()
                ):
                    kept[outcome] = least
            result = kept
        memo[layers] = result
        return result

    def choices(self, layers: tuple[int, ...]) -> list[_Option]:
        """The melds of an optimal partition, chosen by the documented tie rule."""
        budget, capacity = self.jokers, 0
        target = self.solve(layers, budget, capacity)
        chosen: list[_Option] = []
        while layers[0]:
            for option in self.options(layers, budget):
                faces, gaps, room = option
                after = (_remove(layers, faces), budget - gaps, min(self.jokers, capacity + room))
                if self.solve(*after) == target:
                    chosen.append(option)
                    layers, budget, capacity = after
                    break
            else:
                low = layers[0] & -layers[0]
                target -= self.context.values[low.bit_length() - 1]
                layers = _remove(layers, low)
        return chosen


def _general_search(context: _Context, hand: _Hand) -> tuple[_Search, tuple[int, ...], int]:
    """A search for ``hand`` with joker-free cards that fit in no meld already taken out.

    Returns the search, the layers left to search and the value of the cards taken out.
    """
    layers = hand.layers
    base = 0
    if not hand.jokers:
        core = context.tables.core(layers[0])
        dead = layers[0] & ~core
        if dead:
            for layer in layers:
                base += _mask_value(layer & dead, context.values)
            layers = _remove_all(layers, dead)
    return _Search(context, len(hand.jokers)), layers, base


def _remove_all(layers: tuple[int, ...], faces: int) -> tuple[int, ...]:
    kept = [layer & ~faces for layer in layers]
    while len(kept) > 1 and not kept[-1]:
        kept.pop()
    return tuple(kept)


def _general_deadwood(context: _Context, layers: tuple[int, ...], jokers: int) -> int:
    """Least deadwood of a hand with jokers or repeated faces, component by component.

    Faces that fit in no meld even with every joker held are left over at once. The rest
    splits into *components*: clusters of one suit that some run could join, linked by the
    ranks a set could join. No meld spans two components, so each is solved alone, as a table
    of outcomes (jokers spent on gaps, joker capacity gained) -> least deadwood, memoised
    across hands (components are small and recur); the tables are then combined under the
    hand's joker count.
    """
    tables = context.tables
    present = layers[0]
    groups = tables.groups(present, jokers)
    live = 0
    for group in groups:
        live |= group
    base = 0
    dead = present & ~live
    if dead:
        values = context.values
        for layer in layers:
            if layer & dead:
                base += _mask_value(layer & dead, values)
    if not groups:
        return base + context.joker_value * jokers
    # Merge the groups into components (groups that share a face).
    components: list[int] = []
    for group in groups:
        merged = group
        kept = []
        for component in components:
            if component & merged:
                merged |= component
            else:
                kept.append(component)
        kept.append(merged)
        components = kept
    outcomes = context.outcomes
    combined: dict[tuple[int, int], int] = {(0, 0): 0}
    for component in components:
        key = (jokers, *[layer & component for layer in layers if layer & component])
        table = outcomes.get(key)
        if table is None:
            if len(outcomes) > _MEMO_LIMIT:
                outcomes.clear()
            table = outcomes[key] = context.search(jokers).outcomes(key[1:])
        if len(table) == 1 and len(combined) == 1:
            ((gaps, room), least), ((spent, capacity), total) = (
                *table.items(),
                *combined.items(),
            )
            if spent + gaps <= jokers:
                combined = {(spent + gaps, min(jokers, capacity + room)): total + least}
                continue
        merged_table: dict[tuple[int, int], int] = {}
        for (spent, capacity), total in combined.items():
            for (gaps, room), least in table.items():
                if spent + gaps <= jokers:
                    outcome = (spent + gaps, min(jokers, capacity + room))
                    value = total + least
                    known = merged_table.get(outcome)
                    if known is None or value < known:
                        merged_table[outcome] = value
        combined = merged_table
    joker_value = context.joker_value
    return base + min(
        total + joker_value * (jokers - capacity) for (_, capacity), total in combined.items()
    )


# --- Two decks and jokers: sets rank by rank, runs suit by suit --------------------------------

_INFINITY = 1 << 40
"""The deadwood of an impossible outcome: more than any hand's value (integers stay exact, so
sums and differences of it are harmless)."""
_LARGE = _INFINITY >> 1
"""Above this, a gain (or a least deadwood) is impossible."""
_SECOND_COPY = 52
_JOKER_BITS = 104
_SPLIT_BIT = {
    copy << 6 | face: 1 << (_JOKER_BITS + copy)
    if face == JOKER
    else 1 << (copy * _SECOND_COPY + face)
    for copy in range(_MAX_COPIES)
    for face in range(_VALUE_COUNT)
    if face == JOKER or copy < 2
}.__getitem__
"""A card's own bit: first-deck faces at 0-51, second-deck faces at 52-103, jokers from 104.
Summed over a hand of distinct cards, it has one bit per card; KeyError for a non-card or a
card of a third deck."""
_COMBINATION_LIMIT = 64
"""Set choices ``_Split`` tries at most; a hand with more goes to ``_general_deadwood``."""
_BASE: Callable[[tuple[int, ...]], int] = operator.itemgetter(0)
_GAIN1: Callable[[tuple[int, ...]], int] = operator.itemgetter(1)
_GAIN2: Callable[[tuple[int, ...]], int] = operator.itemgetter(2)

_Vector = tuple[int, ...]
"""An outcome vector ``(base, gain 1, ..., gain J)``: the least deadwood of some cards with no
joker placed among them is ``base``, with exactly ``a`` jokers placed ``base + gain a``. Suit
vectors carry one more entry, the suit's ranks that lie in a run window (``suit_vector``)."""
_SetChoice = tuple[tuple[int, ...], _Vector, int]
"""A set choice of one rank: what it takes off each suit's pattern key (``()`` for nothing),
its outcome vector, and the fewest jokers its sets need."""


def _vector(absolute: Sequence[int]) -> _Vector:
    """The outcome vector of the least deadwoods with 0, 1, ... jokers placed."""
    base = absolute[0]
    return (base, *(least - base for least in absolute[1:]))


def _least(parts: Sequence[_Vector], jokers: int, joker_value: int) -> int:
    """The least deadwood of parts decided independently, ``jokers`` jokers held: each joker is
    placed in one part or left in hand at ``joker_value``."""
    base = sum(map(_BASE, parts))
    if not jokers:
        return base
    if jokers == 1:
        return base + min(joker_value, min(map(_GAIN1, parts)))
    if jokers == 2:  # both in one part, or one in each of the two parts that gain most
        gains = list(map(_GAIN1, parts))
        first = min(gains)
        gains.remove(first)
        second = min(gains, default=_INFINITY)
        return base + min(
            joker_value + min(joker_value, first), first + second, min(map(_GAIN2, parts))
        )
    gains = [0, *(_INFINITY,) * jokers]
    for part in parts:
        grown = gains.copy()
        for placed in range(1, jokers + 1):
            gain = part[placed]
            if gain < _LARGE:  # else this part cannot take that many jokers
                for before in range(jokers + 1 - placed):
                    total = gains[before] + gain
                    if total < grown[before + placed]:
                        grown[before + placed] = total
        gains = grown
    return base + min([gain + joker_value * (jokers - placed) for placed, gain in enumerate(gains)])


def _convolve(left: Sequence[int], right: Sequence[int]) -> list[int]:
    """Min-plus convolution of two lists of least deadwoods by jokers placed (one length)."""
    return [
        min([left[index] + right[total - index] for index in range(total + 1)])
        for total in range(len(left))
    ]


def _suit_values(values: Sequence[int], suit: int) -> list[int]:
    """The value of every rank mask of ``suit``."""
    table = [0] * (1 << _SUIT_BITS)
    for mask in range(1, 1 << _SUIT_BITS):
        low = mask & -mask
        table[mask] = table[mask ^ low] + values[suit * _SUIT_BITS + low.bit_length() - 1]
    return table


class _Split:
    """``deadwood`` of hands with at most two copies of a face, jokers counted.

    Every partition is some sets, rank by rank, and runs, suit by suit. A suit's runs are
    solved once per *suit pattern* (which of its ranks are held once or twice, and the jokers
    held) into an outcome vector (``_Vector``). Cards of a suit in no run window that the
    jokers could fill are deadwood in every partition of the suit, so a set may take them
    without changing the suit's runs: ranks whose set cards are all such cards are decided
    alone (one vector per rank), and only the set choices of the other ranks are tried in
    combination, each changing the patterns of the suits it takes cards from. The vectors are
    combined over the jokers placed (``_least``).

    Most hands hold few jokers, and take shorter ways to the same least deadwood: with none or
    one (``few_jokers``, ``one_joker``), only the sets of naturals (a rank held in three suits)
    are tried, and the joker is placed in closed form (left in hand, in one suit's runs, in a
    set of three naturals, or with the two cards of a rank whose suits lose least); with two,
    when every meld needs two naturals (``two_jokers``), the sets of naturals and then at most
    two sets of two naturals and a joker (at ranks whose cards lie in run windows) are tried,
    and the jokers left are placed in closed form. A set that takes only cards outside run
    windows lowers its suits' bases and changes nothing else (``smaller``).

    Suit vectors are memoised by pattern (and by suit when the suits' values differ), and
    built from the vectors of their run clusters (``run_clusters``, ``runs_vector``), memoised
    too: both recur across hands. The memos of patterns and clusters are cleared past
    ``_MEMO_LIMIT``; those of set choices are bounded by their keys (rank, column, jokers
    held).
    """

    __slots__ = (
        "clusters",
        "context",
        "core_memo",
        "pair_gains",
        "rank_memo",
        "runs_memo",
        "suit_keys",
        "suit_memo",
        "suit_values",
        "templates",
    )

    def __init__(self, context: _Context) -> None:
        self.context = context
        values = context.values
        self.suit_values = tuple(_suit_values(values, suit) for suit in range(4))
        symmetric = all(values[suit * 13 : suit * 13 + 13] == values[:13] for suit in range(4))
        self.suit_keys = tuple(0 if symmetric else suit << 26 for suit in range(4))
        """Added to a suit's pattern key: the suit, unless every suit has the same values."""
        self.suit_memo: dict[int, dict[int, _Vector]] = {}
        """Suit vectors by jokers held, then by ``suit << 26 | twice << 13 | present``."""
        self.clusters: dict[tuple[int, int, int], list[int]] = {}
        """Least deadwoods of one run cluster by jokers placed, by ``(suit, present, twice)``."""
        self.runs_memo: dict[tuple[int, int], dict[int, list[int]]] = {}
        """``runs_vector`` by suit and jokers held, then by ``twice << 13 | present``."""
        self.core_memo: dict[int, dict[int, _Vector]] = {}
        """Suit vectors of the cards in run windows only (no core entry), keyed alike."""
        self.pair_gains: tuple[int, ...] | None = (
            tuple(
                -2 * max([values[rank] for rank in _bits(ranks)], default=0)
                for ranks in range(1 << _SUIT_BITS)
            )
            if symmetric
            else None
        )
        """When every suit has the same values: by rank mask, minus twice the value of its
        highest-valued rank (what a set of two of those cards with a joker saves)."""
        self.rank_memo: dict[int, tuple[_SetChoice, ...]] = {}
        """``rank_options`` by the rank's column of the hand (see ``deadwood``)."""
        self.templates: dict[tuple[int, int, tuple[int, ...]], tuple[_SetChoice, ...]] = {}
        """``rank_template`` by column, jokers and the values of the rank's cards."""

    def suit_vector(self, key: int, jokers: int) -> _Vector:
        """The vector of a suit pattern, memoised; built from the vector of its cards in run
        windows (memoised too, so a pattern that differs only in cards outside them is quick)."""
        present = key & _SUIT_MASK
        twice = key >> 13 & _SUIT_MASK
        suit = key >> 26
        tables = self.context.tables
        clusters = tables.clusters.get(jokers << _SUIT_BITS | present)
        if clusters is None:
            clusters = tables.clusters_of(present, jokers)
        core = 0
        for cluster in clusters:
            core |= cluster
        core_memo = self.core_memo.get(jokers)
        if core_memo is None:
            core_memo = self.core_memo[jokers] = {}
        core_key = suit << 26 | (twice & core) << 13 | present & core
        found = core_memo.get(core_key)
        if found is None:
            absolute = [0, *(_INFINITY,) * jokers]
            for cluster in clusters:
                absolute = _convolve(
                    absolute,
                    self.cluster_vector(suit, present & cluster, twice & cluster, jokers),
                )
            if len(core_memo) > _MEMO_LIMIT:
                core_memo.clear()
            found = core_memo[core_key] = _vector(absolute)
        values = self.suit_values[suit]
        rest = present & ~core
        memo = self.suit_memo[jokers]
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        vector = memo[key] = (found[0] + values[rest] + values[twice & rest], *found[1:], core)
        return vector

    def cluster_vector(self, suit: int, present: int, twice: int, jokers: int) -> list[int]:
        """Least deadwoods of a run cluster by jokers placed (0 to ``jokers``), memoised."""
        key = (suit, present, twice)
        found = self.clusters.get(key)
        if found is not None and len(found) > jokers:
            return found[: jokers + 1]
        memo = self.runs_memo.get((suit, jokers))
        if memo is None or len(memo) > _MEMO_LIMIT:
            memo = self.runs_memo[suit, jokers] = {}
        found = self.runs_vector(suit, present, twice, jokers, memo)
        if len(self.clusters) > _MEMO_LIMIT:
            self.clusters.clear()
        self.clusters[key] = found
        return found

    def runs_vector(
        self, suit: int, present: int, twice: int, jokers: int, memo: dict[int, list[int]]
    ) -> list[int]:
        """Least deadwoods of a suit's rank masks in runs only, by jokers placed (exactly 0 to
        ``jokers``; ``_INFINITY`` where impossible), memoised in ``memo`` (one per suit and
        joker count).

        The lowest card is left over (one copy), or goes into a run with some higher cards of
        the suit; a run of naturals with ``gaps`` to fill and ``room`` for more jokers takes
        any number of jokers from ``gaps`` to ``gaps + room``.
        """
        key = present | twice << _SUIT_BITS
        found = memo.get(key)
        if found is not None:
            return found
        if not present:
            found = memo[key] = [0, *(_INFINITY,) * jokers]
            return found
        low = present & -present
        value = self.context.values[suit * _SUIT_BITS + low.bit_length() - 1]
        if twice & low:
            child = self.runs_vector(suit, present, twice ^ low, jokers, memo)
        else:
            child = self.runs_vector(suit, present ^ low, twice, jokers, memo)
        found = [least + value for least in child]
        for faces, gaps, room in self.context.tables.runs_with(0, present, low, jokers):
            single = faces & ~twice
            child = self.runs_vector(suit, present ^ single, twice ^ (faces ^ single), jokers, memo)
            most = gaps + room
            for before, least in enumerate(child):
                if least < _LARGE:
                    for placed in range(before + gaps, min(jokers, before + most) + 1):
                        if least < found[placed]:
                            found[placed] = least
        memo[key] = found
        return found

    def rank_options(self, rank: int, column: int, jokers: int) -> tuple[_SetChoice, ...]:
        """The set choices of one rank, grouped by the cards they take from run windows.

        ``column`` holds, at bit ``13 * suit``, whether the rank is held in the suit; one bit
        up, whether twice; two bits up, whether it lies in a run window of the suit. Each
        option takes some of those cards off the suits' patterns, and its vector is that of
        its sets (gaps to fill, room for more jokers) less the value of the other cards they
        take, which the suits count as deadwood. Built from ``rank_template`` for the suits
        sorted by their column and values, which other ranks and suit orders share.
        """
        values = self.context.values
        ordered = sorted(
            (column >> (13 * suit) & 7, values[suit * 13 + rank], suit) for suit in range(4)
        )
        key = (
            ordered[0][0] | ordered[1][0] << 13 | ordered[2][0] << 26 | ordered[3][0] << 39,
            jokers,
            tuple(worth for _, worth, _ in ordered),
        )
        template = self.templates.get(key)
        if template is None:
            template = self.templates[key] = self.rank_template(*key)
        options: list[_SetChoice] = []
        for deltas, vector, need in template:
            if deltas:
                actual = [0, 0, 0, 0]
                for (_, _, suit), delta in zip(ordered, deltas):
                    actual[suit] = delta << rank
                deltas = tuple(actual)
            options.append((deltas, vector, need))
        return tuple(options)

    def rank_template(
        self, column: int, jokers: int, worth: tuple[int, ...]
    ) -> tuple[_SetChoice, ...]:
        """``rank_options`` for rank 0 whose cards are worth ``worth`` per suit (``column``
        and ``worth`` in the order of ``rank_options``)."""
        min_natural = self.context.tables.min_natural
        counts = [
            (column >> (13 * suit) & 1) + (column >> (13 * suit + 1) & 1) for suit in range(4)
        ]
        core = [column >> (13 * suit + 2) & 1 for suit in range(4)]
        held = sum(1 << suit for suit in range(4) if counts[suit])
        candidates: list[tuple[int, int, int]] = []
        for chosen in range(1, 16):
            size = chosen.bit_count()
            gaps = max(0, 3 - size)
            if chosen & held == chosen and min_natural <= size <= _MAX_SET and gaps <= jokers:
                candidates.append((chosen, gaps, _MAX_SET - size))
        found: dict[tuple[int, ...], list[int]] = {}

        def record(used: list[int], gaps: int, room: int) -> None:
            deltas = [0, 0, 0, 0]
            saved = 0
            for suit, copies in enumerate(used):
                if not copies:
                    continue
                if core[suit]:
                    if copies == 2:
                        deltas[suit] = 1 | 1 << 13
                    else:
                        deltas[suit] = 1 << 13 if counts[suit] == 2 else 1
                else:
                    saved += copies * worth[suit]
            key = tuple(deltas) if any(deltas) else ()
            absolute = found.setdefault(key, [_INFINITY] * (jokers + 1))
            for placed in range(gaps, min(room, jokers) + 1):
                absolute[placed] = min(absolute[placed], -saved)

        def walk(start: int, used: list[int], gaps: int, room: int) -> None:
            record(used, gaps, room)
            for index in range(start, len(candidates)):
                chosen, more_gaps, more_room = candidates[index]
                after = [used[suit] + (chosen >> suit & 1) for suit in range(4)]
                if gaps + more_gaps <= jokers and all(map(operator.le, after, counts)):
                    walk(index, after, gaps + more_gaps, room + more_room)

        walk(0, [0, 0, 0, 0], 0, 0)
        options = []
        for deltas, absolute in found.items():
            need = next(placed for placed, least in enumerate(absolute) if least < _INFINITY)
            options.append((deltas, _vector(absolute), need))
        # The choice that takes no card from a run window first (it needs no joker).
        options.sort(key=lambda option: bool(option[0]))
        return tuple(options)

    def one_joker(
        self, vectors: Sequence[_Vector], keys: Sequence[int], memo: dict[int, _Vector]
    ) -> int:
        """What one joker adds to the sum of the suits' bases when the naturals form no set:
        it is left in hand, placed in the runs of one suit, or completes a set of two cards of
        one rank (held in two suits or more: the two whose suits lose least), which then leave
        their suits' runs. ``vectors`` are the suits' vectors for one joker, ``keys`` their
        pattern keys."""
        best = min(
            self.context.joker_value, vectors[0][1], vectors[1][1], vectors[2][1], vectors[3][1]
        )
        if self.context.tables.min_natural > 2:
            return best
        clubs_key, diamonds_key, hearts_key, spades_key = keys
        clubs = clubs_key & _SUIT_MASK
        diamonds = diamonds_key & _SUIT_MASK
        hearts = hearts_key & _SUIT_MASK
        spades = spades_key & _SUIT_MASK
        pairs = (clubs | diamonds) & (hearts | spades) | clubs & diamonds | hearts & spades
        if not pairs:
            return best
        pair_gains = self.pair_gains
        if pair_gains is not None:
            # Ranks whose cards all lie outside run windows: each card is deadwood in every
            # partition of its suit, so the set saves the value of two of them.
            free = pairs & ~(
                clubs & vectors[0][-1]
                | diamonds & vectors[1][-1]
                | hearts & vectors[2][-1]
                | spades & vectors[3][-1]
            )
            if free:
                pairs ^= free
                if pair_gains[free] < best:
                    best = pair_gains[free]
        values = self.context.values
        while pairs:
            low = pairs & -pairs
            pairs ^= low
            rank = low.bit_length() - 1
            if pair_gains is not None and pair_gains[low] >= best:
                # Taking a card out of a suit lowers its deadwood by the card's value at most,
                # so this set cannot save more than the free cards of its rank would.
                continue
            first = second = _INFINITY
            for suit in range(4):
                key = keys[suit]
                if key >> rank & 1:
                    vector = vectors[suit]
                    if vector[-1] >> rank & 1:  # in a run window: the suit without that card
                        key -= low << _SUIT_BITS if key >> (_SUIT_BITS + rank) & 1 else low
                        change = (memo.get(key) or self.suit_vector(key, 1))[0] - vector[0]
                    else:  # deadwood in every partition of the suit
                        change = -values[13 * suit + rank]
                    if change < first:
                        first, second = change, first
                    elif change < second:
                        second = change
            if first + second < best:
                best = first + second
        return best

    def smaller(
        self,
        vector: _Vector,
        key: int,
        smaller: int,
        jokers: int,
        get: Callable[[int], _Vector | None],
    ) -> _Vector:
        """The vector of the suit pattern ``smaller``, some cards of the pattern ``key`` (whose
        vector is ``vector``) taken out. If none of them lies in a run window, the runs are the
        same and only the base loses their value."""
        taken = key - smaller
        ranks = (taken | taken >> _SUIT_BITS) & _SUIT_MASK
        if ranks & vector[-1]:
            return get(smaller) or self.suit_vector(smaller, jokers)
        values = self.suit_values[key >> 26]
        return (
            vector[0] - values[taken & _SUIT_MASK] - values[taken >> _SUIT_BITS & _SUIT_MASK],
            *vector[1:],
        )

    def few_jokers(
        self,
        vectors: list[_Vector],
        keys: list[int],
        triples: int,
        jokers: int,
        memo: dict[int, _Vector],
    ) -> int:
        """Least deadwood with at most one joker: every choice of sets of naturals (three or
        four of a rank in different suits, at most two sets a rank) at the ranks of ``triples``
        (held in three suits or more), the suits' runs for the cards left, and the joker as in
        ``one_joker``, or in a set of three naturals. ``vectors`` and ``keys`` are the suits'."""
        need = max(3, self.context.tables.min_natural)
        saved = 0
        if not jokers:
            # A rank whose cards all lie outside run windows: they are deadwood in every
            # partition of their suits, so the sets that meld the most value of them are best.
            coupled = 0
            for key, vector in zip(keys, vectors):
                coupled |= key & vector[-1]
            free = triples & ~coupled
            triples &= coupled
            values = self.suit_values
            while free:
                low = free & -free
                free ^= low
                saved_here = 0
                for changed, _ in _rank_sets(keys, low.bit_length() - 1, need, 0):
                    melded = 0
                    for key, smaller in zip(keys, changed):
                        taken = key - smaller
                        if taken:
                            table = values[key >> 26]
                            melded += table[taken & _SUIT_MASK] + table[taken >> _SUIT_BITS]
                    if melded > saved_here:
                        saved_here = melded
                saved += saved_here
        states: list[tuple[list[int], int]] = [(keys, 0)]
        while triples:
            low = triples & -triples
            triples ^= low
            rank = low.bit_length() - 1
            grown = []
            for state in states:
                grown.append(state)
                grown.extend(_rank_sets(state[0], rank, need, state[1]))
            states = grown
        get = memo.get
        best = _INFINITY
        for changed, room in states:
            if changed is keys:
                chosen = vectors
            else:
                chosen = [
                    vector if key == other else self.smaller(vector, other, key, jokers, get)
                    for vector, key, other in zip(vectors, changed, keys)
                ]
            least = chosen[0][0] + chosen[1][0] + chosen[2][0] + chosen[3][0]
            if jokers:
                gain = self.one_joker(chosen, changed, memo)
                least += min(gain, 0) if room else gain
            if least < best:
                best = least
        return best - saved

    def two_jokers(
        self, vectors: list[_Vector], keys: list[int], triples: int, memo: dict[int, _Vector]
    ) -> int:
        """Least deadwood with two jokers when every meld needs two naturals: every choice of
        sets of naturals at the ranks of ``triples`` (held in three suits or more), then of sets
        of two naturals and a joker at the ranks held in two suits or more whose cards lie in
        run windows (at most two such sets); the jokers left go to the suits' runs, to the sets
        with room, to sets of two naturals outside run windows, or stay in hand."""
        get = memo.get
        states: list[tuple[list[int], int]] = [(keys, 0)]
        while triples:
            low = triples & -triples
            triples ^= low
            rank = low.bit_length() - 1
            grown = []
            for state in states:
                grown.append(state)
                grown.extend(_rank_sets(state[0], rank, 3, state[1]))
            states = grown
        joker_value = self.context.joker_value
        values = self.context.values
        best = _INFINITY
        for changed, rooms in states:
            chosen = (
                vectors
                if changed is keys
                else [
                    vector if key == other else self.smaller(vector, other, key, 2, get)
                    for vector, key, other in zip(vectors, changed, keys)
                ]
            )
            clubs, diamonds, hearts, spades = (key & _SUIT_MASK for key in changed)
            pairs = (clubs | diamonds) & (hearts | spades) | clubs & diamonds | hearts & spades
            coupled = pairs & (
                clubs & chosen[0][-1]
                | diamonds & chosen[1][-1]
                | hearts & chosen[2][-1]
                | spades & chosen[3][-1]
            )
            # Ranks whose cards all lie outside run windows: sets of two of them and a joker
            # (or two) save their values and change no suit.
            free_one: list[int] = []
            free_two: list[int] = []
            free = pairs ^ coupled
            while free:
                low = free & -free
                free ^= low
                rank = low.bit_length() - 1
                cards = []
                for suit in range(4):
                    key = changed[suit]
                    if key >> rank & 1:
                        cards.append((suit, -values[13 * suit + rank]))
                        if key >> (_SUIT_BITS + rank) & 1:
                            cards.append((suit, -values[13 * suit + rank]))
                one = min(
                    first[1] + second[1]
                    for first, second in itertools.combinations(cards, 2)
                    if first[0] != second[0]
                )
                two = one
                for four in itertools.combinations(range(len(cards)), 4):
                    for a, b, c, d in ((0, 1, 2, 3), (0, 2, 1, 3), (0, 3, 1, 2)):
                        pair, other = (
                            (cards[four[a]], cards[four[b]]),
                            (cards[four[c]], cards[four[d]]),
                        )
                        if pair[0][0] != pair[1][0] and other[0][0] != other[1][0]:
                            total = pair[0][1] + pair[1][1] + other[0][1] + other[1][1]
                            if total < two:
                                two = total
                free_one.append(one)
                free_two.append(two)
            # Sets of two naturals and a joker at the other ranks: one or two of them.
            leaves: list[tuple[list[int], int]] = [(changed, 0)]
            while coupled:
                low = coupled & -coupled
                coupled ^= low
                rank = low.bit_length() - 1
                # Two sets of the rank need four of its cards.
                double = sum([key >> rank & 1 for key in changed]) >= 2 and (
                    sum([(key >> rank & 1) + (key >> (_SUIT_BITS + rank) & 1) for key in changed])
                    >= 4
                )
                grown = []
                for leaf in leaves:
                    grown.append(leaf)
                    if leaf[1] < 2:
                        grown.extend(_rank_pairs(leaf[0], rank, leaf[1], double))
                leaves = grown
            for after, sets in leaves:
                final = (
                    chosen
                    if after is changed
                    else [
                        vector if key == other else self.smaller(vector, other, key, 2, get)
                        for vector, key, other in zip(chosen, after, changed)
                    ]
                )
                least = final[0][0] + final[1][0] + final[2][0] + final[3][0]
                if sets == 1:  # the other joker: in that set, another, a suit or the hand
                    least += min(0, final[0][1], final[1][1], final[2][1], final[3][1], *free_one)
                elif sets == 0:  # (with two sets, both jokers are placed: nothing to add)
                    singles = [
                        final[0][1],
                        final[1][1],
                        final[2][1],
                        final[3][1],
                        joker_value,
                        *free_one,
                        *(0,) * min(2, rooms),
                    ]
                    least += min(
                        final[0][2],
                        final[1][2],
                        final[2][2],
                        final[3][2],
                        2 * joker_value,
                        *free_two,
                        _two_least(singles),
                    )
                if least < best:
                    best = least
        return best

    def deadwood(self, bits: int, jokers: int) -> int | None:
        """Least deadwood of the hand whose ``_SPLIT_BIT`` sum is ``bits``, or None when its
        set choices are too many to try."""
        present = (bits | bits >> _SECOND_COPY) & _FACES
        twice = bits & bits >> _SECOND_COPY & _FACES
        memo = self.suit_memo.get(jokers)
        if memo is None:
            memo = self.suit_memo[jokers] = {}
        clubs_key, diamonds_key, hearts_key, spades_key = self.suit_keys
        clubs = present & _SUIT_MASK
        clubs_key |= clubs | (twice & _SUIT_MASK) << 13
        diamonds = present >> 13 & _SUIT_MASK
        diamonds_key |= diamonds | (twice >> 13 & _SUIT_MASK) << 13
        hearts = present >> 26 & _SUIT_MASK
        hearts_key |= hearts | (twice >> 26 & _SUIT_MASK) << 13
        spades = present >> 39
        spades_key |= spades | (twice >> 39) << 13
        clubs_vector = memo.get(clubs_key) or self.suit_vector(clubs_key, jokers)
        diamonds_vector = memo.get(diamonds_key) or self.suit_vector(diamonds_key, jokers)
        hearts_vector = memo.get(hearts_key) or self.suit_vector(hearts_key, jokers)
        spades_vector = memo.get(spades_key) or self.suit_vector(spades_key, jokers)
        if jokers == 2 and self.context.tables.min_natural == 2:
            return self.two_jokers(
                [clubs_vector, diamonds_vector, hearts_vector, spades_vector],
                [clubs_key, diamonds_key, hearts_key, spades_key],
                clubs & diamonds & (hearts | spades) | hearts & spades & (clubs | diamonds),
                memo,
            )
        if jokers < 2:
            # At most one joker: the sets of naturals need a rank held in three suits.
            keys = [clubs_key, diamonds_key, hearts_key, spades_key]
            vectors = [clubs_vector, diamonds_vector, hearts_vector, spades_vector]
            triples = clubs & diamonds & (hearts | spades) | hearts & spades & (clubs | diamonds)
            if triples:
                return self.few_jokers(vectors, keys, triples, jokers, memo)
            base = clubs_vector[0] + diamonds_vector[0] + hearts_vector[0] + spades_vector[0]
            return base + self.one_joker(vectors, keys, memo) if jokers else base
        parts = [clubs_vector, diamonds_vector, hearts_vector, spades_vector]
        need = max(self.context.tables.min_natural, 3 - jokers)
        if need == 3:
            ranks = clubs & diamonds & (hearts | spades) | hearts & spades & (clubs | diamonds)
        elif need == 2:
            ranks = (clubs | diamonds) & (hearts | spades) | clubs & diamonds | hearts & spades
        elif need <= 1:
            ranks = clubs | diamonds | hearts | spades
        elif need == 4:
            ranks = clubs & diamonds & hearts & spades
        else:
            ranks = 0
        joker_value = self.context.joker_value
        if not ranks:  # no set: the suits are independent
            return _least(parts, jokers, joker_value)
        # A rank's column: held, held twice, in a run window, at bits 0, 1, 2 of each suit.
        cores = (
            clubs_vector[-1]
            | diamonds_vector[-1] << 13
            | hearts_vector[-1] << 26
            | spades_vector[-1] << 39
        )
        rank_memo = self.rank_memo
        coupled: list[tuple[_SetChoice, ...]] = []
        while ranks:
            low = ranks & -ranks
            ranks ^= low
            rank = low.bit_length() - 1
            column = (
                present >> rank & _SPREAD
                | (twice >> rank & _SPREAD) << 1
                | (cores >> rank & _SPREAD) << 2
            )
            key = column | rank << 42 | jokers << 46
            options = rank_memo.get(key)
            if options is None:
                options = rank_memo[key] = self.rank_options(rank, column, jokers)
            if len(options) == 1:
                parts.append(options[0][1])
            else:
                coupled.append(options)
        if not coupled:
            return _least(parts, jokers, joker_value)
        keys = [clubs_key, diamonds_key, hearts_key, spades_key]
        get = memo.get
        if jokers == 1 and all(option[2] for options in coupled for option in options[1:]):
            # One joker, and every choice that takes cards from runs needs it: either no such
            # choice (the joker goes anywhere), or one (the joker is in its set, so every
            # other part is at its base).
            chosen = parts + [options[0][1] for options in coupled]
            best = _least(chosen, 1, joker_value)
            base = sum(map(_BASE, chosen))
            for options in coupled:
                others = base - options[0][1][0]
                for deltas, vector, _ in options[1:]:
                    least = others + vector[0] + vector[1]
                    for suit, delta in enumerate(deltas):
                        if delta:
                            key = keys[suit] - delta
                            least += (get(key) or self.suit_vector(key, 1))[0] - parts[suit][0]
                    if least < best:
                        best = least
            return best
        # Combinations of one option per rank whose sets need no more jokers than held.
        combinations: list[tuple[int, list[int], list[_Vector]]] = [(0, keys, parts)]
        for options in coupled:
            grown = []
            for spent, changed, chosen in combinations:
                for deltas, vector, need in options:
                    if spent + need <= jokers:
                        grown.append(
                            (
                                spent + need,
                                list(map(operator.sub, changed, deltas)) if deltas else changed,
                                [*chosen, vector],
                            )
                        )
            if len(grown) > _COMBINATION_LIMIT:
                return None
            combinations = grown
        best = _INFINITY
        for _, changed, chosen in combinations:
            if changed is not keys:
                found = list(map(get, changed))
                chosen[:4] = (
                    [vector or self.suit_vector(key, jokers) for vector, key in zip(found, changed)]
                    if None in found
                    else cast("list[_Vector]", found)
                )
            least = _least(chosen, jokers, joker_value)
            if least < best:
                best = least
        return best


def _rank_sets(keys: list[int], rank: int, need: int, rooms: int) -> list[tuple[list[int], int]]:
    """Suit pattern keys after one or two sets of naturals of ``rank`` (``need`` to four cards
    of different suits each) are taken out of ``keys``; and how many sets of fewer than four
    cards (room for a joker) were taken, here or before (``rooms``)."""
    found: list[tuple[list[int], int]] = []
    held = [suit for suit in range(4) if keys[suit] >> rank & 1]
    for size in range(need, len(held) + 1):
        for suits in itertools.combinations(held, size):
            changed = list(keys)
            for suit in suits:
                changed[suit] -= (
                    1 << (_SUIT_BITS + rank)
                    if changed[suit] >> (_SUIT_BITS + rank) & 1
                    else 1 << rank
                )
            more = rooms + (size < _MAX_SET)
            found.append((changed, more))
            # A second set of the rank, from the cards left (two copies allow no third).
            found.extend(_rank_sets(changed, rank, need, more))
    return found


def _rank_pairs(keys: list[int], rank: int, sets: int, double: bool) -> list[tuple[list[int], int]]:
    """Suit pattern keys after sets of two naturals of ``rank`` (different suits; each with a
    joker) are taken out of ``keys``: one, and if ``double`` (four cards of the rank or more)
    and no set was taken before (``sets``), a second one too; with the sets taken in all."""
    found: list[tuple[list[int], int]] = []
    held = [suit for suit in range(4) if keys[suit] >> rank & 1]
    for suits in itertools.combinations(held, 2):
        changed = list(keys)
        for suit in suits:
            changed[suit] -= (
                1 << (_SUIT_BITS + rank) if changed[suit] >> (_SUIT_BITS + rank) & 1 else 1 << rank
            )
        found.append((changed, sets + 1))
        if double and not sets:
            found.extend(_rank_pairs(changed, rank, 1, False))
    return found


def _two_least(gains: Sequence[int]) -> int:
    """The sum of the two least of ``gains`` (at least two)."""
    first = second = _INFINITY
    for gain in gains:
        if gain < second:
            if gain < first:
                first, second = gain, first
            else:
                second = gain
    return first + second


# --- Building melds from the solution -----------------------------------------------------------


def _build_melds(
    choices: Sequence[_Option], hand: _Hand, rules: MeldRules, ace: AceMode
) -> list[Meld]:
    """Concrete melds for chosen face masks: physical cards lowest first, jokers declared."""
    jokers = len(hand.jokers)
    capacity = min(jokers, sum(room for _, _, room in choices))
    extra = capacity - sum(gaps for _, gaps, _ in choices)
    free_cards = {face: list(cards) for face, cards in hand.by_face.items()}
    free_jokers = list(hand.jokers)
    melds: list[Meld] = []
    for faces, gaps, room in choices:
        added = min(extra, room - gaps)
        extra -= added
        joker_count = gaps + added
        natural_faces = list(_bits(faces))
        cards = [free_cards[face].pop(0) for face in natural_faces]
        declared = _joker_faces(natural_faces, joker_count, ace)
        joker_cards = free_jokers[:joker_count]
        del free_jokers[:joker_count]
        melds.append(check_meld([*cards, *joker_cards], rules, [*natural_faces, *declared]))
    return melds


def _joker_faces(natural_faces: Sequence[Face], count: int, ace: AceMode) -> list[Face]:
    """Faces for ``count`` jokers completing ``natural_faces`` into a set or run."""
    if not count:
        return []
    suits = {face // 13 for face in natural_faces}
    ranks = {face % 13 for face in natural_faces}
    if len(natural_faces) > 1 and len(ranks) == 1:
        rank = next(iter(ranks))
        missing = [suit * 13 + rank for suit in range(4) if suit not in suits]
        return missing[:count]
    suit = next(iter(suits))
    local = sum(1 << rank for rank in ranks)
    for window in _window_masks(ace, len(natural_faces) + count):
        if window & local == local:
            return [suit * 13 + rank for rank in _bits(window & ~local)]
    raise AssertionError(f"no run window holds {natural_faces!r}")  # pragma: no cover


def _sorted_melds(melds: Iterable[Meld]) -> tuple[Meld, ...]:
    # Sorted by (cards, faces); melds of one partition share no card, so cards decide.
    return tuple(sorted(melds, key=_CARDS))


_CARDS = operator.attrgetter("cards")


def _by_gaps(item: tuple[tuple[int, int], int]) -> tuple[int, int, int]:
    """Fewest gaps first, then most capacity, then least deadwood."""
    (gaps, capacity), least = item
    return gaps, -capacity, least


# --- Public API ---------------------------------------------------------------------------------


class Solver:
    """``deadwood`` and ``best_melds`` bound to one pair of meld rules and card values.

    The module functions of the same names look up the solver's tables for their ``rules`` and
    ``values`` on every call; a ``Solver`` does it once, which shows when a caller solves many
    hands under the same rules (a bot's rollouts, an analysis of many deals). Its answers are
    the module functions' own.

    >>> from protocol.cards import parse_cards
    >>> gin = tuple(min(face % 13 + 1, 10) for face in range(52)) + (0,)
    >>> solver = Solver(MeldRules(), gin)
    >>> solver.deadwood(parse_cards("7H 8H 9H 9C KS"))
    19
    >>> melds, left = solver.best_melds(parse_cards("7H 8H 9H 9C KS"))
    >>> [str(meld) for meld in melds], left
    (['7H 8H 9H'], 19)

    Raises:
        ValueError: ``values`` is not 53 non-negative values (when made); the hand repeats a
            card (when called).
    """

    __slots__ = ("best_melds", "deadwood", "rules", "values")

    def __init__(self, rules: MeldRules, values: Sequence[int]) -> None:
        context = _context(rules, values)
        self.rules = rules
        self.values: tuple[int, ...] = context.values
        self.deadwood: Callable[[Iterable[Card]], int] = context.deadwood
        """The least deadwood of a hand (``deadwood``)."""
        self.best_melds: Callable[[Iterable[Card]], tuple[tuple[Meld, ...], int]] = (
            context.best_melds
        )
        """The melds of a partition with the least deadwood, and that deadwood
        (``best_melds``)."""

    def __repr__(self) -> str:
        return f"Solver({self.rules!r}, {self.values!r})"


def deadwood(hand: Iterable[Card], rules: MeldRules, values: Sequence[int]) -> int:
    """The least deadwood of ``hand``: the value of the cards left out of the best melds.

    >>> from protocol.cards import parse_cards
    >>> gin = tuple(min(face % 13 + 1, 10) for face in range(52)) + (0,)
    >>> deadwood(parse_cards("7H 8H 9H 9C KS"), MeldRules(), gin)  # 9C and KS left over
    19

    Many calls with the same rules and values go faster through ``Solver(rules,
    values).deadwood``, which skips the look-up of the tables.

    Raises:
        ValueError: ``values`` is not 53 non-negative values, or the hand repeats a card.
    """
    # The usual case, the context used last, is checked inline.
    context = _last if rules is _last_rules and values is _last_values else _context(rules, values)
    return context.deadwood(hand)


def _bind_deadwood(context: _Context) -> Callable[[Iterable[Card]], int]:
    """``deadwood`` for ``context``'s rules and values, with its tables in closure cells.

    A one-deck hand without jokers (every Gin Rummy hand: one bit per card, all below bit 52)
    is solved inline; the rest goes to the helpers below.
    """
    clubs_table, diamonds_table, hearts_table, spades_table = context.run_deadwood
    split_bit = _SPLIT_BIT
    long_sets = context.long_sets

    def deadwood_of(hand: Iterable[Card]) -> int:
        cards = hand if type(hand) is tuple else tuple(hand)
        try:
            mask = sum(map(split_bit, cards))
        except KeyError:  # not a card, or a card of a third deck
            return _deadwood_beyond_two_decks(context, cards)
        if mask > _FACES or mask.bit_count() != len(cards):
            return _deadwood_of_two_decks(context, cards, mask)
        clubs = mask & _SUIT_MASK
        diamonds = mask >> 13 & _SUIT_MASK
        hearts = mask >> 26 & _SUIT_MASK
        spades = mask >> 39
        ranks = clubs & diamonds & (hearts | spades) | hearts & spades & (clubs | diamonds)
        best = (
            clubs_table[clubs]
            + diamonds_table[diamonds]
            + hearts_table[hearts]
            + spades_table[spades]
        )
        if not ranks:  # no rank in three suits: no set, so the suits are independent
            return best
        if ranks & (ranks - 1) or long_sets:
            return _deadwood_with_sets(context, mask, ranks)
        # One rank held in three suits or four: no set, or a set of its cards in three or four
        # suits, each taking the rank off the suits it uses. (Suit-local masks keep the
        # operands small non-negative integers, which CPython handles fastest.)
        keep = _SUIT_MASK ^ ranks
        clubs_left = clubs_table[clubs & keep]
        diamonds_left = diamonds_table[diamonds & keep]
        hearts_left = hearts_table[hearts & keep]
        spades_left = spades_table[spades & keep]
        total = clubs_left + diamonds_left + hearts_left + spades_left
        if ranks & clubs & diamonds & hearts & spades:  # the best of four and three cards
            total += min(
                0,
                clubs_table[clubs] - clubs_left,
                diamonds_table[diamonds] - diamonds_left,
                hearts_table[hearts] - hearts_left,
                spades_table[spades] - spades_left,
            )
        return total if total < best else best

    return deadwood_of


def _deadwood_of_two_decks(context: _Context, cards: tuple[Card, ...], bits: int) -> int:
    """``deadwood`` of a hand of two-deck cards and jokers (``bits``: its ``_SPLIT_BIT`` sum)
    that is not a one-deck hand without jokers."""
    if bits.bit_count() != len(cards):  # a card repeated: the general path says so
        general = _Hand(cards)
        return _general_deadwood(context, general.layers, len(general.jokers))
    present = (bits | bits >> _SECOND_COPY) & _FACES
    jokers = (bits >> _JOKER_BITS).bit_count()
    if not jokers and present.bit_count() == len(cards):  # second-deck cards, no face twice
        return _one_deck_deadwood(context, present)
    compiled = context.compiled if context.compiled_bound else _bind_compiled(context)
    if compiled is not None:
        return compiled(present, bits & bits >> _SECOND_COPY & _FACES, jokers)
    return _python_two_deck_deadwood(context, cards, bits, jokers)


def _bind_compiled(context: _Context) -> Callable[[int, int, int], int] | None:
    """``context.compiled``, bound on the first call (importing numba only then)."""
    context.compiled_bound = True
    rules = context.rules
    if rules.ace is AceMode.AROUND or rules.min_natural < 1:
        return None
    from server.engine import compiled

    if not compiled.AVAILABLE:
        return None
    context.compiled = compiled.bind(
        context.values, rules.ace is AceMode.HIGH_OR_LOW, rules.min_natural
    )
    return context.compiled


def _python_two_deck_deadwood(
    context: _Context, cards: tuple[Card, ...], bits: int, jokers: int
) -> int:
    """``deadwood`` of a two-deck hand with jokers or a face twice, in pure Python (memoised
    suit patterns, ``_Split``), where the compiled search is not available."""
    split = context.split
    if split is None:
        split = context.split = _Split(context)
    least = split.deadwood(bits, jokers)
    if least is not None:
        return least
    general = _Hand(cards)
    return _general_deadwood(context, general.layers, len(general.jokers))


def _deadwood_beyond_two_decks(context: _Context, cards: tuple[Card, ...]) -> int:
    """``deadwood`` of a hand with a card of a third deck or more, or a non-card (for which
    the general path raises)."""
    try:
        mask = sum(map(_CARD_BIT, cards)) & _FACES
    except KeyError:
        mask = -1
    if mask >= 0 and mask.bit_count() == len(cards):  # no face twice, no joker
        return _one_deck_deadwood(context, mask)
    general = _Hand(cards)
    return _general_deadwood(context, general.layers, len(general.jokers))


def _one_deck_deadwood(context: _Context, mask: int) -> int:
    """``deadwood`` of a joker-free face mask (the one-deck path of ``deadwood``)."""
    clubs = mask & _SUIT_MASK
    diamonds = mask >> 13 & _SUIT_MASK
    hearts = mask >> 26 & _SUIT_MASK
    spades = mask >> 39
    ranks = clubs & diamonds & (hearts | spades) | hearts & spades & (clubs | diamonds)
    clubs_table, diamonds_table, hearts_table, spades_table = context.run_deadwood
    best = (
        clubs_table[clubs] + diamonds_table[diamonds] + hearts_table[hearts] + spades_table[spades]
    )
    if not ranks:
        return best
    if ranks & (ranks - 1):
        return _deadwood_with_sets(context, mask, ranks)
    return _set_choice(context, mask, ranks.bit_length() - 1, best)[0]


def _set_choice(context: _Context, mask: int, rank: int, least: int) -> tuple[int, int]:
    """A one-deck, joker-free face mask with one rank held in three suits or more: runs suit
    by suit (``run_deadwood``) with each set of that rank, or none (deadwood ``least``).

    Returns the least deadwood and the set that gives it: 0 for none, -1 when several choices
    give it.
    """
    clubs_table, diamonds_table, hearts_table, spades_table = context.run_deadwood
    chosen = 0
    tie = False
    for faces in context.tables.sets_of[mask & _SPREAD << rank]:
        rest = mask ^ faces
        total = (
            clubs_table[rest & _SUIT_MASK]
            + diamonds_table[rest >> 13 & _SUIT_MASK]
            + hearts_table[rest >> 26 & _SUIT_MASK]
            + spades_table[rest >> 39]
        )
        if total < least:
            least, chosen, tie = total, faces, False
        elif total == least:
            tie = True
    return least, -1 if tie else chosen


def _deadwood_with_sets(context: _Context, mask: int, ranks: int) -> int:
    """Least deadwood of a one-deck, joker-free face mask with the ranks in ``ranks`` held in
    three suits or more (``_least_set_choice``)."""
    return _least_set_choice(context, mask, ranks)[0]


def _least_set_choice(
    context: _Context, mask: int, ranks: int
) -> tuple[int, tuple[int, ...], bool]:
    """The least deadwood of a one-deck, joker-free face mask with the ranks in ``ranks`` held
    in three suits or more, the choice of sets that gives it and whether another choice ties.

    One deck holds at most one set of a rank, so every partition is: for each such rank, one
    of its sets or none; the cards left go to runs, suit by suit (``run_deadwood``).
    """
    clubs_table, diamonds_table, hearts_table, spades_table = context.run_deadwood
    sets_of = context.tables.sets_of
    choices = [(0, *sets_of[mask & _SPREAD << rank]) for rank in _bits(ranks)]
    best = -1
    tie = False
    best_choice: tuple[int, ...] = ()
    for chosen in itertools.product(*choices):
        rest = mask
        for faces in chosen:
            rest ^= faces
        total = (
            clubs_table[rest & _SUIT_MASK]
            + diamonds_table[rest >> 13 & _SUIT_MASK]
            + hearts_table[rest >> 26 & _SUIT_MASK]
            + spades_table[rest >> 39]
        )
        if best < 0 or total < best:
            best, best_choice, tie = total, chosen, False
        elif total == best:
            tie = True
    return best, best_choice, tie


def _scan_best_melds(context: _Context, mask: int) -> tuple[tuple[Meld, ...], int]:
    """``best_melds`` of a one-deck, joker-free face mask by the tie rule's scan itself."""
    total = _mask_value(mask, context.values)
    rest = context.tables.core(mask)
    best = context.melded(rest) if rest else 0
    least = total - best
    melds: list[Meld] = []
    while rest:
        low = rest & -rest
        for meld, value in context.by_lowest[low.bit_length() - 1]:
            left = rest ^ meld
            if meld & rest == meld and value + (context.melded(left) if left else 0) == best:
                melds.append(context.meld(meld))
                best -= value
                rest = left
                break
        else:
            rest ^= low
    return _sorted_melds(melds), least


def best_melds(
    hand: Iterable[Card], rules: MeldRules, values: Sequence[int]
) -> tuple[tuple[Meld, ...], int]:
    """The melds of a partition of ``hand`` with the least deadwood, and that deadwood.

    Each meld is a ``Meld`` as ``check_meld`` builds it (canonical order, jokers declared); the
    melds are sorted by ``(cards, faces)``. Ties go by the rule in the module docstring.

    Many calls with the same rules and values go faster through ``Solver(rules,
    values).best_melds``, which skips the look-up of the tables.

    Raises:
        ValueError: ``values`` is not 53 non-negative values, or the hand repeats a card.
    """
    context = _last if rules is _last_rules and values is _last_values else _context(rules, values)
    return context.best_melds(hand)


def _bind_best_melds(
    context: _Context,
) -> Callable[[Iterable[Card]], tuple[tuple[Meld, ...], int]]:
    """``best_melds`` for ``context``'s rules and values, with its tables in closure cells.

    A one-deck hand without jokers whose sets are decided by one rank held in exactly three
    suits (or no rank held in three) is solved inline; the rest goes to ``_best_melds_of``.
    """
    clubs_table, diamonds_table, hearts_table, spades_table = context.run_deadwood
    by_clubs, by_diamonds, by_hearts, by_spades = context.run_melds
    suit_melds = context.suit_melds
    known_meld = context.melds.get
    split_bit = _SPLIT_BIT
    long_sets = context.long_sets

    def best_melds_of(hand: Iterable[Card]) -> tuple[tuple[Meld, ...], int]:
        cards = hand if type(hand) is tuple else tuple(hand)
        try:
            mask = sum(map(split_bit, cards))
        except KeyError:  # not a card, or a card of a third deck
            return _best_melds_of(context, cards)
        if mask > _FACES or mask.bit_count() != len(cards):
            return _best_melds_of(context, cards)
        clubs = mask & _SUIT_MASK
        diamonds = mask >> 13 & _SUIT_MASK
        hearts = mask >> 26 & _SUIT_MASK
        spades = mask >> 39
        ranks = clubs & diamonds & (hearts | spades) | hearts & spades & (clubs | diamonds)
        least = (
            clubs_table[clubs]
            + diamonds_table[diamonds]
            + hearts_table[hearts]
            + spades_table[spades]
        )
        chosen = None
        if ranks:
            if ranks & (ranks - 1) or ranks & clubs & diamonds & hearts & spades or long_sets:
                return _best_melds_with_sets(context, mask, ranks)
            # One rank held in exactly three suits. Its set is in every optimal partition when
            # it gives less deadwood than no set, in none when more; so the tie rule's scan
            # picks that choice and, suit by suit, the runs ``suit_melds`` picks for the rest.
            # When the two tie, the scan runs on the whole hand.
            keep = _SUIT_MASK ^ ranks
            total = (
                clubs_table[clubs & keep]
                + diamonds_table[diamonds & keep]
                + hearts_table[hearts & keep]
                + spades_table[spades & keep]
            )
            if total == least:
                return _scan_best_melds(context, mask)
            if total < least:
                least = total
                faces = mask & ranks * _SPREAD
                chosen = known_meld(faces) or context.meld(faces)
                clubs &= keep
                diamonds &= keep
                hearts &= keep
                spades &= keep
        clubs_runs = by_clubs[clubs]
        if clubs_runs is None:
            clubs_runs = suit_melds(0, clubs)
        diamonds_runs = by_diamonds[diamonds]
        if diamonds_runs is None:
            diamonds_runs = suit_melds(1, diamonds)
        hearts_runs = by_hearts[hearts]
        if hearts_runs is None:
            hearts_runs = suit_melds(2, hearts)
        spades_runs = by_spades[spades]
        if spades_runs is None:
            spades_runs = suit_melds(3, spades)
        # Runs of a lower suit hold lower cards, so the concatenation is sorted.
        if chosen is None:
            return clubs_runs + diamonds_runs + hearts_runs + spades_runs, least
        # The set's first card is its clubs card, or its diamonds card when clubs lacks the
        # rank: it goes after the runs of lower suits and before those of higher suits; when
        # its suit has runs too, a sort places it among them.
        if mask & ranks:  # the hand's clubs hold the rank
            if not clubs_runs:
                return (chosen,) + diamonds_runs + hearts_runs + spades_runs, least
        elif not diamonds_runs:
            return clubs_runs + (chosen,) + hearts_runs + spades_runs, least
        found = (chosen, *clubs_runs, *diamonds_runs, *hearts_runs, *spades_runs)
        return tuple(sorted(found, key=_CARDS)), least

    return best_melds_of


def _best_melds_with_sets(context: _Context, mask: int, ranks: int) -> tuple[tuple[Meld, ...], int]:
    """``best_melds`` of a one-deck, joker-free face mask with the ranks in ``ranks`` held in
    three suits or more (as ``_deadwood_with_sets``).

    When one choice of sets gives the least deadwood, every optimal partition holds those sets,
    so the tie rule's scan picks them and, suit by suit, the runs ``suit_melds`` picks for the
    rest. When several tie, the scan runs on the whole hand.
    """
    best, best_choice, tie = _least_set_choice(context, mask, ranks)
    if tie:
        return _scan_best_melds(context, mask)
    rest = mask
    found = []
    for faces in best_choice:
        if faces:
            rest ^= faces
            found.append(context.meld(faces))
    for suit in range(4):
        found.extend(context.runs(suit, rest >> (suit * _SUIT_BITS) & _SUIT_MASK))
    return tuple(sorted(found, key=_CARDS)), best


def _best_melds_of(context: _Context, cards: tuple[Card, ...]) -> tuple[tuple[Meld, ...], int]:
    """``best_melds`` of the hands ``_bind_best_melds`` does not solve inline."""
    try:
        flagged = sum(map(_CARD_BIT, cards))
    except KeyError:  # not a card: the general path says which
        flagged = 0
    mask = flagged & _FACES
    if mask.bit_count() == len(cards):
        clubs = mask & _SUIT_MASK
        diamonds = mask >> 13 & _SUIT_MASK
        hearts = mask >> 26 & _SUIT_MASK
        spades = mask >> 39
        ranks = clubs & diamonds & (hearts | spades) | hearts & spades & (clubs | diamonds)
        clubs_table, diamonds_table, hearts_table, spades_table = context.run_deadwood
        least = (
            clubs_table[clubs]
            + diamonds_table[diamonds]
            + hearts_table[hearts]
            + spades_table[spades]
        )
        # Suits are independent unless a rank is held in three suits. With one such rank whose
        # sets (or no set) give a unique optimum, every optimal partition holds that choice, so
        # the tie rule's scan picks it and, suit by suit, the runs ``suit_melds`` picks for the
        # rest. Otherwise (ties between set choices, or several such ranks: chosen -1) the scan
        # runs on the whole hand.
        chosen = 0
        if ranks:
            if ranks & (ranks - 1):
                chosen = -1
            else:
                least, chosen = _set_choice(context, mask, ranks.bit_length() - 1, least)
                if chosen > 0:
                    rest = mask ^ chosen
                    clubs = rest & _SUIT_MASK
                    diamonds = rest >> 13 & _SUIT_MASK
                    hearts = rest >> 26 & _SUIT_MASK
                    spades = rest >> 39
        if chosen < 0:
            found, least = _scan_best_melds(context, mask)
        else:
            by_clubs, by_diamonds, by_hearts, by_spades = context.run_melds
            # Runs of a lower suit hold lower cards, so the concatenation is sorted.
            clubs_runs = by_clubs[clubs]
            if clubs_runs is None:
                clubs_runs = context.suit_melds(0, clubs)
            diamonds_runs = by_diamonds[diamonds]
            if diamonds_runs is None:
                diamonds_runs = context.suit_melds(1, diamonds)
            hearts_runs = by_hearts[hearts]
            if hearts_runs is None:
                hearts_runs = context.suit_melds(2, hearts)
            spades_runs = by_spades[spades]
            if spades_runs is None:
                spades_runs = context.suit_melds(3, spades)
            found = clubs_runs + diamonds_runs + hearts_runs + spades_runs
            if chosen:
                found = tuple(sorted((*found, context.meld(chosen)), key=_CARDS))
        if flagged >= _COPY_FLAG:  # copies other than the first: the melds hold those cards
            card_of = {card & FACE_MASK: card for card in cards}
            found = _sorted_melds(
                Meld(meld.kind, tuple(card_of[face] for face in meld.faces), meld.faces)
                for meld in found
            )
        return found, least
    general = _Hand(cards)
    search, layers, base = _general_search(context, general)
    choices = search.choices(layers)
    melds = _build_melds(choices, general, context.rules, context.tables.ace)
    return _sorted_melds(melds), base + search.solve(layers, search.jokers, 0)


def discard_deadwoods(
    hand: Iterable[Card], rules: MeldRules, values: Sequence[int]
) -> dict[Card, int]:
    """For each card of ``hand`` (in card order), the least deadwood left after discarding it.

    Raises:
        ValueError: ``values`` is not 53 non-negative values, or the hand repeats a card.
    """
    context = _context(rules, values)
    cards = tuple(sorted(hand))
    fast = _fast_mask(cards, context.values)
    if fast is not None:
        mask, total = fast
        tables = context.tables
        core = tables.core(mask)
        least = total - context.melded(core) if core else total
        result: dict[Card, int] = {}
        for card in cards:
            face = card & FACE_MASK
            bit = 1 << face
            if core & bit:
                rest = tables.core(mask ^ bit)
                after = total - context.values[face]
                result[card] = after - context.melded(rest) if rest else after
            else:
                result[card] = least - context.values[face]
        return result
    general = _Hand(cards)
    by_face: dict[Face, int] = {}
    searches: dict[int, _Search] = {}
    for face in {card_face(card) for card in cards}:
        jokers = len(general.jokers) - (face == JOKER)
        search = searches.get(jokers)
        if search is None:
            search = searches[jokers] = _Search(context, jokers)
        layers = general.layers if face == JOKER else _remove(general.layers, 1 << face)
        by_face[face] = search.solve(layers, jokers, 0)
    return {card: by_face[card_face(card)] for card in cards}


def best_discard(
    hand: Iterable[Card],
    rules: MeldRules,
    values: Sequence[int],
    forbidden: frozenset[Card] = frozenset(),
) -> tuple[Card, int]:
    """The discard that leaves the least deadwood, among cards not in ``forbidden``; and that
    deadwood (the exhaustive minimum over the allowed discards). Ties go to the lowest card.

    >>> from protocol.cards import format_card, parse_cards
    >>> gin = tuple(min(face % 13 + 1, 10) for face in range(52)) + (0,)
    >>> hand = parse_cards("6S 3C 4H 2H 5H 4C 6C 3S 6H 5S 5C")
    >>> card, left = best_discard(hand, MeldRules(), gin)
    >>> format_card(card), left
    ('6S', 10)

    Raises:
        ValueError: no card may be discarded, ``values`` is not 53 non-negative values, or the
            hand repeats a card.
    """
    best: tuple[int, Card] | None = None
    for card, left in discard_deadwoods(hand, rules, values).items():
        if card not in forbidden and (best is None or left < best[0]):
            best = (left, card)
    if best is None:
        raise ValueError("no card of the hand may be discarded")
    return best[1], best[0]


def layoff_targets(
    hand: Iterable[Card], table_melds: Sequence[Meld], rules: MeldRules
) -> list[tuple[Card, int, Face]]:
    """Every single lay-off legal now: ``(card, index of the table meld, face it stands for)``.

    A natural card stands for its own face; a joker for any face the meld accepts. Sorted.
    """
    cards = tuple(hand)
    targets: list[tuple[Card, int, Face]] = []
    for index, meld in enumerate(table_melds):
        faces = layoff_faces(meld, rules)
        if not faces:
            continue
        for card in cards:
            if is_joker(card):
                targets.extend((card, index, face) for face in faces)
            elif card_face(card) in faces:
                targets.append((card, index, card_face(card)))
    targets.sort()
    return targets


def best_layoff_deadwood(
    hand: Iterable[Card], melds: Sequence[Meld], rules: MeldRules, values: Sequence[int]
) -> tuple[int, tuple[Card, ...]]:
    """The defender's least deadwood when he may lay off on ``melds``; and the cards laid off.

    The defender forms his own melds from ``hand`` and lays off any of the cards left over on
    the table melds, one after another (so 8H then 9H on 5H-6H-7H). A card in one of his own
    melds is not laid off. Every partition of the hand is considered, so this is exact but
    slower than ``deadwood``; it is meant for the end of a Gin Rummy hand. The cards laid off
    are sorted; among equal deadwoods the first found in a fixed order is returned.

    Raises:
        ValueError: ``values`` is not 53 non-negative values, or the hand repeats a card.
    """
    context = _context(rules, values)
    general = _Hand(tuple(hand))
    table = tuple(melds)
    reach = _layoff_reach(table, rules)
    joker_reach = bool(reach & 1 << JOKER)
    search = _Search(context, len(general.jokers))
    memo: dict[_State, dict[_Leftover, int]] = {}
    leftovers = _leftovers(search, general.layers, search.jokers, 0, reach, memo)
    best: tuple[int, tuple[Card, ...]] | None = None
    cache: dict[tuple[tuple[Card, ...], tuple[Meld, ...]], tuple[int, tuple[Card, ...]]] = {}
    for (leftover, low_jokers, high_jokers), unreachable in sorted(
        leftovers.items(), key=lambda item: (item[1], item[0])
    ):
        free_cards = {face: list(cards) for face, cards in general.by_face.items()}
        naturals = [free_cards[face].pop() for layer in leftover for face in _bits(layer)]
        natural_value = unreachable + sum(context.values[card_face(card)] for card in naturals)
        for joker_count in range(low_jokers, high_jokers + 1):
            joker_value = context.joker_value * joker_count
            floor = unreachable + (0 if joker_reach else joker_value)
            if best is not None and floor >= best[0]:
                continue
            jokers = general.jokers[len(general.jokers) - joker_count :] if joker_reach else []
            candidates = tuple(sorted([*naturals, *jokers]))
            saved, laid = _best_layoffs(candidates, table, rules, context.values, cache)
            left = natural_value + joker_value - saved
            if best is None or left < best[0]:
                best = (left, tuple(sorted(laid)))
    assert best is not None  # leaving every card over is always a partition
    return best


def _layoff_reach(melds: Sequence[Meld], rules: MeldRules) -> int:
    """Faces (bit 52 for jokers) that could ever be laid off on ``melds`` by chaining."""
    reach = 0
    for meld in melds:
        faces = layoff_faces(meld, rules)
        if not faces:
            continue
        reach |= 1 << JOKER
        if meld.kind is MeldKind.SET:
            for face in faces:
                reach |= 1 << face
        else:
            reach |= _SUIT_MASK << (meld.faces[0] // 13 * 13)
    return reach


_Leftover = tuple[tuple[int, ...], int, int]
"""Cards left over that might be laid off (as layers), least and most jokers left over."""


def _leftovers(
    search: _Search,
    layers: tuple[int, ...],
    budget: int,
    capacity: int,
    reach: int,
    memo: dict[_State, dict[_Leftover, int]],
) -> dict[_Leftover, int]:
    """Every way to form own melds from this state on, by what it leaves that might be laid
    off; for each, the least value of the cards left over that cannot be laid off.
    """
    key = (layers, budget, capacity)
    found = memo.get(key)
    if found is not None:
        return found
    jokers = search.jokers
    if not layers[0]:
        return {((0,), max(0, jokers - capacity), budget): 0}
    low = layers[0] & -layers[0]
    result: dict[_Leftover, int] = {}
    child = _leftovers(search, _remove(layers, low), budget, capacity, reach, memo)
    if reach & low:
        for (leftover, low_jokers, high_jokers), unreachable in child.items():
            _keep_least(result, (_add(leftover, low), low_jokers, high_jokers), unreachable)
    else:
        value = search.context.values[low.bit_length() - 1]
        for leftover_key, unreachable in child.items():
            _keep_least(result, leftover_key, unreachable + value)
    for faces, gaps, room in search.options(layers, budget):
        after = (_remove(layers, faces), budget - gaps, min(jokers, capacity + room))
        for leftover_key, unreachable in _leftovers(search, *after, reach, memo).items():
            _keep_least(result, leftover_key, unreachable)
    memo[key] = result
    return result


def _keep_least(result: dict[_Leftover, int], key: _Leftover, value: int) -> None:
    known = result.get(key)
    if known is None or value < known:
        result[key] = value


def _add(layers: tuple[int, ...], bit: int) -> tuple[int, ...]:
    """``layers`` with one more copy of the face ``bit``."""
    result = list(layers)
    for index, layer in enumerate(result):
        if not layer & bit:
            result[index] = layer | bit
            return tuple(result)
    result.append(bit)
    return tuple(result)


def _best_layoffs(
    cards: tuple[Card, ...],
    melds: tuple[Meld, ...],
    rules: MeldRules,
    values: Sequence[int],
    cache: dict[tuple[tuple[Card, ...], tuple[Meld, ...]], tuple[int, tuple[Card, ...]]],
) -> tuple[int, tuple[Card, ...]]:
    """Most value of ``cards`` that can be laid off on ``melds`` in some order; those cards."""
    key = (cards, melds)
    found = cache.get(key)
    if found is not None:
        return found
    best: tuple[int, tuple[Card, ...]] = (0, ())
    tried: set[Face] = set()
    for index, card in enumerate(cards):
        face = card_face(card)
        if face in tried:
            continue
        tried.add(face)
        rest = cards[:index] + cards[index + 1 :]
        for meld_index, meld in enumerate(melds):
            for target in layoff_faces(meld, rules):
                if face != JOKER and target != face:
                    continue
                extended = with_layoff(meld, card, target, rules)
                table = (*melds[:meld_index], extended, *melds[meld_index + 1 :])
                saved, laid = _best_layoffs(rest, table, rules, values, cache)
                saved += values[face]
                if saved > best[0]:
                    best = (saved, (card, *laid))
    cache[key] = best
    return best
