"""parsing.textractTables: Parse reads scanned pages with Textract AnalyzeDocument TABLES, by choice.

Off (the default): the Parse functions are told ``OCR_TEXTRACT_TABLES=false`` and may call
DetectDocumentText only. On: they are told ``true`` and may also call AnalyzeDocument, and nothing
else in the stack may call Textract; the stack still passes cdk-nag and cfn-lint.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cfnlint.api import ManualArgs, lint_file

from infra.config import CONTEXT_KEY, ConfigError, parse_config
from tests.infra.conftest import synthesize
from tests.infra.template_tools import SynthResult, as_list, problem_annotations, render_token

pytestmark = pytest.mark.infra

PARSE_FUNCTIONS = ("Workflow/ParseFunction", "Workflow/ParseBulkFunction")
CFN_LINT_IGNORED = ["W3005"]  # as tests/infra/test_infra_compliance.py: CDK's explicit DependsOn


def _textract_grants(synth: SynthResult) -> dict[str, list[tuple[str, list[str]]]]:
    """Per Lambda function with any Textract action: (action, its resources), sorted."""
    grants: dict[str, list[tuple[str, list[str]]]] = {}
    for logical_id, function in synth.of_type("AWS::Lambda::Function").items():
        path = function.get("Metadata", {}).get("aws:cdk:path", logical_id)
        role = function["Properties"].get("Role", {})
        if not isinstance(role, dict) or "Fn::GetAtt" not in role:
            continue
        role_id = role["Fn::GetAtt"][0]
        found = sorted(
            (action, sorted(render_token(r) for r in as_list(statement["Resource"])))
            for policy in synth.of_type("AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Effect"] == "Allow"
            for action in as_list(statement["Action"])
            if action.startswith("textract:")
        )
        if found:
            grants[path.removeprefix(f"{synth.stack_name}/").removesuffix("/Resource")] = found
    return grants


@pytest.fixture(scope="module")
def tables_on(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    """The stack synthesized (with cdk-nag) with the switch on, as ``cdk deploy -c`` would give it."""
    context = {CONTEXT_KEY: {"parsing": {"textractTables": True}}}
    return synthesize(tmp_path_factory.mktemp("cdk.out-textract-tables"), context=context)


def test_off_by_default_parse_may_only_detect_document_text(synth: SynthResult) -> None:
    assert synth.config.parsing.textract_tables is False
    for path in PARSE_FUNCTIONS:
        assert synth.resource(path)["Properties"]["Environment"]["Variables"]["OCR_TEXTRACT_TABLES"] == "false"
    assert _textract_grants(synth) == {path: [("textract:DetectDocumentText", ["*"])] for path in PARSE_FUNCTIONS}


def test_on_parse_is_told_and_may_call_analyze_document(tables_on: SynthResult) -> None:
    for path in PARSE_FUNCTIONS:
        assert tables_on.resource(path)["Properties"]["Environment"]["Variables"]["OCR_TEXTRACT_TABLES"] == "true"
    # Only the Parse functions, only these two actions; '*' because neither has resource-level permissions.
    assert _textract_grants(tables_on) == {
        path: [("textract:AnalyzeDocument", ["*"]), ("textract:DetectDocumentText", ["*"])] for path in PARSE_FUNCTIONS
    }


@pytest.mark.slow
def test_on_the_stack_passes_cdk_nag_and_cfn_lint(tables_on: SynthResult, tmp_path: Path) -> None:
    assert tables_on.config.parsing.textract_tables is True
    assert tables_on.validation_error is None, tables_on.validation_error
    assert problem_annotations(tables_on.manifest) == []
    template = tmp_path / "template.json"
    template.write_text(tables_on.template_file.read_text())
    matches = lint_file(
        template, ManualArgs(regions=["us-east-1"], ignore_checks=CFN_LINT_IGNORED, include_checks=["I"])
    )
    assert [str(match) for match in matches] == []


@pytest.mark.parametrize("value", ["sometimes", 2, None])
def test_the_switch_is_validated(value: object) -> None:
    with pytest.raises(ConfigError, match=r"parsing\.textract_tables|parsing\.textractTables"):
        parse_config({"parsing": {"textractTables": value}})
