"""docs/architecture.md names only what exists, so it cannot go stale silently.

Every backticked repository path (with a ``/``, ending in ``.py``, ``.js`` or ``.md``, or naming a
folder) must exist, every backticked dotted name under one of the project's packages
(``rag_ingest.ingest.pipeline.Pipeline.index``, ``functions.stages.app.validate``) must resolve to a
module and to the classes, functions and constants it goes on to name, and every relative link
must lead to a file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
LAYER = ROOT / "layers" / "common" / "python"
# Dotted names are checked when they start with one of these (rag_ingest lives in the layer).
PACKAGE_ROOTS = {
    "rag_ingest": LAYER,
    "rag_ingest_client": ROOT / "client",
    "functions": ROOT,
    "infra": ROOT,
    "local": ROOT,
    "tests": ROOT,
}
TOP_LEVEL = frozenset(entry.name for entry in ROOT.iterdir() if not entry.name.startswith("."))

CODE_SPAN = re.compile(r"`([^`\n]+)`")
# Placeholders ({tenant}, <name>) and prose make a span not a path: only plain path characters.
PATH_SPAN = re.compile(r"[A-Za-z0-9_.\-/]+")
DOTTED_SPAN = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
RELATIVE_LINK = re.compile(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)")
MIN_REFERENCES = 40  # the doc names far more than this: fewer means the extraction broke


def path_references(text: str) -> list[str]:
    """Backticked spans that look like repository paths."""
    found = []
    for span in CODE_SPAN.findall(text):
        if "/" not in span or not PATH_SPAN.fullmatch(span):
            continue
        is_file = span.endswith((".py", ".js", ".md"))
        is_folder = span.endswith("/") or span.split("/")[0] in TOP_LEVEL
        if is_file or is_folder:
            found.append(span)
    return found


def dotted_references(text: str) -> list[str]:
    """Backticked dotted names under the project's packages."""
    return [
        span for span in CODE_SPAN.findall(text) if DOTTED_SPAN.fullmatch(span) and span.split(".")[0] in PACKAGE_ROOTS
    ]


def path_exists(reference: str) -> bool:
    bases = [ROOT, LAYER] if reference.startswith("rag_ingest/") else [ROOT]
    for base in bases:
        target = base / reference.rstrip("/")
        if target.is_dir() if reference.endswith("/") else target.exists():
            return True
    return False


def _defined_names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Classes, functions and assigned names defined directly in ``body`` (imports do not count)."""
    names: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update({target.id: node for target in node.targets if isinstance(target, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


def unresolved_part(reference: str) -> str | None:
    """None when ``reference`` resolves; else the part that does not."""
    parts = reference.split(".")
    base = PACKAGE_ROOTS[parts[0]]
    for split in range(len(parts), 0, -1):
        candidate = base.joinpath(*parts[:split])
        if candidate.with_suffix(".py").is_file():
            source = candidate.with_suffix(".py")
        elif candidate.is_dir():
            source = candidate / "__init__.py"
        else:
            continue
        body: list[ast.stmt] = ast.parse(source.read_text()).body if source.is_file() else []
        for attribute in parts[split:]:
            node = _defined_names(body).get(attribute)
            if node is None:
                return f"{attribute} (not defined in {source.relative_to(ROOT)})"
            body = node.body if isinstance(node, ast.ClassDef) else []
        return None
    return f"{parts[0]}: no such module"


def test_the_extraction_finds_paths_and_names_and_skips_placeholders() -> None:
    sample = (
        "`functions/stages/app.py` `local/runtime/` `local/runtime` `raw/{tenant}/{file}` "
        "`embeddings/NNNNNN.json` `application/json` `rag_ingest.core.ids.chunk_id` `aws_cdk.Stack` `CODE: detail`"
    )
    assert path_references(sample) == ["functions/stages/app.py", "local/runtime/", "local/runtime"]
    assert dotted_references(sample) == ["rag_ingest.core.ids.chunk_id"]
    assert unresolved_part("rag_ingest.ingest.pipeline.Pipeline.index") is None
    assert unresolved_part("rag_ingest.ingest.pipeline.Pipeline.nothing") is not None
    assert unresolved_part("rag_ingest.no_such_module") is not None
    assert not path_exists("functions/no_such_function/app.py")


def test_the_doc_names_enough_to_be_worth_checking() -> None:
    text = DOC.read_text()
    assert len(set(path_references(text))) >= MIN_REFERENCES
    assert len(set(dotted_references(text))) >= MIN_REFERENCES


def test_every_path_the_doc_names_exists() -> None:
    missing = sorted({reference for reference in path_references(DOC.read_text()) if not path_exists(reference)})
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_dotted_name_the_doc_names_resolves() -> None:
    unresolved = {
        reference: why
        for reference in sorted(set(dotted_references(DOC.read_text())))
        if (why := unresolved_part(reference)) is not None
    }
    assert unresolved == {}, f"docs/architecture.md names what does not exist: {unresolved}"


def test_every_relative_link_leads_to_a_file() -> None:
    links = RELATIVE_LINK.findall(DOC.read_text())
    assert links, "the doc links its neighbours (local-stack.md, cli.md)"
    missing = sorted(link for link in links if not (DOC.parent / link).exists())
    assert missing == [], f"docs/architecture.md links to missing files: {missing}"


def test_the_readme_links_it() -> None:
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text()
