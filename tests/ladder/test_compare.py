"""``ramino ladder compare A B``: the SPRT of ``ramino duel --sprt`` over the matches A and B
shared, checked against LLRs worked out by hand.

The log below holds these results (A = ``greedy@1``, B = ``simple@1``, C = ``random@1``):

| match | pool | ranks | A's score against B |
| --- | --- | --- | --- |
| m1-m4 | gin-2 | A 1, B 2 | 1 each |
| m5 | gin-2 | A 1, B 1 (tie) | 0.5 |
| m6 | gin-2 | A 2, B 1 | 0 |
| m7 | gin-2 | A 1, C 2 | (B absent: not shared) |
| m8 | rummy500-3 | A 2, B 3, C 1 | 1 (better rank than B, though not first) |
| m9 | rummy500-3 | A 1, B 2, C 3 | 1 |

The SPRT (bots/duel.py): s(elo) = 1 / (1 + 10^(-elo/400)), so s(0) = 0.5,
s(50) = 1 / (1 + 10^-0.125) = 1 / 1.7498942 = 0.5714631, s(100) = 1 / (1 + 10^-0.25) =
1 / 1.5623413 = 0.6400650; LLR = n (s1 - s0) (2 mean - s0 - s1) / (2 variance), the variance
being the population variance of the scores; bounds log(beta / (1 - alpha)) and
log((1 - beta) / alpha): +-log(19) = +-2.9444390 for 0.05, +-log(9) = +-2.1972246 for 0.1.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from server.cli import main
from server.ladder.events import EntrantAdded, MatchResult, MatchScheduled
from server.ladder.service import Ladder
from server.tables.store import open_store

A, B, C = "greedy@1", "simple@1", "random@1"

_RESULTS: tuple[tuple[str, tuple[str, ...], tuple[int, ...]], ...] = (
    ("gin-2", (A, B), (1, 2)),
    ("gin-2", (B, A), (2, 1)),
    ("gin-2", (A, B), (1, 2)),
    ("gin-2", (A, B), (1, 2)),
    ("gin-2", (A, B), (1, 1)),
    ("gin-2", (A, B), (2, 1)),
    ("gin-2", (A, C), (1, 2)),
    ("rummy500-3", (A, B, C), (2, 3, 1)),
    ("rummy500-3", (C, B, A), (3, 2, 1)),
)


async def _write(url: str) -> None:
    store = await open_store(url)
    try:
        ladder = await Ladder.open(store, "main")
        await ladder.append(*(EntrantAdded(name, "builtin", name, 0.0) for name in (A, B, C)))
        for number, (pool, names, ranks) in enumerate(_RESULTS, 1):
            match_id = f"m{number}"
            count = len(names)
            await ladder.append(
                MatchScheduled(match_id, pool, names, f"s:{match_id}", 0.0),
                MatchResult(
                    match_id=match_id,
                    pool=pool,
                    entrants=names,
                    games=count,
                    wins=(0.0,) * count,
                    points=(0.0,) * count,
                    ranks=ranks,
                    mu=(25.0,) * count,
                    sigma=(8.0,) * count,
                    seconds=0.1,
                    at=0.0,
                ),
            )
    finally:
        await store.close()


@pytest.fixture
def ladder_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'compare.db'}"
    asyncio.run(_write(url))
    return url


def _compare(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> dict[str, object]:
    assert 0 == main(["ladder", "compare", "--store", url, "--json", *argv])
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_every_pool_h1_at_elo1_100(ladder_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A against B in every pool: scores 1, 1, 1, 1, 0.5, 0, 1, 1 (m1-m6, m8, m9).
    n = 8, mean = 6.5 / 8 = 0.8125; variance = (6 x 0.1875^2 + 0.3125^2 + 0.8125^2) / 8
    = (0.2109375 + 0.0976563 + 0.6601563) / 8 = 0.96875 / 8 = 0.1210938.
    elo0 0, elo1 100: LLR = 8 x 0.1400650 x (1.625 - 1.1400650) / 0.2421875
    = 8 x 0.1400650 x 0.4849350 / 0.2421875 = 0.5433793 / 0.2421875 = 2.2436; with
    alpha = beta = 0.1 the upper bound is log 9 = 2.1972: H1."""
    data = _compare(
        capsys, ladder_url, A, B, "--elo0", "0", "--elo1", "100", "--alpha", "0.1", "--beta", "0.1"
    )
    assert 8 == data["matches"]
    assert 0.8125 == data["score"]
    assert 2.2436 == pytest.approx(data["llr"], abs=1e-3)
    assert [-2.1972, 2.1972] == data["bounds"]
    assert "H1" == data["verdict"]


def test_defaults_continue(ladder_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The same scores with the defaults (elo0 0, elo1 50, alpha = beta = 0.05):
    LLR = 8 x 0.0714631 x (1.625 - 1.0714631) / 0.2421875 = 8 x 0.0714631 x 0.5535369
    / 0.2421875 = 0.3164602 / 0.2421875 = 1.3067, inside +-2.9444: continue."""
    data = _compare(capsys, ladder_url, A, B)
    assert (0.0, 50.0, 0.05, 0.05) == (data["elo0"], data["elo1"], data["alpha"], data["beta"])
    assert 1.3067 == pytest.approx(data["llr"], abs=1e-3)
    assert [-2.9444, 2.9444] == data["bounds"]
    assert "continue" == data["verdict"]


def test_one_pool(ladder_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Only gin-2: scores 1, 1, 1, 1, 0.5, 0 (m7 is not shared). n = 6, mean = 4.5 / 6 = 0.75;
    variance = (4 x 0.0625 + 0.0625 + 0.5625) / 6 = 0.875 / 6 = 0.1458333.
    elo0 0, elo1 100: LLR = 6 x 0.1400650 x (1.5 - 1.1400650) / 0.2916667
    = 6 x 0.1400650 x 0.3599350 / 0.2916667 = 0.3024857 / 0.2916667 = 1.0371: continue
    (bounds +-2.1972 at 0.1)."""
    data = _compare(
        capsys,
        ladder_url,
        A,
        B,
        "--pool",
        "gin-2",
        "--elo1",
        "100",
        "--alpha",
        "0.1",
        "--beta",
        "0.1",
    )
    assert (6, 0.75, "gin-2") == (data["matches"], data["score"], data["pool"])
    assert 1.0371 == pytest.approx(data["llr"], abs=1e-3)
    assert "continue" == data["verdict"]


def test_the_other_way_round_h0(ladder_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """B against A: scores 0, 0, 0, 0, 0.5, 1, 0, 0; mean 1.5 / 8 = 0.1875, the same
    variance 0.1210938. elo0 0, elo1 100: LLR = 8 x 0.1400650 x (0.375 - 1.1400650)
    / 0.2421875 = -8 x 0.1400650 x 0.7650650 / 0.2421875 = -0.8572696 / 0.2421875 = -3.5397,
    below -2.1972 (alpha = beta = 0.1): H0."""
    data = _compare(capsys, ladder_url, B, A, "--elo1", "100", "--alpha", "0.1", "--beta", "0.1")
    assert 0.1875 == data["score"]
    assert -3.5397 == pytest.approx(data["llr"], abs=1e-3)
    assert "H0" == data["verdict"]


def test_text_output_names_llr_bounds_and_verdict(
    ladder_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert 0 == main(["ladder", "compare", "--store", ladder_url, A, B])
    out = capsys.readouterr().out
    assert "8 shared matches, score 0.8125" in out
    assert "LLR 1.307, bounds [-2.944, 2.944]" in out
    assert "continue" in out


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        ((A, "nobody@1"), "ladder/unknown_entrant"),
        ((A, A), "ladder/bad_arguments"),
        ((A, B, "--elo0", "50", "--elo1", "0"), "ladder/bad_arguments"),
    ],
)
def test_refusals_name_a_code(
    ladder_url: str, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], code: str
) -> None:
    assert 2 == main(["ladder", "compare", "--store", ladder_url, *argv])
    assert code in capsys.readouterr().err
