"""A burst of uploads while 10 % of the invocations fail: all READY, none twice, none lost.

``make test`` runs RELIABILITY_BURST (default 40) uploads. The figures in docs/reliability.md
come from the 200-upload run:

    RELIABILITY_BURST=200 RELIABILITY_REPORT=burst-200.json .venv/bin/pytest tests/reliability/test_burst.py -s
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from rag_ingest.core.ids import version_hash
from rag_ingest.core.record import DocumentStatus
from rag_ingest.documents.intake import PoisonMessageError, address_of, parse_queue_message

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from tests.support.pipeline_probe import (
    STAGE_FUNCTIONS,
    TERMINAL,
    VALID_SAMPLES,
    PipelineProbe,
    UploadTicket,
    intake_poller_stats,
)

pytestmark = pytest.mark.reliability

BURST_SIZE = int(os.environ.get("RELIABILITY_BURST", "40"))
FAULT_PROBABILITY = 0.1
UPLOADERS = 8  # concurrent browsers
# Faults stay armed for the whole burst: a fault "times" far above what the burst can use.
UNLIMITED = 1_000_000


def test_burst_of_uploads_with_transient_faults_ends_all_ready_exactly_once(
    probe: PipelineProbe, tenant: str, tenant_client: OfflineClient, faults: OfflineStackProcess
) -> None:
    # Every stage: 10 % of its invocations fail with a TransientError before the stage's code runs.
    # Intake: 10 % of its batches die after their side effects, before the ack (redelivered).
    for function in STAGE_FUNCTIONS.values():
        faults.arm_fault(function, "raise", times=UNLIMITED, probability=FAULT_PROBABILITY, match=tenant)
    # (The first intake batch always crashes, so a small burst sees a redelivery too.)
    faults.arm_fault("IntakeFunction", "crash_after", times=1, match=tenant)
    faults.arm_fault("IntakeFunction", "crash_after", times=UNLIMITED, probability=FAULT_PROBABILITY, match=tenant)
    intake_before = intake_poller_stats(faults)
    injected_before = {_construct_id(probe, name): count for name, count in faults.faults()["injected"].items()}
    started = time.monotonic()
    log_offset = faults.log_path.stat().st_size
    # A crashed intake batch comes back after 40 s, not the template's 180 s; still more than the
    # batching window + the intake timeout (0 + 30 s), so a batch still running is not redelivered.
    with probe.visibility_timeout(40):
        with ThreadPoolExecutor(max_workers=UPLOADERS) as uploaders:
            tickets: list[UploadTicket] = list(
                uploaders.map(
                    lambda number: probe.upload(tenant_client, VALID_SAMPLES[number % len(VALID_SAMPLES)]),
                    range(BURST_SIZE),
                )
            )
        document_ids = [ticket.document_id for ticket in tickets]
        try:
            records = probe.wait_terminal(document_ids, timeout=120 + 3 * BURST_SIZE)
        except TimeoutError:
            records = probe.records(document_ids)  # reported as lost below
        probe.wait_ingest_queue_drained(timeout=120)
    wall_seconds = time.monotonic() - started
    injected_after = {_construct_id(probe, name): count for name, count in faults.faults()["injected"].items()}
    faulted = [_construct_id(probe, probe.function_name(f)) for f in (*STAGE_FUNCTIONS.values(), "IntakeFunction")]
    injected = {f: injected_after.get(f, 0) - injected_before.get(f, 0) for f in faulted}
    faults.clear_faults()
    intake_after = intake_poller_stats(faults)

    report = burst_report(probe, tenant, document_ids, records)
    report.update(
        wall_seconds=round(wall_seconds, 1),
        fault_probability=FAULT_PROBABILITY,
        faults_injected=injected,
        intake_messages_received=intake_after["received"] - intake_before["received"],
        intake_invocation_errors=intake_after["invocation_errors"] - intake_before["invocation_errors"],
        intake_errors_by_type=intake_errors_by_type(faults.log_path, log_offset),
    )
    print("\nburst report:", json.dumps(report, indent=2))
    if os.environ.get("RELIABILITY_REPORT"):
        Path(os.environ["RELIABILITY_REPORT"]).write_text(json.dumps(report, indent=2) + "\n")

    assert report["lost"] == [], "documents that never reached READY or FAILED"
    assert report["duplicate_executions"] == {}
    assert report["index_mismatches"] == {}
    assert report["ready"] == BURST_SIZE, report["failed_by_code"]
    assert report["dlq_unexplained"] == []
    probe.delete_dead_letters(tenant)
    assert sum(report["faults_injected"].values()) > 0, "no fault was injected: the burst proved nothing"


def burst_report(probe: PipelineProbe, tenant: str, document_ids: list[str], records: dict[str, Any]) -> dict[str, Any]:
    """READY, FAILED by code, lost; duplicates in executions and in the index; DLQ; retries."""
    statuses = Counter(records[i].status for i in document_ids if i in records)
    failed_by_code = Counter(
        str(records[i].error_code) for i in document_ids if i in records and records[i].status == DocumentStatus.FAILED
    )
    lost = [i for i in document_ids if i not in records or records[i].status not in TERMINAL]
    executions = Counter(e["name"] for e in probe.executions_of(document_ids))
    per_version = Counter(
        f"{i}-{version_hash(records[i].version)}" for i in document_ids if i in records and records[i].version
    )
    # One execution per (document, version): any name seen twice, or a version without its own name.
    duplicate_executions = {name: count for name, count in executions.items() if count > 1}
    duplicate_executions.update({name: 0 for name in per_version if name not in executions})
    in_index = probe.index_counts(tenant)
    index_mismatches = {
        i: {"chunk_count": records[i].chunk_count, "indexed": dict(in_index.get(i, {}))}
        for i in document_ids
        if i in records
        and records[i].status == DocumentStatus.READY
        and dict(in_index.get(i, {})) != {version_hash(records[i].version): records[i].chunk_count}
    }
    # Faults here hit before a stage's code runs, so its code should have run once per stage.
    reruns = sum(sum(records[i].attempts.values()) - len(records[i].attempts) for i in document_ids if i in records)
    return {
        "uploads": len(document_ids),
        "ready": statuses[DocumentStatus.READY],
        "failed": statuses[DocumentStatus.FAILED],
        "failed_by_code": dict(failed_by_code),
        "lost": lost,
        "duplicate_executions": duplicate_executions,
        "index_mismatches": index_mismatches,
        "chunks_indexed": sum(sum(versions.values()) for versions in in_index.values()),
        "stage_code_reruns": reruns,
        **dead_letter_report(probe, tenant, records),
    }


def dead_letter_report(probe: PipelineProbe, tenant: str, records: dict[str, Any]) -> dict[str, Any]:
    """The burst's DLQ messages; one is explained when it is a copy of an upload whose document is
    READY (it was processed; the copy was redelivered until maxReceiveCount, e.g. after crashes)."""
    explained: Counter[str] = Counter()
    unexplained: list[str] = []
    for message in probe.dead_letters(tenant):
        try:
            uploads = parse_queue_message(message["Body"])
            document_ids = {address_of(upload.key, upload.bucket).document_id for upload in uploads}
        except PoisonMessageError:
            document_ids = set()
        if document_ids and all(i in records and records[i].status == DocumentStatus.READY for i in document_ids):
            receives = message["Attributes"].get("ApproximateReceiveCount", "?")
            explained[f"copy of a READY upload, received {receives} times"] += 1
        else:
            unexplained.append(message["Body"][:300])
    return {
        "dlq_messages": sum(explained.values()) + len(unexplained),
        "dlq_explained": dict(explained),
        "dlq_unexplained": unexplained,
    }


def intake_errors_by_type(log_path: Path, offset: int) -> dict[str, int]:
    """Failed intake invocations since ``offset`` in the stack log, by Lambda errorType."""
    with log_path.open("rb") as log:
        log.seek(offset)
        text = log.read().decode("utf-8", errors="replace")
    return dict(Counter(re.findall(r'poller .*function error: \{"errorType": "([^"]+)"', text)))


def _construct_id(probe: PipelineProbe, function_name: str) -> str:
    names = {name: logical_id for logical_id, name in probe.outputs["Functions"].items()}
    return str(names.get(function_name, function_name))
