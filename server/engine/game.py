"""The game state machine: ``new_game``, chance, ``legal_actions``, ``decide``, ``evolve``.

Theory of operation. A game is a fold of events over the state ``new_game`` returns. Two kinds
of step produce events:

- *chance* (``chance_pending`` / ``chance``): a new deal (the shuffled pack is the event) and a
  stock rebuilt from the discard pile. Only here is a random generator used; replaying the
  events never draws again.
- *commands* (``decide``): validated against the rules and turned into events, or refused with
  a coded ``RuleError``. ``decide`` never changes the state.

``evolve(state, event)`` applies one event and never fails on events ``decide`` or ``chance``
produced. Phases::

    DEAL --chance: Dealt--> DRAW --DrawStock/TakeDiscard--> PLAY --Meld/LayOff/SwapJoker--> PLAY
      ^                      ^  \\--(stock empty) chance: StockRebuilt, or Pass: Declined-+
      |                      |                                                           |
      |                      +--- Discard (hand not empty), Floated ------------- PLAY   |
      |                      +--- ClaimWindowClosed / claimer's lay-down -- CLAIM <------|--+
      +---- HandEnded (not the last hand) <-- going out / idle cap / declined <----------+  |
                                                   \\--> GameEnded --> GAME_OVER           |
    PLAY --Discard + ClaimWindowOpened--> CLAIM --Claim/Pass answers--> Claimed --> PLAY --+

A *required* card (taken from deep in the pile, claimed with "Rummy!", or the upcard taken
before opening under ``open_to_take_upcard``) must be laid down before the turn can end; until
then only lay-downs that use it are legal. Claim windows accept answers in any order from the
eligible seats; the nearest seat after the discarder that claims wins once every nearer seat
has passed.

Hidden information (hands, the stock order) leaves only through ``views``.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from protocol.cards import (
    FACE_MASK,
    Card,
    card_face,
    face_rank,
    face_suit,
    format_card,
    is_joker,
    make_deck,
)
from protocol.game import (
    Claim,
    ClaimAnswered,
    Claimed,
    ClaimWindowClosed,
    ClaimWindowOpened,
    Command,
    Dealt,
    Declined,
    Discard,
    Discarded,
    DrawStock,
    Drew,
    Event,
    Floated,
    GameEnded,
    HandEnded,
    Knock,
    Knocked,
    LaidOff,
    LayOff,
    Meld,
    Melded,
    MeldSpec,
    Pass,
    SeatForfeited,
    StockRebuilt,
    SwapJoker,
    SwappedJoker,
    TakeDiscard,
    TookDiscard,
    UpcardPassed,
)
from server.engine.errors import IllegalMoveError, InvalidMeldError, RuleError
from server.engine.melds import Meld as TableMeldShape
from server.engine.melds import (
    MeldKind,
    check_meld,
    enumerate_melds,
    layoff_faces,
    with_layoff,
    with_swap,
)
from server.engine.scoring import (
    KnockResult,
    format_amount,
    game_outcome,
    hand_count,
    hand_winner,
    meld_points,
    opening_points,
    settle_gin,
    settle_hand,
    settle_knock,
)
from server.engine.solver import best_melds, deadwood, discard_deadwoods
from server.engine.variants import Rules, make_rules

__all__ = [
    "MAX_OPENING_CHOICES",
    "Phase",
    "State",
    "TableMeld",
    "advance",
    "apply",
    "awaiting",
    "chance",
    "chance_pending",
    "deal_layout",
    "decide",
    "evolve",
    "forfeit",
    "is_over",
    "legal_actions",
    "new_game",
    "scores",
    "to_move",
]

MAX_OPENING_CHOICES = 400
"""``legal_actions`` lists at most this many opening lay-downs (``decide`` accepts any)."""

NO_CARD: Card = -1


class Phase(enum.StrEnum):
    """Where a game stands."""

    DEAL = "deal"
    """Waiting for chance: the next deal."""
    FIRST_UPCARD = "first_upcard"
    """Gin Rummy: the first upcard is offered to the non-dealer, then to the dealer."""
    DRAW = "draw"
    """The seat to move must draw (or, with the stock exhausted, take from the pile or pass)."""
    PLAY = "play"
    """The seat to move has drawn: meld, lay off, swap jokers, then discard."""
    CLAIM = "claim"
    """A claim window is open after a discard: eligible seats claim or pass."""
    GAME_OVER = "game_over"


@dataclass(frozen=True, slots=True)
class TableMeld:
    """A meld on the table and, parallel to its cards, the seat that laid each one."""

    meld: TableMeldShape
    owners: tuple[int, ...]


@dataclass(frozen=True)
class State:
    """The whole state of a game (hidden cards included). Build it with ``new_game``."""

    rules: Rules
    phase: Phase
    hand_number: int
    """Deals so far (1 during the first hand)."""
    dealer: int
    """Current dealer, -1 before the first deal."""
    turn: int
    """Seat whose turn it is (-1 when no one's)."""
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
    """Seats that have made a meld of their own this hand (in Ramino: have opened)."""
    laid_before: tuple[bool, ...]
    """Seats that put any card on the table in an earlier turn of this hand."""
    taken: tuple[Card, ...] = ()
    """Cards the seat to move took from the pile this turn (bottom first)."""
    required: Card = NO_CARD
    """A card the seat to move must lay down before his turn can end (-1: none)."""
    resume: int = -1
    """During a claimer's lay-down: the seat that draws next (-1 otherwise)."""
    melds_this_turn: int = 0
    laid_this_turn: bool = False
    reuses: int = 0
    """How many times the pile has become the stock this hand."""
    idle_turns: int = 0
    """Consecutive turns in which nothing was melded or laid off."""
    claim_kind: str = ""
    claim_seats: tuple[int, ...] = ()
    """Seats that may answer the open claim window, nearest to the discarder first."""
    claim_answers: tuple[int, ...] = ()
    """Parallel to ``claim_seats``: 0 waiting, -1 passed, n > 0 claimed n cards."""
    claim_depths: tuple[int, ...] = ()
    upcard_passes: int = 0
    """Gin Rummy: how many players declined the first upcard (2: the non-dealer must draw)."""
    knock_limit: int = -1
    """Gin Rummy: the knock limit of this hand (Oklahoma sets it from the first upcard)."""
    must_knock: bool = False
    """Gin Rummy: the upcard was taken at the wall, so the turn must end with a knock."""
    hands_won: tuple[int, ...] = ()
    """Gin Rummy: hands each seat has won (for the box bonus)."""
    forfeited: tuple[bool, ...] = ()
    """Seats that missed ``max_timeouts`` turns in a row; the server plays for them."""
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
        hands_won=(0,) * players,
        forfeited=(False,) * players,
    )


# Queries ---------------------------------------------------------------------------------------


def is_over(state: State) -> bool:
    """Whether the game has ended."""
    return state.phase is Phase.GAME_OVER


def scores(state: State) -> tuple[Fraction, ...]:
    """Each seat's total so far (exact)."""
    return state.scores


def awaiting(state: State) -> tuple[int, ...]:
    """Every seat whose command is awaited now (several while a claim window is open)."""
    phase = state.phase
    if phase is Phase.CLAIM:
        return tuple(
            seat for seat, answer in zip(state.claim_seats, state.claim_answers) if answer == 0
        )
    # Nothing is awaited while chance is pending (``chance_pending``) or the game is over.
    if phase is Phase.DEAL or phase is Phase.GAME_OVER:
        return ()
    if phase is Phase.DRAW and not state.stock and _can_rebuild(state):
        return ()
    return (state.turn,)


def to_move(state: State) -> int:
    """The seat whose command is awaited (in a claim window: the nearest unanswered), or -1."""
    phase = state.phase
    if phase is Phase.CLAIM:
        for seat, answer in zip(state.claim_seats, state.claim_answers):
            if answer == 0:
                return seat
        return -1
    # As ``awaiting``, without building the tuple (this is called once per move).
    if phase is Phase.DEAL or phase is Phase.GAME_OVER:
        return -1
    if phase is Phase.DRAW and not state.stock and _can_rebuild(state):
        return -1
    return state.turn


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


# Rule helpers shared by legal_actions and decide -----------------------------------------------


def _without(hand: Sequence[Card], cards: Iterable[Card]) -> tuple[Card, ...]:
    gone = set(cards)
    return tuple(card for card in hand if card not in gone)


def _forbidden_discard(state: State) -> Card:
    """The card taken from the pile that may not be discarded this turn (-1: none)."""
    return state.taken[0] if state.taken else NO_CARD


def _opened(state: State, seat: int) -> bool:
    return state.rules.opening_minimum == 0 or state.melded[seat]


def _opening_now(state: State, seat: int) -> bool:
    """Whether ``seat`` opens (or opened) this very turn (for ``chiudere_in_mano``)."""
    return state.rules.opening_minimum > 0 and not state.laid_before[seat]


def _min_remaining(state: State, seat: int) -> int:
    """Fewest cards a lay-down may leave in hand so the turn can still end legally."""
    rules = state.rules
    if state.resume >= 0:
        return 0  # A claimer's lay-down ends his out-of-turn play, with or without cards.
    if not rules.chiudere_in_mano and _opening_now(state, seat):
        return 2
    if rules.must_discard_to_go_out:
        return 1
    return 0


def _remaining_ok(state: State, seat: int, remaining: Sequence[Card]) -> bool:
    """Whether a lay-down leaving ``remaining`` in hand lets the turn end legally."""
    if len(remaining) < _min_remaining(state, seat):
        return False
    if not remaining or state.resume >= 0:
        return True
    forbidden = _forbidden_discard(state)
    if state.required != NO_CARD and state.required in remaining:
        return True  # The required card is still to come; the discard is checked then.
    return any(card != forbidden for card in remaining)


def _can_meld_now(state: State) -> bool:
    limit = state.rules.melds_per_turn
    return limit is None or state.all_at_once or state.melds_this_turn < limit


def _can_lay_off(state: State, seat: int) -> bool:
    rules = state.rules
    if not state.melds or not _opened(state, seat):
        return False
    return not rules.layoff_requires_own_meld or state.melded[seat]


def _layoff_targets(
    melds: Sequence[TableMeld], card: Card, state: State
) -> Iterator[tuple[int, int]]:
    """(meld index, face) for every way ``card`` can be laid off on ``melds``."""
    meld_rules = state.rules.meld_rules
    for target, table_meld in enumerate(melds):
        for face in layoff_faces(table_meld.meld, meld_rules):
            if is_joker(card) or card_face(card) == face:
                yield target, face


def _playable(state: State, card: Card) -> bool:
    return next(_layoff_targets(state.melds, card, state), None) is not None


def _meld_command(melds: Iterable[TableMeldShape]) -> Meld:
    return Meld(melds=tuple(MeldSpec(meld.cards, meld.faces) for meld in melds))


def _disjoint_combinations(
    candidates: Sequence[TableMeldShape],
    accept: Callable[[tuple[TableMeldShape, ...]], bool],
    grow: Callable[[tuple[TableMeldShape, ...]], bool],
    limit: int,
) -> list[tuple[TableMeldShape, ...]]:
    """Sets of disjoint candidates that ``accept`` takes; ``grow`` says whether to extend one."""
    results: list[tuple[TableMeldShape, ...]] = []

    def search(start: int, used: frozenset[Card], chosen: tuple[TableMeldShape, ...]) -> None:
        if len(results) >= limit:
            return
        if chosen and accept(chosen):
            results.append(chosen)
        if chosen and not grow(chosen):
            return
        for index in range(start, len(candidates)):
            meld = candidates[index]
            if used.isdisjoint(meld.cards):
                search(index + 1, used | frozenset(meld.cards), (*chosen, meld))

    search(0, frozenset(), ())
    return results


def _opening_choices(
    state: State,
    hand: Sequence[Card],
    candidates: Sequence[TableMeldShape],
    must_use: Card,
    limit: int,
) -> list[tuple[TableMeldShape, ...]]:
    """Minimal sets of disjoint melds worth at least the opening minimum.

    Minimal: dropping any meld (other than the one holding ``must_use``) would fall short.
    Further melds may follow in the same turn, so these reach every opening.
    """
    minimum = state.rules.opening_minimum

    def holds_required(meld: TableMeldShape) -> bool:
        return must_use != NO_CARD and must_use in meld.cards

    def accept(combo: tuple[TableMeldShape, ...]) -> bool:
        total = opening_points(combo)
        if total < minimum:
            return False
        if must_use != NO_CARD and not any(holds_required(meld) for meld in combo):
            return False
        return all(
            total - opening_points((meld,)) < minimum for meld in combo if not holds_required(meld)
        )

    def grow(combo: tuple[TableMeldShape, ...]) -> bool:
        if opening_points(combo) < minimum:
            return True
        return must_use != NO_CARD and not any(holds_required(meld) for meld in combo)

    return _disjoint_combinations(candidates, accept, grow, limit)


def _can_lay_down(state: State, seat: int, hand: Sequence[Card], card: Card) -> bool:
    """Whether ``seat`` holding ``hand`` could lay ``card`` down this turn."""
    rules = state.rules
    candidates = [meld for meld in enumerate_melds(hand, rules.meld_rules) if card in meld.cards]
    if not _opened(state, seat):
        every = enumerate_melds(hand, rules.meld_rules)
        return bool(_opening_choices(state, hand, every, card, 1))
    if candidates:
        return True
    return _can_lay_off(state, seat) and _playable(state, card)


def _claimable_depths(state: State, pile: Sequence[Card]) -> tuple[int, ...]:
    """Pile depths whose card anyone could lay down at once ("Rummy!") thanks to this discard.

    The discard itself qualifies when it can be laid off on a table meld; a deeper card when it
    forms a meld with cards above it that includes the discard. Both are public, so opening
    the window reveals no hand; a chance missed earlier does not reopen it.
    """
    meld_rules = state.rules.meld_rules
    depths = []
    top = pile[-1] if pile else NO_CARD
    if pile and _playable(state, top):
        depths.append(1)
    for depth in range(3, len(pile) + 1):
        card = pile[-depth]
        above = pile[len(pile) - depth :]
        if any(
            card in meld.cards and top in meld.cards for meld in enumerate_melds(above, meld_rules)
        ):
            depths.append(depth)
    return tuple(depths)


# Legal actions ---------------------------------------------------------------------------------


def _exact_covers(
    hand: tuple[Card, ...], candidates: Sequence[TableMeldShape], leave: int
) -> list[tuple[TableMeldShape, ...]]:
    """Every set of disjoint melds from ``candidates`` covering all but ``leave`` cards."""
    need = len(hand) - leave

    def size(combo: tuple[TableMeldShape, ...]) -> int:
        return sum(len(meld.cards) for meld in combo)

    return _disjoint_combinations(
        candidates, lambda combo: size(combo) == need, lambda combo: size(combo) < need, 10_000
    )


def _meld_actions(state: State, seat: int) -> list[Command]:
    hand = state.hands[seat]
    rules = state.rules
    forbidden = _forbidden_discard(state)
    distinct = frozenset({forbidden, state.required} - {NO_CARD})
    candidates = enumerate_melds(hand, rules.meld_rules, distinct)
    actions: list[Command] = []

    def fine(combo: Sequence[TableMeldShape]) -> bool:
        used = [card for meld in combo for card in meld.cards]
        if state.required != NO_CARD and state.required not in used:
            return False
        return _remaining_ok(state, seat, _without(hand, used))

    if state.all_at_once:
        # Deals 4-6 of Wrotham: the first lay-down takes the whole hand (but a final discard).
        for leave in (0, 1):
            for cover in _exact_covers(hand, candidates, leave):
                if fine(cover):
                    actions.append(_meld_command(cover))
        return actions
    if not _opened(state, seat):
        choices = _opening_choices(state, hand, candidates, state.required, MAX_OPENING_CHOICES)
        return [_meld_command(combo) for combo in choices if fine(combo)]
    return [_meld_command((meld,)) for meld in candidates if fine((meld,))]


def _layoff_actions(state: State, seat: int) -> list[Command]:
    hand = state.hands[seat]
    forbidden = _forbidden_discard(state)
    seen: set[tuple[int, bool, int, int]] = set()
    actions: list[Command] = []
    meld_rules = state.rules.meld_rules
    # (meld index, face) of every open end, looked up once for all the cards.
    ends = [
        (target, face)
        for target, table_meld in enumerate(state.melds)
        for face in layoff_faces(table_meld.meld, meld_rules)
    ]
    for card in hand:
        if state.required not in (NO_CARD, card):
            continue
        joker, own = is_joker(card), card_face(card)
        # Physical copies of one face are interchangeable (except a card just taken).
        for target, face in ends:
            if not joker and face != own:
                continue
            key = (own, card == forbidden, target, face)
            if key in seen:
                continue
            seen.add(key)
            if _remaining_ok(state, seat, _without(hand, (card,))):
                actions.append(LayOff(card=card, target=target, face=face))
    return actions


def _swap_actions(state: State, seat: int) -> list[Command]:
    if state.required != NO_CARD or not _opened(state, seat):
        return []
    hand = state.hands[seat]
    actions: set[Command] = set()
    for target, table_meld in enumerate(state.melds):
        for placed, face in zip(table_meld.meld.cards, table_meld.meld.faces):
            if is_joker(placed):
                actions.update(
                    SwapJoker(card=card, target=target)
                    for card in hand
                    if not is_joker(card)
                    and card_face(card) == face
                    and _remaining_ok(state, seat, (*_without(hand, (card,)), placed))
                )
    return list(actions)


def _discard_actions(state: State, seat: int) -> list[Command]:
    if state.required != NO_CARD or state.resume >= 0:
        return []
    hand = state.hands[seat]
    forbidden = _forbidden_discard(state)
    if len(hand) > 1:
        return [Discard(card=card) for card in hand if card != forbidden]
    actions: list[Command] = []
    for card in hand:
        if card == forbidden:
            continue
        if len(hand) == 1 and not _may_go_out_by_discard(state, seat, card):
            continue
        actions.append(Discard(card=card))
    return actions


def _may_go_out_by_discard(state: State, seat: int, card: Card) -> bool:
    rules = state.rules
    if not rules.chiudere_in_mano and _opening_now(state, seat) and state.melded[seat]:
        return False
    return not (rules.unplayable_last_discard and _playable(state, card))


def _take_depths(state: State, seat: int) -> list[int]:
    """Pile depths ``seat`` may take from now."""
    rules = state.rules
    hand = state.hands[seat]
    if not rules.deep_draws:  # the loop below for depth 1 only
        if not state.pile:
            return []
        upcard = state.pile[-1]
        if not _take_must_use(state, seat, 1) or _can_lay_down(
            state, seat, (*hand, upcard), upcard
        ):
            return [1]
        return []
    depths = []
    deepest = len(state.pile)
    for depth in range(1, deepest + 1):
        taken = state.pile[len(state.pile) - depth :]
        if not _take_must_use(state, seat, depth) or _can_lay_down(
            state, seat, (*hand, *taken), taken[0]
        ):
            depths.append(depth)
    return depths


def _take_must_use(state: State, seat: int, count: int) -> bool:
    """Whether the deepest of ``count`` cards taken from the pile must be laid down at once.

    So it must when it lies below the upcard, under ``top_discard_must_be_used``, before an
    opening under ``open_to_take_upcard``, and when the hand is empty (a floater could not
    discard the one card he took).
    """
    rules = state.rules
    if count > 1 or rules.top_discard_must_be_used or not state.hands[seat]:
        return True
    return rules.open_to_take_upcard and not _opened(state, seat)


def _claim_depths(state: State, seat: int) -> list[int]:
    rules = state.rules
    if state.claim_kind == "bussare":
        if rules.open_to_take_upcard and not _opened(state, seat):
            return []
        return [1]
    return list(state.claim_depths)


def _at_wall(state: State) -> bool:
    """Gin Rummy: the stock is down to the wall; the next player knocks or the hand is void."""
    return state.rules.wall > 0 and len(state.stock) <= state.rules.wall


def _knock_options(state: State, hand: Sequence[Card], forbidden: Card) -> list[Card]:
    """Discards that may go with a knock from ``hand`` (-1: big gin without a discard);
    ``forbidden`` is the card taken from the pile this turn."""
    rules = state.rules
    if rules.knocking == "knock":
        return [card for card in hand if card != forbidden]
    if rules.knocking != "gin":
        return []
    limit = state.knock_limit
    values = rules.values
    whole = deadwood(hand, rules.meld_rules, values)
    # Discarding a card lowers the deadwood by at most that card's value: a cheap test that
    # rules out knocking in most positions without solving every discard.
    if whole - max([values[card & FACE_MASK] for card in hand]) > limit:
        return []
    options = [
        card
        for card, left in discard_deadwoods(hand, rules.meld_rules, rules.values).items()
        if left <= limit and card != forbidden
    ]
    if rules.big_gin_bonus > 0 and whole == 0:
        options.append(NO_CARD)
    return options


_COMMAND_ORDER: dict[type, int] = {
    DrawStock: 0,
    TakeDiscard: 1,
    Claim: 2,
    Pass: 3,
    Meld: 4,
    LayOff: 5,
    SwapJoker: 6,
    Discard: 7,
    Knock: 8,
}


def command_key(command: Command) -> tuple[int, tuple[object, ...]]:
    """Sort key giving ``legal_actions`` its fixed order."""
    order = _COMMAND_ORDER[type(command)]
    match command:
        case TakeDiscard(count=count) | Claim(count=count):
            return order, (count,)
        case Meld(melds=melds):
            return order, tuple((spec.cards, spec.faces) for spec in melds)
        case LayOff(card=card, target=target, face=face):
            return order, (card, target, face)
        case SwapJoker(card=card, target=target):
            return order, (card, target)
        case Discard(card=card) | Knock(card=card):
            return order, (card,)
    return order, ()


def legal_actions(state: State, seat: int) -> list[Command]:
    """Every command ``seat`` may send now, sorted; empty when nothing is awaited from him.

    Complete up to interchangeable cards: where two physical copies of a face (or two jokers)
    would give the same move, melds and lay-offs list one of them; ``decide`` accepts either.
    Openings are listed as minimal lay-downs (further melds may follow in the same turn), at
    most ``MAX_OPENING_CHOICES`` of them.
    """
    phase = state.phase
    if phase is Phase.CLAIM:
        if seat not in awaiting(state):
            return []
    elif (
        seat != state.turn
        or phase is Phase.DEAL
        or phase is Phase.GAME_OVER
        or (
            phase is Phase.DRAW and not state.stock and _can_rebuild(state)
        )  # chance_pending(state), inlined
    ):
        return []
    actions: list[Command] = []
    if phase is Phase.CLAIM:
        actions.extend(Claim(count=depth) for depth in _claim_depths(state, seat))
        actions.append(Pass())
        return sorted(actions, key=command_key)
    if phase is Phase.FIRST_UPCARD:
        return [TakeDiscard(), Pass()]
    if phase is Phase.DRAW:
        if _at_wall(state):
            upcard = state.pile[-1]
            if _knock_options(state, (*state.hands[seat], upcard), upcard):
                actions.append(TakeDiscard())
            return [*actions, Pass()]
        # Built in command_key order: draw, takes by increasing depth, pass.
        if state.stock:
            actions.append(DrawStock())
        if state.upcard_passes < 2:
            actions.extend(TakeDiscard(count=depth) for depth in _take_depths(state, seat))
        if not state.stock:
            actions.append(Pass())
        return actions
    if not state.rules.table_melds:
        # Already in command_key order: discards (hand order), then knocks (big gin first).
        if not state.must_knock:
            actions.extend(_discard_actions(state, seat))
        knocks = _knock_options(state, state.hands[seat], _forbidden_discard(state))
        actions.extend(Knock(card=card) for card in sorted(knocks))
        return actions
    # The kinds come in command_key's order (melds, lay-offs, swaps, discards): each is sorted
    # on its own, by what command_key sorts it by within its kind.
    if _can_meld_now(state):
        melds = _meld_actions(state, seat)
        melds.sort(key=command_key)
        actions.extend(melds)
    if _can_lay_off(state, seat):
        layoffs = _layoff_actions(state, seat)
        layoffs.sort(key=_LAYOFF_ORDER)
        actions.extend(layoffs)
    if state.rules.joker_swap and state.melds:
        swaps = _swap_actions(state, seat)
        swaps.sort(key=_SWAP_ORDER)
        actions.extend(swaps)
    discards = _discard_actions(state, seat)
    discards.sort(key=_CARD_ORDER)
    actions.extend(discards)
    return actions


_LAYOFF_ORDER = operator.attrgetter("card", "target", "face")
_SWAP_ORDER = operator.attrgetter("card", "target")
_CARD_ORDER = operator.attrgetter("card")


# decide ----------------------------------------------------------------------------------------


def _require(condition: bool, message: str, code: str) -> None:
    if not condition:
        raise IllegalMoveError(message, code)


def decide(state: State, seat: int, command: Command) -> tuple[Event, ...]:
    """Validate ``command`` from ``seat`` and return the events it causes (state unchanged).

    Raises:
        RuleError: the game is over, nothing is awaited from ``seat``, the command does not fit
            the phase, a card is not held, a meld is invalid, or a rule forbids the move; the
            error's ``code`` says which.
    """
    phase = state.phase
    if phase is Phase.GAME_OVER:
        raise IllegalMoveError("the game is over", "rules/game_over")
    if not 0 <= seat < len(state.hands):
        raise IllegalMoveError(f"no seat {seat!r} at this table", "rules/no_such_seat")
    if phase is Phase.DEAL or (phase is Phase.DRAW and not state.stock and _can_rebuild(state)):
        # chance_pending(state), inlined
        raise IllegalMoveError("waiting for the deal", "rules/wrong_phase")
    if phase is Phase.CLAIM:
        return _decide_claim_window(state, seat, command)
    if seat != state.turn:
        raise IllegalMoveError(
            f"it is seat {state.turn}'s turn, not seat {seat}'s", "rules/not_your_turn"
        )
    # The commands of most moves, dispatched on their exact type before the general match
    # below (which they would reach with the same result).
    if phase is not Phase.FIRST_UPCARD:
        if type(command) is Discard:
            return _decide_discard(state, seat, command.card)
        if type(command) is DrawStock:
            return _decide_draw(state, seat)
        if type(command) is TakeDiscard:
            return _decide_take(state, seat, command.count)
    if phase is Phase.FIRST_UPCARD:
        match command:
            case TakeDiscard(count=1):
                return (TookDiscard(seat=seat, cards=state.pile[-1:]),)
            case Pass():
                return (UpcardPassed(seat=seat),)
        raise IllegalMoveError("take the first upcard or pass", "rules/wrong_phase")
    if not state.rules.table_melds and isinstance(command, Meld | LayOff | SwapJoker):
        raise IllegalMoveError(
            "no melds are laid on the table in this game; knock instead", "rules/no_table_melds"
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
        case Claim():
            raise IllegalMoveError("no claim window is open", "rules/no_claim_window")
        case Knock(card=card, melds=melds):
            return _decide_knock(state, seat, card, melds)
    raise RuleError(f"unknown command {command!r}", "rules/unknown_command")


def _decide_draw(state: State, seat: int) -> tuple[Event, ...]:
    if state.phase is not Phase.DRAW:
        raise IllegalMoveError("you have already drawn this turn", "rules/wrong_phase")
    if _at_wall(state):
        raise IllegalMoveError(
            "the stock is down to the wall: pass, or take the upcard to knock with it",
            "rules/at_wall",
        )
    if not state.stock:
        raise IllegalMoveError("the stock is empty", "rules/stock_empty")
    return (Drew(seat=seat, card=state.stock[0]),)


def _decide_take(state: State, seat: int, count: int) -> tuple[Event, ...]:
    _require(state.phase is Phase.DRAW, "you have already drawn this turn", "rules/wrong_phase")
    _require(bool(state.pile), "the discard pile is empty", "rules/pile_empty")
    _require(
        state.upcard_passes < 2,
        "both players passed the first upcard: draw from the stock",
        "rules/must_draw_stock",
    )
    if _at_wall(state):
        upcard = state.pile[-1]
        _require(
            count == 1 and bool(_knock_options(state, (*state.hands[seat], upcard), upcard)),
            "at the wall the upcard may be taken only to knock with it",
            "rules/must_knock",
        )
    if not isinstance(count, int) or not 1 <= count <= len(state.pile):
        raise IllegalMoveError(
            f"the pile holds {len(state.pile)} cards; cannot take {count!r}", "rules/too_deep"
        )
    if count > 1 and not state.rules.deep_draws:
        raise IllegalMoveError(
            f"only the upcard may be taken, not {count!r} cards", "rules/too_deep"
        )
    if count not in _take_depths(state, seat):
        card = state.pile[-count]
        raise IllegalMoveError(
            f"{format_card(card)} may be taken only to be laid down at once, and you cannot",
            "rules/cannot_use_taken_card",
        )
    return (TookDiscard(seat=seat, cards=state.pile[-count:]),)


def _decide_pass(state: State, seat: int) -> tuple[Event, ...]:
    if state.phase is Phase.DRAW and _at_wall(state):
        return (Declined(seat=seat), *_end_hand(state, -1, "wall", False))
    _require(
        state.phase is Phase.DRAW and not state.stock,
        "you may pass only when the stock is exhausted",
        "rules/cannot_pass",
    )
    return (Declined(seat=seat), *_end_hand(state, -1, "stock_exhausted", False))


def _decide_claim_window(state: State, seat: int, command: Command) -> tuple[Event, ...]:
    if seat not in awaiting(state):
        raise IllegalMoveError(
            f"seat {seat} may not answer this claim window", "rules/not_your_turn"
        )
    match command:
        case Pass():
            answer = ClaimAnswered(seat=seat, count=0)
        case Claim(count=count):
            if count not in _claim_depths(state, seat):
                raise IllegalMoveError(f"cannot claim {count!r} card(s) now", "rules/cannot_claim")
            answer = ClaimAnswered(seat=seat, count=count)
        case _:
            raise IllegalMoveError("a claim window is open: claim or pass", "rules/wrong_phase")
    after = evolve(state, answer)
    return (answer, *_resolve_claims(after))


def _resolve_claims(state: State) -> tuple[Event, ...]:
    """Events closing the window once its outcome is certain (nothing while it is not)."""
    for seat, answer in zip(state.claim_seats, state.claim_answers):
        if answer == 0:
            return ()
        if answer > 0:
            cards = state.pile[-answer:]
            stock_cards = state.stock[:2] if state.claim_kind == "bussare" else ()
            return (Claimed(seat=seat, cards=cards, stock_cards=stock_cards),)
    return (ClaimWindowClosed(),)


def _held(state: State, seat: int, cards: Iterable[Card]) -> None:
    hand = set(state.hands[seat])
    for card in cards:
        if card not in hand:
            raise IllegalMoveError(f"you do not hold {format_card(card)}", "rules/card_not_held")


def _check_lay_down(state: State, seat: int, laid: Sequence[Card]) -> tuple[Card, ...]:
    """Common checks of a meld or lay-off; returns what stays in hand."""
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    if state.required != NO_CARD and state.required not in laid:
        raise IllegalMoveError(
            f"lay down {format_card(state.required)} first: it was taken to be used at once",
            "rules/must_use_taken_card",
        )
    remaining = _without(state.hands[seat], laid)
    if len(remaining) < _min_remaining(state, seat):
        if state.rules.must_discard_to_go_out and len(remaining) == 0:
            raise IllegalMoveError("your last card must be a discard", "rules/must_discard")
        raise IllegalMoveError(
            "you may not open and close in the same turn (chiudere_in_mano is off)",
            "rules/no_close_on_opening",
        )
    if not _remaining_ok(state, seat, remaining):
        raise IllegalMoveError(
            "that would leave only the card taken from the pile, which may not be discarded",
            "rules/no_discard_left",
        )
    return remaining


def _after_lay_down(
    state: State, seat: int, event: Event, remaining: Sequence[Card]
) -> tuple[Event, ...]:
    if remaining:
        return (event,)
    if state.rules.floating:
        return (event,) if state.resume >= 0 else (event, Floated(seat=seat))
    # Settle from the state after the lay-down, so that the cards of the command that takes
    # the player out count for him (Rummy 500 credits every card a player laid down); whether
    # he went rummy is still judged on what he laid before this turn.
    return (event, *_end_hand(evolve(state, event), seat, "out", not state.laid_before[seat]))


def _decide_meld(state: State, seat: int, specs: Sequence[MeldSpec]) -> tuple[Event, ...]:
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    _require(len(specs) > 0, "a meld command needs at least one meld", "rules/invalid_meld")
    rules = state.rules
    limit = rules.melds_per_turn
    if limit is not None and not state.all_at_once and state.melds_this_turn + len(specs) > limit:
        raise IllegalMoveError(f"at most {limit} meld(s) per turn", "rules/meld_limit")
    cards = [card for spec in specs for card in spec.cards]
    if len(set(cards)) != len(cards):
        raise InvalidMeldError("a card is used twice", "rules/invalid_meld")
    _held(state, seat, cards)
    checked = tuple(check_meld(spec.cards, rules.meld_rules, spec.faces) for spec in specs)
    if not _opened(state, seat):
        value = opening_points(checked)
        if value < rules.opening_minimum:
            raise IllegalMoveError(
                f"an opening needs {rules.opening_minimum} points; these melds make {value}",
                "rules/opening_too_low",
            )
    if state.all_at_once and len(cards) < len(state.hands[seat]) - 1:
        raise IllegalMoveError(
            f"in deal {state.hand_number} you may meld only by laying down your whole hand at once",
            "rules/all_at_once",
        )
    remaining = _check_lay_down(state, seat, cards)
    event = Melded(seat=seat, melds=tuple(MeldSpec(m.cards, m.faces) for m in checked))
    return _after_lay_down(state, seat, event, remaining)


def _table_meld(state: State, target: int) -> TableMeld:
    if not isinstance(target, int) or not 0 <= target < len(state.melds):
        raise IllegalMoveError(f"there is no table meld {target!r}", "rules/no_such_meld")
    return state.melds[target]


def _decide_layoff(
    state: State, seat: int, card: Card, target: int, face: int
) -> tuple[Event, ...]:
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    _held(state, seat, (card,))
    if not _opened(state, seat):
        raise IllegalMoveError("you may lay off only after opening", "rules/not_opened")
    if state.rules.layoff_requires_own_meld and not state.melded[seat]:
        raise IllegalMoveError(
            "you may lay off only after your own first meld", "rules/layoff_before_meld"
        )
    with_layoff(_table_meld(state, target).meld, card, face, state.rules.meld_rules)
    remaining = _check_lay_down(state, seat, (card,))
    event = LaidOff(seat=seat, card=card, target=target, face=face)
    return _after_lay_down(state, seat, event, remaining)


def _decide_swap(state: State, seat: int, card: Card, target: int) -> tuple[Event, ...]:
    _require(state.rules.joker_swap, "joker swaps are not allowed here", "rules/no_joker_swap")
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    _require(_opened(state, seat), "you may swap a joker only after opening", "rules/not_opened")
    _require(
        state.required == NO_CARD,
        "lay down the card taken from the pile first",
        "rules/must_use_taken_card",
    )
    _held(state, seat, (card,))
    _, joker = with_swap(_table_meld(state, target).meld, card)
    if not _remaining_ok(state, seat, (*_without(state.hands[seat], (card,)), joker)):
        raise IllegalMoveError(
            "that would leave only the card taken from the pile, which may not be discarded",
            "rules/no_discard_left",
        )
    return (SwappedJoker(seat=seat, card=card, target=target, joker=joker),)


def _decide_discard(state: State, seat: int, card: Card) -> tuple[Event, ...]:
    if state.phase is not Phase.PLAY:
        raise IllegalMoveError("draw first", "rules/wrong_phase")
    if card not in state.hands[seat]:  # _held, inlined
        raise IllegalMoveError(f"you do not hold {format_card(card)}", "rules/card_not_held")
    if state.required != NO_CARD or state.resume >= 0:
        required = state.required if state.required != NO_CARD else state.taken[0]
        raise IllegalMoveError(
            f"lay down {format_card(required)} first: it was taken to be used at once",
            "rules/must_use_taken_card",
        )
    if card == _forbidden_discard(state):
        raise IllegalMoveError(
            f"{format_card(card)} was taken from the pile this turn and may not be discarded",
            "rules/discard_taken_card",
        )
    _require(
        not state.must_knock,
        "you took the upcard at the wall: knock with it",
        "rules/must_knock",
    )
    event = Discarded(seat=seat, card=card)
    if len(state.hands[seat]) == 1:
        if not _may_go_out_by_discard(state, seat, card):
            if state.rules.unplayable_last_discard and _playable(state, card):
                raise IllegalMoveError(
                    f"{format_card(card)} could be laid off; the card you go out with must"
                    " not be playable",
                    "rules/playable_discard",
                )
            raise IllegalMoveError(
                "you may not open and close in the same turn (chiudere_in_mano is off)",
                "rules/no_close_on_opening",
            )
        return (event, *_end_hand(state, seat, "out", not state.laid_before[seat]))
    idle = 0 if _made_progress(state) else state.idle_turns + 1
    rules = state.rules
    if idle < rules.idle_turn_cap and not (rules.rummy_call or rules.bussare):
        return (event,)
    after = evolve(state, event)
    if after.idle_turns >= rules.idle_turn_cap:
        return (event, *_end_hand(after, -1, "idle_cap", False))
    window = _claim_window(after, seat)
    return (event, window) if window is not None else (event,)


def _claim_window(state: State, discarder: int) -> ClaimWindowOpened | None:
    """The claim window a discard opens, if any."""
    rules = state.rules
    order = []
    seat = discarder
    for _ in range(state.players - 1):
        seat = _next_seat(state, seat)
        if seat == discarder:
            break
        order.append(seat)
    if rules.rummy_call:
        depths = _claimable_depths(state, state.pile)
        if depths and order:
            return ClaimWindowOpened(kind="rummy", seats=tuple(order), depths=depths)
    if rules.bussare and len(order) >= 2 and len(state.stock) >= 2:
        return ClaimWindowOpened(kind="bussare", seats=tuple(order[1:]), depths=(1,))
    return None


def _end_hand(
    state: State,
    ended_by: int,
    reason: str,
    rummy: bool,
    knock: KnockResult | None = None,
) -> tuple[Event, ...]:
    """The ``HandEnded`` (and ``GameEnded``) events closing the current hand.

    ``ended_by`` is the seat that went out or knocked (-1: no one did). ``knock`` carries the
    settlement of a knock (Knock and Gin Rummy); otherwise the hand is settled from the cards
    left in hand. The hand's ``winner`` is the seat that did best (``hand_winner``).
    """
    rules = state.rules
    hands = tuple(
        () if seat == ended_by and knock is None else hand for seat, hand in enumerate(state.hands)
    )
    if knock is not None:
        counts, points = knock.counts, knock.points
    elif rules.knocking:
        # Knock and Gin Rummy count only unmatched cards, even in a hand that ends void.
        counts = tuple(deadwood(hand, rules.meld_rules, rules.values) for hand in hands)
        points = settle_hand(rules, counts, ended_by, rummy, state.active)
    else:
        counts = tuple(hand_count(hand, rules) for hand in hands)
        melded: tuple[int, ...] = ()
        if rules.scoring == "melded_minus_hand":
            melded = tuple(meld_points(state.melds, seat, rules) for seat in range(state.players))
        points = settle_hand(rules, counts, ended_by, rummy, state.active, melded)
    winner = hand_winner(rules, points, state.active)
    totals = tuple(total + point for total, point in zip(state.scores, points))
    hands_won = state.hands_won
    if rules.scoring == "gin" and winner >= 0:
        hands_won = hands_won[:winner] + (hands_won[winner] + 1,) + hands_won[winner + 1 :]
    eliminated, winners, final = game_outcome(
        rules, totals, state.hand_number, state.active, hands_won, state.forfeited
    )
    ended = HandEnded(
        hand=state.hand_number,
        winner=winner,
        ended_by=ended_by,
        reason=reason,
        rummy=rummy,
        hands=hands,
        counts=counts,
        points=tuple(format_amount(point) for point in points),
        totals=tuple(format_amount(total) for total in totals),
        eliminated=eliminated,
        shown=knock.shown if knock is not None else (),
        laid_off=knock.laid_off if knock is not None else (),
    )
    if winners:
        return ended, GameEnded(
            winners=winners, totals=tuple(format_amount(total) for total in final)
        )
    return (ended,)


def _decide_knock(
    state: State, seat: int, card: Card, specs: Sequence[MeldSpec]
) -> tuple[Event, ...]:
    rules = state.rules
    _require(rules.knocking != "", "there is no knocking in this game", "rules/no_knocking")
    _require(state.phase is Phase.PLAY, "draw first", "rules/wrong_phase")
    hand = state.hands[seat]
    if card == NO_CARD:
        _require(
            rules.knocking == "gin" and rules.big_gin_bonus > 0,
            "big gin (knocking without a discard) is not played here",
            "rules/no_big_gin",
        )
        remaining = hand
    else:
        _held(state, seat, (card,))
        if card == _forbidden_discard(state):
            raise IllegalMoveError(
                f"{format_card(card)} was taken from the pile this turn and may not be discarded",
                "rules/discard_taken_card",
            )
        remaining = _without(hand, (card,))
    if specs:
        cards = [placed for spec in specs for placed in spec.cards]
        if len(set(cards)) != len(cards) or not set(cards) <= set(remaining):
            raise InvalidMeldError(
                "the melds must use distinct cards of the hand that stays", "rules/invalid_meld"
            )
        melds = tuple(check_meld(spec.cards, rules.meld_rules, spec.faces) for spec in specs)
    else:
        melds, _ = best_melds(remaining, rules.meld_rules, rules.values)
    used = {placed for meld in melds for placed in meld.cards}
    unmatched = hand_count([placed for placed in remaining if placed not in used], rules)
    if card == NO_CARD and unmatched:
        raise IllegalMoveError("big gin needs all eleven cards melded", "rules/not_big_gin")
    if rules.knocking == "gin" and unmatched > state.knock_limit:
        raise IllegalMoveError(
            f"you may knock with at most {state.knock_limit} deadwood, not {unmatched}",
            "rules/knock_too_high",
        )
    knocked = Knocked(
        seat=seat,
        card=card,
        melds=tuple(MeldSpec(meld.cards, meld.faces) for meld in melds),
        deadwood=unmatched,
    )
    after = evolve(state, knocked)
    if rules.knocking == "gin":
        result = settle_gin(
            rules, after.hands, after.active, seat, melds, unmatched, big=card == NO_CARD
        )
    else:
        result = settle_knock(rules, after.hands, after.active, seat, melds, unmatched)
    return (knocked, *_end_hand(after, seat, result.reason, False, result))


# evolve ----------------------------------------------------------------------------------------


def _replace(state: State, **changes: object) -> State:
    """A ``dataclasses.replace`` for ``State`` that is several times as fast.

    ``evolve`` copies the state once per event, which makes this the hottest function of a
    random playout. ``State`` keeps its fields in an instance dictionary (no ``__slots__``) so
    that a copy is two dictionary updates in C instead of one ``__setattr__`` per field.
    """
    new = _new_state(State)
    fields = new.__dict__
    fields.update(state.__dict__)
    fields.update(changes)
    return new


_new_state = object.__new__


def _set_hand(
    hands: tuple[tuple[Card, ...], ...], seat: int, hand: Iterable[Card]
) -> tuple[tuple[Card, ...], ...]:
    return hands[:seat] + (tuple(sorted(hand)),) + hands[seat + 1 :]


def _set_flag(flags: tuple[bool, ...], seat: int, value: bool) -> tuple[bool, ...]:
    return flags[:seat] + (value,) + flags[seat + 1 :]


def _made_progress(state: State) -> bool:
    """Whether the turn ending now moved the hand on: a card laid on the table or, where no
    melds go on the table, a card drawn from the first stock (towards its end; once the pile
    has been turned into a stock, turns count towards the safety cap)."""
    if state.rules.table_melds:
        return state.laid_this_turn
    return not state.taken and state.reuses == 0


def _end_turn(state: State, seat: int, **changes: object) -> State:
    """The bookkeeping when ``seat``'s turn (or out-of-turn lay-down) is over."""
    laid_before = state.laid_before
    if state.laid_this_turn:
        laid_before = _set_flag(laid_before, seat, True)
    new = _new_state(State)
    fields = new.__dict__
    fields.update(state.__dict__)  # as _replace, with the turn's fields set in place
    fields["phase"] = Phase.DRAW
    fields["turn"] = _next_seat(state, seat)
    fields["laid_before"] = laid_before
    fields["taken"] = ()
    fields["required"] = NO_CARD
    fields["resume"] = -1
    fields["melds_this_turn"] = 0
    fields["laid_this_turn"] = False
    fields["idle_turns"] = 0 if _made_progress(state) else state.idle_turns + 1
    fields["upcard_passes"] = 0
    fields["must_knock"] = False
    fields.update(changes)
    return new


def _after_laying(state: State, seat: int, laid: Iterable[Card]) -> State:
    """Clear the required card once laid; end a claimer's out-of-turn play."""
    if state.required != NO_CARD and state.required in laid:
        state = _replace(state, required=NO_CARD)
    if state.resume >= 0 and state.required == NO_CARD:
        state = _end_turn(state, seat, turn=state.resume, idle_turns=0)
    return state


def evolve(state: State, event: Event) -> State:
    """Apply one event. Never fails on events that ``decide`` or ``chance`` produced."""
    replace = _replace
    # The events of most moves first, on their exact type; the match below does the same.
    if type(event) is Discarded:
        seat = event.seat
        hands = state.hands
        hand = hands[seat]
        card = event.card
        # _without(hand, (card,)) for a card held once, by slicing.
        if card in hand:
            index = hand.index(card)
            kept = hand[:index] + hand[index + 1 :]
            if card in kept:  # pragma: no cover - a card is never held twice
                kept = _without(hand, (card,))
        else:
            kept = hand
        return _end_turn(
            state,
            seat,
            hands=_set_hand(hands, seat, kept),
            pile=(*state.pile, card),
        )
    if type(event) is Drew:
        seat = event.seat
        hands = state.hands
        return replace(
            state,
            phase=Phase.PLAY,
            hands=_set_hand(hands, seat, (*hands[seat], event.card)),
            stock=state.stock[1:],
        )
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
            must_use = state.phase is Phase.DRAW and _take_must_use(state, seat, len(cards))
            return replace(
                state,
                phase=Phase.PLAY,
                hands=_set_hand(state.hands, seat, (*state.hands[seat], *cards)),
                pile=state.pile[: len(state.pile) - len(cards)],
                taken=cards,
                required=cards[0] if must_use else NO_CARD,
                must_knock=state.phase is Phase.DRAW and _at_wall(state),
            )
        case UpcardPassed(seat=seat):
            passes = state.upcard_passes + 1
            return replace(
                state,
                phase=Phase.FIRST_UPCARD if passes < 2 else Phase.DRAW,
                turn=_next_seat(state, seat),
                upcard_passes=passes,
            )
        case Knocked(seat=seat, card=card):
            if card == NO_CARD:
                return state
            return replace(
                state,
                hands=_set_hand(state.hands, seat, _without(state.hands[seat], (card,))),
                pile=(*state.pile, card),
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
            state = replace(
                state,
                hands=_set_hand(state.hands, seat, _without(state.hands[seat], melded_cards)),
                melds=state.melds + new,
                melded=_set_flag(state.melded, seat, True),
                melds_this_turn=state.melds_this_turn + len(specs),
                laid_this_turn=True,
            )
            return _after_laying(state, seat, melded_cards)
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
            state = replace(
                state,
                hands=_set_hand(state.hands, seat, _without(state.hands[seat], (card,))),
                melds=state.melds[:target] + (updated,) + state.melds[target + 1 :],
                laid_this_turn=True,
            )
            return _after_laying(state, seat, (card,))
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
            return _end_turn(
                state,
                seat,
                hands=_set_hand(state.hands, seat, _without(state.hands[seat], (card,))),
                pile=(*state.pile, card),
            )
        case Floated(seat=seat):
            return _end_turn(state, seat)
        case ClaimWindowOpened(kind=kind, seats=seats, depths=depths):
            return replace(
                state,
                phase=Phase.CLAIM,
                claim_kind=kind,
                claim_seats=seats,
                claim_answers=(0,) * len(seats),
                claim_depths=depths,
            )
        case ClaimAnswered(seat=seat, count=count):
            index = state.claim_seats.index(seat)
            answers = list(state.claim_answers)
            answers[index] = count if count > 0 else -1
            return replace(state, claim_answers=tuple(answers))
        case Claimed(seat=seat, cards=cards, stock_cards=stock_cards):
            resume = state.turn
            bussare = state.claim_kind == "bussare"
            return replace(
                state,
                phase=Phase.PLAY,
                turn=seat,
                hands=_set_hand(state.hands, seat, (*state.hands[seat], *cards, *stock_cards)),
                pile=state.pile[: len(state.pile) - len(cards)],
                stock=state.stock[len(stock_cards) :],
                taken=cards,
                required=NO_CARD if bussare else cards[0],
                resume=-1 if bussare else resume,
                claim_kind="",
                claim_seats=(),
                claim_answers=(),
                claim_depths=(),
            )
        case ClaimWindowClosed():
            return replace(
                state,
                phase=Phase.DRAW,
                claim_kind="",
                claim_seats=(),
                claim_answers=(),
                claim_depths=(),
            )
        case StockRebuilt(order=order):
            return replace(state, stock=order, pile=(), reuses=state.reuses + 1)
        case Declined():
            return state
        case SeatForfeited(seat=seat):
            return replace(state, forfeited=_set_flag(state.forfeited, seat, True))
        case HandEnded(totals=totals, eliminated=eliminated, winner=winner):
            active = state.active
            for seat in eliminated:
                active = _set_flag(active, seat, False)
            hands_won = state.hands_won
            if state.rules.scoring == "gin" and winner >= 0:
                hands_won = hands_won[:winner] + (hands_won[winner] + 1,) + hands_won[winner + 1 :]
            return replace(
                state,
                hands_won=hands_won,
                phase=Phase.DEAL,
                turn=-1,
                scores=tuple(Fraction(total) for total in totals),
                active=active,
                last_result=event,
                claim_kind="",
                claim_seats=(),
                claim_answers=(),
                claim_depths=(),
            )
        case GameEnded(winners=winners, totals=totals):
            return replace(
                state,
                phase=Phase.GAME_OVER,
                turn=-1,
                winners=winners,
                scores=tuple(Fraction(total) for total in totals),
            )
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
    phase = Phase.DRAW
    if rules.starter_extra_card:
        phase = Phase.PLAY
    elif rules.first_upcard:
        phase = Phase.FIRST_UPCARD
    knock_limit = rules.knock_limit
    if rules.oklahoma:
        rank = face_rank(card_face(order[upcard_index]))
        knock_limit = 0 if rank == 1 else min(rank, 10)
    return dataclasses.replace(
        state,
        phase=phase,
        knock_limit=knock_limit,
        upcard_passes=0,
        must_knock=False,
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
        required=NO_CARD,
        resume=-1,
        melds_this_turn=0,
        laid_this_turn=False,
        reuses=0,
        idle_turns=0,
        claim_kind="",
        claim_seats=(),
        claim_answers=(),
        claim_depths=(),
    )


def advance(
    state: State, rng: random.Random, choose: Callable[[State, int], Command]
) -> tuple[Event, ...]:
    """The events of the next step: chance from ``rng`` if due, else ``choose``'s command.

    ``choose(state, seat)`` is asked for the command of ``to_move(state)``.

    Raises:
        RuleError: the chosen command is illegal.
    """
    if chance_pending(state):
        return (chance(state, rng),)
    seat = to_move(state)
    return decide(state, seat, choose(state, seat))


def forfeit(state: State, seat: int) -> SeatForfeited:
    """The event forfeiting ``seat`` (the server's decision after repeated timeouts).

    Raises:
        IllegalMoveError: no such active seat, or it is already forfeited.
    """
    if not 0 <= seat < state.players or not state.active[seat] or state.forfeited[seat]:
        raise IllegalMoveError(f"seat {seat!r} cannot be forfeited", "rules/no_such_seat")
    return SeatForfeited(seat=seat)


def apply(state: State, events: Iterable[Event]) -> State:
    """Fold ``events`` into ``state``."""
    for event in events:
        state = evolve(state, event)
    return state
