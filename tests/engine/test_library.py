"""The engine as a library: everything in ``server.engine.__all__``, used without a game.

Expected values are worked out by hand from RULES.md; each test says how.
"""

from __future__ import annotations

import doctest
import inspect
from types import ModuleType

import pytest

import server.engine
from server.engine import (
    JOKER,
    AceMode,
    InvalidMeldError,
    Meld,
    MeldCommand,
    MeldKind,
    MeldRules,
    MeldShape,
    MeldSpec,
    NotationError,
    TableMeld,
    VariantError,
    analysis,
    best_discard,
    best_melds,
    check_meld,
    deadwood,
    format_card,
    format_face,
    format_meld,
    format_melds,
    is_valid_opening,
    layoff_targets,
    make_rules,
    notation,
    opening_value,
    parse_face,
    parse_meld,
    parse_melds,
    variants,
)
from server.engine.notation import format_declared, parse_declared
from tests.engine.helpers import card, cards

RAMINO = make_rules("ramino", {}, 2)
BASIC = make_rules("basic", {}, 2)
GIN = make_rules("gin", {}, 2)


def texts(melds: tuple[Meld, ...]) -> list[str]:
    """Each meld as ``format_meld`` writes it."""
    return [format_meld(meld) for meld in melds]


# The public names ------------------------------------------------------------------------------


def test_every_public_name_exists_and_has_a_docstring() -> None:
    """``__all__`` lists only names the package has, each documented (classes, functions and
    constants alike; a constant's docstring is the one of its module or type)."""
    missing = [name for name in server.engine.__all__ if not hasattr(server.engine, name)]
    assert [] == missing
    undocumented = [
        name
        for name in server.engine.__all__
        if (inspect.isclass(getattr(server.engine, name)) or callable(getattr(server.engine, name)))
        and not (inspect.getdoc(getattr(server.engine, name)) or "").strip()
    ]
    assert [] == undocumented


def test_public_functions_have_an_example() -> None:
    """Every function added for library users shows an example (``>>>``) in its docstring."""
    names = [
        "best_discard",
        "best_melds",
        "check_meld",
        "deadwood",
        "format_meld",
        "format_melds",
        "is_valid_opening",
        "layoff_targets",
        "make_rules",
        "opening_value",
        "parse_meld",
        "parse_melds",
    ]
    lacking = [name for name in names if ">>>" not in (getattr(server.engine, name).__doc__ or "")]
    assert [] == lacking


def test_meld_names_do_not_collide() -> None:
    """``Meld`` is the meld, ``MeldCommand`` the command; ``MeldShape`` stays as an alias."""
    meld = check_meld(cards("7H 8H 9H"), BASIC)
    assert isinstance(meld, Meld)
    assert MeldShape is Meld
    command = MeldCommand(melds=(MeldSpec(meld.cards, meld.faces),))
    assert not isinstance(command, Meld)
    assert meld.cards == command.melds[0].cards


@pytest.mark.parametrize("module", [notation, analysis, variants])
def test_module_examples_hold(module: ModuleType) -> None:
    """The doctest examples in the library modules run as written."""
    results = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert (0, True) == (results.failed, results.attempted > 0)


# Meld notation ---------------------------------------------------------------------------------


def test_a_declared_joker_and_a_second_copy_read_and_write_back() -> None:
    """``JK=7H.8H.9H``: the joker stands for 7H; ``7H2`` is the second copy of 7H."""
    meld = parse_meld("JK=7H.8H.9H", RAMINO)
    assert (MeldKind.RUN, cards("JK 8H 9H")) == (meld.kind, meld.cards)
    assert parse_face("7H") == meld.faces[0]
    assert "JK=7H.8H.9H" == format_meld(meld)
    second = parse_meld("7h2.7d.jk2=7s", RAMINO)
    # A set is ordered by suit: clubs, diamonds, hearts, spades.
    assert "7D.7H2.JK2=7S" == format_meld(second)
    assert format_meld(second) == format_meld(parse_meld(format_meld(second), RAMINO))


def test_the_multi_meld_form_uses_bars_and_a_dash_for_none() -> None:
    """Melds are joined by ``|`` as in the position notation; ``-`` is no meld."""
    melds = parse_melds("9C.7C.8C|KD.KS.KH", BASIC)
    assert ["7C.8C.9C", "KD.KH.KS"] == texts(melds)
    assert "7C.8C.9C|KD.KH.KS" == format_melds(melds)
    assert () == parse_melds("-", BASIC)
    assert "-" == format_melds(())


def test_spaces_separate_cards_too() -> None:
    """``parse_meld`` reads the space-separated form ``str(meld)`` writes."""
    meld = parse_meld("QC QD QS", BASIC)
    assert str(meld) == "QC QD QS"
    assert meld == parse_meld(str(meld).replace(" ", "."), BASIC)


def test_format_accepts_the_wire_form() -> None:
    """A ``MeldSpec`` (as events carry melds) is written like a ``Meld``."""
    meld = parse_meld("JK=QH.QC.QD", RAMINO)
    assert "QC.QD.JK=QH" == format_meld(MeldSpec(meld.cards, meld.faces))


def test_undeclared_jokers_take_the_first_declaration() -> None:
    """With no joker declared the first valid declaration is chosen: for 7H 8H and a joker
    under ``ace=low`` that is 6H (the run 6-7-8 comes before 7-8-9)."""
    meld = parse_meld("7H.8H.JK", BASIC.meld_rules)
    assert "JK=6H.7H.8H" == format_meld(meld)


@pytest.mark.parametrize(
    "text",
    ["", "7H.8H.ZZ", "JK=7H.8H.JK", "JK=JK.8H.9H", "JK=7X.8H.9H", "7H.8H.9H=10H2"],
)
def test_text_that_is_not_a_meld_is_a_notation_error(text: str) -> None:
    """A bad card, a joker declared as a joker, a face with a copy number, or only some
    jokers declared."""
    with pytest.raises(NotationError):
        parse_meld(text, RAMINO)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("7H.8H", "rules/too_short"),
        ("7H.8H.TH", "rules/invalid_meld"),
        ("7H.7H2.7S", "rules/duplicate_suit"),
        ("QH.QS.QC=QD", "rules/invalid_meld"),
    ],
)
def test_cards_that_are_no_meld_are_an_invalid_meld(text: str, code: str) -> None:
    """Two cards, a gap, two hearts in a set, a natural card declared as another card."""
    with pytest.raises(InvalidMeldError) as caught:
        parse_meld(text, RAMINO)
    assert code == caught.value.code


def test_the_rules_decide_what_a_meld_is() -> None:
    """Ramino wants two natural cards per meld (``min_natural=2``); Rummy 500 one."""
    assert "JK=5C.JK2=6C.7C" == format_meld(parse_meld("JK=5C.JK2=6C.7C", make_rules("rummy500")))
    with pytest.raises(InvalidMeldError):
        parse_meld("JK=5C.JK2=6C.7C", RAMINO)


def test_one_card_of_a_meld() -> None:
    """``parse_declared`` / ``format_declared`` are the card-level halves of the notation."""
    assert (card("JK3"), parse_face("AS")) == parse_declared("JK3=AS")
    assert (card("TD2"), parse_face("TD")) == parse_declared("10d2")
    assert (card("JK"), JOKER) == parse_declared("JK")
    assert "JK3=AS" == format_declared(card("JK3"), parse_face("AS"))
    assert "TD2" == format_declared(card("TD2"), parse_face("TD"))


# Rules without a table -------------------------------------------------------------------------


def test_make_rules_without_players_takes_the_fewest_the_preset_allows() -> None:
    """RULES.md: Gin Rummy is for 2, Rummy 500 for 2-8 (13 cards each with 2), Ramino 2-4 but
    ``bussare`` needs 3; ``pay_winner`` plays one deal per player."""
    gin = make_rules("gin")
    assert (2, 10) == (gin.players, gin.hand_size)
    assert gin == make_rules("gin", {}, 2)
    rummy500 = make_rules("rummy500")
    assert (2, 13, 1) == (rummy500.players, rummy500.hand_size, rummy500.decks)
    assert 3 == make_rules("ramino", {"bussare": True}).players
    assert 2 == make_rules("basic", {"scoring": "pay_winner"}).deals
    assert 4 == make_rules("basic", {}, 4).players


@pytest.mark.parametrize(
    ("name", "options", "code"),
    [
        ("rummy", {}, "variant/unknown"),
        ("basic", {"bussare": True}, "variant/unknown_option"),
        ("basic", {"target": 50, "deals": 3}, "variant/contradictory_options"),
    ],
)
def test_make_rules_without_players_still_refuses_bad_options(
    name: str, options: dict[str, object], code: str
) -> None:
    """No player count makes an unknown preset, an unknown option or a contradiction valid."""
    with pytest.raises(VariantError) as caught:
        make_rules(name, options)
    assert code == caught.value.code


# Hand analysis ---------------------------------------------------------------------------------


def test_deadwood_counts_what_the_best_melds_leave() -> None:
    """AS-2S-3S, 4H-5H-6H and 9C 9D 9S are melds; KC is left over: 10."""
    hand = cards("AS 2S 3S 4H 5H 6H 9C 9D 9S KC")
    assert 10 == deadwood(hand, GIN)
    assert 10 == deadwood(hand, GIN.meld_rules, GIN.values)


def test_best_melds_prefer_the_set_when_it_leaves_less() -> None:
    """7H 8H 9H 9C 9D KS: the run leaves 9C 9D KS (28), the set 9C 9D 9H leaves 7H 8H KS
    (7 + 8 + 10 = 25)."""
    melds, left = best_melds(cards("7H 8H 9H 9C 9D KS"), BASIC)
    assert (["9C.9D.9H"], 25) == (texts(melds), left)


def test_values_come_from_the_rules_or_are_given() -> None:
    """With ``ace=high_or_low`` an ace in hand is worth 15 (RULES.md); A 5H 9C are no meld:
    15 + 5 + 9 = 29; with the ``basic`` values (ace 1) the same cards count 15."""
    high = make_rules("basic", {"ace": "high_or_low"})
    hand = cards("AC 5H 9C")
    assert 29 == deadwood(hand, high)
    assert 15 == deadwood(hand, high.meld_rules, BASIC.values)
    with pytest.raises(TypeError):
        deadwood(hand, high.meld_rules)


def test_best_discard_values_an_eleven_card_gin_hand() -> None:
    """2C-3C-4C, 5D-6D-7D and 8S-9S-TS are melds; JH and QH are left: discarding either leaves
    10, and the tie goes to the lower card (JH). With JH forbidden (just taken), QH goes."""
    hand = cards("2C 3C 4C 5D 6D 7D 8S 9S TS JH QH")
    assert (card("JH"), 10) == best_discard(hand, GIN)
    assert (card("QH"), 10) == best_discard(hand, GIN, forbidden=[card("JH")])


def test_best_discard_is_the_true_minimum_of_rules_md() -> None:
    """RULES.md's example: discarding 6S leaves 3C-6C and 4H-5H-6H melded, 2H 3S 5S = 10."""
    hand = cards("6S 3C 4H 2H 5H 4C 6C 3S 6H 5S 5C")
    assert (card("6S"), 10) == best_discard(hand, GIN)


def test_layoff_targets_on_plain_and_table_melds() -> None:
    """Set 7C 7D 7H takes 7S; run 4S 5S 6S takes 3S or 7S; a joker may stand for any of those.
    9D fits nowhere; a full set takes nothing."""
    rules = make_rules("rummy500")
    table = parse_melds("7C.7D.7H|4S.5S.6S", rules)
    found = [
        (format_card(c), index, format_face(face))
        for c, index, face in layoff_targets(cards("7S 3S JK 9D"), table, rules)
    ]
    assert [
        ("3S", 1, "3S"),
        ("7S", 0, "7S"),
        ("7S", 1, "7S"),
        ("JK", 0, "7S"),
        ("JK", 1, "3S"),
        ("JK", 1, "7S"),
    ] == found
    assert [] == layoff_targets(cards("7S"), parse_melds("7C.7D.7H.7S2", rules), rules)


def test_layoff_targets_take_a_state_s_table_melds() -> None:
    """``TableMeld``s (meld and owners) are read as their melds."""
    rules = make_rules("rummy500")
    meld = parse_meld("4S.5S.6S", rules)
    table = (TableMeld(meld, (0, 0, 1)),)
    assert layoff_targets(cards("3S"), table, rules) == layoff_targets(cards("3S"), [meld], rules)


# Openings --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("QH.KH.AH|JK=5C.5D.5S", 10 + 10 + 11 + 5 + 5 + 5),  # ace above the king: 11
        ("AC.2C.3C", 1 + 2 + 3),  # ace below the 2: 1
        ("AC.AD.AS", 11 * 3),  # ace in a set: 11
        ("JK=TH.JH.QH", 10 + 10 + 10),  # the joker counts as the 10 it stands for
    ],
)
def test_opening_value_under_ramino(text: str, value: int) -> None:
    """RULES.md (ramino): J/Q/K 10; ace 1 low, 11 high or in a set; joker = its card."""
    assert value == opening_value(parse_melds(text, RAMINO), RAMINO)


def test_opening_value_honours_the_ace_rule() -> None:
    """Under ``ace=low`` an ace can only be low: three aces are 1 + 1 + 1."""
    aces = parse_melds("AC.AD.AH", BASIC)
    assert 3 == opening_value(aces, BASIC)
    assert 33 == opening_value(aces, MeldRules(AceMode.HIGH_OR_LOW))


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("7C.8C.9C", False),  # 24 < 30
        ("7C.8C.9C|2D.2H.2S", True),  # 24 + 6 = 30, the minimum itself
        ("JK=KC.KD.KH", True),  # 30
        ("7C.8C.9C|9C.9D.9H", False),  # 9C used twice
        ("-", False),  # nothing laid down
    ],
)
def test_is_valid_opening_under_ramino(text: str, valid: bool) -> None:
    """Ramino's first lay-down must total at least 30 (RULES.md)."""
    assert valid == is_valid_opening(parse_melds(text, RAMINO), RAMINO)


def test_is_valid_opening_checks_the_melds_under_the_rules() -> None:
    """Two jokers in a meld are fine in Rummy 500 but not in Ramino (``min_natural=2``)."""
    rummy500 = make_rules("rummy500")
    melds = parse_melds("JK=5C.JK2=6C.7C|KC.KD.KH", rummy500)
    assert is_valid_opening(melds, rummy500)
    assert not is_valid_opening(melds, RAMINO)


def test_is_valid_opening_without_an_opening_minimum() -> None:
    """``basic`` has no opening minimum (0): any valid lay-down opens, nothing does not."""
    assert 0 == BASIC.opening_minimum
    assert is_valid_opening(parse_melds("2C.3C.4C", BASIC), BASIC)
    assert not is_valid_opening((), BASIC)
