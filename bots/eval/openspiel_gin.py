"""Our policies against OpenSpiel's built-in simple Gin Rummy bot, inside OpenSpiel's engine.

Usage::

    python -m bots.eval.openspiel_gin --policy heuristic --deals 1000 --seed 1 --jobs 2

OpenSpiel's ``gin_rummy`` plays one hand (knock card 10, gin 25, undercut 25, a tie is no
undercut, no big gin; returns are the hand's points, zero-sum). The hand is OpenSpiel's from start
to end: its rules, its legality, its scoring. Our policy is consulted through an adapter:

- cards: OpenSpiel numbers them ``suit * 13 + rank - 1`` with suits s c d h, ours C D H S;
- deals: each deal is one of our shuffles (``chance`` with seed ``{seed}:{deal}``) forced into
  OpenSpiel's chance nodes (ten cards to player 0, the non-dealer, ten to player 1, the upcard,
  then the stock card by card as it is drawn), and is played twice, our policy as player 0 and
  as player 1 (duplicate);
- decisions: at each of our player's draw, first-upcard, wall and discard decisions the
  adapter builds our engine ``State`` from OpenSpiel's (hands, pile, stock, the card taken this
  turn, first-upcard passes) for the ``gin`` preset at OpenSpiel's settings, asks our policy
  for a command among our legal ones and plays its OpenSpiel counterpart (a knock is
  ``KNOCK`` then the discard, at the wall taking the upcard is ``KNOCK``);
- laying out: as knocker we lay the melds of our solver's best partition, as defender we lay
  off what ``best_layoff_deadwood`` says, then meld the rest; each move only if OpenSpiel
  allows it (its lay-offs stop at two cards per run end; its 11-card valuation sometimes
  refuses a knock we allow: the card is then simply discarded).

OpenSpiel lets a player discard the card he just took; its bot sometimes does. That is
OpenSpiel's rule here, and the adapter follows whatever OpenSpiel's state says.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import random
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from bots.duel import mean_interval
from bots.policies.base import Policy, find_policy
from protocol.cards import Card, card_face
from server.engine import (
    Command,
    Dealt,
    Discard,
    DrawStock,
    Knock,
    Pass,
    Phase,
    State,
    TakeDiscard,
    chance,
    legal_actions,
    make_deck,
    make_rules,
    new_game,
    view,
)
from server.engine.melds import check_meld
from server.engine.solver import best_layoff_deadwood, best_melds, deadwood

__all__ = ["OPENSPIEL_OPTIONS", "HandOutcome", "from_os", "main", "play_hand", "to_os"]

OPENSPIEL_OPTIONS: dict[str, object] = {"deals": 1, "undercut_on_tie": False, "big_gin_bonus": 0}
"""Our ``gin`` preset at OpenSpiel's settings: one hand, a tie is no undercut, no big gin."""

DRAW_UPCARD, DRAW_STOCK, PASS, KNOCK, MELD_BASE = 52, 53, 54, 55, 56
_MAX_RUN = 5
_DECK: tuple[Card, ...] = make_deck(1)


def to_os(card: Card) -> int:
    """OpenSpiel's id of one of our cards."""
    return (card_face(card) + 13) % 52


def from_os(card_id: int) -> Card:
    """Our card of an OpenSpiel card id."""
    return _DECK[(card_id + 39) % 52]


@dataclass(frozen=True, slots=True)
class HandOutcome:
    """One hand: our policy's OpenSpiel player and what it scored."""

    deal: int
    player: int
    points: float
    decisions: int
    seconds: float


class _OpenSpiel:
    """The loaded ``pyspiel`` module, game and meld tables."""

    def __init__(self) -> None:
        self.pyspiel: Any = importlib.import_module("pyspiel")
        self.game: Any = self.pyspiel.load_game("gin_rummy")
        utils = self.pyspiel.gin_rummy.GinRummyUtils(13, 4, 10)
        self.meld_cards: dict[int, tuple[int, ...]] = {
            int(meld_id): tuple(meld) for meld_id, meld in utils.int_to_meld.items()
        }
        self.meld_ids = {frozenset(cards): meld_id for meld_id, cards in self.meld_cards.items()}
        self.phase: Any = self.pyspiel.gin_rummy.Phase


_loaded: list[_OpenSpiel] = []


def _openspiel() -> _OpenSpiel:
    if not _loaded:
        _loaded.append(_OpenSpiel())
    return _loaded[0]


def _split_run(cards: Sequence[Card]) -> list[tuple[Card, ...]]:
    """A meld as OpenSpiel melds: runs longer than five cards cut into the fewest pieces."""
    ordered = sorted(cards, key=lambda card: card_face(card) % 13)
    if len(ordered) <= _MAX_RUN or len({card_face(card) % 13 for card in ordered}) == 1:
        return [tuple(ordered)]
    pieces = -(-len(ordered) // _MAX_RUN)
    size, extra = divmod(len(ordered), pieces)
    result: list[tuple[Card, ...]] = []
    start = 0
    for index in range(pieces):
        length = size + (index < extra)
        result.append(tuple(ordered[start : start + length]))
        start += length
    return result


class _Hand:
    """One OpenSpiel hand with our policy as ``player``."""

    def __init__(self, policy: Policy, player: int, dealt: Dealt, rng: random.Random) -> None:
        self.os = _openspiel()
        self.rules = make_rules("gin", OPENSPIEL_OPTIONS, 2)
        self.policy = policy
        self.player = player
        self.rng = rng
        order = dealt.order
        self.stock = list(order[21:])
        self.state: Any = self.os.game.new_initial_state()
        for card in (*order[0:20:2], *order[1:20:2], order[20]):
            self.state.apply_action(to_os(card))
        self.bot: Any = self.os.pyspiel.make_simple_gin_rummy_bot(
            self.os.game.get_parameters(), 1 - player
        )
        self.taken: Card | None = None
        self.decisions = 0
        self.seconds = 0.0

    def apply(self, action: int) -> None:
        state = self.state
        state.apply_action(action)
        if action == DRAW_STOCK or (state.is_chance_node() and not state.is_terminal()):
            card = self.stock.pop(0)
            state.apply_action(to_os(card))

    def play(self) -> float:
        state = self.state
        while not state.is_terminal():
            if state.current_player() != self.player:
                self.apply(int(self.bot.step(state)))
                continue
            self.our_move()
        return float(state.returns()[self.player])

    # Our moves -------------------------------------------------------------------------------

    def our_move(self) -> None:
        state, phases = self.state, self.os.phase
        phase = state.current_phase()
        legal = list(state.legal_actions())
        if phase == phases.LAYOFF:
            self.defend()
            return
        if phase == phases.KNOCK and not self.awaiting_knock_discard(legal):
            self.lay_out(self.hand())
            return
        if len(legal) == 1 and phase not in (phases.DISCARD, phases.KNOCK):
            self.apply(legal[0])
            return
        ours = self.our_state(phase)
        actions = legal_actions(ours, self.player)
        started = time.perf_counter()
        command = self.policy.choose(self.rules, view(ours, self.player), actions, self.rng)
        self.seconds += time.perf_counter() - started
        self.decisions += 1
        self.play_command(command, legal, phase)

    def awaiting_knock_discard(self, legal: Sequence[int]) -> bool:
        return all(action < 52 for action in legal) and len(self.hand()) == 11

    def hand(self) -> list[Card]:
        return [from_os(card) for card in self.state.hands()[self.player]]

    def pile(self) -> tuple[Card, ...]:
        cards = [from_os(card) for card in self.state.discard_pile()]
        upcard = self.state.upcard()
        if upcard is not None:
            cards.append(from_os(upcard))
        return tuple(cards)

    def our_state(self, phase: Any) -> State:
        """Our engine's state for this decision of our player."""
        state, phases = self.state, self.os.phase
        hands: list[tuple[Card, ...]] = [(), ()]
        for player in range(2):
            hands[player] = tuple(sorted(from_os(card) for card in state.hands()[player]))
        passes = sum(bool(flag) for flag in state.pass_on_first_upcard())
        ours_phase = Phase.DRAW
        must_knock = False
        taken: tuple[Card, ...] = ()
        if phase == phases.FIRST_UPCARD:
            ours_phase = Phase.FIRST_UPCARD if passes < 2 else Phase.DRAW
        elif phase in (phases.DISCARD, phases.KNOCK):
            ours_phase = Phase.PLAY
            if self.taken is not None:
                taken = (self.taken,)
            must_knock = phase == phases.KNOCK
        if ours_phase is not Phase.PLAY:
            self.taken = None
        base = new_game(self.rules)
        return State(
            rules=self.rules,
            phase=ours_phase,
            hand_number=1,
            dealer=1,
            turn=self.player,
            scores=base.scores,
            active=base.active,
            hands=(hands[0], hands[1]),
            stock=tuple(self.stock),
            pile=self.pile(),
            melds=(),
            melded=(False, False),
            laid_before=(False, False),
            taken=taken,
            upcard_passes=passes if phase == phases.FIRST_UPCARD else 0,
            knock_limit=int(state.knock_card()),
            must_knock=must_knock,
            hands_won=(0, 0),
            forfeited=(False, False),
        )

    def play_command(self, command: Command, legal: Sequence[int], phase: Any) -> None:
        phases = self.os.phase
        match command:
            case DrawStock():
                self.apply(DRAW_STOCK)
            case TakeDiscard():
                if phase == phases.WALL:
                    self.taken = from_os(self.state.upcard())
                    self.apply(KNOCK)
                else:
                    self.taken = from_os(self.state.upcard())
                    self.apply(DRAW_UPCARD)
            case Pass():
                self.apply(PASS)
            case Discard(card=card):
                self.apply(to_os(card) if to_os(card) in legal else legal[0])
            case Knock(card=card):
                if phase == phases.KNOCK:
                    self.knock_discard(card)
                elif KNOCK in legal:
                    self.apply(KNOCK)
                    self.knock_discard(card)
                else:  # OpenSpiel's 11-card valuation refuses this knock: just discard
                    self.apply(to_os(card))
            case _:
                raise AssertionError(f"no OpenSpiel move for {command!r}")

    def knock_discard(self, card: Card) -> None:
        legal = list(self.state.legal_actions())
        if to_os(card) not in legal:
            values = self.rules.values
            meld_rules = self.rules.meld_rules
            hand = self.hand()
            card = min(
                (from_os(action) for action in legal),
                key=lambda option: deadwood(
                    [held for held in hand if held != option], meld_rules, values
                ),
            )
        self.apply(to_os(card))
        self.lay_out(self.hand())

    def meld_actions(self, cards: Sequence[Card]) -> list[int]:
        actions = []
        for piece in _split_run(cards):
            meld_id = self.os.meld_ids.get(frozenset(to_os(card) for card in piece))
            if meld_id is not None:
                actions.append(MELD_BASE + meld_id)
        return actions

    def lay_out(self, hand: Sequence[Card]) -> None:
        """Lay our best melds, then pass (as knocker, or as defender after lay-offs)."""
        melds, _ = best_melds(hand, self.rules.meld_rules, self.rules.values)
        planned = [action for meld in melds for action in self.meld_actions(meld.cards)]
        while not self.state.is_terminal() and self.state.current_player() == self.player:
            legal = list(self.state.legal_actions())
            action = next((a for a in planned if a in legal), None)
            if action is not None:
                planned.remove(action)
                self.apply(action)
            elif PASS in legal:
                self.apply(PASS)
                return
            else:
                self.apply(legal[0])

    def defend(self) -> None:
        """Lay off what our solver says (as far as OpenSpiel allows), then meld the rest."""
        state = self.state
        knocker = 1 - self.player
        rules = self.rules
        table = [
            check_meld([from_os(card) for card in self.os.meld_cards[meld_id]], rules.meld_rules)
            for meld_id in state.layed_melds()[knocker]
        ]
        _, laid = best_layoff_deadwood(self.hand(), table, rules.meld_rules, rules.values)
        pending = [to_os(card) for card in laid]
        while not state.finished_layoffs() and state.current_player() == self.player:
            legal = list(state.legal_actions())
            action = next((a for a in pending if a in legal), None)
            if action is None:
                self.apply(PASS)
                break
            pending.remove(action)
            self.apply(action)
        if not state.is_terminal() and state.current_player() == self.player:
            self.lay_out(self.hand())


def play_hand(policy_name: str, seed: str, deal: int, player: int) -> HandOutcome:
    """Play deal ``deal`` with ``policy_name`` as OpenSpiel player ``player``."""
    rules = make_rules("gin", OPENSPIEL_OPTIONS, 2)
    dealt = chance(new_game(rules), random.Random(f"{seed}:{deal}"))
    assert isinstance(dealt, Dealt)
    hand = _Hand(find_policy(policy_name), player, dealt, random.Random(f"{seed}:{deal}:{player}"))
    points = hand.play()
    return HandOutcome(deal, player, points, hand.decisions, hand.seconds)


def _play_deals(policy_name: str, seed: str, deals: Sequence[int]) -> list[HandOutcome]:
    return [play_hand(policy_name, seed, deal, player) for deal in deals for player in (0, 1)]


def run(policy_name: str, deals: int, seed: str, jobs: int) -> dict[str, Any]:
    """Play ``deals`` duplicate deals and summarise them."""
    started = time.perf_counter()
    numbers = list(range(deals))
    outcomes: list[HandOutcome] = []
    if jobs <= 1:
        outcomes = _play_deals(policy_name, seed, numbers)
    else:
        chunk = max(1, min(50, deals // (jobs * 8)))
        chunks = [numbers[start : start + chunk] for start in range(0, deals, chunk)]
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            for part in pool.map(
                _play_deals, [policy_name] * len(chunks), [seed] * len(chunks), chunks
            ):
                outcomes.extend(part)
    by_deal: dict[int, list[HandOutcome]] = {}
    for outcome in outcomes:
        by_deal.setdefault(outcome.deal, []).append(outcome)
    shares = []
    points = []
    for deal in sorted(by_deal):
        hands = by_deal[deal]
        shares.append(
            sum(1.0 if h.points > 0 else 0.5 if h.points == 0 else 0.0 for h in hands) / len(hands)
        )
        points.append(sum(h.points for h in hands) / len(hands))
    decided = [h for h in outcomes if h.points != 0]
    share, low, high = mean_interval(shares)
    mean, mean_low, mean_high = mean_interval(points)
    decisions = sum(h.decisions for h in outcomes)
    return {
        "policy": policy_name,
        "opponent": "OpenSpiel simple gin rummy bot",
        "deals": deals,
        "hands": len(outcomes),
        "seed": seed,
        "win_share": round(share, 4),
        "win_share_ci95": [round(low, 4), round(high, 4)],
        "decided_hands": len(decided),
        "wins_of_decided": round(sum(1 for h in decided if h.points > 0) / len(decided), 4)
        if decided
        else None,
        "mean_points": round(mean, 3),
        "mean_points_ci95": [round(mean_low, 3), round(mean_high, 3)],
        "ms_per_decision": round(1000 * sum(h.seconds for h in outcomes) / max(1, decisions), 3),
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: play a policy against OpenSpiel's simple bot and print the summary."""
    parser = argparse.ArgumentParser(
        prog="python -m bots.eval.openspiel_gin",
        description="our policy against OpenSpiel's simple gin rummy bot, in OpenSpiel",
    )
    parser.add_argument("--policy", default="simple")
    parser.add_argument("--deals", type=int, default=200)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    summary = run(args.policy, args.deals, args.seed, args.jobs)
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print(
            f"{summary['policy']} vs {summary['opponent']}: {summary['deals']} deals x 2 seats"
            f" = {summary['hands']} hands in {summary['seconds']} s"
        )
        low, high = summary["win_share_ci95"]
        print(
            f"win share {summary['win_share']:.3f} [{low:.3f}, {high:.3f}] (void hands count"
            f" half); wins of decided hands {summary['wins_of_decided']}"
        )
        print(
            f"mean points per hand {summary['mean_points']:+.2f}"
            f" {summary['mean_points_ci95']}; {summary['ms_per_decision']} ms per decision"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
