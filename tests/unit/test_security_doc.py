"""docs/security.md's threat model names real tests: every ``file::test`` it cites exists.

Each boundary the issue names has its table, every table row names what guards it, and every cited
``tests/...py::test_name`` is a test function defined in that file. Rows marked pending (controls being
added beside the page) name only a file; they are listed so that they are not forgotten.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "security.md"
CITED = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
BOUNDARIES = (
    "The browser (the page)",
    "The API",
    "S3: uploads and presigned URLs",
    "Sources: S3 source buckets and the web connector",
    "Webhooks",
    "MCP (stdio and HTTP)",
    "Operators: deploy, redrive, CLI",
    "Supply chain",
)
STRIDE = re.compile(r"^\| (?:[STRIDE](?:/[STRIDE])*)(?: \([A-Z]+\))?: ")


def _sections() -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif current:
            sections[current].append(line)
    return sections


def test_every_boundary_has_a_table_of_threats() -> None:
    sections = _sections()
    for boundary in BOUNDARIES:
        rows = [line for line in sections.get(boundary, []) if STRIDE.match(line)]
        assert len(rows) >= 4, f"{boundary}: {len(rows)} threat rows"


def test_every_row_names_what_guards_it() -> None:
    for boundary in BOUNDARIES:
        for row in (line for line in _sections()[boundary] if STRIDE.match(line)):
            guard = row.rstrip(" |").rsplit(" | ", 1)[-1]
            assert CITED.search(guard) or ("pending" in row and "test: tests/" in guard), row


def test_every_cited_test_exists() -> None:
    cited = CITED.findall(DOC.read_text(encoding="utf-8"))
    assert len(cited) > 100
    missing = []
    for path, name in sorted(set(cited)):
        source = ROOT / path
        if not source.is_file() or not re.search(rf"^(?:async )?def {name}\(", source.read_text(), re.M):
            missing.append(f"{path}::{name}")
    assert not missing, "docs/security.md cites tests that do not exist:\n" + "\n".join(missing)
