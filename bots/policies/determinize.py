"""Determinization: a full engine ``State`` consistent with everything a seat has seen.

The hidden cards of a view are the stock and the other hands. A *world* deals them out at
random: each opponent gets the cards he is known to hold (picked from the pile, tracked in the
seat's ``HandMemory``), then random unseen cards weighted by how likely he holds each (the
``Knowledge`` probabilities: lower near his discards and declines, higher near his picks), and
the rest, shuffled, becomes the stock. The state is then assembled from the view's public fields,
so the engine's ``decide`` and ``evolve`` can play the hand out from there.

Fields a view does not carry are set to what they must have been for the moves to stay legal:
``laid_before`` follows ``melded``; ``idle_turns`` starts at 0; ``must_knock`` is set when the
upcard was taken at the Gin Rummy wall.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from fractions import Fraction

from bots.policies.evaluation import Knowledge
from protocol.cards import Card
from protocol.game import MeldView
from server.engine import Phase, State, TableMeld
from server.engine.melds import Meld as MeldShape
from server.engine.melds import MeldKind

__all__ = ["PLAUSIBLE_TRIES", "sample_world"]

PLAUSIBLE_TRIES = 8
"""Worlds drawn at most to find one the caller finds plausible (a soft constraint)."""


def _table_meld(meld: MeldView) -> TableMeld:
    return TableMeld(MeldShape(MeldKind(meld.kind), meld.cards, meld.faces), meld.owners)


def sample_world(
    knowledge: Knowledge, rng: random.Random, plausible: Callable[[State], bool] | None = None
) -> State | None:
    """A random state consistent with ``knowledge`` (``None`` if the counts do not add up,
    e.g. after a missed event). With ``plausible``, up to ``PLAUSIBLE_TRIES`` worlds are drawn
    and the first it accepts is returned (else the last one)."""
    world = _sample_world(knowledge, rng)
    if plausible is None or world is None:
        return world
    for _ in range(PLAUSIBLE_TRIES - 1):
        if plausible(world):
            return world
        world = _sample_world(knowledge, rng)
        assert world is not None
    return world


def _sample_world(knowledge: Knowledge, rng: random.Random) -> State | None:
    seen = knowledge.seen
    rules = knowledge.rules
    memory = knowledge.memory
    pool = list(knowledge.unseen)
    hands: list[tuple[Card, ...]] = []
    needs: list[int] = []
    for seat in range(seen.players):
        if seat == seen.seat:
            needs.append(0)
            continue
        needs.append(seen.hand_sizes[seat] - len(memory.known(seat)))
    if any(need < 0 for need in needs) or sum(needs) + seen.stock_size != len(pool):
        return None
    holders = knowledge.holders
    # Weighted sampling without replacement (Efraimidis-Spirakis): larger keys first.
    keyed = sorted(
        pool,
        key=lambda card: rng.random() ** (1.0 / max(holders.get(card, 0.0), 1e-6)),
        reverse=True,
    )
    start = 0
    for seat in range(seen.players):
        if seat == seen.seat:
            hands.append(tuple(sorted(seen.hand)))
            continue
        chosen = keyed[start : start + needs[seat]]
        start += needs[seat]
        hands.append(tuple(sorted((*memory.known(seat), *chosen))))
    stock = keyed[start:]
    rng.shuffle(stock)
    phase = Phase(seen.phase)
    wall = rules.wall
    must_knock = phase is Phase.PLAY and bool(seen.taken) and wall > 0 and len(stock) <= wall
    return State(
        rules=rules,
        phase=phase,
        hand_number=seen.hand_number,
        dealer=seen.dealer,
        turn=seen.turn,
        scores=tuple(Fraction(score) for score in seen.scores),
        active=seen.active,
        hands=tuple(hands),
        stock=tuple(stock),
        pile=seen.pile,
        melds=tuple(_table_meld(meld) for meld in seen.melds),
        melded=seen.melded,
        laid_before=seen.melded,
        taken=seen.taken,
        required=seen.required,
        resume=-1,
        melds_this_turn=seen.melds_this_turn,
        laid_this_turn=seen.melds_this_turn > 0,
        reuses=seen.stock_reuses,
        idle_turns=0,
        claim_kind="",
        claim_seats=(),
        claim_answers=(),
        claim_depths=(),
        upcard_passes=seen.upcard_passes,
        knock_limit=seen.knock_limit,
        must_knock=must_knock,
        hands_won=seen.hands_won,
        forfeited=seen.forfeited,
        winners=(),
        last_result=None,
    )
