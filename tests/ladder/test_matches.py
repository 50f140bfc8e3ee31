"""Duplicate matches: the seat rotations, the same deals in every rotation, and the ranking."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import pytest

from bots.policies.base import Policy, find_policy
from server.engine import Dealt, Event
from server.ladder.matches import play_match, rank_totals, rotations
from server.ladder.pools import parse_pool


def test_two_players_play_both_orders() -> None:
    """2p: entrant 0 sits in seat 0 then seat 1."""
    assert [(0, 1), (1, 0)] == rotations(2)


def test_three_players_play_all_six_orders() -> None:
    """3p: every permutation of the three entrants over the seats, each once."""
    orders = rotations(3)
    assert 6 == len(orders)
    assert set(itertools.permutations((0, 1, 2))) == set(orders)


def test_four_players_play_the_four_rotations() -> None:
    """4p: the cyclic rotations, so each entrant holds each seat once."""
    assert [(0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2)] == rotations(4)


@pytest.mark.parametrize("players", [2, 3, 4])
def test_every_entrant_holds_every_seat_equally_often(players: int) -> None:
    """Over a match's rotations, each entrant sits in each seat the same number of times."""
    orders = rotations(players)
    for entrant in range(players):
        seats = Counter(order.index(entrant) for order in orders)
        assert set(range(players)) == set(seats)
        assert 1 == len(set(seats.values()))


@pytest.mark.parametrize(
    ("pool", "specs"),
    [
        ("gin-2", ["random", "greedy"]),
        ("knock-2", ["greedy", "heuristic"]),
        ("rummy500-3", ["random", "greedy", "simple"]),
        ("ramino-4", ["random", "greedy", "simple", "heuristic"]),
    ],
)
def test_every_rotation_is_dealt_the_same_cards(pool: str, specs: list[str]) -> None:
    """Each rotation's game sees the same deal (dealer and deck order), so the cards seat ``s``
    holds are the same in every rotation, and entrant ``e`` holds seat ``order.index(e)``'s."""
    deals: dict[int, list[Event]] = {}

    def watch(rotation: int, event: Event) -> None:
        if isinstance(event, Dealt):
            deals.setdefault(rotation, []).append(event)

    rules = parse_pool(pool).rules()
    outcome = play_match(rules, specs, "deal-test", watch)
    orders = rotations(rules.players)
    assert sorted(range(len(orders))) == sorted(deals)
    first = deals[0]
    assert 1 == len(first)
    for rotation in range(len(orders)):
        assert first == deals[rotation]
    assert orders == [game.order for game in outcome.games]


def test_a_different_seed_deals_differently() -> None:
    """The deal comes from the match's seed: two seeds, two decks."""
    seen: dict[str, Dealt] = {}
    rules = parse_pool("knock-2").rules()
    for seed in ("a", "b"):

        def watch(_rotation: int, event: Event, seed: str = seed) -> None:
            if isinstance(event, Dealt):
                seen.setdefault(seed, event)

        play_match(rules, ["random", "random"], seed, watch)
    assert seen["a"].order != seen["b"].order


def test_totals_add_each_entrants_seats_over_the_rotations() -> None:
    """An entrant's win share and points are the sums over the seats it held."""
    rules = parse_pool("rummy500-3").rules()
    outcome = play_match(rules, ["random", "greedy", "heuristic"], "totals")
    for entrant in range(3):
        wins = sum(game.wins[game.order.index(entrant)] for game in outcome.games)
        points = sum(game.points[game.order.index(entrant)] for game in outcome.games)
        assert wins == outcome.wins[entrant]
        assert points == outcome.points[entrant]
    # Every game's win shares add up to one hand won (or split).
    assert Fraction(len(outcome.games)) == sum(outcome.wins)


def test_ranks_are_by_wins_then_points_with_shared_ranks() -> None:
    """Competition ranking: more wins first, then more points (fewer under penalty scoring);
    equal totals share the better rank and the next rank is skipped."""
    wins = [Fraction(2), Fraction(3), Fraction(2), Fraction(1)]
    points = [Fraction(40), Fraction(10), Fraction(40), Fraction(90)]
    assert (2, 1, 2, 4) == rank_totals(wins, points, penalty=False)
    points = [Fraction(50), Fraction(10), Fraction(40), Fraction(90)]
    assert (2, 1, 3, 4) == rank_totals(wins, points, penalty=False)
    assert (3, 1, 2, 4) == rank_totals(wins, points, penalty=True)


def test_a_match_makes_its_policies_with_the_given_factory() -> None:
    """``make`` builds every seat's policy of every rotation: two seats, two orders, four
    policies, each entrant's spec twice."""
    made: list[str] = []

    def make(name: str) -> Policy:
        made.append(name)
        return find_policy(name)

    play_match(parse_pool("gin-2").rules(), ["random", "greedy"], "factory", make=make)
    assert ["greedy", "greedy", "random", "random"] == sorted(made)
