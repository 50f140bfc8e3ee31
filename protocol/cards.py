"""Cards, faces and decks, and the card notation.

A *card* is one physical card: an ``int`` whose low six bits are its *face* and whose remaining
bits are its *copy* number. Faces 0-51 are the natural cards (``suit * 13 + rank - 1``, suits in
the order clubs, diamonds, hearts, spades); face 52 is the joker. With one deck every natural card
has copy 0; a second deck adds copy 1 of each, and jokers are numbered by copy (0, 1, 2, ...).
Two physical copies of ``7H`` are therefore different cards with the same face.

Notation: rank (``A 2-9 T J Q K``; ``10`` is accepted on input) and suit (``C D H S``), or ``JK``
for a joker, followed by the copy number counted from 1 when it is not the first copy::

    >>> format_card(parse_card("7H"))
    '7H'
    >>> format_card(parse_card("7h2"))
    '7H2'
    >>> format_cards(parse_cards("JK JK2 TD"))
    'JK JK2 TD'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from protocol.errors import NotationError

__all__ = [
    "FACE_MASK",
    "HIDDEN",
    "JOKER",
    "RANKS",
    "SUITS",
    "Card",
    "Face",
    "card_copy",
    "card_face",
    "face_rank",
    "face_suit",
    "format_card",
    "format_cards",
    "format_face",
    "is_joker",
    "make_card",
    "make_deck",
    "make_face",
    "parse_card",
    "parse_cards",
    "parse_face",
]

Card = int
"""One physical card: ``copy << 6 | face``."""

Face = int
"""What a card shows (0-51 natural, 52 joker), regardless of which deck it came from."""

HIDDEN: Card = -1
"""Stands for a card the viewer may not see (in views and redacted events)."""

JOKER: Face = 52
RANKS = "A23456789TJQK"
SUITS = "CDHS"

_COPY_SHIFT = 6
FACE_MASK = (1 << _COPY_SHIFT) - 1
"""A card's face is its low bits: ``card & FACE_MASK`` is ``card_face(card)``, for hot loops."""
_CARD_PATTERN = re.compile(r"^(?:(10|[A2-9TJQK])([CDHS])|(JK))([1-9][0-9]*)?$")


def make_face(rank: int, suit: int) -> Face:
    """Return the face of rank ``rank`` (1 = ace .. 13 = king) in suit ``suit`` (0-3)."""
    return suit * 13 + rank - 1


def make_card(face: Face, copy: int = 0) -> Card:
    """Return physical copy ``copy`` (from 0) of ``face``."""
    return copy << _COPY_SHIFT | face


def card_face(card: Card) -> Face:
    """Return the face a card shows."""
    return card & FACE_MASK


def card_copy(card: Card) -> int:
    """Return which physical copy of its face a card is (0 for the first deck or joker)."""
    return card >> _COPY_SHIFT


def is_joker(card: Card) -> bool:
    """Whether a card (or face) is a joker."""
    return card & FACE_MASK == JOKER


def face_rank(face: Face) -> int:
    """Rank of a natural face: 1 (ace) to 13 (king)."""
    return face % 13 + 1


def face_suit(face: Face) -> int:
    """Suit index of a natural face: 0 clubs, 1 diamonds, 2 hearts, 3 spades."""
    return face // 13


@functools.cache
def make_deck(decks: int = 1, jokers: int = 0) -> tuple[Card, ...]:
    """Every physical card of ``decks`` 52-card decks plus ``jokers`` jokers, in a fixed order.

    >>> len(make_deck(2, 6))
    110
    """
    naturals = tuple(make_card(face, copy) for copy in range(decks) for face in range(52))
    return naturals + tuple(make_card(JOKER, copy) for copy in range(jokers))


def format_face(face: Face) -> str:
    """Notation of a face (no copy number): ``7H``, ``TD``, ``JK``; ``#N`` for a number ``N``
    that is no face (so that a message about a client's bad input never fails)."""
    if face == JOKER:
        return "JK"
    if not 0 <= face < JOKER:
        return f"#{face}"
    return RANKS[face_rank(face) - 1] + SUITS[face_suit(face)]


def format_card(card: Card) -> str:
    """Notation of a physical card: its face, then its copy number from 1 when not the first;
    ``#N`` for a number ``N`` that is no card (negative, or no face in its low bits)."""
    if card < 0 or card_face(card) > JOKER:
        return f"#{card}"
    copy = card_copy(card)
    face = format_face(card_face(card))
    return face if copy == 0 else f"{face}{copy + 1}"


def format_cards(cards: Iterable[Card], separator: str = " ") -> str:
    """Notation of several cards joined by ``separator``."""
    return separator.join(format_card(card) for card in cards)


def parse_card(text: str) -> Card:
    """Parse one card in the notation (case-insensitive).

    Raises:
        NotationError: ``text`` is not a card.
    """
    match = _CARD_PATTERN.match(text.strip().upper())
    if match is None:
        raise NotationError(f"not a card: {text!r}")
    rank_text, suit_text, joker_text, copy_text = match.groups()
    copy = int(copy_text) - 1 if copy_text else 0
    if joker_text:
        face = JOKER
    else:
        rank = 10 if rank_text == "10" else RANKS.index(rank_text) + 1
        face = make_face(rank, SUITS.index(suit_text))
    if copy > 255:
        raise NotationError(f"copy number out of range in {text!r}")
    return make_card(face, copy)


def parse_face(text: str) -> Face:
    """Parse a face such as ``7H`` or ``JK`` (no copy number).

    Raises:
        NotationError: ``text`` is not a face.
    """
    card = parse_card(text)
    if card_copy(card) != 0:
        raise NotationError(f"a face has no copy number: {text!r}")
    return card


def parse_cards(text: str) -> tuple[Card, ...]:
    """Parse cards separated by spaces, commas or dots; an empty text gives no cards.

    Raises:
        NotationError: one of the items is not a card.
    """
    return tuple(parse_card(item) for item in re.split(r"[\s,.]+", text.strip()) if item)
