"""The rules of RULES.md (``basic``, ``block``, ``wrotham``, ``ramino_classic``), one test each.

Every situation is reached through real events: a stacked deal (``helpers.deal``) and commands
decided and evolved in turn (``helpers.play``). Unless a test says otherwise two seats play,
seat 1 deals and seat 0 moves first.
"""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import pytest

from protocol.cards import face_rank
from server.engine import (
    JOKER,
    Command,
    Dealt,
    Declined,
    Discard,
    Discarded,
    DrawStock,
    Drew,
    Event,
    GameEnded,
    HandEnded,
    LaidOff,
    LayOff,
    MeldCommand,
    Melded,
    NotationError,
    Pass,
    Phase,
    Rules,
    State,
    StockRebuilt,
    SwapJoker,
    SwappedJoker,
    TakeDiscard,
    TookDiscard,
    VariantError,
    card_face,
    chance,
    chance_pending,
    decide,
    evolve,
    format_card,
    is_joker,
    is_over,
    legal_actions,
    make_deck,
    make_rules,
    new_game,
    parse_card,
    parse_face,
    to_move,
)
from tests.engine.helpers import (
    card,
    cards,
    deal,
    deal_next,
    meld,
    next_dealer,
    play,
    refusal,
    run_down_stock,
    spec,
    step,
)

RUN_HAND = "2C 3C 4C 5C 6C 7C 8C 9C TC 5D"
"""Seat 0's usual hand: a nine-card club run and a loose 5D (count 59)."""
OPPONENT = "KH KS KD 2H 3H 4H 9D 9S QH JS"
"""Seat 1's usual hand (count 77)."""
GO_OUT_RUN = "2C 3C 4C 5C 6C 7C 8C 9C TC JC"
"""The run seat 0 lays down after drawing JC."""


def basic(players: int = 2, **options: object) -> Rules:
    """``basic`` rules for ``players`` seats with ``options``."""
    return make_rules("basic", options, players)


def opening(
    rules: Rules,
    first: str = RUN_HAND,
    second: str = OPPONENT,
    upcard: str = "8S",
    stock: str = "JC",
) -> State:
    """A two-seat deal by seat 1: seat 0 holds ``first`` and moves first."""
    return deal(rules, [first, second], upcard, stock, dealer=1)


def kinds(events: tuple[Event, ...]) -> list[type]:
    """The event types, in order."""
    return [type(event) for event in events]


def result(state: State) -> HandEnded:
    """The last hand's result."""
    assert state.last_result is not None
    return state.last_result


def game_end(events: tuple[Event, ...]) -> GameEnded:
    """The ``GameEnded`` among ``events``."""
    ended = [event for event in events if isinstance(event, GameEnded)]
    assert len(ended) == 1
    return ended[0]


def go_out_by_discard(state: State) -> tuple[State, tuple[Event, ...]]:
    """Seat 0 draws JC, melds ``GO_OUT_RUN`` and discards 5D, going out in his first turn."""
    state = play(state, 0, DrawStock(), meld(GO_OUT_RUN))
    return step(state, 0, Discard(card("5D")))


# Cards -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("7H", "7H"),
        ("10H", "TH"),
        ("th", "TH"),
        ("AS", "AS"),
        ("KC", "KC"),
        ("7H2", "7H2"),
        ("7H1", "7H"),
        ("JK", "JK"),
        ("JK3", "JK3"),
        ("10D2", "TD2"),
    ],
)
def test_card_notation_round_trips(text: str, canonical: str) -> None:
    """Parsing then formatting gives the canonical text, and that text parses to the same card."""
    parsed = parse_card(text)
    assert canonical == format_card(parsed)
    assert parsed == parse_card(canonical)


def test_second_copies_are_distinct_cards_with_the_same_face() -> None:
    """``7H2`` is another physical card than ``7H`` but shows the same face; ``JK3`` is a joker."""
    assert parse_card("7H") != parse_card("7H2")
    assert card_face(parse_card("7H")) == card_face(parse_card("7H2"))
    assert (True, JOKER) == (is_joker(parse_card("JK3")), card_face(parse_card("JK3")))


@pytest.mark.parametrize("text", ["", "1H", "11H", "7X", "H7", "10", "JK0", "7H0", "JKH", "7 H"])
def test_bad_card_text_raises_notation_error(text: str) -> None:
    """Text that is not a card is refused with ``notation/invalid``."""
    with pytest.raises(NotationError) as caught:
        parse_card(text)
    assert "notation/invalid" == caught.value.code


def test_a_face_has_no_copy_number() -> None:
    """A face is what a card shows, so ``7H2`` is not a face."""
    with pytest.raises(NotationError) as caught:
        parse_face("7H2")
    assert "notation/invalid" == caught.value.code


# Variants and options --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "players", "cards_in_pack", "jokers", "hand_size"),
    [
        ("basic", 2, 52, 0, 10),
        ("basic", 3, 52, 0, 7),
        ("basic", 4, 52, 0, 7),
        ("basic", 5, 52, 0, 6),
        ("basic", 6, 52, 0, 6),
        ("block", 4, 52, 0, 7),
        ("wrotham", 2, 55, 3, 7),
        ("wrotham", 6, 55, 3, 7),
        ("ramino_classic", 2, 54, 2, 10),
        ("ramino_classic", 4, 54, 2, 7),
        ("ramino_classic", 6, 54, 2, 6),
    ],
)
def test_presets_set_the_pack_and_the_hand_size(
    name: str, players: int, cards_in_pack: int, jokers: int, hand_size: int
) -> None:
    """The pack and the cards dealt to each player are those RULES.md gives per preset."""
    rules = make_rules(name, {}, players)
    assert (cards_in_pack, jokers, hand_size) == (rules.deck_size, rules.jokers, rules.hand_size)


def test_block_preset_never_reuses_the_pile() -> None:
    """``block`` is ``basic`` with ``stock_exhausted=block``."""
    assert "block" == make_rules("block", {}, 2).stock_exhausted


def test_unknown_preset_is_refused() -> None:
    """A preset name that does not exist raises ``variant/unknown``."""
    with pytest.raises(VariantError) as caught:
        make_rules("canasta", {}, 2)
    assert "variant/unknown" == caught.value.code


@pytest.mark.parametrize(
    ("name", "options"),
    [("basic", {"colour": "red"}), ("basic", {"jokers": 2}), ("basic", {"joker_swap": True})],
)
def test_unknown_option_is_refused(name: str, options: dict[str, object]) -> None:
    """An option the preset does not list raises ``variant/unknown_option``."""
    with pytest.raises(VariantError) as caught:
        make_rules(name, options, 2)
    assert "variant/unknown_option" == caught.value.code


@pytest.mark.parametrize(
    "options",
    [
        {"going_rummy": 3},
        {"going_rummy": "triple"},
        {"layoff_requires_own_meld": "yes"},
        {"layoff_requires_own_meld": 1},
        {"target": "100"},
        {"target": True},
        {"target": 0},
        {"ace": "sideways"},
        {"idle_turn_cap": 1.5},
        {"stock_exhausted": None},
    ],
)
def test_option_of_the_wrong_type_or_range_is_refused(options: dict[str, object]) -> None:
    """A value of the wrong type or out of range raises ``variant/bad_option``."""
    with pytest.raises(VariantError) as caught:
        make_rules("basic", options, 2)
    assert "variant/bad_option" == caught.value.code


@pytest.mark.parametrize(
    ("name", "players"),
    [("basic", 1), ("basic", 7), ("block", 0), ("wrotham", 7), ("ramino_classic", 1)],
)
def test_player_count_outside_the_preset_range_is_refused(name: str, players: int) -> None:
    """Every preset in scope is for 2-6 players; others raise ``variant/bad_players``."""
    with pytest.raises(VariantError) as caught:
        make_rules(name, {}, players)
    assert "variant/bad_players" == caught.value.code


def test_target_and_deals_together_are_contradictory() -> None:
    """A game ends at a target or after a number of deals, not both."""
    with pytest.raises(VariantError) as caught:
        make_rules("basic", {"target": 100, "deals": 3}, 2)
    assert "variant/contradictory_options" == caught.value.code


def test_wrotham_refuses_a_target_score() -> None:
    """Wrotham is exactly 6 deals (its preset sets ``deals``), so a target contradicts it."""
    with pytest.raises(VariantError) as caught:
        make_rules("wrotham", {"target": 100}, 2)
    assert "variant/contradictory_options" == caught.value.code


def test_block_refuses_a_stock_reuse_limit() -> None:
    """``block`` never reuses the pile, so ``max_stock_reuses`` contradicts it."""
    with pytest.raises(VariantError) as caught:
        make_rules("block", {"max_stock_reuses": 2}, 2)
    assert "variant/contradictory_options" == caught.value.code


def test_setting_deals_replaces_the_default_target() -> None:
    """``deals`` alone plays a fixed number of deals with no target."""
    rules = basic(deals=4)
    assert (None, 4) == (rules.target, rules.deals)


# Dealing and the dealer ------------------------------------------------------------------------


def test_cards_go_one_at_a_time_from_the_dealers_left_then_upcard_then_stock() -> None:
    """With 4 seats and seat 1 dealing, seat 2 gets cards 0, 4, 8..., the upcard is card 28."""
    rules = basic(4)
    pack = make_deck(1, 0)
    state = evolve(new_game(rules), Dealt(hand=1, dealer=1, order=pack))
    for offset, seat in enumerate((2, 3, 0, 1)):
        assert tuple(sorted(pack[offset:28:4])) == state.hands[seat]
    assert ((pack[28],), pack[29:]) == (state.pile, state.stock)


@pytest.mark.parametrize(("players", "dealer"), [(2, 0), (2, 1), (3, 2), (4, 1), (6, 5)])
def test_the_starter_is_left_of_the_dealer(players: int, dealer: int) -> None:
    """The seat after the dealer moves first, in the draw phase."""
    rules = basic(players)
    state = evolve(new_game(rules), Dealt(hand=1, dealer=dealer, order=make_deck(1, 0)))
    assert ((dealer + 1) % players, Phase.DRAW) == (state.turn, state.phase)


@pytest.mark.parametrize("seed", range(8))
def test_lowest_card_dealer_is_the_seat_with_the_lowest_cut(seed: int) -> None:
    """With ``dealer=lowest_card`` every seat cuts one card and the lowest rank deals."""
    event = chance(new_game(basic(4, dealer="lowest_card")), random.Random(seed))
    assert isinstance(event, Dealt)
    ranks = [face_rank(card_face(cut)) for cut in event.cuts]
    assert 4 == len(set(event.cuts)) == len(ranks)
    assert min(ranks) == ranks[event.dealer]


def test_random_dealer_cuts_no_cards() -> None:
    """With the default ``dealer=random`` the deal records no cuts."""
    event = chance(new_game(basic(3)), random.Random(1))
    assert isinstance(event, Dealt)
    assert () == event.cuts


@pytest.mark.parametrize(("players", "dealer"), [(2, 1), (2, 0), (3, 2), (3, 0)])
def test_the_deal_passes_to_the_left_each_hand(players: int, dealer: int) -> None:
    """After a hand the next seat deals (two players alternate) and the one after it starts."""
    starter = (dealer + 1) % players
    if players == 2:
        hands = [OPPONENT, OPPONENT]
        run = "2C 3C 4C 5C 6C 7C 8C 9C TC JC"
    else:
        hands = ["", "", ""]
        hands[(starter + 1) % 3] = "KH KS KD 2H 3H 4H 9D"
        hands[(starter + 2) % 3] = "QS QD 9S 5H 6H 7H 8D"
        run = "2C 3C 4C 5C 6C 7C 8C"
    hands[starter] = run.replace("8C", "9H")
    state = deal(basic(players, target=1000), hands, "AC", "8C", dealer=dealer)
    state = play(state, starter, DrawStock(), meld(run), Discard(card("9H")))
    assert Phase.DEAL == state.phase
    event = chance(state, random.Random(3))
    assert isinstance(event, Dealt)
    assert (2, starter) == (event.hand, event.dealer)
    assert (starter + 1) % players == evolve(state, event).turn


# Turn structure --------------------------------------------------------------------------------


def test_drawing_from_the_stock_takes_its_top_card() -> None:
    """``DrawStock`` gives the mover the first card of the stock."""
    assert (Drew(seat=0, card=card("JC")),) == decide(opening(basic()), 0, DrawStock())


def test_taking_the_discard_takes_the_upcard() -> None:
    """``TakeDiscard`` gives the mover the upcard."""
    assert (TookDiscard(seat=0, cards=cards("8S")),) == decide(opening(basic()), 0, TakeDiscard())


@pytest.mark.parametrize(
    "command",
    [Discard(card("5D")), meld("2C 3C 4C"), LayOff(card("5D"), 0, card_face(card("5D")))],
)
def test_a_seat_must_draw_first(command: Command) -> None:
    """Nothing but drawing is allowed before the draw: ``rules/wrong_phase``."""
    assert "rules/wrong_phase" == refusal(opening(basic()), 0, command)


@pytest.mark.parametrize("command", [DrawStock(), TakeDiscard()])
def test_a_seat_draws_once_per_turn(command: Command) -> None:
    """A second draw in the same turn is ``rules/wrong_phase``."""
    state = play(opening(basic()), 0, DrawStock())
    assert "rules/wrong_phase" == refusal(state, 0, command)


@pytest.mark.parametrize("drawn", [False, True])
def test_only_the_seat_to_move_may_act(drawn: bool) -> None:
    """Seat 1 may not act while seat 0 is to move: ``rules/not_your_turn``."""
    state = opening(basic())
    if drawn:
        state = play(state, 0, DrawStock())
    assert "rules/not_your_turn" == refusal(state, 1, DrawStock())
    assert "rules/not_your_turn" == refusal(state, 1, Discard(card("KH")))


@pytest.mark.parametrize(
    "command",
    [Discard(card("KH")), Discard(card("5D2")), meld("KH KS KD"), meld("2C 3C 4C 5C 6C 7C JS")],
)
def test_cards_used_must_be_held(command: Command) -> None:
    """Discarding or melding a card not in hand is ``rules/card_not_held``."""
    state = play(opening(basic()), 0, DrawStock())
    assert "rules/card_not_held" == refusal(state, 0, command)


def test_the_card_taken_from_the_pile_may_not_be_discarded() -> None:
    """After taking the upcard the mover may not discard it in that turn, but may any other."""
    state = play(opening(basic()), 0, TakeDiscard())
    assert "rules/discard_taken_card" == refusal(state, 0, Discard(card("8S")))
    assert Discard(card("8S")) not in legal_actions(state, 0)
    assert Discard(card("5D")) in legal_actions(state, 0)


def test_passing_is_refused_while_the_stock_lasts() -> None:
    """``Pass`` only declines the upcard once the stock is exhausted: ``rules/cannot_pass``."""
    assert "rules/cannot_pass" == refusal(opening(make_rules("block", {}, 2)), 0, Pass())


def test_a_lay_down_may_not_leave_only_the_taken_card() -> None:
    """Melding all but the card just taken would leave no legal discard."""
    state = play(opening(basic(), first=GO_OUT_RUN, stock="QD"), 0, TakeDiscard())
    assert "rules/no_discard_left" == refusal(state, 0, meld(GO_OUT_RUN))


MELD_LIMIT_HAND = "2C 3C 4C 5H 5S 5D 9H TD 7S QS"


def test_basic_allows_one_meld_per_turn() -> None:
    """In ``basic`` a second meld in the same turn is ``rules/meld_limit``."""
    state = play(opening(basic(), first=MELD_LIMIT_HAND), 0, DrawStock())
    assert "rules/meld_limit" == refusal(state, 0, meld("2C 3C 4C", "5H 5S 5D"))
    state = play(state, 0, meld("2C 3C 4C"))
    assert "rules/meld_limit" == refusal(state, 0, meld("5H 5S 5D"))
    assert [] == [action for action in legal_actions(state, 0) if isinstance(action, MeldCommand)]


@pytest.mark.parametrize(
    "rules",
    [
        make_rules("basic", {"melds_per_turn": "unlimited"}, 2),
        make_rules("ramino_classic", {}, 2),
    ],
    ids=["basic-unlimited", "ramino_classic"],
)
def test_unlimited_melds_per_turn(rules: Rules) -> None:
    """``melds_per_turn=unlimited`` and ``ramino_classic`` let a seat meld several times."""
    state = play(opening(rules, first=MELD_LIMIT_HAND), 0, DrawStock())
    together = play(state, 0, meld("2C 3C 4C", "5H 5S 5D"))
    one_by_one = play(state, 0, meld("2C 3C 4C"), meld("5H 5S 5D"))
    assert 2 == len(together.melds) == len(one_by_one.melds)


# Going out -------------------------------------------------------------------------------------


def test_going_out_by_discard_ends_the_hand_at_once() -> None:
    """Discarding the last card ends the hand: the winner collects the other hand."""
    state, events = go_out_by_discard(opening(basic(target=1000)))
    assert [Discarded, HandEnded] == kinds(events)
    ended = result(state)
    assert (0, "out", (0, 77)) == (ended.winner, ended.reason, ended.counts)
    assert Phase.DEAL == state.phase


def test_going_out_by_meld_needs_no_discard() -> None:
    """Melding the last cards ends the hand with no discard."""
    state = opening(basic(target=1000), first=GO_OUT_RUN, stock="QC")
    state = play(state, 0, DrawStock())
    state, events = step(state, 0, meld(GO_OUT_RUN + " QC"))
    assert [Melded, HandEnded] == kinds(events)
    assert (0, "out") == (result(state).winner, result(state).reason)


LAYOFF_HAND = "2C 3C 4C 5C 6C 7C 8C 9C TC KC"


def opponent_melds_kings(rules: Rules, first: str = LAYOFF_HAND) -> State:
    """Seat 0 draws and discards 5D; seat 1 draws 6D, melds KH KS KD (meld 0) and discards 6D.

    Seat 0 is then to draw JC.
    """
    state = opening(rules, first=first, stock="5D 6D JC")
    state = play(state, 0, DrawStock(), Discard(card("5D")))
    return play(state, 1, DrawStock(), meld("KH KS KD"), Discard(card("6D")))


def test_going_out_by_lay_off() -> None:
    """Laying off the last card (here on the opponent's meld) ends the hand."""
    state = play(opponent_melds_kings(basic(target=1000)), 0, DrawStock(), meld(GO_OUT_RUN))
    state, events = step(state, 0, LayOff(card("KC"), 0, card_face(card("KC"))))
    assert [LaidOff, HandEnded] == kinds(events)
    ended = result(state)
    assert (0, "out", True, (0, 47)) == (ended.winner, ended.reason, ended.rummy, ended.counts)


def test_no_one_may_lay_down_after_a_seat_goes_out() -> None:
    """Play stops at once: the other seat may neither draw nor meld, and has no legal action."""
    state, _ = go_out_by_discard(opening(basic(target=1000)))
    assert [] == legal_actions(state, 1)
    assert "rules/wrong_phase" == refusal(state, 1, DrawStock())
    assert "rules/wrong_phase" == refusal(state, 1, meld("2H 3H 4H"))


def test_must_discard_to_go_out_refuses_going_out_by_meld() -> None:
    """With ``must_discard_to_go_out`` melding the last card is ``rules/must_discard``."""
    rules = basic(must_discard_to_go_out=True, target=1000)
    state = play(opening(rules, first=GO_OUT_RUN, stock="QC"), 0, DrawStock())
    whole = meld(GO_OUT_RUN + " QC")
    assert "rules/must_discard" == refusal(state, 0, whole)
    assert whole not in legal_actions(state, 0)


def test_must_discard_to_go_out_refuses_going_out_by_lay_off() -> None:
    """With ``must_discard_to_go_out`` laying off the last card is ``rules/must_discard``."""
    rules = basic(must_discard_to_go_out=True, target=1000)
    state = play(opponent_melds_kings(rules), 0, DrawStock(), meld(GO_OUT_RUN))
    assert "rules/must_discard" == refusal(state, 0, LayOff(card("KC"), 0, card_face(card("KC"))))


def test_must_discard_to_go_out_still_allows_going_out_by_discard() -> None:
    """With ``must_discard_to_go_out`` a final discard goes out as usual."""
    _, events = go_out_by_discard(opening(basic(must_discard_to_go_out=True, target=1000)))
    assert [Discarded, HandEnded] == kinds(events)


# Going rummy -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("going_rummy", "points"), [("none", "77"), ("double", "154"), ("plus10", "87")]
)
def test_going_rummy_effect(going_rummy: str, points: str) -> None:
    """Going out in one turn doubles (default), adds 10 to, or leaves alone what changes hands."""
    state, _ = go_out_by_discard(opening(basic(going_rummy=going_rummy, target=1000)))
    ended = result(state)
    assert (True, (points, "0")) == (ended.rummy, ended.points)


def test_not_rummy_after_melding_in_an_earlier_turn() -> None:
    """A seat that melded in an earlier turn goes out plainly: nothing is doubled."""
    state = opening(basic(target=1000), stock="KC 7D JC")
    state = play(state, 0, DrawStock(), meld("2C 3C 4C"), Discard(card("KC")))
    state = play(state, 1, DrawStock(), Discard(card("7D")))
    state = play(state, 0, DrawStock(), meld("5C 6C 7C 8C 9C TC JC"), Discard(card("5D")))
    ended = result(state)
    assert (0, False, ("77", "0")) == (ended.winner, ended.rummy, ended.points)


def test_not_rummy_after_laying_off_in_an_earlier_turn() -> None:
    """A seat that laid off in an earlier turn goes out plainly: nothing is doubled."""
    state = opening(basic(target=1000), first=LAYOFF_HAND, stock="5D 6D 7D 8D JC")
    state = play(state, 0, DrawStock(), Discard(card("5D")))
    state = play(state, 1, DrawStock(), meld("KH KS KD"), Discard(card("6D")))
    state = play(state, 0, DrawStock(), LayOff(card("KC"), 0, card_face(card("KC"))))
    state = play(state, 0, Discard(card("7D")))
    state = play(state, 1, DrawStock(), Discard(card("8D")))
    state = play(state, 0, DrawStock(), meld(GO_OUT_RUN))
    ended = result(state)
    assert (0, False, ("47", "0")) == (ended.winner, ended.rummy, ended.points)


# Lay-offs --------------------------------------------------------------------------------------


def test_layoff_requires_own_meld() -> None:
    """With ``layoff_requires_own_meld`` a seat lays off only after a meld of his own."""
    rules = basic(layoff_requires_own_meld=True, target=1000)
    state = play(opponent_melds_kings(rules), 0, DrawStock())
    layoff = LayOff(card("KC"), 0, card_face(card("KC")))
    assert "rules/layoff_before_meld" == refusal(state, 0, layoff)
    assert layoff not in legal_actions(state, 0)
    state = play(state, 0, meld("2C 3C 4C"))
    assert layoff in legal_actions(state, 0)
    assert [LaidOff] == kinds(decide(state, 0, layoff))


def test_layoff_onto_any_meld_by_default() -> None:
    """Without the option a seat may lay off on another seat's meld before melding himself."""
    state = play(opponent_melds_kings(basic(target=1000)), 0, DrawStock())
    layoff = LayOff(card("KC"), 0, card_face(card("KC")))
    assert layoff in legal_actions(state, 0)
    assert [LaidOff] == kinds(decide(state, 0, layoff))


def test_a_layoff_must_extend_the_meld() -> None:
    """A card that does not extend the meld is refused with ``rules/invalid_layoff``."""
    state = play(opponent_melds_kings(basic()), 0, DrawStock())
    assert "rules/invalid_layoff" == refusal(state, 0, LayOff(card("TC"), 0, card_face(card("TC"))))


# Card values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("ace", "count"), [("low", 68), ("high_or_low", 82), ("around", 82)])
def test_an_ace_left_in_hand_is_worth_15_when_aces_can_be_high(ace: str, count: int) -> None:
    """A 1 with ``ace=low``; 15 when aces can be high (J/Q/K 10, pips face value)."""
    rules = basic(ace=ace, going_rummy="none", target=1000)
    state, _ = go_out_by_discard(opening(rules, second="AH KS KD 2H 3H 4H 9D 9S QH JS"))
    assert (0, count) == result(state).counts


# Stock exhaustion ------------------------------------------------------------------------------


def test_turn_over_makes_the_pile_the_stock_unshuffled() -> None:
    """With ``turn_over`` the pile, turned over, is the new stock: its bottom card comes first."""
    state = opening(basic())
    expected = state.pile + state.stock
    state = run_down_stock(state)
    assert expected == state.pile
    assert chance_pending(state)
    event = chance(state, random.Random(0))
    assert StockRebuilt(order=expected, shuffled=False) == event
    state = evolve(state, event)
    assert (expected, ()) == (state.stock, state.pile)
    seat = to_move(state)
    assert (Drew(seat=seat, card=card("8S")),) == decide(state, seat, DrawStock())


def test_shuffle_makes_the_shuffled_pile_the_stock() -> None:
    """With ``shuffle`` the rebuilt stock is a chance event: the pile's cards, shuffled."""
    state = run_down_stock(opening(basic(stock_exhausted="shuffle")))
    pile = state.pile
    event = chance(state, random.Random(7))
    assert isinstance(event, StockRebuilt)
    assert (True, Counter(pile)) == (event.shuffled, Counter(event.order))
    state = evolve(state, event)
    assert (event.order, ()) == (state.stock, state.pile)


def test_block_offers_the_upcard_or_pass_when_the_stock_is_empty() -> None:
    """With ``block`` the pile is never reused: the mover may only take the upcard or pass."""
    state = run_down_stock(opening(make_rules("block", {}, 2)))
    assert not chance_pending(state)
    assert [TakeDiscard(), Pass()] == legal_actions(state, to_move(state))
    assert "rules/stock_empty" == refusal(state, to_move(state), DrawStock())


def test_block_pass_ends_the_hand_settled_by_differences() -> None:
    """Passing ends the hand with no one out; the lower hand (seat 0, 59) wins the difference
    (77 - 59) and is the hand's winner."""
    state = run_down_stock(opening(make_rules("block", {}, 2)))
    seat = to_move(state)
    state, events = step(state, seat, Pass())
    assert [Declined, HandEnded] == kinds(events)
    ended = result(state)
    assert (0, -1, (59, 77), ("18", "0")) == (
        ended.winner,
        ended.ended_by,
        ended.counts,
        ended.points,
    )


def test_block_taking_the_upcard_continues_the_hand() -> None:
    """Taking the upcard with the stock empty is a normal turn; the next seat chooses again."""
    state = run_down_stock(opening(make_rules("block", {}, 2)))
    seat = to_move(state)
    keep = state.hands[seat][0]
    state = play(state, seat, TakeDiscard(), Discard(keep))
    assert Phase.DRAW == state.phase
    assert [TakeDiscard(), Pass()] == legal_actions(state, to_move(state))


@pytest.mark.parametrize("reuses", [0, 1])
def test_max_stock_reuses_ends_the_hand_like_block(reuses: int) -> None:
    """Past ``max_stock_reuses`` the pile is not reused and passing ends the hand."""
    state = opening(basic(max_stock_reuses=reuses, idle_turn_cap=1000))
    for _ in range(reuses):
        state = run_down_stock(state)
        rebuilt = chance(state, random.Random(0))
        assert isinstance(rebuilt, StockRebuilt)
        state = evolve(state, rebuilt)
    state = run_down_stock(state)
    assert not chance_pending(state)
    assert [TakeDiscard(), Pass()] == legal_actions(state, to_move(state))
    state = play(state, to_move(state), Pass())
    # No one out: seat 0's lower hand collects the difference and wins the hand.
    assert (0, ("18", "0")) == (result(state).winner, result(state).points)


def test_ties_for_the_lowest_hand_share_exact_fractions() -> None:
    """Two hands of 16 against 69: the pot of 53 is split 53/2 each, never rounded."""
    hands = ["AC AD 2C 2D 3C 3D 4C", "AH AS 2H 2S 3H 3S 4D", "KC KD KH KS QC QD 9H"]
    state = run_down_stock(deal(make_rules("block", {}, 3), hands, "JC", dealer=2))
    state = play(state, to_move(state), Pass())
    ended = result(state)
    assert ((16, 16, 69), ("53/2", "53/2", "0")) == (ended.counts, ended.points)
    assert (Fraction(53, 2), Fraction(53, 2), Fraction(0)) == state.scores


# Scoring modes ---------------------------------------------------------------------------------


def test_penalty_scoring_charges_each_loser_his_hand() -> None:
    """Under ``penalty`` the loser scores his hand (doubled for rummy); the winner nothing."""
    state, _ = go_out_by_discard(opening(basic(scoring="penalty", target=1000)))
    assert ("0", "154") == result(state).points


def test_penalty_scoring_with_no_winner_charges_everyone() -> None:
    """Under ``penalty`` a hand with no one out charges every seat his own hand."""
    state = run_down_stock(opening(make_rules("block", {"scoring": "penalty"}, 2)))
    state = play(state, to_move(state), Pass())
    assert ("59", "77") == result(state).points


def test_penalty_scoring_lowest_total_wins_at_the_target() -> None:
    """Under ``penalty`` the game ends when a total reaches the target; the lowest wins."""
    _, events = go_out_by_discard(opening(basic(scoring="penalty", target=100)))
    assert GameEnded(winners=(0,), totals=("0", "154")) == game_end(events)


def test_pay_winner_is_zero_sum() -> None:
    """Under ``pay_winner`` each loser pays the winner (doubled for rummy)."""
    state, _ = go_out_by_discard(opening(basic(scoring="pay_winner")))
    assert ("154", "-154") == result(state).points
    assert (Fraction(154), Fraction(-154)) == state.scores


def test_pay_winner_with_no_winner_pays_the_difference() -> None:
    """Under ``pay_winner`` with no one out each pays the lowest hand the difference."""
    state = run_down_stock(opening(make_rules("block", {"scoring": "pay_winner"}, 2)))
    state = play(state, to_move(state), Pass())
    assert ("18", "-18") == result(state).points


def test_pay_winner_is_played_for_a_fixed_number_of_deals() -> None:
    """``pay_winner`` has no target but a number of deals; a target contradicts it."""
    rules = basic(3, scoring="pay_winner")
    assert (None, True) == (rules.target, rules.deals is not None)
    with pytest.raises(VariantError) as caught:
        basic(3, scoring="pay_winner", target=100)
    assert "variant/contradictory_options" == caught.value.code


# Game end --------------------------------------------------------------------------------------


def test_the_game_ends_when_a_total_reaches_the_target() -> None:
    """At the default target of 100 the 154 scored ends the game; the highest total wins."""
    state, events = go_out_by_discard(opening(basic()))
    assert [Discarded, HandEnded, GameEnded] == kinds(events)
    assert GameEnded(winners=(0,), totals=("154", "0")) == game_end(events)
    assert is_over(state)
    assert ([], []) == (legal_actions(state, 0), legal_actions(state, 1))
    assert "rules/game_over" == refusal(state, 1, DrawStock())


def test_the_game_goes_on_below_the_target() -> None:
    """Below the target the hand ends and the next deal is due."""
    state, events = go_out_by_discard(opening(basic(target=155)))
    assert [Discarded, HandEnded] == kinds(events)
    assert (Phase.DEAL, (Fraction(154), Fraction(0))) == (state.phase, state.scores)


def test_a_fixed_number_of_deals_ends_the_game() -> None:
    """With ``deals=2`` the game ignores scores and ends after the second hand."""
    state, events = go_out_by_discard(opening(basic(deals=2)))
    assert [Discarded, HandEnded] == kinds(events)
    state = deal_next(state, [OPPONENT, RUN_HAND], "8S", "JC")
    assert (2, 1) == (state.hand_number, state.turn)
    state = play(state, 1, DrawStock(), meld(GO_OUT_RUN))
    state, events = step(state, 1, Discard(card("5D")))
    assert GameEnded(winners=(0, 1), totals=("154", "154")) == game_end(events)


# Safety cap ------------------------------------------------------------------------------------


def test_idle_turn_cap_ends_the_hand() -> None:
    """After ``idle_turn_cap`` turns in a row with no meld or lay-off the hand ends with no one
    out; it is settled by differences, so the lower hand (seat 0) wins it."""
    state = opening(basic(idle_turn_cap=4), stock="6D 7D 8D 9H")
    for seat, drawn in ((0, "6D"), (1, "7D"), (0, "8D")):
        state = play(state, seat, DrawStock(), Discard(card(drawn)))
    assert Phase.DRAW == state.phase
    state, events = step(play(state, 1, DrawStock()), 1, Discard(card("9H")))
    assert [Discarded, HandEnded] == kinds(events)
    ended = result(state)
    assert (0, -1, "idle_cap", ("18", "0")) == (
        ended.winner,
        ended.ended_by,
        ended.reason,
        ended.points,
    )


def test_a_meld_resets_the_idle_turn_count() -> None:
    """A turn with a meld starts the count again."""
    state = opening(basic(idle_turn_cap=4), stock="6D 7D 8D 9H TH JH 7S 6S")
    turns = [
        (0, "6D", None),
        (1, "7D", None),
        (0, "8D", None),
        (1, "9H", "2H 3H 4H"),
        (0, "TH", None),
        (1, "JH", None),
        (0, "7S", None),
    ]
    for seat, drawn, laid in turns:
        state = play(state, seat, DrawStock())
        if laid:
            state = play(state, seat, meld(laid))
        state = play(state, seat, Discard(card(drawn)))
    assert Phase.DRAW == state.phase
    state = play(state, 1, DrawStock(), Discard(card("6S")))
    assert "idle_cap" == result(state).reason


# Wrotham ---------------------------------------------------------------------------------------


WROTHAM_STARTER = "5H JK 7H 2S 3D 9C KC QD"
WROTHAM_OTHER = "6H 8D 4S TC JD AS 2D"


def wrotham(**options: object) -> Rules:
    """``wrotham`` rules for two seats."""
    return make_rules("wrotham", options, 2)


def test_wrotham_deals_three_jokers_and_eight_cards_to_the_starter() -> None:
    """55 cards; the starter (left of the dealer) gets 8, the other 7; then upcard and stock."""
    event = chance(new_game(wrotham()), random.Random(2))
    assert isinstance(event, Dealt)
    assert (55, 3) == (len(event.order), sum(1 for c in event.order if is_joker(c)))
    state = evolve(new_game(wrotham()), event)
    starter = (event.dealer + 1) % 2
    assert (8, 7) == (len(state.hands[starter]), len(state.hands[1 - starter]))
    assert (1, 55 - 16) == (len(state.pile), len(state.stock))


def test_wrotham_starter_does_not_draw_on_his_first_turn() -> None:
    """The starter's first legal actions have no draw; later turns start with a draw."""
    state = deal(wrotham(), [WROTHAM_STARTER, WROTHAM_OTHER], "8S", dealer=1)
    first = legal_actions(state, 0)
    assert [] == [a for a in first if isinstance(a, (DrawStock, TakeDiscard))]
    assert Discard(card("KC")) in first
    assert "rules/wrong_phase" == refusal(state, 0, DrawStock())
    state = play(state, 0, Discard(card("KC")))
    assert [DrawStock(), TakeDiscard()] == legal_actions(state, 1)
    state = play(state, 1, DrawStock(), Discard(card("AS")))
    assert [DrawStock(), TakeDiscard()] == legal_actions(state, 0)


def test_wrotham_joker_swap() -> None:
    """A seat holding the card a table joker stands for exchanges them; the joker joins his hand."""
    state = deal(wrotham(), [WROTHAM_STARTER, WROTHAM_OTHER], "8S", dealer=1)
    state = play(state, 0, meld("5H JK=6H 7H"), Discard(card("KC")))
    state = play(state, 1, DrawStock())
    swap = SwapJoker(card("6H"), 0)
    assert swap in legal_actions(state, 1)
    state, events = step(state, 1, swap)
    assert (SwappedJoker(seat=1, card=card("6H"), target=0, joker=card("JK")),) == events
    assert (True, False) == (card("JK") in state.hands[1], card("6H") in state.hands[1])
    assert (cards("5H 6H 7H"), spec("5H 6H 7H").faces) == (
        state.melds[0].meld.cards,
        state.melds[0].meld.faces,
    )


def test_joker_swap_is_refused_without_the_option() -> None:
    """``ramino_classic`` has ``joker_swap`` off by default: ``rules/no_joker_swap``."""
    rules = make_rules("ramino_classic", {}, 2)
    first, second = "5H JK 7H 2S 3D 9C KC QD 4D 5S", WROTHAM_OTHER + " 3S 4C 7C"
    state = opening(rules, first=first, second=second)
    state = play(state, 0, DrawStock(), meld("5H JK=6H 7H"), Discard(card("KC")))
    state = play(state, 1, DrawStock())
    assert "rules/no_joker_swap" == refusal(state, 1, SwapJoker(card("6H"), 0))


WROTHAM_FAST = "2C 3C 4C 5C 6C 7C 8C KD"
WROTHAM_LOSER = "2H 3H 4H 5H 6H 7H 9S"


def wrotham_quick_hand(state: State) -> tuple[State, tuple[Event, ...]]:
    """Deal the next Wrotham hand (seat 1 deals the first); its starter melds a seven-card run
    and discards KD, going out in his first turn."""
    dealer = 1 if state.hand_number == 0 else next_dealer(state)
    starter = (dealer + 1) % 2
    hands = [WROTHAM_LOSER, WROTHAM_LOSER]
    hands[starter] = WROTHAM_FAST
    if state.hand_number == 0:
        state = deal(state.rules, hands, "8S", dealer=dealer)
    else:
        state = deal_next(state, hands, "8S")
    state = play(state, starter, meld("2C 3C 4C 5C 6C 7C 8C"))
    return step(state, starter, Discard(card("KD")))


def test_wrotham_is_exactly_six_deals() -> None:
    """The game ends after the sixth hand, and not before, whatever the scores."""
    state = new_game(wrotham())
    for hand in range(1, 7):
        state, events = wrotham_quick_hand(state)
        assert (hand, hand == 6) == (state.hand_number, GameEnded in kinds(events))
    assert is_over(state)


def test_wrotham_deals_four_to_six_meld_only_the_whole_hand_at_once() -> None:
    """From deal 4 a lay-down must leave at most one card to discard: ``rules/all_at_once``."""
    state = new_game(wrotham())
    for _ in range(3):
        state, _ = wrotham_quick_hand(state)
    starter = (next_dealer(state) + 1) % 2
    hands = [WROTHAM_LOSER, WROTHAM_LOSER]
    hands[starter] = "2C 3C 4C 5S 6S 7S 8S KD"
    state = deal_next(state, hands, "QD")
    assert 4 == state.hand_number
    assert "rules/all_at_once" == refusal(state, starter, meld("2C 3C 4C"))
    for action in legal_actions(state, starter):
        if isinstance(action, MeldCommand):
            assert 7 <= sum(len(each.cards) for each in action.melds)
    whole = meld("2C 3C 4C", "5S 6S 7S 8S")
    assert whole in legal_actions(state, starter)
    state = play(state, starter, whole, Discard(card("KD")))
    assert (starter, "out") == (result(state).winner, result(state).reason)


def test_wrotham_deals_one_to_three_allow_partial_melds() -> None:
    """Before deal 4 a seat may meld part of his hand."""
    state = deal(wrotham(), ["2C 3C 4C 5S 6S 7S 8S KD", WROTHAM_LOSER], "QD", dealer=1)
    assert [Melded] == kinds(decide(state, 0, meld("2C 3C 4C")))


def test_wrotham_joker_left_in_hand_is_worth_15() -> None:
    """A joker left in a loser's hand counts 15."""
    hands = [WROTHAM_FAST, "JK 3H 4H 5H 6H 7H 9S"]
    state = deal(wrotham(going_rummy="none"), hands, "8S", dealer=1)
    state = play(state, 0, meld("2C 3C 4C 5C 6C 7C 8C"), Discard(card("KD")))
    assert (0, 49) == result(state).counts


# ramino_classic --------------------------------------------------------------------------------


CLASSIC_HAND = "2C 3C 4C 5H 6H 7H 8H 9S 9D 9C"
CLASSIC_LOSER = "JK 2D 3D 5S 6S 8C TC QC QS AD"
"""Seat 1's hand in the ``ramino_classic`` tests: 70 with the joker at 15."""


@pytest.mark.parametrize(
    ("drawn", "melds", "discard"),
    [
        ("9H", ("2C 3C 4C", "5H 6H 7H 8H 9H", "9S 9D 9C"), None),
        ("KD", ("2C 3C 4C", "5H 6H 7H 8H", "9S 9D 9C"), "KD"),
    ],
    ids=["without-discard", "with-discard"],
)
def test_ramino_classic_closes_with_or_without_a_discard(
    drawn: str, melds: tuple[str, ...], discard: str | None
) -> None:
    """Several melds in one turn may close the hand with or without a final discard."""
    rules = make_rules("ramino_classic", {"going_rummy": "none", "target": 1000}, 2)
    state = opening(rules, first=CLASSIC_HAND, second=CLASSIC_LOSER, stock=drawn)
    state = play(state, 0, DrawStock())
    state, events = step(state, 0, meld(*melds))
    if discard is not None:
        assert Phase.PLAY == state.phase
        state, events = step(state, 0, Discard(card(discard)))
    assert HandEnded in kinds(events)
    assert (0, (0, 70), ("70", "0")) == (
        result(state).winner,
        result(state).counts,
        result(state).points,
    )


def test_ramino_classic_joker_left_in_hand_is_worth_15() -> None:
    """A loser's joker counts 15 on top of his other cards (55 here)."""
    rules = make_rules("ramino_classic", {"target": 1000}, 2)
    state = opening(rules, first=CLASSIC_HAND, second=CLASSIC_LOSER, stock="9H")
    state = play(state, 0, DrawStock(), meld("2C 3C 4C", "5H 6H 7H 8H 9H", "9S 9D 9C"))
    assert (0, 55 + 15) == result(state).counts


def test_ramino_classic_going_rummy_doubles() -> None:
    """Closing in one turn doubles the winner's points by default."""
    rules = make_rules("ramino_classic", {"target": 1000}, 2)
    state = opening(rules, first=CLASSIC_HAND, second=CLASSIC_LOSER, stock="9H")
    state = play(state, 0, DrawStock())
    state = play(state, 0, meld("2C 3C 4C", "5H 6H 7H 8H 9H", "9S 9D 9C"))
    assert (True, ("140", "0")) == (result(state).rummy, result(state).points)


def test_ramino_classic_jokers_may_be_melded_with_a_declared_face() -> None:
    """A joker stands for the card declared for it; the table keeps that declaration."""
    rules = make_rules("ramino_classic", {}, 2)
    state = play(opening(rules, first="JK 2C 4C 9H 9C TS JD QD KC 5S"), 0, DrawStock())
    state = play(state, 0, meld("2C JK=3C 4C"))
    assert (cards("2C JK 4C"), spec("2C 3C 4C").faces) == (
        state.melds[0].meld.cards,
        state.melds[0].meld.faces,
    )


def test_ramino_classic_has_two_jokers_per_deck_by_default() -> None:
    """``decks=2`` gives 4 jokers (RULES.md: ``jokers`` is 0 or 2 per deck)."""
    rules = make_rules("ramino_classic", {"decks": 2}, 4)
    assert (4, 108) == (rules.jokers, rules.deck_size)


@pytest.mark.parametrize("jokers", [1, 3])
def test_ramino_classic_jokers_option_is_zero_or_two(jokers: int) -> None:
    """RULES.md allows 0 or 2 jokers per deck; anything else is ``variant/bad_option``."""
    with pytest.raises(VariantError) as caught:
        make_rules("ramino_classic", {"jokers": jokers}, 2)
    assert "variant/bad_option" == caught.value.code


# legal_actions ---------------------------------------------------------------------------------


_COMMAND_ORDER = (DrawStock, TakeDiscard, Pass, MeldCommand, LayOff, SwapJoker, Discard)


def command_key(command: Command) -> tuple[int, tuple[object, ...]]:
    """The documented order of legal actions: by kind (draws, pass, melds, lay-offs, swaps,
    discards), then by cards."""
    kind = _COMMAND_ORDER.index(type(command))
    match command:
        case MeldCommand(melds=melds):
            return kind, tuple((each.cards, each.faces) for each in melds)
        case LayOff(card=laid, target=target, face=face):
            return kind, (laid, target, face)
        case SwapJoker(card=swapped, target=target):
            return kind, (swapped, target)
        case Discard(card=discarded):
            return kind, (discarded,)
        case TakeDiscard(count=count):
            return kind, (count,)
    return kind, ()


def test_legal_actions_are_empty_for_a_seat_not_to_move() -> None:
    """Only the seat to move has legal actions; nobody has any while a deal is due."""
    state = opening(basic())
    assert ([DrawStock(), TakeDiscard()], []) == (legal_actions(state, 0), legal_actions(state, 1))
    fresh = new_game(basic())
    assert ([], []) == (legal_actions(fresh, 0), legal_actions(fresh, 1))


@pytest.mark.parametrize(
    ("name", "players", "options"),
    [
        ("basic", 2, {}),
        ("basic", 4, {"ace": "around", "layoff_requires_own_meld": True}),
        ("block", 3, {}),
        ("wrotham", 2, {}),
        ("ramino_classic", 3, {}),
        ("ramino_classic", 4, {"joker_swap": True}),
    ],
)
def test_legal_actions_are_sorted_and_all_accepted(
    name: str, players: int, options: dict[str, object]
) -> None:
    """Along a seeded random game, every listed action is sorted and ``decide`` accepts it."""
    rng = random.Random(f"{name}-{players}")
    state = new_game(name, options, players)
    for _ in range(400):
        if is_over(state):
            break
        if chance_pending(state):
            state = evolve(state, chance(state, rng))
            continue
        seat = to_move(state)
        actions = legal_actions(state, seat)
        assert sorted(actions, key=command_key) == actions
        assert len(set(map(command_key, actions))) == len(actions)
        for action in actions:
            decide(state, seat, action)
        for other in range(players):
            if other != seat:
                assert [] == legal_actions(state, other)
        melds = [a for a in actions if isinstance(a, (MeldCommand, LayOff))]
        choice = rng.choice(melds if melds and rng.random() < 0.7 else actions)
        for event in decide(state, seat, choice):
            state = evolve(state, event)
