"""``heuristic``: card tracking, draw potential, opponent modelling and knock timing.

Gin Rummy
    Every decision compares 10-card hands by
    ``deadwood - potential - knock chance - gin chance + danger``: the deadwood now; the
    expected fall of the deadwood after the next draw (over the cards still unseen, so dead
    pairs count for nothing and low cards for something); the shares of next draws that would
    allow a knock, and gin; and the chance that the card thrown lets the opponent meld (from
    the cards he picked up, discarded and passed). The upcard is taken when the best hand with
    it beats the expected hand after a stock draw. Knocks: gin always; otherwise unless the
    undercut risk for that deadwood and stock left is high (the risk grows as the stock runs
    down, and faster when the opponent's last discard was a low card: he then keeps only low
    cards loose), or playing on keeps a live gin draw (a gin is worth the bonus and cannot be
    undercut); near the end of the game (the opponent close to the target) whenever it may.
    At the wall it knocks only when the risk is low (passing voids the hand).

Knock Rummy
    The same hand judgement, and a knock threshold that falls with the number of opponents and
    rises as the stock runs down.

Table-meld variants (basic, block, wrotham, ramino_classic, rummy500, ramino)
    Swap for jokers; lay down what the best partition of the hand melds (openings: the one that
    leaves least in hand); lay off every natural card that is deadwood (jokers only near the
    end); draw the upcard, or deeper in Rummy 500, when it joins the hand's best melds or fits
    the table; claim "Rummy!" calls; discard the card whose loss costs least: what stays
    unmatched, less the meld chances left (live cards), plus how much it would help the next
    player (it fits a table meld, or what he is seen to collect). Jokers are kept.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from bots.policies.base import ALL_VARIANTS
from bots.policies.evaluation import GinEvaluator, Knowledge, face_counts, is_plain_deck
from bots.policies.tracking import CardTracker, HandMemory
from protocol.cards import Card, card_face, is_joker
from protocol.game import MeldView
from server.engine import (
    Claim,
    Command,
    Discard,
    DrawStock,
    Event,
    Knock,
    LayOff,
    MeldCommand,
    Pass,
    Rules,
    SwapJoker,
    TakeDiscard,
    View,
)
from server.engine.melds import AceMode, MeldKind, layoff_faces
from server.engine.melds import Meld as MeldShape
from server.engine.solver import deadwood, discard_deadwoods

__all__ = ["GinParameters", "HeuristicPolicy", "TableWeights", "opponent_alarm", "undercut_risk"]


@dataclass(frozen=True, slots=True)
class GinParameters:
    """The weights of the Gin Rummy judgement (tuned by duels against ``simple``)."""

    potential: float = 1.0
    """Weight of the one-draw potential (expected fall of the deadwood) in a hand's score."""
    knock_chance: float = 10.0
    """Points a hand is worth per unit of probability that the next draw allows a knock."""
    danger: float = 4.0
    """Points a discard costs per unit of probability that the opponent melds it."""
    gin_chance: float = 10.0
    """Points a hand is worth per unit of probability that the next draw allows gin (EAAI:
    a gin scores 25 more than a knock and cannot be undercut). Duels against ``simple``:
    10 beat 0 by +0.30 points per hand and 25 by +0.17."""
    take_margin: float = 0.0
    """How much better the upcard must make the hand (taking it also tells the opponent)."""
    undercut_limit: float = 0.1
    """Most undercut risk accepted for a knock during play."""
    wall_undercut_limit: float = 0.2
    """Most undercut risk accepted for a knock at the wall (passing voids the hand)."""
    knock_alarm: float = 3.0
    """How much an alarm (see ``opponent_alarm``) multiplies the undercut risk of a knock:
    by ``1 + knock_alarm x alarm``."""
    gin_wait: float = 3.0
    """Undercut risk added per unit of chance that playing on makes gin at the next draw: a
    hand a draw from gin (worth the gin bonus, and no undercut) is worth keeping open. At 3
    and the limit 0.1 one live gin card in 30 unseen already vetoes a knock; 1 was 0.9-1.1
    points per hand worse, 6 and 20 the same as 3. Applying it only with 8 or more stock
    cards left was worse (-0.08)."""


_UNDERCUT_STOCK = (8, 12, 16, 20)
"""Stock sizes bounding the rows of ``_UNDERCUT``."""
_UNDERCUT = (
    (0.04, 0.04, 0.04, 0.04, 0.05, 0.07, 0.10, 0.14, 0.16, 0.18, 0.32),
    (0.01, 0.01, 0.03, 0.04, 0.04, 0.05, 0.08, 0.11, 0.16, 0.20, 0.29),
    (0.00, 0.00, 0.00, 0.00, 0.01, 0.01, 0.04, 0.08, 0.12, 0.17, 0.25),
    (0.00, 0.00, 0.00, 0.00, 0.00, 0.01, 0.02, 0.04, 0.08, 0.11, 0.15),
    (0.00, 0.00, 0.00, 0.00, 0.00, 0.01, 0.01, 0.02, 0.04, 0.05, 0.07),
)
"""How often the defender's deadwood after lay-offs is at most the knocker's (index: 0-10),
by stock left (rows: below 8, 8-11, 12-15, 16-19, 20 or more); measured in 1,500 hands of
``heuristic`` (not knocking) against ``simple``."""


def undercut_risk(left: int, stock: int) -> float:
    """Estimated chance that a knock with ``left`` deadwood is undercut, ``stock`` cards left."""
    row = sum(1 for bound in _UNDERCUT_STOCK if stock >= bound)
    return _UNDERCUT[row][max(0, min(left, 10))]


def opponent_alarm(rules: Rules, seen: View, memory: HandMemory) -> float:
    """How low the opponents' last discards were: ``(11 - value) / 10`` of the lowest last
    discard (0.1 for a ten or a face card, 1 for an ace), 0 before any discard.

    A player who throws the card that leaves least deadwood (as most do) throws his highest
    loose card, so a low discard says all his loose cards are low: his deadwood is low and a
    knock against him is likelier to be undercut.
    """
    last = [
        rules.values[card_face(cards[-1])]
        for seat, cards in memory.discarded.items()
        if seat != seen.seat and cards
    ]
    if not last:
        return 0.0
    return max(0.0, (11 - min(last)) / 10)


class HeuristicPolicy:
    """Tracks cards, judges hands by deadwood and potential, and avoids feeding opponents."""

    name = "heuristic"
    variants = ALL_VARIANTS

    def __init__(self, gin: GinParameters | None = None, table: TableWeights | None = None) -> None:
        self.tracker = CardTracker()
        self.gin = gin or GinParameters()
        self.table = table or TableWeights()

    def observe(self, seat: int, event: Event) -> None:
        """Track ``event`` for ``seat``."""
        self.tracker.observe(seat, event)

    def choose(
        self, rules: Rules, seen: View, actions: Sequence[Command], rng: random.Random
    ) -> Command:
        """The heuristic choice among ``actions``."""
        memory = self.tracker.sync(seen)
        if len(actions) == 1:
            command = actions[0]
        elif rules.knocking == "gin" and is_plain_deck(rules):
            command = GinTurn(rules, seen, actions, memory, self.gin).choose()
        elif rules.knocking:
            command = KnockTurn(rules, seen, actions, memory).choose()
        else:
            command = TableTurn(rules, seen, actions, memory, self.table).choose()
        self.tracker.note_command(seen, command)
        return command


def _opponent_near_target(rules: Rules, seen: View, reach: int) -> bool:
    """Whether an opponent is within ``reach`` points of the game's target."""
    if rules.target is None:
        return False
    return any(
        Fraction(total) + reach >= rules.target
        for seat, total in enumerate(seen.scores)
        if seat != seen.seat
    )


class GinTurn:
    """One Gin Rummy decision."""

    def __init__(
        self,
        rules: Rules,
        seen: View,
        actions: Sequence[Command],
        memory: HandMemory,
        parameters: GinParameters,
    ) -> None:
        self.rules = rules
        self.seen = seen
        self.actions = actions
        self.parameters = parameters
        self.knowledge = Knowledge.build(rules, seen, memory)
        self.limit = seen.knock_limit if seen.knock_limit >= 0 else rules.knock_limit
        self.evaluator = GinEvaluator(rules, self.knowledge.unseen, self.limit)
        self.alarm = opponent_alarm(rules, seen, memory)

    def score(self, hand: Sequence[Card], thrown: Card | None) -> float:
        """Lower is better: deadwood, less potential, knock chance and gin chance, plus the
        danger of ``thrown``."""
        now, potential, knock, gin = self.evaluator.judge(hand)
        danger = self.knowledge.danger(thrown) if thrown is not None else 0.0
        parameters = self.parameters
        return (
            now
            - parameters.potential * potential
            - parameters.knock_chance * knock
            - parameters.gin_chance * gin
            + parameters.danger * danger
        )

    def choose(self) -> Command:
        """The command for this decision."""
        if self.seen.phase in ("draw", "first_upcard"):
            return self.draw()
        return self.play()

    def draw(self) -> Command:
        """Take the upcard or not."""
        seen, actions = self.seen, self.actions
        take = next((a for a in actions if isinstance(a, TakeDiscard)), None)
        other = next((a for a in actions if isinstance(a, DrawStock | Pass)), None)
        if take is None or other is None:
            return take or other or actions[0]
        upcard = seen.pile[-1]
        hand = seen.hand
        if seen.phase == "draw" and not any(isinstance(a, DrawStock) for a in actions):
            # At the wall: taking the upcard means knocking with it.
            after = discard_deadwoods((*hand, upcard), self.rules.meld_rules, self.rules.values)
            least = min(left for card, left in after.items() if card != upcard)
            return take if self.knock_worth_it(least, wall=True) else other
        best_take = min(
            self.score([held for held in hand if held != card] + [upcard], card) for card in hand
        )
        now, potential, knock, gin = self.evaluator.judge(hand)
        parameters = self.parameters
        stock = (
            now
            - (1 + parameters.potential) * potential
            - parameters.knock_chance * knock
            - parameters.gin_chance * gin
        )
        return take if best_take < stock - parameters.take_margin else other

    def play(self) -> Command:
        """Discard, or knock."""
        hand = self.seen.hand
        discards = {a.card: a for a in self.actions if isinstance(a, Discard)}
        knocks = {a.card: a for a in self.actions if isinstance(a, Knock)}
        if -1 in knocks:
            return knocks[-1]
        scores = {
            card: self.score([held for held in hand if held != card], card)
            for card in {*discards, *knocks}
        }
        thrown = min(discards, key=lambda card: (scores[card], card)) if discards else None
        if knocks:
            left = discard_deadwoods(hand, self.rules.meld_rules, self.rules.values)
            best = min(knocks, key=lambda card: (left[card], scores[card], card))
            if thrown is None:
                return knocks[best]
            on = [card for card in hand if card != thrown]  # the hand if it plays on
            if self.knock_worth_it(left[best], wall=False, on=on):
                return knocks[best]
        assert thrown is not None, "a Gin Rummy turn can always discard or knock"
        return discards[thrown]

    def knock_worth_it(self, left: int, wall: bool, on: Sequence[Card] | None = None) -> bool:
        """Whether knocking with ``left`` deadwood beats playing on (keeping ``on``): the
        undercut risk (higher after a low discard by the opponent) plus the chance of gin at
        the next draw that the knock gives up (weighted by ``gin_wait``) is within the limit.

        Why the gin term: under EAAI scoring a gin is worth 25 points more than a knock and
        cannot be undercut, while ``simple`` rarely gets under a hand with little deadwood;
        knocking with 3 deadwood and a live gin draw threw that bonus away (paired hand duels
        against ``simple``, seed ``p1``: +2.6 points per hand with ``gin_wait`` 3 against 0)."""
        if left == 0 or _opponent_near_target(self.rules, self.seen, self.rules.gin_bonus):
            return True
        stock = self.seen.stock_size
        parameters = self.parameters
        limit = parameters.wall_undercut_limit if wall else parameters.undercut_limit
        waiting = 0.0
        if on is not None and parameters.gin_wait:
            waiting = parameters.gin_wait * self.evaluator.gin_chance(on)
        risk = undercut_risk(left, stock) * (1 + parameters.knock_alarm * self.alarm)
        return risk + waiting <= limit


class KnockTurn:
    """One Knock Rummy decision: Gin Rummy's judgement, a knock threshold of its own."""

    def __init__(
        self, rules: Rules, seen: View, actions: Sequence[Command], memory: HandMemory
    ) -> None:
        self.rules = rules
        self.seen = seen
        self.actions = actions
        self.knowledge = Knowledge.build(rules, seen, memory)
        self.plain = is_plain_deck(rules)
        self.evaluator = GinEvaluator(rules, self.knowledge.unseen, self.threshold())

    def threshold(self) -> int:
        """Most unmatched points to knock with: lower with more opponents, higher late."""
        opponents = sum(self.seen.active) - 1
        stock = self.seen.stock_size
        base = 8 - 2 * opponents
        if stock < 10:
            base += 4
        elif stock < 20:
            base += 2
        return max(0, base)

    def score(self, hand: Sequence[Card], thrown: Card | None) -> float:
        """Lower is better (as ``GinTurn.score``)."""
        if not self.plain:
            return float(deadwood(hand, self.rules.meld_rules, self.rules.values))
        now, potential, knock, _ = self.evaluator.judge(hand)
        danger = self.knowledge.danger(thrown) if thrown is not None else 0.0
        return now - potential - 5 * knock + 3 * danger

    def choose(self) -> Command:
        """The command for this decision."""
        seen, actions = self.seen, self.actions
        hand = seen.hand
        if seen.phase in ("draw", "first_upcard"):
            take = next((a for a in actions if isinstance(a, TakeDiscard)), None)
            other = next((a for a in actions if isinstance(a, DrawStock | Pass)), None)
            if take is None or other is None:
                return take or other or actions[0]
            upcard = seen.pile[-1]
            best_take = min(
                self.score([held for held in hand if held != card] + [upcard], card)
                for card in hand
            )
            return take if best_take < self.score(hand, None) - 3 else other
        discards = {a.card: a for a in actions if isinstance(a, Discard)}
        knocks = {a.card: a for a in actions if isinstance(a, Knock)}
        if knocks:
            left = discard_deadwoods(hand, self.rules.meld_rules, self.rules.values)
            best = min(knocks, key=lambda card: (left[card], card))
            if not discards or left[best] <= self.threshold():
                return knocks[best]
        if not discards:
            return actions[0]
        return discards[
            min(
                discards,
                key=lambda card: (self.score([h for h in hand if h != card], card), card),
            )
        ]


class TableTurn:
    """One decision of a variant with table melds."""

    def __init__(
        self,
        rules: Rules,
        seen: View,
        actions: Sequence[Command],
        memory: HandMemory,
        weights: TableWeights | None = None,
    ) -> None:
        self.rules = rules
        self.seen = seen
        self.actions = actions
        self.weights = weights or TableWeights()
        self.knowledge = Knowledge.build(rules, seen, memory)
        self.meld_rules = rules.meld_rules
        self.values = rules.values
        self.live = face_counts(self.knowledge.unseen)
        self.unseen_count = max(1, len(self.knowledge.unseen))
        self.table = tuple(_shape(meld) for meld in seen.melds)
        self.opened = seen.melded[seen.seat] if 0 <= seen.seat < len(seen.melded) else False
        self.layoff_open = (
            self.table
            and (rules.opening_minimum == 0 or self.opened)
            and not (rules.layoff_requires_own_meld and not self.opened)
        )
        self.meld_points = rules.scoring == "melded_minus_hand"

    # Shared judgement -------------------------------------------------------------------------

    def deadwood(self, hand: Sequence[Card]) -> int:
        """What ``hand`` leaves unmatched in its best partition."""
        return deadwood(tuple(hand), self.meld_rules, self.values)

    def utility(self, hand: Sequence[Card], left: int) -> float:
        """Higher is better: minus what stays unmatched (Rummy 500: plus what can be melded)."""
        if self.meld_points:
            total = sum(self.values[card_face(card)] for card in hand)
            return total - 2 * left
        return -left

    def fits_table(self, card: Card) -> bool:
        """Whether ``card`` could be laid off on a table meld."""
        if is_joker(card):
            return bool(self.table)
        face = card_face(card)
        return any(face in layoff_faces(meld, self.meld_rules) for meld in self.table)

    def outs(self, card: Card, hand: Sequence[Card]) -> int:
        """Live cards that would make a three-card meld of ``card`` and one other card of
        ``hand`` (its meld chances; several per partner)."""
        if is_joker(card):
            return 0
        live = self.live
        face = card_face(card)
        rank, suit = face % 13, face // 13
        wrap = self.rules.ace is not AceMode.LOW
        total = 0
        seen_partners: set[int] = set()
        for other in hand:
            if other == card:
                continue
            if is_joker(other):
                total += 2
                continue
            partner = card_face(other)
            if partner == face or partner in seen_partners:
                continue
            seen_partners.add(partner)
            other_rank, other_suit = partner % 13, partner // 13
            if other_rank == rank:
                total += sum(
                    live[third * 13 + rank] for third in range(4) if third not in (suit, other_suit)
                )
            elif other_suit == suit:
                low, high = sorted((rank, other_rank))
                gap = high - low
                if gap == 1:
                    for end in (low - 1, high + 1):
                        total += _live_rank(live, suit, end, wrap)
                elif gap == 2:
                    total += live[suit * 13 + low + 1]
                elif wrap and gap == 12:
                    total += _live_rank(live, suit, 1, wrap) + _live_rank(live, suit, 11, wrap)
        return total

    def choose(self) -> Command:
        """The command for this decision."""
        seen, actions = self.seen, self.actions
        if seen.claim_kind:
            return self.claim()
        if seen.phase == "draw":
            return self.draw()
        for action in actions:
            if isinstance(action, SwapJoker):
                return action
        meld = self.meld()
        if meld is not None:
            return meld
        layoff = self.layoff()
        if layoff is not None:
            return layoff
        return self.discard()

    # Claims and draws -------------------------------------------------------------------------

    def claim(self) -> Command:
        """Claim a "Rummy!" call; ``bussare`` only for an upcard that joins a meld."""
        claims = [a for a in self.actions if isinstance(a, Claim)]
        passing = next((a for a in self.actions if isinstance(a, Pass)), self.actions[0])
        if not claims:
            return passing
        if self.seen.claim_kind == "rummy":
            return min(claims, key=lambda claim: claim.count)
        upcard = self.seen.pile[-1]
        hand = self.seen.hand
        if self.opened and self.deadwood((*hand, upcard)) < self.deadwood(hand):
            return claims[0]
        return passing

    def draw(self) -> Command:
        """Stock, upcard or (Rummy 500) a deeper take, by what the hand gains."""
        seen, actions = self.seen, self.actions
        hand = seen.hand
        takes = [a for a in actions if isinstance(a, TakeDiscard)]
        other = next((a for a in actions if isinstance(a, DrawStock | Pass)), None)
        if not takes:
            return other or actions[0]
        now_left = self.deadwood(hand)
        now = self.utility(hand, now_left)
        best: tuple[float, Command] | None = None
        for take in takes:
            if take.count > 8 and take.count != len(seen.pile):
                continue
            taken = seen.pile[len(seen.pile) - take.count :]
            grown = (*hand, *taken)
            left = self.deadwood(grown)
            if take.count == 1 and not self.meld_points:
                # Worth it when the upcard is used: it melds, or fits the table.
                useful = left < now_left + self.values[card_face(taken[0])] or (
                    self.layoff_open and self.fits_table(taken[0])
                )
                gain = now_left - left + self.values[card_face(taken[0])] if useful else -1.0
            else:
                gain = self.utility(grown, left) - now
                if take.count > 1:
                    gain -= 2 * (take.count - 1)
            if gain > 0 and (best is None or gain > best[0]):
                best = (gain, take)
        if best is not None:
            return best[1]
        return other or min(takes, key=lambda take: take.count)

    # Lay-downs --------------------------------------------------------------------------------

    def meld(self) -> Command | None:
        """The lay-down that leaves the least unmatched, if it costs nothing."""
        melds = [a for a in self.actions if isinstance(a, MeldCommand)]
        if not melds:
            return None
        hand = self.seen.hand
        required = self.seen.required
        now = self.deadwood(hand)

        def left(action: MeldCommand) -> tuple[int, int]:
            used = {card for spec in action.melds for card in spec.cards}
            rest = [card for card in hand if card not in used]
            return self.deadwood(rest), -len(used)

        best = min(melds, key=left)
        after, used = left(best)
        must = required >= 0 or not any(isinstance(a, Discard | LayOff) for a in self.actions)
        opening = self.rules.opening_minimum > 0 and not self.opened
        if must or opening or after <= now or -used == len(hand):
            return best
        return None

    def layoff(self) -> Command | None:
        """A lay-off of a card that is deadwood (jokers only near the end, or when required)."""
        layoffs = [a for a in self.actions if isinstance(a, LayOff)]
        if not layoffs:
            return None
        hand = self.seen.hand
        required = self.seen.required
        if required >= 0:
            wanted = [a for a in layoffs if a.card == required]
            if wanted:
                return wanted[0]
        after = discard_deadwoods(hand, self.meld_rules, self.values)
        now = self.deadwood(hand)
        late = len(hand) <= 3 or self.seen.stock_size <= 5
        best: tuple[int, LayOff] | None = None
        for action in layoffs:
            card = action.card
            if is_joker(card) and not late:
                continue
            saved = now - after[card]
            if saved >= self.values[card_face(card)] or len(hand) <= 2:
                key = -saved
                if best is None or key < best[0]:
                    best = (key, action)
        return best[1] if best is not None else None

    # Discards ---------------------------------------------------------------------------------

    def discard(self) -> Command:
        """The discard that costs least: melds broken, meld chances lost and the danger of
        feeding the next player, less the value shed."""
        discards = [a for a in self.actions if isinstance(a, Discard)]
        if not discards:
            return self.actions[0]
        hand = self.seen.hand
        if len(hand) == 1:
            return discards[0]
        after = discard_deadwoods(hand, self.meld_rules, self.values)
        now = self.deadwood(hand)
        knowledge = self.knowledge
        layoff_feeds = bool(self.table)
        weights = self.weights

        def cost(action: Discard) -> tuple[float, Card]:
            card = action.card
            value = self.values[card_face(card)]
            if is_joker(card):
                return 1000.0 + value, card
            broken = after[card] - now + value
            total = (
                weights.broken * broken
                + weights.outs * self.outs(card, hand)
                - weights.value * value
                + weights.danger * knowledge.danger(card)
            )
            if layoff_feeds and self.fits_table(card):
                total += weights.feeds
            return total, card

        return min(discards, key=cost)


@dataclass(frozen=True, slots=True)
class TableWeights:
    """The weights of a table-meld variant's discard."""

    broken: float = 2.0
    """Per point of deadwood added by breaking a meld of the hand."""
    outs: float = 5.0
    """Per live card that would complete a meld with the card."""
    value: float = 0.5
    """Per point of the card's value (shedding high cards)."""
    danger: float = 6.0
    feeds: float = 6.0
    """For a card that fits a table meld (the next player could take it and lay it off)."""


def _live_rank(live: Sequence[int], suit: int, rank: int, wrap: bool) -> int:
    """Live cards of ``suit`` at 0-based ``rank`` (13 is the ace above the king if ``wrap``)."""
    if rank == 13 and wrap:
        rank = 0
    if not 0 <= rank <= 12:
        return 0
    return live[suit * 13 + rank]


def _shape(meld: MeldView) -> MeldShape:
    """A table meld as the meld solver's shape."""
    return MeldShape(MeldKind(meld.kind), meld.cards, meld.faces)
