"""Bad input never pages anyone: every class of bad upload, through the local stack, ends in a
permanent error code after one attempt of the stage that judged it, with no retry, no system
code (the codes the SystemFailuresAlarm counts) and nothing in the DLQ (whose alarm pages).

Each file is a real upload: through the API's presigned POST where a browser could send it, or
written to the bucket directly (an empty or oversized object the POST policy would refuse, an
object put outside the API under an odd key, or under a key whose tenant segment is invalid).
"""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from pypdf import PdfReader, PdfWriter
from rag_ingest.core.errors import SYSTEM_ERROR_CODES, ErrorCode
from rag_ingest.core.ids import document_id_for_object
from rag_ingest.core.record import DocumentStatus

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from samples import documents, spreadsheets
from tests.support import hostile_pdfs
from tests.support.pipeline_probe import PipelineProbe, intake_poller_stats, wait_until

pytestmark = pytest.mark.reliability
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
INVALID = SAMPLES / "invalid"
# cdk.json limits (the local stack is synthesized from it).
MAX_PAGES = 5000
MAX_FILE_BYTES = 52_428_800


def too_many_pages() -> bytes:
    writer = PdfWriter()
    writer.append(PdfReader(SAMPLES / "lighthouses.pdf"), pages=[0])
    for _ in range(MAX_PAGES):
        writer.add_blank_page(width=612, height=792)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def too_large() -> bytes:
    # A valid PDF with a long comment after it: over the limit, and still a PDF by its header.
    data = (SAMPLES / "sourdough.pdf").read_bytes()
    return data + b"\n%" + b" " * (MAX_FILE_BYTES - len(data)) + b"\n"


#: name → (bytes, how it arrives: "api" = presigned POST, "put" = written to the API's key, the code)
BAD_UPLOADS: dict[str, tuple[bytes, str, ErrorCode]] = {
    "zero-bytes": (b"", "put", ErrorCode.EMPTY_FILE),
    "truncated": ((INVALID / "truncated.pdf").read_bytes(), "api", ErrorCode.CORRUPT_PDF),
    "wrong-magic": ((INVALID / "not-a-pdf.pdf").read_bytes(), "api", ErrorCode.UNSUPPORTED_TYPE),
    "encrypted": ((INVALID / "encrypted.pdf").read_bytes(), "api", ErrorCode.ENCRYPTED_PDF),
    "blank-pages": ((INVALID / "empty.pdf").read_bytes(), "api", ErrorCode.EMPTY_DOCUMENT),
    "image-only": ((INVALID / "image-only.pdf").read_bytes(), "api", ErrorCode.NO_TEXT_LAYER),
    "too-many-pages": (too_many_pages(), "api", ErrorCode.TOO_MANY_PAGES),
    "too-large": (too_large(), "put", ErrorCode.FILE_TOO_LARGE),
    "flate-bomb": (hostile_pdfs.flate_bomb(), "api", ErrorCode.PDF_TOO_COMPLEX),
    "400k-text-operators": (hostile_pdfs.many_text_operators(400_000), "api", ErrorCode.PDF_TOO_COMPLEX),
    "cyclic-page-tree": (hostile_pdfs.cyclic_page_tree(), "api", ErrorCode.CORRUPT_PDF),
    # The other formats' hostile files (docs/formats.md, "Hostile inputs").
    "zip-bomb-docx": (documents.zip_bomb_docx(), "api", ErrorCode.DOCUMENT_TOO_COMPLEX),
    "entity-expansion-docx": (documents.entity_expansion_docx(), "api", ErrorCode.UNSAFE_XML),
    "external-entity-docx": (documents.external_entity_docx(), "api", ErrorCode.UNSAFE_XML),
    "10000-slides-pptx": (documents.many_slides_pptx(), "api", ErrorCode.TOO_MANY_PAGES),
    "100000-nested-html": (documents.deeply_nested_html(), "api", ErrorCode.DOCUMENT_TOO_COMPLEX),
    "10mb-line-markdown": (documents.one_line_markdown(), "api", ErrorCode.DOCUMENT_TOO_COMPLEX),
    "legacy-doc": (documents.ole2_document(), "api", ErrorCode.LEGACY_OFFICE_FORMAT),
    "macro-docm": (
        documents.macro_enabled(documents.docx_bytes(), "word/document.xml"),
        "api",
        ErrorCode.MACRO_ENABLED_DOCUMENT,
    ),
    "unknown-encoding": (documents.undecodable_text(), "api", ErrorCode.UNKNOWN_ENCODING),
    # Spreadsheets (docs/formats.md, "Spreadsheets").
    "zip-bomb-xlsx": (spreadsheets.zip_bomb_xlsx(), "api", ErrorCode.DOCUMENT_TOO_COMPLEX),
    "entity-expansion-xlsx": (spreadsheets.entity_expansion_xlsx(), "api", ErrorCode.UNSAFE_XML),
    "million-rows-xlsx": (spreadsheets.million_rows_xlsx(), "api", ErrorCode.TOO_MANY_ROWS),
    "10mb-cell-xlsx": (spreadsheets.huge_cell_xlsx(), "api", ErrorCode.CELL_TOO_LARGE),
    "million-rows-csv": (spreadsheets.million_rows_csv(), "api", ErrorCode.TOO_MANY_ROWS),
    "10mb-cell-csv": (spreadsheets.huge_cell_csv(), "api", ErrorCode.CELL_TOO_LARGE),
    "macro-xlsm": (spreadsheets.macro_enabled_xlsx(), "api", ErrorCode.MACRO_ENABLED_DOCUMENT),
    "legacy-xls": (spreadsheets.legacy_xls(), "api", ErrorCode.LEGACY_OFFICE_FORMAT),
}


def whole_record(probe: PipelineProbe, document_id: str) -> bool | None:
    try:
        return probe.status.get(document_id) is not None or None
    except ValidationError:
        return None


def upload(probe: PipelineProbe, client: OfflineClient, name: str, data: bytes, how: str) -> str:
    ticket = probe.ticket(client, f"{name}.pdf")
    if how == "api":
        path = Path(f"/tmp/rag-ingest-bad-{uuid.uuid4().hex}-{name}.pdf")
        path.write_bytes(data)
        try:
            probe.send(ticket, path)
        finally:
            path.unlink()
    else:
        probe.s3.put_object(Bucket=probe.bucket, Key=ticket.key, Body=data, ContentType="application/pdf")
    return ticket.document_id


def test_every_bad_input_ends_permanent_after_one_attempt_and_never_pages(
    probe: PipelineProbe, faults: OfflineStackProcess, tenant: str, tenant_client: OfflineClient
) -> None:
    before = intake_poller_stats(faults)
    expected: dict[str, tuple[str, ErrorCode]] = {}
    for name, (data, how, code) in BAD_UPLOADS.items():
        expected[upload(probe, tenant_client, name, data, how)] = (name, code)
    # An object put outside the API under an odd key (spaces, '+', parentheses, non-ASCII, nested).
    odd_key = f"raw/{tenant}/inbox/2026 Q1/Odd name+(1) é #{uuid.uuid4().hex[:6]}.pdf"
    probe.s3.put_object(Bucket=probe.bucket, Key=odd_key, Body=(INVALID / "not-a-pdf.pdf").read_bytes())
    expected[document_id_for_object(probe.bucket, odd_key)] = ("odd-key", ErrorCode.UNSUPPORTED_TYPE)
    # Objects whose key names no valid tenant: rejected by intake, recorded nowhere, not retried.
    orphans = [
        f"raw/{tenant} corp/{uuid.uuid4().hex}.pdf",  # a space: not a tenant id
        f"raw/{tenant}%25/{uuid.uuid4().hex}.pdf",
        f"raw/{uuid.uuid4().hex}-{tenant}.pdf",  # no tenant folder at all
    ]
    for key in orphans:
        probe.s3.put_object(Bucket=probe.bucket, Key=key, Body=(SAMPLES / "sourdough.pdf").read_bytes())

    # moto's UpdateItem that creates an item (intake's first write for an object put outside the API)
    # is not atomic to readers: wait until the record is whole before polling records in batches.
    wait_until(
        lambda: whole_record(probe, document_id_for_object(probe.bucket, odd_key)), timeout=120, what="odd-key record"
    )
    records = probe.wait_terminal(expected, timeout=600)
    outcomes = {name: (records[i].status, records[i].error_code) for i, (name, _) in expected.items()}
    assert outcomes == {name: (DocumentStatus.FAILED, code) for name, code in expected.values()}
    system_codes = {code.value for code in SYSTEM_ERROR_CODES}
    for document_id, (name, _) in expected.items():
        record = records[document_id]
        assert record.error_code is not None and record.error_code.value not in system_codes, (name, record)
        # One attempt of each stage that ran (the one that judged it included), one execution, no replay.
        assert record.attempts and set(record.attempts.values()) == {1}, (name, record.attempts)
        executions = probe.executions_of([document_id])
        assert len(executions) == 1, (name, executions)
        invocations = probe.function_invocations(executions[0]["executionArn"])
        assert set(invocations.values()) == {1}, (name, invocations)  # no Lambda retried, MarkFailed once

    # Intake handled every message (the orphans included) without a failure: nothing retried or dead-lettered.
    def intake_settled() -> dict[str, int] | None:
        stats = intake_poller_stats(faults)
        return stats if probe.queue_depth(probe.queue_url) == 0 else None

    # Past the queue's 180 s visibility timeout: a batch that failed would be received again and
    # show in the counters asserted below, rather than as a queue still holding messages.
    try:
        after = wait_until(intake_settled, timeout=240, what="ingest queue drained")
    except TimeoutError as exc:
        depth = probe.queue_depth(probe.queue_url)
        raise AssertionError(f"{exc}: {depth} left; intake {before} -> {intake_poller_stats(faults)}") from exc
    assert after["failed"] == before["failed"] and after["invocation_errors"] == before["invocation_errors"]
    assert after["deleted"] - before["deleted"] >= len(expected) + len(orphans)
    probe.assert_queues_settled(tenant)
    for key in orphans:
        assert probe.dead_letters(key.rsplit("/", 1)[-1]) == []
    # No record for an object that belongs to no tenant.
    orphan_ids = [document_id_for_object(probe.bucket, key) for key in orphans]
    assert probe.records(orphan_ids) == {}


def test_the_enormous_word_is_indexed_in_seconds(
    probe: PipelineProbe, faults: OfflineStackProcess, tenant_client: OfflineClient
) -> None:
    """The issue's 910-byte DoS: one page, one 300,000-letter word. Linear cleanup: READY."""
    document_id = upload(probe, tenant_client, "enormous-word", hostile_pdfs.enormous_word(300_000), "api")
    records: dict[str, Any] = probe.wait_terminal([document_id], timeout=300)
    assert records[document_id].status == DocumentStatus.READY, records[document_id]
    probe.assert_ready_exactly_once(document_id)
