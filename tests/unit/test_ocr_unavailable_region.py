"""The pipeline in a region where Amazon Textract is not offered (OCR_ENGINE=textract, the engine
built from a real boto3 client of such a region, decided from botocore's endpoint data): a mixed
document's scanned pages become failed pages with the reason, its text pages are indexed and it
goes READY; no stage raises TransientError (before, the unresolvable endpoint was retried until
TRANSIENT_RETRIES_EXHAUSTED). The client has a Stubber with nothing queued: a call would fail."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import Stubber
from rag_ingest.adapters.textract import TextractEngine
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.job import ParseTask
from rag_ingest.core.parsed import ParsedRange
from rag_ingest.core.record import DocumentStatus
from rag_ingest.core.s3_keys import page_range_key

from tests.unit.test_pdf_ocr_pages import TEXT, make_pdf
from tests.unit.test_pipeline_stages_fast import BUCKET, ENV, World, build_world
from tests.unit.test_textract_adapter import UNSERVED_REGION, textract_client

pytestmark = pytest.mark.unit
REASON = f"OCR unavailable: Amazon Textract is not offered in region {UNSERVED_REGION}"


@pytest.fixture
def textract_without_service() -> Iterator[TextractEngine]:
    client = textract_client(UNSERVED_REGION)
    with Stubber(client) as stub:  # nothing queued: any DetectDocumentText call raises
        yield TextractEngine(client, environ={})
        stub.assert_no_pending_responses()


def parse_all(world: World, data: bytes) -> Any:
    job = world.pipeline.parse(world.pipeline.validate(world.upload(data)))
    for item in job.parse_tasks:
        world.pipeline.parse_range(ParseTask(job=job, range=item))
    return job


def stored_reasons(world: World, job: Any) -> dict[int, str]:
    reasons: dict[int, str] = {}
    for first_page in [1, *(task.first_page for task in job.parse_tasks)]:
        stored = world.objects.get_json(BUCKET, page_range_key(job.pages_key, first_page))
        reasons |= ParsedRange.model_validate(stored).failure_reasons
    return reasons


@pytest.mark.parametrize("range_pages", [50, 2], ids=["one-range", "page-ranges"])
def test_a_mixed_document_keeps_its_text_pages_and_fails_its_scanned_pages_with_the_reason(
    textract_without_service: TextractEngine, range_pages: int
) -> None:
    env = ENV.model_copy(update={"ocr_engine": "textract", "parse_range_pages": range_pages})
    world = build_world(env=env, ocr_engine=textract_without_service)

    job = parse_all(world, make_pdf(["text", "scan", "text", "scan"]))  # no TransientError
    assert stored_reasons(world, job) == {2: REASON, 4: REASON}

    job = world.pipeline.chunk(job)
    assert job.failed_pages == [2, 4]
    chunks = world.objects.get_json(BUCKET, job.chunks_key or "")
    assert chunks and all("lighthouse keeper" in chunk["text"] for chunk in chunks)
    assert {chunk["page_start"] for chunk in chunks} | {chunk["page_end"] for chunk in chunks} <= {1, 3}
    assert sum(chunk["text"].count(TEXT) for chunk in chunks) >= 2  # both text pages, whole

    world.embed_all(job)
    job = world.pipeline.finalize(world.pipeline.index(job))
    record = world.documents.get(job.document_id)
    assert record is not None and record.status is DocumentStatus.READY
    assert record.failed_pages == [2, 4] and record.ocr_pages == 0


def test_an_image_only_document_is_no_text_layer_as_when_every_ocr_page_fails(
    textract_without_service: TextractEngine,
) -> None:
    world = build_world(env=ENV.model_copy(update={"ocr_engine": "textract"}), ocr_engine=textract_without_service)
    job = world.pipeline.validate(world.upload(make_pdf(["scan", "scan"])))
    with pytest.raises(PermanentError) as caught:
        world.pipeline.parse(job)
    assert caught.value.code is ErrorCode.NO_TEXT_LAYER
    assert "2 need OCR: 0 read by OCR, 2 failed" in caught.value.detail
