"""Our ``gin`` preset at OpenSpiel's settings, played move for move against OpenSpiel's
``gin_rummy``.

Both engines get the same deal (ours, forced into OpenSpiel: our starter is OpenSpiel's player
0) and the same choices. At every decision our legal commands, mapped to OpenSpiel action ids,
must be OpenSpiel's legal actions, both hands must agree and so must their deadwood; at the end
both must pay the same. The known differences (RULES.md, ``gin``; the notes on OpenSpiel) are
recognised, counted and printed, never failed:

- OpenSpiel lets a player discard the card he just took from the pile (our rules forbid it), so
  it offers that discard, and a knock whose only discard is that card.
- OpenSpiel's knock is two actions (``KNOCK``, then a discard among ``legal_discards``); our
  ``Knock(card)`` is one. Our knock discards must be OpenSpiel's ``legal_discards``.
- OpenSpiel values an 11-card hand by melding the most over all 11 cards and dropping the
  highest leftover. Where that is worse than the best discard (its deadwood is larger, or it
  refuses a knock we allow), the case is proven: each of our discard deadwoods equals
  OpenSpiel's exact 10-card ``min_deadwood`` without that card, and ours is their minimum.
- OpenSpiel lays off at most two cards on each end of a run. Where our best lay-off needs more,
  the defender's best play within OpenSpiel's limit is searched for; it must score the same.
- OpenSpiel ends a hand at its 50th upcard draw (0/0); we play on, so that deal stops there.

The choices are random among the moves legal in both, biased so that knocks, gins, undercuts
and lay-offs are common: the draw is even, a knock legal in both is taken with a per-deal
chance (``KNOCK_CHANCES``; always for gin; ``WALL_KNOCK_CHANCE`` at the wall), and a discard
leaves the least deadwood ``GREEDY`` of the time, else it is any card. At a knock OpenSpiel's
knocker lays out exactly our ``Knocked.melds`` and its defender lays off our
``HandEnded.laid_off`` and melds our ``HandEnded.shown``; before each of those melds OpenSpiel
must offer the melds we could lay, and before each lay-off the lay-offs we allow.

The run's seed is printed (set ``GIN_OPENSPIEL_SEED`` to replay a run, ``GIN_OPENSPIEL_DEALS``
for more deals). A failure names the deal's seed and the moves so far;
``LockstepDeal(REFERENCE, seed, Counter()).play()`` replays that deal alone. Outside CI a
missing ``pyspiel`` skips the module; with ``CI=true`` it must be installed.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NoReturn

import pytest

from protocol.cards import card_face, face_rank
from protocol.game import Knock, Knocked
from server.engine import (
    Card,
    Command,
    Dealt,
    Discard,
    Drew,
    Event,
    HandEnded,
    Phase,
    State,
    chance,
    decide,
    describe_command,
    evolve,
    format_card,
    format_cards,
    legal_actions,
    new_game,
    parse_cards,
    solver,
    to_move,
)
from server.engine.melds import (
    Meld,
    MeldKind,
    MeldRules,
    check_meld,
    enumerate_melds,
    with_layoff,
)
from server.engine.solver import best_melds, deadwood, discard_deadwoods, layoff_targets
from tests.engine.openspiel_gin import (
    DRAW_STOCK,
    DRAW_UPCARD,
    KNOCK,
    MAX_RUN,
    MELD_BASE,
    OPENSPIEL_OPTIONS,
    PASS,
    OpenSpielGin,
    at_wall,
    command_action,
    from_os,
    split_run,
    to_os,
)

_IN_CI = os.environ.get("CI", "").lower() == "true"


def _load_reference() -> OpenSpielGin:
    """OpenSpiel's ``gin_rummy``; skip the module when ``pyspiel`` is missing, except in CI."""
    if not _IN_CI:
        pytest.importorskip(
            "pyspiel",
            reason="the OpenSpiel differential test needs open-spiel (pyspiel is not"
            " importable); install the dev dependency group",
        )
    return OpenSpielGin.load()


REFERENCE = _load_reference()

DEALS = int(os.environ.get("GIN_OPENSPIEL_DEALS", "4000"))
"""Deals played by the differential test (at least 2,000 in CI; about 30 s on two cores)."""
KNOCK_CHANCES = (0.5, 0.2, 0.0)
"""How often a knock legal in both engines is taken, one of these per deal; a gin is always
taken, so 0 plays for gin."""
WALL_KNOCK_CHANCE = 0.5
"""How often a knock at the wall (taking the upcard) legal in both engines is taken."""
GREEDY = 0.8
"""How often a discard is one that leaves the least deadwood rather than any card."""

COUNTS = (
    ("deals", "deals played"),
    ("positions", "positions compared"),
    ("deadwoods", "hand deadwoods compared"),
    ("knock", "knocks won by the knocker"),
    ("gin", "gins"),
    ("undercut", "undercuts"),
    ("tie", "ties (no undercut)"),
    ("wall", "walls (void hands)"),
    ("wall_knocks", "knocks at the wall"),
    ("layoff_hands", "hands with lay-offs"),
    ("layoffs", "cards laid off"),
    ("quirk_knock", "knocks OpenSpiel refused (11-card quirk, proven)"),
    ("quirk_deadwood", "11-card deadwoods larger in OpenSpiel (quirk, proven)"),
    ("taken_discard", "positions where OpenSpiel offered discarding the card just taken"),
    ("taken_knock", "knocks OpenSpiel offered only by discarding the card just taken"),
    ("layoff_limit", "hands where our lay-off needed more than 2 cards on a run end"),
    ("upcard_cap", "deals stopped by OpenSpiel's 50-upcard-draw cap"),
)
"""The counters printed after the run, in order: (key, description)."""


class Differs(AssertionError):
    """The engines disagree (the message names the deal's seed and the moves so far)."""


# --- One deal played in both engines --------------------------------------------------------------


class LockstepDeal:
    """One hand of our ``gin`` preset and of OpenSpiel's ``gin_rummy`` driven together.

    ``script`` lists OpenSpiel actions to play first, one per decision (each must be a choice
    legal in both); random choices follow.
    """

    def __init__(
        self,
        reference: OpenSpielGin,
        seed: int,
        tally: Counter[str],
        dealt: Dealt | None = None,
        script: Sequence[int] = (),
    ) -> None:
        self.reference = reference
        self.seed = seed
        self.tally = tally
        self.rng = random.Random(seed)
        self.script = list(script)
        self.moves: list[str] = []
        self.notes: list[str] = []
        state = new_game("gin", OPENSPIEL_OPTIONS, 2)
        self.dealt = dealt if dealt is not None else self._chance_deal(state)
        self.ours = evolve(state, self.dealt)
        starter = to_move(self.ours)
        self.player = (0, 1) if starter == 0 else (1, 0)
        """OpenSpiel's player for each of our seats."""
        self.theirs: Any = reference.deal(self.dealt)
        rules = self.ours.rules
        self.meld_rules = rules.meld_rules
        self.values = rules.values
        self.knock_chance = self.rng.choice(KNOCK_CHANCES)
        self._ten: dict[tuple[Card, ...], int] = {}
        self._eleven: dict[tuple[Card, ...], dict[Card, int]] = {}

    def _chance_deal(self, state: State) -> Dealt:
        event = chance(state, self.rng)
        assert isinstance(event, Dealt)
        return event

    # Reporting ------------------------------------------------------------------------------------

    def fail(self, message: str) -> NoReturn:
        """Stop the deal: the engines differ."""
        raise Differs(
            f"deal seed {self.seed} (dealer seat {self.dealt.dealer}, order"
            f" {format_cards(self.dealt.order)}): {message}\n  moves: {'; '.join(self.moves)}"
        )

    def _record(self, seat: int, text: str) -> None:
        self.moves.append(f"S{seat} {text}")

    # Playing --------------------------------------------------------------------------------------

    def play(self) -> None:
        """Play the hand to its end in both engines, comparing every step."""
        while not self.step():
            pass
        self.tally["deals"] += 1

    def step(self) -> bool:
        """Compare and play one decision; whether the hand is over."""
        seat = to_move(self.ours)
        if seat < 0 or self.theirs.is_terminal():
            self.fail(f"one engine ended the hand, the other did not (our seat to move {seat})")
        if self.theirs.current_player() != self.player[seat]:
            self.fail(
                f"OpenSpiel waits for player {self.theirs.current_player()},"
                f" we for seat {seat} (OpenSpiel player {self.player[seat]})"
            )
        self._check_hands()
        self._compare_deadwoods()
        self.tally["positions"] += 1
        legal = legal_actions(self.ours, seat)
        if self.ours.phase is Phase.PLAY:
            return self._play_turn(seat, legal)
        return self._draw(seat, legal)

    def _pick(self, choices: Sequence[int]) -> int:
        if self.script:
            action = self.script.pop(0)
            if action not in choices:
                self.fail(f"scripted action {action} is not among {sorted(choices)}")
            return action
        return self.rng.choice(sorted(choices))

    def _decide(self, seat: int, command: Command) -> tuple[Event, ...]:
        self._record(seat, describe_command(command))
        events = decide(self.ours, seat, command)
        for event in events:
            self.ours = evolve(self.ours, event)
        return events

    def _apply(self, action: int, context: str) -> None:
        """Play ``action`` in OpenSpiel; it must be legal there."""
        legal = self.theirs.legal_actions()
        if action not in legal:
            self.fail(f"{context}: OpenSpiel action {self._name(action)} is not legal in {legal}")
        self.theirs.apply_action(action)

    def _name(self, action: int) -> str:
        return f"{action} ({self.theirs.action_to_string(self.theirs.current_player(), action)})"

    # Draw phase: first upcard, draw, wall ---------------------------------------------------------

    def _draw(self, seat: int, legal: Sequence[Command]) -> bool:
        ours = {command_action(self.ours, command): command for command in legal}
        theirs = set(self.theirs.legal_actions())
        wall = at_wall(self.ours)
        common = set(ours) & theirs
        if wall:
            self._compare_wall(seat, ours, theirs)
        elif set(ours) != theirs:
            self.fail(f"draw choices: ours {sorted(ours)}, OpenSpiel {sorted(theirs)}")
        if wall and not self.script:
            take = KNOCK in common and self.rng.random() < WALL_KNOCK_CHANCE
            action = KNOCK if take else PASS
        else:
            action = self._pick(sorted(common))
        events = self._decide(seat, ours[action])
        self.theirs.apply_action(action)
        if action == DRAW_STOCK:
            drew = events[0]
            assert isinstance(drew, Drew)
            self.moves[-1] += f" ({format_card(drew.card)})"
            if not self.theirs.is_chance_node():
                self.fail("OpenSpiel did not wait for the card drawn from the stock")
            self._apply_chance(drew.card)
        elif action == DRAW_UPCARD and self.theirs.is_terminal():
            self.tally["upcard_cap"] += 1
            self._compare_returns(None)
            return True
        elif action == PASS and wall:
            ended = next(event for event in events if isinstance(event, HandEnded))
            if ended.reason != "wall":
                self.fail(f"passing at the wall ended our hand with {ended.reason!r}")
            self.tally["wall"] += 1
            self._compare_returns(ended)
            return True
        elif action == KNOCK:
            self.tally["wall_knocks"] += 1
        return False

    def _apply_chance(self, card: Card) -> None:
        outcomes = {action for action, _ in self.theirs.chance_outcomes()}
        if to_os(card) not in outcomes:
            self.fail(f"{format_card(card)} is not in OpenSpiel's stock")
        self.theirs.apply_action(to_os(card))

    def _compare_wall(self, seat: int, ours: dict[int, Command], theirs: set[int]) -> None:
        """At the wall: we may take the upcard (to knock) iff OpenSpiel may ``KNOCK``, up to
        the known cases; the knock discards we would then allow are OpenSpiel's exact ones."""
        if set(ours) - {KNOCK} != theirs - {KNOCK}:
            self.fail(f"wall choices: ours {sorted(ours)}, OpenSpiel {sorted(theirs)}")
        upcard = self.ours.pile[-1]
        hand = (*self.ours.hands[seat], upcard)
        values = self._eleven_values(tuple(sorted(hand)))
        exact = self._knock_discards(values)
        knocks: set[Card] = set()
        if KNOCK in ours:
            after = self.ours
            for event in decide(self.ours, seat, ours[KNOCK]):
                after = evolve(after, event)
            knocks = {
                command.card for command in legal_actions(after, seat) if isinstance(command, Knock)
            }
        if knocks != exact - {upcard}:
            self.fail(
                f"knock discards at the wall with {format_card(upcard)}: ours"
                f" {format_cards(sorted(knocks))}, exact {format_cards(sorted(exact))}"
            )
        self._explain_knock(KNOCK in ours, KNOCK in theirs, hand, values, exact, upcard)

    # Play phase: discard or knock -----------------------------------------------------------------

    def _play_turn(self, seat: int, legal: Sequence[Command]) -> bool:
        hand = self.ours.hands[seat]
        values = self._eleven_values(hand)
        exact = self._knock_discards(values)
        taken = self.ours.taken[0] if self.ours.taken else None
        knocks = {command.card for command in legal if isinstance(command, Knock)}
        discards = {command.card for command in legal if isinstance(command, Discard)}
        if knocks != exact - {taken}:
            self.fail(
                f"knock discards from {format_cards(hand)}: ours {format_cards(sorted(knocks))},"
                f" exact {format_cards(sorted(exact))}"
            )
        theirs = set(self.theirs.legal_actions())
        if self.ours.must_knock:
            # Taken at the wall: OpenSpiel is already in its knock phase, asking for a discard.
            self._compare_knock_discards(exact, discards, taken)
            return self._knock(seat, self._pick_card(knocks, values, greedy=True))
        ours = {to_os(card) for card in discards} | ({KNOCK} if knocks else set())
        for action in sorted(ours ^ theirs):
            if taken is not None and action == to_os(taken) and action in theirs:
                self.tally["taken_discard"] += 1
            elif action != KNOCK:
                self.fail(f"play choices: ours {sorted(ours)}, OpenSpiel {sorted(theirs)}")
        self._explain_knock(bool(knocks), KNOCK in theirs, hand, values, exact, taken)
        if knocks and KNOCK in theirs:
            choice = self._pick_knock_or_discard(min(values[card] for card in knocks) == 0)
            if choice == KNOCK:
                self._apply(KNOCK, "knock")
                self._compare_knock_discards(exact, set(), taken)
                return self._knock(seat, self._pick_card(knocks, values, greedy=True))
            if choice != -1:
                if from_os(choice) not in discards:
                    self.fail(f"scripted discard {choice} is not legal in both")
                return self._discard(seat, from_os(choice))
        return self._discard(seat, self._pick_card(discards, values, greedy=True))

    def _pick_knock_or_discard(self, gin: bool) -> int:
        """``KNOCK``, a scripted discard, or -1 for a random discard."""
        if self.script:
            return self.script.pop(0)
        return KNOCK if gin or self.rng.random() < self.knock_chance else -1

    def _pick_card(self, cards: set[Card], values: dict[Card, int], *, greedy: bool) -> Card:
        options = sorted(cards)
        if self.script:
            action = self._pick([to_os(card) for card in options])
            return from_os(action)
        if greedy and self.rng.random() < GREEDY:
            least = min(values[card] for card in options)
            options = [card for card in options if values[card] == least]
        return self.rng.choice(options)

    def _discard(self, seat: int, card: Card) -> bool:
        self._decide(seat, Discard(card=card))
        self._apply(to_os(card), "discard")
        return False

    def _compare_knock_discards(
        self, exact: set[Card], discards: set[Card], taken: Card | None
    ) -> None:
        """OpenSpiel's discards after its ``KNOCK`` are the exact ones; ours lack only the
        card just taken."""
        if discards:
            self.fail(f"we offer plain discards {format_cards(sorted(discards))} after the wall")
        theirs = {from_os(action) for action in self.theirs.legal_actions()}
        if theirs != exact:
            self.fail(
                f"OpenSpiel's knock discards {format_cards(sorted(theirs))} are not its exact"
                f" ones {format_cards(sorted(exact))}"
            )
        if taken is not None and taken in exact:
            self.tally["taken_discard"] += 1

    def _explain_knock(
        self,
        ours: bool,
        theirs: bool,
        hand: Sequence[Card],
        values: dict[Card, int],
        exact: set[Card],
        taken: Card | None,
    ) -> None:
        """A knock one engine allows and the other refuses must be a known case."""
        if ours == theirs:
            return
        limit = self.ours.knock_limit
        if ours:
            least = min(values.values())
            quirky = self.reference.min_deadwood(hand)
            if not least <= limit < quirky:
                self.fail(
                    f"OpenSpiel refuses a knock from {format_cards(sorted(hand))}: our least"
                    f" deadwood {least}, OpenSpiel's 11-card value {quirky}, limit {limit}"
                )
            self.tally["quirk_knock"] += 1
            self.notes.append(
                f"deal {self.seed}: OpenSpiel refused the knock from"
                f" {format_cards(sorted(hand))} (ours {least}, OpenSpiel {quirky})"
            )
        else:
            if taken is None or exact != {taken}:
                self.fail(
                    f"OpenSpiel allows a knock from {format_cards(sorted(hand))} that we refuse"
                    f" (exact knock discards {format_cards(sorted(exact))})"
                )
            self.tally["taken_knock"] += 1

    # The knock, lay-offs and the result -----------------------------------------------------------

    def _knock(self, seat: int, card: Card) -> bool:
        events = self._decide(seat, Knock(card=card))
        knocked = events[0]
        ended = next(event for event in events if isinstance(event, HandEnded))
        assert isinstance(knocked, Knocked)
        self._apply(to_os(card), "the knocker's discard")
        melds = [spec.cards for spec in knocked.melds]
        self._lay_out(ended.hands[seat], melds, self.ours.knock_limit, "knocker")
        knocker_deadwood = self.theirs.deadwood()[self.player[seat]]
        if knocker_deadwood != knocked.deadwood:
            self.fail(f"knocker's deadwood: ours {knocked.deadwood}, OpenSpiel {knocker_deadwood}")
        defender = 1 - seat
        table = [check_meld(spec.cards, self.meld_rules, spec.faces) for spec in knocked.melds]
        exact_layoffs = self._defend(defender, ended, table, gin=knocked.deadwood == 0)
        if not exact_layoffs:
            self.notes[-1] += "; the scores still agree" if self._returns_agree(ended) else ""
        self._compare_returns(ended)
        self.tally[ended.reason] += 1
        return True

    def _defend(self, seat: int, ended: HandEnded, table: list[Meld], *, gin: bool) -> bool:
        """Lay off and meld for the defender as we did; whether OpenSpiel allowed our lay-off."""
        hand = list(ended.hands[seat])
        if gin:
            if ended.laid_off:
                self.fail(f"we laid off {format_cards(ended.laid_off)} against gin")
            if any(action < 52 for action in self.theirs.legal_actions()):
                self.fail("OpenSpiel offers lay-offs against gin")
            self._lay_out(hand, [spec.cards for spec in ended.shown[seat]], None, "defender")
            return True
        start = self.theirs.clone()
        pending = list(ended.laid_off)
        original = list(table)
        while True:
            offered = {from_os(action) for action in self.theirs.legal_actions() if action < 52}
            self._compare_layoffs(hand, table, original, offered)
            playable = [card for card in pending if card in offered]
            if not playable:
                break
            card = playable[0]
            self._apply(to_os(card), f"laying off {format_card(card)}")
            hand.remove(card)
            pending.remove(card)
            table = self._lay_off(table, card)
        if not pending:
            if ended.laid_off:
                self.tally["layoff_hands"] += 1
                self.tally["layoffs"] += len(ended.laid_off)
            self._apply(PASS, "the defender's pass after his lay-offs")
            self._lay_out(hand, [spec.cards for spec in ended.shown[seat]], None, "defender")
            return True
        # OpenSpiel lays off at most two cards on each end of a run: find its best defence.
        self.tally["layoff_limit"] += 1
        self.theirs = start
        best = self._best_defence(list(ended.hands[seat]))
        self.notes.append(
            f"deal {self.seed}: our lay-off {format_cards(ended.laid_off)} needs more than two"
            f" cards on a run end; OpenSpiel's best defence lays off"
            f" {format_cards(best) or 'nothing'}"
        )
        hand = list(ended.hands[seat])
        for card in best:
            self._apply(to_os(card), f"laying off {format_card(card)}")
            hand.remove(card)
        self.tally["layoffs"] += len(best)
        self.tally["layoff_hands"] += bool(best)
        self._apply(PASS, "the defender's pass after his lay-offs")
        melds, _ = best_melds(hand, self.meld_rules, self.values)
        self._lay_out(hand, [meld.cards for meld in melds], None, "defender")
        return False

    def _best_defence(self, hand: list[Card]) -> tuple[Card, ...]:
        """The lay-offs OpenSpiel allows that leave the defender the least deadwood."""
        best: tuple[int, tuple[Card, ...]] | None = None
        seen: set[frozenset[Card]] = set()

        def search(state: Any, left: list[Card], laid: tuple[Card, ...]) -> None:
            nonlocal best
            key = frozenset(laid)
            if key in seen:
                return
            seen.add(key)
            value = deadwood(left, self.meld_rules, self.values)
            if best is None or value < best[0]:
                best = (value, laid)
            for action in state.legal_actions():
                if action < 52 and from_os(action) in left:
                    child = state.clone()
                    child.apply_action(action)
                    card = from_os(action)
                    search(child, [other for other in left if other != card], (*laid, card))

        search(self.theirs, hand, ())
        assert best is not None
        return best[1]

    def _lay_off(self, table: list[Meld], card: Card) -> list[Meld]:
        """Our table after laying ``card`` off (on a run when it fits one, as OpenSpiel does)."""
        targets = [
            (index, face)
            for held, index, face in layoff_targets((card,), table, self.meld_rules)
            if held == card
        ]
        targets.sort(key=lambda target: table[target[0]].kind is not MeldKind.RUN)
        index, face = targets[0]
        grown = with_layoff(table[index], card, face, self.meld_rules)
        return [*table[:index], grown, *table[index + 1 :]]

    def _compare_layoffs(
        self,
        hand: Sequence[Card],
        table: Sequence[Meld],
        original: Sequence[Meld],
        offered: set[Card],
    ) -> None:
        """OpenSpiel offers the lay-offs we allow, except a third card on a run end."""
        ours = {card for card, _, _ in layoff_targets(hand, table, self.meld_rules)}
        if offered - ours:
            self.fail(
                f"OpenSpiel offers lay-offs {format_cards(sorted(offered - ours))} we refuse"
                f" (hand {format_cards(hand)})"
            )
        for card in ours - offered:
            if not self._third_on_run_end(card, table, original):
                self.fail(
                    f"OpenSpiel refuses laying off {format_card(card)}, which we allow"
                    f" (hand {format_cards(hand)})"
                )

    def _third_on_run_end(
        self, card: Card, table: Sequence[Meld], original: Sequence[Meld]
    ) -> bool:
        """Whether every place ``card`` fits is a run end already extended by two cards."""
        rank = face_rank(card_face(card))
        for _, index, _ in layoff_targets((card,), table, self.meld_rules):
            meld, before = table[index], original[index]
            if meld.kind is not MeldKind.RUN:
                return False
            ranks = [face_rank(face) for face in meld.faces]
            first = [face_rank(face) for face in before.faces]
            added = min(first) - min(ranks) if rank < min(ranks) else max(ranks) - max(first)
            if added < 2:
                return False
        return True

    def _lay_out(
        self, hand: Sequence[Card], melds: Sequence[Sequence[Card]], limit: int | None, who: str
    ) -> None:
        """Lay ``melds`` from ``hand`` in OpenSpiel, then pass; before each meld, OpenSpiel
        must offer exactly the melds (of three to five cards) we could show: for the knocker
        those that leave a layout within ``limit``, for the defender (``None``) any."""
        left = list(hand)
        for action in [action for cards in melds for action in self.reference.meld_actions(cards)]:
            self._compare_meld_offers(left, limit, who)
            self._apply(action, f"laying the {who}'s meld {self._name(action)}")
            for card_id in self.reference.utils.int_to_meld[action - MELD_BASE]:
                left.remove(from_os(card_id))
        self._compare_meld_offers(left, limit, who)
        self._apply(PASS, f"the {who}'s pass after his melds")

    def _compare_meld_offers(self, hand: Sequence[Card], limit: int | None, who: str) -> None:
        theirs = {
            frozenset(
                from_os(card) for card in self.reference.utils.int_to_meld[action - MELD_BASE]
            )
            for action in self.theirs.legal_actions()
            if action >= MELD_BASE
        }
        ours = {
            frozenset(meld.cards)
            for meld in enumerate_melds(hand, self.meld_rules)
            if len(meld.cards) <= MAX_RUN
            and (
                limit is None
                or deadwood(_without(hand, meld.cards), self.meld_rules, self.values) <= limit
            )
        }
        if ours != theirs:
            self.fail(
                f"the {who}'s melds from {format_cards(sorted(hand))}: ours only"
                f" {[format_cards(sorted(meld)) for meld in ours - theirs]}, OpenSpiel only"
                f" {[format_cards(sorted(meld)) for meld in theirs - ours]}"
            )

    def _expected_returns(self, ended: HandEnded | None) -> tuple[float, float]:
        """Our points as OpenSpiel's zero-sum returns (player 0 = our starter); a hand we have
        not ended (OpenSpiel's upcard cap) is 0/0."""
        if ended is None:
            return (0.0, 0.0)
        points = [Fraction(point) for point in ended.points]
        starter = self.player.index(0)
        margin = points[starter] - points[1 - starter]
        return (float(margin), float(-margin))

    def _returns_agree(self, ended: HandEnded) -> bool:
        return self._expected_returns(ended) == tuple(self.theirs.returns())

    def _compare_returns(self, ended: HandEnded | None) -> None:
        """OpenSpiel's returns (and final deadwoods, after a knock) are ours."""
        if not self.theirs.is_terminal():
            self.fail("OpenSpiel's hand goes on")
        if ended is not None:
            scorers = [point for point in ended.points if Fraction(point) != 0]
            if len(scorers) > 1 or (ended.reason == "wall" and scorers):
                self.fail(f"our hand ended {ended.reason!r} with points {ended.points}")
        expected = self._expected_returns(ended)
        actual = tuple(self.theirs.returns())
        if expected != actual:
            points = ended.points if ended is not None else "none"
            self.fail(f"returns: ours {expected} (points {points}), OpenSpiel {actual}")
        if ended is not None and ended.reason != "wall":
            counts = tuple(self.theirs.deadwood()[self.player[seat]] for seat in range(2))
            if tuple(ended.counts) != counts:
                self.fail(f"final deadwood: ours {ended.counts}, OpenSpiel {counts}")

    # Hands and deadwood ---------------------------------------------------------------------------

    def _check_hands(self) -> None:
        for seat in range(2):
            theirs = tuple(sorted(from_os(card) for card in self.theirs.hands()[self.player[seat]]))
            if theirs != self.ours.hands[seat]:
                self.fail(
                    f"seat {seat}'s hand: ours {format_cards(self.ours.hands[seat])},"
                    f" OpenSpiel {format_cards(theirs)}"
                )
        upcard = self.theirs.upcard()
        theirs_upcard = None if upcard is None else from_os(upcard)
        # OpenSpiel has no upcard while a player holds 11 cards; we keep the dead pile.
        ours_upcard = None if self.ours.phase is Phase.PLAY else self.ours.pile[-1]
        if theirs_upcard != ours_upcard:
            self.fail(f"upcard: ours {ours_upcard}, OpenSpiel {theirs_upcard}")

    def _compare_deadwoods(self) -> None:
        deadwoods = self.theirs.deadwood()
        for seat in range(2):
            hand = self.ours.hands[seat]
            theirs = deadwoods[self.player[seat]]
            self.tally["deadwoods"] += 1
            if len(hand) == 10:
                ours = self._ten_value(hand)
                if ours != theirs:
                    self.fail(f"deadwood of {format_cards(hand)}: ours {ours}, OpenSpiel {theirs}")
                continue
            least = min(self._eleven_values(hand).values())
            if theirs == least:
                continue
            if theirs < least:
                self.fail(f"deadwood of {format_cards(hand)}: ours {least}, OpenSpiel {theirs}")
            # Proven: every discard's value matched OpenSpiel's exact 10-card one.
            self.tally["quirk_deadwood"] += 1

    def _ten_value(self, hand: tuple[Card, ...]) -> int:
        value = self._ten.get(hand)
        if value is None:
            value = self._ten[hand] = deadwood(hand, self.meld_rules, self.values)
        return value

    def _eleven_values(self, hand: tuple[Card, ...]) -> dict[Card, int]:
        """Our deadwood after each discard, checked against OpenSpiel's exact 10-card value."""
        values = self._eleven.get(hand)
        if values is None:
            values = discard_deadwoods(hand, self.meld_rules, self.values)
            theirs = self.reference.discard_values(hand)
            if values != theirs:
                wrong = [
                    f"{format_card(card)}: ours {values[card]}, OpenSpiel {theirs[card]}"
                    for card in hand
                    if values[card] != theirs[card]
                ]
                self.fail(f"discard deadwoods of {format_cards(hand)}: {', '.join(wrong)}")
            self._eleven[hand] = values
        return values

    def _knock_discards(self, values: dict[Card, int]) -> set[Card]:
        """Discards leaving at most the knock limit (exact; the taken card included)."""
        limit = self.ours.knock_limit
        return {card for card, value in values.items() if value <= limit}


def _without(hand: Sequence[Card], cards: Sequence[Card]) -> list[Card]:
    return [card for card in hand if card not in cards]


# --- Tests ----------------------------------------------------------------------------------------


def _stacked(starter: str, dealer: str, upcard: str, stock: str = "") -> Dealt:
    """A deal by seat 1: ``starter``'s and ``dealer``'s ten cards, the upcard, then the stock."""
    first, second, top = parse_cards(starter), parse_cards(dealer), parse_cards(upcard)
    front = [card for pair in zip(first, second) for card in pair] + list(top)
    rest = [card for card in parse_cards(stock) if card not in front]
    rest += [card for card in range(52) if card not in front and card not in rest]
    return Dealt(hand=1, dealer=1, order=tuple(front + rest))


def test_forced_deal_gives_openspiel_our_hands_and_upcard() -> None:
    """Forcing our deal into OpenSpiel gives its player 0 our starter's ten cards, player 1 the
    dealer's, and our upcard; its first stock card is ours."""
    dealt = _stacked(
        "AC 2C 3C 4D 5D 6D 7H 8H 9H TS", "AS 2S 3S 4H 5H 6H 7C 8C 9C TD", "KD", "QH JS"
    )
    state = REFERENCE.deal(dealt)
    for action in (PASS, PASS, DRAW_STOCK):
        state.apply_action(action)
    state.apply_action(to_os(dealt.order[21]))
    expected = (
        "AC 2C 3C 4D 5D 6D 7H 8H 9H QH TS",
        "7C 8C 9C TD 4H 5H 6H AS 2S 3S",
        "KD",
    )
    actual = (
        format_cards(sorted(from_os(card) for card in state.hands()[0])),
        format_cards(sorted(from_os(card) for card in state.hands()[1])),
        format_cards(from_os(card) for card in state.discard_pile()),
    )
    assert expected == actual


def test_runs_longer_than_five_split_into_openspiel_melds() -> None:
    """A run of six to ten cards is laid in OpenSpiel as the fewest runs of three to five."""
    expected = [
        ["AC 2C 3C", "4C 5C 6C"],
        ["AC 2C 3C 4C", "5C 6C 7C"],
        ["AC 2C 3C 4C 5C", "6C 7C 8C 9C"],
        ["AC 2C 3C 4C 5C", "6C 7C 8C 9C TC"],
        ["7S 7H 7D"],
    ]
    actual = [
        [format_cards(piece) for piece in split_run(parse_cards(text))]
        for text in (
            "6C 5C 4C 3C 2C AC",
            "AC 2C 3C 4C 5C 6C 7C",
            "AC 2C 3C 4C 5C 6C 7C 8C 9C",
            "AC 2C 3C 4C 5C 6C 7C 8C 9C TC",
            "7S 7H 7D",
        )
    ]
    assert expected == actual


def test_long_run_is_laid_as_openspiel_meld_actions() -> None:
    """Our ten-card club run becomes OpenSpiel's meld actions Ac-5c and 6c-Tc."""
    actions = REFERENCE.meld_actions(parse_cards("AC 2C 3C 4C 5C 6C 7C 8C 9C TC"))
    utils = REFERENCE.utils
    expected = [["Ac", "2c", "3c", "4c", "5c"], ["6c", "7c", "8c", "9c", "Tc"]]
    actual = [
        list(utils.card_ints_to_card_strings(utils.int_to_meld[a - MELD_BASE])) for a in actions
    ]
    assert expected == actual


def test_knock_openspiel_refuses_by_its_eleven_card_value_is_recognised() -> None:
    """RULES.md's hand after taking 5C: we allow a knock discarding 6S, OpenSpiel's 11-card
    value (12) refuses it; the driver proves and counts the case and plays on."""
    dealt = _stacked("6S 3C 4H 2H 5H 4C 6C 3S 6H 5S", "KD QD JD 9D KS QS JS 9S KH QH", "5C")
    tally: Counter[str] = Counter()
    deal = LockstepDeal(
        REFERENCE, 0, tally, dealt, script=[DRAW_UPCARD, to_os(parse_cards("6S")[0])]
    )
    deal.step()
    deal.step()
    expected = (1, 1)
    actual = (tally["quirk_knock"], tally["quirk_deadwood"])
    assert expected == actual


KNOCKER = "5C 6C 7C 2D 3D 4D 8H 9H TH AS"
"""The starter's knocking hand: three runs and AS."""
KNOCK_SCRIPT = (PASS, PASS, DRAW_STOCK, KNOCK, to_os(parse_cards("QS")[0]))
"""Both pass the upcard (KS), the starter draws QS and knocks discarding it (deadwood 1)."""


def test_third_lay_off_on_a_run_end_that_openspiel_refuses_is_recognised() -> None:
    """The defender lays off 8C and 9C on 5C-6C-7C and keeps TC for his set of tens; we would
    also allow TC on the run, OpenSpiel (two per end) does not: recognised, scores agree."""
    defender = "8C 9C TC TD TS KD QH JS 4S 5H"
    dealt = _stacked(KNOCKER, defender, "KS", "QS")
    tally: Counter[str] = Counter()
    LockstepDeal(REFERENCE, 0, tally, dealt, script=KNOCK_SCRIPT).play()
    expected = (1, 1, 2)
    actual = (tally["knock"], tally["layoff_hands"], tally["layoffs"])
    assert expected == actual


def test_lay_off_beyond_openspiel_limit_is_counted_when_scores_agree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were our lay-off 8C 9C TC JC on 5C-6C-7C, OpenSpiel could not follow; the driver finds
    its best defence (meld the four clubs), counts the case and the scores still agree."""
    real = solver.best_layoff_deadwood

    def laying_off_the_clubs(
        hand: Sequence[Card], melds: Sequence[Meld], rules: MeldRules, values: Sequence[int]
    ) -> tuple[int, tuple[Card, ...]]:
        left, _ = real(hand, melds, rules, values)
        return left, parse_cards("8C 9C TC JC")

    monkeypatch.setattr(solver, "best_layoff_deadwood", laying_off_the_clubs)
    defender = "8C 9C TC JC KD QH JS 9S 7S 5H"
    dealt = _stacked(KNOCKER, defender, "KS", "QS")
    tally: Counter[str] = Counter()
    deal = LockstepDeal(REFERENCE, 0, tally, dealt, script=KNOCK_SCRIPT)
    deal.play()
    expected = (1, 1, 0)
    actual = (tally["knock"], tally["layoff_limit"], tally["layoffs"])
    assert expected == actual
    assert deal.notes[-1].endswith("the scores still agree")


def test_gin_preset_plays_like_openspiel_gin_rummy(capsys: pytest.CaptureFixture[str]) -> None:
    """Thousands of random deals: our legal moves, hands, deadwood and points match OpenSpiel's
    at every step, up to the known, proven and counted differences."""
    env_seed = os.environ.get("GIN_OPENSPIEL_SEED")
    seed = int(env_seed) if env_seed else random.SystemRandom().randrange(2**32)
    master = random.Random(seed)
    tally: Counter[str] = Counter()
    failures: list[str] = []
    notes: list[str] = []
    started = time.perf_counter()
    for _ in range(DEALS):
        deal = LockstepDeal(REFERENCE, master.getrandbits(48), tally)
        try:
            deal.play()
        except Differs as error:
            failures.append(str(error))
        notes.extend(deal.notes)
    elapsed = time.perf_counter() - started
    with capsys.disabled():
        print(f"\n[gin vs OpenSpiel] seed {seed}: {DEALS} deals in {elapsed:.1f} s")
        for key, description in COUNTS:
            print(f"  {description}: {tally[key]}")
        for note in notes[:10]:
            print(f"  note: {note}")
        for failure in failures[:5]:
            print(f"  FAILED {failure}")
    expected: list[str] = []
    assert expected == failures, f"{len(failures)} of {DEALS} deals differ (seed {seed})"
    assert tally["knock"] + tally["gin"] + tally["undercut"] > 0, "no hand ended in a knock"
