"""The rules of RULES.md for ``knock`` and ``gin``, one behaviour per test.

Every situation is reached through real events: a stacked deal (``helpers.deal``) and commands
decided and evolved in turn (``helpers.play``). The last seat deals, so seat 0 moves first; in
Gin Rummy seat 0 is the non-dealer, offered the first upcard, and seat 1 deals.
"""

from __future__ import annotations

import random

import pytest

from protocol.game import Knock, Knocked, UpcardPassed
from server.engine import (
    Card,
    Command,
    Declined,
    Discard,
    DrawStock,
    Event,
    GameEnded,
    HandEnded,
    LayOff,
    MeldSpec,
    Pass,
    Phase,
    Rules,
    State,
    TakeDiscard,
    TookDiscard,
    VariantError,
    card_face,
    chance,
    evolve,
    format_cards,
    legal_actions,
    make_deck,
    make_rules,
    new_game,
    to_move,
)
from tests.engine.helpers import card, cards, deal, deal_next, meld, play, refusal, spec, step

# Private helpers -------------------------------------------------------------------------------

GIN_MELDS = "2C 3C 4C 5D 6D 7D 8H 9H TH"
"""Three runs, no deadwood: the knocker's usual melds in Gin Rummy."""
GIN_KNOCKER = GIN_MELDS + " 3S"
"""Seat 0's usual Gin Rummy hand: ``GIN_MELDS`` and a loose 3S (deadwood 3)."""
GIN_DEFENDER = "KC QD JS 9S 8C 7S 6H 5S 4H 2D"
"""Seat 1's usual Gin Rummy hand: no meld and nothing to lay off on ``GIN_MELDS`` (71)."""
GIN_DEFENDER_75 = "7H QH KC QD JS 9S 8C 5S 2H 4D"
"""A Gin Rummy defender with no meld (75) whose 7H and QH would fit 8H-9H-TH-JH."""

KNOCKER_32 = "2C 3C 4C KD 9S 8H 5S"
"""Knock Rummy, three seats: a club run and 32 unmatched points."""
OPPONENT_43 = "KH QS JD 5C 4H 3S AD"
"""Knock Rummy, three seats: no meld, 43 unmatched points."""
OPPONENT_20 = "7C 7D 7H 9C 6H 3D 2D"
"""Knock Rummy, three seats: a set of sevens and 20 unmatched points."""
OPPONENT_32 = "7C 7D 7H KC 9D 8C 5H"
"""Knock Rummy, three seats: a set of sevens and 32 unmatched points."""


def _knock(players: int = 3, **options: object) -> Rules:
    """``knock`` rules for ``players`` seats with ``options``."""
    return make_rules("knock", options, players)


def _gin(**options: object) -> Rules:
    """``gin`` rules with ``options``."""
    return make_rules("gin", options, 2)


def _deal(rules: Rules, hands: list[str], upcard: str, stock: str = "") -> State:
    """A first deal by the last seat, so that seat 0 moves first."""
    return deal(rules, hands, upcard, stock, dealer=rules.players - 1)


def _pass_first_upcard(state: State) -> State:
    """Both players decline the first upcard, the non-dealer first."""
    state = play(state, to_move(state), Pass())
    return play(state, to_move(state), Pass())


def _gin_drawn(
    first: str = GIN_KNOCKER,
    second: str = GIN_DEFENDER,
    drawn: str = "KS",
    upcard: str = "KD",
    **options: object,
) -> State:
    """A Gin Rummy deal by seat 1 in which both pass the upcard and seat 0 draws ``drawn``."""
    state = _deal(_gin(**options), [first, second], upcard, drawn)
    return play(_pass_first_upcard(state), 0, DrawStock())


def _knock_drawn(hands: list[str], rules: Rules | None = None, drawn: str = "QH") -> State:
    """A Knock Rummy deal by the last seat in which seat 0 draws ``drawn`` (upcard TD)."""
    state = _deal(rules or _knock(len(hands)), hands, "TD", drawn)
    return play(state, 0, DrawStock())


def _hand_end(events: tuple[Event, ...]) -> HandEnded:
    """The ``HandEnded`` among ``events``."""
    (ended,) = (event for event in events if isinstance(event, HandEnded))
    return ended


def _game_end(events: tuple[Event, ...]) -> GameEnded:
    """The ``GameEnded`` among ``events``."""
    (ended,) = (event for event in events if isinstance(event, GameEnded))
    return ended


def _knocked(state: State, seat: int, command: Knock) -> tuple[State, HandEnded]:
    """Decide and evolve ``command``; the state after it and the hand's result."""
    after, events = step(state, seat, command)
    return after, _hand_end(events)


def _layout(melds: tuple[MeldSpec, ...]) -> set[frozenset[Card]]:
    """The melds as sets of cards, whatever their order."""
    return {frozenset(shown.cards) for shown in melds}


def _layout_of(*texts: str) -> set[frozenset[Card]]:
    """Melds in notation as sets of cards."""
    return {frozenset(cards(text)) for text in texts}


def _stock_with(hands: list[str], upcard: str, card_text: str, position: int) -> str:
    """A stock (top first) whose card number ``position`` (from 0) is ``card_text``."""
    named = {*cards(" ".join(hands)), card(upcard), card(card_text)}
    others = [placed for placed in make_deck(1, 0) if placed not in named]
    return format_cards([*others[:position], card(card_text)])


WALL_FIRST = GIN_KNOCKER
WALL_SECOND = "JC QC KC 2S 4S 5H 6H AD 3D 9S"
"""At the wall seat 1 could knock with 7H (5H-6H-7H, then 10 deadwood after discarding 9S)."""


def _at_wall(last: str) -> State:
    """A Gin Rummy hand played down until seat 0's discard of ``last`` leaves 2 stock cards.

    Both players pass the first upcard, then each draws from the stock and discards the card
    drawn; seat 0 draws the 29th card, ``last``, so seat 1 is the next to move.
    """
    hands = [WALL_FIRST, WALL_SECOND]
    stock = _stock_with(hands, "KD", last, 28)
    state = _pass_first_upcard(_deal(_gin(), hands, "KD", stock))
    while len(state.stock) > 2:
        seat = to_move(state)
        drawn = state.stock[0]
        state = play(state, seat, DrawStock(), Discard(drawn))
    return state


# Knock Rummy: players, cards and no table melds -------------------------------------------------


@pytest.mark.parametrize(("players", "hand_size"), [(2, 10), (3, 7), (4, 7), (5, 6)])
def test_knock_deals_10_cards_to_two_7_to_three_or_four_and_6_to_five(
    players: int, hand_size: int
) -> None:
    """A shuffled ``knock`` deal gives every seat the number of cards RULES.md names."""
    state = new_game("knock", {}, seats=players)
    state = evolve(state, chance(state, random.Random(players)))
    expected = [hand_size] * players
    assert expected == [len(hand) for hand in state.hands]


@pytest.mark.parametrize("players", [1, 6])
def test_knock_is_played_by_two_to_five_players(players: int) -> None:
    """Fewer than 2 or more than 5 seats are refused with ``variant/bad_players``."""
    with pytest.raises(VariantError) as caught:
        make_rules("knock", {}, players)
    code = "variant/bad_players"
    assert code == caught.value.code


def test_knock_refuses_melds_on_the_table() -> None:
    """After drawing, laying a meld down is refused with ``rules/no_table_melds``."""
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_20])
    code = "rules/no_table_melds"
    assert code == refusal(state, 0, meld("2C 3C 4C"))


def test_knock_refuses_lay_offs() -> None:
    """A lay-off is refused with ``rules/no_table_melds`` too: nothing is on the table."""
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_20])
    face = card_face(card("5S"))
    code = "rules/no_table_melds"
    assert code == refusal(state, 0, LayOff(card("5S"), 0, face))


def test_knock_before_drawing_is_refused() -> None:
    """A knock comes after the draw: before it, ``rules/wrong_phase``."""
    state = _deal(_knock(3), [KNOCKER_32, OPPONENT_43, OPPONENT_20], "TD", "QH")
    code = "rules/wrong_phase"
    assert code == refusal(state, 0, Knock(card("KD")))


def test_knock_is_offered_with_every_discard_after_drawing() -> None:
    """After drawing, each card may be discarded plainly or with a knock, whatever the count."""
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_20])
    held = state.hands[0]
    expected = {Knock(card=placed) for placed in held}
    assert expected == {action for action in legal_actions(state, 0) if isinstance(action, Knock)}


# Knock Rummy: the knock and its settlement ------------------------------------------------------


def test_a_knock_discards_and_ends_the_hand() -> None:
    """Seat 0 knocks discarding QH: ``Knocked`` with his melds and count, then ``HandEnded``."""
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_20])
    after, events = step(state, 0, Knock(card("QH")))
    knocked = events[0]
    assert isinstance(knocked, Knocked)
    expected = (0, card("QH"), _layout_of("2C 3C 4C"), 32)
    assert expected == (knocked.seat, knocked.card, _layout(knocked.melds), knocked.deadwood)
    ended = _hand_end(events)
    # Seat 1 pays 43 - 32 = 11; seat 2 (20) collects 32 - 20 + 10 = 22: seat 2 gains most.
    outcome = (0, 2, "knock")
    assert outcome == (ended.ended_by, ended.winner, ended.reason)
    assert card("QH") == after.upcard
    assert Phase.DEAL == after.phase


def test_after_a_knock_every_seat_shows_its_best_melds() -> None:
    """The result shows the knocker's run, nothing for seat 1 and seat 2's set of sevens."""
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_20])
    _, ended = _knocked(state, 0, Knock(card("QH")))
    expected = [_layout_of("2C 3C 4C"), set(), _layout_of("7C 7D 7H")]
    assert expected == [_layout(shown) for shown in ended.shown]


def test_after_a_knock_only_unmatched_cards_count() -> None:
    """Counts are 32, 43 and 20: melded cards (the run, the sevens) do not count."""
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_20])
    _, ended = _knocked(state, 0, Knock(card("QH")))
    expected = (32, 43, 20)
    assert expected == ended.counts


def test_knock_settles_pairwise_with_the_knocker() -> None:
    """32 vs 43: seat 1 pays the knocker 11; 32 vs 20: seat 2 collects 12 + 10 = 22."""
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_20])
    _, ended = _knocked(state, 0, Knock(card("QH")))
    expected = (("11", "0", "22"), ("11", "0", "22"))
    assert expected == (ended.points, ended.totals)


def test_knock_with_literal_bonus_pays_the_knockers_points_plus_10() -> None:
    """With ``literal_bonus`` the lower opponent collects the knocker's 32 + 10 = 42."""
    rules = _knock(3, literal_bonus=True)
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_20], rules)
    _, ended = _knocked(state, 0, Knock(card("QH")))
    expected = ("11", "0", "42")
    assert expected == ended.points


def test_a_knock_tie_goes_to_the_knocker_for_nothing() -> None:
    """By default an opponent who ties the knocker's 32 neither pays nor collects."""
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_32])
    _, ended = _knocked(state, 0, Knock(card("QH")))
    expected = ((32, 43, 32), ("11", "0", "0"))
    assert expected == (ended.counts, ended.points)


def test_a_knock_tie_goes_to_the_opponent_for_10_with_tie_goes_to_opponent() -> None:
    """With ``tie_goes_to=opponent`` the tying opponent collects 0 + 10."""
    rules = _knock(3, tie_goes_to="opponent")
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_32], rules)
    _, ended = _knocked(state, 0, Knock(card("QH")))
    expected = ("11", "0", "10")
    assert expected == ended.points


@pytest.mark.parametrize(("bonus", "knocker_points"), [(0, "63"), (25, "113")])
def test_knocking_with_no_unmatched_card_collects_the_rummy_bonus_from_each_opponent(
    bonus: int, knocker_points: str
) -> None:
    """Seat 0 knocks with nothing unmatched: 43 + 20 from the counts, plus ``rummy_bonus`` from
    each of the two opponents (0 by default, 25 as on pagat)."""
    rules = _knock(3, rummy_bonus=bonus)
    state = _knock_drawn(["2C 3C 4C 8C 8D 8H 8S", OPPONENT_43, OPPONENT_20], rules)
    _, ended = _knocked(state, 0, Knock(card("QH")))
    expected = ((0, 43, 20), (knocker_points, "0", "0"))
    assert expected == (ended.counts, ended.points)


def test_knock_points_are_credited_so_no_one_goes_negative() -> None:
    """Whoever loses a pairwise settlement scores 0, never a negative amount."""
    state = _knock_drawn([KNOCKER_32, OPPONENT_43, OPPONENT_20])
    _, ended = _knocked(state, 0, Knock(card("QH")))
    expected = [True, True, True]
    assert expected == [not points.startswith("-") for points in ended.totals]


def test_a_two_player_knock_settles_with_the_one_opponent() -> None:
    """Two seats, ten cards: seat 0 (3 unmatched) knocks; seat 1 (71) pays 68."""
    state = _deal(_knock(2), [GIN_KNOCKER, GIN_DEFENDER], "KD", "KS")
    state = play(state, 0, DrawStock())
    _, ended = _knocked(state, 0, Knock(card("KS")))
    expected = ((3, 71), ("68", "0"))
    assert expected == (ended.counts, ended.points)


# Gin Rummy: the first upcard --------------------------------------------------------------------


def test_gin_is_played_by_two_players_with_ten_cards() -> None:
    """``gin`` deals 10 cards each and refuses a third seat (``variant/bad_players``)."""
    state = new_game("gin", {}, seats=2)
    state = evolve(state, chance(state, random.Random(3)))
    sizes = [10, 10]
    assert sizes == [len(hand) for hand in state.hands]
    with pytest.raises(VariantError) as caught:
        make_rules("gin", {}, 3)
    code = "variant/bad_players"
    assert code == caught.value.code


def test_the_first_upcard_is_offered_to_the_non_dealer() -> None:
    """After the deal by seat 1, seat 0 may only take the upcard or pass."""
    state = _deal(_gin(), [GIN_KNOCKER, GIN_DEFENDER], "KD", "KS")
    offer = (Phase.FIRST_UPCARD, 0)
    assert offer == (state.phase, to_move(state))
    choices: list[Command] = [TakeDiscard(), Pass()]
    assert choices == legal_actions(state, 0)
    code = "rules/wrong_phase"
    assert code == refusal(state, 0, DrawStock())


def test_the_first_upcard_is_offered_to_the_dealer_after_the_non_dealer_passes() -> None:
    """Seat 0 passes (``UpcardPassed``); the dealer, seat 1, is offered the upcard next."""
    state = _deal(_gin(), [GIN_KNOCKER, GIN_DEFENDER], "KD", "KS")
    state, events = step(state, 0, Pass())
    passed: tuple[Event, ...] = (UpcardPassed(seat=0),)
    assert passed == events
    offer = (Phase.FIRST_UPCARD, 1)
    assert offer == (state.phase, to_move(state))
    state, events = step(state, 1, TakeDiscard())
    taken: tuple[Event, ...] = (TookDiscard(seat=1, cards=(card("KD"),)),)
    assert taken == events


def test_when_both_pass_the_first_upcard_the_non_dealer_must_draw_from_the_stock() -> None:
    """After two passes seat 0 draws: taking the upcard is refused (``rules/must_draw_stock``)."""
    state = _pass_first_upcard(_deal(_gin(), [GIN_KNOCKER, GIN_DEFENDER], "KD", "KS"))
    turn = (Phase.DRAW, 0)
    assert turn == (state.phase, to_move(state))
    choices: list[Command] = [DrawStock()]
    assert choices == legal_actions(state, 0)
    code = "rules/must_draw_stock"
    assert code == refusal(state, 0, TakeDiscard())


def test_after_the_first_turn_the_upcard_may_be_taken_again() -> None:
    """The upcards refused at the start do not bind later turns: seat 1 may take 3S."""
    state = _pass_first_upcard(_deal(_gin(), [GIN_KNOCKER, GIN_DEFENDER], "KD", "KS"))
    state = play(state, 0, DrawStock(), Discard(card("3S")))
    assert TakeDiscard() in legal_actions(state, 1)


def test_the_first_upcard_taken_may_not_be_discarded_that_turn() -> None:
    """Seat 0 takes the first upcard KD: discarding it, plainly or with a knock, is refused."""
    state = _deal(_gin(), [GIN_KNOCKER, GIN_DEFENDER], "KD", "KS")
    state = play(state, 0, TakeDiscard())
    code = "rules/discard_taken_card"
    assert code == refusal(state, 0, Discard(card("KD")))
    code = "rules/discard_taken_card"
    assert code == refusal(state, 0, Knock(card("KD")))
    assert Discard(card("KD")) not in legal_actions(state, 0)


def test_an_upcard_taken_later_may_not_be_discarded_that_turn() -> None:
    """In a normal turn too, seat 1 may not throw back the 3S it just took."""
    state = _pass_first_upcard(_deal(_gin(), [GIN_KNOCKER, GIN_DEFENDER], "KD", "KS"))
    state = play(state, 0, DrawStock(), Discard(card("3S")))
    state = play(state, 1, TakeDiscard())
    code = "rules/discard_taken_card"
    assert code == refusal(state, 1, Discard(card("3S")))


# Gin Rummy: the knock limit ---------------------------------------------------------------------

LIMIT_DEFENDER = "KH QS JH 9H 7C 6D 5C 4S 3D 2C"
"""A Gin Rummy defender with no meld, for the knock-limit tests."""


@pytest.mark.parametrize(
    ("loose", "deadwood", "accepted"), [("AS 2H 3S 4H", 10, True), ("AS 2H 3S 5H", 11, False)]
)
def test_gin_knock_is_allowed_up_to_10_deadwood(loose: str, deadwood: int, accepted: bool) -> None:
    """With the default ``knock_limit`` a knock with 10 deadwood is accepted, 11 is refused
    (``rules/knock_too_high``) and not offered."""
    state = _gin_drawn(f"8C 9C TC 8D 9D TD {loose}", LIMIT_DEFENDER)
    knock = Knock(card("KS"))
    assert accepted == (knock in legal_actions(state, 0))
    if accepted:
        _, events = step(state, 0, knock)
        knocked = events[0]
        assert isinstance(knocked, Knocked)
        assert deadwood == knocked.deadwood
    else:
        code = "rules/knock_too_high"
        assert code == refusal(state, 0, knock)


def test_knock_limit_0_refuses_a_knock_with_any_deadwood() -> None:
    """With ``knock_limit=0`` a knock leaving AS (1 deadwood) is refused."""
    state = _gin_drawn(GIN_MELDS + " AS", knock_limit=0)
    code = "rules/knock_too_high"
    assert code == refusal(state, 0, Knock(card("KS")))


def test_knock_limit_0_still_allows_gin() -> None:
    """With ``knock_limit=0`` drawing JH and knocking with AS is gin, which is accepted."""
    state = _gin_drawn(GIN_MELDS + " AS", drawn="JH", knock_limit=0)
    _, ended = _knocked(state, 0, Knock(card("AS")))
    outcome = (0, "gin")
    assert outcome == (ended.winner, ended.reason)


@pytest.mark.parametrize(
    ("upcard", "loose", "accepted"),
    [("5C", "5H", True), ("4D", "5H", False), ("QH", "TS", True), ("AH", "AS", False)],
)
def test_oklahoma_the_first_upcard_sets_the_knock_limit(
    upcard: str, loose: str, accepted: bool
) -> None:
    """With ``oklahoma`` a first upcard of 5 allows a knock with 5 deadwood, a 4 does not, a
    queen allows 10 and an ace allows gin only (1 deadwood refused)."""
    state = _gin_drawn(f"{GIN_MELDS} {loose}", upcard=upcard, oklahoma=True)
    knock = Knock(card("KS"))
    assert accepted == (knock in legal_actions(state, 0))
    if not accepted:
        code = "rules/knock_too_high"
        assert code == refusal(state, 0, knock)


def test_oklahoma_with_an_ace_upcard_still_allows_gin() -> None:
    """An ace as the first upcard leaves gin possible: AS knocked away after drawing JH."""
    state = _gin_drawn(f"{GIN_MELDS} AS", drawn="JH", upcard="AH", oklahoma=True)
    _, ended = _knocked(state, 0, Knock(card("AS")))
    outcome = (0, "gin")
    assert outcome == (ended.winner, ended.reason)


# Gin Rummy: knock, gin, undercut, big gin -------------------------------------------------------


def test_a_gin_knock_wins_the_difference_in_deadwood() -> None:
    """Seat 0 knocks with 3 deadwood; seat 1 holds 71 and has nothing to lay off: 68."""
    state = _gin_drawn()
    _, ended = _knocked(state, 0, Knock(card("KS")))
    expected = (0, "knock", (3, 71), ("68", "0"), ())
    assert expected == (ended.winner, ended.reason, ended.counts, ended.points, ended.laid_off)


def test_gin_scores_the_opponents_deadwood_plus_25() -> None:
    """Seat 0 draws JH and knocks away 3S with nothing unmatched: 75 + 25 = 100."""
    state = _gin_drawn(second=GIN_DEFENDER_75, drawn="JH")
    _, ended = _knocked(state, 0, Knock(card("3S")))
    expected = (0, "gin", (0, 75), ("100", "0"))
    assert expected == (ended.winner, ended.reason, ended.counts, ended.points)


def test_no_lay_offs_against_gin() -> None:
    """The defender's 7H and QH would fit the run 8H-JH, but nothing is laid off against gin."""
    state = _gin_drawn(second=GIN_DEFENDER_75, drawn="JH")
    _, ended = _knocked(state, 0, Knock(card("3S")))
    expected: tuple[Card, ...] = ()
    assert expected == ended.laid_off


UNDERCUT_KNOCKER = GIN_MELDS + " TS"
"""Seat 0 knocks with TS: 10 deadwood."""


def test_an_undercut_scores_the_difference_plus_25_to_the_defender() -> None:
    """Seat 0 knocks with 10; seat 1 lays off 5C on 2C-3C-4C and keeps 5: 5 + 25 = 30."""
    state = _gin_drawn(UNDERCUT_KNOCKER, "JC QC KC 2S 3S 4S AD AH 3D 5C")
    _, ended = _knocked(state, 0, Knock(card("KS")))
    expected = (1, "undercut", (10, 5), ("0", "30"), cards("5C"))
    assert expected == (ended.winner, ended.reason, ended.counts, ended.points, ended.laid_off)


def test_an_equal_deadwood_is_an_undercut() -> None:
    """Knocker 10, defender 10: the defender scores 0 + 25."""
    state = _gin_drawn(UNDERCUT_KNOCKER, "JC QC KC 2S 3S 4S AD AH 3D 5H")
    _, ended = _knocked(state, 0, Knock(card("KS")))
    expected = (1, "undercut", (10, 10), ("0", "25"))
    assert expected == (ended.winner, ended.reason, ended.counts, ended.points)


def test_with_undercut_on_tie_false_a_tie_scores_nothing() -> None:
    """With ``undercut_on_tie=false`` a 10-10 tie scores for neither side and wins no box."""
    state = _gin_drawn(UNDERCUT_KNOCKER, "JC QC KC 2S 3S 4S AD AH 3D 5H", undercut_on_tie=False)
    after, ended = _knocked(state, 0, Knock(card("KS")))
    expected = (-1, (10, 10), ("0", "0"), (0, 0))
    assert expected == (ended.winner, ended.counts, ended.points, after.hands_won)


BIG_GIN_KNOCKER = "AC 2C 3C 4C 5D 6D 7D 8H 9H TH"
"""Seat 0 melds all eleven cards after drawing JH."""


def test_big_gin_scores_the_opponents_deadwood_plus_31() -> None:
    """Seat 0 draws JH and knocks with no discard (card -1): 71 + 31 = 102, no card discarded."""
    state = _gin_drawn(BIG_GIN_KNOCKER, drawn="JH")
    assert Knock(card=-1) in legal_actions(state, 0)
    after, events = step(state, 0, Knock(card=-1))
    knocked = events[0]
    assert isinstance(knocked, Knocked)
    no_discard = (-1, 0)
    assert no_discard == (knocked.card, knocked.deadwood)
    ended = _hand_end(events)
    expected = (0, "big_gin", (0, 71), ("102", "0"))
    assert expected == (ended.winner, ended.reason, ended.counts, ended.points)
    assert card("KD") == after.upcard


def test_big_gin_needs_all_eleven_cards_melded() -> None:
    """Knocking without a discard while KS is unmatched is refused (``rules/not_big_gin``)."""
    state = _gin_drawn(BIG_GIN_KNOCKER, drawn="KS")
    assert Knock(card=-1) not in legal_actions(state, 0)
    code = "rules/not_big_gin"
    assert code == refusal(state, 0, Knock(card=-1))


def test_big_gin_bonus_0_refuses_big_gin() -> None:
    """With ``big_gin_bonus=0`` a knock without a discard is refused (``rules/no_big_gin``)."""
    state = _gin_drawn(BIG_GIN_KNOCKER, drawn="JH", big_gin_bonus=0)
    assert Knock(card=-1) not in legal_actions(state, 0)
    code = "rules/no_big_gin"
    assert code == refusal(state, 0, Knock(card=-1))


def test_big_gin_bonus_0_makes_eleven_melded_cards_ordinary_gin() -> None:
    """With big gin off seat 0 discards JH and is still gin: 71 + 25 = 96."""
    state = _gin_drawn(BIG_GIN_KNOCKER, drawn="JH", big_gin_bonus=0)
    _, ended = _knocked(state, 0, Knock(card("JH")))
    expected = (0, "gin", ("96", "0"))
    assert expected == (ended.winner, ended.reason, ended.points)


# Gin Rummy: lay-offs and the knocker's arrangement ----------------------------------------------

LAYOFF_KNOCKER = "5H 6H 7H 2C 3C 4C 5D 6D 7D 3S"
"""Seat 0 knocks with 3 deadwood, showing 5H-6H-7H among his runs."""


def test_the_defender_lays_off_a_chain_on_the_knockers_run() -> None:
    """8H then 9H go onto 5H-6H-7H: the defender's 75 drops to 58 and the knocker wins 55."""
    state = _gin_drawn(LAYOFF_KNOCKER, "8H 9H KC QD JS 9S 8C 7S 2H 2D")
    _, ended = _knocked(state, 0, Knock(card("KS")))
    expected = (cards("8H 9H"), (3, 58), ("55", "0"))
    assert expected == (ended.laid_off, ended.counts, ended.points)


def test_the_defender_keeps_his_own_meld_when_laying_off_from_it_is_worse() -> None:
    """The defender keeps 8H in his set 8H-8C-8S (9H stays unmatched: 55) rather than lay off
    8H and 9H, which would leave 8C and 8S (62)."""
    state = _gin_drawn(LAYOFF_KNOCKER, "8H 9H 8C 8S KC QD JS TC 4S 2D")
    _, ended = _knocked(state, 0, Knock(card("KS")))
    expected = ((), (3, 55), ("52", "0"))
    assert expected == (ended.laid_off, ended.counts, ended.points)
    assert frozenset(cards("8H 8C 8S")) in _layout(ended.shown[1])


ARRANGED_KNOCKER = "4H 5H 6H 7H 7C 7D 7S 2C 3D AS"
"""Seat 0's 7H fits either the heart run or the sevens; 2C 3D AS stay unmatched (6)."""
ARRANGED_DEFENDER = "8H KC QD JS 9S 8C 5S 2H 4D 6C"
"""No meld (72); 8H fits a heart run that ends in 7H."""


def test_the_knockers_own_arrangement_is_used() -> None:
    """Seat 0 shows 4H-5H-6H and the four sevens, so the defender's 8H has nowhere to go:
    72 - 6 = 66."""
    state = _gin_drawn(ARRANGED_KNOCKER, ARRANGED_DEFENDER)
    arrangement = (spec("4H 5H 6H"), spec("7C 7D 7H 7S"))
    _, events = step(state, 0, Knock(card("KS"), arrangement))
    knocked = events[0]
    assert isinstance(knocked, Knocked)
    assert _layout_of("4H 5H 6H", "7C 7D 7H 7S") == _layout(knocked.melds)
    ended = _hand_end(events)
    expected = ((), (6, 72), ("66", "0"))
    assert expected == (ended.laid_off, ended.counts, ended.points)
    assert _layout_of("4H 5H 6H", "7C 7D 7H 7S") == _layout(ended.shown[0])


def test_the_other_arrangement_lets_the_defender_lay_off() -> None:
    """Showing 4H-5H-6H-7H and 7C-7D-7S instead, the defender lays off 8H: 64 - 6 = 58."""
    state = _gin_drawn(ARRANGED_KNOCKER, ARRANGED_DEFENDER)
    arrangement = (spec("4H 5H 6H 7H"), spec("7C 7D 7S"))
    _, ended = _knocked(state, 0, Knock(card("KS"), arrangement))
    expected = (cards("8H"), (6, 64), ("58", "0"))
    assert expected == (ended.laid_off, ended.counts, ended.points)


def test_an_arrangement_over_the_knock_limit_is_refused() -> None:
    """Showing only 4H-5H-6H-7H leaves 27 deadwood: refused with ``rules/knock_too_high``."""
    state = _gin_drawn(ARRANGED_KNOCKER, ARRANGED_DEFENDER)
    command = Knock(card("KS"), (spec("4H 5H 6H 7H"),))
    code = "rules/knock_too_high"
    assert code == refusal(state, 0, command)


def test_an_arrangement_using_the_discard_is_refused() -> None:
    """The melds must come from the ten cards kept: using the discarded 7S is refused."""
    state = _gin_drawn(ARRANGED_KNOCKER, ARRANGED_DEFENDER)
    command = Knock(card("7S"), (spec("4H 5H 6H"), spec("7C 7D 7H 7S")))
    code = "rules/invalid_meld"
    assert code == refusal(state, 0, command)


# Gin Rummy: the wall ----------------------------------------------------------------------------


def test_at_the_wall_the_next_player_may_pass_or_take_the_upcard_to_knock() -> None:
    """Seat 0's discard leaves 2 stock cards; seat 1 could knock with 7H: take it or pass."""
    state = _at_wall("7H")
    wall = (2, 1, Phase.DRAW)
    assert wall == (len(state.stock), to_move(state), state.phase)
    choices: list[Command] = [TakeDiscard(), Pass()]
    assert choices == legal_actions(state, 1)


def test_at_the_wall_an_upcard_that_cannot_knock_may_only_be_passed() -> None:
    """KS lets seat 1 knock nowhere near 10: only ``Pass``; taking it is ``rules/must_knock``."""
    state = _at_wall("KS")
    choices: list[Command] = [Pass()]
    assert choices == legal_actions(state, 1)
    code = "rules/must_knock"
    assert code == refusal(state, 1, TakeDiscard())


def test_at_the_wall_drawing_from_the_stock_is_refused() -> None:
    """With 2 cards left in the stock the next player may not draw from it."""
    state = _at_wall("KS")
    assert refusal(state, 1, DrawStock()).startswith("rules/")


def test_passing_at_the_wall_ends_the_hand_void() -> None:
    """Seat 1 passes: ``Declined``, then the hand ends with no winner, reason ``wall``."""
    state = _at_wall("KS")
    after, events = step(state, 1, Pass())
    assert Declined(seat=1) == events[0]
    ended = _hand_end(events)
    expected = (-1, "wall", Phase.DEAL, (0, 0))
    assert expected == (ended.winner, ended.reason, after.phase, after.hands_won)


def test_a_hand_void_at_the_wall_scores_no_points() -> None:
    """A void hand changes no score: points 0 and 0, totals unchanged."""
    state = _at_wall("KS")
    _, events = step(state, 1, Pass())
    ended = _hand_end(events)
    expected = (("0", "0"), ("0", "0"))
    assert expected == (ended.points, ended.totals)


def test_the_upcard_taken_at_the_wall_must_be_knocked_with() -> None:
    """Seat 1 takes 7H at the wall: a plain discard is refused (``rules/must_knock``), only
    knocks are offered, and knocking away 9S with 10 deadwood is accepted."""
    state = play(_at_wall("7H"), 1, TakeDiscard())
    code = "rules/must_knock"
    assert code == refusal(state, 1, Discard(card("9S")))
    assert all(isinstance(action, Knock) for action in legal_actions(state, 1))
    _, events = step(state, 1, Knock(card("9S")))
    knocked = events[0]
    assert isinstance(knocked, Knocked)
    expected = (1, card("9S"), 10)
    assert expected == (knocked.seat, knocked.card, knocked.deadwood)


# Gin Rummy: the game ----------------------------------------------------------------------------


def _gin_game_won_in_one_hand(shutout: str = "double") -> tuple[State, tuple[Event, ...]]:
    """Seat 0 goes gin for 100 in the first hand, which reaches the target of 100."""
    state = _gin_drawn(second=GIN_DEFENDER_75, drawn="JH", shutout=shutout)
    return step(state, 0, Knock(card("3S")))


@pytest.mark.parametrize(
    ("shutout", "winner_total"), [("double", "450"), ("plus100", "325"), ("off", "225")]
)
def test_game_totals_add_box_game_bonus_and_shutout(shutout: str, winner_total: str) -> None:
    """100 points, one box (25) and the game bonus (100) make 225; the loser won no hand, so
    the shutout doubles it, adds 100 or does nothing."""
    state, events = _gin_game_won_in_one_hand(shutout=shutout)
    ended = _game_end(events)
    expected = ((0,), (winner_total, "0"))
    assert expected == (ended.winners, ended.totals)
    assert Phase.GAME_OVER == state.phase


def test_the_hand_result_keeps_the_line_score_before_the_bonuses() -> None:
    """``HandEnded.totals`` is the 100 of the hand; the bonuses appear only in ``GameEnded``."""
    _, events = _gin_game_won_in_one_hand()
    expected = ("100", "0")
    assert expected == _hand_end(events).totals


def test_a_gin_game_below_the_target_goes_on_and_boxes_count_for_both() -> None:
    """Seat 0 wins hand 1 by 68 (game on); seat 1, dealt first in hand 2, goes gin for 100 and
    wins: 100 + 25 + 100 = 225 (no shutout) against 68 + 25 = 93."""
    state = _gin_drawn()
    state, events = step(state, 0, Knock(card("KS")))
    assert not any(isinstance(event, GameEnded) for event in events)
    going_on = (Phase.DEAL, ("68", "0"))
    assert going_on == (state.phase, _hand_end(events).totals)
    state = deal_next(state, [GIN_DEFENDER_75, GIN_KNOCKER], "KD", "JH")
    dealer_and_first = (0, 1)
    assert dealer_and_first == (state.dealer, to_move(state))
    state = play(_pass_first_upcard(state), 1, DrawStock())
    state, events = step(state, 1, Knock(card("3S")))
    ended = _game_end(events)
    expected = ((1,), ("93", "225"))
    assert expected == (ended.winners, ended.totals)


def test_target_100_is_the_default() -> None:
    """A knock for 68 leaves the game going; ``target`` is 100 by default."""
    target = 100
    assert target == _gin().target
    state, _ = _knocked(_gin_drawn(), 0, Knock(card("KS")))
    assert Phase.DEAL == state.phase


def test_deals_1_plays_one_hand() -> None:
    """With ``deals=1`` the knock for 68 ends the game: 68 + 25 + 100, doubled (shutout)."""
    state = _gin_drawn(deals=1)
    after, events = step(state, 0, Knock(card("KS")))
    ended = _game_end(events)
    expected = ((0,), ("386", "0"))
    assert expected == (ended.winners, ended.totals)
    assert Phase.GAME_OVER == after.phase


def test_knock_winner_is_the_seat_that_gains_most_and_ended_by_the_knocker() -> None:
    """Seat 0 knocks with 5 unmatched (A-2-3C, 4-4-4, 5D left), discarding the drawn QH.
    Seat 1 counts 8 (8H beside 5-6-7C and three 9s): he pays 8 - 5 = 3. Seat 2 has no unmatched
    card (9C-QC, three 3s): he collects 5 - 0 + 10 = 15. Seat 2 gains most: he is the hand's
    winner; seat 0 ended it."""
    hands = ["AC 2C 3C 4D 4H 4S 5D", "5C 6C 7C 9S 9H 9D 8H", "9C TC JC QC 3H 3D 3S"]
    state = _knock_drawn(hands)
    _, ended = _knocked(state, 0, Knock(card("QH")))
    expected = (2, 0, "knock", (5, 8, 0), ("3", "0", "15"))
    assert expected == (ended.winner, ended.ended_by, ended.reason, ended.counts, ended.points)
