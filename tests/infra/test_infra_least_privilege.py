"""DynamoDB least privilege, kept true against the code: infra/permissions.py == what the code calls == the grants.

What the code calls is read from the source: every adapter method's DynamoDB calls (and those of the
methods it calls on ``self``); for each function, the code its handler can reach by import and by
name, over-approximated by name, never under; Powertools' idempotency layer from the installed
package. A new call without its grant, or a grant no code calls, fails naming the function, the
action and where it comes from.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from infra.paths import FUNCTIONS_DIR, ROOT
from infra.permissions import (
    DOCUMENTS_TABLE,
    EMBEDDING_CACHE_TABLE,
    EMBEDDING_CAPACITY_TABLE,
    IDEMPOTENCY_TABLE,
    SOURCES_TABLE,
    STAGE_FUNCTIONS,
    TENANT_USAGE_TABLE,
    VECTOR_STORE_CALLS,
    WEBHOOKS_TABLE,
    TableAccess,
)
from tests.infra.template_tools import SynthResult, as_list, render_token

pytestmark = pytest.mark.infra

LAYER = ROOT / "layers" / "common" / "python"
ADAPTERS = LAYER / "rag_ingest" / "adapters"
# boto3 Table / client method -> IAM action.
TABLE_OPERATIONS = {
    "get_item": "dynamodb:GetItem",
    "put_item": "dynamodb:PutItem",
    "update_item": "dynamodb:UpdateItem",
    "delete_item": "dynamodb:DeleteItem",
    "query": "dynamodb:Query",
    "scan": "dynamodb:Scan",
    "batch_get_item": "dynamodb:BatchGetItem",
    "batch_write_item": "dynamodb:BatchWriteItem",
    "batch_writer": "dynamodb:BatchWriteItem",
    "transact_get_items": "dynamodb:GetItem",
    "transact_write_items": "dynamodb:UpdateItem",
}
FUNCTION_CODE = {
    "Api": "api",
    "Mcp": "mcp_http",
    "LiveAnswers": "live_answers",
    "Intake": "intake",
    "Redrive": "redrive",
    "Reaper": "reaper",
    "Reconciler": "reconciler",
    "WebhookFanOut": "webhook_fanout",
    "WebhookDelivery": "webhook_delivery",
    "SourceSync": "source_sync",
    **dict.fromkeys(STAGE_FUNCTIONS, "stages"),
}
FUNCTION_PATHS = {
    "Api": "Api/ApiFunction",
    "Mcp": "Mcp/McpFunction",
    "LiveAnswers": "LiveAnswers/AnswersFunction",
    "Intake": "Intake/IntakeFunction",
    "Redrive": "Operations/RedriveFunction",
    "Reaper": "Operations/ReaperFunction",
    "Reconciler": "Reconciler/ReconcilerFunction",
    "WebhookFanOut": "Webhooks/WebhookFanOutFunction",
    "WebhookDelivery": "Webhooks/WebhookDeliveryFunction",
    "SourceSync": "Sources/SourceSyncFunction",
    **{name: f"Workflow/{name}Function" for name in STAGE_FUNCTIONS},
}

# The adapter class of each table besides the documents table (whose adapter is every other class).
EMBEDDING_CACHE_ADAPTER = "EmbeddingCacheTable"
WEBHOOKS_ADAPTER = "WebhooksTable"
CAPACITY_ADAPTER = "CapacityTable"
SOURCES_ADAPTER = "SourcesTable"
# Which table each adapter class talks to (every other class: the documents table).
ADAPTER_TABLES = {
    EMBEDDING_CACHE_ADAPTER: "cache",
    WEBHOOKS_ADAPTER: "webhooks",
    CAPACITY_ADAPTER: "capacity",
    SOURCES_ADAPTER: "sources",
    "SourceItemLinksTable": "sources",
    "TenantUsageTable": "usage",
    # The live channel's connections table (granted in infra/constructs/live_status.py, live_answers.py).
    "DynamoConnectionStore": "connections",
}

# (resource, action): resource is "table" or "index/<name>".
Access = frozenset[tuple[str, str]]


def _as_pairs(access: TableAccess) -> Access:
    return frozenset(
        {("table", action) for action in access.table}
        | {(f"index/{index}", action) for index, actions in access.indexes.items() for action in actions}
    )


# -- reading the code ----------------------------------------------------------------------------
def _module_file(name: str) -> Path | None:
    base = LAYER.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _imported_modules(path: Path) -> Iterator[str]:
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("rag_ingest"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rag_ingest"):
            yield node.module
            # `from rag_ingest.adapters import documents_table` imports a module by name.
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


@cache
def _reachable_files(function_dir: str) -> frozenset[Path]:
    # The function's own code is every module in its folder: app.py and its siblings (the API's routes/).
    own = sorted((FUNCTIONS_DIR / function_dir).rglob("*.py"))
    seen: set[Path] = set(own)
    pending = list(own)
    while pending:
        for name in _imported_modules(pending.pop()):
            file = _module_file(name)
            if file is not None and file not in seen:
                seen.add(file)
                pending.append(file)
    return frozenset(seen)


def _names_in(node: ast.AST) -> set[str]:
    """Names a piece of code uses: variables and attributes except on ``self`` (a class's calls to its
    own methods are followed by AdapterClass.access). Importing a name is not using it."""
    names: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            names.add(child.id)
        elif isinstance(child, ast.Attribute) and not (isinstance(child.value, ast.Name) and child.value.id == "self"):
            names.add(child.attr)
    return names


@cache
def _used_names(handler: Path, files: frozenset[Path]) -> frozenset[str]:
    """Names used by the code a handler can run: the handler's modules (app.py and its siblings in the
    function's folder, whose routes are reached by decorator, not by name), every reachable module's
    top-level statements, and (to a fixed point) each top-level function or class of those modules whose
    name is used. A class counts whole (all its methods); a module's other classes only when named, so
    importing one class of a module does not pull in its neighbours' calls."""
    definitions: list[tuple[str, ast.AST]] = []
    used: set[str] = set()
    for file in files:
        for statement in _parsed(file).body:
            own = file.is_relative_to(handler.parent)
            if not own and isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                definitions.append((statement.name, statement))
            else:
                used |= _names_in(statement)
    pending = definitions
    while True:
        reached = [(name, node) for name, node in pending if name in used]
        if not reached:
            return frozenset(used)
        for _name, node in reached:
            used |= _names_in(node)
        pending = [(name, node) for name, node in pending if name not in {n for n, _ in reached}]


def _module_constants(tree: ast.Module) -> dict[str, str]:
    return {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _is_table(expression: ast.expr) -> bool:
    if isinstance(expression, ast.Attribute):
        return "table" in expression.attr.lower()
    if isinstance(expression, ast.Name):
        return "table" in expression.id.lower()
    return False


def _index_name(call: ast.Call, method: ast.FunctionDef, constants: dict[str, str]) -> str | None:
    """The ``IndexName`` of a query/scan: a keyword, or a key of the kwargs dict built in the method."""
    values = [k.value for k in call.keywords if k.arg == "IndexName"]
    if any(k.arg is None for k in call.keywords):  # **kwargs: look for the dict that holds it
        for node in ast.walk(method):
            if isinstance(node, ast.Dict):
                values += [v for k, v in zip(node.keys, node.values, strict=True)
                           if isinstance(k, ast.Constant) and k.value == "IndexName"]  # fmt: skip
    for value in values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
        if isinstance(value, ast.Name) and value.id in constants:
            return constants[value.id]
        raise AssertionError(f"{method.name}: IndexName {ast.unparse(value)} is not a constant this test can read")
    return None


@dataclass
class AdapterClass:
    module: str
    name: str
    file: Path
    direct: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # method -> its own calls
    calls_self: dict[str, set[str]] = field(default_factory=dict)  # method -> self.<method>() it calls

    def access(self, method: str) -> Access:
        seen: set[str] = set()
        pending = [method]
        found: set[tuple[str, str]] = set()
        while pending:
            name = pending.pop()
            if name in seen or name not in self.direct:
                continue
            seen.add(name)
            found |= self.direct[name]
            pending.extend(self.calls_self[name])
        return frozenset(found)


@cache
def _adapter_classes() -> tuple[AdapterClass, ...]:
    classes = []
    for file in sorted(ADAPTERS.glob("*.py")):
        tree = ast.parse(file.read_text())
        constants = _module_constants(tree)
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            adapter = AdapterClass(f"rag_ingest.adapters.{file.stem}", node.name, file)
            for method in node.body:
                if not isinstance(method, ast.FunctionDef):
                    continue
                direct: set[tuple[str, str]] = set()
                calls_self: set[str] = set()
                for call in (n for n in ast.walk(method) if isinstance(n, ast.Call)):
                    func = call.func
                    if not isinstance(func, ast.Attribute):
                        continue
                    if isinstance(func.value, ast.Name) and func.value.id == "self":
                        calls_self.add(func.attr)
                    elif func.attr in TABLE_OPERATIONS and _is_table(func.value):
                        index = _index_name(call, method, constants) if func.attr in ("query", "scan") else None
                        direct.add((f"index/{index}" if index else "table", TABLE_OPERATIONS[func.attr]))
                adapter.direct[method.name] = direct
                adapter.calls_self[method.name] = calls_self
            if any(adapter.direct.values()):
                classes.append(adapter)
    return tuple(classes)


def _called_by(function: str, *, cache_table: bool = False, table: str = "") -> dict[tuple[str, str], list[str]]:
    """(resource, action) -> the adapter methods that need it, for one function's code: on the
    documents table, the embedding cache's (``cache_table``), or ``table`` ("webhooks")."""
    wanted = table or ("cache" if cache_table else "documents")
    files = _reachable_files(FUNCTION_CODE[function])
    names = _used_names(FUNCTIONS_DIR / FUNCTION_CODE[function] / "app.py", files)
    needed: dict[tuple[str, str], list[str]] = {}
    for adapter in _adapter_classes():
        if adapter.file not in files or adapter.name not in names:
            continue
        if ADAPTER_TABLES.get(adapter.name, "documents") != wanted:
            continue
        for method in adapter.direct:
            if method in names:
                for pair in adapter.access(method):
                    needed.setdefault(pair, []).append(f"{adapter.name}.{method}")
    return needed


# -- the tests -----------------------------------------------------------------------------------
def test_the_reader_sees_the_adapters_calls() -> None:
    # Guards the tests below: a reader that found nothing would find every table "in step".
    by_name = {adapter.name: adapter for adapter in _adapter_classes()}
    documents = by_name["DocumentsTable"]
    assert documents.access("create_awaiting_upload") == {("table", "dynamodb:PutItem")}
    assert ("table", "dynamodb:UpdateItem") in documents.access("mark_ready")  # through _transition
    assert documents.access("list_by_status") == {("index/by_status", "dynamodb:Query")}
    wanted = {ADAPTERS / "documents_table.py", LAYER / "rag_ingest" / "ingest" / "pipeline.py"}
    assert _reachable_files("stages") >= wanted


@pytest.mark.parametrize("function", sorted(FUNCTION_CODE))
def test_the_permissions_table_is_what_the_code_calls(function: str) -> None:
    called = _called_by(function)
    declared = _as_pairs(DOCUMENTS_TABLE[function])
    missing = {f"{action} on {resource} (for {', '.join(sorted(called[(resource, action)]))})"
               for resource, action in set(called) - declared}  # fmt: skip
    unused = {f"{action} on {resource}" for resource, action in declared - set(called)}
    assert not missing, f"{function}: its code calls, but infra/permissions.py DOCUMENTS_TABLE lacks: {sorted(missing)}"
    assert not unused, f"{function}: infra/permissions.py grants what its code never calls: {sorted(unused)}"


@pytest.mark.parametrize("function", sorted(FUNCTION_CODE))
def test_the_embedding_cache_grants_are_what_the_code_calls(function: str) -> None:
    # The stages share one code asset, so every stage's code can reach the cache: only Embed may be
    # granted it (the others never run the Embed stage), and Embed exactly what the adapter calls.
    called = set(_called_by(function, cache_table=True))
    if function == "Embed":
        assert (
            called
            == _as_pairs(EMBEDDING_CACHE_TABLE["Embed"])
            == {
                ("table", "dynamodb:BatchGetItem"),
                ("table", "dynamodb:PutItem"),
            }
        )
    else:
        assert function not in EMBEDDING_CACHE_TABLE
        assert called == set() or function in STAGE_FUNCTIONS, function


@pytest.mark.parametrize("function", sorted(FUNCTION_CODE))
def test_the_embedding_capacity_grants_are_what_the_code_calls(function: str) -> None:
    # Like the cache: the stages share one code asset, only Embed books the shared quota.
    called = set(_called_by(function, table="capacity"))
    if function == "Embed":
        assert (
            called
            == _as_pairs(EMBEDDING_CAPACITY_TABLE["Embed"])
            == {
                ("table", "dynamodb:GetItem"),
                ("table", "dynamodb:PutItem"),
            }
        )
    else:
        assert function not in EMBEDDING_CAPACITY_TABLE
        assert called == set() or function in STAGE_FUNCTIONS, function


@pytest.mark.parametrize("function", sorted(FUNCTION_CODE))
def test_the_webhooks_table_grants_are_what_the_code_calls(function: str) -> None:
    called = set(_called_by(function, table="webhooks"))
    declared = _as_pairs(WEBHOOKS_TABLE[function]) if function in WEBHOOKS_TABLE else frozenset()
    assert called == declared, (function, sorted(called), sorted(declared))
    if function in ("Api", "WebhookFanOut", "WebhookDelivery"):
        assert declared, function  # the reader saw the adapter's calls


@pytest.mark.parametrize("function", sorted(FUNCTION_CODE))
def test_the_sources_table_grants_are_what_the_code_calls(function: str) -> None:
    called = set(_called_by(function, table="sources"))
    declared = _as_pairs(SOURCES_TABLE[function]) if function in SOURCES_TABLE else frozenset()
    assert called == declared, (function, sorted(called), sorted(declared))
    if function in ("Api", "SourceSync"):
        assert declared, function  # the reader saw the adapter's calls


@pytest.mark.parametrize("function", sorted(FUNCTION_CODE))
def test_the_tenant_usage_grants_are_what_the_code_calls(function: str) -> None:
    # The stages share one code asset: only Parse counts pages (the others never run Parse).
    called = set(_called_by(function, table="usage"))
    declared = _as_pairs(TENANT_USAGE_TABLE[function]) if function in TENANT_USAGE_TABLE else frozenset()
    if function in STAGE_FUNCTIONS:
        assert called == {("table", "dynamodb:UpdateItem")}, (function, sorted(called))
        assert declared == (called if function == "Parse" else frozenset()), function
    else:
        assert called == declared, (function, sorted(called), sorted(declared))
    if function in ("Api", "Intake"):
        assert declared, function  # the reader saw the adapter's calls


def test_the_idempotency_table_is_what_powertools_calls() -> None:
    spec = importlib.util.find_spec("aws_lambda_powertools.utilities.idempotency.persistence.dynamodb")
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    called = {
        TABLE_OPERATIONS[node.func.attr]
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in TABLE_OPERATIONS
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "client"
    }
    assert called == set(IDEMPOTENCY_TABLE["Intake"].table)
    # Only intake uses the idempotency layer (and so only it is granted the table).
    users = {name for name, code in FUNCTION_CODE.items()
             if "DynamoDBPersistenceLayer" in (FUNCTIONS_DIR / code / "app.py").read_text()}  # fmt: skip
    assert users == set(IDEMPOTENCY_TABLE) == {"Intake"}


def _table_grants(synth: SynthResult, path: str, table_path: str) -> Access:
    table_arn = f"${{{synth.logical_id(table_path)}.Arn}}"
    found: set[tuple[str, str]] = set()
    for statement in synth.role_statements(path):
        actions = [a for a in as_list(statement["Action"]) if a.startswith("dynamodb:")]
        for resource in (render_token(r) for r in as_list(statement["Resource"])):
            if resource == table_arn:
                found |= {("table", a) for a in actions}
            elif resource.startswith(f"{table_arn}/"):
                found |= {(resource.removeprefix(f"{table_arn}/"), a) for a in actions}
    return frozenset(found)


@pytest.mark.parametrize("function", sorted(FUNCTION_PATHS))
def test_each_role_is_granted_exactly_the_declared_table_actions(synth: SynthResult, function: str) -> None:
    path = FUNCTION_PATHS[function]
    assert _table_grants(synth, path, "Storage/DocumentsTable") == _as_pairs(DOCUMENTS_TABLE[function]), function
    expected = _as_pairs(IDEMPOTENCY_TABLE[function]) if function in IDEMPOTENCY_TABLE else frozenset()
    assert _table_grants(synth, path, "Storage/IdempotencyTable") == expected, function
    expected = _as_pairs(EMBEDDING_CACHE_TABLE[function]) if function in EMBEDDING_CACHE_TABLE else frozenset()
    assert _table_grants(synth, path, "Storage/EmbeddingCacheTable") == expected, function
    expected = _as_pairs(WEBHOOKS_TABLE[function]) if function in WEBHOOKS_TABLE else frozenset()
    assert _table_grants(synth, path, "Webhooks/WebhooksTable") == expected, function
    expected = _as_pairs(EMBEDDING_CAPACITY_TABLE[function]) if function in EMBEDDING_CAPACITY_TABLE else frozenset()
    assert _table_grants(synth, path, "Workflow/EmbeddingCapacityTable") == expected, function
    expected = _as_pairs(SOURCES_TABLE[function]) if function in SOURCES_TABLE else frozenset()
    assert _table_grants(synth, path, "Sources/SourcesTable") == expected, function
    expected = _as_pairs(TENANT_USAGE_TABLE[function]) if function in TENANT_USAGE_TABLE else frozenset()
    assert _table_grants(synth, path, "TenantUsage/TenantUsageTable") == expected, function
    # Nothing on any other table, never a Scan or a batch write; DeleteItem only on the idempotency
    # (Intake), webhooks and sources tables (Api: DELETE /webhooks/{id}; Api, SourceSync and the
    # Reconciler: item states).
    actions = {a for s in synth.role_statements(path) for a in as_list(s["Action"]) if a.startswith("dynamodb:")}
    assert not actions & {"dynamodb:Scan", "dynamodb:BatchWriteItem"}
    assert "dynamodb:DeleteItem" not in actions or function in ("Intake", "Api", "SourceSync", "Reconciler")


def test_every_function_with_table_access_has_an_entry(synth: SynthResult) -> None:
    # A function added later with a table grant of its own (grant_read_write_data...) must be declared too.
    undeclared = []
    for resource in synth.of_type("AWS::Lambda::Function").values():
        if "rag-ingest:source" not in resource.get("Metadata", {}):
            continue  # CDK's own handlers (custom resources)
        path = resource["Metadata"]["aws:cdk:path"].removeprefix(f"{synth.stack_name}/").removesuffix("/Resource")
        # A bulk lane copy has its stage's access (tests/infra/test_infra_workflow.py checks the roles match).
        name = path.rsplit("/", 1)[-1].removesuffix("Function").removesuffix("Bulk")
        for table_path, declared in (
            ("Storage/DocumentsTable", DOCUMENTS_TABLE),
            ("Storage/IdempotencyTable", IDEMPOTENCY_TABLE),
            ("Storage/EmbeddingCacheTable", EMBEDDING_CACHE_TABLE),
            ("Webhooks/WebhooksTable", WEBHOOKS_TABLE),
            ("Workflow/EmbeddingCapacityTable", EMBEDDING_CAPACITY_TABLE),
            ("Sources/SourcesTable", SOURCES_TABLE),
            ("TenantUsage/TenantUsageTable", TENANT_USAGE_TABLE),
        ):
            # Stream reads (a stream consumer) are not item access: they are not in the table.
            grants = {(r, a) for r, a in _table_grants(synth, path, table_path) if not r.startswith("stream/")}
            if grants and name not in declared:
                undeclared.append(f"{path}: {sorted(grants)} on {table_path}")
    assert undeclared == [], "functions with table grants missing from infra/permissions.py:\n" + "\n".join(undeclared)


# VectorStore.count shares its name with str.count and list.count, which the code does call: it is
# a helper of the tests, and counting it by name would credit it to every function.
AMBIGUOUS_VECTOR_STORE_METHODS = {"count"}


def test_the_vector_store_calls_table_is_what_the_code_calls() -> None:
    # infra/permissions.py VECTOR_STORE_CALLS says which VectorStore methods each function calls
    # (tests/integration/test_vector_store_grants.py replays them against OpenSearch under the
    # function's grants): it must be what the code uses, per code asset (the stages share one).
    tree = ast.parse((ADAPTERS / "vector_store.py").read_text())
    (store,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "VectorStore"]
    requests = {
        method.name
        for method in store.body
        if isinstance(method, ast.FunctionDef)
        and not method.name.startswith("_")
        and not any(isinstance(d, ast.Name) and d.id == "property" for d in method.decorator_list)
        and method.name != "mapping"  # builds the index body, sends nothing
    } - AMBIGUOUS_VECTOR_STORE_METHODS
    assert {"write_chunks", "knn_search", "delete_document"} <= requests
    for code in sorted(set(FUNCTION_CODE.values())):
        names = _used_names(FUNCTIONS_DIR / code / "app.py", _reachable_files(code))
        used = requests & names if "VectorStore" in names else set()
        declared = {
            method for function, methods in VECTOR_STORE_CALLS.items() if FUNCTION_CODE[function] == code
            for method in methods
        }  # fmt: skip
        assert used == declared, (
            f"functions/{code}: the code calls VectorStore.{sorted(used)}, VECTOR_STORE_CALLS says {sorted(declared)}"
        )
