"""Head-to-head scores and when a pool's order settled."""

from __future__ import annotations

import pytest

from server.ladder.events import MatchResult
from server.ladder.stats import head_to_head, settling


def _result(match: str, names: tuple[str, ...], ranks: tuple[int, ...]) -> MatchResult:
    n = len(names)
    zeros = (0.0,) * n
    return MatchResult(match, "p-3", names, n, zeros, zeros, ranks, zeros, zeros, 0.0, 0.0)


def test_head_to_head_scores_every_pair_of_a_match() -> None:
    """A 3-player match compares each pair: a better rank scores 1, a shared one 0.5."""
    results = [
        _result("m1", ("a", "b", "c"), (1, 2, 2)),
        _result("m2", ("b", "a", "c"), (1, 2, 3)),
    ]
    rows = {(row.first, row.second): row for row in head_to_head(results, "p-3")}
    assert 0.5 == rows[("a", "b")].score
    assert 2 == rows[("a", "b")].matches
    assert 0.75 == rows[("b", "c")].score
    assert 1.0 == rows[("a", "c")].score
    assert 0.0 == rows[("c", "a")].score
    assert [] == head_to_head(results, "other-2")


def test_head_to_head_is_better_only_with_confidence() -> None:
    """Twenty wins out of twenty is better with 95% confidence; one out of one is not."""
    many = [_result(f"m{i}", ("a", "b", "c"), (1, 2, 3)) for i in range(20)]
    rows = {(row.first, row.second): row for row in head_to_head(many, "p-3")}
    assert rows[("a", "b")].better
    assert not rows[("b", "a")].better
    one = {(r.first, r.second): r for r in head_to_head(many[:1], "p-3")}
    assert not one[("a", "b")].better


def test_settling_counts_results_until_the_order_stops_changing() -> None:
    """``c`` wins the first two matches, then ``a`` wins from then on: the order settles at
    the first result after which it stays the final one."""
    results = [
        _result("m1", ("a", "b", "c"), (3, 2, 1)),
        _result("m2", ("a", "b", "c"), (3, 2, 1)),
    ] + [_result(f"m{i}", ("a", "b", "c"), (1, 2, 3)) for i in range(3, 13)]
    settled = settling(results, "p-3")
    assert ("a", "b", "c") == settled.order
    assert 12 == settled.results
    orders = [settling(results[:n], "p-3").order for n in range(1, 13)]
    first_final = next(n for n in range(12) if all(o == settled.order for o in orders[n:]))
    assert first_final + 1 == settled.settled_after
    assert 3 * settled.settled_after == settled.games
    assert 2 < settled.settled_after


@pytest.mark.parametrize("pool", ["p-3", "none-2"])
def test_settling_of_an_empty_or_unknown_pool(pool: str) -> None:
    """No result: nothing settled."""
    assert 0 == settling([], pool).results
