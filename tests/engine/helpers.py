"""Small builders shared by engine tests: stacked deals, meld commands and turns played in order.

Tests reach the situations they check through real events: ``deal`` builds the ``Dealt`` event a
shuffle could have produced (the pack stacked so that each seat gets the cards named), ``play``
decides and evolves commands one after the other, and ``run_down_stock`` plays draw-and-discard
turns until the stock is empty.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from server.engine import (
    Card,
    Command,
    Dealt,
    Discard,
    DrawStock,
    Event,
    MeldCommand,
    MeldSpec,
    Phase,
    RuleError,
    Rules,
    State,
    apply,
    card_face,
    chance,
    chance_pending,
    decide,
    describe_command,
    evolve,
    format_cards,
    make_deck,
    new_game,
    parse_card,
    parse_cards,
    parse_face,
    solver,
    to_move,
)
from server.engine.game import deal_layout

__all__ = [
    "card",
    "cards",
    "deal",
    "deal_next",
    "meld",
    "next_dealer",
    "play",
    "pure_python_solver",
    "refusal",
    "run_down_stock",
    "spec",
    "stacked_order",
    "step",
]


def card(text: str) -> Card:
    """One card in notation: ``card("7H2")``."""
    return parse_card(text)


def cards(text: str) -> tuple[Card, ...]:
    """Cards in notation, in the order written: ``cards("7H 7H2 JK")``."""
    return parse_cards(text)


def spec(text: str) -> MeldSpec:
    """One meld in notation; a joker names the card it stands for after ``=``: ``5H JK=6H 7H``."""
    placed: list[Card] = []
    faces: list[int] = []
    for item in text.split():
        card_text, _, face_text = item.partition("=")
        card = parse_card(card_text)
        placed.append(card)
        faces.append(parse_face(face_text) if face_text else card_face(card))
    return MeldSpec(cards=tuple(placed), faces=tuple(faces))


def meld(*texts: str) -> MeldCommand:
    """A ``MeldCommand`` laying down one new meld per text (see ``spec``)."""
    return MeldCommand(melds=tuple(spec(text) for text in texts))


def stacked_order(
    state: State, dealer: int, hands: Sequence[str], upcard: str, stock: str = ""
) -> tuple[Card, ...]:
    """The pack order of a deal by ``dealer`` that gives each seat the cards of ``hands``.

    Cards go where ``deal_layout`` sends them; then ``upcard``; then ``stock``, drawn first; then
    every other card of the pack in ``make_deck`` order.

    Raises:
        ValueError: a card is named twice or is not in the pack, or a hand has the wrong size.
    """
    rules = state.rules
    pack = make_deck(rules.decks, rules.jokers)
    wanted = [list(parse_cards(text)) for text in hands]
    named = [card for hand in wanted for card in hand]
    named.append(parse_card(upcard))
    named.extend(parse_cards(stock))
    if len(set(named)) != len(named):
        raise ValueError(f"a card is named twice: {format_cards(named)}")
    unknown = [card for card in named if card not in pack]
    if unknown:
        raise ValueError(f"not in this pack: {format_cards(unknown)}")
    if len(wanted) != state.players:
        raise ValueError(f"{len(wanted)} hands for {state.players} seats")
    placeholder = Dealt(hand=state.hand_number + 1, dealer=dealer, order=pack)
    owners, upcard_index = deal_layout(state, placeholder)
    for seat, hand in enumerate(wanted):
        expected = owners[:upcard_index].count(seat)
        if len(hand) != expected:
            raise ValueError(f"seat {seat} gets {expected} cards, not {len(hand)}: {hands[seat]}")
    order = [wanted[owner].pop(0) for owner in owners[:upcard_index]]
    order.append(parse_card(upcard))
    order.extend(parse_cards(stock))
    used = set(order)
    order.extend(card for card in pack if card not in used)
    return tuple(order)


def deal(
    rules: Rules,
    hands: Sequence[str],
    upcard: str,
    stock: str = "",
    dealer: int = 0,
    cuts: str = "",
) -> State:
    """A new game of ``rules`` after its first deal, by ``dealer``, stacked as named.

    ``hands`` lists each seat's cards (any order); ``stock`` its first cards, top first.
    """
    state = new_game(rules)
    order = stacked_order(state, dealer, hands, upcard, stock)
    return evolve(state, Dealt(hand=1, dealer=dealer, order=order, cuts=parse_cards(cuts)))


def next_dealer(state: State) -> int:
    """The seat the engine's chance event makes dealer of the next hand.

    Raises:
        ValueError: the game is not waiting for a deal.
    """
    if state.phase is not Phase.DEAL:
        raise ValueError(f"no deal is due in phase {state.phase}")
    due = chance(state, random.Random(0))
    if not isinstance(due, Dealt):  # pragma: no cover - a DEAL phase always deals
        raise ValueError(f"expected a deal, got {due!r}")
    return due.dealer


def deal_next(state: State, hands: Sequence[str], upcard: str, stock: str = "") -> State:
    """The next deal of a game whose hand just ended, stacked as named.

    The dealer and hand number are those the engine's own chance event chooses; only the pack
    order is replaced.

    Raises:
        ValueError: the game is not waiting for a deal.
    """
    dealer = next_dealer(state)
    order = stacked_order(state, dealer, hands, upcard, stock)
    return evolve(state, Dealt(hand=state.hand_number + 1, dealer=dealer, order=order))


def step(state: State, seat: int, command: Command) -> tuple[State, tuple[Event, ...]]:
    """Decide ``command`` for ``seat`` and evolve its events; return the new state and them."""
    events = decide(state, seat, command)
    return apply(state, events), events


def play(state: State, seat: int, *commands: Command) -> State:
    """Decide and evolve each command of ``seat`` in turn."""
    for command in commands:
        state, _ = step(state, seat, command)
    return state


def run_down_stock(state: State) -> State:
    """Play turns (draw from the stock, discard the card drawn) until the stock is empty.

    The seat to move each time draws; the pile grows by the drawn cards in stock order.
    """
    while state.stock and not chance_pending(state):
        seat = to_move(state)
        drawn = state.stock[0]
        state = play(state, seat, DrawStock(), Discard(drawn))
    return state


def refusal(state: State, seat: int, command: Command) -> str:
    """The code of the ``RuleError`` ``decide`` raises for ``command``.

    Raises:
        AssertionError: the command was accepted.
    """
    try:
        events = decide(state, seat, command)
    except RuleError as error:
        return error.code
    raise AssertionError(f"{describe_command(command)} was accepted: {events!r}")


def pure_python_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Until the test ends, the solver's contexts are made afresh and never use the compiled
    search (``server.engine.compiled``): its pure-Python path answers."""

    def switched_off(context: solver._Context) -> None:
        context.compiled_bound = True

    monkeypatch.setattr(solver, "_contexts", {})
    monkeypatch.setattr(solver, "_last_rules", None)
    monkeypatch.setattr(solver, "_last_values", None)
    monkeypatch.setattr(solver, "_bind_compiled", switched_off)
