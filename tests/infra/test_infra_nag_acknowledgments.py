"""Every cdk-nag acknowledgment is still true: the finding it acknowledges still occurs where it says.

The app is synthesized a second time with acknowledgments recorded instead of applied, so cdk-nag
reports every finding (with its exact id, e.g. ``AwsSolutions-IAM5[Resource::*]``, and construct
path); an acknowledgment that no finding at its scope (or below) matches is stale: its reason
describes something the stack no longer does, and it would silently hide a future finding.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from constructs import IConstruct

import infra.nag
from infra.cdk_app import create_app
from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra


@dataclass(frozen=True)
class Recorded:
    scope: str  # construct path the acknowledgment was made on
    rule_id: str
    reason: str


@dataclass
class NagAudit:
    acknowledgments: list[Recorded]
    findings: dict[str, set[str]]  # finding id -> construct paths
    error: str | None


class _RecordingValidations:
    """Stands in for aws_cdk.Validations inside infra.nag: remembers, applies nothing."""

    recorded: ClassVar[list[Recorded]] = []

    def __init__(self, scope: IConstruct) -> None:
        self._scope = scope

    @classmethod
    def of(cls, scope: IConstruct) -> _RecordingValidations:
        return cls(scope)

    def acknowledge(self, *acknowledgments: Any) -> None:
        for ack in acknowledgments:
            self.recorded.append(Recorded(self._scope.node.path, ack.id, ack.reason))


@pytest.fixture(scope="module")
def audit(synth: SynthResult, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NagAudit]:
    # `synth` first: it builds the Lambda layer a synthesis needs.
    outdir = tmp_path_factory.mktemp("nag-audit")
    _RecordingValidations.recorded = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(infra.nag, "Validations", _RecordingValidations)
        app, _stack, _config = create_app(outdir=str(outdir))
        error: str | None = None
        try:
            app.synth()
        except RuntimeError as exc:  # unacknowledged findings fail the synth: expected here
            error = str(exc)
    report = json.loads((Path(outdir) / "validation-report.json").read_text())
    findings: dict[str, set[str]] = {}
    for plugin in report.get("pluginReports", []):
        for violation in plugin.get("violations", []):
            for construct in violation["violatingConstructs"]:
                findings.setdefault(violation["ruleName"], set()).add(construct["constructPath"])
    yield NagAudit(list(_RecordingValidations.recorded), findings, error)


def test_the_audit_sees_findings_and_acknowledgments(audit: NagAudit) -> None:
    # Guards the next test: without findings every acknowledgment would look stale, and vice versa.
    assert audit.error is not None and audit.error.startswith("ValidationFailed")
    assert audit.acknowledgments
    assert "AwsSolutions-IAM5[Resource::*]" in audit.findings


def test_every_acknowledgment_matches_a_finding(audit: NagAudit) -> None:
    stale = [
        f"{ack.rule_id} on {ack.scope}: {ack.reason}"
        for ack in audit.acknowledgments
        if not any(
            path == ack.scope or path.startswith(f"{ack.scope}/") for path in audit.findings.get(ack.rule_id, ())
        )
    ]
    assert stale == [], "acknowledged findings that no longer occur (remove them):\n" + "\n".join(stale)


def test_every_finding_is_acknowledged(audit: NagAudit) -> None:
    # The converse, per construct: what the real synth lets through is exactly what was acknowledged.
    unacknowledged = [
        f"{rule_id} at {path}"
        for rule_id, paths in audit.findings.items()
        for path in paths
        if not any(
            ack.rule_id == rule_id and (path == ack.scope or path.startswith(f"{ack.scope}/"))
            for ack in audit.acknowledgments
        )
    ]
    assert unacknowledged == []
