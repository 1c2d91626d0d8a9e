"""docs/deploy.md matches the code: every config key (and default), every stack output, every alarm.

Each failure lists exactly what is missing from the page and what the page names that no longer
exists, so the doc can be fixed from the message alone.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from infra.config import RagIngestConfig
from infra.paths import ROOT
from infra.permissions import DOCUMENTS_TABLE, EMBEDDING_CACHE_TABLE, IDEMPOTENCY_TABLE, OPENSEARCH_ACCESS
from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra

DEPLOY_DOC = ROOT / "docs" / "deploy.md"
# Objects documented as one key (their fields are spelled in the row: "512 MB / 29 s").
GROUPED_FIELDS = {"memoryMb", "timeoutSeconds"}


def _section(heading: str) -> str:
    text = DEPLOY_DOC.read_text()
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, flags=re.MULTILINE)
    assert match, f"docs/deploy.md has no '{heading}' heading"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def _expand(token: str) -> list[str]:
    """``{a,b}X`` -> ``aX``, ``bX`` (one brace group per token is enough here, applied repeatedly)."""
    match = re.search(r"\{([^{}]+)\}", token)
    if not match:
        return [token]
    return [
        expanded
        for option in match.group(1).split(",")
        for expanded in _expand(token[: match.start()] + option.strip() + token[match.end() :])
    ]


def _table_rows(section: str) -> list[list[str]]:
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or re.fullmatch(r"\|[\s|:-]+\|", line.strip()):
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[1:]  # without the header


def _first_column_names(section: str) -> list[str]:
    return [
        name for row in _table_rows(section) for token in re.findall(r"`([^`]+)`", row[0]) for name in _expand(token)
    ]


def _config_leaves(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    leaves: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict) and item and set(item) != GROUPED_FIELDS:  # {} (no overrides): a leaf
            leaves.update(_config_leaves(item, f"{prefix}{key}."))
        else:
            leaves[f"{prefix}{key}"] = item
    return leaves


def _difference_message(what: str, documented: set[str], actual: set[str]) -> str:
    return (
        f"docs/deploy.md and the {what} differ:\n"
        f"  missing from the doc: {sorted(actual - documented)}\n"
        f"  in the doc but not in the {what}: {sorted(documented - actual)}"
    )


def test_every_config_key_is_documented() -> None:
    documented = set(_first_column_names(_section("Configuration")))
    actual = set(_config_leaves(RagIngestConfig().model_dump(by_alias=True, mode="json")))
    assert documented == actual, _difference_message("config keys (infra/config.py)", documented, actual)


def test_documented_defaults_are_the_defaults() -> None:
    defaults = _config_leaves(RagIngestConfig().model_dump(by_alias=True, mode="json"))
    wrong = []
    checked = 0
    for row in _table_rows(_section("Configuration")):
        keys = re.findall(r"`([^`]+)`", row[0])
        sized = re.fullmatch(r"(\d+) MB / (\d+) s", row[1])
        if sized:  # a function's settings: every key of the row has them
            for key in (expanded for k in keys for expanded in _expand(k)):
                checked += 1
                actual = defaults.get(key, {})
                if (actual.get("memoryMb"), actual.get("timeoutSeconds")) != tuple(map(int, sized.groups())):
                    wrong.append(f"{key}: doc says {row[1]}, the default is {actual}")
            continue
        default = re.fullmatch(r"`([^`]+)`", row[1])
        if len(keys) != 1 or default is None or keys[0] not in defaults:
            continue
        checked += 1
        if json.loads(default.group(1)) != defaults[keys[0]]:
            wrong.append(f"{keys[0]}: doc says {default.group(1)}, the default is {json.dumps(defaults[keys[0]])}")
    assert checked >= 50, "the defaults column is not parsed: nothing would be checked"
    assert wrong == [], "docs/deploy.md states wrong defaults:\n" + "\n".join(wrong)


def test_every_stack_output_is_documented(synth: SynthResult) -> None:
    documented = set(_first_column_names(_section("Stack outputs")))
    actual = set(synth.template_dict["Outputs"])
    assert documented == actual, _difference_message("synthesized outputs", documented, actual)


def test_every_alarm_is_documented(synth: SynthResult) -> None:
    documented = set(_first_column_names(_section("Alarms deployed")))
    actual = {
        resource["Metadata"]["aws:cdk:path"].split("/")[-2]
        for resource in synth.of_type("AWS::CloudWatch::Alarm").values()
    }
    assert documented == actual, _difference_message("synthesized alarms", documented, actual)


def test_brace_expansion_of_the_doc_tables() -> None:
    assert _expand("{Api,Intake}ErrorsAlarm") == ["ApiErrorsAlarm", "IntakeErrorsAlarm"]
    assert _expand("functions.stages.{a,b}") == ["functions.stages.a", "functions.stages.b"]


def test_the_permissions_table_lists_the_declared_table_and_index_access() -> None:
    rows = {row[0]: row for row in _table_rows(_section("Permissions"))}
    assert set(rows) == set(DOCUMENTS_TABLE), _difference_message(
        "functions of infra/permissions.py", set(rows), set(DOCUMENTS_TABLE)
    )
    wrong = []
    for function, row in rows.items():
        tables = [
            DOCUMENTS_TABLE[function],
            *([IDEMPOTENCY_TABLE[function]] if function in IDEMPOTENCY_TABLE else []),
            *([EMBEDDING_CACHE_TABLE[function]] if function in EMBEDDING_CACHE_TABLE else []),
        ]
        declared = {a.split(":")[1] for t in tables for a in t.table | {a for s in t.indexes.values() for a in s}}
        actions = r"\b(GetItem|PutItem|UpdateItem|DeleteItem|Query|Scan|BatchGetItem|BatchWriteItem)\b"
        documented = set(re.findall(actions, row[2]))
        if documented != declared:
            wrong.append(f"{function} DynamoDB: doc {sorted(documented)}, infra/permissions.py {sorted(declared)}")
        indexes = {i for t in tables for i in t.indexes}
        if {i for i in re.findall(r"`(by_[a-z_]+)`", row[2])} != indexes:
            wrong.append(f"{function} GSIs: infra/permissions.py {sorted(indexes)}")
        access = OPENSEARCH_ACCESS.get(function, {})
        methods = {action.removeprefix("es:ESHttp").upper() for action in access}
        paths = {path for paths in access.values() for path in paths if path}
        if set(re.findall(r"\b(HEAD|PUT|POST|GET|DELETE|PATCH)\b", row[3])) != methods:
            wrong.append(f"{function} OpenSearch methods: infra/permissions.py {sorted(methods)}")
        if set(re.findall(r"`(_[a-z_]+)`", row[3])) != paths:
            wrong.append(f"{function} OpenSearch paths: infra/permissions.py {sorted(paths)}")
    assert wrong == [], "docs/deploy.md's Permissions table differs from infra/permissions.py:\n" + "\n".join(wrong)
