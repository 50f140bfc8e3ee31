"""The ladder as one static HTML page: per pool, the standings, each entrant's rating over time
(an inline SVG plot) and the head-to-head scores.

``render_html`` takes the document of ``ramino ladder export`` (``commands.export_json``), so
the page shows exactly the numbers of the JSON export: the standings table the rows of
``standings[pool]``, the plot the ordinal (``mu - 3 sigma``) of each entrant after each of its
results in ``matches``, the head-to-head table the rows of ``head_to_head[pool]``. No script:
the page is plain HTML and SVG, written out by ``ramino ladder export --html FILE`` and served
at ``/ladder`` by ``ramino serve --web`` when the server runs a ladder.
"""

from __future__ import annotations

import html
import time
from typing import Any

__all__ = ["PLOT_HEIGHT", "PLOT_WIDTH", "rating_series", "render_html"]

PLOT_WIDTH = 640
PLOT_HEIGHT = 260
_MARGIN = 40
_COLOURS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td.entrant, td.first, td.second { text-align: left; }
svg { border: 1px solid #ccc; background: #fff; }
.axis { stroke: #888; stroke-width: 1; }
.label { font-size: 11px; fill: #555; }
"""


def rating_series(document: dict[str, Any], pool: str) -> dict[str, list[tuple[int, float]]]:
    """Per entrant of ``pool``: (result number in the pool, from 1; ordinal after it) for each
    of its results, in log order."""
    series: dict[str, list[tuple[int, float]]] = {}
    number = 0
    for match in document["matches"]:
        if match["pool"] != pool:
            continue
        number += 1
        for index, name in enumerate(match["entrants"]):
            ordinal = match["mu"][index] - 3 * match["sigma"][index]
            series.setdefault(name, []).append((number, ordinal))
    return series


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _plot(pool: str, series: dict[str, list[tuple[int, float]]]) -> str:
    if not series:
        return "<p>No results yet.</p>"
    last = max(point[0] for points in series.values() for point in points)
    values = [point[1] for points in series.values() for point in points]
    low, high = min(values), max(values)
    if high - low < 1e-9:
        low, high = low - 1, high + 1
    width, height = PLOT_WIDTH - 2 * _MARGIN, PLOT_HEIGHT - 2 * _MARGIN

    def x(number: int) -> float:
        return _MARGIN + (width * (number - 1) / (last - 1) if last > 1 else width / 2)

    def y(ordinal: float) -> float:
        return _MARGIN + height * (high - ordinal) / (high - low)

    parts = [
        f'<svg class="ratings" data-pool="{_e(pool)}" xmlns="http://www.w3.org/2000/svg"'
        f' width="{PLOT_WIDTH}" height="{PLOT_HEIGHT + 18 * len(series)}"'
        f' viewBox="0 0 {PLOT_WIDTH} {PLOT_HEIGHT + 18 * len(series)}" role="img">',
        f"<title>{_e(pool)}: rating (mu - 3 sigma) after each result</title>",
        f'<line class="axis" x1="{_MARGIN}" y1="{_MARGIN + height}"'
        f' x2="{_MARGIN + width}" y2="{_MARGIN + height}"/>',
        f'<line class="axis" x1="{_MARGIN}" y1="{_MARGIN}" x2="{_MARGIN}"'
        f' y2="{_MARGIN + height}"/>',
        f'<text class="label" x="{_MARGIN}" y="{_MARGIN - 6}">{high:.2f}</text>',
        f'<text class="label" x="{_MARGIN}" y="{_MARGIN + height + 14}">{low:.2f}'
        f" (results 1 to {last})</text>",
    ]
    for index, (name, points) in enumerate(sorted(series.items())):
        colour = _COLOURS[index % len(_COLOURS)]
        coordinates = " ".join(f"{x(number):.1f},{y(ordinal):.1f}" for number, ordinal in points)
        shown = " ".join(f"{ordinal:.3f}" for _, ordinal in points)
        parts.append(
            f'<polyline data-entrant="{_e(name)}" data-ordinals="{shown}" fill="none"'
            f' stroke="{colour}" stroke-width="1.5" points="{coordinates}">'
            f"<title>{_e(name)}: {points[-1][1]:.2f} after {len(points)} results</title>"
            "</polyline>"
        )
        legend_y = PLOT_HEIGHT + 18 * index + 4
        parts.append(
            f'<rect x="{_MARGIN}" y="{legend_y}" width="12" height="12" fill="{colour}"/>'
            f'<text class="label" x="{_MARGIN + 18}" y="{legend_y + 10}">{_e(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _standings(rows: list[dict[str, Any]], min_matches: int) -> str:
    head = (
        "<tr><th>#</th><th>entrant</th><th>mu - 3 sigma</th><th>mu</th><th>sigma</th>"
        "<th>matches</th><th>win share</th><th>forfeits</th><th>listed</th></tr>"
    )
    body = [
        f'<tr data-entrant="{_e(row["entrant"])}">'
        f'<td class="rank">{row["rank"]}</td>'
        f'<td class="entrant">{_e(row["entrant"])}</td>'
        f'<td class="ordinal">{row["ordinal"]:.3f}</td>'
        f'<td class="mu">{row["mu"]:.3f}</td>'
        f'<td class="sigma">{row["sigma"]:.3f}</td>'
        f'<td class="matches">{row["matches"]}</td>'
        f'<td class="win_share">{row["win_share"]:.4f}</td>'
        f'<td class="forfeits">{row["forfeits"]}</td>'
        f'<td class="listed">{"yes" if row["matches"] >= min_matches else "no"}</td></tr>'
        for row in rows
    ]
    return f'<table class="standings">{head}{"".join(body)}</table>'


def _head_to_head(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>No shared matches yet.</p>"
    head = (
        "<tr><th>entrant</th><th>against</th><th>matches</th><th>score</th>"
        "<th>95% interval</th><th>better (95%)</th></tr>"
    )
    body = [
        f'<tr><td class="first">{_e(row["first"])}</td>'
        f'<td class="second">{_e(row["second"])}</td>'
        f'<td class="matches">{row["matches"]}</td>'
        f'<td class="score">{row["score"]:.4f}</td>'
        f'<td class="ci95">{row["ci95"][0]:.4f} - {row["ci95"][1]:.4f}</td>'
        f'<td class="better">{"yes" if row["better_95"] else "no"}</td></tr>'
        for row in rows
    ]
    return f'<table class="head-to-head">{head}{"".join(body)}</table>'


def render_html(document: dict[str, Any], now: float | None = None) -> str:
    """The page of the export ``document`` (see the module docstring)."""
    name = document["ladder"]
    min_matches = document["min_matches"]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() if now is None else now))
    pools = list(document["pools"]) + [
        pool for pool in document["standings"] if pool not in document["pools"]
    ]
    sections = []
    for pool in pools:
        rows = document["standings"].get(pool, [])
        sections.append(
            f'<section class="pool" id="pool-{_e(pool)}" data-pool="{_e(pool)}">'
            f"<h2>{_e(pool)}</h2>"
            f"<h3>Standings</h3>{_standings(rows, min_matches)}"
            f"<h3>Rating over time</h3>{_plot(pool, rating_series(document, pool))}"
            f"<h3>Head to head</h3>"
            f"<p>Score: 1 for a better rank in a shared match, 0.5 for a tie.</p>"
            f"{_head_to_head(document['head_to_head'].get(pool, []))}"
            "</section>"
        )
    suspended = [entrant for entrant in document["entrants"] if entrant["suspended_until"]]
    notes = "".join(
        f"<li>{_e(entrant['name'])} is suspended: {_e(entrant['suspended_for'])}</li>"
        for entrant in suspended
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Ladder {_e(name)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Ladder {_e(name)}</h1>"
        f'<p class="summary">{document["results"]} results, {len(document["pending"])}'
        f" pending, {document['cancelled']} cancelled; entrants are listed after"
        f" {min_matches} matches. Written {stamp}.</p>"
        f"{f'<ul>{notes}</ul>' if notes else ''}"
        f"{''.join(sections)}"
        "</body></html>\n"
    )
