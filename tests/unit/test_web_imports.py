"""The page's ES modules (web/*.js) import each other without a cycle, static or dynamic imports alike.

A helper two views share lives in a module both import (web/format.js), never in one of the views.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

WEB = Path(__file__).resolve().parents[2] / "web"
# `import ... from "./x.js"`, `import "./x.js"` and `import("./x.js")`: relative imports only (not vendor URLs).
LOCAL_IMPORT = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*)["']\./([\w.-]+\.js)["']""")


def import_graph(folder: Path) -> dict[str, set[str]]:
    return {path.name: set(LOCAL_IMPORT.findall(path.read_text(encoding="utf-8"))) for path in folder.glob("*.js")}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, each as the path from its first module back to it (depth-first)."""
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            found.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    return found


def test_the_page_modules_import_each_other_without_a_cycle() -> None:
    graph = import_graph(WEB)
    assert "format.js" in graph["search.js"] and "viewer.js" in graph["search.js"]  # the parse found both kinds
    assert cycles(graph) == [], cycles(graph)


def test_the_check_finds_a_cycle_through_a_dynamic_import(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\n', encoding="utf-8")
    (tmp_path / "b.js").write_text('export const b = () => import("./a.js");\n', encoding="utf-8")
    (tmp_path / "c.js").write_text('import "./a.js";\n', encoding="utf-8")
    assert cycles(import_graph(tmp_path)) == [["a.js", "b.js", "a.js"]]
