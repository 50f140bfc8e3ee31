"""The rating update follows Weng and Lin's Plackett-Luce update (JMLR 12, 2011, Algorithm 4)
as OpenSkill documents it: each update first widens sigma by tau, then moves mu by omega and
shrinks sigma by delta, with gamma = sigma / c."""

from __future__ import annotations

import math

import pytest

from server.ladder.events import MatchResult
from server.ladder.ratings import Rating, prior, refit, update

MU = 25.0
SIGMA = 25.0 / 3
BETA = 25.0 / 6
TAU = 25.0 / 300
KAPPA = 0.0001


def _reference(ratings: list[Rating], ranks: list[int]) -> list[Rating]:
    """Algorithm 4 of the paper for single-player teams, written from its formulas:
    c = sqrt(sum(sigma_i^2 + beta^2)); C_q = sum of exp(mu_s / c) over s ranked no better
    than q; A_q = how many share q's rank;
    omega_i = sigma_i^2 / c * sum over q ranked no worse than i of (1[i=q] - p_iq) / A_q,
    delta_i = gamma_i sigma_i^2 / c^2 * sum of p_iq (1 - p_iq) / A_q, with p_iq =
    exp(mu_i / c) / C_q; then mu += omega, sigma *= sqrt(max(1 - delta, kappa))."""
    widened = [Rating(r.mu, math.sqrt(r.sigma**2 + TAU**2)) for r in ratings]
    c = math.sqrt(sum(r.sigma**2 + BETA**2 for r in widened))
    big_c = [sum(math.exp(s.mu / c) for s, rs in zip(widened, ranks) if rs >= rq) for rq in ranks]
    a = [ranks.count(rq) for rq in ranks]
    result = []
    for i, (rating, rank_i) in enumerate(zip(widened, ranks)):
        omega = 0.0
        delta = 0.0
        for q, rank_q in enumerate(ranks):
            if rank_q > rank_i:
                continue
            p = math.exp(rating.mu / c) / big_c[q]
            omega += ((1.0 if i == q else 0.0) - p) / a[q]
            delta += p * (1 - p) / a[q]
        sigma2 = rating.sigma**2
        gamma = rating.sigma / c
        mu = rating.mu + sigma2 / c * omega
        sigma = rating.sigma * math.sqrt(max(1 - gamma * sigma2 / c**2 * delta, KAPPA))
        result.append(Rating(mu, sigma))
    return result


def test_two_players_by_hand() -> None:
    """Equal priors, one winner: p = 1/2, so the winner gains sigma'^2 / (2c) and the loser
    loses as much, sigma'^2 = (25/3)^2 + (25/300)^2 and c = sqrt(2 (sigma'^2 + (25/6)^2));
    both sigmas shrink by sqrt(1 - (sigma'/c) sigma'^2/c^2 / 4)."""
    sigma2 = SIGMA**2 + TAU**2
    c = math.sqrt(2 * (sigma2 + BETA**2))
    gain = sigma2 / (2 * c)
    shrunk = math.sqrt(sigma2) * math.sqrt(1 - math.sqrt(sigma2) / c * sigma2 / c**2 / 4)
    winner, loser = update([prior(), prior()], [1, 2])
    assert MU + gain == pytest.approx(winner.mu, abs=1e-9)
    assert MU - gain == pytest.approx(loser.mu, abs=1e-9)
    assert shrunk == pytest.approx(winner.sigma, abs=1e-9)
    assert shrunk == pytest.approx(loser.sigma, abs=1e-9)
    assert 27.6354 == pytest.approx(winner.mu, abs=1e-4)


def test_two_players_tied_keep_their_means() -> None:
    """A tie between equal ratings moves neither mean, and both grow more certain."""
    first, second = update([prior(), prior()], [1, 1])
    assert MU == pytest.approx(first.mu, abs=1e-9)
    assert MU == pytest.approx(second.mu, abs=1e-9)
    assert first.sigma < SIGMA
    assert first.sigma == pytest.approx(second.sigma, abs=1e-12)


@pytest.mark.parametrize(
    ("ratings", "ranks"),
    [
        ([prior(), prior(), prior()], [1, 2, 3]),
        ([Rating(30.0, 5.0), Rating(25.0, 8.0), Rating(20.0, 3.0)], [3, 1, 2]),
        ([Rating(28.0, 6.0), Rating(22.0, 7.0), Rating(26.0, 4.0), Rating(25, 8)], [2, 4, 1, 3]),
    ],
)
def test_more_players_match_the_paper(ratings: list[Rating], ranks: list[int]) -> None:
    """Three and four players with distinct ranks: the update is Algorithm 4's."""
    expected = _reference(ratings, ranks)
    actual = update(ratings, ranks)
    for want, got in zip(expected, actual):
        assert want.mu == pytest.approx(got.mu, abs=1e-9)
        assert want.sigma == pytest.approx(got.sigma, abs=1e-9)


def test_three_players_by_hand() -> None:
    """Equal priors, ranks 1-2-3: omega is (1 - 1/3), (-1/3 + 1/2) and (-1/3 - 1/2) times
    sigma'^2 / c with c = sqrt(3 (sigma'^2 + beta^2))."""
    sigma2 = SIGMA**2 + TAU**2
    c = math.sqrt(3 * (sigma2 + BETA**2))
    first, second, third = update([prior(), prior(), prior()], [1, 2, 3])
    assert MU + sigma2 / c * (2 / 3) == pytest.approx(first.mu, abs=1e-9)
    assert MU + sigma2 / c * (1 / 6) == pytest.approx(second.mu, abs=1e-9)
    assert MU - sigma2 / c * (5 / 6) == pytest.approx(third.mu, abs=1e-9)


def test_ordinal_is_mu_less_three_sigma() -> None:
    """The leaderboard's number."""
    assert 30.0 - 3 * 2.5 == Rating(30.0, 2.5).ordinal


def _result(match: str, pool: str, names: tuple[str, ...], ranks: tuple[int, ...]) -> MatchResult:
    n = len(names)
    return MatchResult(
        match, pool, names, n, (0.0,) * n, (0.0,) * n, ranks, (0.0,) * n, (0.0,) * n, 0.0, 0.0
    )


def test_refit_rates_each_pool_apart_in_order() -> None:
    """The refit chains updates per pool: a result in another pool does not move a rating."""
    results = [
        _result("m1", "gin-2", ("a", "b"), (1, 2)),
        _result("m2", "knock-2", ("a", "b"), (2, 1)),
        _result("m3", "gin-2", ("b", "a"), (1, 2)),
    ]
    fitted = refit(results)
    a1, b1 = update([prior(), prior()], [1, 2])
    b3, a3 = update([b1, a1], [1, 2])
    b2, a2 = update([prior(), prior()], [1, 2])
    assert a3 == fitted[("gin-2", "a")]
    assert b3 == fitted[("gin-2", "b")]
    assert a2 == fitted[("knock-2", "a")]
    assert b2 == fitted[("knock-2", "b")]
