"""The dependency graph between the domain package's subpackages, checked against the allowed direction.

``python -m tools.dependency_graph`` prints, for each subpackage of ``rag_ingest``, the subpackages it
imports (with how many import statements), then every forbidden edge and every import cycle between
modules; it exits 1 if there is either. ``tests/unit/test_package_dependencies.py`` runs the same check.

Imports are read from the source (``ast``), at any depth of a module (a lazy import inside a function
counts), except under ``if TYPE_CHECKING:``, which never runs.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "rag_ingest"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / "layers" / "common" / "python" / PACKAGE

# Who may import whom (besides itself). Each subpackage's docstring says the same in words.
_CAPABILITIES = frozenset(
    {"core", "embeddings", "parsing", "ingest", "retrieval", "documents", "operations", "live", "webhooks"}
)
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "embeddings": frozenset({"core"}),
    # The format readers stand on the records alone, so any stage or tool can run one.
    "parsing": frozenset({"core"}),
    "ingest": frozenset({"core", "embeddings", "parsing"}),
    "retrieval": frozenset({"core", "embeddings"}),
    "documents": frozenset({"core"}),
    "operations": frozenset({"core", "documents"}),
    "live": frozenset({"core", "documents"}),
    "webhooks": frozenset({"core"}),
    # Adapters implement the ports with boto3 and opensearch-py (and the webhook POST with
    # http.client); they read the records they store.
    "adapters": frozenset({"core", "embeddings", "parsing", "ingest", "live", "retrieval", "webhooks"}),
    # The composition root: builds every service from its adapters.
    "wiring": _CAPABILITIES | {"adapters"},
    # The command line runs on people's machines (it is not in the Lambda layer).
    "cli": _CAPABILITIES | {"adapters", "wiring"},
    # The LangChain and LlamaIndex retrievers run in applications (not in the Lambda layer either) and
    # reach the service over its HTTP API only.
    "integrations": frozenset(),
}
# Third-party clients only the adapters may import (the bedrock embedder reads botocore's exceptions
# off the client it is given).
CLIENT_LIBRARIES = ("boto3", "botocore", "opensearchpy")
CLIENT_LIBRARY_USERS = frozenset({"adapters", "cli"})
CLIENT_LIBRARY_MODULES = frozenset({f"{PACKAGE}.embeddings.bedrock"})


@dataclass
class Graph:
    modules: dict[str, set[str]] = field(default_factory=dict)  # module -> rag_ingest modules it imports
    libraries: dict[str, set[str]] = field(default_factory=dict)  # module -> client libraries it imports

    def edges(self) -> Counter[tuple[str, str]]:
        counted: Counter[tuple[str, str]] = Counter()
        for module, imported in self.modules.items():
            for target in imported:
                source, destination = subpackage(module), subpackage(target)
                if source != destination:
                    counted[(source, destination)] += 1
        return counted

    def forbidden(self) -> list[str]:
        found = []
        for module, imported in sorted(self.modules.items()):
            source = subpackage(module)
            for target in sorted(imported):
                destination = subpackage(target)
                if destination != source and destination not in ALLOWED.get(source, frozenset()):
                    found.append(f"{module} imports {target} ({source} -> {destination})")
            for library in sorted(self.libraries.get(module, set())):
                if source not in CLIENT_LIBRARY_USERS and module not in CLIENT_LIBRARY_MODULES:
                    found.append(f"{module} imports {library} (only adapters talk to AWS and OpenSearch)")
        return found

    def cycles(self) -> list[list[str]]:
        """Strongly connected components of more than one module (Tarjan), each sorted."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []

        def visit(node: str) -> None:
            index[node] = low[node] = len(index)
            stack.append(node)
            on_stack.add(node)
            for target in self.modules.get(node, ()):
                if target not in self.modules:
                    continue
                if target not in index:
                    visit(target)
                    low[node] = min(low[node], low[target])
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

        for node in sorted(self.modules):
            if node not in index:
                visit(node)
        return found


def subpackage(module: str) -> str:
    """``rag_ingest.parsing.pdf.extract`` -> ``parsing``; a top-level module is its own (``wiring``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    relative = path.relative_to(package_dir.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        yield node
        pending.extend(ast.iter_child_nodes(node))


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def build(package_dir: Path = PACKAGE_DIR) -> Graph:
    graph = Graph()
    paths = [path for path in sorted(package_dir.rglob("*.py")) if "__pycache__" not in path.parts]
    sources = {module_name(path, package_dir): path for path in paths}
    for module, path in sources.items():
        imported: set[str] = set()
        libraries: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, node, path.name == "__init__.py")
                # `from rag_ingest.core import ports` imports the module rag_ingest.core.ports.
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in sources else base for alias in node.names]
            for name in names:
                if name == PACKAGE or name.startswith(f"{PACKAGE}."):
                    while name not in sources and "." in name:
                        name = name.rsplit(".", 1)[0]
                    if name != module and name != PACKAGE:
                        imported.add(name)
                elif name.split(".")[0] in CLIENT_LIBRARIES:
                    libraries.add(name.split(".")[0])
        graph.modules[module] = imported
        graph.libraries[module] = libraries
    return graph


def report(graph: Graph) -> str:
    lines = ["rag_ingest subpackages and what they import (how many of their modules import each):"]
    edges = graph.edges()
    for source in sorted({subpackage(module) for module in graph.modules}):
        targets = sorted((destination, count) for (origin, destination), count in edges.items() if origin == source)
        shown = ", ".join(f"{destination} ({count})" for destination, count in targets) or "-"
        lines.append(f"  {source:<11} -> {shown}")
    forbidden = graph.forbidden()
    cycles = graph.cycles()
    lines.append(f"forbidden imports: {len(forbidden)}")
    lines.extend(f"  {line}" for line in forbidden)
    lines.append(f"import cycles: {len(cycles)}")
    lines.extend(f"  {' <-> '.join(cycle)}" for cycle in cycles)
    return "\n".join(lines)


def main() -> int:
    graph = build()
    print(report(graph))
    return 1 if graph.forbidden() or graph.cycles() else 0


if __name__ == "__main__":
    sys.exit(main())
