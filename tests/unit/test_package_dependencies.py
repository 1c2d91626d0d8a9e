"""The domain package's subpackages depend on each other in one direction only, with no import cycle,
and only the adapters talk to AWS and OpenSearch; the client reaches the domain package only from
its operator tools (``python -m tools.dependency_graph`` prints both graphs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.dependency_graph import (
    ALLOWED,
    CLIENT_ALLOWED,
    CLIENT_DIR,
    PACKAGE_DIR,
    both,
    build,
    full_report,
    report,
    subpackage,
)

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
)


def test_every_subpackage_says_what_it_holds_and_is_in_the_table() -> None:
    for name in SUBPACKAGES:
        init = PACKAGE_DIR / name / "__init__.py"
        assert init.is_file(), init
        assert '"""' in init.read_text(), f"{init}: a docstring saying what lives there"
        assert name in ALLOWED
    for name in sorted(_CAPABILITIES_NAMED):
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


def _write(root: Path, files: dict[str, str], name: str = "rag_ingest") -> Path:
    package = root / name
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
    assert full_report(both()) in doc, "docs/architecture.md: paste the output of python -m tools.dependency_graph"


# ---------------------------------------------------------------- the client
_CLIENT_PACKAGES = ("cli", "retrievers", "operator")


def test_the_client_says_what_each_part_may_import() -> None:
    assert "May import:" in (CLIENT_DIR / "__init__.py").read_text()
    for name in _CLIENT_PACKAGES:
        text = (CLIENT_DIR / name / "__init__.py").read_text()
        assert "May import:" in text, f"rag_ingest_client/{name}: its docstring says what it may import"
        assert name in CLIENT_ALLOWED
    modules = {path.stem for path in CLIENT_DIR.glob("*.py")} - {"__init__"}
    assert modules <= set(CLIENT_ALLOWED), modules


def test_the_client_reaches_the_domain_package_only_from_its_operator_tools() -> None:
    graph = build(CLIENT_DIR)
    assert len(graph.modules) > 15  # the whole client was read
    assert graph.forbidden() == [], report(graph)
    assert graph.cycles() == [], report(graph)
    users = {subpackage(module, graph.package) for module, foreign in graph.foreign.items() if foreign}
    assert users == {"operator"}, users


_WITHOUT_THE_DOMAIN = r"""
import sys
for name in ("rag_ingest", "infra", "boto3", "botocore", "pydantic", "langchain_core", "llama_index"):
    sys.modules[name] = None  # an import of any of them fails, as in a venv with the client alone
from rag_ingest_client.cli import main
try:
    main(["--help"])
except SystemExit as exit:
    assert exit.code == 0, exit.code
print(main(["preflight", "--cdk-json", "cdk.json"]), main(["reap", "--dry-run"]), main(["--stack", "S", "ls"]))
"""


def test_the_command_runs_without_the_domain_package() -> None:
    """The user commands need HTTP only; the operator's tools say they need the checkout, in one line."""
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_THE_DOMAIN],
        cwd=CLIENT_DIR.parents[1],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage: rag-ingest" in result.stdout and result.stdout.splitlines()[-1] == "1 1 1"
    errors = result.stderr.splitlines()
    assert len(errors) == 3 and all(line.startswith("error: ") for line in errors), errors
    assert "needs the checkout" not in errors[2] and "boto3" in errors[2]  # --stack: the aws extra
    assert all("checkout" in line for line in errors[:2]), errors


def test_the_check_finds_the_domain_package_imported_outside_the_operator_tools(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "http.py": "",
            "retrievers/__init__.py": "",
            "retrievers/passages.py": "from rag_ingest.core import ids\nfrom rag_ingest_client import http\n",
            "operator/__init__.py": "",
            "operator/commands.py": "import boto3\nfrom rag_ingest.core import ids\nfrom infra import config\n",
        },
        name="rag_ingest_client",
    )
    graph = build(package)
    assert graph.forbidden() == [
        "rag_ingest_client.retrievers.passages imports rag_ingest.core (retrievers -> rag_ingest)"
    ]
