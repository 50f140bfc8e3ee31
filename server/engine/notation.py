"""Meld notation: melds as text, with declared jokers and second copies.

A meld is written as its cards joined by ``.``, a joker followed by ``=`` and the face it stands
for; several melds are joined by ``|``, and ``-`` stands for none. The position notation
(``server/engine/position.py``) writes table melds and the melds shown at a knock this way::

    >>> from server.engine.variants import make_rules
    >>> rules = make_rules("ramino", {}, 2)
    >>> meld = parse_meld("9H.JK=7H.8H", rules)
    >>> format_meld(meld)
    'JK=7H.8H.9H'
    >>> format_melds(parse_melds("7S2.7H.7D|QC.KC.AC", rules))
    '7D.7H.7S2|QC.KC.AC'

Cards are in the project's notation (``7H``, ``TD``, ``JK``; a second copy of a card carries its
copy number, ``7H2``, ``JK3``); input is case-insensitive and accepts ``10`` for ``T``. Parsing
validates the meld under the given rules and returns it in canonical order (runs ascending,
sets by suit), so ``format_meld(parse_meld(text, rules))`` is the canonical text of ``text``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from protocol.cards import Card, Face, card_face, format_card, format_face, is_joker, parse_card
from protocol.cards import parse_face as _parse_face
from protocol.errors import NotationError
from protocol.game import MeldSpec
from server.engine.melds import Meld, MeldRules, check_meld
from server.engine.variants import Rules

__all__ = [
    "NO_MELDS",
    "format_declared",
    "format_meld",
    "format_melds",
    "parse_declared",
    "parse_meld",
    "parse_melds",
]

NO_MELDS = "-"
"""The text of an empty list of melds."""

_MELD_SEPARATOR = "|"
_CARD_SEPARATORS = re.compile(r"[.\s]+")


def format_declared(card: Card, face: Face) -> str:
    """One card of a meld: the card, then ``=`` and its face when it stands for another face.

    >>> from protocol.cards import parse_card, parse_face
    >>> format_declared(parse_card("JK2"), parse_face("7H")), format_declared(parse_card("7H2"), 32)
    ('JK2=7H', '7H2')
    """
    text = format_card(card)
    if is_joker(card) or card_face(card) != face:
        text = f"{text}={format_face(face)}"
    return text


def parse_declared(text: str) -> tuple[Card, Face]:
    """Read one card of a meld (``7H``, ``7H2``, ``JK=7H``): the card and the face it stands for.

    A natural card stands for its own face unless written otherwise; a joker written without
    ``=face`` gets the face ``JOKER`` (not declared).

    >>> from protocol.cards import format_card, format_face
    >>> card, face = parse_declared("jk2=10h")
    >>> format_card(card), format_face(face)
    ('JK2', 'TH')

    Raises:
        NotationError: ``text`` is not a card, the declared face is not a natural face, or a
            natural card is declared as something else than a face.
    """
    card_text, equals, face_text = text.strip().partition("=")
    card = parse_card(card_text)
    if not equals:
        return card, card_face(card)
    try:
        face = _parse_face(face_text)
    except NotationError:
        raise NotationError(f"the declared face of {text!r} is not a face") from None
    if is_joker(face):
        raise NotationError(f"a joker stands for a natural card, not {text!r}")
    return card, face


def parse_meld(text: str, rules: Rules | MeldRules) -> Meld:
    """Read one meld (cards joined by ``.`` or spaces) and validate it under ``rules``.

    Jokers are written with the face they stand for (``JK=7H``). When no joker of the meld has a
    declared face, the first valid declaration is chosen (as ``check_meld`` does); a meld may not
    declare some jokers and leave others bare.

    >>> from server.engine.variants import make_rules
    >>> format_meld(parse_meld("8h.jk.7h", make_rules("rummy500", {}, 2)))
    'JK=6H.7H.8H'

    Raises:
        NotationError: a card does not parse, or only some jokers are declared.
        InvalidMeldError: the cards (with those faces) are not a meld under ``rules``.
    """
    meld_rules = rules.meld_rules if isinstance(rules, Rules) else rules
    items = [item for item in _CARD_SEPARATORS.split(text.strip()) if item]
    if not items:
        raise NotationError(f"not a meld: {text!r}")
    cards: list[Card] = []
    faces: list[Face] = []
    for item in items:
        card, face = parse_declared(item)
        cards.append(card)
        faces.append(face)
    bare = [card for card, face in zip(cards, faces) if is_joker(face)]
    if not bare:
        return check_meld(cards, meld_rules, faces)
    if len(bare) == sum(1 for card in cards if is_joker(card)):
        return check_meld(cards, meld_rules)
    raise NotationError(f"declare every joker of the meld or none: {text!r}")


def format_meld(meld: Meld | MeldSpec) -> str:
    """The text of one meld: its cards in order, joined by ``.``, jokers with their faces.

    >>> from server.engine.variants import make_rules
    >>> format_meld(parse_meld("QS QH2 QC", make_rules("rummy500", {}, 6)))
    'QC.QH2.QS'
    """
    return ".".join(format_declared(card, face) for card, face in zip(meld.cards, meld.faces))


def parse_melds(text: str, rules: Rules | MeldRules) -> tuple[Meld, ...]:
    """Read melds joined by ``|`` (``-``: none), each as ``parse_meld`` reads it.

    >>> from server.engine.variants import make_rules
    >>> rules = make_rules("basic", {}, 2)
    >>> len(parse_melds("7C.8C.9C|KD.KH.KS", rules)), parse_melds("-", rules)
    (2, ())

    Raises:
        NotationError: a meld does not parse (see ``parse_meld``).
        InvalidMeldError: a meld is not valid under ``rules``.
    """
    if text.strip() == NO_MELDS:
        return ()
    return tuple(parse_meld(item, rules) for item in text.split(_MELD_SEPARATOR))


def format_melds(melds: Iterable[Meld | MeldSpec]) -> str:
    """The text of several melds joined by ``|``; ``-`` for none.

    >>> format_melds(())
    '-'
    """
    return _MELD_SEPARATOR.join(format_meld(meld) for meld in melds) or NO_MELDS
