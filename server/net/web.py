"""The web page of ``ramino serve --web``: static files next to MQTT over WebSockets.

The embedded broker's WebSocket listener takes the MQTT connections on path ``/mqtt`` (a
WebSocket upgrade) and hands every other request to :func:`static_site`, which answers ``GET``
with a file of the built page (``server/web_static/``, made by ``make web`` from ``web/``), and
``GET /replay/TABLE`` with the replay of a finished game of that table (:func:`replay_json`),
read from the table's log in the store as ``ramino replay`` reads it.

A replay is only served for a game that has ended: once a game is over, every hand of it has
been shown (``hand_ended``) and every deck revealed (``deck_revealed``) on the public topics,
so no viewpoint tells anyone a card that was still hidden. A game still under way is refused
(``replay/game_in_progress``), whatever viewpoint is asked for.

With an external broker (Mosquitto's ``websockets`` listener) :func:`serve_page` serves the
page alone, and the page connects to the broker's WebSocket URL (``--web-broker``), which
:func:`static_site` writes into ``index.html`` as ``<meta name="ramino-broker" content=URL>``;
without that tag the page connects to ``/mqtt`` on its own host and port.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import inspect
import json
import mimetypes
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import msgspec
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from server.engine import GameEnded, view
from server.engine.views import HIDDEN
from server.net.embedded import HttpHandler
from server.tables.errors import ReplayError, StoreError, UnknownTable
from server.tables.records import GameStarted, TableCreated
from server.tables.replay import (
    EVERYTHING,
    LogRow,
    Viewer,
    parse_viewer,
    read_rows,
    replay_rows,
)
from server.tables.store import EventStore
from server.tables.table import TableState, empty_table, fold

__all__ = [
    "BROKER_META",
    "MQTT_PATH",
    "REPLAY_PATH",
    "STATIC_ROOT",
    "ReplaySource",
    "WebAddressError",
    "page_url",
    "parse_web",
    "parse_web_broker",
    "replay_json",
    "serve_page",
    "static_site",
]

STATIC_ROOT = Path(__file__).resolve().parent.parent / "web_static"
"""The built page, shipped inside the package."""

MQTT_PATH = "/mqtt"
"""Where the page connects its MQTT-over-WebSocket client."""

BROKER_META = "ramino-broker"
"""The ``<meta name=...>`` of ``index.html`` whose ``content`` is the broker's WebSocket URL."""

REPLAY_PATH = "/replay/"
"""``GET /replay/TABLE?as=VIEWER&game=N``: the replay of a finished game, as JSON."""

_TABLE_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")

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


class ReplaySource:
    """Where the replays come from: the server's event store, once it is open (``None``
    before: replays are then refused with ``store/closed``).

    A finished game's rows never change, so the JSON of its last ``cached`` replays asked for
    (table, game, viewer) is kept and sent again as it is; a new one is built in a worker
    thread, so that a long game does not hold up the broker and the tables meanwhile.
    """

    def __init__(self, store: EventStore | None = None, cached: int = 32) -> None:
        self.store = store
        self.cached = cached
        self._answers: OrderedDict[tuple[str, int, str], bytes] = OrderedDict()

    async def answer(self, table_id: str, viewer: str, game: str = "") -> bytes:
        """:func:`replay_json` of the request, encoded.

        Raises:
            StoreError: no store yet (``store/closed``), or the store failed.
            UnknownTable, ReplayError: as :func:`replay_json`.
        """
        if self.store is None:
            raise StoreError("the server's store is not open", "store/closed")
        rows, number, seen = await _select(self.store, table_id, viewer, game)
        key = (table_id, number, str(seen))
        answer = self._answers.get(key)
        if answer is None:
            answer = await asyncio.to_thread(_encoded_replay, rows, number, seen)
            self._answers[key] = answer
            while len(self._answers) > self.cached:
                self._answers.popitem(last=False)
        else:
            self._answers.move_to_end(key)
        return answer


def static_site(
    root: Path = STATIC_ROOT,
    replays: ReplaySource | None = None,
    broker_url: str = "",
    pages: Mapping[str, Callable[[], str]] | None = None,
) -> HttpHandler:
    """The handler of plain HTTP requests: files under ``root``, ``/`` being ``index.html``;
    given ``replays``, ``GET /replay/TABLE`` (see :func:`replay_json`); and the generated HTML
    pages of ``pages`` (path -> what writes the page, looked up at each request: ``/ladder``
    while the server runs a ladder). With ``broker_url``, ``index.html`` names it as the broker
    to connect to (``BROKER_META``).

    Only files directly in ``root`` or below it are served; anything else is 404.
    """
    base = root.resolve()
    index = base / "index.html"
    pages = {} if pages is None else pages

    def handle(
        connection: ServerConnection, request: Request
    ) -> Response | Awaitable[Response] | None:
        path, _, query = request.path.partition("?")
        if path == MQTT_PATH and "upgrade" in request.headers.get("Connection", "").lower():
            return None  # the MQTT client's WebSocket handshake goes on
        if request.headers.get("Upgrade"):
            return _response(HTTPStatus.NOT_FOUND, b"WebSockets only on /mqtt\n", "text/plain")
        if replays is not None and path.startswith(REPLAY_PATH):
            return _replay_response(replays, unquote(path.removeprefix(REPLAY_PATH)), query)
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


_STATUS = {
    "table/unknown": HTTPStatus.NOT_FOUND,
    "replay/no_such_game": HTTPStatus.NOT_FOUND,
    "replay/bad_viewer": HTTPStatus.BAD_REQUEST,
    "replay/game_in_progress": HTTPStatus.CONFLICT,
}


async def _replay_response(replays: ReplaySource, table_id: str, query: str) -> Response:
    fields = parse_qs(query)
    viewer = fields.get("as", [EVERYTHING])[0]
    game = fields.get("game", [""])[0]
    try:
        data = await replays.answer(table_id, viewer, game)
        status = HTTPStatus.OK
    except (ReplayError, StoreError, UnknownTable) as error:
        data = _json({"code": error.code, "message": str(error)})
        status = _STATUS.get(error.code, HTTPStatus.SERVICE_UNAVAILABLE)
    return _response(status, data, "application/json")


def _json(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


async def replay_json(store: EventStore, table_id: str, viewer: str, game: str = "") -> Any:
    """The replay of one finished game of ``table_id`` as ``viewer`` (``all``, ``spectator``,
    a seat number or a player's name) sees it: each row of the game's log with its text (as
    ``ramino replay`` prints it), its event (redacted for the viewer) and the table after it.

    ``game`` is a game number; "" means the last game that has ended.

    Raises:
        UnknownTable: no such table (``table/unknown``).
        ReplayError: ``replay/game_in_progress`` (the game, or every game, is not over),
            ``replay/no_such_game``, ``replay/bad_viewer``.
    """
    rows, number, seen = await _select(store, table_id, viewer, game)
    return _replay(rows, number, seen)


async def _select(
    store: EventStore, table_id: str, viewer: str, game: str
) -> tuple[list[LogRow], int, Viewer]:
    """The table's rows, the finished game asked for and the viewer; see :func:`replay_json`."""
    if not _TABLE_ID.fullmatch(table_id):
        raise UnknownTable(f"there is no table {table_id!r}")
    rows = await read_rows(store, table_id)
    ended = sorted({row.record.game for row in rows if isinstance(row.record.event, GameEnded)})
    started = [row.record.event.game for row in rows if isinstance(row.record.event, GameStarted)]
    if game:
        if not game.isdigit() or int(game) not in started:
            raise ReplayError(f"table {table_id} has no game {game!r}", "replay/no_such_game")
        number = int(game)
        if number not in ended:
            raise ReplayError(
                f"game {number} of table {table_id} is not over: its replay is shown once it"
                " has ended",
                "replay/game_in_progress",
            )
    elif not ended:
        raise ReplayError(
            f"table {table_id} has no finished game yet: a replay is shown once a game has ended",
            "replay/game_in_progress",
        )
    else:
        number = ended[-1]
    return rows, number, parse_viewer(viewer, rows)


def _encoded_replay(rows: list[LogRow], number: int, seen: Viewer) -> bytes:
    return _json(_replay(rows, number, seen))


def _replay(rows: list[LogRow], number: int, seen: Viewer) -> dict[str, Any]:
    table_id = rows[0].table_id
    ended = sorted({row.record.game for row in rows if isinstance(row.record.event, GameEnded)})
    lines = replay_rows(rows, seen, game=number)
    tables = _tables_after(rows, {line.seq for line in lines})
    players: list[str] = []
    for row in rows:
        if isinstance(row.record.event, GameStarted) and row.record.event.game == number:
            players = list(row.record.event.players)
    steps = []
    for line in lines:
        if isinstance(line.event, TableCreated):  # pragma: no cover - a game holds none
            continue
        step = line.to_json()
        step["table"] = _frame(tables[line.seq], seen)
        steps.append(step)
    created = next(row.record.event for row in rows if isinstance(row.record.event, TableCreated))
    return {
        "table": table_id,
        "variant": created.variant,
        "players": players,
        "game": number,
        "games": ended,
        "viewer": seen,
        "steps": steps,
    }


def _tables_after(rows: list[LogRow], wanted: set[int]) -> dict[int, TableState]:
    """The table after each row whose seq is in ``wanted``."""
    table = empty_table(rows[0].table_id)
    after = {}
    for row in rows:
        table = fold(table, row.record, row.seq)
        if row.seq in wanted:
            after[row.seq] = table
    return after


def _frame(table: TableState, viewer: Viewer) -> Any:
    """The game as ``viewer`` sees it after a row: fields of the engine's view of the state
    (``_FRAME``), and ``hands``, every seat's cards as the viewer may see them (-1: hidden;
    every hand shows once its hand has ended)."""
    if table.game is None:
        return None
    state = table.game
    seat = viewer if isinstance(viewer, int) else None
    whole = msgspec.to_builtins(view(state, seat))
    seen = {key: whole[key] for key in _FRAME}
    # From the end of a hand (``hand_ended`` shows every hand) until the next deal, all show.
    ended = state.last_result is not None and state.last_result.hand == state.hand_number
    seen["hands"] = [
        list(hand) if viewer == EVERYTHING or number == seat or ended else [HIDDEN] * len(hand)
        for number, hand in enumerate(state.hands)
    ]
    return seen


_FRAME = (
    "phase",
    "hand_number",
    "dealer",
    "to_move",
    "scores",
    "stock_size",
    "pile",
    "melds",
    "claim_kind",
    "claim_seats",
    "claim_answers",
)
"""The fields of the engine's view a replay step keeps (the rest is the same at every step, or
is in ``hands``)."""


async def _no_websocket(connection: ServerConnection) -> None:
    await connection.close()  # never reached: every request gets an HTTP response


@contextlib.asynccontextmanager
async def serve_page(host: str, port: int, handler: HttpHandler) -> AsyncIterator[int]:
    """Serve the page's files (``handler``, from :func:`static_site`) on ``host:port`` without
    a broker: a request for ``/mqtt`` is a 404 too. Yields the port listened on.

    Raises:
        WebAddressError: ``host:port`` cannot be listened on.
    """

    async def respond(connection: ServerConnection, request: Request) -> Response:
        response = handler(connection, request)
        if inspect.isawaitable(response):
            response = await response
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
