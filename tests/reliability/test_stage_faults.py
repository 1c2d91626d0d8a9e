"""Failures inside the workflow: transient errors at every stage (before the stage's code runs, and
after it did its work), throttling during Embed, and files that can never succeed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.record import DocumentStatus

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from tests.support.pipeline_probe import (
    INVALID_SAMPLES,
    SAMPLES,
    STAGE_FUNCTIONS,
    VALID_SAMPLES,
    PipelineProbe,
    UploadTicket,
)

pytestmark = pytest.mark.reliability

TRANSIENT_FAILURES = 2  # per stage: well within the template's TransientError MaxAttempts


def test_transient_failures_before_each_stage_runs_are_retried_to_ready(
    probe: PipelineProbe, tenant: str, tenant_client: OfflineClient, faults: OfflineStackProcess
) -> None:
    sample = SAMPLES / "urban-birds.pdf"
    ticket = probe.ticket(tenant_client, sample.name)
    # Like a throttled or failed Lambda invoke: the error comes back without the stage's code running.
    for function in STAGE_FUNCTIONS.values():
        faults.arm_fault(function, "raise", times=TRANSIENT_FAILURES, match=ticket.document_id)
    probe.send(ticket, sample)
    probe.wait_terminal([ticket.document_id])

    record = probe.assert_ready_exactly_once(ticket.document_id)
    assert record.execution_arn
    invocations = probe.function_invocations(record.execution_arn)
    for stage in STAGE_FUNCTIONS:
        assert invocations[probe.stage_function(stage)] == 1 + TRANSIENT_FAILURES, (stage, invocations)
    assert invocations[probe.function_name("MarkFailedFunction")] == 0
    # The record counts runs of a stage's code; failures before it ran are in the execution history.
    assert record.attempts == dict.fromkeys(STAGE_FUNCTIONS, 1)
    assert faults.faults()["faults"] == [], "some injected failures never happened"
    probe.assert_queues_settled(tenant)


def test_transient_failure_after_a_stage_did_its_work_is_retried_without_redoing_it(
    probe: PipelineProbe, tenant: str, tenant_client: OfflineClient, faults: OfflineStackProcess
) -> None:
    # One document per stage, in parallel; each fault matches its own document only.
    stages = [stage for stage in STAGE_FUNCTIONS if stage != "FINALIZE"]  # Finalize: its own test below
    uploads: dict[str, tuple[UploadTicket, Path]] = {}
    for number, stage in enumerate(stages):
        sample = VALID_SAMPLES[number % 2]
        uploads[stage] = (probe.ticket(tenant_client, sample.name), sample)
        # The stage's code runs to the end (status, checkpoints, index writes), then the answer is
        # lost: Step Functions sees a TransientError and runs the stage again.
        faults.arm_fault(
            STAGE_FUNCTIONS[stage], "raise_after", times=TRANSIENT_FAILURES, match=uploads[stage][0].document_id
        )
    for ticket, sample in uploads.values():
        probe.send(ticket, sample)
    probe.wait_terminal([ticket.document_id for ticket, _ in uploads.values()])

    for stage, (ticket, _) in uploads.items():
        record = probe.assert_ready_exactly_once(ticket.document_id)
        assert record.execution_arn and record.version
        assert record.attempts == {**dict.fromkeys(STAGE_FUNCTIONS, 1), stage: 1 + TRANSIENT_FAILURES}, stage
        assert probe.function_invocations(record.execution_arn)[probe.stage_function(stage)] == 3, stage
        # Checkpoints: every artifact (pages, chunks, each embedding batch) was written once.
        written = probe.artifact_versions(ticket.document_id, record.version)
        assert written and set(written.values()) == {1}, (stage, written)
    probe.assert_queues_settled(tenant)


def test_finalize_retried_after_it_marked_the_document_ready_succeeds(
    probe: PipelineProbe, tenant: str, tenant_client: OfflineClient, faults: OfflineStackProcess
) -> None:
    """Finalize's answer is lost after READY was written (a Lambda service error after the work):
    its retry must see the document READY on this version and succeed, not fail the execution
    (found by this suite; fixed in pipeline.finalize)."""
    sample = SAMPLES / "sourdough.pdf"
    ticket = probe.ticket(tenant_client, sample.name)
    faults.arm_fault("FinalizeFunction", "raise_after", times=TRANSIENT_FAILURES, match=ticket.document_id)
    probe.send(ticket, sample)
    probe.wait_terminal([ticket.document_id])

    assert faults.faults()["faults"] == [], "Finalize never lost its answer"
    record = probe.assert_ready_exactly_once(ticket.document_id)  # the execution SUCCEEDED too
    assert record.execution_arn
    invocations = probe.function_invocations(record.execution_arn)
    assert invocations[probe.stage_function("FINALIZE")] == 1 + TRANSIENT_FAILURES
    assert invocations[probe.function_name("MarkFailedFunction")] == 0
    probe.assert_queues_settled(tenant)


def test_throttling_during_embed_is_retried_and_completed_batches_are_not_embedded_again(
    probe: PipelineProbe, tenant: str, tenant_client: OfflineClient, faults: OfflineStackProcess
) -> None:
    sample = SAMPLES / "lighthouses.pdf"
    ticket = probe.ticket(tenant_client, sample.name)
    throttled: dict[str, Any] = {"error_type": "TransientError", "match": ticket.document_id}
    # First throttled after every batch was embedded and checkpointed, then twice at the call itself.
    faults.arm_fault(
        "EmbedFunction", "raise_after", error_message="ThrottlingException: Rate exceeded (after the work)", **throttled
    )
    faults.arm_fault("EmbedFunction", "raise", times=2, error_message="ThrottlingException: Rate exceeded", **throttled)
    probe.send(ticket, sample)
    probe.wait_terminal([ticket.document_id])

    record = probe.assert_ready_exactly_once(ticket.document_id)
    assert record.execution_arn and record.version
    assert probe.function_invocations(record.execution_arn)[probe.stage_function("EMBED")] == 4
    assert record.attempts["EMBED"] == 2  # the embedding code ran twice: first run, then the final retry
    # Embedding is paid per token: every batch was embedded (written) exactly once.
    written = probe.artifact_versions(record.document_id, record.version)
    batches = {key: count for key, count in written.items() if key.startswith("embeddings/")}
    assert batches and set(batches.values()) == {1}, written
    assert record.progress is not None and record.progress.done == record.progress.total == record.chunk_count
    probe.assert_queues_settled(tenant)


@pytest.mark.parametrize(
    ("sample", "error_code", "failed_stage"),
    [
        ("not-a-pdf.pdf", ErrorCode.UNSUPPORTED_TYPE, "VALIDATE"),
        ("encrypted.pdf", ErrorCode.ENCRYPTED_PDF, "PARSE"),
        ("truncated.pdf", ErrorCode.CORRUPT_PDF, "PARSE"),
    ],
)
def test_a_file_that_can_never_succeed_fails_once_with_its_code_and_indexes_nothing(
    probe: PipelineProbe,
    tenant: str,
    tenant_client: OfflineClient,
    faults: OfflineStackProcess,
    sample: str,
    error_code: ErrorCode,
    failed_stage: str,
) -> None:
    ticket = probe.upload(tenant_client, INVALID_SAMPLES / sample)
    probe.wait_terminal([ticket.document_id])

    record = probe.record(ticket.document_id)
    assert (record.status, record.error_code, record.stage) == (DocumentStatus.FAILED, error_code, failed_stage)
    assert record.error_detail
    # No retry loop: the failing stage ran once, no later stage ran, MarkFailed closed it once.
    stages = list(STAGE_FUNCTIONS)
    assert record.attempts == dict.fromkeys(stages[: stages.index(failed_stage) + 1], 1)
    [execution] = probe.executions_of([ticket.document_id])
    assert execution["status"] == "FAILED"
    invocations = probe.function_invocations(execution["executionArn"])
    assert invocations[probe.stage_function(failed_stage)] == 1
    assert all(invocations[probe.stage_function(stage)] == 0 for stage in stages[stages.index(failed_stage) + 1 :])
    assert invocations[probe.function_name("MarkFailedFunction")] == 1
    assert probe.index_count(ticket.document_id) == 0
    probe.assert_queues_settled(tenant)
