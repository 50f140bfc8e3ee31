"""Positions that once broke the engine, kept as regression tests in position notation."""

from __future__ import annotations

import random

import pytest

from server.engine import (
    IllegalMoveError,
    Knock,
    SwapJoker,
    chance,
    chance_pending,
    decide,
    evolve,
    is_over,
    legal_actions,
    new_game,
    parse_card,
    to_move,
)
from server.engine.position import from_position
from server.engine.scoring import GAME_HAND_CAP

# Ramino, seat 2 to play: he took JK6 from the pile and laid it off as 6H; swapping his 6H2
# for that joker would leave him holding only the card taken this turn, which he may not
# discard, and Ramino does not let him go out without a discard: no legal move would remain.
SWAP_BACK_THE_TAKEN_JOKER = (
    "ramino1 ramino 4 play hand=1 dealer=3 turn=2 scores=0,0,0,0 active=1111"
    " hands=8C2/3S2/6H2/KH2.6S2"
    " stock=AD.5H2.3C2.8S.AS2.4H2.6H.TS.4S2.TS2.3D2.6C2.6C.TD2.AC.AS.4H.QS.QD2.KS.KD.KC.AH.TH"
    ".9S.3S.QS2.QH2.8S2.2C2.9C.QC.2H.5C2.3C.6D.JS.KH.3H.KD2.8D.2S2.8C.KS2.QH.5S"
    " pile=4C2.7H.7C.4D.4S.TC2.7S2.JH.8H2.4C.6S"
    " melds=2:8D2.0:9D.0:TD.0:JD.1:QD.2:JK=KD|1:9C2.2:9D2.1:9H2.1:9S2"
    "|3:AD2.1:2D2.1:3D.2:4D2.1:5D.0:6D2.3:7D2|3:TC.1:JC2.2:QC2.2:KC2.1:AC2"
    "|1:7C2.0:7D.2:7H2.2:7S|3:JC.0:JD2.3:JH2.3:JS2|1:2C.0:2D.3:2H2.1:2S"
    "|1:8H.2:9H.2:TH2.2:JK5=JH.0:JK4=QH|0:5C.0:5D2.0:5S2"
    "|3:AH2.3:JK2=2H.3:3H2.3:JK3=4H.3:5H.2:JK6=6H"
    " taken=JK6 required=- melded=1111 laid_before=1111 melds_this_turn=0 laid_this_turn=yes"
    " reuses=1 idle_turns=0 resume=- claim=- winners=- last_result=-"
)


def test_a_joker_swap_may_not_leave_only_the_card_taken_from_the_pile() -> None:
    """Swapping back the joker just taken from the pile is refused and not listed as legal."""
    state = from_position(SWAP_BACK_THE_TAKEN_JOKER)
    swap = SwapJoker(card=parse_card("6H2"), target=9)
    assert swap not in legal_actions(state, 2)
    with pytest.raises(IllegalMoveError) as caught:
        decide(state, 2, swap)
    assert "rules/no_discard_left" == caught.value.code
    assert [] != legal_actions(state, 2)


def test_a_knock_rummy_game_whose_players_never_knock_still_ends() -> None:
    """Hands end by the safety cap once the pile is reused, and the game by its hand cap."""
    state = new_game("knock", {"idle_turn_cap": 4}, 2)
    rng = random.Random(1)
    for _ in range(400_000):
        if is_over(state):
            break
        if chance_pending(state):
            state = evolve(state, chance(state, rng))
            continue
        seat = to_move(state)
        choices = [a for a in legal_actions(state, seat) if not isinstance(a, Knock)]
        for event in decide(state, seat, rng.choice(choices)):
            state = evolve(state, event)
    assert is_over(state)
    assert GAME_HAND_CAP == state.hand_number
