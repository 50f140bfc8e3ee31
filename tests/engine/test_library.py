"""The engine as a library: everything in ``server.engine.__all__``, used without a game.

Expected values are worked out by hand from RULES.md; each test says how.
"""

from __future__ import annotations

import doctest
import inspect
import random
from fractions import Fraction
from types import ModuleType

import pytest

import server.engine
from server.engine import (
    JOKER,
    AceMode,
    Event,
    GameEnded,
    HandEnded,
    InvalidMeldError,
    Knocked,
    Meld,
    MeldCommand,
    MeldKind,
    MeldRules,
    MeldShape,
    MeldSpec,
    NotationError,
    State,
    TableMeld,
    VariantError,
    analysis,
    best_discard,
    best_melds,
    chance,
    chance_pending,
    check_meld,
    deadwood,
    decide,
    evolve,
    format_amount,
    format_card,
    format_face,
    format_meld,
    format_melds,
    from_position,
    hand_winner,
    is_over,
    is_valid_opening,
    layoff_targets,
    legal_actions,
    make_rules,
    new_game,
    notation,
    opening_value,
    parse_face,
    parse_meld,
    parse_melds,
    parse_points,
    parse_totals,
    score_hand,
    scoring,
    to_move,
    variants,
)
from server.engine.game import NO_CARD
from server.engine.notation import format_declared, parse_declared
from tests.engine.helpers import card, cards
from tests.engine.test_hand_endings import CASES as HAND_ENDINGS
from tests.engine.test_hand_endings import Case, parse_move

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
        "hand_winner",
        "is_valid_opening",
        "layoff_targets",
        "make_rules",
        "opening_value",
        "parse_meld",
        "parse_melds",
        "parse_points",
        "score_hand",
        "parse_totals",
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


@pytest.mark.parametrize("module", [notation, analysis, variants, scoring])
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
    assert "QC QD QS" == str(meld)
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


# Settling a hand -------------------------------------------------------------------------------


def amounts(points: tuple[Fraction, ...]) -> list[str]:
    """Points as exact text."""
    return [str(point) for point in points]


def test_score_hand_someone_out() -> None:
    """basic, 3 seats, seat 0 out: he collects KS QS 2C (22) + 7D (7) = 29; going rummy
    doubles it (the default ``going_rummy=double``) to 58; ``plus10`` adds 10 once under
    ``winner_collects`` (docs/variants.md, going rummy effects): 39."""
    rules = make_rules("basic", {}, 3)
    hands = [(), cards("KS QS 2C"), cards("7D")]
    plain = score_hand(rules, hands, 0)
    assert (["29", "0", "0"], (0, 22, 7), 0, 0, "out", False) == (
        amounts(plain.points),
        plain.counts,
        plain.winner,
        plain.ended_by,
        plain.reason,
        plain.rummy,
    )
    assert ["58", "0", "0"] == amounts(score_hand(rules, hands, 0, rummy=True).points)
    plus10 = make_rules("basic", {"going_rummy": "plus10"}, 3)
    assert ["39", "0", "0"] == amounts(score_hand(plus10, hands, 0, rummy=True).points)


def test_score_hand_by_differences() -> None:
    """RULES.md's worked example: counts 6, 15, 7, 21 with nobody out: the lowest scores
    9 + 1 + 15 = 25. Counts 6, 6, 31: the pot is 31 - 6 = 25, shared by the two lowest: 25/2
    each, and no seat does strictly best."""
    basic4 = make_rules("basic", {}, 4)
    hands = [cards("6C"), cards("KS 5H"), cards("7D"), cards("KD QD AC")]
    settled = score_hand(basic4, hands)
    assert (["25", "0", "0", "0"], (6, 15, 7, 21), 0, -1, "stock_exhausted") == (
        amounts(settled.points),
        settled.counts,
        settled.winner,
        settled.ended_by,
        settled.reason,
    )
    tied = score_hand(make_rules("basic", {}, 3), [cards("6C"), cards("6D"), cards("KS KH KD AC")])
    assert ([Fraction(25, 2), Fraction(25, 2), Fraction(0)], -1) == (list(tied.points), tied.winner)
    assert "idle_cap" == score_hand(basic4, hands, reason="idle_cap").reason


def test_score_hand_penalty_and_pay_winner() -> None:
    """``penalty``: each loser scores his own hand (22 and 7), the winner 0 and does best;
    ``pay_winner``: the losers pay it to the winner, zero-sum (29, -22, -7)."""
    hands = [(), cards("KS QS 2C"), cards("7D")]
    penalty = score_hand(make_rules("basic", {"scoring": "penalty"}, 3), hands, 0)
    assert (["0", "22", "7"], 0) == (amounts(penalty.points), penalty.winner)
    paying = score_hand(make_rules("basic", {"scoring": "pay_winner"}, 3), hands, 0)
    assert (["29", "-22", "-7"], 0) == (amounts(paying.points), paying.winner)


def test_score_hand_rummy500_counts_what_each_seat_laid() -> None:
    """Seat 0 laid 7C 8C 9C and KC (7 + 8 + 9 + 10 = 34) and went out; seat 1 laid KD KH KS
    (30) and holds AS 5D (15 + 5 = 20): 34 and 10. A joker on the table is worth 15 whatever it
    stands for and an ace below a 2 is worth 1, so AD 2D JK=3D adds 1 + 2 + 15 = 18."""
    rules = make_rules("rummy500")
    table = [
        TableMeld(parse_meld("7C.8C.9C", rules), (0, 0, 0)),
        TableMeld(parse_meld("KC.KD.KH.KS", rules), (0, 1, 1, 1)),
    ]
    settled = score_hand(rules, [(), cards("AS 5D")], 0, table=table)
    assert (["34", "10"], (0, 20), 0) == (amounts(settled.points), settled.counts, settled.winner)
    more = [*table, TableMeld(parse_meld("AD.2D.JK=3D", rules), (1, 1, 1))]
    # seat 1: 30 + 18 - 20 = 28
    assert ["34", "28"] == amounts(score_hand(rules, [(), cards("AS 5D")], 0, table=more).points)


def test_score_hand_gin_knock_and_undercut() -> None:
    """Knock with 1 (AS) against 39 after the defender lays off 8C 9C on 5C-6C-7C: 38 to the
    knocker. Knock with 9 (9S) against 2 (2H): undercut, 9 - 2 + 25 = 32 to the defender."""
    gin = make_rules("gin")
    knocker = cards("5C 6C 7C 2D 3D 4D 8H 9H TH AS")
    settled = score_hand(gin, [knocker, cards("8C 9C TC TD TS KD QH JS 4S 5H")], 0)
    assert (["38", "0"], (1, 39), 0, 0, "knock") == (
        amounts(settled.points),
        settled.counts,
        settled.winner,
        settled.ended_by,
        settled.reason,
    )
    assert cards("8C 9C") == settled.laid_off
    undercut = score_hand(
        gin, [cards("5C 6C 7C 2D 3D 4D 8H 9H TH 9S"), cards("AS 2S 3S 4H 5H 6H JC QC KC 2H")], 0
    )
    assert (["0", "32"], 1, 0, "undercut") == (
        amounts(undercut.points),
        undercut.winner,
        undercut.ended_by,
        undercut.reason,
    )


def test_score_hand_gin_and_big_gin() -> None:
    """Gin (5C-7C, 2D-4D, 8H-JH): no lay-offs; the defender's best is the set TC TD TS, leaving
    8C 9C KD QH JS 4S 5H = 8 + 9 + 10 + 10 + 10 + 4 + 5 = 56 (the run 8C-TC would leave TD TS,
    59): 56 + 25 = 81. Big gin (eleven cards with 4C, no discard): 56 + 31 = 87."""
    gin = make_rules("gin")
    defender = cards("8C 9C TC TD TS KD QH JS 4S 5H")
    knocker = cards("5C 6C 7C 2D 3D 4D 8H 9H TH JH")
    settled = score_hand(gin, [knocker, defender], 0)
    assert (["81", "0"], (0, 56), "gin", ()) == (
        amounts(settled.points),
        settled.counts,
        settled.reason,
        settled.laid_off,
    )
    big = score_hand(gin, [(*knocker, card("4C")), defender], 0, big_gin=True)
    assert (["87", "0"], "big_gin") == (amounts(big.points), big.reason)


def test_score_hand_uses_the_knocker_s_own_melds() -> None:
    """Laying out only 5C-7C and 2D-4D leaves 8H 9H TH AS = 28; the defender still lays off
    8C 9C and keeps 39: the knocker scores 39 - 28 = 11."""
    gin = make_rules("gin")
    knocker = cards("5C 6C 7C 2D 3D 4D 8H 9H TH AS")
    defender = cards("8C 9C TC TD TS KD QH JS 4S 5H")
    melds = parse_melds("5C.6C.7C|2D.3D.4D", gin)
    settled = score_hand(gin, [knocker, defender], 0, melds=melds)
    assert (["11", "0"], (28, 39)) == (amounts(settled.points), settled.counts)
    with pytest.raises(ValueError, match="distinct cards of his hand"):
        score_hand(gin, [knocker, defender], 0, melds=parse_melds("TC.TD.TS", gin))


def test_score_hand_knock_rummy_settles_pairwise() -> None:
    """Knock Rummy, 3 seats: the knocker melds 2D-4D and three nines and shows 5 (5S); seat 1
    melds 9D-QD and shows 2C 7H 9H = 18, paying 18 - 5 = 13; seat 2 melds the kings and 6C-8C
    and shows 3 (3H), collecting 5 - 3 + 10 = 12. The knocker does best with 13."""
    knock = make_rules("knock", {}, 3)
    hands = [
        cards("5S 2D 3D 4D 9C 9H 9S"),
        cards("QD 2C 7H 9H 9D TD JD"),
        cards("3H KC KD KS 6C 7C 8C"),
    ]
    settled = score_hand(knock, hands, 0)
    assert (["13", "0", "12"], (5, 18, 3), 0, "knock") == (
        amounts(settled.points),
        settled.counts,
        settled.winner,
        settled.reason,
    )
    assert ["9D.TD.JD.QD"] == [format_meld(spec) for spec in settled.shown[1]]


def test_score_hand_void_gin_hand() -> None:
    """A Gin Rummy hand that reaches the wall is void: counts are the deadwoods, points 0."""
    gin = make_rules("gin")
    settled = score_hand(gin, [cards("2C 3C 4C KS"), cards("QH QD QS 5D")])
    assert (["0", "0"], (10, 5), -1, -1, "wall") == (
        amounts(settled.points),
        settled.counts,
        settled.winner,
        settled.ended_by,
        settled.reason,
    )


def test_score_hand_leaves_seats_out_of_the_game_out() -> None:
    """Ramino (penalty scoring), seat 2 eliminated: seat 0 goes out (0), seat 1 holds KS 5D
    (10 + 5 = 15); seat 2 scores nothing and does not compete, so seat 0 does best. Counted
    as a player, seat 2's 0 would tie with seat 0: no winner."""
    ramino3 = make_rules("ramino", {}, 3)
    hands = [(), cards("KS 5D"), ()]
    settled = score_hand(ramino3, hands, 0, active=[True, True, False])
    assert (["0", "15", "0"], 0) == (amounts(settled.points), settled.winner)
    assert -1 == hand_winner(ramino3, settled.points)


def test_score_hand_refuses_a_seat_that_is_not_one() -> None:
    """``ended_by`` is -1 or a seat of ``hands``."""
    with pytest.raises(ValueError, match="got 2"):
        score_hand(BASIC, [(), cards("7D")], 2)


def test_points_and_totals_as_fractions() -> None:
    """The wire strings of ``HandEnded`` and ``GameEnded`` read back as exact numbers."""
    ended = HandEnded(
        hand=1,
        winner=-1,
        reason="stock_exhausted",
        rummy=False,
        hands=((), (), ()),
        counts=(6, 6, 31),
        points=("25/2", "25/2", "0"),
        totals=("25/2", "45/2", "-3"),
    )
    assert (Fraction(25, 2), Fraction(25, 2), Fraction(0)) == parse_points(ended)
    assert (Fraction(25, 2), Fraction(45, 2), Fraction(-3)) == parse_totals(ended)
    assert (Fraction(7),) == parse_totals(GameEnded(winners=(0,), totals=("7",)))


# score_hand agrees with the game ---------------------------------------------------------------


def _ended_hands(
    variant: str, players: int, seed: int, hands: int
) -> list[tuple[State, HandEnded, int, Knocked | None]]:
    """Random play until ``hands`` hands ended: each ``HandEnded`` with the state before it,
    the seat whose command ended the hand (-1: none) and the knock, if any."""
    rng = random.Random(seed)
    state = new_game(variant, {}, seats=players)
    found: list[tuple[State, HandEnded, int, Knocked | None]] = []
    while not is_over(state) and len(found) < hands:
        seat = -1
        if chance_pending(state):
            events: tuple[Event, ...] = (chance(state, rng),)
        else:
            seat = to_move(state)
            events = decide(state, seat, rng.choice(legal_actions(state, seat)))
        knocked = next((event for event in events if isinstance(event, Knocked)), None)
        for event in events:
            if isinstance(event, HandEnded):
                ended_by = seat if event.reason not in _NOBODY else -1
                found.append((state, event, ended_by, knocked))
            state = evolve(state, event)
    return found


_NOBODY = frozenset({"stock_exhausted", "idle_cap", "wall"})
"""Reasons of a hand that nobody ended."""


@pytest.mark.parametrize(
    ("variant", "players"),
    [
        ("basic", 3),
        ("block", 2),
        ("wrotham", 3),
        ("ramino_classic", 4),
        ("rummy500", 3),
        ("ramino", 2),
        ("knock", 3),
        ("gin", 2),
    ],
)
def test_score_hand_settles_played_hands_as_the_game_does(variant: str, players: int) -> None:
    """For hands played at random, ``score_hand`` given the end of the hand in plain values
    (hands, who ended it, rummy, table melds, the knocker's melds) gives the game's points,
    counts, winner, ended_by, reason, shown melds and lay-offs."""
    checked = 0
    for seed in range(4):
        for state, ended, ended_by, knocked in _ended_hands(variant, players, seed, 3):
            rules = state.rules
            melds = None
            if knocked is not None:
                melds = [check_meld(spec.cards, rules, spec.faces) for spec in knocked.melds]
            settled = score_hand(
                rules,
                ended.hands,
                ended_by,
                melds=melds,
                table=state.melds,
                rummy=ended.rummy,
                big_gin=knocked is not None and knocked.card == NO_CARD,
                active=state.active,
                reason=ended.reason if ended_by < 0 else "",
            )
            assert (ended.points, ended.counts, ended.reason, ended.rummy) == (
                tuple(format_amount(point) for point in settled.points),
                settled.counts,
                settled.reason,
                settled.rummy,
            )
            assert (ended.shown, ended.laid_off) == (settled.shown, settled.laid_off)
            assert (ended.winner, ended.ended_by) == (settled.winner, settled.ended_by)
            assert ended_by == ended.ended_by
            checked += 1
    assert checked >= 4


@pytest.mark.parametrize("case", HAND_ENDINGS, ids=[case.name for case in HAND_ENDINGS])
def test_score_hand_agrees_with_the_hand_worked_endings(case: Case) -> None:
    """Each hand-worked ending of tests/golden/hand_endings.toml, settled by ``score_hand``
    from the end of the hand in plain values, gives the points, winner, ended_by and reason
    worked out by hand."""
    start = from_position(case.position)
    seat = int(case.data.get("seat", to_move(start)))
    events = decide(start, seat, parse_move(str(case.data["move"])))
    state = start
    for event in events:
        if isinstance(event, HandEnded):
            break
        state = evolve(state, event)
    knocked = next((event for event in events if isinstance(event, Knocked)), None)
    reason = str(case.data["reason"])
    ended_by = seat if knocked is not None or reason == "out" else -1
    melds = None
    if knocked is not None:
        melds = [check_meld(spec.cards, state.rules, spec.faces) for spec in knocked.melds]
    settled = score_hand(
        state.rules,
        state.hands,
        ended_by,
        melds=melds,
        table=state.melds,
        rummy=reason == "out" and not start.laid_before[seat],
        big_gin=knocked is not None and knocked.card == NO_CARD,
        active=state.active,
        reason=reason if ended_by < 0 else "",
    )
    expected = (case.data["points"], case.data["winner"], case.data["ended_by"], reason)
    actual = (amounts(settled.points), settled.winner, settled.ended_by, settled.reason)
    assert expected == actual, case.data["derivation"]
    if "rummy" in case.data:
        assert case.data["rummy"] is settled.rummy
