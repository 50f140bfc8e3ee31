"""Position notation: a whole game ``State`` as one line of text, like chess's FEN.

``to_position(state)`` writes any state the engine produces; ``from_position(text)`` reads it
back, and ``from_position(to_position(state)) == state`` exactly. Golden files, bug reports and
tests that start from a chosen situation use it, so it is meant to be read and written by hand.

Theory of operation. A position is space-separated fields in a fixed order. The first four are
bare values; the others are labelled ``name=value`` so that a reader (and an error message) can
tell them apart. ``-`` stands for an empty list or for no seat. Example (wrapped here, one line in
real use)::

    ramino1 basic:going_rummy=plus10 3 play hand=2 dealer=1 turn=2 scores=0,25/2,3 active=111
    hands=7H.8H.9H.QS/AS.2S/KD stock=... pile=3C.TH melds=0:7C.0:8C.0:9C|1:JK=7D.1:7S.2:7H
    taken=TH required=- melded=110 laid_before=100 melds_this_turn=0 laid_this_turn=no
    reuses=0 idle_turns=0 resume=- claim=- upcard_passes=0 knock_limit=10 must_knock=no
    hands_won=0,0,0 winners=- last_result=hand:1;winner:0;ended_by:0;reason:out;rummy:no;
    hands:-/3C.4D/9S;counts:0,7,9;points:16,0,0;totals:16,0,0;eliminated:-;shown:-;laid_off:-

======================  =====================================================================
field                   meaning
======================  =====================================================================
``ramino1``             the notation and its version
variant                 preset name, then ``:`` and the options the table set, ``name=value``
                        joined by ``,`` in the text form ``parse_option_value`` reads
                        (``basic``, ``basic:going_rummy=plus10,max_stock_reuses=unlimited``)
players                 number of seats
phase                   ``deal``, ``first_upcard``, ``draw``, ``play``, ``claim`` or
                        ``game_over``
``hand=``               hands dealt so far (0 before the first deal)
``dealer=``             the dealer's seat, ``-`` before the first deal
``turn=``               the seat to move, ``-`` when no one is
``scores=``             each seat's total, exact: ``0,25/2,-3``
``active=``             one ``1``/``0`` per seat: still in the game
``hands=``              each seat's cards, seats joined by ``/``, cards by ``.`` (``-``: empty)
``stock=``              the stock, next card to draw first; may end with ``*``: "every card of
                        the pack not written elsewhere, in pack order" (for hand-written
                        positions)
``pile=``               the discard pile, bottom first, upcard last
``melds=``              the table melds joined by ``|``; each card as ``seat:card`` (the seat that
                        laid it), a joker with its declared face: ``1:JK=7C``
``taken=``              the cards the seat to move took from the pile this turn
``required=``           a card the seat to move must lay down before his turn ends, or ``-``
``melded=``             one ``1``/``0`` per seat: has made a meld of his own this hand
``laid_before=``        one ``1``/``0`` per seat: put a card on the table in an earlier turn
``melds_this_turn=``    melds laid down this turn
``laid_this_turn=``     ``yes``/``no``: a card was melded or laid off this turn
``reuses=``             times the discard pile became the stock this hand
``idle_turns=``         consecutive turns in which nothing was melded or laid off
``resume=``             during a claimer's lay-down, the seat that draws next, or ``-``
``claim=``              the open claim window, or ``-``: ``kind:K;seats:S;answers:A;depths:D``
                        (seats in priority order; one answer per seat: ``0`` waiting, ``-1``
                        passed, n claimed n cards; the pile depths that may be claimed)
``upcard_passes=``      seats that declined the first upcard (Gin Rummy; at 2 the non-dealer
                        must draw from the stock)
``knock_limit=``        the most deadwood a knock may leave this hand (Gin Rummy; Oklahoma
                        sets it from the first upcard); ``-`` before the first deal
``must_knock=``         ``yes``/``no``: the upcard was taken at the wall, so the turn must end
                        with a knock (Gin Rummy)
``hands_won=``          hands each seat has won, joined by ``,`` (Gin Rummy's boxes)
``forfeited=``          one ``1``/``0`` per seat: the server plays for it after repeated timeouts
``winners=``            the seats that won the game, joined by ``,``
``last_result=``        the previous hand's ``HandEnded``, or ``-``:
                        ``hand:N;winner:S;ended_by:S;reason:R;rummy:yes|no;hands:H;``
                        ``counts:C;points:P;totals:T;eliminated:E;shown:M;laid_off:L``
                        (``winner``: the seat that did best in the hand, ``-`` when none did
                        better than all others: a tie at the top, a Gin Rummy tie, a hand void
                        at the wall; ``ended_by``: the seat that went out or knocked, ``-``
                        when no one did; hands as in ``hands=``; ``shown``: after a knock, each
                        seat's melds as shown, seats joined by ``/``, melds by ``|``, cards
                        by ``.``, a joker with its declared face (``JK=7C``), ``-`` for a seat
                        with no meld, and ``shown:-`` when the hand did not end by a knock;
                        ``laid_off``: cards laid off on the knocker's melds, joined by ``.``;
                        the others joined by ``,``; the parts ``ended_by``, ``eliminated``,
                        ``shown`` and ``laid_off`` may each be left out: ``-`` or empty)
======================  =====================================================================

Cards are in the project's notation (``7H``, ``TD``, ``JK``, second copies ``7H2``); input is
case-insensitive and accepts ``10`` for ``T``. The fields from ``taken=`` on may be left out
(any of them; the others keep their order); they then take the values of a fresh turn (nothing
taken, no required card, flags off, counters 0, no claim window, no hands won, no winners, no
previous result), and ``knock_limit=`` is ``-`` before the first deal (``hand=0``), else the
table's ``knock_limit`` option (10 unless set; write it for an Oklahoma hand). ``to_position``
always writes every field. Positions written before the Knock and Gin Rummy fields existed
therefore still read as before, and the version stays ``ramino1``.

Reading normalises two things the engine keeps canonical: hands are sorted and the cards of each
meld (on the table or shown at a knock) are put in the order ``check_meld`` gives (runs
ascending, sets by suit). It refuses, with a
``NotationError`` coded ``notation/bad_position`` naming the field and the value, anything that
does not parse and any inconsistent position: a list with the wrong number of seats, a seat out
of range, a card outside the variant's pack or written twice, a pack only partly placed (all of
it must be somewhere once the first hand is dealt), an invalid meld, a taken card that is
nowhere on the table or in a hand, claim answers that do not match the claim seats, more upcard
passes than seats, a knock limit before the first deal or ``-`` after it, a shown meld that is
not valid or holds a card that is not in that seat's hand of ``last_result`` (or is shown
twice), laid-off cards without shown melds, or a laid-off card in no hand of ``last_result`` or
in a shown meld. A position that reads but that live play could never reach (more melds this
turn than ``melds_per_turn``, turn bookkeeping while no one has drawn, a hand of the wrong size in
Knock or Gin Rummy, ...) is refused with ``notation/impossible_position`` naming the field.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from fractions import Fraction

from protocol.cards import (
    Card,
    Face,
    format_card,
    is_joker,
    make_deck,
    parse_card,
)
from protocol.game import HandEnded, MeldSpec
from server.engine.errors import InvalidMeldError, NotationError, VariantError
from server.engine.game import NO_CARD, Phase, State, TableMeld
from server.engine.melds import check_meld
from server.engine.notation import format_declared, format_melds, parse_declared
from server.engine.variants import Rules, find_variant, make_rules, parse_option_value

__all__ = [
    "BAD_POSITION",
    "POSITION_VERSION",
    "UNWRITABLE_POSITION",
    "from_position",
    "to_position",
]

POSITION_VERSION = "ramino1"
"""The first field of every position: the notation's name and version."""

BAD_POSITION = "notation/bad_position"
"""Error code of a position text that does not parse or is inconsistent."""

UNWRITABLE_POSITION = "notation/unwritable_position"
"""Error code of a state the notation cannot express (rules not made by ``make_rules``)."""

IMPOSSIBLE_POSITION = "notation/impossible_position"
"""The code of a position that reads but that no game could reach under its rules."""

_LABELLED_FIELDS: tuple[tuple[str, bool], ...] = (
    ("hand", False),
    ("dealer", False),
    ("turn", False),
    ("scores", False),
    ("active", False),
    ("hands", False),
    ("stock", False),
    ("pile", False),
    ("melds", False),
    ("taken", True),
    ("required", True),
    ("melded", True),
    ("laid_before", True),
    ("melds_this_turn", True),
    ("laid_this_turn", True),
    ("reuses", True),
    ("idle_turns", True),
    ("resume", True),
    ("claim", True),
    ("upcard_passes", True),
    ("knock_limit", True),
    ("must_knock", True),
    ("hands_won", True),
    ("forfeited", True),
    ("winners", True),
    ("last_result", True),
)
"""Labelled fields in their order, and whether each may be left out."""

_RESULT_PARTS = (
    "hand",
    "winner",
    "ended_by",
    "reason",
    "rummy",
    "hands",
    "counts",
    "points",
    "totals",
    "eliminated",
    "shown",
    "laid_off",
)
"""The parts of ``last_result=`` in their order."""

_OPTIONAL_RESULT_PARTS = frozenset({"ended_by", "eliminated", "shown", "laid_off"})
"""The parts of ``last_result=`` that may be left out (the others keep their order)."""

_CLAIM_PARTS = ("kind", "seats", "answers", "depths")
"""The parts of ``claim=`` in their order."""

_NONE = "-"
_REST_OF_PACK = "*"
_NUMBER = re.compile(r"^[0-9]+$")
_ANSWER = re.compile(r"^(?:-1|[0-9]+)$")
_AMOUNT = re.compile(r"^-?[0-9]+(?:/[0-9]+)?$")
_WORD = re.compile(r"^[a-z0-9_]+$")
_BITS = re.compile(r"^[01]+$")
_PLACED = re.compile(r"^([0-9]+):(.+)$")


# Writing ---------------------------------------------------------------------------------------


def to_position(state: State) -> str:
    """Write ``state`` as one line in the position notation (see the module docstring).

    >>> from server.engine.game import new_game
    >>> state = new_game("basic", {"going_rummy": "plus10"}, seats=3)
    >>> text = to_position(state)
    >>> text.split()[:6]
    ['ramino1', 'basic:going_rummy=plus10', '3', 'deal', 'hand=0', 'dealer=-']
    >>> from_position(text) == state
    True

    Raises:
        NotationError: (code ``notation/unwritable_position``) the state's rules are not what
            ``make_rules`` gives for its preset, options and players (for example rules changed
            with ``rules_replace``), or its previous result has a reason that is not a word.
    """
    rules = state.rules
    _check_writable_rules(rules)
    fields = [
        POSITION_VERSION,
        _format_variant(rules),
        str(rules.players),
        state.phase.value,
        f"hand={state.hand_number}",
        f"dealer={_format_seat(state.dealer)}",
        f"turn={_format_seat(state.turn)}",
        f"scores={_format_amounts(str(score) for score in state.scores)}",
        f"active={_format_bits(state.active)}",
        f"hands={_format_hands(state.hands)}",
        f"stock={_format_cards(state.stock)}",
        f"pile={_format_cards(state.pile)}",
        f"melds={_format_melds(state.melds)}",
        f"taken={_format_cards(state.taken)}",
        f"required={_format_cards(() if state.required == NO_CARD else (state.required,))}",
        f"melded={_format_bits(state.melded)}",
        f"laid_before={_format_bits(state.laid_before)}",
        f"melds_this_turn={state.melds_this_turn}",
        f"laid_this_turn={_format_yes_no(state.laid_this_turn)}",
        f"reuses={state.reuses}",
        f"idle_turns={state.idle_turns}",
        f"resume={_format_seat(state.resume)}",
        f"claim={_format_claim(state)}",
        f"upcard_passes={state.upcard_passes}",
        f"knock_limit={_format_seat(state.knock_limit)}",
        f"must_knock={_format_yes_no(state.must_knock)}",
        f"hands_won={_format_numbers(state.hands_won)}",
        f"forfeited={_format_bits(state.forfeited)}",
        f"winners={_format_seats(state.winners)}",
        f"last_result={_format_result(state.last_result)}",
    ]
    return " ".join(fields)


def _check_writable_rules(rules: Rules) -> None:
    try:
        rebuilt = make_rules(rules.preset, dict(rules.options), rules.players)
    except VariantError as exc:
        raise NotationError(
            f"cannot write the rules of this state: {exc.message}", UNWRITABLE_POSITION
        ) from exc
    if rebuilt != rules:
        raise NotationError(
            f"cannot write rules that make_rules does not give for {_format_variant(rules)!r}"
            f" with {rules.players} players: {rules!r}",
            UNWRITABLE_POSITION,
        )


def _format_option_value(value: object) -> str:
    if value is None:
        return "unlimited"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _format_variant(rules: Rules) -> str:
    if not rules.options:
        return rules.preset
    options = ",".join(f"{name}={_format_option_value(value)}" for name, value in rules.options)
    return f"{rules.preset}:{options}"


def _format_seat(seat: int) -> str:
    return _NONE if seat < 0 else str(seat)


def _format_seats(seats: Sequence[int]) -> str:
    return ",".join(str(seat) for seat in seats) or _NONE


def _format_amounts(amounts: Iterable[str]) -> str:
    return ",".join(amounts) or _NONE


def _format_bits(flags: Sequence[bool]) -> str:
    return "".join("1" if flag else "0" for flag in flags) or _NONE


def _format_yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _format_cards(cards: Sequence[Card]) -> str:
    return ".".join(format_card(card) for card in cards) or _NONE


def _format_hands(hands: Sequence[Sequence[Card]]) -> str:
    return "/".join(_format_cards(hand) for hand in hands) or _NONE


def _format_placed(owner: int, card: Card, face: Face) -> str:
    return f"{owner}:{format_declared(card, face)}"


def _format_melds(melds: Sequence[TableMeld]) -> str:
    return (
        "|".join(
            ".".join(
                _format_placed(owner, card, face)
                for owner, card, face in zip(
                    table_meld.owners, table_meld.meld.cards, table_meld.meld.faces, strict=True
                )
            )
            for table_meld in melds
        )
        or _NONE
    )


def _format_shown(shown: Sequence[Sequence[MeldSpec]]) -> str:
    """Per seat (joined by ``/``) the melds shown (joined by ``|``); ``-`` for none."""
    return "/".join(format_melds(melds) for melds in shown) or _NONE


def _format_result(result: HandEnded | None) -> str:
    if result is None:
        return _NONE
    if not _WORD.match(result.reason):
        raise NotationError(
            f"cannot write a hand result whose reason is not a word: {result.reason!r}",
            UNWRITABLE_POSITION,
        )
    parts = (
        str(result.hand),
        _format_seat(result.winner),
        _format_seat(result.ended_by),
        result.reason,
        _format_yes_no(result.rummy),
        _format_hands(result.hands),
        _format_numbers(result.counts),
        _format_amounts(result.points),
        _format_amounts(result.totals),
        _format_seats(result.eliminated),
        _format_shown(result.shown),
        _format_cards(result.laid_off),
    )
    return _format_parts(_RESULT_PARTS, parts)


def _format_parts(names: Sequence[str], parts: Sequence[str]) -> str:
    return ";".join(f"{name}:{part}" for name, part in zip(names, parts, strict=True))


def _format_numbers(numbers: Sequence[int]) -> str:
    return ",".join(str(number) for number in numbers) or _NONE


def _format_claim(state: State) -> str:
    seats, answers, depths = state.claim_seats, state.claim_answers, state.claim_depths
    if not (state.claim_kind or seats or answers or depths):
        return _NONE
    if state.claim_kind and not _WORD.match(state.claim_kind):
        raise NotationError(
            f"cannot write a claim window whose kind is not a word: {state.claim_kind!r}",
            UNWRITABLE_POSITION,
        )
    parts = (
        state.claim_kind or _NONE,
        _format_seats(seats),
        _format_numbers(answers),
        _format_numbers(depths),
    )
    return _format_parts(_CLAIM_PARTS, parts)


# Reading ---------------------------------------------------------------------------------------


def _bad(field: str, value: str, problem: str) -> NotationError:
    return NotationError(f"position field {field!r} {value!r}: {problem}", BAD_POSITION)


def from_position(text: str) -> State:
    """Read a position written in the notation (see the module docstring) into a ``State``.

    >>> from protocol.cards import format_cards
    >>> state = from_position(
    ...     "ramino1 basic 2 draw hand=1 dealer=0 turn=1 scores=0,0 active=11"
    ...     " hands=2C.3C.4C.5D.6D.7D.8S.9S.TS.JH/AH.2H.3H.4S.5S.6S.7C.8C.9C.TD"
    ...     " stock=* pile=KD melds=-"
    ... )
    >>> format_cards(state.hands[1])
    '7C 8C 9C TD AH 2H 3H 4S 5S 6S'
    >>> (state.turn, format_card(state.pile[-1]), len(state.stock))
    (1, 'KD', 31)

    Raises:
        NotationError: (code ``notation/bad_position``) a field is missing, out of order,
            malformed or inconsistent with the others; (code ``notation/impossible_position``)
            the position reads but no game under its rules could reach it (see ``_reachable``).
            The message names the field and value.
    """
    tokens = text.split()
    if not tokens or tokens[0] != POSITION_VERSION:
        raise _bad("version", tokens[0] if tokens else text, f"expected {POSITION_VERSION!r}")
    if len(tokens) < 4:
        raise _bad("position", text, "expected the variant, players and phase fields")
    rules = _parse_rules(tokens[1], tokens[2])
    phase = _parse_phase(tokens[3])
    fields = _labelled_values(tokens[4:])
    return _Reader(rules, fields).state(phase)


def _labelled_values(tokens: Sequence[str]) -> dict[str, str]:
    """Match ``name=value`` tokens against the labelled fields, in order."""
    values: dict[str, str] = {}
    index = 0
    previous = "phase"
    for label, optional in _LABELLED_FIELDS:
        token = tokens[index] if index < len(tokens) else None
        if token is not None:
            name, equals, value = token.partition("=")
            if equals and name == label:
                if not value:
                    raise _bad(label, value, f"empty; write {_NONE!r} for none")
                values[label] = value
                index += 1
                previous = label
                continue
        if not optional:
            if token is None:
                raise _bad(label, "", f"missing after field {previous!r}")
            raise _bad(label, token, f"expected field {label}=... after field {previous!r}")
    if index < len(tokens):
        raise _bad(
            "position",
            tokens[index],
            f"unexpected after field {previous!r} (unknown, repeated or out of order)",
        )
    return values


@functools.lru_cache(maxsize=256)
def _parse_rules(variant_text: str, players_text: str) -> Rules:
    """The rules of a position's variant and players fields (cached: a server reading many
    positions, a worker loading tables from their snapshots, sees the same few; ``Rules`` are
    immutable, and a text that fails is not cached)."""
    preset_name, colon, options_text = variant_text.partition(":")
    try:
        preset = find_variant(preset_name)
    except VariantError as exc:
        raise _bad("variant", variant_text, exc.message) from exc
    options: dict[str, object] = {}
    if colon:
        for item in options_text.split(","):
            name, equals, value = item.partition("=")
            if not equals or not name or not value:
                raise _bad("variant", item, "expected an option as name=value")
            if name in options:
                raise _bad("variant", item, f"option {name!r} given twice")
            try:
                options[name] = parse_option_value(name, value)
            except VariantError as exc:
                raise _bad("variant", item, exc.message) from exc
    if not _NUMBER.match(players_text):
        raise _bad("players", players_text, "expected a number of players")
    players = int(players_text)
    if not preset.min_players <= players <= preset.max_players:
        raise _bad(
            "players",
            players_text,
            f"{preset.name} is played by {preset.min_players}-{preset.max_players} players",
        )
    try:
        return make_rules(preset.name, options, players)
    except VariantError as exc:
        raise _bad("variant", variant_text, exc.message) from exc


def _parse_phase(text: str) -> Phase:
    try:
        return Phase(text)
    except ValueError:
        raise _bad(
            "phase", text, f"expected one of {', '.join(phase.value for phase in Phase)}"
        ) from None


def _parse_count(field: str, text: str) -> int:
    if not _NUMBER.match(text):
        raise _bad(field, text, "expected a whole number")
    return int(text)


def _parse_yes_no(field: str, text: str) -> bool:
    if text not in {"yes", "no"}:
        raise _bad(field, text, "expected yes or no")
    return text == "yes"


def _parse_list(field: str, text: str, separator: str, players: int) -> list[str]:
    """Split a per-seat list and check it has one entry per seat."""
    items = text.split(separator)
    if len(items) != players:
        raise _bad(field, text, _seat_count_problem(len(items), players))
    return items


def _seat_count_problem(entries: int, players: int) -> str:
    return f"expected one entry per seat ({players}), got {entries}"


def _parse_seat(field: str, text: str, players: int, *, allow_none: bool) -> int:
    if allow_none and text == _NONE:
        return -1
    if not _NUMBER.match(text) or int(text) >= players:
        seats = f"a seat 0-{players - 1}" + (f" or {_NONE!r}" if allow_none else "")
        raise _bad(field, text, f"expected {seats}")
    return int(text)


def _parse_amounts(field: str, text: str, players: int) -> list[str]:
    items = _parse_list(field, text, ",", players)
    for item in items:
        if not _AMOUNT.match(item) or re.search(r"/0+$", item):
            raise _bad(field, item, "expected an exact amount such as 25, -3 or 25/2")
    return items


def _parse_bits(field: str, text: str, players: int) -> tuple[bool, ...]:
    if not _BITS.match(text):
        raise _bad(field, text, "expected one 1 or 0 per seat")
    if len(text) != players:
        raise _bad(field, text, _seat_count_problem(len(text), players))
    return tuple(bit == "1" for bit in text)


_CARDS: dict[str, Card] = {}
"""Card texts already read (a position holds every card of the pack: ``parse_card`` for each
was most of the time spent reading one)."""
_CARDS_KEPT = 4096


def _parse_card(field: str, text: str) -> Card:
    card = _CARDS.get(text)
    if card is not None:
        return card
    try:
        card = parse_card(text)
    except NotationError as exc:
        raise _bad(field, text, "not a card") from exc
    if len(_CARDS) < _CARDS_KEPT:
        _CARDS[text] = card
    return card


@functools.lru_cache(maxsize=64)
def _pack(decks: int, jokers: int) -> tuple[tuple[Card, ...], frozenset[Card]]:
    """The cards of a pack, in order and as a set."""
    pack = tuple(make_deck(decks, jokers))
    return pack, frozenset(pack)


def _parse_declared(field: str, text: str) -> tuple[Card, Face]:
    """A card of a meld, a joker with its declared face (``JK=7C``): see ``parse_declared``."""
    try:
        card, face = parse_declared(text)
    except NotationError as exc:
        raise _bad(field, text, f"expected a card, or JK=face for a joker: {exc.message}") from exc
    if is_joker(face):
        raise _bad(field, text, "a joker needs its declared face, as JK=7C")
    return card, face


def _parse_cards(field: str, text: str) -> tuple[Card, ...]:
    if text == _NONE:
        return ()
    items = text.split(".")
    cards = tuple(map(_CARDS.get, items))  # each card read before, in one pass in C
    if None in cards:
        cards = tuple(_parse_card(field, item) for item in items)
    return cards  # type: ignore[return-value]


def _parse_hands(field: str, text: str, players: int) -> tuple[tuple[Card, ...], ...]:
    return tuple(_parse_cards(field, item) for item in _parse_list(field, text, "/", players))


def _parse_seats(field: str, text: str, players: int) -> tuple[int, ...]:
    if text == _NONE:
        return ()
    return tuple(_parse_seat(field, item, players, allow_none=False) for item in text.split(","))


def _parse_numbers(field: str, text: str, pattern: re.Pattern[str]) -> tuple[int, ...]:
    if text == _NONE:
        return ()
    items = text.split(",")
    for item in items:
        if not pattern.match(item):
            raise _bad(field, item, "expected a whole number")
    return tuple(int(item) for item in items)


def _parse_parts(
    field: str, text: str, names: Sequence[str], optional: frozenset[str] = frozenset()
) -> dict[str, str]:
    """Split ``name:value;name:value`` parts given in the order of ``names``.

    The parts named in ``optional`` may be left out; they are then missing from the result.
    """
    items = text.split(";")
    expected = f"expected the parts {';'.join(f'{name}:' for name in names)}"
    parts: dict[str, str] = {}
    index = 0
    for name in names:
        item = items[index] if index < len(items) else None
        if item is not None:
            label, colon, value = item.partition(":")
            if colon and label == name:
                if not value:
                    raise _bad(f"{field}.{name}", value, f"empty; write {_NONE!r} for none")
                parts[name] = value
                index += 1
                continue
        if name not in optional:
            if item is None:
                raise _bad(field, text, f"{expected}; part {name}: is missing")
            raise _bad(field, item, f"expected part {name}:... ({expected})")
    if index < len(items):
        raise _bad(
            field, items[index], f"unexpected part (unknown, repeated or out of order; {expected})"
        )
    return parts


class _Reader:
    """Turns the labelled field texts of one position into a ``State``, checking them."""

    def __init__(self, rules: Rules, fields: dict[str, str]) -> None:
        self.rules = rules
        self.players = rules.players
        self.fields = fields
        self.pack, self.pack_set = _pack(rules.decks, rules.jokers)
        self.placed: dict[Card, str] = {}
        """Each card written in hands, stock, pile or melds, and the field it is in."""

    def text(self, field: str, default: str) -> str:
        return self.fields.get(field, default)

    def seat(self, field: str, *, allow_none: bool) -> int:
        return _parse_seat(field, self.text(field, _NONE), self.players, allow_none=allow_none)

    def count(self, field: str) -> int:
        return _parse_count(field, self.text(field, "0"))

    def bits(self, field: str) -> tuple[bool, ...]:
        return _parse_bits(field, self.text(field, "0" * self.players), self.players)

    def place(self, field: str, cards: Iterable[Card]) -> None:
        """Record cards as lying in ``field``: each once, each from the pack."""
        for card in cards:
            if card not in self.pack_set:
                raise _bad(
                    field,
                    format_card(card),
                    f"not in the pack of this table ({self.rules.decks} deck(s),"
                    f" {self.rules.jokers} joker(s))",
                )
            if card in self.placed:
                raise _bad(field, format_card(card), f"already in field {self.placed[card]!r}")
            self.placed[card] = field

    def stock(self) -> tuple[Card, ...]:
        """The stock; a final ``*`` stands for the cards of the pack not placed elsewhere."""
        text = self.fields["stock"]
        rest = text == _REST_OF_PACK or text.endswith("." + _REST_OF_PACK)
        if rest:
            text = text[: -len(_REST_OF_PACK)].rstrip(".") or _NONE
        stock = _parse_cards("stock", text)
        self.place("stock", stock)
        if rest:
            extra = tuple(card for card in self.pack if card not in self.placed)
            self.place("stock", extra)
            stock += extra
        return stock

    def melds(self) -> tuple[TableMeld, ...]:
        text = self.fields["melds"]
        if text == _NONE:
            return ()
        return tuple(self.meld(item) for item in text.split("|"))

    def meld(self, text: str) -> TableMeld:
        cards: list[Card] = []
        faces: list[Face] = []
        owner_of: dict[Card, int] = {}
        for item in text.split("."):
            match = _PLACED.match(item)
            if match is None:
                raise _bad("melds", item, "expected seat:card, or seat:JK=face for a joker")
            owner_text, declared = match.groups()
            owner = int(owner_text)
            if owner >= self.players:
                raise _bad("melds", item, f"expected a seat 0-{self.players - 1} before the card")
            card, face = _parse_declared("melds", declared)
            cards.append(card)
            faces.append(face)
            owner_of[card] = owner
        self.place("melds", cards)
        try:
            meld = check_meld(cards, self.rules.meld_rules, faces)
        except InvalidMeldError as exc:
            raise _bad("melds", text, f"not a valid meld: {exc.message}") from exc
        return TableMeld(meld, tuple(owner_of[card] for card in meld.cards))

    def check_pack(self) -> None:
        """Once dealt, every card of the pack lies somewhere; before that, none does."""
        if not self.placed:
            return
        missing = [card for card in self.pack if card not in self.placed]
        if missing:
            raise _bad(
                "stock",
                ".".join(format_card(card) for card in missing),
                "cards of the pack are missing from the position (write them, or end the"
                f" stock with {_REST_OF_PACK!r})",
            )

    def taken(self) -> tuple[Card, ...]:
        taken = _parse_cards("taken", self.text("taken", _NONE))
        for card in taken:
            if card not in self.placed or self.placed[card] not in {"hands", "melds"}:
                raise _bad("taken", format_card(card), "not in a hand or a meld")
        if len(set(taken)) != len(taken):
            raise _bad("taken", self.fields["taken"], "a card is written twice")
        return taken

    def last_result(self) -> HandEnded | None:
        text = self.text("last_result", _NONE)
        if text == _NONE:
            return None
        parts = _parse_parts("last_result", text, _RESULT_PARTS, _OPTIONAL_RESULT_PARTS)
        players = self.players

        def part(name: str) -> tuple[str, str]:
            return f"last_result.{name}", parts[name]

        reason = parts["reason"]
        if not _WORD.match(reason):
            raise _bad("last_result.reason", reason, "expected a word such as out or idle_cap")
        hands = _parse_hands(*part("hands"), players)
        seen: set[Card] = set()
        for card in (card for hand in hands for card in hand):
            if card not in self.pack_set or card in seen:
                raise _bad("last_result.hands", format_card(card), "not in the pack, or twice")
            seen.add(card)
        shown = self.shown(parts.get("shown", _NONE), hands)
        laid_off = self.laid_off(parts.get("laid_off", _NONE), hands, shown)
        counts_field, counts_text = part("counts")
        return HandEnded(
            hand=_parse_count(*part("hand")),
            winner=_parse_seat(*part("winner"), players, allow_none=True),
            ended_by=_parse_seat(
                "last_result.ended_by", parts.get("ended_by", _NONE), players, allow_none=True
            ),
            reason=reason,
            rummy=_parse_yes_no(*part("rummy")),
            hands=hands,
            counts=tuple(
                _parse_count(counts_field, item)
                for item in _parse_list(counts_field, counts_text, ",", players)
            ),
            points=tuple(_parse_amounts(*part("points"), players)),
            totals=tuple(_parse_amounts(*part("totals"), players)),
            eliminated=_parse_seats(
                "last_result.eliminated", parts.get("eliminated", _NONE), players
            ),
            shown=shown,
            laid_off=laid_off,
        )

    def shown(self, text: str, hands: Sequence[Sequence[Card]]) -> tuple[tuple[MeldSpec, ...], ...]:
        """``last_result.shown``: each seat's melds shown at a knock, cards from his hand."""
        field = "last_result.shown"
        if text == _NONE:
            return ()
        shown: list[tuple[MeldSpec, ...]] = []
        seen: set[Card] = set()
        for seat, seat_text in enumerate(_parse_list(field, text, "/", self.players)):
            melds: list[MeldSpec] = []
            for meld_text in [] if seat_text == _NONE else seat_text.split("|"):
                spec = self.shown_meld(meld_text)
                for card in spec.cards:
                    if card in seen:
                        raise _bad(field, format_card(card), "shown twice")
                    if card not in hands[seat]:
                        raise _bad(
                            field, format_card(card), f"not in seat {seat}'s last_result.hands"
                        )
                    seen.add(card)
                melds.append(spec)
            shown.append(tuple(melds))
        return tuple(shown)

    def shown_meld(self, text: str) -> MeldSpec:
        """One shown meld: cards joined by ``.``, a joker with its declared face."""
        field = "last_result.shown"
        cards: list[Card] = []
        faces: list[Face] = []
        for item in text.split("."):
            card, face = _parse_declared(field, item)
            cards.append(card)
            faces.append(face)
        try:
            meld = check_meld(cards, self.rules.meld_rules, faces)
        except InvalidMeldError as exc:
            raise _bad(field, text, f"not a valid meld: {exc.message}") from exc
        return MeldSpec(meld.cards, meld.faces)

    def laid_off(
        self,
        text: str,
        hands: Sequence[Sequence[Card]],
        shown: Sequence[Sequence[MeldSpec]],
    ) -> tuple[Card, ...]:
        """``last_result.laid_off``: cards of a hand, not shown in a meld, after a knock."""
        field = "last_result.laid_off"
        laid_off = _parse_cards(field, text)
        if laid_off and not shown:
            raise _bad(field, text, "cards laid off, but no melds shown (shown:-)")
        in_hands = {card for hand in hands for card in hand}
        in_shown = {card for melds in shown for spec in melds for card in spec.cards}
        for card in laid_off:
            if card not in in_hands:
                raise _bad(field, format_card(card), "not in last_result.hands")
            if card in in_shown:
                raise _bad(field, format_card(card), "also shown in a meld")
        if len(set(laid_off)) != len(laid_off):
            raise _bad(field, text, "a card is written twice")
        return laid_off

    def knock_limit(self, hand_number: int) -> int:
        """The hand's knock limit: ``-`` before the first deal, a number from then on."""
        text = self.fields.get("knock_limit")
        if text is None:
            return -1 if hand_number == 0 else self.rules.knock_limit
        if text == _NONE:
            if hand_number > 0:
                raise _bad("knock_limit", text, "expected a number once a hand has been dealt")
            return -1
        if hand_number == 0:
            raise _bad("knock_limit", text, f"expected {_NONE!r} before the first deal")
        return _parse_count("knock_limit", text)

    def upcard_passes(self) -> int:
        passes = self.count("upcard_passes")
        if passes > self.players:
            raise _bad(
                "upcard_passes", self.fields["upcard_passes"], f"more than {self.players} seats"
            )
        return passes

    def hands_won(self) -> tuple[int, ...]:
        text = self.text("hands_won", ",".join("0" * self.players))
        return tuple(
            _parse_count("hands_won", item)
            for item in _parse_list("hands_won", text, ",", self.players)
        )

    def required(self) -> Card:
        required = _parse_cards("required", self.text("required", _NONE))
        if not required:
            return NO_CARD
        if len(required) > 1:
            raise _bad("required", self.fields["required"], "expected one card or '-'")
        if required[0] not in self.placed:
            raise _bad("required", format_card(required[0]), "not in the position")
        return required[0]

    def claim(self) -> tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """The open claim window: kind, seats, their answers and the claimable depths."""
        text = self.text("claim", _NONE)
        if text == _NONE:
            return "", (), (), ()
        parts = _parse_parts("claim", text, _CLAIM_PARTS)
        kind = parts["kind"]
        if kind == _NONE:
            kind = ""
        elif not _WORD.match(kind):
            raise _bad("claim.kind", kind, "expected a word such as rummy or bussare")
        seats = _parse_seats("claim.seats", parts["seats"], self.players)
        answers = _parse_numbers("claim.answers", parts["answers"], _ANSWER)
        if len(answers) != len(seats):
            raise _bad(
                "claim.answers",
                parts["answers"],
                f"expected one answer per claim seat ({len(seats)}), got {len(answers)}",
            )
        depths = _parse_numbers("claim.depths", parts["depths"], _NUMBER)
        return kind, seats, answers, depths

    def state(self, phase: Phase) -> State:
        fields = self.fields
        players = self.players
        hands = tuple(
            tuple(sorted(hand)) for hand in _parse_hands("hands", fields["hands"], players)
        )
        for hand in hands:
            self.place("hands", hand)
        pile = _parse_cards("pile", fields["pile"])
        self.place("pile", pile)
        melds = self.melds()
        stock = self.stock()
        self.check_pack()
        claim_kind, claim_seats, claim_answers, claim_depths = self.claim()
        hand_number = _parse_count("hand", fields["hand"])
        return _reachable(
            State(
                rules=self.rules,
                phase=phase,
                hand_number=hand_number,
                dealer=self.seat("dealer", allow_none=True),
                turn=self.seat("turn", allow_none=True),
                scores=tuple(
                    Fraction(amount)
                    for amount in _parse_amounts("scores", fields["scores"], players)
                ),
                active=self.bits("active"),
                hands=hands,
                stock=stock,
                pile=pile,
                melds=melds,
                melded=self.bits("melded"),
                laid_before=self.bits("laid_before"),
                taken=self.taken(),
                required=self.required(),
                resume=self.seat("resume", allow_none=True),
                melds_this_turn=self.count("melds_this_turn"),
                laid_this_turn=_parse_yes_no("laid_this_turn", self.text("laid_this_turn", "no")),
                reuses=self.count("reuses"),
                idle_turns=self.count("idle_turns"),
                claim_kind=claim_kind,
                claim_seats=claim_seats,
                claim_answers=claim_answers,
                claim_depths=claim_depths,
                upcard_passes=self.upcard_passes(),
                knock_limit=self.knock_limit(hand_number),
                must_knock=_parse_yes_no("must_knock", self.text("must_knock", "no")),
                hands_won=self.hands_won(),
                forfeited=self.bits("forfeited"),
                winners=_parse_seats("winners", self.text("winners", _NONE), players),
                last_result=self.last_result(),
            )
        )


def _impossible(field: str, value: object, problem: str) -> NotationError:
    return NotationError(f"position field {field!r} {str(value)!r}: {problem}", IMPOSSIBLE_POSITION)


def _reachable(state: State) -> State:
    """``state`` itself, once it is checked to be one that live play can reach.

    The checks are those a position written by hand most easily gets wrong: turn bookkeeping
    that no sequence of moves produces (more melds this turn than ``melds_per_turn``, cards
    taken or laid while no one has drawn), table cards whose owners are not marked as having
    laid them, counters past the point where the hand would have ended, and hand sizes in the
    variants that keep them fixed.

    Raises:
        NotationError: (code ``notation/impossible_position``) naming the field and value.
    """
    rules = state.rules
    phase = state.phase
    in_hand = phase in (Phase.FIRST_UPCARD, Phase.DRAW, Phase.PLAY, Phase.CLAIM)
    if (phase is Phase.GAME_OVER) != bool(state.winners):
        raise _impossible(
            "winners",
            _format_seats(state.winners),
            "a game over has winners, and only a game over has them",
        )
    if rules.max_stock_reuses is not None and state.reuses > rules.max_stock_reuses:
        raise _impossible(
            "reuses", state.reuses, f"the stock may be rebuilt {rules.max_stock_reuses} time(s)"
        )
    if not in_hand:
        # Between hands the last turn's bookkeeping stays as the hand's end left it.
        return state
    if state.turn < 0 or not state.active[state.turn]:
        raise _impossible("turn", _format_seat(state.turn), "no active seat is to move")
    if phase is not Phase.PLAY:
        for name, value, empty in (
            ("taken", _format_cards(state.taken), not state.taken),
            (
                "required",
                _format_cards(() if state.required == NO_CARD else (state.required,)),
                state.required == NO_CARD,
            ),
            ("melds_this_turn", state.melds_this_turn, state.melds_this_turn == 0),
            ("laid_this_turn", _format_yes_no(state.laid_this_turn), not state.laid_this_turn),
            ("resume", _format_seat(state.resume), state.resume < 0),
            ("must_knock", _format_yes_no(state.must_knock), not state.must_knock),
        ):
            if not empty:
                raise _impossible(name, value, f"only a seat that has drawn has this ({phase})")
    limit = rules.melds_per_turn
    if limit is not None and not state.all_at_once and state.melds_this_turn > limit:
        raise _impossible(
            "melds_this_turn", state.melds_this_turn, f"the table allows {limit} meld(s) per turn"
        )
    if state.melds_this_turn and not state.laid_this_turn:
        raise _impossible(
            "laid_this_turn", "no", f"melds_this_turn={state.melds_this_turn} laid cards"
        )
    if state.melds_this_turn and not state.melded[state.turn]:
        raise _impossible(
            "melded", _format_bits(state.melded), f"seat {state.turn} melded this turn"
        )
    if state.must_knock and rules.knocking != "gin":
        raise _impossible("must_knock", "yes", "only Gin Rummy has a forced knock")
    owners = {owner for table_meld in state.melds for owner in table_meld.owners}
    laying = state.turn if state.laid_this_turn else -1
    for seat in range(state.players):
        if seat in owners and not state.laid_before[seat] and seat != laying:
            raise _impossible(
                "laid_before",
                _format_bits(state.laid_before),
                f"seat {seat} has cards on the table, laid in an earlier turn",
            )
        # (laid_before without a table card is possible: a joker laid off, then swapped out.)
        if seat not in owners and state.melded[seat]:
            raise _impossible(
                "melded", _format_bits(state.melded), f"seat {seat} has no card on the table"
            )
    if state.idle_turns > rules.idle_turn_cap:
        raise _impossible(
            "idle_turns",
            state.idle_turns,
            f"the hand ends when it reaches {rules.idle_turn_cap} (idle_turn_cap)",
        )
    if not rules.table_melds:
        for seat, hand in enumerate(state.hands):
            # The seat that has drawn holds one card more, until his knock's discard.
            drawn = seat == state.turn and phase is Phase.PLAY
            sizes = (rules.hand_size, rules.hand_size + 1) if drawn else (rules.hand_size,)
            if state.active[seat] and len(hand) not in sizes:
                raise _impossible(
                    "hands",
                    _format_hands(state.hands),
                    f"seat {seat} holds {len(hand)} cards; this phase needs"
                    f" {' or '.join(map(str, sizes))}",
                )
    return state
