"""``ramino ladder export --html``: the leaderboard page shows the numbers of the JSON export,
and ``ramino serve --web --ladder`` serves it at ``/ladder``."""

from __future__ import annotations

import asyncio
import itertools
import json
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from server.cli import main
from server.net.serve import ServeConfig, running
from tests.ladder.conftest import enter
from tests.ladder.test_commands import _fill


class _Page(HTMLParser):
    """The cells of the page's tables (by the class of each cell) and its polylines, per
    pool section."""

    def __init__(self) -> None:
        super().__init__()
        self.pools: dict[str, dict[str, Any]] = {}
        self._pool = ""
        self._table = ""
        self._row: dict[str, str] | None = None
        self._cell = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {key: value or "" for key, value in attrs}
        if tag == "section" and "data-pool" in found:
            self._pool = found["data-pool"]
            self.pools[self._pool] = {"standings": [], "head-to-head": [], "lines": {}}
        elif tag == "table":
            self._table = found.get("class", "")
        elif tag == "tr":
            self._row = {}
        elif tag == "td" and self._row is not None:
            self._cell = found.get("class", "")
            self._row[self._cell] = ""
        elif tag == "polyline":
            points = [tuple(map(float, pair.split(","))) for pair in found["points"].split()]
            ordinals = [float(value) for value in found["data-ordinals"].split()]
            self.pools[self._pool]["lines"][found["data-entrant"]] = (points, ordinals)

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._row:
            self.pools[self._pool][self._table].append(self._row)
        if tag == "tr":
            self._row = None
        elif tag == "td":
            self._cell = ""
        elif tag == "table":
            self._table = ""

    def handle_data(self, data: str) -> None:
        if self._row is not None and self._cell:
            self._row[self._cell] += data


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert 0 == main(list(argv))
    return capsys.readouterr().out


def test_the_html_page_shows_the_numbers_of_the_json_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per pool: each standings row is the export's row (rounded as printed), each entrant's
    line has one point per result with the ordinal ``mu - 3 sigma`` after it, placed higher
    for a higher ordinal, and the head-to-head table is the export's."""
    url = f"sqlite:///{tmp_path / 'ladder.db'}"
    asyncio.run(_fill(url))  # 40 scripted results in knock-2 and rummy500-3
    page_file, json_file = tmp_path / "ladder.html", tmp_path / "ladder.json"
    _run(capsys, "ladder", "export", "--store", url, "--html", str(page_file))
    _run(capsys, "ladder", "export", "--store", url, "--output", str(json_file))
    document = json.loads(json_file.read_text())
    page = _Page()
    page.feed(page_file.read_text())
    assert {"knock-2", "rummy500-3"} == set(page.pools)
    for pool, shown in page.pools.items():
        expected = [
            {
                "rank": str(row["rank"]),
                "entrant": row["entrant"],
                "ordinal": f"{row['ordinal']:.3f}",
                "mu": f"{row['mu']:.3f}",
                "sigma": f"{row['sigma']:.3f}",
                "matches": str(row["matches"]),
                "win_share": f"{row['win_share']:.4f}",
                "forfeits": str(row["forfeits"]),
                "listed": "yes" if row["matches"] >= document["min_matches"] else "no",
            }
            for row in document["standings"][pool]
        ]
        assert expected == shown["standings"]
        # The ordinals after each result of each entrant, from the export's results.
        history: dict[str, list[float]] = {}
        for match in document["matches"]:
            if match["pool"] == pool:
                for index, name in enumerate(match["entrants"]):
                    history.setdefault(name, []).append(
                        match["mu"][index] - 3 * match["sigma"][index]
                    )
        assert set(history) == set(shown["lines"])
        for name, ordinals in history.items():
            points, printed = shown["lines"][name]
            assert [round(value, 3) for value in ordinals] == printed
            assert len(points) == len(ordinals)
            row = next(row for row in document["standings"][pool] if row["entrant"] == name)
            assert row["matches"] == len(points)
            assert row["ordinal"] == pytest.approx(ordinals[-1], abs=1e-3)
        # Higher on the plot (smaller y) means a higher ordinal, across every line.
        placed = sorted(
            (ordinal, point[1])
            for points, ordinals in shown["lines"].values()
            for point, ordinal in zip(points, ordinals)
        )
        for (low, low_y), (high, high_y) in itertools.pairwise(placed):
            assert high_y <= low_y + 0.1 or high - low < 1e-3
        expected_h2h = [
            {
                "first": row["first"],
                "second": row["second"],
                "matches": str(row["matches"]),
                "score": f"{row['score']:.4f}",
                "ci95": f"{row['ci95'][0]:.4f} - {row['ci95'][1]:.4f}",
                "better": "yes" if row["better_95"] else "no",
            }
            for row in document["head_to_head"][pool]
        ]
        assert expected_h2h == shown["head-to-head"]


async def test_serve_with_a_ladder_serves_the_page_at_slash_ladder(tmp_path: Path) -> None:
    """``ramino serve --web ... --ladder main``: GET /ladder is the ladder's page as it is
    now, with its pool's section and the entrants that have played."""
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    await enter(url, ["random@1", "greedy@1"])
    config = ServeConfig(
        broker="embedded",
        port=0,
        store=url,
        guests=":memory:",
        web="127.0.0.1:0",
        ladder="main",
        ladder_pools="gin-2",
    )
    async with running(config) as server:
        assert server.ladder is not None
        async with asyncio.timeout(120):
            await server.ladder.ladder.wait_until(lambda state: len(state.results) >= 1)
        body = await asyncio.to_thread(_get, f"{server.web_url}ladder")
    page = _Page()
    page.feed(body)
    assert ["gin-2"] == list(page.pools)
    rows = page.pools["gin-2"]["standings"]
    assert {"random@1", "greedy@1"} == {row["entrant"] for row in rows}
    assert set(page.pools["gin-2"]["lines"]) == {"random@1", "greedy@1"}


def _get(address: str) -> str:
    with urllib.request.urlopen(address, timeout=30) as response:
        assert "text/html; charset=utf-8" == response.headers["Content-Type"]
        text: str = response.read().decode()
        return text
