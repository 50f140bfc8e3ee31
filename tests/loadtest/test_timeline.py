"""The soak timeline's arithmetic: slopes, percentiles and the trend of a hand-made series."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from loadtest.timeline import FIELDS, Window, main, percentile, slope_per_hour, trend


def test_slope_of_a_straight_line_is_its_rise_per_hour() -> None:
    # 100 MiB at t=0, +2 MiB every 10 minutes (600 s): 12 MiB an hour.
    points = [(600.0 * k, 100.0 + 2.0 * k) for k in range(7)]
    assert slope_per_hour(points) == pytest.approx(12.0)


def test_slope_of_a_noisy_flat_series_is_zero() -> None:
    # Symmetric noise around 50 at t = 0, 10, 20, 30: the least-squares line is flat.
    # mean t = 15; sum (t - 15)(v - 50) = (-15)(1) + (-5)(-1) + (5)(-1) + (15)(1) = 0.
    points = [(0.0, 51.0), (10.0, 49.0), (20.0, 49.0), (30.0, 51.0)]
    assert slope_per_hour(points) == pytest.approx(0.0)


def test_slope_by_hand_on_three_points() -> None:
    # t = 0, 1800, 3600 s; v = 10, 13, 13. mean t = 1800, mean v = 12.
    # sum (t - mean)(v - mean) = (-1800)(-2) + 0 + (1800)(1) = 5400;
    # sum (t - mean)^2 = 2 * 1800^2 = 6,480,000; slope = 5400 / 6,480,000 per s = 3 per hour.
    assert slope_per_hour([(0.0, 10.0), (1800.0, 13.0), (3600.0, 13.0)]) == pytest.approx(3.0)


def test_slope_leaves_out_missing_values_and_needs_two_points() -> None:
    assert slope_per_hour([(0.0, 1.0), (60.0, math.nan), (3600.0, 2.0)]) == pytest.approx(1.0)
    assert math.isnan(slope_per_hour([(0.0, 1.0)]))
    assert math.isnan(slope_per_hour([(5.0, 1.0), (5.0, 2.0)]))


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1 .. 100
    assert percentile(values, 0.99) == 99.0  # rank ceil(0.99 * 100) = 99
    assert percentile(values, 0.5) == 50.0
    assert percentile([7.0], 0.99) == 7.0
    assert math.isnan(percentile([], 0.5))


def test_a_window_row_counts_its_commands_and_the_server_cpu_share() -> None:
    window = Window(started=100.0)
    window.latencies_ms.extend([10.0, 20.0, 30.0, 40.0])
    first = window.row(110.0, 10.0, 8, 64 * 2**20, 5.0)
    # 4 commands in 10 s; p50 rank 2 = 20 ms, p99 rank 4 = 40 ms; no CPU share without a
    # previous reading.
    assert first["commands"] == "4"
    assert first["commands_per_s"] == "0.4"
    assert (first["p50_ms"], first["p99_ms"]) == ("20.0", "40.0")
    assert first["server_rss_mib"] == "64.0"
    assert first["server_cpu_pct"] == ""
    second = window.row(120.0, 20.0, 8, math.nan, 7.5)
    # 2.5 CPU seconds over 10 s: 25%; no command in the window, no RSS read.
    assert second["server_cpu_pct"] == "25.0"
    assert second["commands"] == "0"
    assert (second["p99_ms"], second["server_rss_mib"]) == ("", "")


def test_a_window_row_carries_the_server_sqlite_and_python_bytes() -> None:
    window = Window(started=0.0)
    row = window.row(10.0, 10.0, 2, 64 * 2**20, 1.0, 5 * 2**20, 2**19)
    assert (row["server_sqlite_mib"], row["server_traced_mib"]) == ("5.0", "0.5")
    empty = window.row(20.0, 20.0, 2, 64 * 2**20, 2.0)  # not read: empty cells
    assert (empty["server_sqlite_mib"], empty["server_traced_mib"]) == ("", "")


def test_the_trend_sets_the_resident_memory_less_sqlite_apart() -> None:
    # RSS 100 MiB + 2 MiB a minute, of which SQLite's caches 10 MiB + 2 MiB a minute: the
    # rest is flat at 90 MiB (slope 0), SQLite's slope 120 MiB/h.
    rows = []
    for k in range(5):
        row = dict.fromkeys(FIELDS, "")
        row["elapsed_s"] = f"{60.0 * k:.1f}"
        row["server_rss_mib"] = f"{100.0 + 2.0 * k:.1f}"
        row["server_sqlite_mib"] = f"{10.0 + 2.0 * k:.1f}"
        rows.append(row)
    figures = trend(rows).figures
    assert figures["server_sqlite_mib"][4] == pytest.approx(120.0)
    assert figures["server_rss_less_sqlite_mib"][:4] == (90.0, 90.0, 90.0, 90.0)
    assert figures["server_rss_less_sqlite_mib"][4] == pytest.approx(0.0)
    rows[2]["server_sqlite_mib"] = ""  # not read: that row has no difference
    assert trend(rows).figures["server_rss_less_sqlite_mib"][4] == pytest.approx(0.0)


def _rows(path: Path) -> list[dict[str, str]]:
    # Ten minutes of 60-s rows: RSS 100 MiB + 0.5 MiB a minute (30 MiB/h), p99 flat at 40 ms
    # but a ramp-up row at t=0 of 500 ms that the default skip of 60 s leaves out.
    rows = []
    for k in range(11):
        row = dict.fromkeys(FIELDS, "")
        row["elapsed_s"] = f"{60.0 * k:.1f}"
        row["server_rss_mib"] = f"{100.0 + 0.5 * k:.1f}"
        row["p99_ms"] = "500.0" if k == 0 else "40.0"
        rows.append(row)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def test_trend_of_a_hand_made_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows(tmp_path / "timeline.csv")
    result = trend(rows, skip_seconds=60.0)
    assert result.rows == 10
    assert result.seconds == pytest.approx(540.0)
    first, last, low, high, slope = result.figures["server_rss_mib"]
    assert (first, last, low, high) == (100.5, 105.0, 100.5, 105.0)
    assert slope == pytest.approx(30.0)
    assert result.figures["p99_ms"][4] == pytest.approx(0.0)
    with_ramp = trend(rows, skip_seconds=0.0)
    assert with_ramp.figures["p99_ms"][3] == 500.0  # the ramp-up row is in
    assert with_ramp.figures["p99_ms"][4] < 0  # and drags the slope down
    assert main([str(tmp_path / "timeline.csv")]) == 0
    out = capsys.readouterr().out
    assert "server_rss_mib: first 100.5, last 105.0" in out
    assert "slope +30.00/h" in out
