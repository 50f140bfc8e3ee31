"""The web page of ``ramino serve --web``: static files next to MQTT over WebSockets.

The embedded broker's WebSocket listener takes the MQTT connections on path ``/mqtt`` (a
WebSocket upgrade) and hands every other request to :func:`static_site`, which answers ``GET``
with a file of the built page (``server/web_static/``, made by ``make web`` from ``web/``).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from server.net.embedded import HttpHandler

__all__ = ["MQTT_PATH", "STATIC_ROOT", "parse_web", "static_site"]

STATIC_ROOT = Path(__file__).resolve().parent.parent / "web_static"
"""The built page, shipped inside the package."""

MQTT_PATH = "/mqtt"
"""Where the page connects its MQTT-over-WebSocket client."""

_TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".html": "text/html",
    ".json": "application/json",
}


def parse_web(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``PORT``: 127.0.0.1) as a (host, port) pair.

    >>> parse_web("0.0.0.0:8080")
    ('0.0.0.0', 8080)
    >>> parse_web("8080")
    ('127.0.0.1', 8080)

    Raises:
        ValueError: not a HOST:PORT with a port 0-65535.
    """
    host, _, port = text.rpartition(":")
    number = int(port)
    if not 0 <= number <= 65535:
        raise ValueError(f"port out of range in {text!r}")
    return host.strip("[]") or "127.0.0.1", number


def _response(status: HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers()
    headers["Content-Type"] = content_type
    headers["Content-Length"] = str(len(body))
    headers["Cache-Control"] = "no-cache"
    headers["X-Content-Type-Options"] = "nosniff"
    return Response(status.value, status.phrase, headers, body)


def static_site(
    root: Path = STATIC_ROOT, pages: Mapping[str, Callable[[], str]] | None = None
) -> HttpHandler:
    """The handler of plain HTTP requests: files under ``root``, ``/`` being ``index.html``;
    and the generated HTML pages of ``pages`` (path -> what writes the page, looked up at each
    request: ``/ladder`` while the server runs a ladder).

    Only files directly in ``root`` or below it are served; anything else is 404.
    """
    base = root.resolve()
    pages = {} if pages is None else pages

    def handle(connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == MQTT_PATH and "upgrade" in request.headers.get("Connection", "").lower():
            return None  # the MQTT client's WebSocket handshake goes on
        if request.headers.get("Upgrade"):
            return _response(HTTPStatus.NOT_FOUND, b"WebSockets only on /mqtt\n", "text/plain")
        page = pages.get(path.rstrip("/"))
        if page is not None:
            return _response(HTTPStatus.OK, page().encode(), "text/html; charset=utf-8")
        name = "index.html" if path in ("", "/") else path.lstrip("/")
        target = (base / name).resolve()
        if not target.is_relative_to(base) or not target.is_file():
            return _response(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        kind = _TYPES.get(target.suffix) or mimetypes.guess_type(target.name)[0]
        return _response(HTTPStatus.OK, target.read_bytes(), kind or "application/octet-stream")

    return handle
