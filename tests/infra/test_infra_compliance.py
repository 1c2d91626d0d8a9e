"""cdk-nag (AwsSolutions) has no unacknowledged finding; cfn-lint passes on the template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from tests.infra.template_tools import SynthResult, problem_annotations

pytestmark = pytest.mark.infra

# W3005 "dependency already enforced by GetAtt": CDK adds an explicit DependsOn from each function
# to its role (and the notifications resource to its queue) on purpose; harmless redundancy.
CFN_LINT_IGNORED = ["W3005"]
CFN_LINT_REGIONS = ["us-east-1", "eu-west-1"]


def _violations(report: dict[str, Any]) -> list[str]:
    return [
        f"{violation['ruleName']} ({violation['severity']}) at "
        + ", ".join(c["constructPath"] for c in violation["violatingConstructs"])
        for plugin in report.get("pluginReports", [])
        for violation in plugin.get("violations", [])
    ]


def test_synth_passes_cdk_nag(synth: SynthResult) -> None:
    assert synth.validation_error is None, synth.validation_error


def test_no_unacknowledged_nag_finding(synth: SynthResult) -> None:
    # Warnings do not fail the synth but still land in the report: there must be none either.
    assert _violations(synth.validation_report) == []


def test_no_warning_or_error_annotations(synth: SynthResult) -> None:
    assert problem_annotations(synth.manifest) == []


def test_acknowledgments_carry_reasons_in_the_template(synth: SynthResult) -> None:
    acknowledged = {
        logical_id: resource["Metadata"]["cdk_nag"]["rules_to_suppress"]
        for logical_id, resource in synth.resources.items()
        if "cdk_nag" in resource.get("Metadata", {})
    }
    assert acknowledged, "expected the acknowledgments in the template's Metadata (audit trail)"
    for logical_id, rules in acknowledged.items():
        for rule in rules:
            assert rule["id"].startswith("AwsSolutions-"), (logical_id, rule)
            assert len(rule["reason"]) >= 40, (logical_id, rule)


def test_cfn_lint_clean(synth: SynthResult, tmp_path: Path) -> None:
    template = tmp_path / "template.json"
    template.write_text(synth.template_file.read_text())
    matches = lint_file(
        template, ManualArgs(regions=CFN_LINT_REGIONS, ignore_checks=CFN_LINT_IGNORED, include_checks=["I"])
    )
    assert [str(match) for match in matches] == []
