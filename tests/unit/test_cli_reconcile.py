"""``rag-ingest reconcile``: its arguments, the invocation of the Reconciler function, its output
and exit codes (the function itself: tests/integration/test_reconciler_damage.py)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rag_ingest.adapters.stack_resources import StackResources, StackResourcesError
from rag_ingest.operations.reconciler import DriftKind, Finding, ReconcileReport, ReconcileRequest
from rag_ingest_client.cli import build_parser, main
from rag_ingest_client.operator.commands import invoke_reconciler, print_reconcile, reconcile_request

pytestmark = pytest.mark.unit


def test_arguments_become_the_request() -> None:
    args = build_parser().parse_args(["reconcile", "--repair", "--tenant", "acme", "--grace", "10m", "--json"])
    assert reconcile_request(args) == ReconcileRequest(repair=True, tenant_id="acme", object_grace_seconds=600)
    assert args.json
    plain = reconcile_request(build_parser().parse_args(["reconcile"]))
    assert plain == ReconcileRequest(repair=False)


@dataclass
class FakeLambda:
    answer: Any
    error: bool = False
    calls: list[dict[str, Any]] = field(default_factory=list)

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        response: dict[str, Any] = {"Payload": io.BytesIO(json.dumps(self.answer).encode())}
        if self.error:
            response["FunctionError"] = "Unhandled"
        return response


@dataclass(frozen=True)
class FakeResources(StackResources):
    fake: FakeLambda | None = None

    def slow_client(self, service: str, read_timeout: int) -> Any:
        assert service == "lambda" and read_timeout > 900  # longer than the function's own timeout
        return self.fake


def _resources(fake: FakeLambda, function: str | None = "rag-reconciler") -> FakeResources:
    return FakeResources(
        documents_table="t", dead_letter_queue_url="d", ingest_queue_url="q", state_machine_arn="s",
        reconciler_function=function, fake=fake,
    )  # fmt: skip


def test_invokes_the_function_with_the_request_and_reads_its_report() -> None:
    report = ReconcileReport(repair=True, tenant_id="acme", records=3)
    fake = FakeLambda(report.model_dump(mode="json"))
    assert invoke_reconciler(ReconcileRequest(repair=True, tenant_id="acme"), _resources(fake)) == report
    [call] = fake.calls
    assert call["FunctionName"] == "rag-reconciler"
    assert json.loads(call["Payload"]) == {"repair": True, "tenant_id": "acme"}


def test_a_failed_run_or_a_stack_without_the_function_is_an_error() -> None:
    with pytest.raises(StackResourcesError, match="the Reconciler function failed: boom"):
        invoke_reconciler(ReconcileRequest(), _resources(FakeLambda({"errorMessage": "boom"}, error=True)))
    with pytest.raises(StackResourcesError, match="ReconcilerFunctionName"):
        invoke_reconciler(ReconcileRequest(), _resources(FakeLambda({}), function=None))


def _finding(repaired: str | None) -> Finding:
    return Finding(
        kind=DriftKind.ORPHAN_CHUNKS, tenant_id="acme", document_id="doc-1", reason="no document record",
        repairable=True, repaired=repaired,
    )  # fmt: skip


def test_output_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert print_reconcile(ReconcileReport(repair=False, tenant_id=None, records=2), as_json=False) == 0
    assert "every tenant: 2 records" in capsys.readouterr().out
    drifted = ReconcileReport(repair=False, tenant_id="acme", findings=[_finding(None)])
    assert print_reconcile(drifted, as_json=False) == 1
    out = capsys.readouterr().out
    assert "OrphanChunks" in out and "doc-1: no document record" in out
    repaired = ReconcileReport(repair=True, tenant_id="acme", findings=[_finding("deleted 3 chunks")])
    assert print_reconcile(repaired, as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"][0]["repaired"] == "deleted 3 chunks"


def test_without_a_running_local_stack_it_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reconcile", "--outputs", str(tmp_path / "missing.json")]) == 1
    assert "start the local stack first" in capsys.readouterr().err
