"""The deployment files of deploy/ checked against the code, without starting a container.

Every YAML file parses; every ``ramino`` command in the compose file, the Kubernetes manifests
and the systemd units parses with the real parser of ``ramino`` (``server.cli.build_parser``);
every ``RAMINO_*`` variable they set is one the code reads (or, for the NATS nodes, one that
deploy/nats/node.conf reads); the ports, service names, secrets and mounts agree with each other;
the Grafana data source and dashboard fit the metrics a server exposes; the Kubernetes manifests
render with ``kubectl kustomize`` when kubectl is installed.

``--worker``, ``--shards``, ``--lease-ttl`` and their variables ``RAMINO_WORKER``,
``RAMINO_SHARDS``, ``RAMINO_LEASE_TTL`` belong to the sharded workers: while ``ramino serve`` has
none of them, the other checks leave them out and one test, skipped, says so; once it has them,
that test checks every use.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from server.cli import build_parser
from server.net.metrics import Metrics
from server.net.serve import ServeConfig
from tests.net.test_metrics import dashboard_metrics, exposed

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose"
K8S = DEPLOY / "k8s"
NODE_CONF = DEPLOY / "nats" / "node.conf"
DASHBOARD = DEPLOY / "grafana" / "ramino.json"

WORKER_FLAGS = frozenset({"--worker", "--shards", "--lease-ttl"})
"""Flags of ``ramino serve`` that come with the sharded workers."""
WORKER_VARIABLES = frozenset({"RAMINO_WORKER", "RAMINO_SHARDS", "RAMINO_LEASE_TTL"})
"""Their variables."""

Doc = dict[str, Any]


# The code's side -------------------------------------------------------------------------------


class _Recording(dict[str, str]):
    """An empty environment that remembers every name looked up in it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.asked.add(key)
        return super().__contains__(key)

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return super().__getitem__(key)


def code_variables() -> set[str]:
    """Every ``RAMINO_*`` variable the code reads: those ``ServeConfig.from_env`` looks up, and
    every ``"RAMINO_..."`` string literal of the packages."""
    env = _Recording()
    ServeConfig.from_env(env)
    names = {name for name in env.asked if name.startswith("RAMINO_")}
    assert "RAMINO_BROKER" in names, "ServeConfig.from_env no longer reads RAMINO_BROKER?"
    for package in ("server", "bots", "loadtest", "protocol"):
        for path in (ROOT / package).rglob("*.py"):
            names.update(re.findall(r"""["'](RAMINO_[A-Z0-9_]+)["']""", path.read_text()))
    return names


def node_conf_variables() -> set[str]:
    """The variables deploy/nats/node.conf reads (``$NAME`` outside comments)."""
    text = "\n".join(line.split("#", 1)[0] for line in NODE_CONF.read_text().splitlines())
    return set(re.findall(r"\$([A-Z0-9_]+)", text))


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def serve_flags() -> set[str]:
    """The option strings of ``ramino serve``."""
    serve = _subparsers(build_parser())["serve"]
    return {option for action in serve._actions for option in action.option_strings}


def missing_worker_flags() -> set[str]:
    """The workers' flags ``ramino serve`` does not have (yet)."""
    return set(WORKER_FLAGS - serve_flags())


def parse(argv: list[str], where: str) -> argparse.Namespace:
    """``ramino ARGV`` through the real parser, the workers' flags it lacks left out.

    Fails the test with the parser's message when the command does not parse.
    """
    missing = missing_worker_flags()
    kept: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        if name in missing:
            skip = "=" not in word
            continue
        kept.append(word)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            return build_parser().parse_args(kept)
    except SystemExit:
        pytest.fail(f"{where}: `ramino {shlex.join(argv)}` does not parse: {errors.getvalue()}")


def flags_of(argv: list[str]) -> set[str]:
    """The ``--flags`` of a command line."""
    return {word.split("=", 1)[0] for word in argv if word.startswith("--")}


def option(argv: list[str], flag: str) -> str:
    """The value of ``flag`` in ``argv`` (``--flag VALUE`` or ``--flag=VALUE``)."""
    for index, word in enumerate(argv):
        if word == flag:
            return argv[index + 1]
        if word.startswith(f"{flag}="):
            return word.split("=", 1)[1]
    raise AssertionError(f"{flag} not in {shlex.join(argv)}")


def broker_nodes(urls: str) -> list[tuple[str, int]]:
    """``mqtt://HOST:PORT,...`` as (host, port) pairs."""
    nodes = []
    for url in urls.split(","):
        parts = urlsplit(url)
        assert "mqtt" == parts.scheme, url
        assert parts.hostname is not None
        assert parts.port is not None, f"{url}: give the port"
        nodes.append((parts.hostname, parts.port))
    return nodes


def listen_port(address: str) -> int:
    """The port of a ``HOST:PORT`` listen address."""
    return int(address.rpartition(":")[2])


# The files' side -------------------------------------------------------------------------------


def load_yaml(path: Path) -> list[Doc]:
    """Every document of a YAML file (empty ones left out)."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def compose() -> Doc:
    """deploy/compose/compose.yaml (YAML merge keys resolved)."""
    docs = load_yaml(COMPOSE / "compose.yaml")
    assert 1 == len(docs)
    return docs[0]


@dataclass
class Command:
    """One ``ramino`` command of a deployment file."""

    where: str
    argv: list[str]
    """Without the leading ``ramino``."""
    env: dict[str, str] = field(default_factory=dict)
    """The variables its process gets from the same file (values as written)."""


def _script_commands(script: str) -> Iterator[list[str]]:
    """The ``ramino`` commands of a shell script (one per line, ``exec`` allowed)."""
    for line in script.replace("$$", "$").splitlines():
        words = shlex.split(line)
        if words[:1] == ["exec"]:
            words = words[1:]
        if words[:1] == ["ramino"]:
            yield words[1:]


def image_is_ramino(service: Doc) -> bool:
    """Whether a compose service runs the image of deploy/Dockerfile."""
    build = service.get("build") or {}
    return bool(build.get("dockerfile") == "deploy/Dockerfile")


def compose_environment(service: Doc) -> dict[str, str]:
    """A compose service's ``environment`` (a mapping or a list of NAME=VALUE)."""
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        return dict(item.split("=", 1) for item in environment)
    return {str(key): str(value) for key, value in environment.items()}


_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:[:?-][^}]*)?\}")
"""Compose's ``${NAME}``, ``${NAME:?message}``, ``${NAME:-default}``."""


def compose_variables(text: str) -> list[str]:
    """The variables of the compose host's environment (``.env``) that ``text`` uses."""
    return _INTERPOLATION.findall(text)


def interpolate(text: str, values: dict[str, str]) -> str:
    """``text`` with compose's ``${NAME...}`` replaced by ``values[NAME]``."""
    return _INTERPOLATION.sub(lambda match: values[match.group(1)], text)


def compose_commands() -> list[Command]:
    """Every ``ramino`` command of the compose file."""
    commands = []
    for name, service in compose()["services"].items():
        if not image_is_ramino(service):
            continue
        env = compose_environment(service)
        entrypoint = service.get("entrypoint")
        command = service.get("command") or []
        if entrypoint == ["sh", "-c"]:
            assert 1 == len(command), f"{name}: one script"
            scripts = list(_script_commands(command[0]))
            assert scripts, f"{name}: no ramino command in its script"
            commands += [Command(f"compose {name}", argv, env) for argv in scripts]
        else:
            assert entrypoint is None, f"{name}: the image's entrypoint is ramino"
            commands.append(Command(f"compose {name}", [str(word) for word in command], env))
    return commands


def k8s_docs() -> list[Doc]:
    """The Kubernetes objects of deploy/k8s/ (the files its kustomization lists)."""
    kustomization = load_yaml(K8S / "kustomization.yaml")[0]
    docs = []
    for resource in kustomization["resources"]:
        docs += load_yaml(K8S / resource)
    return docs


def k8s_object(kind: str, name: str) -> Doc:
    found = [doc for doc in k8s_docs() if (doc["kind"], doc["metadata"]["name"]) == (kind, name)]
    assert 1 == len(found), f"one {kind} {name} in deploy/k8s/"
    return found[0]


def containers(workload: Doc) -> list[Doc]:
    found: list[Doc] = workload["spec"]["template"]["spec"]["containers"]
    return found


def k8s_env(container: Doc) -> dict[str, Doc]:
    """A container's variables: name -> its entry (``value`` or ``valueFrom``)."""
    return {entry["name"]: entry for entry in container.get("env", [])}


def k8s_commands() -> list[Command]:
    """Every ``ramino`` command of the Kubernetes manifests (containers of the ramino image)."""
    commands = []
    for doc in k8s_docs():
        if doc["kind"] not in ("Deployment", "StatefulSet", "Job", "CronJob"):
            continue
        for container in containers(doc):
            if not container["image"].startswith("ramino:"):
                continue
            assert "command" not in container, "the image's entrypoint is ramino"
            env = {name: str(entry.get("value", "")) for name, entry in k8s_env(container).items()}
            where = f"k8s {doc['metadata']['name']}/{container['name']}"
            commands.append(Command(where, [str(word) for word in container["args"]], env))
    return commands


def unit(path: Path) -> configparser.RawConfigParser:
    """A systemd unit file (repeated keys such as EnvironmentFile kept as a list)."""
    parser = configparser.RawConfigParser(strict=False, dict_type=_MultiDict)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text())
    return parser


class _MultiDict(dict[str, Any]):
    """configparser storage keeping every value of a repeated key, newline-separated."""

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, list) and key in self and isinstance(self[key], list):
            self[key].extend(value)
        else:
            super().__setitem__(key, value)


def env_file_names(path: Path) -> set[str]:
    """The variables an environment file sets, commented-out examples included."""
    names = set()
    for line in path.read_text().splitlines():
        match = re.match(r"#?([A-Z][A-Z0-9_]*)=", line)
        if match:
            names.add(match.group(1))
    return names


def systemd_commands() -> list[Command]:
    """The ``ramino`` commands of the systemd units (``%i`` as an instance name)."""
    commands = []
    for path in sorted((DEPLOY / "systemd").glob("*.service")):
        exec_start = unit(path)["Service"]["ExecStart"].replace("%i", "worker-1")
        argv = shlex.split(exec_start)
        assert "/opt/ramino/bin/ramino" == argv[0]
        commands.append(Command(f"systemd {path.name}", argv[1:]))
    return commands


def all_commands() -> list[Command]:
    return compose_commands() + k8s_commands() + systemd_commands()


# Every file ------------------------------------------------------------------------------------


def test_every_yaml_file_parses() -> None:
    """Every YAML file of deploy/ parses; the ones tests read are there."""
    paths = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
    for path in paths:
        assert load_yaml(path), f"{path} is empty"
    relative = {str(path.relative_to(DEPLOY)) for path in paths}
    assert {
        "compose/compose.yaml",
        "compose/prometheus.yml",
        "compose/grafana/datasource.yaml",
        "compose/grafana/dashboards.yaml",
        "k8s/kustomization.yaml",
        "k8s/nats.yaml",
        "k8s/workers.yaml",
    } <= relative


def test_every_ramino_command_parses_with_the_real_parser() -> None:
    """Each ``ramino`` command of compose, Kubernetes and systemd is accepted by
    ``server.cli.build_parser`` (the workers' flags aside while the parser lacks them), and
    they are the commands expected: serve, bots, accounts add/nats-config."""
    commands = all_commands()
    seen = [(command.where, parse(command.argv, command.where).command) for command in commands]
    assert ("compose worker", "serve") in seen
    assert ("compose bots", "bots") in seen
    assert ("compose accounts", "accounts") in seen
    assert ("k8s ramino-worker/ramino", "serve") in seen
    assert ("systemd ramino-worker@.service", "serve") in seen
    assert ("systemd ramino.service", "serve") in seen


def test_every_variable_set_for_ramino_is_read_by_the_code() -> None:
    """The ``RAMINO_*`` variables given to ``ramino`` processes (compose, Kubernetes, the
    systemd env files) are read by the code; the workers' variables aside while it lacks them."""
    read = code_variables()
    pending = WORKER_VARIABLES - read if missing_worker_flags() else set()
    used: dict[str, set[str]] = {}
    for command in compose_commands() + k8s_commands():
        for name in command.env:
            if name.startswith("RAMINO_"):
                used.setdefault(name, set()).add(command.where)
    for path in sorted((DEPLOY / "systemd").glob("*.env.example")):
        for name in env_file_names(path):
            used.setdefault(name, set()).add(path.name)
    assert {"RAMINO_STORE", "RAMINO_SERVER_PASSWORD_FILE", "RAMINO_METRICS"} <= set(used)
    unknown = {name: sorted(where) for name, where in used.items() if name not in read | pending}
    assert {} == unknown


def test_the_workers_flags_and_variables_are_the_parsers() -> None:
    """``--worker``/``--shards``/``--lease-ttl`` and ``RAMINO_WORKER``/``RAMINO_SHARDS``/
    ``RAMINO_LEASE_TTL``, used by deploy/, exist in ``ramino serve``."""
    missing = missing_worker_flags()
    if missing == set(WORKER_FLAGS):
        pytest.skip("ramino serve has no --worker, --shards or --lease-ttl yet")
    assert set() == missing
    used_flags = set().union(*(flags_of(command.argv) for command in all_commands()))
    assert {"--worker", "--shards"} <= used_flags
    assert set() == WORKER_VARIABLES - code_variables()


# Docker and compose ----------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """deploy/Dockerfile's instructions (continuations joined, comments dropped)."""
    instructions = []
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_the_dockerfile_installs_the_locked_project_with_uv() -> None:
    """python:3.11-slim; the Makefile's uv; ``uv sync --frozen`` (uv.lock) without the dev
    group; every package of the wheel copied; ``ramino`` as the entrypoint; the files it copies
    exist."""
    instructions = dockerfile()
    assert ("FROM", "python:3.11-slim") == instructions[0]
    runs = [rest for keyword, rest in instructions if keyword == "RUN"]
    uv_version = re.search(r"^UV_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert uv_version is not None
    assert any(f"uv=={uv_version.group(1)}" in run for run in runs)
    syncs = [run for run in runs if run.startswith("uv sync")]
    assert syncs
    assert all("--frozen" in run and "--no-dev" in run for run in syncs)
    copied = []
    for keyword, rest in instructions:
        if keyword == "COPY":
            *sources, _target = rest.split()
            copied += sources
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert set(packages) <= set(copied)
    assert {"pyproject.toml", "uv.lock", "README.md"} <= set(copied)
    assert "ramino" in project["project"]["scripts"]
    assert ("ENTRYPOINT", '["ramino"]') in instructions
    assert any(keyword == "USER" and rest == "ramino" for keyword, rest in instructions)


def _nats_services(spec: Doc) -> dict[str, Doc]:
    return {
        name: service
        for name, service in spec["services"].items()
        if str(service.get("image", "")).startswith("nats:")
    }


def _mounts(service: Doc) -> dict[str, str]:
    """A compose service's volumes: container path -> source."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_mode = volume.split(":")
        mounts[target] = source
    return mounts


def test_compose_nats_nodes_run_node_conf_with_its_variables() -> None:
    """Three nodes, each running deploy/nats/node.conf with exactly the variables it reads, a
    name of its own, routes to the three nodes' cluster ports, and the generated
    authorization.conf beside node.conf."""
    spec = compose()
    nodes = _nats_services(spec)
    assert 3 == len(nodes)
    wanted = node_conf_variables()
    assert "RAMINO_NATS_MQTT_PORT" in wanted
    names = set()
    for name, service in nodes.items():
        env = compose_environment(service)
        assert wanted == set(env), name
        names.add(env["RAMINO_NATS_NAME"])
        command = service["command"]
        assert "-c" == command[0]
        conf = PurePosixPath(command[1])
        mounts = _mounts(service)
        assert (COMPOSE / mounts[str(conf)]).resolve() == NODE_CONF
        routes = {env[f"RAMINO_NATS_ROUTE_{index}"] for index in (1, 2, 3)}
        cluster = env["RAMINO_NATS_CLUSTER_PORT"]
        assert {f"nats-route://{node}:{cluster}" for node in nodes} == routes
        assert "nats-auth" == mounts[str(conf.parent)]
        assert env["RAMINO_NATS_STORE"].startswith(
            tuple(f"{target}/" for target, source in mounts.items() if source.endswith("-data"))
        )
    assert 3 == len(names)
    # The accounts job writes authorization.conf into that volume.
    accounts = spec["services"]["accounts"]
    outputs = [
        option(command.argv, "--output")
        for command in compose_commands()
        if command.where == "compose accounts" and "nats-config" in command.argv
    ]
    assert 1 == len(outputs)
    output = PurePosixPath(outputs[0])
    assert "authorization.conf" == output.name
    assert "nats-auth" == _mounts(accounts)[str(output.parent)]


def _command(where: str, subcommand: str) -> Command:
    found = [
        command
        for command in compose_commands() + k8s_commands()
        if command.where == where and command.argv[0] == subcommand
    ]
    assert 1 == len(found), f"one `ramino {subcommand}` in {where}"
    return found[0]


def test_compose_workers_and_bots_reach_every_nats_mqtt_listener() -> None:
    """The workers' and the bots' ``--broker`` lists name each node once, on the MQTT port
    that node's node.conf listens on."""
    spec = compose()
    nodes = _nats_services(spec)
    expected = {
        (name, int(compose_environment(service)["RAMINO_NATS_MQTT_PORT"]))
        for name, service in nodes.items()
    }
    for where, subcommand in (("compose worker", "serve"), ("compose bots", "bots")):
        argv = _command(where, subcommand).argv
        listed = broker_nodes(option(argv, "--broker"))
        assert expected == set(listed)
        assert len(listed) == len(set(listed))
    # The workers wait for every node; the bots for the workers.
    assert set(nodes) <= set(spec["services"]["worker"]["depends_on"])
    assert "worker" in spec["services"]["bots"]["depends_on"]


def test_compose_secrets_and_accounts_agree() -> None:
    """The server account's password file is the secret the accounts job adds ramino-server
    with; the bots' password is the one it gives bot-1..bot-N, N being the bots' count; the
    store and the database share one password variable."""
    spec = compose()
    services = spec["services"]
    worker = _command("compose worker", "serve")
    secret = PurePosixPath(worker.env["RAMINO_SERVER_PASSWORD_FILE"])
    assert PurePosixPath("/run/secrets") == secret.parent
    assert secret.name in services["worker"]["secrets"]
    adds = [
        command.argv
        for command in compose_commands()
        if command.where == "compose accounts" and "add" in command.argv
    ]
    by_name = {argv[argv.index("add") + 1]: argv for argv in adds}
    assert str(secret) == option(by_name["ramino-server"], "--password-file")
    bots = _command("compose bots", "bots").argv
    assert option(bots, "--password-file") == option(by_name["bot-$i"], "--password-file")
    script = services["accounts"]["command"][0]
    assert '"$$i" -le "$$BOT_COUNT"' in script  # bot-1 .. bot-BOT_COUNT
    assert option(bots, "--count") == services["accounts"]["environment"]["BOT_COUNT"]
    assert "bot" == option(bots, "--prefix")  # names bot-1, bot-2, ... (bots/client.py)
    for path in (secret, PurePosixPath(option(bots, "--password-file"))):
        assert path.name in spec["secrets"]
        assert path.name in services["accounts"]["secrets"]
        assert spec["secrets"][path.name]["file"].startswith("./secrets/")
    postgres = services["postgres"]["environment"]
    assert ["POSTGRES_PASSWORD"] == compose_variables(worker.env["RAMINO_STORE"])
    assert ["POSTGRES_PASSWORD"] == compose_variables(postgres["POSTGRES_PASSWORD"])
    store = urlsplit(interpolate(worker.env["RAMINO_STORE"], {"POSTGRES_PASSWORD": "pw"}))
    assert "postgresql" == store.scheme
    assert ("postgres", 5432, "pw") == (store.hostname, store.port, store.password)
    assert (store.username, store.path) == (
        postgres["POSTGRES_USER"],
        f"/{postgres['POSTGRES_DB']}",
    )
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert {"deploy/compose/secrets/", "deploy/compose/.env"} <= set(ignored)


def test_compose_bind_mounts_exist() -> None:
    """Every file compose mounts from the repository is there."""
    for name, service in compose()["services"].items():
        for target, source in _mounts(service).items():
            if source.startswith("."):
                assert (COMPOSE / source).exists(), f"{name}: {source} -> {target}"


def test_prometheus_scrapes_the_metrics_ports_of_workers_and_bots() -> None:
    """Prometheus finds every worker replica by the service's DNS name on the port of its
    ``--metrics``, and the bots on theirs; the worker's health check probes that port."""
    spec = compose()
    config = load_yaml(COMPOSE / "prometheus.yml")[0]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    worker = _command("compose worker", "serve").argv
    port = listen_port(option(worker, "--metrics"))
    discovery = jobs["ramino"]["dns_sd_configs"][0]
    assert (["worker"], "A", port) == (discovery["names"], discovery["type"], discovery["port"])
    assert f"127.0.0.1:{port}/metrics" in " ".join(
        spec["services"]["worker"]["healthcheck"]["test"]
    )
    bots = _command("compose bots", "bots").argv
    bots_port = listen_port(option(bots, "--metrics"))
    assert [f"bots:{bots_port}"] == jobs["ramino-bots"]["static_configs"][0]["targets"]
    mounts = _mounts(spec["services"]["prometheus"])
    assert (COMPOSE / mounts["/etc/prometheus/prometheus.yml"]).resolve() == (
        COMPOSE / "prometheus.yml"
    )


def test_grafana_provisions_prometheus_and_the_dashboard() -> None:
    """The provisioned data source is the default Prometheus one, at the Prometheus service;
    the dashboard provider reads the folder where deploy/grafana/ramino.json is mounted; the
    dashboard picks a data source of that type; its metrics are ones a server exposes."""
    spec = compose()
    grafana = _mounts(spec["services"]["grafana"])
    sources = {(COMPOSE / source).resolve(): target for target, source in grafana.items()}
    datasource_file = COMPOSE / "grafana" / "datasource.yaml"
    provider_file = COMPOSE / "grafana" / "dashboards.yaml"
    assert sources[datasource_file].startswith("/etc/grafana/provisioning/datasources/")
    assert sources[provider_file].startswith("/etc/grafana/provisioning/dashboards/")
    (source,) = load_yaml(datasource_file)[0]["datasources"]
    assert ("prometheus", True) == (source["type"], source["isDefault"])
    url = urlsplit(source["url"])
    assert "prometheus" in spec["services"]
    assert url.hostname == "prometheus"
    assert f"127.0.0.1:{url.port}:{url.port}" in spec["services"]["prometheus"]["ports"]
    (provider,) = load_yaml(provider_file)[0]["providers"]
    dashboard_path = PurePosixPath(sources[DASHBOARD])
    assert str(dashboard_path.parent) == provider["options"]["path"]
    model = json.loads(DASHBOARD.read_text())
    variables = {variable["name"]: variable for variable in model["templating"]["list"]}
    assert ("datasource", "prometheus") == (
        variables["datasource"]["type"],
        variables["datasource"]["query"],
    )
    families = {
        family.name: family.type
        for family in text_string_to_metric_families(Metrics().exposition().decode())
    }
    used = dashboard_metrics()
    assert "ramino_moves_total" in used
    assert [] == sorted(name for name in used if not exposed(name, families))


# Kubernetes ------------------------------------------------------------------------------------


def test_k8s_nats_config_map_is_node_conf() -> None:
    """The ConfigMap holds deploy/nats/node.conf byte for byte."""
    config_map = k8s_object("ConfigMap", "nats-config")
    assert NODE_CONF.read_text() == config_map["data"]["node.conf"]


def test_k8s_nats_statefulset() -> None:
    """Three replicas behind a headless Service; node.conf's variables exactly, the node's name
    from its pod, routes to the three pods' cluster ports through that Service; the MQTT port
    is the one node.conf listens on; node.conf and the authorization Secret side by side."""
    service = k8s_object("Service", "nats")
    statefulset = k8s_object("StatefulSet", "nats")
    spec = statefulset["spec"]
    assert 3 == spec["replicas"]
    assert "nats" == spec["serviceName"]
    assert "None" == service["spec"]["clusterIP"]
    assert service["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    (container,) = containers(statefulset)
    env = k8s_env(container)
    assert node_conf_variables() == set(env)
    assert "metadata.name" == env["RAMINO_NATS_NAME"]["valueFrom"]["fieldRef"]["fieldPath"]
    value = {name: str(entry.get("value", "")) for name, entry in env.items()}
    routes = {value[f"RAMINO_NATS_ROUTE_{index}"] for index in (1, 2, 3)}
    cluster = value["RAMINO_NATS_CLUSTER_PORT"]
    assert {f"nats-route://nats-{index}.nats:{cluster}" for index in range(3)} == routes
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["mqtt"] == int(value["RAMINO_NATS_MQTT_PORT"])
    assert ports["cluster"] == int(cluster)
    assert ports["monitor"] == int(value["RAMINO_NATS_HTTP_PORT"])
    assert ports["client"] == int(value["RAMINO_NATS_PORT"])
    for port in service["spec"]["ports"]:
        assert port["targetPort"] in ports
        assert port["port"] == ports[port["targetPort"]]
    for probe in ("readinessProbe", "livenessProbe"):
        assert "monitor" == container[probe]["httpGet"]["port"]
    assert ["-c", "/etc/nats/node.conf"] == container["args"]
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in spec["template"]["spec"]["volumes"]}
    projected = volumes[mounts["/etc/nats"]]["projected"]["sources"]
    assert {"name": "nats-config"} == projected[0]["configMap"]
    assert "nats-auth" == projected[1]["secret"]["name"]
    store = value["RAMINO_NATS_STORE"]
    claims = {claim["metadata"]["name"] for claim in spec["volumeClaimTemplates"]}
    assert any(store.startswith(f"{path}/") and name in claims for path, name in mounts.items())


def test_k8s_workers() -> None:
    """The workers reach the three NATS pods on their MQTT port; serve metrics on the port their
    probes and the headless metrics Service use; take their name from the pod, the store from a
    Secret and the server password from a mounted Secret."""
    deployment = k8s_object("Deployment", "ramino-worker")
    (container,) = containers(deployment)
    argv = [str(word) for word in container["args"]]
    nats_port = k8s_env(containers(k8s_object("StatefulSet", "nats"))[0])
    mqtt = int(nats_port["RAMINO_NATS_MQTT_PORT"]["value"])
    assert [(f"nats-{index}.nats", mqtt) for index in range(3)] == broker_nodes(
        option(argv, "--broker")
    )
    metrics = listen_port(option(argv, "--metrics"))
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert metrics == ports["metrics"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert ("/metrics", "metrics") == (
            container[probe]["httpGet"]["path"],
            container[probe]["httpGet"]["port"],
        )
    service = k8s_object("Service", "ramino-metrics")
    assert "None" == service["spec"]["clusterIP"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert ("metrics", metrics) == (port["targetPort"], port["port"])
    assert str(metrics) == service["metadata"]["annotations"]["prometheus.io/port"]
    env = k8s_env(container)
    assert "metadata.name" == env["RAMINO_WORKER"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert {"name": "ramino-store", "key": "url"} == env["RAMINO_STORE"]["valueFrom"][
        "secretKeyRef"
    ]
    password = PurePosixPath(env["RAMINO_SERVER_PASSWORD_FILE"]["value"])
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {
        volume["name"]: volume for volume in deployment["spec"]["template"]["spec"]["volumes"]
    }
    secret = volumes[mounts[str(password.parent)]]["secret"]
    assert ("ramino-server", "password") == (secret["secretName"], password.name)
    user = deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert f"--uid {user}" in " ".join(rest for _, rest in dockerfile())


def _kubectl() -> str | None:
    binary = shutil.which("kubectl")
    if binary is None:
        reason = "kubectl is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return binary


def test_kubectl_kustomize_renders_the_manifests() -> None:
    """``kubectl kustomize deploy/k8s`` (no cluster needed) renders exactly the objects of the
    files, each in the ``ramino`` namespace."""
    binary = _kubectl()
    assert binary is not None
    result = subprocess.run(
        [binary, "kustomize", str(K8S)], capture_output=True, text=True, timeout=120, check=False
    )
    assert 0 == result.returncode, result.stderr
    rendered = [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]
    expected = sorted((doc["kind"], doc["metadata"]["name"]) for doc in k8s_docs())
    assert expected == sorted((doc["kind"], doc["metadata"]["name"]) for doc in rendered)
    for doc in rendered:
        if doc["kind"] != "Namespace":
            assert "ramino" == doc["metadata"]["namespace"], doc["metadata"]["name"]
    config_map = next(doc for doc in rendered if doc["kind"] == "ConfigMap")
    assert NODE_CONF.read_text() == config_map["data"]["node.conf"]


# systemd ---------------------------------------------------------------------------------------


def test_systemd_worker_template() -> None:
    """``ramino-worker@NAME`` runs ``ramino serve --worker NAME`` with the shared env file and
    its own, optional one; the units' env files set only variables the code reads (checked
    above) and the worker's metrics port."""
    worker = unit(DEPLOY / "systemd" / "ramino-worker@.service")
    service = worker["Service"]
    argv = shlex.split(service["ExecStart"])
    assert ["serve", "--worker", "%i"] == argv[1:4]
    files = service["EnvironmentFile"].split("\n")
    assert ["/etc/ramino/ramino.env", "-/etc/ramino/worker-%i.env"] == files
    assert "RAMINO_METRICS" in env_file_names(DEPLOY / "systemd" / "worker.env.example")
    assert "multi-user.target" == worker["Install"]["WantedBy"]


# Mosquitto ---------------------------------------------------------------------------------------


def test_mosquitto_websockets_listener_is_the_one_the_docs_name() -> None:
    """deploy/mosquitto/mosquitto.conf has one ``protocol websockets`` listener besides the TCP
    one; the port the docs give ``--web-broker`` is its port. (Its logins and ACL are checked on
    a running Mosquitto: tests/net/test_mosquitto_websockets.py.)"""
    listeners: list[tuple[str, str]] = []
    for line in (DEPLOY / "mosquitto" / "mosquitto.conf").read_text().splitlines():
        words = line.split()
        if words[:1] == ["listener"]:
            listeners.append((words[1], "mqtt"))
        elif words[:1] == ["protocol"]:
            listeners[-1] = (listeners[-1][0], words[1])
    assert [("1883", "mqtt"), ("8083", "websockets")] == listeners
    for doc in (DEPLOY / "mosquitto" / "README.md", ROOT / "docs" / "web.md"):
        ports = re.findall(r"--web-broker ws://[^:/\s]+:(\d+)/mqtt", doc.read_text())
        assert ports, doc
        assert {"8083"} == set(ports), doc
