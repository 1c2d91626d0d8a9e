"""``make chaos`` reduced to one fault (bench/chaos.py runs all five): ``kill -9`` of a stage's Lambda
worker process while documents are in that stage, on the session's stack. Every document must end
READY or FAILED with its input's code, the reconciler (the CLI's ``reconcile --json``) must find no
drift, and no passage may be in the index twice.

The shared stack is safe for this: the ``faults`` fixture starts the test with nothing in flight, the
killed worker is one of this test's Parse invocations (nothing else is parsing), and the reconciler
and the duplicate check look at the test's tenant only."""

from __future__ import annotations

import pytest
from rag_ingest.core.record import DocumentStatus

from bench.chaos import FAULT_PLANS, Run, busy_stage_worker, classify, invocation_errors, settle, upload_burst
from local.runtime.harness import OfflineStackProcess
from tests.support.pipeline_probe import PipelineProbe, reconcile_through_cli, wait_until

pytestmark = pytest.mark.reliability

DOCUMENTS = 6  # five valid samples and one bad input (bench.chaos.burst_files)
STAGE = "PARSE"


def test_kill_9_of_a_stage_worker_mid_burst_ends_settled_with_no_drift_and_no_duplicates(
    probe: PipelineProbe, tenant: str, faults: OfflineStackProcess
) -> None:
    run = Run(faults, probe, tenant, opensearch_url="")
    worker = FAULT_PLANS["worker"]
    run.uploads = upload_burst(probe, tenant, DOCUMENTS)

    wait_until(
        lambda: busy_stage_worker(run, [STAGE]), timeout=60, what="a document in Parse, its worker busy", interval=0.01
    )
    log_offset = faults.log_path.stat().st_size
    worker.kill(run)
    worker.recover(run)  # Parse serves again: the dead worker is gone, an invocation has ended ok

    records = settle(probe, [u.document_id for u in run.uploads], timeout=120)
    outcomes = classify(run.uploads, records)
    assert outcomes.lost == [], "documents with no final state"
    assert outcomes.unexpected == [], outcomes.unexpected
    assert (outcomes.ready, outcomes.permanent, outcomes.system_failures) == (
        DOCUMENTS - 1,
        {"UNSUPPORTED_TYPE": 1},
        {},
    ), outcomes
    # The kill was felt: an invocation died with the worker (Lambda's Runtime.ExitError) and Step Functions
    # invoked Parse again. (The stage's code may not have started yet: a worker still importing its
    # handler is busy too; so the execution history, not ``attempts``, shows the retry.)
    assert invocation_errors(faults.log_path, log_offset).get("Runtime.ExitError", 0) >= 1
    parse = probe.stage_function(STAGE)
    assert any(
        probe.function_invocations(str(r.execution_arn))[parse] >= 2
        for r in records.values()
        if r.status == DocumentStatus.READY
    ), "no Parse was invoked again after the kill"

    report = reconcile_through_cli(faults.state_dir / "outputs.json", tenant)
    assert report["findings"] == [], report["findings"]
    assert report["records"] == DOCUMENTS
    assert probe.duplicate_passages(tenant) == {"same_chunk_index": 0, "same_text": 0}
    for upload in run.uploads:
        if records[upload.document_id].status == DocumentStatus.READY:
            probe.assert_ready_exactly_once(upload.document_id)
