"""The test tree's own rule: no two test modules share a basename.

Most test folders are not packages, so pytest imports each module by its basename: two
``test_x.py`` in different folders collide when one run collects both (``make test`` does; ``make
check`` collects unit and infra only, so it would not notice)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    folders: dict[str, list[str]] = defaultdict(list)
    for module in TESTS.rglob("test_*.py"):
        folders[module.name].append(str(module.parent.relative_to(TESTS)))
    assert len(folders) > 100  # the tree was found
    shared = {name: sorted(places) for name, places in folders.items() if len(places) > 1}
    assert not shared, f"rename one of each pair (pytest imports test modules by basename): {shared}"
