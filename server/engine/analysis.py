"""Hand analysis: meld checks, best melds, deadwood, discards, lay-offs and openings.

Every function takes the table's ``Rules`` (as ``make_rules`` gives them; the number of players
does not matter here) and works on plain cards and melds, so it can be used on any hand without
a game. Where only what makes a meld matters, a ``MeldRules`` will do; functions that count card
values then need the ``values`` too (53 numbers, index 52 the joker), as ``Rules.values`` holds.

>>> from protocol.cards import format_card, parse_cards
>>> from server.engine.variants import make_rules
>>> gin = make_rules("gin")
>>> hand = parse_cards("7H 8H 9H 9C KS 2D 3D 4D 5S 5C")
>>> deadwood(hand, gin)                                   # 9C KS 5S 5C left over
29
>>> card, left = best_discard([*hand, *parse_cards("9D")], gin)  # 9C 9D 9H: 7H 8H 5S 5C left
>>> format_card(card), left
('KS', 25)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from protocol.cards import Card, Face
from server.engine import solver
from server.engine.errors import InvalidMeldError
from server.engine.melds import Meld, MeldRules
from server.engine.melds import check_meld as _check_meld
from server.engine.scoring import opening_points
from server.engine.variants import Rules

if TYPE_CHECKING:
    from server.engine.game import TableMeld

__all__ = [
    "best_discard",
    "best_melds",
    "check_meld",
    "deadwood",
    "hand_solver",
    "is_valid_opening",
    "layoff_targets",
    "opening_value",
]


def _meld_rules(rules: Rules | MeldRules) -> MeldRules:
    return rules.meld_rules if isinstance(rules, Rules) else rules


def _values(rules: Rules | MeldRules, values: Sequence[int] | None) -> Sequence[int]:
    if values is not None:
        return values
    if isinstance(rules, Rules):
        return rules.values
    raise TypeError(f"card values are needed with {rules!r}: pass values=, or pass Rules")


def check_meld(
    cards: Sequence[Card], rules: Rules | MeldRules, faces: Sequence[Face] | None = None
) -> Meld:
    """Validate ``cards`` (with declared ``faces`` for jokers) as a meld under ``rules``.

    Returns the meld in canonical order (runs ascending, sets by suit). Without ``faces`` the
    first valid declaration of the jokers is chosen.

    >>> from protocol.cards import parse_cards
    >>> from server.engine.variants import make_rules
    >>> str(check_meld(parse_cards("9H 7H 8H"), make_rules("basic")))
    '7H 8H 9H'

    Raises:
        InvalidMeldError: not a valid set or run; the code says why (``rules/too_short``,
            ``rules/duplicate_suit``, ``rules/min_natural``, ``rules/invalid_meld``).
    """
    return _check_meld(cards, _meld_rules(rules), faces)


def best_melds(
    hand: Iterable[Card], rules: Rules | MeldRules, values: Sequence[int] | None = None
) -> tuple[tuple[Meld, ...], int]:
    """The partition of ``hand`` into melds that leaves the least deadwood, and that deadwood.

    The melds are sorted by their cards; among partitions with the same deadwood the solver's
    fixed tie rule picks one. ``values`` default to ``rules.values``.

    >>> from protocol.cards import parse_cards
    >>> from server.engine.variants import make_rules
    >>> melds, left = best_melds(parse_cards("7H 8H 9H 9C 9D KS"), make_rules("basic"))
    >>> [str(meld) for meld in melds], left
    (['9C 9D 9H'], 25)

    Raises:
        TypeError: ``rules`` is a ``MeldRules`` and no ``values`` are given.
        ValueError: ``values`` is not 53 non-negative values, or the hand repeats a card.
    """
    return solver.best_melds(hand, _meld_rules(rules), _values(rules, values))


def deadwood(
    hand: Iterable[Card], rules: Rules | MeldRules, values: Sequence[int] | None = None
) -> int:
    """The least deadwood of ``hand``: the value of the cards left out of its best melds.

    >>> from protocol.cards import parse_cards
    >>> from server.engine.variants import make_rules
    >>> deadwood(parse_cards("7H 8H 9H 9C KS"), make_rules("gin"))   # 9 + 10
    19

    Raises:
        TypeError: ``rules`` is a ``MeldRules`` and no ``values`` are given.
        ValueError: ``values`` is not 53 non-negative values, or the hand repeats a card.
    """
    return solver.deadwood(hand, _meld_rules(rules), _values(rules, values))


def hand_solver(rules: Rules | MeldRules, values: Sequence[int] | None = None) -> solver.Solver:
    """``deadwood`` and ``best_melds`` bound to ``rules`` (and ``values``, which default to
    ``rules.values``): the same answers, without looking up the solver's tables on every call.
    For callers that solve many hands under one set of rules (rollouts, analyses of many deals).

    >>> from protocol.cards import parse_cards
    >>> from server.engine.variants import make_rules
    >>> gin = hand_solver(make_rules("gin"))
    >>> gin.deadwood(parse_cards("7H 8H 9H 9C KS"))   # 9 + 10
    19

    Raises:
        TypeError: ``rules`` is a ``MeldRules`` and no ``values`` are given.
        ValueError: ``values`` is not 53 non-negative values.
    """
    return solver.Solver(_meld_rules(rules), _values(rules, values))


def best_discard(
    hand: Iterable[Card],
    rules: Rules | MeldRules,
    values: Sequence[int] | None = None,
    forbidden: Iterable[Card] = (),
) -> tuple[Card, int]:
    """The discard that leaves the least deadwood, and that deadwood.

    This is the value of an 11-card Gin Rummy hand: the exhaustive minimum over every discard
    (not in ``forbidden``, e.g. the card just taken from the pile). Ties go to the lowest card.

    >>> from protocol.cards import format_card, parse_cards
    >>> from server.engine.variants import make_rules
    >>> hand = parse_cards("6S 3C 4H 2H 5H 4C 6C 3S 6H 5S 5C")
    >>> card, left = best_discard(hand, make_rules("gin"))
    >>> format_card(card), left
    ('6S', 10)

    Raises:
        TypeError: ``rules`` is a ``MeldRules`` and no ``values`` are given.
        ValueError: every card is forbidden, ``values`` is not 53 non-negative values, or the
            hand repeats a card.
    """
    return solver.best_discard(
        hand, _meld_rules(rules), _values(rules, values), frozenset(forbidden)
    )


def layoff_targets(
    hand: Iterable[Card], table_melds: Sequence[Meld | TableMeld], rules: Rules | MeldRules
) -> list[tuple[Card, int, Face]]:
    """Every single lay-off the meld rules allow: ``(card, index of the table meld, face)``.

    A natural card stands for its own face, a joker for any face the meld accepts. Sorted.
    ``table_melds`` may be plain melds or a state's ``TableMeld``s. Only the shape of the melds
    is checked, not the turn's conditions (opening first, ``layoff_requires_own_meld``), which
    ``legal_actions`` applies.

    >>> from protocol.cards import format_card, format_face, parse_cards
    >>> from server.engine.variants import make_rules
    >>> rules = make_rules("basic")
    >>> run = check_meld(parse_cards("5H 6H 7H"), rules)
    >>> [(format_card(c), i, format_face(f)) for c, i, f in layoff_targets(
    ...     parse_cards("4H 8H 8S"), [run], rules)]
    [('4H', 0, '4H'), ('8H', 0, '8H')]
    """
    melds = [meld if isinstance(meld, Meld) else meld.meld for meld in table_melds]
    return solver.layoff_targets(hand, melds, _meld_rules(rules))


def opening_value(melds: Iterable[Meld], rules: Rules | MeldRules) -> int:
    """Points a lay-down counts towards an opening (Italian Ramino's 30).

    J/Q/K 10, pip cards face value, a joker the card it stands for; an ace 1 below a 2 in a
    run, else 11 (above the king or in a set). Under ``ace=low`` rules an ace can only be low
    and counts 1 wherever it is.

    >>> from server.engine.notation import parse_melds
    >>> from server.engine.variants import make_rules
    >>> ramino = make_rules("ramino")
    >>> opening_value(parse_melds("QH.KH.AH|JK=5C.5D.5S", ramino), ramino)   # 10+10+11 + 15
    46
    >>> basic = make_rules("basic")
    >>> opening_value(parse_melds("AC.AD.AH", basic), basic)
    3
    """
    return opening_points(melds, _meld_rules(rules).ace)


def is_valid_opening(melds: Sequence[Meld], rules: Rules) -> bool:
    """Whether laying down ``melds`` together is a valid first lay-down under ``rules``.

    True when there is at least one meld, no card is used twice, every meld is valid under
    ``rules`` (with its declared faces) and the melds reach ``rules.opening_minimum``. Presets
    without an opening minimum (every one but ``ramino``) have a minimum of 0, so any valid
    lay-down opens. Conditions of the turn (a card taken from the pile that must be used, going
    out at once) are for ``legal_actions``.

    >>> from server.engine.notation import parse_melds
    >>> from server.engine.variants import make_rules
    >>> ramino = make_rules("ramino")
    >>> is_valid_opening(parse_melds("7C.8C.9C", ramino), ramino)                 # 24
    False
    >>> is_valid_opening(parse_melds("7C.8C.9C|2D.2H.2S", ramino), ramino)       # 24 + 6
    True
    """
    cards = [card for meld in melds for card in meld.cards]
    if not melds or len(set(cards)) != len(cards):
        return False
    try:
        for meld in melds:
            check_meld(meld.cards, rules, meld.faces)
    except InvalidMeldError:
        return False
    return opening_value(melds, rules) >= rules.opening_minimum
