"""Options and fixtures of the conformance suite.

``pytest tests/conformance --broker mqtt://HOST:PORT --user NAME:PASSWORD ...`` runs every check
against a deployment that is already running (give at least four accounts; on a guest-mode
server any names not bound to another password work, and without ``--user`` the suite makes
up fresh names). Without ``--broker``
every check runs twice: against ``ramino serve`` with its embedded broker, and against
``ramino serve`` behind Mosquitto with deploy/mosquitto's config, both started here as
subprocesses.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conformance.deployment import Deployment, Launched, launch
from tests.conformance.wire import Account, Peer

KINDS = ("embedded", "mosquitto")


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--broker``, ``--user``, ``--grace-seconds``."""
    group = parser.getgroup("conformance", "Ramino protocol conformance suite")
    group.addoption(
        "--broker",
        dest="conformance_broker",
        default=None,
        help="mqtt://HOST:PORT of a running Ramino deployment (default: start our own)",
    )
    group.addoption(
        "--user",
        dest="conformance_users",
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="an account of that deployment (repeat; at least 4; on a guest server, the first "
        "password binds a name)",
    )
    group.addoption(
        "--grace-seconds",
        dest="conformance_grace",
        type=float,
        default=30.0,
        help="the deployment's disconnect grace (ramino serve --grace-seconds; default 30)",
    )


def given_broker(config: pytest.Config) -> str | None:
    """The ``--broker`` URL, None when the suite starts its own deployments."""
    value: str | None = config.getoption("conformance_broker", default=None)
    return value


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses ``deployment`` on each deployment (both brokers, or the given
    one)."""
    if "deployment" in metafunc.fixturenames:
        kinds = ["given"] if given_broker(metafunc.config) else list(KINDS)
        metafunc.parametrize("deployment", kinds, indirect=True, scope="session")


def _given(config: pytest.Config, url: str) -> Deployment:
    parts = urlsplit(url)
    if parts.scheme != "mqtt" or parts.hostname is None:
        raise pytest.UsageError(f"--broker wants mqtt://HOST:PORT, not {url!r}")
    accounts = []
    for entry in config.getoption("conformance_users", default=[]):
        name, colon, password = entry.partition(":")
        if not colon:
            raise pytest.UsageError(f"--user wants NAME:PASSWORD, not {entry!r}")
        accounts.append(Account(name, password))
    if not accounts:
        # A guest-mode server takes any name not bound yet (with its first password): fresh ones.
        tag = secrets.token_hex(3)
        accounts = [Account(f"c{tag}-{number}", "guest") for number in range(300)]
    return Deployment(
        kind="given",
        host=parts.hostname,
        port=parts.port or 1883,
        accounts=accounts,
        own=False,
        grace_seconds=float(config.getoption("conformance_grace", default=30.0)),
    )


def _require_mosquitto() -> None:
    if shutil.which("mosquitto") is None:
        reason = "the mosquitto binary is not installed (apt install mosquitto)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """The deployment under test: the given one, or ``ramino serve`` started once per session
    with the embedded broker or with Mosquitto."""
    kind: str = request.param
    url = given_broker(request.config)
    if kind == "given":
        assert url is not None
        yield _given(request.config, url)
        return
    if kind == "mosquitto":
        _require_mosquitto()
    launched = launch(kind, tmp_path_factory.mktemp(f"conformance-{kind}"))
    try:
        yield launched.deployment
    finally:
        launched.stop()


@pytest.fixture
def private_deployment(deployment: Deployment, tmp_path: Path) -> Iterator[Launched]:
    """A deployment of the same kind only this test talks to and may stop (skipped against a
    given deployment, which the suite may not stop)."""
    if not deployment.own:
        pytest.skip("needs a server the suite starts (and stops) itself")
    launched = launch(deployment.kind, tmp_path)
    try:
        yield launched
    finally:
        launched.stop()


@pytest.fixture
async def alice(deployment: Deployment) -> AsyncIterator[Peer]:
    """A connected client with a fresh account."""
    (account,) = deployment.take(1)
    async with Peer(account, deployment.host, deployment.port).connected() as peer:
        yield peer


@pytest.fixture
async def bob(deployment: Deployment) -> AsyncIterator[Peer]:
    """A second connected client with a fresh account."""
    (account,) = deployment.take(1)
    async with Peer(account, deployment.host, deployment.port).connected() as peer:
        yield peer
