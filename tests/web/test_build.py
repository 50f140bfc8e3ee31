"""The web page shipped in the package is built from the sources in web/ (``make web``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from server.cli import main
from server.net.web import STATIC_ROOT

WEB = Path(__file__).resolve().parents[2] / "web"


def sources_hash() -> str:
    """The hash web/build.mjs records: each file's name and bytes, in sorted name order."""
    names = sorted(
        [f"src/{path.name}" for path in (WEB / "src").iterdir()]
        + ["build.mjs", "package.json", "package-lock.json"]
    )
    digest = hashlib.sha256()
    for name in names:
        digest.update(f"{name}\0".encode())
        digest.update((WEB / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def test_shipped_build_matches_the_sources() -> None:
    recorded = json.loads((STATIC_ROOT / "build.json").read_text())["sources_sha256"]
    assert sources_hash() == recorded, "server/web_static is older than web/: run `make web`"


def test_shipped_build_has_the_page() -> None:
    for name in ("index.html", "app.js", "style.css"):
        assert (STATIC_ROOT / name).is_file()


def test_web_and_house_bots_refuse_settings_they_cannot_work_with(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["serve", "--web", "127.0.0.1:0", "--broker", "mqtt://127.0.0.1:1"])
    assert (
        2,
        "ramino: --web with an external broker needs --web-broker ws://HOST:PORT/mqtt, its "
        "WebSocket listener (docs/web.md)\n",
    ) == (status, capsys.readouterr().err)
    status = main(["serve", "--web", "127.0.0.1:0", "--web-broker", "http://127.0.0.1:1/mqtt"])
    assert (
        2,
        "ramino: --web-broker must be ws://HOST:PORT/PATH or wss://HOST:PORT/PATH, got "
        "'http://127.0.0.1:1/mqtt'\n",
    ) == (status, capsys.readouterr().err)
    status = main(["serve", "--house-bots", "--accounts", "nowhere", "--port", "0"])
    assert (2, "ramino: --house-bots needs guest mode (no --accounts)\n") == (
        status,
        capsys.readouterr().err,
    )
