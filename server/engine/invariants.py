"""Invariants every reachable state and event must satisfy, as pure checks.

Each check returns a list of human-readable violations (empty when all is well); the simulator
and the property tests run them after every event.
"""

from __future__ import annotations

import functools
from collections import Counter

from protocol.cards import Card, format_cards, make_deck
from protocol.game import Event, HandEnded, Knocked
from server.engine.game import Phase, State
from server.engine.views import HIDDEN, redact, view, visible_cards

__all__ = ["check_conservation", "check_event_secrecy", "check_view_secrecy", "hidden_from"]


def _cards_in_play(state: State) -> list[Card]:
    cards: list[Card] = [card for hand in state.hands for card in hand]
    cards.extend(state.stock)
    cards.extend(state.pile)
    for table_meld in state.melds:
        cards.extend(table_meld.meld.cards)
    return cards


@functools.cache
def _sorted_pack(decks: int, jokers: int) -> list[Card]:
    return sorted(make_deck(decks, jokers))


def check_conservation(state: State) -> list[str]:
    """Every card of the pack is in exactly one place (once the first hand is dealt)."""
    if state.hand_number == 0:
        return []
    rules = state.rules
    in_play = _cards_in_play(state)
    in_play.sort()
    if in_play == _sorted_pack(rules.decks, rules.jokers):
        return []
    expected = Counter(make_deck(rules.decks, rules.jokers))
    actual = Counter(in_play)
    missing = sorted((expected - actual).elements())
    extra = sorted((actual - expected).elements())
    return [
        f"cards not conserved: missing [{format_cards(missing)}], extra [{format_cards(extra)}]"
    ]


def hidden_from(state: State, seat: int | None) -> frozenset[Card]:
    """Cards ``seat`` (``None``: a spectator) must not see in ``state``: other hands and stock.

    Cards taken from the discard pile this turn were public before, so they are not hidden.
    Between hands and after the game nothing is hidden any more.
    """
    return _hidden_by_seat(state)[seat]


def _hidden_by_seat(state: State) -> dict[int | None, frozenset[Card]]:
    if state.phase in (Phase.DEAL, Phase.GAME_OVER):
        return dict.fromkeys([None, *range(state.players)], frozenset())
    everything = set(state.stock)
    for hand in state.hands:
        everything.update(hand)
    everything.difference_update(state.taken)
    hidden: dict[int | None, frozenset[Card]] = {None: frozenset(everything)}
    for seat, hand in enumerate(state.hands):
        hidden[seat] = frozenset(everything.difference(hand))
    return hidden


def check_view_secrecy(state: State) -> list[str]:
    """No seat's view (nor a spectator's) shows another seat's cards or the stock."""
    problems = []
    hidden = _hidden_by_seat(state)
    for seat in [None, *range(state.players)]:
        leaked = visible_cards(view(state, seat)) & hidden[seat]
        if leaked:
            problems.append(
                f"view of seat {seat} shows hidden cards [{format_cards(sorted(leaked))}]"
            )
    return problems


def check_event_secrecy(before: State, event: Event, after: State) -> list[str]:
    """No redacted event shows a viewer a card hidden from him both before and after it.

    A card may show when the viewer could see it before (a discard taken from the pile) or
    after (his own draw). The end of a hand reveals every hand, so ``HandEnded`` and ``Knocked``
    (which ends the hand at once) are exempt.
    """
    if isinstance(event, HandEnded | Knocked):
        return []
    rules = before.rules
    pack = frozenset(make_deck(rules.decks, rules.jokers))
    problems = []
    hidden_before = _hidden_by_seat(before)
    hidden_after = _hidden_by_seat(after)
    for seat in [None, *range(before.players)]:
        shown = _event_cards(redact(before, event, seat))
        if not shown:
            continue
        earlier = pack if before.phase is Phase.DEAL else hidden_before[seat]
        leaked = shown & earlier & hidden_after[seat]
        if leaked:
            problems.append(
                f"{type(event).__name__} shows seat {seat} hidden cards"
                f" [{format_cards(sorted(leaked))}]"
            )
    return problems


_NOT_CARDS = frozenset(
    {
        "seat",
        "seats",
        "target",
        "face",
        "faces",
        "hand",
        "dealer",
        "winner",
        "winners",
        "counts",
        "cuts",
        "depths",
        "count",
        "eliminated",
    }
)


def _event_cards(event: Event) -> frozenset[Card]:
    cards: set[Card] = set()
    for name in event.__struct_fields__:
        value = getattr(event, name)
        if name in _NOT_CARDS:
            continue
        _collect(value, cards)
    cards.discard(HIDDEN)
    return frozenset(cards)


def _collect(value: object, into: set[Card]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        into.add(value)
    elif isinstance(value, tuple):
        for item in value:
            _collect(item, into)
    elif hasattr(value, "__struct_fields__"):
        for name in value.__struct_fields__:
            if name not in _NOT_CARDS:
                _collect(getattr(value, name), into)
