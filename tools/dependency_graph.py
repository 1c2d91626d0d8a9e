"""The dependency graphs of the domain package and of the client, checked against the allowed direction.

``python -m tools.dependency_graph`` prints, for each subpackage of ``rag_ingest`` and then of
``rag_ingest_client``, the subpackages it imports (with how many import statements), then every
forbidden edge and every import cycle between modules; it exits 1 if there is either.
``tests/unit/test_package_dependencies.py`` runs the same check.

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

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "rag_ingest"
PACKAGE_DIR = ROOT / "layers" / "common" / "python" / PACKAGE
CLIENT_PACKAGE = "rag_ingest_client"
CLIENT_DIR = ROOT / "client" / CLIENT_PACKAGE

# Who may import whom (besides itself). Each subpackage's docstring says the same in words.
_CAPABILITIES = frozenset(
    {
        "core",
        "embeddings",
        "parsing",
        "ingest",
        "retrieval",
        "answers",
        "documents",
        "operations",
        "live",
        "webhooks",
        "sources",
    }
)
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "embeddings": frozenset({"core"}),
    # The format readers stand on the records alone, so any stage or tool can run one.
    "parsing": frozenset({"core"}),
    "ingest": frozenset({"core", "embeddings", "parsing"}),
    "retrieval": frozenset({"core", "embeddings"}),
    # An answer is a search's passages read by a model: it stands on retrieval.
    "answers": frozenset({"core", "retrieval"}),
    "documents": frozenset({"core"}),
    "operations": frozenset({"core", "documents"}),
    # Answers over the live channel stream to the connection that asked.
    "live": frozenset({"core", "documents", "answers"}),
    "webhooks": frozenset({"core"}),
    # A sync reads through connectors and writes through the documents' own operations (deletion).
    "sources": frozenset({"core", "documents"}),
    # Adapters implement the ports with boto3 and opensearch-py (and the webhook POST with
    # http.client); they read the records they store.
    "adapters": frozenset(
        {"core", "embeddings", "parsing", "ingest", "live", "retrieval", "answers", "webhooks", "sources"}
    ),
    # The composition root: builds every service from its adapters.
    "wiring": _CAPABILITIES | {"adapters"},
}
# Third-party clients only the adapters may import (the bedrock embedder reads botocore's exceptions
# off the client it is given).
CLIENT_LIBRARIES = ("boto3", "botocore", "opensearchpy")
CLIENT_LIBRARY_USERS = frozenset({"adapters"})
CLIENT_LIBRARY_MODULES = frozenset({f"{PACKAGE}.embeddings.bedrock"})

# The client (client/rag_ingest_client) is HTTP only but for its operator tools (docs/cli.md,
# "Packaging"); its imports of the domain package and of infra are edges to "rag_ingest" and "infra".
_CLIENT_CORE = frozenset({"http", "uploads", "sentences"})
CLIENT_ALLOWED: dict[str, frozenset[str]] = {
    "http": frozenset(),
    "uploads": frozenset(),
    "sentences": frozenset(),
    "aws": frozenset(),
    "retrievers": frozenset({"http"}),
    # The MCP server: the API's refusals are its tools' errors; the CLI hands it its API client.
    "mcp_server": frozenset({"http"}),
    "cli": _CLIENT_CORE | {"aws", "operator", "mcp_server"},
    "operator": _CLIENT_CORE | {"cli", PACKAGE, "infra"},
}
CLIENT_LIBRARY_USERS_IN_CLIENT = frozenset({"aws", "operator"})


@dataclass
class Graph:
    package: str = PACKAGE
    modules: dict[str, set[str]] = field(default_factory=dict)  # module -> the package's modules it imports
    libraries: dict[str, set[str]] = field(default_factory=dict)  # module -> client libraries it imports
    # module -> the other packages it imports (for the client: rag_ingest, infra)
    foreign: dict[str, set[str]] = field(default_factory=dict)

    @property
    def allowed(self) -> dict[str, frozenset[str]]:
        return ALLOWED if self.package == PACKAGE else CLIENT_ALLOWED

    @property
    def library_users(self) -> frozenset[str]:
        return CLIENT_LIBRARY_USERS if self.package == PACKAGE else CLIENT_LIBRARY_USERS_IN_CLIENT

    def edges(self) -> Counter[tuple[str, str]]:
        counted: Counter[tuple[str, str]] = Counter()
        for module, imported in self.modules.items():
            for target in [*imported, *self.foreign.get(module, ())]:
                source, destination = subpackage(module, self.package), subpackage(target, self.package)
                if source != destination:
                    counted[(source, destination)] += 1
        return counted

    def forbidden(self) -> list[str]:
        found = []
        for module, imported in sorted(self.modules.items()):
            source = subpackage(module, self.package)
            for target in sorted([*imported, *self.foreign.get(module, ())]):
                destination = subpackage(target, self.package)
                if destination != source and destination not in self.allowed.get(source, frozenset()):
                    found.append(f"{module} imports {target} ({source} -> {destination})")
            for library in sorted(self.libraries.get(module, set())):
                if source not in self.library_users and module not in CLIENT_LIBRARY_MODULES:
                    users = "adapters" if self.package == PACKAGE else "aws and operator"
                    found.append(f"{module} imports {library} (only {users} talk to AWS and OpenSearch)")
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


def subpackage(module: str, package: str = PACKAGE) -> str:
    """``rag_ingest.parsing.pdf.extract`` -> ``parsing``; a top-level module is its own (``wiring``); a
    module of another package is that package (``rag_ingest.core.ids`` in the client's graph: ``rag_ingest``)."""
    parts = module.split(".")
    if parts[0] != package:
        return parts[0]
    return parts[1] if len(parts) > 1 else parts[0]


# Packages the client's graph names as a whole.
_FOREIGN = frozenset({PACKAGE, "infra"})


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
    package = package_dir.name
    graph = Graph(package=package)
    foreign_roots = _FOREIGN - {package} if package != PACKAGE else frozenset()
    paths = [path for path in sorted(package_dir.rglob("*.py")) if "__pycache__" not in path.parts]
    sources = {module_name(path, package_dir): path for path in paths}
    for module, path in sources.items():
        imported: set[str] = set()
        libraries: set[str] = set()
        foreign: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, node, path.name == "__init__.py")
                # `from rag_ingest.core import ports` imports the module rag_ingest.core.ports.
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in sources else base for alias in node.names]
            for name in names:
                if name == package or name.startswith(f"{package}."):
                    while name not in sources and "." in name:
                        name = name.rsplit(".", 1)[0]
                    if name != module and name != package:
                        imported.add(name)
                elif name.split(".")[0] in foreign_roots:
                    foreign.add(name)
                elif name.split(".")[0] in CLIENT_LIBRARIES:
                    libraries.add(name.split(".")[0])
        graph.modules[module] = imported
        graph.libraries[module] = libraries
        graph.foreign[module] = foreign
    return graph


def report(graph: Graph) -> str:
    lines = [f"{graph.package} subpackages and what they import (how many of their modules import each):"]
    edges = graph.edges()
    for source in sorted({subpackage(module, graph.package) for module in graph.modules}):
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


def both() -> list[Graph]:
    """The domain package's graph, then the client's."""
    return [build(), build(CLIENT_DIR)]


def full_report(graphs: list[Graph]) -> str:
    return "\n".join(report(graph) for graph in graphs)


def main() -> int:
    graphs = both()
    print(full_report(graphs))
    return 1 if any(graph.forbidden() or graph.cycles() for graph in graphs) else 0


if __name__ == "__main__":
    sys.exit(main())
