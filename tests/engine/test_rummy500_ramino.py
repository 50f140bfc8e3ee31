"""The rules of RULES.md for ``rummy500`` and ``ramino``, one behaviour per test.

Every situation is reached through real events: a stacked deal (``helpers.deal``) and commands
decided and evolved in turn (``helpers.play``). The last seat deals, so seat 0 moves first.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from protocol.game import (
    Claim,
    ClaimAnswered,
    Claimed,
    ClaimWindowClosed,
    ClaimWindowOpened,
    Floated,
)
from server.engine import (
    HIDDEN,
    Discard,
    Discarded,
    DrawStock,
    Event,
    GameEnded,
    HandEnded,
    LaidOff,
    LayOff,
    MeldCommand,
    Melded,
    Pass,
    Phase,
    RuleError,
    Rules,
    State,
    SwapJoker,
    SwappedJoker,
    TakeDiscard,
    TookDiscard,
    VariantError,
    card_face,
    chance,
    check_meld,
    decide,
    evolve,
    is_joker,
    legal_actions,
    make_rules,
    new_game,
    redact,
    view,
)
from server.engine.game import awaiting
from server.engine.scoring import meld_points, opening_points
from tests.engine.helpers import card, cards, deal, deal_next, meld, play, refusal, spec, step

# Private helpers -------------------------------------------------------------------------------


def _rummy500(players: int = 2, **options: object) -> Rules:
    """``rummy500`` rules for ``players`` seats with ``options``."""
    return make_rules("rummy500", options, players)


def _ramino(players: int = 2, **options: object) -> Rules:
    """``ramino`` rules for ``players`` seats with ``options``."""
    return make_rules("ramino", options, players)


def _deal(rules: Rules, hands: list[str], upcard: str, stock: str = "") -> State:
    """A first deal by the last seat, so that seat 0 moves first."""
    return deal(rules, hands, upcard, stock, dealer=rules.players - 1)


def _kinds(events: tuple[Event, ...]) -> list[type]:
    """The event types, in order."""
    return [type(event) for event in events]


def _result(state: State) -> HandEnded:
    """The last hand's result."""
    assert state.last_result is not None
    return state.last_result


def _layoff(text: str, target: int) -> LayOff:
    """Lay off the natural card ``text`` as itself on table meld ``target``."""
    laid = card(text)
    return LayOff(card=laid, target=target, face=card_face(laid))


def _dealt_by_chance(rules: Rules, seed: int = 7) -> State:
    """A game of ``rules`` after a shuffled first deal."""
    state = new_game(rules)
    return evolve(state, chance(state, random.Random(seed)))


def _padded(melds: tuple[str, ...], filler: str, size: int = 13) -> str:
    """The cards of ``melds`` (declarations dropped) and then ``filler`` cards, ``size`` in all."""
    named = [item.partition("=")[0] for text in melds for item in text.split()]
    spare = [item for item in filler.split() if item not in named]
    return " ".join(named + spare[: size - len(named)])


# Rummy 500: the pack ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("players", "hand_size", "pack", "jokers"),
    [
        (2, 13, 54, 2),
        (3, 7, 54, 2),
        (4, 7, 54, 2),
        (5, 7, 54, 2),
        (6, 7, 108, 4),
        (7, 7, 108, 4),
        (8, 7, 108, 4),
    ],
)
def test_rummy500_deals_13_to_two_players_7_otherwise_and_two_decks_from_six(
    players: int, hand_size: int, pack: int, jokers: int
) -> None:
    """2 players get 13 cards, 3+ get 7; 6-8 players use two decks with 4 jokers (108 cards)."""
    rules = _rummy500(players)
    assert (hand_size, pack, jokers) == (rules.hand_size, rules.deck_size, rules.jokers)
    state = _dealt_by_chance(rules)
    every_card = [c for hand in state.hands for c in hand] + list(state.pile) + list(state.stock)
    expected_hands = (hand_size,) * players
    assert expected_hands == tuple(len(hand) for hand in state.hands)
    assert (pack, jokers) == (len(set(every_card)), sum(1 for c in every_card if is_joker(c)))


def test_rummy500_without_jokers_deals_a_plain_pack() -> None:
    """``jokers=0`` plays with 52 cards and no joker reaches any hand, the pile or the stock."""
    state = _dealt_by_chance(_rummy500(3, jokers=0))
    every_card = [c for hand in state.hands for c in hand] + list(state.pile) + list(state.stock)
    assert (52, 0) == (len(every_card), sum(1 for c in every_card if is_joker(c)))


@pytest.mark.parametrize(
    ("players", "decks", "pack"), [(3, 2, 108), (5, 2, 108), (6, 1, 54), (2, 2, 108)]
)
def test_rummy500_decks_option_overrides_the_default(players: int, decks: int, pack: int) -> None:
    """The ``decks`` option sets the number of decks whatever the player count (2 jokers each)."""
    assert pack == _rummy500(players, decks=decks).deck_size


def test_rummy500_jokers_option_is_zero_or_two() -> None:
    """``jokers`` takes 0 or 2 per deck; any other count is ``variant/bad_option``."""
    with pytest.raises(VariantError) as caught:
        _rummy500(2, jokers=1)
    assert "variant/bad_option" == caught.value.code


# Rummy 500: taking from the spread pile --------------------------------------------------------

DEEP_HAND = "9H 9D 2C 3C 4C 7D JD KS 5H 8C QC 6S AD"
"""Seat 0's hand in the deep-draw tests: 9H 9D wait for 9S, and 2C 3C 4C is a meld of its own."""
DEEP_OPPONENT = "2D 3S 4H 5D 6C 7S 8H TC JH QS KD AC 3H"


def _deep_pile(rules: Rules, upcard: str = "9S") -> State:
    """Both seats draw and discard once, so the pile is ``upcard`` TH TS and seat 0 is to draw."""
    state = _deal(rules, [DEEP_HAND, DEEP_OPPONENT], upcard, "TH TS 5C")
    state = play(state, 0, DrawStock(), Discard(card("TH")))
    return play(state, 1, DrawStock(), Discard(card("TS")))


def test_deep_draw_takes_the_chosen_card_and_every_card_above_it() -> None:
    """``TakeDiscard(count=3)`` takes the third card from the top and the two above it."""
    state, events = step(_deep_pile(_rummy500()), 0, TakeDiscard(count=3))
    assert (TookDiscard(seat=0, cards=cards("9S TH TS")),) == events
    assert ((), cards("9S TH TS")) == (state.pile, state.taken)
    assert 16 == len(state.hands[0])


def test_deep_draw_is_legal_only_when_the_bottom_card_can_be_laid_down() -> None:
    """TH (depth 2) cannot be laid down at once, so only the upcard and 9S (depth 3) are offered."""
    state = _deep_pile(_rummy500())
    expected = [DrawStock(), TakeDiscard(count=1), TakeDiscard(count=3)]
    assert expected == legal_actions(state, 0)
    assert "rules/cannot_use_taken_card" == refusal(state, 0, TakeDiscard(count=2))


def test_deep_draw_forces_a_meld_of_the_bottom_card() -> None:
    """After a deep draw the only legal moves are lay-downs of the bottom card."""
    state = play(_deep_pile(_rummy500()), 0, TakeDiscard(count=3))
    assert card("9S") == state.required
    assert [meld("9D 9H 9S")] == legal_actions(state, 0)
    assert "rules/must_use_taken_card" == refusal(state, 0, Discard(card("5H")))
    assert "rules/must_use_taken_card" == refusal(state, 0, meld("2C 3C 4C"))


def test_after_the_deep_card_is_melded_another_taken_card_may_be_discarded() -> None:
    """Once 9S is melded the turn goes on; TH, taken with it, may be the discard."""
    state = play(_deep_pile(_rummy500()), 0, TakeDiscard(count=3), meld("9D 9H 9S"))
    assert -1 == state.required
    assert Discard(card("TH")) in legal_actions(state, 0)
    assert meld("2C 3C 4C") in legal_actions(state, 0)
    state, events = step(state, 0, Discard(card("TH")))
    assert (Discarded(seat=0, card=card("TH")),) == events
    assert (1, Phase.DRAW) == (state.turn, state.phase)


def test_the_single_card_taken_from_the_pile_may_not_be_discarded() -> None:
    """The upcard taken alone may not be discarded that turn (``rules/discard_taken_card``)."""
    state = play(_deep_pile(_rummy500()), 0, TakeDiscard(count=1))
    assert "rules/discard_taken_card" == refusal(state, 0, Discard(card("TS")))
    assert Discard(card("TS")) not in legal_actions(state, 0)
    assert Discard(card("5H")) in legal_actions(state, 0)


def test_an_upcard_taken_alone_need_not_be_used_by_default() -> None:
    """Without ``top_discard_must_be_used`` the upcard is free to take and keep."""
    state = _deal(_rummy500(), [DEEP_HAND, DEEP_OPPONENT], "KH", "TH")
    assert [DrawStock(), TakeDiscard(count=1)] == legal_actions(state, 0)
    state = play(state, 0, TakeDiscard())
    assert -1 == state.required
    assert Discard(card("5H")) in legal_actions(state, 0)


def test_top_discard_must_be_used_refuses_an_unusable_upcard() -> None:
    """With ``top_discard_must_be_used`` the upcard KH, which cannot be laid down, is refused."""
    state = _deal(_rummy500(top_discard_must_be_used=True), [DEEP_HAND, DEEP_OPPONENT], "KH", "TH")
    assert [DrawStock()] == legal_actions(state, 0)
    assert "rules/cannot_use_taken_card" == refusal(state, 0, TakeDiscard())


def test_top_discard_must_be_used_requires_laying_the_upcard_down() -> None:
    """With ``top_discard_must_be_used`` the upcard 9S is taken only to be laid down at once."""
    rules = _rummy500(top_discard_must_be_used=True)
    state = _deal(rules, [DEEP_HAND, DEEP_OPPONENT], "9S", "TH")
    state = play(state, 0, TakeDiscard())
    assert [meld("9D 9H 9S")] == legal_actions(state, 0)
    assert "rules/must_use_taken_card" == refusal(state, 0, Discard(card("5H")))
    state = play(state, 0, meld("9D 9H 9S"))
    assert Discard(card("5H")) in legal_actions(state, 0)


# Rummy 500: scoring ----------------------------------------------------------------------------

PADDING = "KC2 9D2 5S2 2H2 8C2 JD2 4S2 TC2 6C2 3D2 QD2 8S2 5D2"
"""Second-deck cards that fill a hand around the cards a test names."""
OPPONENT_PADDING = "2S2 3S2 4D2 6D2 7C2 9C2 JC2 QC2 KD2 AC2 6H2 9H2 JS2"


@pytest.mark.parametrize(
    ("values", "text", "points"),
    [
        ("standard", "AH 2H 3H", 6),
        ("standard", "QH KH AH", 35),
        ("standard", "AC AD AH", 45),
        ("standard", "2H JK=3H 4H", 21),
        ("standard", "JK=AH 2H 3H", 20),
        ("standard", "QH KH JK=AH", 35),
        ("5_10_15", "AH 2H 3H", 25),
        ("5_10_15", "9H TH JH", 25),
        ("5_10_15", "2H JK=3H 4H", 25),
    ],
    ids=[
        "ace-low-1",
        "ace-high-15",
        "ace-set-15",
        "joker-for-3-is-15",
        "joker-for-low-ace-is-15",
        "joker-for-high-ace-is-15",
        "5_10_15-ace-15",
        "5_10_15-ten-and-jack-10",
        "5_10_15-joker-15",
    ],
)
def test_rummy500_meld_values(values: str, text: str, points: int) -> None:
    """A melded ace is 1 below a 2 and 15 elsewhere; a joker is 15 whatever it stands for;
    ``values=5_10_15`` makes 2-9 5, 10-K 10, ace and joker 15 with no A-2-3 exception."""
    rules = make_rules("rummy500", {"values": values, "decks": 2}, 2)
    hands = [_padded((text,), PADDING), OPPONENT_PADDING]
    state = play(_deal(rules, hands, "7S2", "4C2"), 0, DrawStock(), meld(text))
    assert points == meld_points(state.melds, 0, rules)


@pytest.mark.parametrize(
    ("values", "counts", "points"),
    [
        ("standard", (0, 56, 44), ("56", "-56", "-44")),
        ("5_10_15", (0, 50, 40), ("75", "-50", "-40")),
    ],
)
def test_rummy500_hand_scores_melded_value_minus_cards_in_hand(
    values: str, counts: tuple[int, ...], points: tuple[str, ...]
) -> None:
    """Going out with A-2-3-JK and Q-K-A: the melds count for seat 0, every card in hand (an
    ace 15) counts against its holder."""
    rules = _rummy500(3, values=values)
    hands = ["AH 2H 3H JK QS KS AS", "AD 5C 9D KC 2S 7D 8C", "3C 4D 5S 6H 7S 9C JD"]
    state = play(_deal(rules, hands, "TH", "4C"), 0, DrawStock())
    state = play(state, 0, meld("AH 2H 3H JK=4H", "QS KS AS"), Discard(card("4C")))
    ended = _result(state)
    assert (0, counts, points) == (ended.winner, ended.counts, ended.points)


@pytest.mark.parametrize(("run", "points"), [("2H 3H 4H", 1), ("JH QH KH", 15)])
def test_an_ace_laid_off_below_the_two_is_worth_1_above_the_king_15(run: str, points: int) -> None:
    """Seat 1 lays AH off on seat 0's run: worth 1 below the 2, 15 above the king."""
    rules = _rummy500(decks=2)
    hands = [_padded((run,), PADDING), "AH " + " ".join(OPPONENT_PADDING.split()[:12])]
    state = _deal(rules, hands, "7S2", "4C2 5C2")
    state = play(state, 0, DrawStock(), meld(run), Discard(card("4C2")))
    state = play(state, 1, DrawStock(), _layoff("AH", 0))
    assert points == meld_points(state.melds, 1, rules)


def test_rummy500_jokers_may_not_be_swapped() -> None:
    """A joker's declared card is fixed for the hand: a swap is ``rules/no_joker_swap``."""
    rules = _rummy500(decks=2)
    hands = [_padded(("2H JK 4H",), PADDING), "3H " + " ".join(OPPONENT_PADDING.split()[:12])]
    state = _deal(rules, hands, "7S2", "4C2 5C2")
    state = play(state, 0, DrawStock(), meld("2H JK=3H 4H"), Discard(card("4C2")))
    state = play(state, 1, DrawStock())
    assert "rules/no_joker_swap" == refusal(state, 1, SwapJoker(card=card("3H"), target=0))


@pytest.mark.parametrize(
    ("bad", "code"), [("7H 7H2 7S", "rules/duplicate_suit"), ("KH AH 2H", "rules/invalid_meld")]
)
def test_rummy500_sets_need_different_suits_and_runs_never_turn_the_corner(
    bad: str, code: str
) -> None:
    """With two decks a set still has all suits different; K-A-2 is no run (``high_or_low``)."""
    rules = _rummy500(decks=2)
    state = _deal(rules, [_padded((bad,), PADDING), OPPONENT_PADDING], "7S2", "4C2")
    assert code == refusal(play(state, 0, DrawStock()), 0, meld(bad))


def _layoff_hand() -> State:
    """Seat 0 melds 5H 6H 7H; seat 1 lays off 8H on it; seat 2 draws and discards."""
    hands = ["5H 6H 7H 2S 3S 4S 5S", "8H 2C 4D 6S TD QS AD", "3C 5D 7S 9C JH KS 4C"]
    state = _deal(_rummy500(3), hands, "2D", "KC JC 9D QD")
    state = play(state, 0, DrawStock(), meld("5H 6H 7H"), Discard(card("KC")))
    state = play(state, 1, DrawStock(), _layoff("8H", 0), Discard(card("JC")))
    return play(state, 2, DrawStock(), Discard(card("9D")))


def test_a_laid_off_card_belongs_to_the_seat_that_laid_it_off() -> None:
    """The table meld records seat 1 as the owner of the 8H it laid off on seat 0's run."""
    state = _layoff_hand()
    assert (cards("5H 6H 7H 8H"), (0, 0, 0, 1)) == (
        state.melds[0].meld.cards,
        state.melds[0].owners,
    )
    assert (18, 8) == (
        meld_points(state.melds, 0, state.rules),
        meld_points(state.melds, 1, state.rules),
    )


def test_lay_offs_score_for_the_seat_that_laid_them_off() -> None:
    """At the end of the hand seat 1 scores its 8H minus its hand; seat 0 only its own cards."""
    state = play(_layoff_hand(), 0, DrawStock(), meld("2S 3S 4S 5S"), Discard(card("QD")))
    expected = ("32", "-39", "-48")
    assert expected == _result(state).points


# Rummy 500: calling "Rummy!" -------------------------------------------------------------------

CALL_HANDS = [
    "5H 6H 7H 8H KC 2D 9S",
    "2C 4D 6S 8C TD QS AD",
    "3C 5D 7S 9C JH KS 4C",
    "2H 4S 6C 8D TS QC AC",
]
"""Four seats; seat 0 melds 5H 6H 7H and discards the playable 8H."""


def _rummy_window() -> tuple[State, tuple[Event, ...]]:
    """Seat 0 draws JD, melds 5H 6H 7H and discards 8H: the "Rummy!" window opens."""
    state = _deal(_rummy500(4), CALL_HANDS, "3S", "JD QD")
    state = play(state, 0, DrawStock(), meld("5H 6H 7H"))
    return step(state, 0, Discard(card("8H")))


def test_a_playable_discard_opens_a_rummy_window_for_every_other_seat_nearest_first() -> None:
    """8H fits the run on the table: seats 1, 2, 3 (nearest first) may call for depth 1."""
    state, events = _rummy_window()
    expected = (
        Discarded(seat=0, card=card("8H")),
        ClaimWindowOpened(kind="rummy", seats=(1, 2, 3), depths=(1,)),
    )
    assert expected == events
    assert (Phase.CLAIM, (1, 2, 3)) == (state.phase, awaiting(state))
    assert [Claim(count=1), Pass()] == legal_actions(state, 3)
    assert [] == legal_actions(state, 0)
    assert "rules/not_your_turn" == refusal(state, 0, Claim(count=1))


def test_a_rummy_call_may_claim_only_an_offered_depth() -> None:
    """Claiming the card under 8H (not playable) is ``rules/cannot_claim``."""
    state, _ = _rummy_window()
    assert "rules/cannot_claim" == refusal(state, 1, Claim(count=2))


def test_when_everyone_passes_the_window_closes_and_the_next_seat_draws() -> None:
    """Three passes close the window; seat 1 then draws as usual and 8H stays on the pile."""
    state, _ = _rummy_window()
    state = play(state, 2, Pass())
    state = play(state, 3, Pass())
    state, events = step(state, 1, Pass())
    assert (ClaimAnswered(seat=1, count=0), ClaimWindowClosed()) == events
    assert (Phase.DRAW, 1, card("8H")) == (state.phase, state.turn, state.upcard)
    assert DrawStock() in legal_actions(state, 1)


def test_a_farther_call_waits_until_every_nearer_seat_has_passed() -> None:
    """Seat 3 calls first, then seat 2: neither wins while seat 1 is silent; seat 1's pass gives
    the card to seat 2, the nearer caller, although it called later."""
    state, _ = _rummy_window()
    state, events = step(state, 3, Claim(count=1))
    assert ((ClaimAnswered(seat=3, count=1),), (1, 2)) == (events, awaiting(state))
    state, events = step(state, 2, Claim(count=1))
    assert ((ClaimAnswered(seat=2, count=1),), (1,)) == (events, awaiting(state))
    state, events = step(state, 1, Pass())
    expected = (ClaimAnswered(seat=1, count=0), Claimed(seat=2, cards=cards("8H")))
    assert expected == events


def test_the_nearest_call_wins_at_once_even_when_sent_last() -> None:
    """Seat 3 calls, then seat 1 calls: seat 1 is nearest to the discarder and wins at once."""
    state, _ = _rummy_window()
    state = play(state, 3, Claim(count=1))
    _, events = step(state, 1, Claim(count=1))
    expected = (ClaimAnswered(seat=1, count=1), Claimed(seat=1, cards=cards("8H")))
    assert expected == events


def test_the_caller_must_lay_the_card_down_then_the_seat_about_to_draw_resumes() -> None:
    """Seat 2 wins the call: it may only lay off 8H; then seat 1, who was to draw, draws."""
    state, _ = _rummy_window()
    state = play(state, 1, Pass())
    state = play(state, 3, Pass())
    state = play(state, 2, Claim(count=1))
    assert (Phase.PLAY, 2, card("8H")) == (state.phase, state.turn, state.required)
    assert [_layoff("8H", 0)] == legal_actions(state, 2)
    assert "rules/must_use_taken_card" == refusal(state, 2, Discard(card("4C")))
    state, events = step(state, 2, _layoff("8H", 0))
    assert [LaidOff] == _kinds(events)
    assert (Phase.DRAW, 1, 7) == (state.phase, state.turn, len(state.hands[2]))
    assert (0, 0, 0, 2) == state.melds[0].owners


PILE_MELD_HANDS = [
    "6S 2C 4D 8C TD QH AD",
    "7S 3C 5D 9C JD KH 2H",
    "2D 4C 6D TC QD AH 3H",
    "3D 5C 7D 9D JC KD 4H",
]


def _pile_meld_window() -> tuple[State, tuple[Event, ...]]:
    """Seat 0 discards 6S on the upcard 5S, seat 1 discards 7S: 5S 6S 7S lie in the pile."""
    state = _deal(_rummy500(4), PILE_MELD_HANDS, "5S", "KC KS")
    state = play(state, 0, DrawStock(), Discard(card("6S")))
    state = play(state, 1, DrawStock())
    return step(state, 1, Discard(card("7S")))


def test_cards_that_meld_in_the_pile_open_a_rummy_window_at_their_depth() -> None:
    """5S 6S 7S in the pile form a run: seats 2, 3, 0 may call for depth 3."""
    state, events = _pile_meld_window()
    expected = ClaimWindowOpened(kind="rummy", seats=(2, 3, 0), depths=(3,))
    assert expected == events[-1]
    assert "rules/cannot_claim" == refusal(state, 2, Claim(count=1))


def test_a_caller_takes_the_card_and_all_above_it_and_must_meld_it() -> None:
    """Seat 3 calls depth 3: it takes 5S 6S 7S, must meld 5S, then seat 2 draws."""
    state, _ = _pile_meld_window()
    state = play(state, 2, Pass())
    state, events = step(state, 3, Claim(count=3))
    assert Claimed(seat=3, cards=cards("5S 6S 7S")) == events[-1]
    assert ((), 10) == (state.pile, len(state.hands[3]))
    assert [meld("5S 6S 7S")] == legal_actions(state, 3)
    state = play(state, 3, meld("5S 6S 7S"))
    assert (Phase.DRAW, 2) == (state.phase, state.turn)


NO_WINDOW_HANDS = ["5H 6H 7H 9C 9D 9S 9H", "2C 4D 6S 8C TD QS AD", "3C 5D 7S TC JH KS 4C"]
"""Seat 0 melds 5H 6H 7H 8H (or 5H 6H 7H) and the four nines after drawing."""


def test_no_rummy_window_when_the_discard_goes_out() -> None:
    """Seat 0 goes out by discarding 8H, playable on its run: the hand ends, no window opens."""
    state = _deal(_rummy500(3), NO_WINDOW_HANDS, "KD", "8H")
    state = play(state, 0, DrawStock(), meld("5H 6H 7H", "9C 9D 9S 9H"))
    state, events = step(state, 0, Discard(card("8H")))
    assert [Discarded, HandEnded] == _kinds(events)
    assert Phase.DEAL == state.phase


# Rummy 500: floating and the last discard ------------------------------------------------------


def test_without_floating_melding_the_last_cards_goes_out() -> None:
    """By default a seat that melds all its cards ends the hand."""
    state = _deal(_rummy500(3), NO_WINDOW_HANDS, "KD", "8H")
    _, events = step(play(state, 0, DrawStock()), 0, meld("5H 6H 7H 8H", "9C 9D 9S 9H"))
    assert [Melded, HandEnded] == _kinds(events)


def test_floating_keeps_the_hand_going_and_the_floater_draws_next_time() -> None:
    """With ``floating`` melding the last cards emits ``Floated``; the next seat draws, and at
    its next turn the floater draws too, then goes out by discarding."""
    state = _deal(_rummy500(3, floating=True), NO_WINDOW_HANDS, "KD", "8H QC JS 2D")
    state, events = step(play(state, 0, DrawStock()), 0, meld("5H 6H 7H 8H", "9C 9D 9S 9H"))
    assert (Melded, Floated(seat=0)) == (type(events[0]), events[1])
    assert (Phase.DRAW, 1, (), None) == (state.phase, state.turn, state.hands[0], state.last_result)
    state = play(state, 1, DrawStock(), Discard(card("QC")))
    state = play(state, 2, DrawStock(), Discard(card("JS")))
    assert 0 == state.turn
    assert DrawStock() in legal_actions(state, 0)
    state, events = step(play(state, 0, DrawStock()), 0, Discard(card("2D")))
    assert [Discarded, HandEnded] == _kinds(events)
    assert 0 == _result(state).winner


FLOAT_HANDS = ["5H 6H 7H 9C 9D 9S 9H", "2C 4D 6S 8C TD QS AD", "3C 5D 7S TC JH KS 4H"]
"""As ``NO_WINDOW_HANDS`` but seat 2 holds 4H, which fits seat 0's run."""


def _floater_to_move(discard_of_seat_2: str) -> State:
    """Seat 0 floats; seat 1 discards QC; seat 2 discards ``discard_of_seat_2`` (a window it
    opens is passed); seat 0, holding nothing, is to draw."""
    state = _deal(_rummy500(3, floating=True), FLOAT_HANDS, "KD", "8H QC JS 2D")
    state = play(state, 0, DrawStock(), meld("5H 6H 7H 8H", "9C 9D 9S 9H"))
    state = play(state, 1, DrawStock(), Discard(card("QC")))
    state = play(state, 2, DrawStock(), Discard(card(discard_of_seat_2)))
    if state.phase is Phase.CLAIM:
        state = play(state, 0, Pass())
        state = play(state, 1, Pass())
    return state


def test_a_floater_may_lay_off_a_single_pile_card_and_float_again() -> None:
    """Seat 0, floating, takes the upcard 4H, lays it off on its run and floats once more."""
    state = _floater_to_move("4H")
    assert (0, Phase.DRAW, ()) == (state.turn, state.phase, state.hands[0])
    state = play(state, 0, TakeDiscard())
    _, events = step(state, 0, _layoff("4H", 0))
    assert (LaidOff, Floated(seat=0)) == (type(events[0]), events[1])


def test_a_floater_may_not_take_an_upcard_he_cannot_lay_down() -> None:
    """A floater holds no card and the single card taken from the pile may not be discarded,
    so taking JS, which fits nothing, would leave no legal move: only the stock is offered."""
    state = _floater_to_move("JS")
    assert [DrawStock()] == legal_actions(state, 0)
    with pytest.raises(RuleError):
        decide(state, 0, TakeDiscard())


@pytest.mark.parametrize(("drawn", "accepted"), [("8H", False), ("QC", True)])
def test_unplayable_last_discard(drawn: str, accepted: bool) -> None:
    """With ``unplayable_last_discard`` going out with 8H, which fits the run, is refused
    (``rules/playable_discard``); going out with QC is fine."""
    rules = _rummy500(3, unplayable_last_discard=True)
    state = _deal(rules, NO_WINDOW_HANDS, "KD", drawn)
    state = play(state, 0, DrawStock(), meld("5H 6H 7H", "9C 9D 9S 9H"))
    if accepted:
        _, events = step(state, 0, Discard(card(drawn)))
        assert [Discarded, HandEnded] == _kinds(events)
    else:
        assert "rules/playable_discard" == refusal(state, 0, Discard(card(drawn)))
        assert [_layoff(drawn, 0)] == legal_actions(state, 0)


def _run_down_stock_passing_windows(state: State) -> State:
    """Draw and discard the drawn card in turn until the stock is empty; every claim window a
    discard opens is passed by every seat."""
    while state.stock:
        drawn = state.stock[0]
        state = play(state, state.turn, DrawStock(), Discard(drawn))
        while state.phase is Phase.CLAIM:
            state = play(state, awaiting(state)[0], Pass())
    return state


def test_rummy500_hand_ends_when_the_stock_is_empty_and_the_pile_is_declined() -> None:
    """With the stock gone the seat to move may pass; the hand ends with no winner and every
    seat scores what it melded minus its hand."""
    state = _deal(_rummy500(), [DEEP_HAND, DEEP_OPPONENT], "KH", "5C")
    state = play(state, 0, DrawStock(), meld("2C 3C 4C"), Discard(card("5C")))
    while state.phase is Phase.CLAIM:
        state = play(state, awaiting(state)[0], Pass())
    state = _run_down_stock_passing_windows(state)
    seat = state.turn
    assert Pass() in legal_actions(state, seat)
    state = play(state, seat, Pass())
    ended = _result(state)
    counts = tuple(sum(state.rules.values[card_face(c)] for c in hand) for hand in ended.hands)
    assert counts == ended.counts
    points = (9 - counts[0], -counts[1])
    # The hand's winner is the seat with more points (none on a tie); no one ended it.
    winner = -1 if points[0] == points[1] else points.index(max(points))
    expected = (winner, -1, "stock_exhausted", tuple(str(point) for point in points))
    assert expected == (ended.winner, ended.ended_by, ended.reason, ended.points)


def test_rummy500_pile_is_spread_every_card_public() -> None:
    """Every seat sees the whole discard pile, not just the upcard."""
    state = _deep_pile(_rummy500())
    assert (cards("9S TH TS"), cards("9S TH TS")) == (view(state, 0).pile, view(state, 1).pile)


# Rummy 500: the game ---------------------------------------------------------------------------


def test_rummy500_game_is_played_to_500() -> None:
    """The default target is 500 points."""
    assert 500 == _rummy500().target


def _race_to_target(leftover: str) -> tuple[State, tuple[Event, ...]]:
    """Target 30: seat 1 melds four kings keeping ``leftover``; seat 0 goes out with 31."""
    hands = ["3H 3S 3C 4D 5D 6D 7D", f"KH KS KD KC {leftover}", "AD 9H 8S 7C 6H 5C 2H"]
    state = _deal(_rummy500(3, target=30), hands, "8C", "JH QD TS 9C")
    state = play(state, 0, DrawStock(), Discard(card("JH")))
    state = play(state, 1, DrawStock(), meld("KH KS KD KC"), Discard(card("QD")))
    state = play(state, 2, DrawStock(), Discard(card("TS")))
    state = play(state, 0, DrawStock(), meld("3H 3S 3C", "4D 5D 6D 7D"))
    return step(state, 0, Discard(card("9C")))


def test_the_highest_total_wins_once_someone_reaches_the_target() -> None:
    """Seat 0 goes out with 31 but seat 1 has 33: seat 1 wins; seat 2 is negative."""
    state, events = _race_to_target("2C 3D 2S")
    expected = GameEnded(winners=(1,), totals=("31", "33", "-52"))
    assert expected == events[-1]
    assert (Phase.GAME_OVER, (1,)) == (state.phase, state.winners)


def test_a_tie_at_the_top_plays_another_hand() -> None:
    """Seats 0 and 1 both have 31 past the target of 30: no one wins, a new hand is dealt, and
    the game ends after it with the highest total winning."""
    state, events = _race_to_target("2C 3D 4S")
    assert [Discarded, HandEnded] == _kinds(events)
    assert (Phase.DEAL, ("31", "31", "-52")) == (state.phase, _result(state).totals)
    assert (Fraction(31), Fraction(31), Fraction(-52)) == state.scores
    hands = ["3S 3C 3D 4D 5D 6D 7D", "2H 3H 4H 5H 6H 7H 8H", "AD 9H 8S 7C 6S 5C 2S"]
    state = deal_next(state, hands, "TC", "KC")
    assert 1 == state.turn
    state = play(state, 1, DrawStock(), meld("2H 3H 4H 5H 6H 7H 8H"))
    _, events = step(state, 1, Discard(card("KC")))
    ended = events[-1]
    assert isinstance(ended, GameEnded)
    assert (1,) == ended.winners


# Ramino: the pack ------------------------------------------------------------------------------


@pytest.mark.parametrize("players", [2, 3, 4])
def test_ramino_deals_13_each_from_two_decks_and_six_jokers(players: int) -> None:
    """2-4 players, 110 cards (two decks and 6 jokers), 13 each."""
    rules = _ramino(players)
    assert (110, 6, 13) == (rules.deck_size, rules.jokers, rules.hand_size)
    state = _dealt_by_chance(rules)
    every_card = [c for hand in state.hands for c in hand] + list(state.pile) + list(state.stock)
    assert (13,) * players == tuple(len(hand) for hand in state.hands)
    assert (110, 6) == (len(set(every_card)), sum(1 for c in every_card if is_joker(c)))


@pytest.mark.parametrize("players", [1, 5])
def test_ramino_is_for_two_to_four_players(players: int) -> None:
    """Fewer than 2 or more than 4 players is ``variant/bad_players``."""
    with pytest.raises(VariantError) as caught:
        _ramino(players)
    assert "variant/bad_players" == caught.value.code


# Ramino: the opening ---------------------------------------------------------------------------


def _ramino_first_turn(melds: tuple[str, ...]) -> State:
    """Seat 0 holds the cards of ``melds`` (padded to 13) and has drawn 4H2."""
    hands = [_padded(melds, PADDING), OPPONENT_PADDING]
    state = _deal(_ramino(), hands, "TS2", "4H2 5H2")
    return play(state, 0, DrawStock())


@pytest.mark.parametrize(
    ("melds", "code"),
    [
        (("TH JH QH",), None),
        (("9H TH JH",), "rules/opening_too_low"),
        (("2C 3C 4C", "7S 7D 7C"), None),
        (("AC 2C 3C", "7S 7D 7C"), "rules/opening_too_low"),
        (("QS KS AS",), None),
        (("AH AS AD",), None),
        (("TH JK=JH QH",), None),
        (("2C JK=3C 4C", "6H 6S 6D"), "rules/opening_too_low"),
    ],
    ids=[
        "exactly-30",
        "29",
        "two-melds-30",
        "ace-low-is-1",
        "ace-high-is-11",
        "ace-set-is-11",
        "joker-as-jack",
        "joker-as-three",
    ],
)
def test_ramino_opening_needs_30_points(melds: tuple[str, ...], code: str | None) -> None:
    """A first lay-down (one or several melds in one command) must reach 30: J/Q/K 10, ace 1
    below a 2 and 11 elsewhere, a joker worth the card it stands for."""
    state = _ramino_first_turn(melds)
    if code is None:
        events = decide(state, 0, meld(*melds))
        assert [Melded] == _kinds(events)
    else:
        assert code == refusal(state, 0, meld(*melds))


@pytest.mark.parametrize(
    ("melds", "points"),
    [
        (("TH JH QH",), 30),
        (("9H TH JH",), 29),
        (("AC 2C 3C",), 6),
        (("QS KS AS",), 31),
        (("AH AS AD",), 33),
        (("TH JK=JH QH",), 30),
        (("2C JK=3C 4C", "6H 6S 6D"), 27),
        (("JK=AC 2C 3C",), 6),
    ],
)
def test_opening_points_count_the_declared_cards(melds: tuple[str, ...], points: int) -> None:
    """``opening_points`` values the melds as RULES.md's opening does."""
    rules = _ramino()
    shapes = [check_meld(spec(text).cards, rules, spec(text).faces) for text in melds]
    assert points == opening_points(shapes)


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ("AH JK=2H JK2=3H", "rules/min_natural"),
        ("JK=7C JK2=7D 7S", "rules/min_natural"),
        ("KH AH 2H", "rules/invalid_meld"),
        ("7H 7H2 7S", "rules/duplicate_suit"),
    ],
    ids=["ace-joker-joker", "two-jokers-in-a-set", "king-ace-two", "two-seven-of-hearts"],
)
def test_ramino_refuses_invalid_melds(bad: str, code: str) -> None:
    """Every meld needs two natural cards, K-A-2 is no run, and a set has no suit twice."""
    state = _ramino_first_turn((bad, "TC JC QC"))
    assert code == refusal(state, 0, meld(bad, "TC JC QC"))
    assert [Melded] == _kinds(decide(state, 0, meld("TC JC QC")))


# Ramino: lay-offs and joker swaps --------------------------------------------------------------


def _joker_on_the_table() -> State:
    """Seat 0 opens with TH JK=JH QH and discards; seat 1 (holding KH and JH) has drawn."""
    hands = [_padded(("TH JK QH",), PADDING), "KH JH 8S 8D 8C 9S 9D 9C 2S2 3S2 4D2 6D2 7C2"]
    state = _deal(_ramino(), hands, "TS2", "4H2 5H2")
    state = play(state, 0, DrawStock(), meld("TH JK=JH QH"), Discard(card("4H2")))
    return play(state, 1, DrawStock())


def test_lay_off_and_joker_swap_are_refused_before_opening() -> None:
    """Seat 1 has not opened: laying off KH and swapping JH for the joker are ``rules/not_opened``
    and neither is offered."""
    state = _joker_on_the_table()
    swap = SwapJoker(card=card("JH"), target=0)
    assert "rules/not_opened" == refusal(state, 1, _layoff("KH", 0))
    assert "rules/not_opened" == refusal(state, 1, swap)
    offered = [a for a in legal_actions(state, 1) if isinstance(a, (LayOff, SwapJoker))]
    assert [] == offered


def test_lay_off_is_allowed_after_opening() -> None:
    """Once seat 1 opens (8s and 9s, 51 points) it may lay KH off on seat 0's run."""
    state = play(_joker_on_the_table(), 1, meld("8S 8D 8C", "9S 9D 9C"))
    assert _layoff("KH", 0) in legal_actions(state, 1)
    state = play(state, 1, _layoff("KH", 0))
    assert cards("TH JK QH KH") == state.melds[0].meld.cards


def test_joker_swap_puts_the_natural_card_in_and_the_joker_in_hand() -> None:
    """After opening, seat 1 swaps its JH for the joker standing for JH."""
    state = play(_joker_on_the_table(), 1, meld("8S 8D 8C", "9S 9D 9C"))
    swap = SwapJoker(card=card("JH"), target=0)
    assert swap in legal_actions(state, 1)
    state, events = step(state, 1, swap)
    expected = (SwappedJoker(seat=1, card=card("JH"), target=0, joker=card("JK")),)
    assert expected == events
    assert cards("TH JH QH") == state.melds[0].meld.cards
    assert (True, False) == (card("JK") in state.hands[1], card("JH") in state.hands[1])


# Ramino: closing -------------------------------------------------------------------------------

CLOSER = "AC 2C 3C 4C 5C 6C 7C 8H 8S 8D KH KS KD"
"""A hand that is all melds: A-7 of clubs, three 8s, three kings."""
CLOSING_MELDS = ("AC 2C 3C 4C 5C 6C 7C", "8H 8S 8D", "KH KS KD")
LOSER = "JK AS KD2 QC JH 9S 2D 5H 3S 4D 6S TD 7H"
"""Penalty 121: joker 30, ace 15, K/Q/J/T 40, pips 36."""


def test_ramino_closing_needs_a_final_discard() -> None:
    """Melding all 14 cards is ``rules/must_discard``; melding 13 and discarding 8C closes."""
    state = _deal(_ramino(target=1000), [CLOSER, LOSER], "TS2", "8C")
    state = play(state, 0, DrawStock())
    every = meld("AC 2C 3C 4C 5C 6C 7C 8C", "8H 8S 8D", "KH KS KD")
    assert "rules/must_discard" == refusal(state, 0, every)
    state = play(state, 0, meld(*CLOSING_MELDS))
    _, events = step(state, 0, Discard(card("8C")))
    assert [Discarded, HandEnded] == _kinds(events)


def test_ramino_a_joker_may_be_the_closing_discard() -> None:
    """A joker may be the last card discarded."""
    state = _deal(_ramino(target=1000), [CLOSER, LOSER.replace("JK", "JK2")], "TS2", "JK")
    state = play(state, 0, DrawStock(), meld(*CLOSING_MELDS))
    _, events = step(state, 0, Discard(card("JK")))
    assert [Discarded, HandEnded] == _kinds(events)


def test_ramino_chiusura_a_zero_doubles_the_opponents_penalties() -> None:
    """Opening and closing in one turn doubles seat 1's 121 to 242."""
    state = _deal(_ramino(target=1000), [CLOSER, LOSER], "TS2", "8C")
    state = play(state, 0, DrawStock(), meld(*CLOSING_MELDS), Discard(card("8C")))
    ended = _result(state)
    assert (0, True, (0, 121), ("0", "242")) == (
        ended.winner,
        ended.rummy,
        ended.counts,
        ended.points,
    )


def _open_then_close(rules: Rules) -> State:
    """Seat 0 opens with 8s and kings, seat 1 draws and discards, seat 0 closes next turn."""
    state = _deal(rules, [CLOSER, LOSER], "TS2", "QS2 2S2 8C")
    state = play(state, 0, DrawStock(), meld("8H 8S 8D", "KH KS KD"), Discard(card("QS2")))
    state = play(state, 1, DrawStock(), Discard(card("2S2")))
    return play(state, 0, DrawStock(), meld("AC 2C 3C 4C 5C 6C 7C"), Discard(card("8C")))


def test_ramino_penalties_are_face_value_court_10_ace_15_joker_30() -> None:
    """Closing after opening in an earlier turn: seat 1 pays its hand, 121, undoubled."""
    ended = _result(_open_then_close(_ramino(target=1000)))
    assert (0, False, (0, 121), ("0", "121")) == (
        ended.winner,
        ended.rummy,
        ended.counts,
        ended.points,
    )


def test_chiudere_in_mano_off_forbids_opening_and_closing_in_one_turn() -> None:
    """With ``chiudere_in_mano=false`` the whole-hand opening is ``rules/no_close_on_opening``,
    and so is melding down to the last card in the opening turn."""
    state = _deal(_ramino(target=1000, chiudere_in_mano=False), [CLOSER, LOSER], "TS2", "8C")
    state = play(state, 0, DrawStock())
    assert "rules/no_close_on_opening" == refusal(state, 0, meld(*CLOSING_MELDS))
    state = play(state, 0, meld("8H 8S 8D", "KH KS KD"))
    assert "rules/no_close_on_opening" == refusal(state, 0, meld("AC 2C 3C 4C 5C 6C 7C"))


def test_chiudere_in_mano_off_allows_closing_in_a_later_turn() -> None:
    """With ``chiudere_in_mano=false`` a seat that opened earlier closes normally."""
    state = _open_then_close(_ramino(target=1000, chiudere_in_mano=False))
    assert 0 == _result(state).winner


# Ramino: elimination ---------------------------------------------------------------------------

COUNT_51 = "2D 2H 2S 3D 3H 3S 4D 4H 4S 5D 5H 5S 9D"
COUNT_50 = "2D2 2H2 2S2 3D2 3H2 3S2 4D2 4H2 4S2 5D2 5H2 5S2 8D2"


def _first_elimination() -> tuple[State, tuple[Event, ...]]:
    """Target 100, three seats: seat 0 closes a zero; seat 1 pays 102, seat 2 exactly 100."""
    state = _deal(_ramino(3, target=100), [CLOSER, COUNT_51, COUNT_50], "TS2", "8C")
    state = play(state, 0, DrawStock(), meld(*CLOSING_MELDS))
    return step(state, 0, Discard(card("8C")))


def test_a_total_above_the_target_eliminates_but_reaching_it_does_not() -> None:
    """Seat 1 (102) is eliminated; seat 2 (exactly 100) plays on, and so does the game."""
    state, events = _first_elimination()
    assert [Discarded, HandEnded] == _kinds(events)
    ended = _result(state)
    assert ((1,), ("0", "102", "100")) == (ended.eliminated, ended.totals)
    assert (Phase.DEAL, (True, False, True)) == (state.phase, state.active)


def test_an_eliminated_seat_gets_no_cards_and_is_skipped() -> None:
    """In the next deal seat 1 gets nothing, the others 13 each, and turns go 2, 0, 2."""
    state, _ = _first_elimination()
    state = deal_next(state, [COUNT_51, "", CLOSER], "TS2", "QS2 QH2 8C")
    assert (13, 0, 13) == tuple(len(hand) for hand in state.hands)
    assert ((2,), []) == (awaiting(state), legal_actions(state, 1))
    state = play(state, 2, DrawStock(), Discard(card("QS2")))
    assert 0 == state.turn
    state = play(state, 0, DrawStock(), Discard(card("QH2")))
    assert 2 == state.turn


def test_the_last_player_left_wins() -> None:
    """Seat 2 closes a zero in the second hand: seat 0 passes the target and seat 2 wins."""
    state, _ = _first_elimination()
    state = deal_next(state, [COUNT_51, "", CLOSER], "TS2", "8C")
    state = play(state, 2, DrawStock(), meld(*CLOSING_MELDS))
    state, events = step(state, 2, Discard(card("8C")))
    ended = _result(state)
    assert ((0,), ()) == (ended.eliminated, ended.hands[1])
    assert GameEnded(winners=(2,), totals=("102", "102", "100")) == events[-1]


def test_when_two_of_three_pass_the_target_at_once_the_last_one_left_wins() -> None:
    """Seats 1 and 2 both pay 102 past the target of 100: seat 0, the last one left, wins."""
    other_51 = "2D2 2H2 2S2 3D2 3H2 3S2 4D2 4H2 4S2 5D2 5H2 5S2 9D2"
    state = _deal(_ramino(3, target=100), [CLOSER, COUNT_51, other_51], "TS2", "8C")
    state = play(state, 0, DrawStock(), meld(*CLOSING_MELDS))
    state, events = step(state, 0, Discard(card("8C")))
    assert ((1, 2), (0,)) == (_result(state).eliminated, state.winners)
    assert GameEnded(winners=(0,), totals=("0", "102", "102")) == events[-1]


@pytest.mark.parametrize(("loser", "over"), [(COUNT_51, True), (COUNT_50, False)])
def test_two_players_the_first_past_the_target_loses_the_game(loser: str, over: bool) -> None:
    """Two seats, target 100: seat 1 paying 102 ends the game with seat 0 the winner; paying
    exactly 100 does not end it."""
    state = _deal(_ramino(target=100), [CLOSER, loser], "TS2", "8C")
    state = play(state, 0, DrawStock(), meld(*CLOSING_MELDS))
    state, events = step(state, 0, Discard(card("8C")))
    if over:
        assert ((1,), (0,)) == (_result(state).eliminated, state.winners)
        assert [Discarded, HandEnded, GameEnded] == _kinds(events)
    else:
        assert ((), Phase.DEAL) == (_result(state).eliminated, state.phase)


# Ramino: taking the upcard before opening ------------------------------------------------------

UPCARD_HAND = "TH JH 2H 3H KC2 9D2 5S2 2H2 8C2 JD2 4S2 TC2 6C2"
"""TH JH wait for QH (an opening of 30); 2H 3H wait for 4H (only 9)."""


@pytest.mark.parametrize(
    ("option", "upcard", "allowed"),
    [
        (True, "QH", True),
        (True, "4H", False),
        (True, "8D", False),
        (False, "4H", True),
        (False, "8D", True),
    ],
)
def test_open_to_take_upcard_allows_only_an_upcard_used_to_open(
    option: bool, upcard: str, allowed: bool
) -> None:
    """With ``open_to_take_upcard`` a seat that has not opened may take the upcard only if it
    can open with it this turn (4H makes a meld worth 9: not enough); without it, any upcard."""
    rules = _ramino(open_to_take_upcard=option)
    state = _deal(rules, [UPCARD_HAND, OPPONENT_PADDING], upcard, "4H2")
    if allowed:
        assert [DrawStock(), TakeDiscard()] == legal_actions(state, 0)
        assert [TookDiscard] == _kinds(decide(state, 0, TakeDiscard()))
    else:
        assert [DrawStock()] == legal_actions(state, 0)
        assert "rules/cannot_use_taken_card" == refusal(state, 0, TakeDiscard())


def test_open_to_take_upcard_allows_an_upcard_that_joins_a_bigger_opening() -> None:
    """TH JH QH (30) plus 2H 3H with the upcard 4H is an opening of 39 that uses 4H, so with
    ``open_to_take_upcard`` the 4H may be taken and the opening then offered."""
    hands = ["TH JH QH 2H 3H KC2 9D2 5S2 2H2 8C2 JD2 4S2 TC2", OPPONENT_PADDING]
    state = _deal(_ramino(open_to_take_upcard=True), hands, "4H", "4H2")
    assert [DrawStock(), TakeDiscard()] == legal_actions(state, 0)
    state = play(state, 0, TakeDiscard())
    assert meld("2H 3H 4H", "TH JH QH") in legal_actions(state, 0)


def test_an_opening_may_use_a_low_meld_beside_one_worth_30() -> None:
    """The opening TH JH QH plus 2H 3H 4H (39) is accepted in one command."""
    state = _ramino_first_turn(("TH JH QH", "2H 3H 4H"))
    assert [Melded] == _kinds(decide(state, 0, meld("TH JH QH", "2H 3H 4H")))


def test_open_to_take_upcard_requires_opening_with_the_taken_card() -> None:
    """The taken QH must be laid down in the opening before the turn can end."""
    state = _deal(_ramino(open_to_take_upcard=True), [UPCARD_HAND, OPPONENT_PADDING], "QH", "4H2")
    state = play(state, 0, TakeDiscard())
    assert "rules/must_use_taken_card" == refusal(state, 0, Discard(card("KC2")))
    offered = legal_actions(state, 0)
    assert offered
    assert all(isinstance(a, MeldCommand) and card("QH") in a.melds[0].cards for a in offered)
    state = play(state, 0, meld("TH JH QH"), Discard(card("KC2")))
    assert 1 == state.turn


def test_open_to_take_upcard_leaves_the_upcard_free_after_opening() -> None:
    """A seat that has opened may take any upcard."""
    hands = ["TH JH QH 2H 3H KC2 9D2 5S2 2H2 8C2 JD2 4S2 TC2", OPPONENT_PADDING]
    state = _deal(_ramino(open_to_take_upcard=True), hands, "8D", "4H2 9S")
    state = play(state, 0, DrawStock(), meld("TH JH QH"), Discard(card("4H2")))
    state = play(state, 1, DrawStock(), Discard(card("9S")))
    assert TakeDiscard() in legal_actions(state, 0)
    assert [TookDiscard] == _kinds(decide(state, 0, TakeDiscard()))


# Ramino: bussare -------------------------------------------------------------------------------

SUIT_HANDS = [
    "AC 2C 3C 4C 5C 6C 7C 8C 9C TC JC QC KC",
    "AD 2D 3D 4D 5D 6D 7D 8D 9D TD JD QD KD",
    "AH 2H 3H 4H 5H 6H 7H 8H 9H TH JH QH KH",
    "AS 2S 3S 4S 5S 6S 7S 8S 9S TS JS QS KS",
]


def _bussare_window(players: int = 4) -> tuple[State, tuple[Event, ...]]:
    """Seat 0 draws AC2 and discards it: a ``bussare`` window opens."""
    rules = _ramino(players, bussare=True)
    state = _deal(rules, SUIT_HANDS[:players], "JK", "AC2 2C2 3C2 4C2")
    state = play(state, 0, DrawStock())
    return step(state, 0, Discard(card("AC2")))


@pytest.mark.parametrize(("players", "seats"), [(4, (2, 3)), (3, (2,))])
def test_bussare_window_skips_the_discarder_and_the_next_seat(
    players: int, seats: tuple[int, ...]
) -> None:
    """Every seat but the discarder and the next one may claim the upcard."""
    state, events = _bussare_window(players)
    assert ClaimWindowOpened(kind="bussare", seats=seats, depths=(1,)) == events[-1]
    assert seats == awaiting(state)
    assert [Claim(count=1), Pass()] == legal_actions(state, seats[0])
    assert [] == legal_actions(state, 1)
    assert "rules/not_your_turn" == refusal(state, 1, Claim(count=1))


def test_bussare_claimer_gets_the_upcard_and_two_hidden_stock_cards() -> None:
    """Seat 3 claims (seat 2 passes): AC2 plus 2C2 3C2 from the stock, hidden from the others."""
    state, _ = _bussare_window()
    state = play(state, 3, Claim(count=1))
    before = state
    state, events = step(state, 2, Pass())
    claimed = Claimed(seat=3, cards=cards("AC2"), stock_cards=cards("2C2 3C2"))
    assert claimed == events[-1]
    hidden = Claimed(seat=3, cards=cards("AC2"), stock_cards=(HIDDEN, HIDDEN))
    assert hidden == redact(before, claimed, 0)
    assert hidden == redact(before, claimed, None)
    assert claimed == redact(before, claimed, 3)
    assert (16, len(before.stock) - 2) == (len(state.hands[3]), len(state.stock))


def test_bussare_claimer_plays_a_full_turn_then_play_goes_on_from_his_left() -> None:
    """Seat 3 plays at once without drawing; after his discard the window (seats 1, 2) closes
    and seat 0, on his left, draws: seat 1's turn is skipped."""
    state, _ = _bussare_window()
    state = play(state, 2, Pass())
    state = play(state, 3, Claim(count=1))
    assert (Phase.PLAY, 3) == (state.phase, state.turn)
    assert DrawStock() not in legal_actions(state, 3)
    state, events = step(state, 3, Discard(card("KS")))
    assert ClaimWindowOpened(kind="bussare", seats=(1, 2), depths=(1,)) == events[-1]
    state = play(state, 1, Pass())
    state = play(state, 2, Pass())
    assert (Phase.DRAW, 0) == (state.phase, state.turn)


def test_bussare_nearest_claim_wins() -> None:
    """Seat 3 claims first, seat 2 later: seat 2 is nearer in turn order and wins."""
    state, _ = _bussare_window()
    state = play(state, 3, Claim(count=1))
    _, events = step(state, 2, Claim(count=1))
    assert Claimed(seat=2, cards=cards("AC2"), stock_cards=cards("2C2 3C2")) == events[-1]


def test_bussare_needs_three_or_four_players() -> None:
    """``bussare`` with two players is a ``VariantError``."""
    with pytest.raises(VariantError) as caught:
        _ramino(2, bussare=True)
    assert "variant/contradictory_options" == caught.value.code


# Going out by a lay-down counts that lay-down ---------------------------------------------------

_OUT_BY_MELD = ["7H 8H 9H KS KD KC 2C 3C 4C 5C 6C 7C 8C", "2D 3D 4D 5S 6S 7S 8D 9D TS JD QD 2H 3H"]
"""Seat 0 goes out after drawing 9C. Seat 1 holds 2+3+4+5+6+7+8+9+10+10+10+2+3 = 79."""


def test_rummy500_going_out_by_meld_counts_the_last_meld() -> None:
    """Seat 0 lays everything down in one meld command after drawing 9C: 7+8+9 = 24, 2C..9C =
    44, KS KD KC = 30, so 98 for him; seat 1 laid nothing and holds 79: -79."""
    rules = _rummy500(2)
    state = play(_deal(rules, _OUT_BY_MELD, "AS", "9C"), 0, DrawStock())
    state = play(state, 0, meld("7H 8H 9H", "2C 3C 4C 5C 6C 7C 8C 9C", "KS KD KC"))
    ended = _result(state)
    expected = (0, 0, "out", ("98", "-79"))
    assert expected == (ended.winner, ended.ended_by, ended.reason, ended.points)


def test_rummy500_going_out_by_lay_off_counts_the_last_card() -> None:
    """Seat 0 melds all but 9C (89), then lays 9C off on his own club run to go out: 89 + 9 = 98;
    seat 1: -79."""
    rules = _rummy500(2)
    state = play(_deal(rules, _OUT_BY_MELD, "AS", "9C"), 0, DrawStock())
    state = play(state, 0, meld("7H 8H 9H", "2C 3C 4C 5C 6C 7C 8C", "KS KD KC"))
    state = play(state, 0, _layoff("9C", 1))
    ended = _result(state)
    assert ("98", "-79") == ended.points
