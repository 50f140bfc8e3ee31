"""The network subcommands of ``ramino``: ``serve`` and ``accounts``."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from protocol.transport import TransportError
from server.ladder.errors import LadderError
from server.net.accounts import Accounts, AccountsError, random_password
from server.net.embedded import SERVER_USER, BrokerPortBusy
from server.net.logs import configure_logging
from server.net.metrics import MetricsAddressError
from server.net.nats import NatsPasswords, sidecar_path
from server.net.serve import ServeConfig, serve
from server.net.web import WebAddressError, parse_web_broker
from server.net.workers import WorkerError

__all__ = ["SecretError", "add_commands", "read_secret", "serve_config"]


class SecretError(ValueError):
    """A password file that cannot be read or is empty."""


def read_secret(path: str) -> str:
    """The secret in the file at ``path`` (``-``: standard input): its first line, without the
    line end.

    Raises:
        SecretError: the file cannot be read or its first line is empty.
    """
    try:
        text = sys.stdin.readline() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SecretError(f"cannot read the password file {path}: {error}") from None
    secret = text.splitlines()[0] if text else ""
    if not secret:
        raise SecretError(f"the password file {path} is empty")
    return secret


_DEFAULT_ACCOUNTS = "deploy/mosquitto/passwords"


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``serve`` and ``accounts`` on the ``ramino`` parser."""
    serve_parser = commands.add_parser(
        "serve",
        help="run the server (embedded broker by default)",
        description="Run the game server. Every option can also be set by an environment "
        "variable RAMINO_<NAME> (e.g. RAMINO_BROKER, RAMINO_STORE, RAMINO_SERVER_PASSWORD, "
        "RAMINO_SERVER_PASSWORD_FILE).",
    )
    serve_parser.add_argument(
        "--broker",
        help="'embedded' (default: an MQTT broker inside this process) or mqtt://HOST:PORT; "
        "several, comma-separated, for the nodes of a cluster (tried in turn)",
    )
    serve_parser.add_argument(
        "--store", help="sqlite:///PATH (default sqlite:///ramino.db) or postgresql://..."
    )
    serve_parser.add_argument(
        "--port", type=int, help="port of the embedded broker (default 1883; a free one if taken)"
    )
    serve_parser.add_argument(
        "--web",
        metavar="HOST:PORT",
        help="serve the web page there, and with the embedded broker MQTT over WebSockets (path "
        "/mqtt) too (docs/web.md)",
    )
    serve_parser.add_argument(
        "--web-broker",
        metavar="URL",
        help="the broker's WebSocket URL the page connects to, ws://HOST:PORT/mqtt (needed by "
        "--web with an external broker, e.g. Mosquitto's websockets listener)",
    )
    serve_parser.add_argument(
        "--house-bots",
        action="store_true",
        default=None,
        help="bots take the free seats of public tables waiting for players",
    )
    serve_parser.add_argument("--server-user", help="the server's MQTT account (ramino-server)")
    secret = serve_parser.add_mutually_exclusive_group()
    secret.add_argument(
        "--server-password-file",
        metavar="PATH",
        help="file holding its password, or RAMINO_SERVER_PASSWORD (embedded broker: a random "
        "one by default)",
    )
    secret.add_argument(
        "--server-password",
        help="its password on the command line: any local user sees it in ps; prefer the file "
        "or the environment",
    )
    serve_parser.add_argument(
        "--accounts", help="accounts file for the embedded broker (default: guests)"
    )
    serve_parser.add_argument(
        "--guests",
        metavar="PATH",
        help="where the embedded broker keeps guest names (default: next to a SQLite store, "
        "STORE.guests; ':memory:' keeps them in memory)",
    )
    serve_parser.add_argument(
        "--grace-seconds", type=float, help="disconnect grace before the server plays (30)"
    )
    serve_parser.add_argument("--claim-seconds", type=float, help="claim window length (10)")
    serve_parser.add_argument(
        "--rate", type=float, help="commands a second each client may send on average (50)"
    )
    serve_parser.add_argument("--burst", type=int, help="commands a client may send at once (100)")
    serve_parser.add_argument(
        "--connect-timeout",
        type=float,
        help="embedded broker: seconds a new socket has to send its CONNECT (10; 0: no limit)",
    )
    serve_parser.add_argument(
        "--max-connections",
        type=int,
        help="embedded broker: connections open at once, all users (1000; 0: no limit)",
    )
    serve_parser.add_argument(
        "--max-connections-per-user",
        type=int,
        help="embedded broker: connections of one username at once (8; 0: no limit)",
    )
    serve_parser.add_argument(
        "--max-subscriptions",
        type=int,
        help="embedded broker: topic filters one client may hold (64; 0: no limit)",
    )
    serve_parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (default: none)",
    )
    serve_parser.add_argument(
        "--max-waiting-tables",
        type=int,
        help="tables waiting for players one account may have created (10; 0: no limit)",
    )
    serve_parser.add_argument(
        "--max-open-tables",
        type=int,
        help="waiting or playing tables one account may sit at (50; 0: no limit)",
    )
    serve_parser.add_argument(
        "--waiting-ttl",
        type=float,
        help="seconds a waiting table lives without activity (1800; 0: forever)",
    )
    serve_parser.add_argument(
        "--finished-ttl",
        type=float,
        help="seconds a finished table stays in memory without activity (300; 0: forever)",
    )
    serve_parser.add_argument(
        "--worker",
        metavar="NAME",
        help="run as worker NAME of several sharing a PostgreSQL store and a broker "
        "(docs/operations.md, 'Scale-out: workers')",
    )
    serve_parser.add_argument(
        "--shards", type=int, metavar="N", help="lobby shards the workers share (1)"
    )
    serve_parser.add_argument(
        "--lease-ttl",
        type=float,
        metavar="SECONDS",
        help="seconds a worker's leases last without renewal (5)",
    )
    serve_parser.add_argument(
        "--ladder",
        metavar="NAME",
        help="run the bot ladder NAME here: MQTT accounts join it with ladder_join and play at "
        "this server's tables (docs/ladder.md)",
    )
    serve_parser.add_argument(
        "--ladder-pools",
        metavar="POOLS",
        help="its pools, comma-separated (gin-2,knock-2,rummy500-3,ramino-4)",
    )
    serve_parser.add_argument(
        "--ladder-concurrency", type=int, help="ladder matches played at once (1)"
    )
    serve_parser.add_argument(
        "--ladder-move-seconds", type=float, help="move timer of ladder tables (10)"
    )
    serve_parser.add_argument(
        "--ladder-max-timeouts",
        type=int,
        help="timeouts in a row that forfeit a seat at a ladder table (2)",
    )
    serve_parser.add_argument(
        "--ladder-max-forfeits",
        type=int,
        help="matches forfeited in a row that suspend an external entrant for an hour (3; 0: "
        "never)",
    )
    serve_parser.add_argument(
        "--log-format",
        choices=("auto", "json", "text"),
        default="auto",
        help="log lines as JSON or text (auto: text on a terminal)",
    )
    serve_parser.add_argument(
        "--log-level", default="info", help="debug shows every request (default info)"
    )
    serve_parser.set_defaults(handler=_command_serve)

    accounts = commands.add_parser(
        "accounts",
        help="add, remove or list player accounts (Mosquitto password file)",
        description="Maintain the accounts file shared by Mosquitto (password_file) and the "
        "embedded broker (--accounts). Mosquitto reloads it on SIGHUP.",
    )
    accounts.add_argument("--file", default=_DEFAULT_ACCOUNTS, help=f"({_DEFAULT_ACCOUNTS})")
    actions = accounts.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add an account or change its password")
    add.add_argument("name")
    chosen = add.add_mutually_exclusive_group()
    chosen.add_argument(
        "--password-file", metavar="PATH", help="the password's file ('-': standard input)"
    )
    chosen.add_argument(
        "--password", help="the password (shows in ps; default: a random one, printed)"
    )
    remove = actions.add_parser("remove", help="remove an account")
    remove.add_argument("name")
    actions.add_parser("list", help="list the accounts")
    accounts.set_defaults(handler=_command_accounts)
    _add_nats_config(actions)


def serve_config(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> ServeConfig:
    """The settings of ``ramino serve``: ``args``, then ``RAMINO_*`` variables of ``env``. The
    server password comes from ``--server-password``, ``--server-password-file``,
    ``RAMINO_SERVER_PASSWORD_FILE`` or ``RAMINO_SERVER_PASSWORD``, the first one given.

    Raises:
        SecretError: the password file cannot be read or is empty.
    """
    env = dict(os.environ if env is None else env)
    password = args.server_password
    path = args.server_password_file or env.get("RAMINO_SERVER_PASSWORD_FILE")
    if password is None and path:
        password = read_secret(path)
    return ServeConfig.from_env(
        env,
        broker=args.broker,
        store=args.store,
        port=args.port,
        server_user=args.server_user,
        server_password=password,
        accounts=args.accounts,
        guests=args.guests,
        web=args.web,
        web_broker=args.web_broker,
        house_bots=args.house_bots,
        grace_seconds=args.grace_seconds,
        claim_seconds=args.claim_seconds,
        rate=args.rate,
        burst=args.burst,
        connect_timeout=args.connect_timeout,
        max_connections=args.max_connections,
        max_connections_per_user=args.max_connections_per_user,
        max_subscriptions=args.max_subscriptions,
        metrics=args.metrics,
        max_waiting_tables=args.max_waiting_tables,
        max_open_tables=args.max_open_tables,
        waiting_ttl=args.waiting_ttl,
        finished_ttl=args.finished_ttl,
        worker=args.worker,
        shards=args.shards,
        lease_ttl=args.lease_ttl,
        ladder=getattr(args, "ladder", None),
        ladder_pools=getattr(args, "ladder_pools", None),
        ladder_concurrency=getattr(args, "ladder_concurrency", None),
        ladder_move_seconds=getattr(args, "ladder_move_seconds", None),
        ladder_max_timeouts=getattr(args, "ladder_max_timeouts", None),
        ladder_max_forfeits=getattr(args, "ladder_max_forfeits", None),
    )


def _command_serve(args: argparse.Namespace) -> int:
    try:
        config = serve_config(args)
    except SecretError as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2
    if args.server_password is not None:
        print(
            "ramino: warning: --server-password shows in ps; use --server-password-file or "
            "RAMINO_SERVER_PASSWORD",
            file=sys.stderr,
        )
    configure_logging(args.log_format, args.log_level)
    if config.web and config.broker != "embedded" and not config.web_broker:
        print(
            "ramino: --web with an external broker needs --web-broker ws://HOST:PORT/mqtt, its "
            "WebSocket listener (docs/web.md)",
            file=sys.stderr,
        )
        return 2
    try:
        if config.web_broker:
            parse_web_broker(config.web_broker)
    except WebAddressError as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2
    if config.house_bots and config.accounts:
        print("ramino: --house-bots needs guest mode (no --accounts)", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(config))
    except (BrokerPortBusy, LadderError) as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2
    except AccountsError as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2
    except TransportError as error:
        print(
            f"ramino: {error} (see --broker and --server-password-file)",
            file=sys.stderr,
        )
        return 2
    except (MetricsAddressError, WebAddressError, WorkerError) as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2
    return 0


def _command_accounts(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        accounts = Accounts.load(path)
        if args.action == "list":
            for name in accounts.names():
                print(name)
            return 0
        if args.action == "remove":
            if not accounts.remove(args.name):
                print(f"ramino: no account {args.name!r} in {path}", file=sys.stderr)
                return 1
            accounts.save(path)
            _update_nats_passwords(path, args.name, None)
            print(f"removed {args.name}")
            return 0
        chosen = read_secret(args.password_file) if args.password_file else args.password
        password = chosen or random_password()
        accounts.add(args.name, password)
        accounts.save(path)
        _update_nats_passwords(path, args.name, password)
    except (AccountsError, SecretError) as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2
    print(f"added {args.name}" if chosen else f"{args.name} {password}")
    return 0


def _add_nats_config(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    nats_config = actions.add_parser(
        "nats-config",
        help="write the authorization block of a NATS broker (deploy/nats/)",
        description="Write NATS's authorization block (users, bcrypt hashes, per-user "
        "permissions equal to the Mosquitto ACL) from the accounts file and its bcrypt sidecar "
        "FILE.nats, which 'accounts add' keeps. Every node includes the same file.",
    )
    nats_config.add_argument(
        "--output", default="-", help="where to write it (default: standard output)"
    )
    nats_config.add_argument("--server-user", default=SERVER_USER, help=f"({SERVER_USER})")
    nats_config.set_defaults(handler=_command_nats_config)


def _update_nats_passwords(path: Path, name: str, password: str | None) -> None:
    """Keep the bcrypt sidecar of ``path`` (for NATS) in step with an added or removed account."""
    sidecar = sidecar_path(path)
    passwords = NatsPasswords.load(sidecar)
    if password is None:
        if name not in passwords.hashes:
            return
        passwords.remove(name)
    else:
        passwords.add(name, password)
    passwords.save(sidecar)


def _command_nats_config(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        accounts = Accounts.load(path)
        text, left_out = NatsPasswords.load(sidecar_path(path)).config(accounts, args.server_user)
    except AccountsError as error:
        print(f"ramino: {error}", file=sys.stderr)
        return 2
    for name in left_out:
        reason = "a '.' in the name" if "." in name else "no bcrypt hash: add it again"
        print(f"ramino: {name} left out of the NATS config ({reason})", file=sys.stderr)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        NatsPasswords({}).save(args.output)  # created 0600 before the hashes go in
        Path(args.output).write_text(text, encoding="utf-8")
    return 0
