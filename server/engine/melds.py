"""Melds: sets and runs, joker declarations, validation, enumeration and lay-off targets.

Theory of operation. A meld is a tuple of physical cards and, parallel to it, the *faces* they
stand for: a natural card stands for its own face, a joker for the face declared when it was put
down. Validation therefore works on faces only, plus one rule on cards (``min_natural``).

Runs live in a *position* space that encodes the ace option once:

- ``low``: positions 1..13 (ace is 1 only);
- ``high_or_low``: positions 1..14, where 14 is the ace above the king (never both ends);
- ``around``: positions 1..13 taken cyclically, so K-A-2 is allowed.

A run is ``(suit, first position, length)``; a set is a rank and a set of distinct suits. Every
function here is pure and sans-IO.
"""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from protocol.cards import (
    FACE_MASK,
    JOKER,
    Card,
    Face,
    card_face,
    face_rank,
    face_suit,
    format_card,
    format_face,
    is_joker,
    make_face,
)
from server.engine.errors import InvalidMeldError

__all__ = [
    "AceMode",
    "Meld",
    "MeldKind",
    "MeldRules",
    "check_meld",
    "enumerate_melds",
    "layoff_faces",
    "meld_declarations",
    "with_layoff",
    "with_swap",
]

MAX_SET = 4
MAX_RUN = 13


class AceMode(enum.StrEnum):
    """Where an ace may sit in a run."""

    LOW = "low"
    HIGH_OR_LOW = "high_or_low"
    AROUND = "around"


class MeldKind(enum.StrEnum):
    """A set (same rank) or a run (same suit, consecutive)."""

    SET = "set"
    RUN = "run"


@dataclass(frozen=True, slots=True)
class MeldRules:
    """The part of a variant's rules that decides what a meld is."""

    ace: AceMode = AceMode.LOW
    min_natural: int = 1
    """Least number of natural (non-joker) cards in any meld."""


@dataclass(frozen=True, slots=True)
class Meld:
    """A valid meld: cards in canonical order (runs ascending, sets by suit) and their faces."""

    kind: MeldKind
    cards: tuple[Card, ...]
    faces: tuple[Face, ...]

    def __str__(self) -> str:
        return " ".join(_format_placed(card, face) for card, face in zip(self.cards, self.faces))

    @property
    def naturals(self) -> int:
        """How many natural cards the meld holds."""
        return sum(1 for card in self.cards if not is_joker(card))


def _format_placed(card: Card, face: Face) -> str:
    return f"{format_card(card)}={format_face(face)}" if is_joker(card) else format_card(card)


def _position_count(ace: AceMode) -> int:
    return 14 if ace is AceMode.HIGH_OR_LOW else 13


def _position_rank(position: int) -> int:
    return (position - 1) % 13 + 1


def _run_windows(ace: AceMode, length: int) -> Iterable[int]:
    """First positions of every run of ``length`` cards allowed by ``ace``."""
    if ace is AceMode.AROUND:
        return range(1, 14) if length < 13 else range(1, 2)
    return range(1, _position_count(ace) - length + 2)


def _run_faces(suit: int, first: int, length: int) -> tuple[Face, ...]:
    return tuple(make_face(_position_rank(first + i), suit) for i in range(length))


_RANK_FACES: tuple[tuple[Face, ...], ...] = tuple(
    tuple(make_face(rank, suit) for suit in range(4)) if rank else () for rank in range(14)
)
"""The four faces of each rank (index 1..13), in suit order."""
_SUIT_POSITIONS: tuple[tuple[Face, ...], ...] = tuple(
    tuple(make_face(_position_rank(position), suit) for position in range(14 + MAX_RUN))
    for suit in range(4)
)
"""The face at each run position of each suit (positions past 13 wrap around)."""


def _candidate_windows(
    held: Iterable[Face], ace: AceMode, max_jokers: int, min_natural: int
) -> Iterator[tuple[Face, ...]]:
    """Runs (faces in order) with at least ``min_natural`` held faces and at most
    ``max_jokers`` gaps: grown from each start until the gaps run out."""
    held_set = set(held)
    positions = _position_count(ace)
    last = positions if ace is not AceMode.AROUND else positions + MAX_RUN - 1
    per_suit = [0] * 4
    for face in held_set:
        per_suit[face_suit(face)] += 1
    for suit in range(4):
        if per_suit[suit] < max(min_natural, 3 - max_jokers):
            continue
        at = _SUIT_POSITIONS[suit]
        for first in range(1, positions + 1):
            if not max_jokers and at[first] not in held_set:
                continue  # without jokers a run starts on a held card
            faces: list[Face] = []
            present = missing = 0
            for position in range(first, min(first + MAX_RUN, last + 1)):
                face = at[position]
                if face in held_set:
                    present += 1
                else:
                    missing += 1
                    if missing > max_jokers:
                        break
                faces.append(face)
                if len(faces) >= 3 and present >= min_natural:
                    yield tuple(faces)


def _check_naturals(cards: Sequence[Card], faces: Sequence[Face], rules: MeldRules) -> None:
    for card, face in zip(cards, faces):
        if face == JOKER:
            raise InvalidMeldError(
                f"a joker must stand for a card: {format_card(card)}", "rules/undeclared_joker"
            )
        if not is_joker(card) and card_face(card) != face:
            raise InvalidMeldError(
                f"{format_card(card)} cannot stand for {format_face(face)}", "rules/invalid_meld"
            )
    naturals = sum(1 for card in cards if not is_joker(card))
    if naturals < max(rules.min_natural, 1):
        raise InvalidMeldError(
            f"a meld needs at least {max(rules.min_natural, 1)} natural cards, got {naturals}",
            "rules/min_natural",
        )


def _order_run(faces: Sequence[Face], ace: AceMode) -> list[int] | None:
    """Positions for the faces of a would-be run in ascending order, or ``None``."""
    suit = face_suit(faces[0])
    if any(face_suit(face) != suit for face in faces) or len(set(faces)) != len(faces):
        return None
    ranks = sorted(face_rank(face) for face in faces)
    count = len(ranks)
    if ranks[-1] - ranks[0] == count - 1:
        return list(range(ranks[0], ranks[0] + count))
    if ace is AceMode.LOW or ranks[0] != 1:
        if ace is not AceMode.AROUND:
            return None
    elif ranks[1] == 15 - count and ranks[-1] == 13:
        # The ace sits above the king: Q-K-A and longer.
        return list(range(15 - count, 15))
    if ace is AceMode.AROUND:
        present = set(ranks)
        for first in ranks:
            if all((first + step - 1) % 13 + 1 in present for step in range(count)):
                return list(range(first, first + count))
    return None


def check_meld(
    cards: Sequence[Card], rules: MeldRules, faces: Sequence[Face] | None = None
) -> Meld:
    """Validate ``cards`` as a meld and return it in canonical order.

    ``faces`` declares what each card stands for (parallel to ``cards``); it may be omitted when
    the meld has no jokers, or to let the engine choose the first valid declaration.

    >>> from protocol.cards import parse_cards
    >>> str(check_meld(parse_cards("9H 7H 8H"), MeldRules()))
    '7H 8H 9H'

    Raises:
        InvalidMeldError: the cards (with those faces) are not a set or run under ``rules``.
    """
    if faces is None:
        options = meld_declarations(cards, rules)
        if not options:
            raise InvalidMeldError(
                f"not a meld: {' '.join(format_card(card) for card in cards)}", "rules/invalid_meld"
            )
        return options[0]
    if len(faces) != len(cards):
        raise InvalidMeldError("one declared face is needed per card", "rules/invalid_meld")
    if len(set(cards)) != len(cards):
        raise InvalidMeldError("a card appears twice in the meld", "rules/invalid_meld")
    if len(cards) < 3:
        raise InvalidMeldError(f"a meld has at least 3 cards, got {len(cards)}", "rules/too_short")
    _check_naturals(cards, faces, rules)
    pairs = list(zip(cards, faces))
    if len({face_rank(face) for face in faces}) == 1:
        suits = [face_suit(face) for face in faces]
        if len(set(suits)) != len(suits):
            raise InvalidMeldError(
                "a set may not hold two cards of one suit: "
                + " ".join(_format_placed(c, f) for c, f in pairs),
                "rules/duplicate_suit",
            )
        if len(cards) > MAX_SET:
            raise InvalidMeldError("a set has at most 4 cards", "rules/invalid_meld")
        pairs.sort(key=lambda pair: face_suit(pair[1]))
        return Meld(MeldKind.SET, tuple(c for c, _ in pairs), tuple(f for _, f in pairs))
    if len(cards) > MAX_RUN:
        raise InvalidMeldError("a run has at most 13 cards", "rules/invalid_meld")
    positions = _order_run(faces, rules.ace)
    if positions is None:
        raise InvalidMeldError(
            f"not a set or a run with ace={rules.ace.value}: "
            + " ".join(_format_placed(c, f) for c, f in pairs),
            "rules/invalid_meld",
        )
    by_rank = {face_rank(face): (card, face) for card, face in pairs}
    ordered = [by_rank[_position_rank(position)] for position in positions]
    return Meld(MeldKind.RUN, tuple(c for c, _ in ordered), tuple(f for _, f in ordered))


def meld_declarations(cards: Sequence[Card], rules: MeldRules) -> list[Meld]:
    """Every valid way to read ``cards`` as a meld (one per distinct joker declaration).

    Jokers are interchangeable, so declarations are assigned to them in card order.
    """
    if len(cards) < 3 or len(set(cards)) != len(cards):
        return []
    naturals = [card for card in cards if not is_joker(card)]
    jokers = sorted(card for card in cards if is_joker(card))
    if len(naturals) < max(rules.min_natural, 1):
        return []
    natural_faces = [card_face(card) for card in naturals]
    found: list[Meld] = []
    ranks = {face_rank(face) for face in natural_faces}
    if len(ranks) == 1 and len(cards) <= MAX_SET:
        rank = next(iter(ranks))
        suits = [face_suit(face) for face in natural_faces]
        if len(set(suits)) == len(suits):
            missing = [make_face(rank, suit) for suit in range(4) if suit not in suits]
            for chosen in itertools.combinations(missing, len(jokers)):
                found.append(check_meld([*naturals, *jokers], rules, [*natural_faces, *chosen]))
    suit_set = {face_suit(face) for face in natural_faces}
    if (
        len(suit_set) == 1
        and len(set(natural_faces)) == len(natural_faces)
        and len(cards) <= MAX_RUN
    ):
        suit = next(iter(suit_set))
        length = len(cards)
        wanted = set(natural_faces)
        for first in _run_windows(rules.ace, length):
            window = _run_faces(suit, first, length)
            if not wanted.issubset(window):
                continue
            fill = [face for face in window if face not in wanted]
            if len(fill) == len(jokers):
                found.append(check_meld([*naturals, *jokers], rules, [*natural_faces, *fill]))
    unique: dict[tuple[tuple[Card, ...], tuple[Face, ...]], Meld] = {}
    for meld in found:
        unique.setdefault((meld.cards, meld.faces), meld)
    return list(unique.values())


def _representatives(cards: Iterable[Card], distinct: frozenset[Card]) -> dict[Face, list[Card]]:
    """Group cards by face, keeping one card per interchangeable class.

    Two copies of one face are interchangeable unless one of them is in ``distinct`` (for
    example the card just taken from the discard pile, which may not be discarded).
    """
    groups: dict[Face, list[Card]] = {}
    for card in sorted(cards):
        group = groups.setdefault(card_face(card), [])
        if all((other in distinct) != (card in distinct) for other in group):
            group.append(card)
    return groups


def enumerate_melds(
    hand: Iterable[Card], rules: MeldRules, distinct: frozenset[Card] = frozenset()
) -> list[Meld]:
    """Every meld that can be formed from ``hand``, with every joker declaration.

    Physical copies of one face are interchangeable, so only one representative of each is
    used, except that cards in ``distinct`` are kept apart from their twins. Sorted by
    (cards, faces).

    A hand without a joker is worked out suit by suit (its runs) and rank by rank (its sets),
    each part remembered: a hand changes by a card or two a turn, so most parts come back.
    """
    cards = tuple(hand)
    parts: dict[int, list[Card]] = {}
    for card in cards:
        face = card & FACE_MASK
        if face == JOKER:
            return _enumerate(cards, rules, distinct)
        suit, rank = divmod(face, 13)
        parts.setdefault(suit, []).append(card)  # a suit: its runs
        parts.setdefault(4 + rank, []).append(card)  # a rank: its sets
    found: list[Meld] = []
    memo = _PARTS.get(rules)
    if memo is None:
        memo = _PARTS[rules] = {}
    for part in parts.values():
        if len(part) >= 3:
            part.sort()
            key = (tuple(part), distinct.intersection(part) if distinct else distinct)
            melds = memo.get(key)
            if melds is None:
                if len(memo) >= _PARTS_KEPT:
                    memo.clear()
                melds = memo[key] = _enumerate(key[0], rules, key[1])
            found.extend(melds)
    if len(found) > 1:
        found.sort(key=_meld_key)
    return found


_PARTS: dict[MeldRules, dict[tuple[tuple[Card, ...], frozenset[Card]], list[Meld]]] = {}
"""The melds of the joker-free cards of one suit, or of one rank, by meld rules."""
_PARTS_KEPT = 1 << 16
"""Parts remembered per meld rules at most (about 6,300 come up in a long run of one deck)."""


def _meld_key(meld: Meld) -> tuple[tuple[Card, ...], tuple[Face, ...]]:
    return meld.cards, meld.faces


def _enumerate(cards: tuple[Card, ...], rules: MeldRules, distinct: frozenset[Card]) -> list[Meld]:
    """``enumerate_melds`` on any hand, jokers included, in one pass."""
    groups = _representatives(cards, distinct)
    groups.pop(JOKER, None)
    jokers_all = sorted(card for card in cards if is_joker(card))
    # Jokers are interchangeable except the distinct ones: try each count of the ordinary ones
    # and, separately, each distinct joker.
    plain_jokers = [card for card in jokers_all if card not in distinct]
    special_jokers = [card for card in jokers_all if card in distinct]
    joker_choices: list[tuple[Card, ...]] = []
    for count in range(len(jokers_all) + 1):
        for specials in range(min(count, len(special_jokers)) + 1):
            plain = count - specials
            if plain > len(plain_jokers):
                continue
            for chosen in itertools.combinations(special_jokers, specials):
                joker_choices.append(tuple(plain_jokers[:plain]) + chosen)
    max_jokers = len(jokers_all)
    result: dict[tuple[tuple[Card, ...], tuple[Face, ...]], Meld] = {}

    def add(
        naturals: Sequence[Card],
        natural_faces: Sequence[Face],
        fill: Sequence[Face],
        canonical: MeldKind | None = None,
    ) -> None:
        """Every meld of ``naturals`` and jokers standing for ``fill``. ``canonical``: with no
        fill, the naturals already are such a meld in canonical order (no need to check)."""
        if canonical is not None and not fill:
            meld = Meld(canonical, tuple(naturals), tuple(natural_faces))
            result.setdefault((meld.cards, meld.faces), meld)
            return
        for jokers in joker_choices:
            if len(jokers) != len(fill):
                continue
            meld = check_meld([*naturals, *jokers], rules, [*natural_faces, *fill])
            result.setdefault((meld.cards, meld.faces), meld)

    min_natural = max(rules.min_natural, 1)
    # Sets.
    for rank in range(1, 14):
        suits = _RANK_FACES[rank]
        present = [face for face in suits if face in groups]
        if len(present) + max_jokers < 3:
            continue
        for size in range(3, MAX_SET + 1):
            for natural_count in range(min_natural, min(size, len(present)) + 1):
                joker_count = size - natural_count
                if joker_count > max_jokers:
                    continue
                for natural_faces in itertools.combinations(present, natural_count):
                    missing = [face for face in suits if face not in natural_faces]
                    for fill in itertools.combinations(missing, joker_count):
                        # Natural faces in suit order: a set's canonical order.
                        for naturals in itertools.product(*(groups[f] for f in natural_faces)):
                            add(naturals, natural_faces, fill, MeldKind.SET)
    # Runs: a window is a candidate when the jokers can fill what the hand lacks.
    for window in _candidate_windows(groups.keys(), rules.ace, max_jokers, min_natural):
        length = len(window)
        present = [face for face in window if face in groups]
        # A window is in run order, but a whole suit may start anywhere: check that one.
        canonical = MeldKind.RUN if length < MAX_RUN else None
        for natural_count in range(min_natural, len(present) + 1):
            joker_count = length - natural_count
            if joker_count > max_jokers:
                continue
            for natural_faces in itertools.combinations(present, natural_count):
                gaps = [face for face in window if face not in natural_faces]
                for naturals in itertools.product(*(groups[f] for f in natural_faces)):
                    add(naturals, natural_faces, gaps, canonical)
    return [result[key] for key in sorted(result)]


@functools.lru_cache(maxsize=8192)
def layoff_faces(meld: Meld, rules: MeldRules) -> tuple[Face, ...]:
    """The faces a card could stand for when laid off on ``meld`` (sorted)."""
    if meld.kind is MeldKind.SET:
        if len(meld.cards) >= MAX_SET:
            return ()
        rank = face_rank(meld.faces[0])
        used = {face_suit(face) for face in meld.faces}
        return tuple(make_face(rank, suit) for suit in range(4) if suit not in used)
    if len(meld.cards) >= MAX_RUN:
        return ()
    positions = _order_run(meld.faces, rules.ace)
    if positions is None:  # pragma: no cover - a Meld is valid by construction
        raise InvalidMeldError(f"not a run: {meld}", "rules/invalid_meld")
    suit = face_suit(meld.faces[0])
    options: set[Face] = set()
    for position in (positions[0] - 1, positions[-1] + 1):
        if rules.ace is not AceMode.AROUND and not 1 <= position <= _position_count(rules.ace):
            continue
        face = make_face(_position_rank(position), suit)
        if face not in meld.faces and _order_run([*meld.faces, face], rules.ace) is not None:
            options.add(face)
    return tuple(sorted(options))


def with_layoff(meld: Meld, card: Card, face: Face, rules: MeldRules) -> Meld:
    """``meld`` with ``card`` (standing for ``face``) added.

    Raises:
        InvalidMeldError: the card cannot stand for that face or does not extend the meld.
    """
    if face not in layoff_faces(meld, rules):
        raise InvalidMeldError(
            f"{_format_placed(card, face)} does not extend {meld}", "rules/invalid_layoff"
        )
    return check_meld([*meld.cards, card], rules, [*meld.faces, face])


def with_swap(meld: Meld, card: Card) -> tuple[Meld, Card]:
    """``meld`` with the joker standing for ``card``'s face replaced by ``card``; and that joker.

    Raises:
        InvalidMeldError: no joker in the meld stands for that face.
    """
    face = card_face(card)
    for index, (placed, declared) in enumerate(zip(meld.cards, meld.faces)):
        if is_joker(placed) and declared == face and not is_joker(card):
            cards = meld.cards[:index] + (card,) + meld.cards[index + 1 :]
            return Meld(meld.kind, cards, meld.faces), placed
    raise InvalidMeldError(
        f"no joker in {meld} stands for {format_card(card)}", "rules/no_joker_to_swap"
    )
