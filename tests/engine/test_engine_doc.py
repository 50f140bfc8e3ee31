"""docs/engine.md: every example of the guide runs as written."""

from __future__ import annotations

import doctest
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "engine.md"


def test_every_example_of_the_engine_guide_holds() -> None:
    """The ``>>>`` examples of docs/engine.md run in order, in one namespace; none may fail."""
    results = doctest.testfile(
        str(GUIDE),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        raise_on_error=False,
        verbose=False,
    )
    assert 0 == results.failed
    # Every section has examples: a guide whose fences stopped being read would attempt none.
    assert results.attempted >= 80
