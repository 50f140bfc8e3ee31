"""The web page of ``ramino serve --web``: static files next to MQTT over WebSockets.

The embedded broker's WebSocket listener takes the MQTT connections on path ``/mqtt`` (a
WebSocket upgrade) and hands every other request to :func:`static_site`, which answers ``GET``
with a file of the built page (``server/web_static/``, made by ``make web`` from ``web/``).

With an external broker (Mosquitto's ``websockets`` listener) :func:`serve_page` serves the
page alone, and the page connects to the broker's WebSocket URL (``--web-broker``), which
:func:`static_site` writes into ``index.html`` as ``<meta name="ramino-broker" content=URL>``;
without that tag the page connects to ``/mqtt`` on its own host and port.
"""

from __future__ import annotations

import contextlib
import html
import mimetypes
import re
from collections.abc import AsyncIterator, Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from server.net.embedded import HttpHandler

__all__ = [
    "BROKER_META",
    "MQTT_PATH",
    "STATIC_ROOT",
    "WebAddressError",
    "page_url",
    "parse_web",
    "parse_web_broker",
    "serve_page",
    "static_site",
]

STATIC_ROOT = Path(__file__).resolve().parent.parent / "web_static"
"""The built page, shipped inside the package."""

MQTT_PATH = "/mqtt"
"""Where the page connects its MQTT-over-WebSocket client."""

BROKER_META = "ramino-broker"
"""The ``<meta name=...>`` of ``index.html`` whose ``content`` is the broker's WebSocket URL."""

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


class WebAddressError(ValueError):
    """The page's address cannot be listened on, or ``--web-broker`` is not a WebSocket URL."""


def parse_web_broker(url: str) -> str:
    """``url`` if it is a WebSocket URL the page can connect to (``ws://HOST[:PORT]/PATH`` or
    ``wss://...``).

    >>> parse_web_broker("ws://broker.example:8083/mqtt")
    'ws://broker.example:8083/mqtt'

    Raises:
        WebAddressError: another scheme, or no host.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        parts = urlsplit("")
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise WebAddressError(
            f"--web-broker must be ws://HOST:PORT/PATH or wss://HOST:PORT/PATH, got {url!r}"
        )
    return url


def page_url(host: str, port: int) -> str:
    """The address to print for a page served on ``host:port`` (every interface: loopback).

    >>> page_url("0.0.0.0", 8080), page_url("10.0.0.5", 80)
    ('http://127.0.0.1:8080/', 'http://10.0.0.5:80/')
    """
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    return f"http://{shown}:{port}/"


def _with_broker(page: bytes, broker_url: str) -> bytes:
    """``index.html`` telling the page where its broker is (a ``<meta>`` first in ``<head>``)."""
    meta = f'\n<meta name="{BROKER_META}" content="{html.escape(broker_url, quote=True)}">'
    found = re.search(rb"<head[^>]*>", page, re.IGNORECASE)
    if found is None:
        raise ValueError("the page's index.html has no <head>")
    return page[: found.end()] + meta.encode() + page[found.end() :]


def _response(status: HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers()
    headers["Content-Type"] = content_type
    headers["Content-Length"] = str(len(body))
    headers["Cache-Control"] = "no-cache"
    headers["X-Content-Type-Options"] = "nosniff"
    return Response(status.value, status.phrase, headers, body)


def static_site(
    root: Path = STATIC_ROOT,
    broker_url: str = "",
    pages: Mapping[str, Callable[[], str]] | None = None,
) -> HttpHandler:
    """The handler of plain HTTP requests: files under ``root``, ``/`` being ``index.html``;
    and the generated HTML pages of ``pages`` (path -> what writes the page, looked up at each
    request: ``/ladder`` while the server runs a ladder).

    Only files directly in ``root`` or below it are served; anything else is 404. With
    ``broker_url``, ``index.html`` names it as the broker to connect to (``BROKER_META``).
    """
    base = root.resolve()
    index = base / "index.html"
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
        body = target.read_bytes()
        if broker_url and target == index:
            body = _with_broker(body, broker_url)
        return _response(HTTPStatus.OK, body, kind or "application/octet-stream")

    return handle


async def _no_websocket(connection: ServerConnection) -> None:
    await connection.close()  # never reached: every request gets an HTTP response


@contextlib.asynccontextmanager
async def serve_page(host: str, port: int, handler: HttpHandler) -> AsyncIterator[int]:
    """Serve the page's files (``handler``, from :func:`static_site`) on ``host:port`` without
    a broker: a request for ``/mqtt`` is a 404 too. Yields the port listened on.

    Raises:
        WebAddressError: ``host:port`` cannot be listened on.
    """

    def respond(connection: ServerConnection, request: Request) -> Response:
        response = handler(connection, request)
        if response is None:
            return _response(
                HTTPStatus.NOT_FOUND,
                b"no MQTT here: the page connects to its broker\n",
                "text/plain",
            )
        return response

    try:
        server = await serve(_no_websocket, host, port, process_request=respond)
    except OSError as error:
        raise WebAddressError(f"cannot serve the web page on {host}:{port}: {error}") from None
    try:
        port_listened: int = next(iter(server.sockets)).getsockname()[1]
        yield port_listened
    finally:
        server.close()
        await server.wait_closed()
