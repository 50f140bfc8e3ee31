"""The rules engine stays sans-IO: no I/O, clocks, environment or global randomness."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SANS_IO_PACKAGES = [ROOT / "server" / "engine"]
FORBIDDEN_MODULES = {
    "asyncio",
    "socket",
    "selectors",
    "ssl",
    "threading",
    "multiprocessing",
    "subprocess",
    "time",
    "datetime",
    "os",
    "sys",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "logging",
    "sqlite3",
    "urllib",
    "http",
}
ALLOWED_RANDOM_NAMES = {"Random"}


def _sources() -> list[Path]:
    return sorted(path for package in SANS_IO_PACKAGES for path in package.rglob("*.py"))


def test_sans_io_packages_have_sources() -> None:
    """The scan looks at real files (a moved package would make it vacuous)."""
    assert len(_sources()) >= 5


@pytest.mark.parametrize("path", _sources(), ids=lambda path: path.name)
def test_engine_module_imports_no_io(path: Path) -> None:
    """No engine module imports an I/O, clock, environment or concurrency module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert set() == imported & FORBIDDEN_MODULES


@pytest.mark.parametrize("path", _sources(), ids=lambda path: path.name)
def test_engine_module_uses_only_injected_random_generators(path: Path) -> None:
    """``random`` is used only for the ``random.Random`` type: never its global generator."""
    tree = ast.parse(path.read_text(), filename=str(path))
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "random"
    }
    from_imports = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "random"
        for alias in node.names
    }
    assert set() == (used | from_imports) - ALLOWED_RANDOM_NAMES
