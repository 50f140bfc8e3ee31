"""A 3-node NATS cluster with MQTT listeners and JetStream, from deploy/nats/node.conf, for the
network tests (the ``nats_cluster`` fixture of tests/net/conftest.py).

Each node gets free loopback ports (client, cluster, MQTT, monitoring), its own JetStream folder
and the same ``authorization.conf``, written by ``NatsPasswords.config`` from the accounts as
``ramino accounts nats-config`` does. The cluster is ready when every node's ``/healthz`` says
ok, it has routes to the two others, and the server account logs in over MQTT on each node.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from server.net.accounts import Accounts, random_password
from server.net.embedded import SERVER_USER
from server.net.nats import NatsPasswords
from tests.net.conftest import (
    DEADLINE,
    HOST,
    TEST_USERS,
    BrokerUnderTest,
    _connack_code_blocking,
    connack_code,
)

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "nats" / "node.conf"
NODES = 3


def nats_binary() -> str | None:
    """Where nats-server is, if it is installed."""
    return shutil.which("nats-server") or next(
        (path for path in ("/usr/sbin/nats-server", "/usr/bin/nats-server") if Path(path).exists()),
        None,
    )


def _free_ports(count: int) -> list[int]:
    probes = []
    for _ in range(count):
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.bind((HOST, 0))
        probes.append(probe)
    ports = [probe.getsockname()[1] for probe in probes]
    for probe in probes:
        probe.close()
    return ports


@dataclass
class NatsNode:
    """One nats-server process and its ports."""

    name: str
    client_port: int
    cluster_port: int
    mqtt_port: int
    http_port: int
    store: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``mqtt://HOST:MQTT_PORT``."""
        return f"mqtt://{HOST}:{self.mqtt_port}"

    def alive(self) -> bool:
        """Whether the process runs."""
        return self.process is not None and self.process.poll() is None

    def monitor(self, path: str) -> dict[str, object] | None:
        """A monitoring endpoint's JSON, or ``None`` if it does not answer."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.http_port}{path}", timeout=1) as got:
                answer: dict[str, object] = json.loads(got.read())
                return answer
        except (OSError, urllib.error.URLError, ValueError):
            return None


@dataclass
class NatsCluster(BrokerUnderTest):
    """Three NATS nodes; ``host``/``port`` are node 0's MQTT listener, ``url`` lists every
    node (node 0 first)."""

    binary: str = ""
    folder: Path = Path()
    nodes: list[NatsNode] = field(default_factory=list)
    accounts: Accounts = field(default_factory=Accounts)
    passwords: NatsPasswords = field(default_factory=NatsPasswords)

    @property
    def url(self) -> str:
        """Every node's ``mqtt://HOST:PORT``, comma-separated, node 0 first."""
        return self.urls_from(0)

    def urls_from(self, first: int) -> str:
        """Every node's address, comma-separated, starting at node ``first``."""
        order = self.nodes[first:] + self.nodes[:first]
        return ",".join(node.url for node in order)

    def write_authorization(self) -> None:
        """authorization.conf from the accounts, as ``ramino accounts nats-config`` writes it."""
        text, left_out = self.passwords.config(self.accounts, self.server_user)
        assert [] == left_out
        (self.folder / "authorization.conf").write_text(text)

    def start_node(self, node: NatsNode) -> None:
        """Start (or restart) ``node`` with deploy/nats/node.conf."""
        routes = {
            f"RAMINO_NATS_ROUTE_{index + 1}": f"nats-route://{HOST}:{other.cluster_port}"
            for index, other in enumerate(self.nodes)
        }
        env = {
            **os.environ,
            **routes,
            "RAMINO_NATS_NAME": node.name,
            "RAMINO_NATS_HOST": HOST,
            "RAMINO_NATS_PORT": str(node.client_port),
            "RAMINO_NATS_HTTP_PORT": str(node.http_port),
            "RAMINO_NATS_MQTT_PORT": str(node.mqtt_port),
            "RAMINO_NATS_CLUSTER_PORT": str(node.cluster_port),
            "RAMINO_NATS_STORE": str(node.store),
        }
        log = self.folder / f"{node.name}.log"
        node.process = subprocess.Popen(
            [self.binary, "-c", str(self.folder / "node.conf"), "-l", str(log)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )

    def ready(self, node: NatsNode) -> bool:
        """Whether ``node`` is healthy, routed to every other live node and takes MQTT logins."""
        if not node.alive():
            return False
        health = node.monitor("/healthz")
        routes = node.monitor("/routez")
        others = sum(1 for other in self.nodes if other is not node and other.alive())
        return (
            health is not None
            and health.get("status") == "ok"
            and routes is not None
            and routes.get("num_routes") == others
            and _connack_code_blocking(HOST, node.mqtt_port, self.server_user, self.server_password)
            == 0
        )

    def wait_ready(self) -> None:
        """Block until every live node is :meth:`ready`.

        Raises:
            RuntimeError: not within the deadline (the logs are in the message).
        """
        deadline = time.monotonic() + 3 * DEADLINE
        while time.monotonic() < deadline:
            if all(self.ready(node) for node in self.nodes if node.alive()):
                return
            time.sleep(0.05)
        logs = "\n".join(
            (self.folder / f"{node.name}.log").read_text()[-3000:]
            for node in self.nodes
            if (self.folder / f"{node.name}.log").exists()
        )
        raise RuntimeError(f"the NATS cluster did not form; the logs end with:\n{logs}")

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (as a crash would) and wait until it is gone."""
        process = self.nodes[index].process
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=DEADLINE)

    def restart(self, index: int) -> None:
        """Start node ``index`` again and wait until the cluster is whole."""
        if not self.nodes[index].alive():
            self.start_node(self.nodes[index])
        self.wait_ready()

    def stop(self) -> None:
        """Stop every node."""
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()
                try:
                    node.process.wait(timeout=DEADLINE)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait()

    async def add_user(self, name: str, password: str) -> None:
        """Add ``name`` to the accounts, rewrite authorization.conf, reload every live node and
        wait until ``name`` logs in on each.

        Raises:
            TimeoutError: a node did not take the new account within the deadline.
        """
        self.accounts.add(name, password)
        self.passwords.add(name, password)
        self.write_authorization()
        live = [node for node in self.nodes if node.alive()]
        for node in live:
            assert node.process is not None
            node.process.send_signal(signal.SIGHUP)
        async with asyncio.timeout(DEADLINE):
            # NATS tells of no finished reload: the new login working is the sign.
            for node in live:
                while True:
                    if await connack_code(HOST, node.mqtt_port, name, password) == 0:
                        break
                    await asyncio.sleep(0.02)
        self.users[name] = password


def start_cluster(binary: str, folder: Path) -> NatsCluster:
    """Three nodes with the server account and TEST_USERS, ready."""
    shutil.copyfile(TEMPLATE, folder / "node.conf")
    server_password = random_password()
    users = {name: random_password() for name in TEST_USERS}
    cluster = NatsCluster(
        kind="nats",
        host=HOST,
        port=0,
        server_password=server_password,
        users=users,
        checks_passwords=True,
        binary=binary,
        folder=folder,
    )
    for name, password in {SERVER_USER: server_password, **users}.items():
        cluster.accounts.add(name, password)
        cluster.passwords.add(name, password)
    cluster.write_authorization()
    ports = _free_ports(4 * NODES)
    for index in range(NODES):
        client, route, mqtt, http = ports[4 * index : 4 * index + 4]
        store = folder / f"n{index + 1}-store"
        cluster.nodes.append(NatsNode(f"n{index + 1}", client, route, mqtt, http, store))
    cluster.port = cluster.nodes[0].mqtt_port
    for node in cluster.nodes:
        cluster.start_node(node)
    try:
        cluster.wait_ready()
    except BaseException:
        cluster.stop()
        raise
    return cluster
