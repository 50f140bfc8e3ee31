"""The meld solver's Gin Rummy deadwood, cross-checked against OpenSpiel and RLCard.

Gin Rummy values (A 1, 2-10 pip, J/Q/K 10), ace low, one deck, no jokers. Both references are
independent implementations of the same meld arithmetic:

- OpenSpiel's ``GinRummyUtils.min_deadwood`` (C++) is exact for 10 cards. For 11 cards it melds
  as much value as it can over all 11 and then drops the highest-ranked leftover, which is
  sometimes worse than the best discard (RULES.md, ``gin``). Ramino uses the true minimum. That
  *known case* is recognised only by proof: every one of our 11 discard deadwoods equals
  OpenSpiel's exact 10-card ``min_deadwood`` of the hand without that card, our value is their
  minimum, and OpenSpiel's 11-card value is larger. It is counted; anything else fails.
- RLCard's ``melding.get_best_meld_clusters`` with ``utils.get_deadwood_count`` (10 cards) and
  ``judge.get_going_out_cards`` (11 cards: the discards that leave deadwood <= 10).

Uniform random hands seldom hold overlapping melds, so each check also runs on hands drawn from
four adjacent ranks of all suits, where sets and runs cross and the OpenSpiel quirk is common.
The seeds are fixed and printed with the counts. Outside CI a missing reference skips the
module; with ``CI=true`` it must be installed and a missing one fails.
"""

from __future__ import annotations

import importlib
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from protocol.cards import (
    Card,
    card_face,
    format_card,
    format_cards,
    format_face,
    make_deck,
    make_face,
    parse_cards,
)
from server.engine.melds import AceMode, MeldRules
from server.engine.solver import best_discard, deadwood, discard_deadwoods

_IN_CI = os.environ.get("CI", "").lower() == "true"


def _reference(module: str, package: str) -> Any:
    """Import a reference implementation; skip the module when it is missing, except in CI."""
    if _IN_CI:
        return importlib.import_module(module)
    return pytest.importorskip(
        module,
        reason=f"the Gin Rummy reference checks need {package} ({module} is not importable);"
        " install the dev dependency group",
    )


pyspiel = _reference("pyspiel", "open-spiel")
rlcard_judge = _reference("rlcard.games.gin_rummy.judge", "rlcard")
rlcard_melding = _reference("rlcard.games.gin_rummy.utils.melding", "rlcard")
rlcard_utils = _reference("rlcard.games.gin_rummy.utils.utils", "rlcard")

GIN_VALUES: tuple[int, ...] = (*(min(face % 13 + 1, 10) for face in range(52)), 0)
"""A=1, 2-10 pip, J/Q/K=10; no jokers in Gin Rummy."""
GIN_RULES = MeldRules(AceMode.LOW, 1)
KNOCK_LIMIT = 10
ONE_DECK = make_deck(1)
ADJACENT_RANKS = 4
"""Width of the rank window the meld-rich hands are drawn from (16 cards)."""

OPENSPIEL_HANDS = 100_000
OPENSPIEL_ADJACENT_HANDS = 20_000
RLCARD_HANDS = 20_000
RLCARD_ADJACENT_HANDS = 5_000

RULES_EXAMPLE_HAND = "6S 3C 4H 2H 5H 4C 6C 3S 6H 5S 5C"
"""RULES.md's 11-card hand: OpenSpiel says 12, discarding 6S leaves 10."""

_OPENSPIEL = pyspiel.gin_rummy.GinRummyUtils(13, 4, 10)
"""13 ranks, 4 suits, hand size 10: an 11-card hand gets the drop-the-highest evaluation."""
_OPENSPIEL_ID: tuple[int, ...] = tuple((face + 13) % 52 for face in range(52))
"""OpenSpiel card id of each of our faces: OpenSpiel's suits go s c d h, ours C D H S."""
_RLCARD_CARD: tuple[Any, ...] = tuple(
    rlcard_utils.card_from_text(format_face(face)) for face in range(52)
)
"""RLCard ``Card`` of each of our faces: RLCard's text is ours (rank, then suit, ``T`` for 10)."""


# --- Hands ----------------------------------------------------------------------------------------


def _uniform_hands(rng: random.Random, size: int, count: int) -> list[tuple[Card, ...]]:
    """``count`` hands of ``size`` cards dealt from a shuffled deck."""
    return [tuple(rng.sample(ONE_DECK, size)) for _ in range(count)]


def _adjacent_rank_hands(rng: random.Random, size: int, count: int) -> list[tuple[Card, ...]]:
    """``count`` hands of ``size`` cards from ``ADJACENT_RANKS`` adjacent ranks, all suits."""
    hands: list[tuple[Card, ...]] = []
    for _ in range(count):
        low = rng.randint(1, 14 - ADJACENT_RANKS)
        pool = [
            make_face(rank, suit) for suit in range(4) for rank in range(low, low + ADJACENT_RANKS)
        ]
        hands.append(tuple(rng.sample(pool, size)))
    return hands


def _show(hand: Sequence[Card]) -> str:
    """A hand in our notation, in card order, to paste into a regression test."""
    return format_cards(sorted(hand))


def _failure_report(kind: str, failures: Sequence[str], compared: int, seed: int) -> str:
    shown = "\n".join(failures[:20])
    return f"{len(failures)} of {compared} {kind} differ (seed {seed}); first ones:\n{shown}"


def _print_counts(
    capsys: pytest.CaptureFixture[str], check: str, compared: str, seed: object, known: int
) -> None:
    with capsys.disabled():
        print(f"\n[gin reference] {check}: compared {compared}; seed {seed}; known cases {known}")


# --- OpenSpiel ------------------------------------------------------------------------------------


def _openspiel_deadwood(hand: Sequence[Card]) -> int:
    """OpenSpiel's ``min_deadwood``: exact for 10 cards, drop-the-highest for 11."""
    return int(_OPENSPIEL.min_deadwood([_OPENSPIEL_ID[card_face(card)] for card in hand]))


@dataclass(frozen=True, slots=True)
class ElevenCardComparison:
    """One 11-card hand valued by us and by OpenSpiel."""

    ours: int
    """Our ``best_discard`` deadwood."""
    openspiel: int
    """OpenSpiel's 11-card ``min_deadwood``."""
    exhaustive: int
    """The least of OpenSpiel's exact 10-card ``min_deadwood`` over the 11 discards."""
    discard_mismatches: tuple[tuple[Card, int, int], ...]
    """Discards where our ``discard_deadwoods`` and OpenSpiel's 10-card value differ."""

    @property
    def agrees(self) -> bool:
        """Every value is equal: ours, OpenSpiel's 11-card one and the exhaustive one."""
        return not self.discard_mismatches and self.ours == self.exhaustive == self.openspiel

    @property
    def known_case(self) -> bool:
        """The OpenSpiel quirk, proven: ours is the exhaustive minimum and OpenSpiel's is larger."""
        return not self.discard_mismatches and self.ours == self.exhaustive < self.openspiel

    def describe(self, hand: Sequence[Card]) -> str:
        """The hand and every value, for a failure message."""
        mismatches = ", ".join(
            f"discard {format_card(card)}: ours {ours} OpenSpiel {theirs}"
            for card, ours, theirs in self.discard_mismatches
        )
        return (
            f"{_show(hand)}: ours {self.ours}, OpenSpiel 11-card {self.openspiel},"
            f" exhaustive OpenSpiel 10-card {self.exhaustive}"
            + (f"; {mismatches}" if mismatches else "")
        )


def compare_eleven(hand: Sequence[Card]) -> ElevenCardComparison:
    """Value an 11-card hand with our solver and, independently, with OpenSpiel."""
    ours = best_discard(hand, GIN_RULES, GIN_VALUES)[1]
    by_discard = discard_deadwoods(hand, GIN_RULES, GIN_VALUES)
    ids = [_OPENSPIEL_ID[card_face(card)] for card in hand]
    mismatches: list[tuple[Card, int, int]] = []
    exhaustive: int | None = None
    for index, card in enumerate(hand):
        theirs = int(_OPENSPIEL.min_deadwood(ids[:index] + ids[index + 1 :]))
        if exhaustive is None or theirs < exhaustive:
            exhaustive = theirs
        if by_discard[card] != theirs:
            mismatches.append((card, by_discard[card], theirs))
    assert exhaustive is not None
    return ElevenCardComparison(
        ours, int(_OPENSPIEL.min_deadwood(ids)), exhaustive, tuple(mismatches)
    )


def _eleven_card_run(hands: Sequence[Sequence[Card]]) -> tuple[int, list[str]]:
    """The number of known cases among ``hands``, and a description of every failure."""
    known = 0
    failures: list[str] = []
    for hand in hands:
        comparison = compare_eleven(hand)
        if comparison.agrees:
            continue
        if comparison.known_case:
            known += 1
        else:
            failures.append(comparison.describe(hand))
    return known, failures


def test_card_notation_maps_onto_both_references(capsys: pytest.CaptureFixture[str]) -> None:
    """Every face converts to the OpenSpiel id and RLCard card that print as the same card."""
    expected = [format_face(face) for face in range(52)]
    openspiel = [str(_OPENSPIEL.card_string(_OPENSPIEL_ID[face])).upper() for face in range(52)]
    rlcard = [str(_RLCARD_CARD[face]) for face in range(52)]
    _print_counts(capsys, "card mappings", "52 cards", "none (every card)", 0)
    assert expected == openspiel
    assert expected == rlcard


def test_ten_card_deadwood_matches_openspiel(capsys: pytest.CaptureFixture[str]) -> None:
    """Our least deadwood of a 10-card hand equals OpenSpiel's ``min_deadwood`` exactly."""
    seed = 20_240_610
    rng = random.Random(seed)
    hands = _uniform_hands(rng, 10, OPENSPIEL_HANDS)
    hands += _adjacent_rank_hands(rng, 10, OPENSPIEL_ADJACENT_HANDS)
    failures = [
        f"{_show(hand)}: ours {ours}, OpenSpiel {theirs}"
        for hand in hands
        if (ours := deadwood(hand, GIN_RULES, GIN_VALUES)) != (theirs := _openspiel_deadwood(hand))
    ]
    _print_counts(
        capsys,
        "OpenSpiel 10-card min_deadwood",
        f"{len(hands)} hands ({OPENSPIEL_HANDS} uniform"
        f" + {OPENSPIEL_ADJACENT_HANDS} adjacent-rank)",
        seed,
        0,
    )
    expected: list[str] = []
    assert expected == failures, _failure_report("10-card hands", failures, len(hands), seed)


def test_eleven_card_deadwood_matches_openspiel_except_the_known_case(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Our best-discard deadwood of an 11-card hand equals OpenSpiel's, or is the proven minimum
    where OpenSpiel's drop-the-highest evaluation is worse; meld-rich hands exercise that case."""
    seed = 20_240_611
    rng = random.Random(seed)
    uniform = _uniform_hands(rng, 11, OPENSPIEL_HANDS)
    adjacent = _adjacent_rank_hands(rng, 11, OPENSPIEL_ADJACENT_HANDS)
    uniform_known, uniform_failures = _eleven_card_run(uniform)
    adjacent_known, adjacent_failures = _eleven_card_run(adjacent)
    failures = uniform_failures + adjacent_failures
    _print_counts(
        capsys,
        "OpenSpiel 11-card min_deadwood",
        f"{len(uniform) + len(adjacent)} hands ({len(uniform)} uniform: {uniform_known} known;"
        f" {len(adjacent)} adjacent-rank: {adjacent_known} known)",
        seed,
        uniform_known + adjacent_known,
    )
    expected: list[str] = []
    assert expected == failures, _failure_report(
        "11-card hands", failures, len(uniform) + len(adjacent), seed
    )
    assert adjacent_known > 0, "no known case among the meld-rich hands: the path went untested"


def test_rules_example_hand_is_the_known_openspiel_case(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """RULES.md's hand: we discard 6S for 10, OpenSpiel says 12, and the test proves it known."""
    hand = parse_cards(RULES_EXAMPLE_HAND)
    comparison = compare_eleven(hand)
    card, left = best_discard(hand, GIN_RULES, GIN_VALUES)
    _print_counts(
        capsys, "RULES.md example hand", "1 hand", "none (fixed hand)", int(comparison.known_case)
    )
    expected = ("6S", 10, 12, 10)
    assert expected == (format_card(card), left, comparison.openspiel, comparison.exhaustive)
    assert comparison.known_case


# --- RLCard ---------------------------------------------------------------------------------------


def _rlcard_deadwood(hand: Sequence[Card]) -> int:
    """Deadwood of RLCard's best meld cluster of a 10-card hand."""
    cards = [_RLCARD_CARD[card_face(card)] for card in hand]
    clusters = rlcard_melding.get_best_meld_clusters(cards)
    # No meld at all gives no cluster: then every card is deadwood.
    return int(rlcard_utils.get_deadwood_count(cards, clusters[0] if clusters else []))


def _rlcard_going_out(hand: Sequence[Card]) -> frozenset[Card]:
    """RLCard's knock cards of an 11-card hand: discards leaving deadwood <= ``KNOCK_LIMIT``.

    Its knock cards include the discards that leave gin (a melded 10-card hand always holds a
    meld of 4+ cards, and dropping an end of it leaves a two-card deadwood cluster). Its gin
    cards are not compared: when all 11 cards meld it names the first card of a 4+ meld in
    frozenset order, which can be a middle card of a run (``8C 9C TC JC 8D 9D TD 8S 9S TS JS``
    names 9S, whose discard leaves 28).
    """
    cards = [_RLCARD_CARD[card_face(card)] for card in hand]
    knock_cards, _gin_cards = rlcard_judge.get_going_out_cards(cards, KNOCK_LIMIT)
    by_text = {format_card(card): card for card in hand}
    return frozenset(by_text[str(card)] for card in knock_cards)


def test_ten_card_deadwood_matches_rlcard(capsys: pytest.CaptureFixture[str]) -> None:
    """Our least deadwood of a 10-card hand equals that of RLCard's best meld cluster."""
    seed = 20_240_612
    rng = random.Random(seed)
    hands = _uniform_hands(rng, 10, RLCARD_HANDS)
    hands += _adjacent_rank_hands(rng, 10, RLCARD_ADJACENT_HANDS)
    failures = [
        f"{_show(hand)}: ours {ours}, RLCard {theirs}"
        for hand in hands
        if (ours := deadwood(hand, GIN_RULES, GIN_VALUES)) != (theirs := _rlcard_deadwood(hand))
    ]
    _print_counts(
        capsys,
        "RLCard 10-card best meld cluster",
        f"{len(hands)} hands ({RLCARD_HANDS} uniform + {RLCARD_ADJACENT_HANDS} adjacent-rank)",
        seed,
        0,
    )
    expected: list[str] = []
    assert expected == failures, _failure_report("10-card hands", failures, len(hands), seed)


def test_eleven_card_going_out_discards_match_rlcard(capsys: pytest.CaptureFixture[str]) -> None:
    """The discards leaving deadwood <= 10 by our ``discard_deadwoods`` are RLCard's knock cards."""
    seed = 20_240_613
    rng = random.Random(seed)
    hands = _uniform_hands(rng, 11, RLCARD_HANDS)
    hands += _adjacent_rank_hands(rng, 11, RLCARD_ADJACENT_HANDS)
    failures: list[str] = []
    can_go_out = 0
    for hand in hands:
        ours = frozenset(
            card
            for card, left in discard_deadwoods(hand, GIN_RULES, GIN_VALUES).items()
            if left <= KNOCK_LIMIT
        )
        theirs = _rlcard_going_out(hand)
        can_go_out += bool(ours)
        if ours != theirs:
            failures.append(
                f"{_show(hand)}: ours {_show(tuple(ours))}, RLCard {_show(tuple(theirs))}"
            )
    _print_counts(
        capsys,
        "RLCard 11-card going-out cards",
        f"{len(hands)} hands ({RLCARD_HANDS} uniform + {RLCARD_ADJACENT_HANDS} adjacent-rank;"
        f" {can_go_out} can knock or gin)",
        seed,
        0,
    )
    expected: list[str] = []
    assert expected == failures, _failure_report("11-card hands", failures, len(hands), seed)
