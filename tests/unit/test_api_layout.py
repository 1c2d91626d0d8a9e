"""The API function's layout: ``functions/api/app.py`` builds the resolver and maps errors, and the
routes live one group a module in ``functions/api/routes/``, each registering only its group's paths.

Read from the source (the decorators) and checked against the OpenAPI document the function
generates, so a route registered anywhere else (in app.py, or in a module of another group) fails.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tools import openapi as openapi_tool

pytestmark = pytest.mark.unit
API = Path(__file__).resolve().parents[2] / "functions" / "api"
ROUTES = API / "routes"
# Every route module, and the paths its group owns (a path is its prefix or starts with prefix + "/").
GROUPS = {
    "documents": "/documents",
    "search": "/search",
    "answers": "/answer",
    "webhooks": "/webhooks",
    "sources": "/sources",
    "meta": "/openapi.json",
}
# Not route groups: the package marker and what the groups share (services, the error bodies).
NOT_GROUPS = {"__init__", "common", "errors", "links"}
ROUTE_METHODS = {"get", "post", "put", "patch", "delete", "head", "options", "route"}


def route_decorators(path: Path) -> list[tuple[str, str, str]]:
    """(object, method, rule) of every ``@<object>.<method>("<rule>", ...)`` decorator in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            func = call.func if call else decorator
            if isinstance(func, ast.Attribute) and func.attr in ROUTE_METHODS and isinstance(func.value, ast.Name):
                rule = call.args[0] if call and call.args else None
                text = rule.value if isinstance(rule, ast.Constant) and isinstance(rule.value, str) else "?"
                found.append((func.value.id, func.attr, text))
    return found


def in_group(rule: str, prefix: str) -> bool:
    return rule == prefix or rule.startswith(prefix + "/")


def test_app_registers_no_route_itself() -> None:
    assert route_decorators(API / "app.py") == []
    # Nor undecorated (app.get(...)(function)): its only calls on the resolver configure it and map errors.
    calls = {
        node.func.attr
        for node in ast.walk(ast.parse((API / "app.py").read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "app"
    }
    assert calls.isdisjoint(ROUTE_METHODS), calls


def test_every_route_module_is_a_known_group() -> None:
    modules = {path.stem for path in ROUTES.glob("*.py")} - NOT_GROUPS
    assert modules == set(GROUPS), "a new route module needs its paths in GROUPS (and in app.ROUTE_GROUPS)"
    for name in NOT_GROUPS:
        assert route_decorators(ROUTES / f"{name}.py") == [], name


@pytest.mark.parametrize(("group", "prefix"), sorted(GROUPS.items()))
def test_each_route_module_registers_only_its_groups_paths(group: str, prefix: str) -> None:
    decorators = route_decorators(ROUTES / f"{group}.py")
    assert decorators, f"routes/{group}.py registers no route"
    for owner, method, rule in decorators:
        assert owner == "router", f"routes/{group}.py: @{owner}.{method}: routes go on the module's router"
        assert in_group(rule, prefix), f"routes/{group}.py registers {rule!r}, outside {prefix}"


def test_the_route_modules_register_every_documented_route() -> None:
    registered = set()
    for group in GROUPS:
        for _, method, rule in route_decorators(ROUTES / f"{group}.py"):
            registered.add((method.upper(), re.sub(r"<([^>]+)>", r"{\1}", rule)))
    document = openapi_tool.generate()
    documented = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert registered == documented
