"""The suite is an outside client: it imports nothing of the server, and its own checker
catches what it is meant to catch."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conformance.play import card_leaks
from tests.conformance.wire import Received, encode

HERE = Path(__file__).resolve().parent
FORBIDDEN = ("protocol", "server", "bots", "bench", "loadtest", "examples")
"""The project's own packages: a client written from the documents needs none of them."""


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, by absolute name (relative imports are resolved against
    ``tests.conformance``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.add("tests.conformance" + ("." + node.module if node.module else ""))
            elif node.module is not None:
                names.add(node.module)
    return names


def test_the_suite_imports_none_of_the_projects_packages() -> None:
    """No module of tests/conformance imports `protocol`, `server`, `bots` (or other project
    code, or the other test packages that do): only the standard library, pytest, aiomqtt,
    msgpack and the suite itself."""
    offending: dict[str, list[str]] = {}
    files = sorted(HERE.glob("*.py"))
    assert len(files) > 5
    for path in files:
        for name in imported_modules(path):
            top = name.split(".")[0]
            outside_tests = top == "tests" and not name.startswith("tests.conformance")
            if top in FORBIDDEN or outside_tests:
                offending.setdefault(path.name, []).append(name)
    assert {} == offending


def test_the_import_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    """The scan itself finds plain, from- and nested imports."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import server.net\nfrom protocol import codec\n"
        "def later():\n    from bots.greedy import X\n"
    )
    assert {"server.net", "protocol", "bots.greedy"} == imported_modules(sample)


def _update(
    seat: int, seq: int, hand: list[int], events: list[dict[str, object]]
) -> dict[str, object]:
    view = {"hand": hand, "pile": [9], "melds": [], "hand_number": 1}
    return {"type": "update", "seat": seat, "seq": seq, "events": events, "view": view}


def test_the_secrecy_check_finds_a_leaked_draw() -> None:
    """`card_leaks` flags seat 1's drawn card shown to seat 0, and not the same event with -1
    (so a passing secrecy test means something)."""
    dealt = {"seq": 1, "event": {"type": "dealt", "hand": 1, "order": [], "cuts": []}}
    seat0 = [_update(0, 1, [1, 2], [dealt])]
    seat1 = [_update(1, 1, [3, 4], [dealt]), _update(1, 2, [3, 4, 5], [])]
    leaked = {"seq": 2, "event": {"type": "drew", "seat": 1, "card": 5}}
    hidden = {"seq": 2, "event": {"type": "drew", "seat": 1, "card": -1}}
    seat0_leaked = [*seat0, _update(0, 2, [1, 2], [leaked])]
    seat0_hidden = [*seat0, _update(0, 2, [1, 2], [hidden])]

    def received(updates: list[dict[str, object]]) -> list[Received]:
        return [Received("ramino/v1/inbox/a", encode(u), u, False) for u in updates]

    assert [(0, "ramino/v1/inbox/a", 2, 5, 1)] == card_leaks(
        [seat0_leaked, seat1], {0: received(seat0_leaked)}
    )
    assert [] == card_leaks([seat0_hidden, seat1], {0: received(seat0_hidden)})
    # The upcard (public since the deal) may be seen even after seat 1 takes it.
    took = {"seq": 2, "event": {"type": "took_discard", "seat": 1, "cards": [9]}}
    seat1_took = [_update(1, 1, [3, 4], [dealt]), _update(1, 2, [3, 4, 9], [])]
    seat0_took = [*seat0, _update(0, 2, [1, 2], [took])]
    assert [] == card_leaks([seat0_took, seat1_took], {0: received(seat0_took)})
