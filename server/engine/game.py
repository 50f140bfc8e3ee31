"""The game state machine: ``new_game``, chance, ``legal_actions``, ``decide``, ``evolve``.

Theory of operation. A game is a fold of events over the state ``new_game`` returns. Two kinds
of step produce events:

- *chance* (``chance_pending`` / ``chance``): a new deal (the shuffled pack is the event) and a
  stock rebuilt from the discard pile. Only here is a random generator used; replaying the
  events never draws again.
- *commands* from the seat to act (``decide``): validated against the rules and turned into
  events, or refused with a coded ``RuleError``. ``decide`` never changes the state.

``evolve(state, event)`` applies one event and never fails on events ``decide`` or ``chance``
produced. Phases::

    DEAL --chance: Dealt--> DRAW --DrawStock/TakeDiscard--> PLAY --Meld/LayOff/SwapJoker--> PLAY
      ^                      |  \\--(stock empty) chance: StockRebuilt, or Pass: Declined-+
      |                      |                                                           |
      |                      +<-------------------- Discard (hand not empty) ---- PLAY   |
      +---- HandEnded (not the last hand) <-- going out / idle cap / declined <----------+
                                                   \\--> GameEnded --> GAME_OVER

Hidden information (hands, the stock order) leaves only through ``views``.
"""

from __future__ import annotations

import dataclasses
import enum
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from server.engine.actions import (
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
    Meld,
    Melded,
    MeldSpec,
    Pass,
    StockRebuilt,
    SwapJoker,
    SwappedJoker,
    TakeDiscard,
    TookDiscard,
)
from server.engine.cards import (
    Card,
    card_face,
    face_rank,
    face_suit,
    format_card,
    is_joker,
    make_deck,
)
from server.engine.errors import IllegalMoveError, InvalidMeldError, RuleError
from server.engine.melds import (
    Meld as TableMeldShape,
)
from server.engine.melds import (
    MeldKind,
    check_meld,
    enumerate_melds,
    layoff_faces,
    with_layoff,
    with_swap,
)
from server.engine.scoring import format_amount, game_winners, hand_count, settle_hand
from server.engine.variants import Rules, make_rules

__all__ = [
    "Phase",
    "State",
    "TableMeld",
    "chance",
    "chance_pending",
    "deal_layout",
    "decide",
    "evolve",
    "is_over",
    "legal_actions",
    "new_game",
    "scores",
    "to_move",
]


class Phase(enum.StrEnum):
    """Where a game stands."""

    DEAL = "deal"
    """Waiting for chance: the next deal."""
    DRAW = "draw"
    """The seat to move must draw (or, with the stock exhausted, take the upcard or pass)."""
    PLAY = "play"
    """The seat to move has drawn: meld, lay off, swap jokers, then discard."""
    GAME_OVER = "game_over"


@dataclass(frozen=True, slots=True)
class TableMeld:
    """A meld on the table and, parallel to its cards, the seat that laid each one."""

    meld: TableMeldShape
    owners: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class State:
    """The whole state of a game (hidden cards included). Build it with ``new_game``."""

    rules: Rules
    phase: Phase
    hand_number: int
    """Deals so far (1 during the first hand)."""
    dealer: int
    """Current dealer, -1 before the first deal."""
    turn: int
    """Seat to move (-1 when no one is)."""
    scores: tuple[Fraction, ...]
    active: tuple[bool, ...]
    """Seats still in the game."""
    hands: tuple[tuple[Card, ...], ...]
    """Each seat's cards, sorted."""
    stock: tuple[Card, ...]
    """The stock, next card to draw first."""
    pile: tuple[Card, ...]
    """The discard pile, upcard last."""
    melds: tuple[TableMeld, ...]
    melded: tuple[bool, ...]
    """Seats that have made a meld of their own this hand."""
    laid_before: tuple[bool, ...]
    """Seats that put any card on the table in an earlier turn of this hand."""
    taken: tuple[Card, ...] = ()
    """Cards the seat to move took from the pile this turn."""
    melds_this_turn: int = 0
    laid_this_turn: bool = False
    reuses: int = 0
    """How many times the pile has become the stock this hand."""
    idle_turns: int = 0
    """Consecutive turns in which nothing was melded or laid off."""
    winners: tuple[int, ...] = ()
    last_result: HandEnded | None = None

    @property
    def players(self) -> int:
        """Number of seats."""
        return len(self.hands)

    @property
    def upcard(self) -> Card | None:
        """Top of the discard pile, if any."""
        return self.pile[-1] if self.pile else None

    @property
    def all_at_once(self) -> bool:
        """Whether this deal requires a player to lay down his whole hand at once (Wrotham)."""
        first = self.rules.all_at_once_from_deal
        return first is not None and self.hand_number >= first


def new_game(
    variant: str | Rules, options: Mapping[str, object] | None = None, seats: int = 2
) -> State:
    """A game before its first deal.

    ``variant`` is a preset name (validated with ``options`` for ``seats`` players) or already
    resolved ``Rules``.

    Raises:
        VariantError: unknown preset, bad options or player count.
    """
    rules = variant if isinstance(variant, Rules) else make_rules(variant, options or {}, seats)
    players = rules.players
    return State(
        rules=rules,
        phase=Phase.DEAL,
        hand_number=0,
        dealer=-1,
        turn=-1,
        scores=(Fraction(0),) * players,
        active=(True,) * players,
        hands=((),) * players,
        stock=(),
        pile=(),
        melds=(),
        melded=(False,) * players,
        laid_before=(False,) * players,
    )


# Queries ---------------------------------------------------------------------------------------


def is_over(state: State) -> bool:
    """Whether the game has ended."""
    return state.phase is Phase.GAME_OVER


def scores(state: State) -> tuple[Fraction, ...]:
    """Each seat's total so far (exact)."""
    return state.scores


def to_move(state: State) -> int:
    """Seat whose command is awaited, or -1 (chance pending or game over)."""
    return -1 if chance_pending(state) or is_over(state) else state.turn


def _next_seat(state: State, seat: int) -> int:
    players = state.players
    for step in range(1, players + 1):
        candidate = (seat + step) % players
        if state.active[candidate]:
            return candidate
    return seat


def _can_rebuild(state: State) -> bool:
    rules = state.rules
    if rules.stock_exhausted == "block" or len(state.pile) == 0:
        return False
    return rules.max_stock_reuses is None or state.reuses < rules.max_stock_reuses


def chance_pending(state: State) -> bool:
    """Whether the next event must come from ``chance`` (a deal or a rebuilt stock)."""
    if state.phase is Phase.DEAL:
        return True
    return state.phase is Phase.DRAW and not state.stock and _can_rebuild(state)


def _cut_key(card: Card) -> tuple[int, int]:
    face = card_face(card)
    return (99, 0) if is_joker(card) else (face_rank(face), face_suit(face))


def chance(state: State, rng: random.Random) -> Event:
    """The chance event due now: a shuffled deal, or the pile turned into a stock.

    Raises:
        IllegalMoveError: no chance event is pending.
    """
    rules = state.rules
    if state.phase is Phase.DEAL:
        pack = list(make_deck(rules.decks, rules.jokers))
        cuts: tuple[Card, ...] = ()
        if state.dealer < 0:
            if rules.dealer == "lowest_card":
                cut_pack = pack[:]
                rng.shuffle(cut_pack)
                cuts = tuple(cut_pack[: state.players])
                dealer = min(range(state.players), key=lambda seat: _cut_key(cuts[seat]))
            else:
                dealer = rng.randrange(state.players)
        else:
            dealer = _next_seat(state, state.dealer)
        rng.shuffle(pack)
        return Dealt(hand=state.hand_number + 1, dealer=dealer, order=tuple(pack), cuts=cuts)
    if chance_pending(state):
        if rules.stock_exhausted == "shuffle":
            order = list(state.pile)
            rng.shuffle(order)
            return StockRebuilt(order=tuple(order), shuffled=True)
        # Turning the face-up pile over puts its bottom card on top.
        return StockRebuilt(order=state.pile, shuffled=False)
    raise IllegalMoveError("no chance event is pending", "rules/wrong_phase")


# Legal actions ---------------------------------------------------------------------------------


def _discardable(state: State, hand: Sequence[Card]) -> bool:
    return any(card not in state.taken for card in hand)


def _remaining_ok(state: State, remaining: Sequence[Card]) -> bool:
    """Whether a lay-down leaving ``remaining`` in hand lets the turn end legally."""
    if not remaining:
        return not state.rules.must_discard_to_go_out
    return _discardable(state, remaining)


def _can_meld_now(state: State) -> bool:
    limit = state.rules.melds_per_turn
    return limit is None or state.all_at_once or state.melds_this_turn < limit


def _can_lay_off(state: State, seat: int) -> bool:
    return bool(state.melds) and (not state.rules.layoff_requires_own_meld or state.melded[seat])


def _meld_command(melds: Iterable[TableMeldShape]) -> Meld:
    return Meld(melds=tuple(MeldSpec(meld.cards, meld.faces) for meld in melds))


def _without(hand: Sequence[Card], cards: Iterable[Card]) -> tuple[Card, ...]:
    gone = set(cards)
    return tuple(card for card in hand if card not in gone)


def _exact_covers(
    hand: tuple[Card, ...], candidates: Sequence[TableMeldShape], leave: int
) -> list[tuple[TableMeldShape, ...]]:
    """Every set of disjoint melds from ``candidates`` covering all but ``leave`` cards."""
    results: list[tuple[TableMeldShape, ...]] = []
    need = len(hand) - leave

    def search(start: int, used: frozenset[Card], chosen: tuple[TableMeldShape, ...]) -> None:
        if len(used) == need:
            if chosen:
                results.append(chosen)
            return
        for index in range(start, len(candidates)):
            meld = candidates[index]
            if len(used) + len(meld.cards) > need or used.intersection(meld.cards):
                continue
            search(index + 1, used | frozenset(meld.cards), (*chosen, meld))

    search(0, frozenset(), ())
    return results


def _meld_actions(state: State, seat: int) -> list[Command]:
    hand = state.hands[seat]
    rules = state.rules
    candidates = enumerate_melds(hand, rules.meld_rules, frozenset(state.taken))
    actions: list[Command] = []
    if state.all_at_once:
        # Deals 4-6 of Wrotham: the first lay-down takes the whole hand (but a final discard).
        for leave in (0, 1):
            if leave == 0 and rules.must_discard_to_go_out:
                continue
            for cover in _exact_covers(hand, candidates, leave):
                used = {card for meld in cover for card in meld.cards}
                if _remaining_ok(state, [card for card in hand if card not in used]):
                    actions.append(_meld_command(cover))
        return actions
    for meld in candidates:
        if _remaining_ok(state, _without(hand, meld.cards)):
            actions.append(_meld_command((meld,)))
    return actions


def _layoff_actions(state: State, seat: int) -> list[Command]:
    hand = state.hands[seat]
    rules = state.rules
    taken = frozenset(state.taken)
    seen: set[tuple[int, bool, int, int]] = set()
    actions: list[Command] = []
    for target, table_meld in enumerate(state.melds):
        faces = layoff_faces(table_meld.meld, rules.meld_rules)
        for card in hand:
            # Physical copies of one face are interchangeable (except a card just taken).
            key_face = card_face(card)
            for face in faces:
                if not is_joker(card) and key_face != face:
                    continue
                key = (key_face, card in taken, target, face)
                if key in seen:
                    continue
                seen.add(key)
                if _remaining_ok(state, _without(hand, (card,))):
                    actions.append(LayOff(card=card, target=target, face=face))
    return actions


def _swap_actions(state: State, seat: int) -> list[Command]:
    hand = state.hands[seat]
    actions: list[Command] = []
    for target, table_meld in enumerate(state.melds):
        for placed, face in zip(table_meld.meld.cards, table_meld.meld.faces):
            if not is_joker(placed):
                continue
            for card in hand:
                if not is_joker(card) and card_face(card) == face:
                    actions.append(SwapJoker(card=card, target=target))
    return sorted(set(actions), key=_command_key)


def _command_key(command: Command) -> tuple[int, tuple[object, ...]]:
    order = _COMMAND_ORDER[type(command)]
    match command:
        case TakeDiscard(count=count):
            return order, (count,)
        case Meld(melds=melds):
            return order, tuple((spec.cards, spec.faces) for spec in melds)
        case LayOff(card=card, target=target, face=face):
            return order, (card, target, face)
        case SwapJoker(card=card, target=target):
            return order, (card, target)
        case Discard(card=card):
            return order, (card,)
    return order, ()


_COMMAND_ORDER: dict[type, int] = {
    DrawStock: 0,
    TakeDiscard: 1,
    Pass: 2,
    Meld: 3,
    LayOff: 4,
    SwapJoker: 5,
    Discard: 6,
}


def legal_actions(state: State, seat: int) -> list[Command]:
    """Every command ``seat`` may send now, sorted; empty when it is not his move.

    Complete up to interchangeable cards: where two physical copies of a face (or two jokers)
    would give the same move, melds and lay-offs list one of them; ``decide`` accepts either.
    """
    if to_move(state) != seat:
        return []
    actions: list[Command] = []
    if state.phase is Phase.DRAW:
        if state.stock:
            actions.append(DrawStock())
        if state.pile:
            actions.append(TakeDiscard())
        if not state.stock:
            actions.append(Pass())
        return actions
    hand = state.hands[seat]
    if _can_meld_now(state):
        actions.extend(_meld_actions(state, seat))
    if _can_lay_off(state, seat):
        actions.extend(_layoff_actions(state, seat))
    if state.rules.joker_swap and state.melds:
        actions.extend(_swap_actions(state, seat))
    actions.extend(Discard(card=card) for card in hand if card not in state.taken)
    return sorted(actions, key=_command_key)


# decide ----------------------------------------------------------------------------------------


def _require(condition: bool, message: str, code: str) -> None:
    if not condition:
        raise IllegalMoveError(message, code)


def decide(state: State, seat: int, command: Command) -> tuple[Event, ...]:
    """Validate ``command`` from ``seat`` and return the events it causes (state unchanged).

    Raises:
        RuleError: the game is over, it is not ``seat``'s move, the command does not fit the
            phase, a card is not held, a meld is invalid, or a rule forbids the move; the
            error's ``code`` says which.
    """
    if is_over(state):
        raise IllegalMoveError("the game is over", "rules/game_over")
    if not 0 <= seat < state.players:
        raise IllegalMoveError(f"no seat {seat!r} at this table", "rules/no_such_seat")
    if chance_pending(state):
        raise IllegalMoveError("waiting for the deal", "rules/wrong_phase")
    if seat != state.turn:
        raise IllegalMoveError(
            f"it is seat {state.turn}'s turn, not seat {seat}'s", "rules/not_your_turn"
        )
    match command:
        case DrawStock():
            return _decide_draw(state, seat)
        case TakeDiscard(count=count):
            return _decide_take(state, seat, count)
        case Pass():
            return _decide_pass(state, seat)
        case Meld(melds=melds):
            return _decide_meld(state, seat, melds)
        case LayOff(card=card, target=target, face=face):
            return _decide_layoff(state, seat, card, target, face)
        case SwapJoker(card=card, target=target):
            return _decide_swap(state, seat, card, target)
        case Discard(card=card):
            return _decide_discard(state, seat, card)
    raise RuleError(f"unknown command {command!r}", "rules/unknown_command")


def _decide_draw(state: State, seat: int) -> tuple[Event, ...]:
    _require(state.phase is Phase.DRAW, "you have already drawn this turn", "rules/wrong_phase")
    _require(bool(state.stock), "the stock is empty", "rules/stock_empty")
    return (Drew(seat=seat, card=state.stock[0]),)


def _decide_take(state: State, seat: int, count: int) -> tuple[Event, ...]:
    _require(state.phase is Phase.DRAW, "you have already drawn this turn", "rules/wrong_phase")
    _require(bool(state.pile), "the discard pile is empty", "rules/pile_empty")
    _require(count == 1, f"only the upcard may be taken, not {count!r} cards", "rules/too_deep")
    return (TookDiscard(seat=seat, cards=state.pile[-1:]),)


def _decide_pass(state: State, seat: int) -> tuple[Event, ...]:
    _require(
        state.phase is Phase.DRAW and not state.stock,
        "you may pass only when the stock is exhausted",
        "rules/cannot_pass",
    )
    declined = Declined(seat=seat)
    return (declined, *_end_hand(state, -1, "stock_exhausted", False))


def _held(state: State, seat: int, cards: Iterable[Card]) -> None:
    hand = set(state.hands[seat])
    for card in cards:
        if card not in hand:
            raise IllegalMoveError(f"you do not hold {format_card(card)}", "rules/card_not_held")


def _check_lay_down(state: State, seat: int, remaining: Sequence[Card]) -> None:
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    if not remaining and state.rules.must_discard_to_go_out:
        raise IllegalMoveError(
            "your last card must be a discard (must_discard_to_go_out)", "rules/must_discard"
        )
    if remaining and not _discardable(state, remaining):
        raise IllegalMoveError(
            "that would leave only the card taken from the pile, which may not be discarded",
            "rules/no_discard_left",
        )


def _decide_meld(state: State, seat: int, specs: Sequence[MeldSpec]) -> tuple[Event, ...]:
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    _require(len(specs) > 0, "a meld command needs at least one meld", "rules/invalid_meld")
    limit = state.rules.melds_per_turn
    if limit is not None and not state.all_at_once and state.melds_this_turn + len(specs) > limit:
        raise IllegalMoveError(f"at most {limit} meld(s) per turn", "rules/meld_limit")
    cards = [card for spec in specs for card in spec.cards]
    if len(set(cards)) != len(cards):
        raise InvalidMeldError("a card is used twice", "rules/invalid_meld")
    _held(state, seat, cards)
    rules = state.rules
    checked = tuple(check_meld(spec.cards, rules.meld_rules, spec.faces) for spec in specs)
    remaining = _without(state.hands[seat], cards)
    if state.all_at_once and len(remaining) > 1:
        raise IllegalMoveError(
            f"in deal {state.hand_number} you may meld only by laying down your whole hand at once",
            "rules/all_at_once",
        )
    _check_lay_down(state, seat, remaining)
    event = Melded(seat=seat, melds=tuple(MeldSpec(m.cards, m.faces) for m in checked))
    if not remaining:
        return (event, *_end_hand_out(state, seat))
    return (event,)


def _table_meld(state: State, target: int) -> TableMeld:
    if not 0 <= target < len(state.melds):
        raise IllegalMoveError(f"there is no table meld {target!r}", "rules/no_such_meld")
    return state.melds[target]


def _decide_layoff(
    state: State, seat: int, card: Card, target: int, face: int
) -> tuple[Event, ...]:
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    _held(state, seat, (card,))
    if state.rules.layoff_requires_own_meld and not state.melded[seat]:
        raise IllegalMoveError(
            "you may lay off only after your own first meld", "rules/layoff_before_meld"
        )
    table_meld = _table_meld(state, target)
    with_layoff(table_meld.meld, card, face, state.rules.meld_rules)
    remaining = _without(state.hands[seat], (card,))
    _check_lay_down(state, seat, remaining)
    event = LaidOff(seat=seat, card=card, target=target, face=face)
    if not remaining:
        return (event, *_end_hand_out(state, seat))
    return (event,)


def _decide_swap(state: State, seat: int, card: Card, target: int) -> tuple[Event, ...]:
    _require(state.rules.joker_swap, "joker swaps are not allowed here", "rules/no_joker_swap")
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    _held(state, seat, (card,))
    _, joker = with_swap(_table_meld(state, target).meld, card)
    return (SwappedJoker(seat=seat, card=card, target=target, joker=joker),)


def _decide_discard(state: State, seat: int, card: Card) -> tuple[Event, ...]:
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    _held(state, seat, (card,))
    if card in state.taken:
        raise IllegalMoveError(
            f"{format_card(card)} was taken from the pile this turn and may not be discarded",
            "rules/discard_taken_card",
        )
    event = Discarded(seat=seat, card=card)
    if len(state.hands[seat]) == 1:
        return (event, *_end_hand_out(state, seat))
    idle = 0 if state.laid_this_turn else state.idle_turns + 1
    if idle >= state.rules.idle_turn_cap:
        after = evolve(state, event)
        return (event, *_end_hand(after, -1, "idle_cap", False))
    return (event,)


def _end_hand_out(state: State, seat: int) -> tuple[Event, ...]:
    rummy = not state.laid_before[seat]
    return _end_hand(state, seat, "out", rummy)


def _end_hand(state: State, winner: int, reason: str, rummy: bool) -> tuple[Event, ...]:
    rules = state.rules
    hands = tuple(() if seat == winner else hand for seat, hand in enumerate(state.hands))
    counts = tuple(hand_count(hand, rules) for hand in hands)
    points = settle_hand(rules, counts, winner, rummy, state.active)
    totals = tuple(total + point for total, point in zip(state.scores, points))
    ended = HandEnded(
        hand=state.hand_number,
        winner=winner,
        reason=reason,
        rummy=rummy,
        hands=hands,
        counts=counts,
        points=tuple(format_amount(point) for point in points),
        totals=tuple(format_amount(total) for total in totals),
    )
    winners = game_winners(rules, totals, state.hand_number, state.active)
    if winners:
        return ended, GameEnded(winners=winners, totals=ended.totals)
    return (ended,)


# evolve ----------------------------------------------------------------------------------------


def _set_hand(
    hands: tuple[tuple[Card, ...], ...], seat: int, hand: Iterable[Card]
) -> tuple[tuple[Card, ...], ...]:
    return hands[:seat] + (tuple(sorted(hand)),) + hands[seat + 1 :]


def _set_flag(flags: tuple[bool, ...], seat: int, value: bool) -> tuple[bool, ...]:
    return flags[:seat] + (value,) + flags[seat + 1 :]


def evolve(state: State, event: Event) -> State:
    """Apply one event. Never fails on events that ``decide`` or ``chance`` produced."""
    replace = dataclasses.replace
    match event:
        case Dealt():
            return _evolve_dealt(state, event)
        case Drew(seat=seat, card=card):
            return replace(
                state,
                phase=Phase.PLAY,
                hands=_set_hand(state.hands, seat, (*state.hands[seat], card)),
                stock=state.stock[1:],
            )
        case TookDiscard(seat=seat, cards=cards):
            return replace(
                state,
                phase=Phase.PLAY,
                hands=_set_hand(state.hands, seat, (*state.hands[seat], *cards)),
                pile=state.pile[: len(state.pile) - len(cards)],
                taken=cards,
            )
        case Melded(seat=seat, melds=specs):
            melded_cards = [card for spec in specs for card in spec.cards]
            new = tuple(
                TableMeld(
                    TableMeldShape(_kind_of(spec.faces), spec.cards, spec.faces),
                    (seat,) * len(spec.cards),
                )
                for spec in specs
            )
            return replace(
                state,
                hands=_set_hand(state.hands, seat, _without(state.hands[seat], melded_cards)),
                melds=state.melds + new,
                melded=_set_flag(state.melded, seat, True),
                melds_this_turn=state.melds_this_turn + len(specs),
                laid_this_turn=True,
            )
        case LaidOff(seat=seat, card=card, target=target, face=face):
            table_meld = state.melds[target]
            grown = check_meld(
                (*table_meld.meld.cards, card),
                state.rules.meld_rules,
                (*table_meld.meld.faces, face),
            )
            owner_of = dict(zip(table_meld.meld.cards, table_meld.owners))
            owner_of[card] = seat
            updated = TableMeld(grown, tuple(owner_of[placed] for placed in grown.cards))
            return replace(
                state,
                hands=_set_hand(state.hands, seat, _without(state.hands[seat], (card,))),
                melds=state.melds[:target] + (updated,) + state.melds[target + 1 :],
                laid_this_turn=True,
            )
        case SwappedJoker(seat=seat, card=card, target=target, joker=joker):
            table_meld = state.melds[target]
            swapped, _ = with_swap(table_meld.meld, card)
            owners = tuple(
                seat if placed == card else owner
                for placed, owner in zip(swapped.cards, table_meld.owners)
            )
            hand = (*_without(state.hands[seat], (card,)), joker)
            return replace(
                state,
                hands=_set_hand(state.hands, seat, hand),
                melds=state.melds[:target]
                + (TableMeld(swapped, owners),)
                + state.melds[target + 1 :],
                laid_this_turn=True,
            )
        case Discarded(seat=seat, card=card):
            hand = _without(state.hands[seat], (card,))
            laid_before = state.laid_before
            if state.laid_this_turn:
                laid_before = _set_flag(laid_before, seat, True)
            return replace(
                state,
                phase=Phase.DRAW,
                hands=_set_hand(state.hands, seat, hand),
                pile=(*state.pile, card),
                turn=_next_seat(state, seat),
                laid_before=laid_before,
                taken=(),
                melds_this_turn=0,
                laid_this_turn=False,
                idle_turns=0 if state.laid_this_turn else state.idle_turns + 1,
            )
        case StockRebuilt(order=order):
            return replace(state, stock=order, pile=(), reuses=state.reuses + 1)
        case Declined():
            return state
        case HandEnded(totals=totals):
            return replace(
                state,
                phase=Phase.DEAL,
                turn=-1,
                scores=tuple(Fraction(total) for total in totals),
                last_result=event,
            )
        case GameEnded(winners=winners):
            return replace(state, phase=Phase.GAME_OVER, turn=-1, winners=winners)
    raise AssertionError(f"unknown event {event!r}")  # pragma: no cover


def _kind_of(faces: Sequence[int]) -> MeldKind:
    first = face_rank(faces[0])
    return MeldKind.SET if all(face_rank(face) == first for face in faces) else MeldKind.RUN


def deal_layout(state: State, event: Dealt) -> tuple[tuple[int, ...], int]:
    """Who receives each card of a deal's ``order`` (-1: stock or upcard), and the upcard index.

    Cards go one at a time to the active seats from the dealer's left; with
    ``starter_extra_card`` the starter gets one more; the next card is the upcard.
    """
    rules = state.rules
    starter = _next_seat(state, event.dealer)
    seats_in_order = [starter]
    while len(seats_in_order) < sum(state.active):
        seats_in_order.append(_next_seat(state, seats_in_order[-1]))
    owners = seats_in_order * rules.hand_size
    if rules.starter_extra_card:
        owners.append(starter)
    upcard_index = len(owners)
    owners.extend([-1] * (len(event.order) - len(owners)))
    return tuple(owners), upcard_index


def _evolve_dealt(state: State, event: Dealt) -> State:
    rules = state.rules
    players = state.players
    order = event.order
    owners, upcard_index = deal_layout(state, event)
    hands: list[list[Card]] = [[] for _ in range(players)]
    for card, owner in zip(order[:upcard_index], owners):
        hands[owner].append(card)
    return dataclasses.replace(
        state,
        phase=Phase.PLAY if rules.starter_extra_card else Phase.DRAW,
        hand_number=event.hand,
        dealer=event.dealer,
        turn=_next_seat(state, event.dealer),
        hands=tuple(tuple(sorted(hand)) for hand in hands),
        stock=order[upcard_index + 1 :],
        pile=(order[upcard_index],),
        melds=(),
        melded=(False,) * players,
        laid_before=(False,) * players,
        taken=(),
        melds_this_turn=0,
        laid_this_turn=False,
        reuses=0,
        idle_turns=0,
    )


def apply(state: State, events: Iterable[Event]) -> State:
    """Fold ``events`` into ``state``."""
    for event in events:
        state = evolve(state, event)
    return state
