"""The domain package's subpackages depend on each other in one direction only, with no import cycle,
and only the adapters talk to AWS and OpenSearch (``python -m tools.dependency_graph`` prints it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.dependency_graph import ALLOWED, PACKAGE_DIR, build, report, subpackage

pytestmark = pytest.mark.unit

_CAPABILITIES_NAMED = (
    "core",
    "embeddings",
    "parsing",
    "ingest",
    "retrieval",
    "documents",
    "operations",
    "live",
    "webhooks",
)
SUBPACKAGES = (
    "core",
    "embeddings",
    "parsing",
    "ingest",
    "retrieval",
    "documents",
    "operations",
    "live",
    "webhooks",
    "adapters",
    "cli",
    "integrations",
)


def test_every_subpackage_says_what_it_holds_and_is_in_the_table() -> None:
    for name in SUBPACKAGES:
        init = PACKAGE_DIR / name / "__init__.py"
        assert init.is_file(), init
        assert '"""' in init.read_text(), f"{init}: a docstring saying what lives there"
        assert name in ALLOWED
    for name in (*sorted(_CAPABILITIES_NAMED), "integrations"):
        text = (PACKAGE_DIR / name / "__init__.py").read_text()
        assert "May import:" in text, f"rag_ingest/{name}: its docstring says what it may import"
        said = {word.strip("`,.() ") for word in text.split("May import:", 1)[1].split("\n\n")[0].split()}
        assert ALLOWED[name] <= said, (name, sorted(ALLOWED[name] - said))
    # Nothing but the composition root and these packages at the top level.
    top_level = {path.stem for path in PACKAGE_DIR.glob("*.py")}
    assert top_level == {"__init__", "wiring"}, top_level


def test_the_dependency_direction_holds_and_there_is_no_cycle() -> None:
    graph = build()
    assert len(graph.modules) > 60  # the whole package was read
    assert graph.forbidden() == [], report(graph)
    assert graph.cycles() == [], report(graph)
    # Every module sits in a known subpackage.
    assert {subpackage(module) for module in graph.modules} <= {*ALLOWED, "rag_ingest", "wiring"}


def _write(root: Path, files: dict[str, str]) -> Path:
    package = root / "rag_ingest"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_the_check_finds_a_wrong_direction_a_cycle_and_a_client_outside_the_adapters(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/models.py": "from rag_ingest.ingest import pdf\n",
            "ingest/__init__.py": "",
            "ingest/pdf.py": "import boto3\nfrom rag_ingest.core import models\n",
            "documents/__init__.py": "",
            # Under TYPE_CHECKING an import never runs: not an edge.
            "documents/service.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rag_ingest.adapters import aws\n"
            ),
        },
    )
    graph = build(package)
    assert graph.forbidden() == [
        "rag_ingest.core.models imports rag_ingest.ingest.pdf (core -> ingest)",
        "rag_ingest.ingest.pdf imports boto3 (only adapters talk to AWS and OpenSearch)",
    ]
    assert graph.cycles() == [["rag_ingest.core.models", "rag_ingest.ingest.pdf"]]
    assert "forbidden imports: 2" in report(graph) and "import cycles: 1" in report(graph)


def test_docs_architecture_shows_the_graph_as_it_stands() -> None:
    doc = (PACKAGE_DIR.parents[3] / "docs" / "architecture.md").read_text()
    assert report(build()) in doc, "docs/architecture.md: paste the output of python -m tools.dependency_graph"
