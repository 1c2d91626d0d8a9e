"""Parse as a Map over page ranges: the plan (sizes, edges, OCR shares), the join of the ranges
(text, page spans and headings across range borders, as if parsed whole), a retried range, and
the document-level verdicts after the join. Over in-memory fakes, in milliseconds."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.job import Lane, PageRange, ParseTask, Stage, lane_for, plan_page_ranges
from rag_ingest.core.parsed import ParsedRange
from rag_ingest.core.s3_keys import page_range_key
from rag_ingest.core.tokens import count_tokens
from rag_ingest.documents.schemas import DocumentView
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.pdf.extract import join_page_ranges, parse_page_range, parse_pdf

from tests.unit.test_pipeline_stages_fast import ENV as FAST_STAGES_ENV
from tests.unit.test_pipeline_stages_fast import World, build_world

pytestmark = pytest.mark.unit
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
BUCKET = "docs"
RANGE_PAGES = 2
#: The fast stage tests' environment, with ranges of RANGE_PAGES pages.
ENV = FAST_STAGES_ENV.model_copy(update={"parse_range_pages": RANGE_PAGES})
LIMITS = {"max_bytes": 5 * 1024 * 1024, "max_pages": 50}


# -- the plan --------------------------------------------------------------------------------------
def spans(ranges: list[PageRange]) -> list[tuple[int, int]]:
    return [(item.first_page, item.last_page) for item in ranges]


def test_a_one_page_document_is_one_range_with_the_whole_ocr_cap() -> None:
    assert plan_page_ranges(1, 50, 50) == [PageRange(first_page=1, last_page=1, max_ocr_pages=50)]


def test_an_exact_multiple_of_the_range_size_has_no_short_last_range() -> None:
    assert spans(plan_page_ranges(100, 50, 50)) == [(1, 50), (51, 100)]
    assert spans(plan_page_ranges(50, 50, 50)) == [(1, 50)]


def test_one_page_over_a_multiple_makes_a_one_page_last_range() -> None:
    assert spans(plan_page_ranges(101, 50, 50)) == [(1, 50), (51, 100), (101, 101)]


def test_the_largest_document_is_maxpages_over_the_range_size_ranges_covering_every_page_once() -> None:
    ranges = plan_page_ranges(5000, 50, 50)
    assert len(ranges) == 100
    covered = [page for item in ranges for page in range(item.first_page, item.last_page + 1)]
    assert covered == list(range(1, 5001))


def test_ocr_shares_are_proportional_to_pages_and_add_up_to_the_document_cap() -> None:
    for page_count, range_pages, cap in [(5000, 50, 50), (101, 50, 50), (7, 2, 3), (3, 1, 0), (120, 50, 7)]:
        ranges = plan_page_ranges(page_count, range_pages, cap)
        assert sum(item.max_ocr_pages for item in ranges) == cap, (page_count, range_pages, cap)
    assert [item.max_ocr_pages for item in plan_page_ranges(100, 50, 50)] == [25, 25]
    assert [item.max_ocr_pages for item in plan_page_ranges(5000, 50, 50)][:4] == [0, 1, 0, 1]


def test_a_document_without_pages_gets_one_range_whose_parse_says_so() -> None:
    assert spans(plan_page_ranges(0, 50, 50)) == [(1, 1)]
    with pytest.raises(ValueError):
        plan_page_ranges(10, 0, 50)


# -- the join ---------------------------------------------------------------------------------------
def border_pdf() -> bytes:
    """Five pages; a numbered heading ends page 2 (the last page of the first 2-page range) and its
    section starts on page 3, with a sentence running on from page 3 onto page 4."""
    pdf = FPDF(format="A4", unit="mm")
    pdf.set_font("Helvetica", size=11)
    body = "The keeper lit the lamp at dusk and trimmed the wick at midnight, as the rules required. " * 6
    for number in range(1, 6):
        pdf.add_page()
        if number == 1:
            pdf.multi_cell(0, 6, "1 Keeping the Light\n\n" + body)
        elif number == 2:
            pdf.multi_cell(0, 6, body + "\n\n2 Storms on the North Reef")
        elif number == 3:
            pdf.multi_cell(0, 6, "Waves broke over the gallery all night. " * 5 + "The keeper wrote that the")
        else:
            pdf.multi_cell(0, 6, "glass held through the storm until morning. " * 5)
    return bytes(pdf.output())


def ranged(data: bytes, range_pages: int) -> list[ParsedRange]:
    page_count = len(PdfReader(io.BytesIO(data)).pages)
    return [
        parse_page_range(data, first_page=item.first_page, last_page=item.last_page, **LIMITS)
        for item in plan_page_ranges(page_count, range_pages, 0)
    ]


def test_joined_ranges_are_the_document_parsed_whole_heading_and_sentence_across_the_border() -> None:
    data = border_pdf()
    whole = parse_pdf(data, **LIMITS)
    joined = join_page_ranges(ranged(data, 2))
    assert joined == whole
    assert joined.pages[1].text.endswith("2 Storms on the North Reef")
    chunks = chunk_pages(joined.pages, count_tokens=count_tokens, target_tokens=120, overlap_tokens=20)
    assert chunks == chunk_pages(whole.pages, count_tokens=count_tokens, target_tokens=120, overlap_tokens=20)
    # The section that starts on page 3 is under the heading that ended page 2 (range 1).
    storm = [chunk for chunk in chunks if "Waves broke" in chunk.text]
    assert storm and all(chunk.heading_path[-1] == "2 Storms on the North Reef" for chunk in storm)
    # Its first chunk starts at the heading (page 2) and runs into range 2 (page 3): one span across the border.
    assert storm[0].text.startswith("2 Storms on the North Reef") and (storm[0].page_start, storm[0].page_end) >= (2, 3)
    # The sentence that runs from page 3 onto page 4 keeps its page span.
    crossing = [chunk for chunk in chunks if "wrote that the" in chunk.text and "glass held" in chunk.text]
    assert all((chunk.page_start, chunk.page_end) == (3, 4) for chunk in crossing)


@pytest.mark.parametrize("name", ["lighthouses.pdf", "sourdough.pdf", "urban-birds.pdf"])
@pytest.mark.parametrize("range_pages", [1, 2, 3])
def test_every_sample_joins_to_its_whole_parse_whatever_the_range_size(name: str, range_pages: int) -> None:
    data = (SAMPLES / name).read_bytes()
    assert join_page_ranges(ranged(data, range_pages)) == parse_pdf(data, **LIMITS)


def test_the_join_refuses_ranges_that_do_not_cover_the_document_once() -> None:
    parts = ranged((SAMPLES / "lighthouses.pdf").read_bytes(), 2)
    with pytest.raises(ValueError, match="exactly once"):
        join_page_ranges(parts[:-1])
    with pytest.raises(ValueError, match="exactly once"):
        join_page_ranges([*parts, parts[0]])
    assert join_page_ranges(list(reversed(parts))) == join_page_ranges(parts)  # order of arrival is free


def test_a_range_parses_only_its_own_pages() -> None:
    data = (SAMPLES / "lighthouses.pdf").read_bytes()
    part = parse_page_range(data, first_page=3, last_page=4, **LIMITS)
    assert [page.page_number for page in part.pages] == [3, 4] and part.page_count == 5
    assert part.metadata_title is None  # read by the range holding page 1
    with pytest.raises(ValueError, match="outside"):
        parse_page_range(data, first_page=6, last_page=7, **LIMITS)


def blank_and_image_pages(blank: int) -> bytes:
    writer = PdfWriter()
    writer.append(PdfReader(SAMPLES / "invalid" / "image-only.pdf"))
    for _ in range(blank):
        writer.add_blank_page(width=612, height=792)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def test_no_text_in_any_range_is_still_no_text_layer_even_when_the_drawn_page_is_in_another_range() -> None:
    data = blank_and_image_pages(3)
    parts = ranged(data, 1)
    assert not parts[-1].draws_marks and parts[0].draws_marks
    with pytest.raises(PermanentError) as caught:
        join_page_ranges(parts)
    assert caught.value.code is ErrorCode.NO_TEXT_LAYER
    with pytest.raises(PermanentError) as whole:
        parse_pdf(data, **LIMITS)
    assert whole.value.code is ErrorCode.NO_TEXT_LAYER and str(whole.value) == str(caught.value)


def test_only_blank_ranges_are_an_empty_document() -> None:
    data = (SAMPLES / "invalid" / "empty.pdf").read_bytes()
    with pytest.raises(PermanentError) as caught:
        join_page_ranges(ranged(data, 1))
    assert caught.value.code is ErrorCode.EMPTY_DOCUMENT


# -- the stages: Parse's first range, the Map's ranges, Chunk's join --------------------------------
def ranged_world() -> World:
    return build_world(env=ENV)


def test_parse_plans_the_other_ranges_as_small_map_items_and_chunk_joins_them() -> None:
    world = ranged_world()
    data = border_pdf()
    job = world.pipeline.parse(world.pipeline.validate(world.upload(data)))
    assert job.page_count == 5
    assert spans(job.parse_tasks) == [(3, 4), (5, 5)]  # pages 1-2 were parsed by Parse itself
    assert len(job.model_dump_json()) < 2000  # the state carries pointers and counts, never page text
    record = world.documents.get(job.document_id)
    assert record is not None and record.pages_parsed == 2 and record.page_count == 5
    for item in job.parse_tasks:
        counts = world.pipeline.parse_range(ParseTask(job=job, range=item))
        assert counts == {"first_page": item.first_page, "pages": item.pages, "failed_pages": 0}
    record = world.documents.get(job.document_id)
    assert record is not None and record.pages_parsed == 5 and record.attempts[Stage.PARSE.value] == 3
    job = world.pipeline.chunk(job)
    whole = parse_pdf(data, **LIMITS)
    expected = chunk_pages(whole.pages, count_tokens=count_tokens, target_tokens=120, overlap_tokens=20)
    stored = world.objects.get_json(BUCKET, job.chunks_key or "")
    assert [chunk["text"] for chunk in stored] == [chunk.text for chunk in expected]
    assert [chunk["heading_path"] for chunk in stored] == [chunk.heading_path for chunk in expected]


def test_a_retried_range_redoes_only_itself_and_counts_once() -> None:
    world = ranged_world()
    job = world.pipeline.parse(world.pipeline.validate(world.upload(border_pdf())))
    second = ParseTask(job=job, range=job.parse_tasks[0])
    world.pipeline.parse_range(second)
    reads, puts = len(world.objects.reads), list(world.objects.artifact_puts)
    world.pipeline.parse_range(second)  # Step Functions retried the iteration after it had finished
    assert len(world.objects.reads) == reads and world.objects.artifact_puts == puts
    record = world.documents.get(job.document_id)
    assert record is not None and record.pages_parsed == 4  # pages 1-2 and 3-4, each once
    # A retried last range (its artifact lost with the failed attempt) reads the PDF again, for its pages only.
    last = ParseTask(job=job, range=job.parse_tasks[1])
    world.pipeline.parse_range(last)
    assert len(world.objects.reads) == reads + 1
    assert world.objects.artifact_puts[-1] == page_range_key(job.pages_key or "", 5)


def test_chunk_without_a_range_artifact_fails_instead_of_indexing_part_of_the_document() -> None:
    world = ranged_world()
    job = world.pipeline.parse(world.pipeline.validate(world.upload(border_pdf())))
    world.pipeline.parse_range(ParseTask(job=job, range=job.parse_tasks[0]))  # the last range never ran
    with pytest.raises(KeyError):  # the fake's NoSuchKey
        world.pipeline.chunk(job)
    assert not any(key.endswith("chunks.json") for key in world.objects.artifact_puts)


def test_a_document_of_many_ranges_with_no_text_fails_no_text_layer_at_the_join() -> None:
    world = ranged_world()
    job = world.pipeline.parse(world.pipeline.validate(world.upload(blank_and_image_pages(3))))
    assert job.parse_tasks  # more than one range: Parse's first range gives no verdict
    for item in job.parse_tasks:
        world.pipeline.parse_range(ParseTask(job=job, range=item))
    with pytest.raises(PermanentError) as caught:
        world.pipeline.chunk(job)
    assert caught.value.code is ErrorCode.NO_TEXT_LAYER


def test_a_document_of_one_range_is_judged_by_parse_as_before() -> None:
    world = ranged_world()
    job = world.pipeline.validate(world.upload((SAMPLES / "invalid" / "image-only.pdf").read_bytes()))
    with pytest.raises(PermanentError) as caught:
        world.pipeline.parse(job)
    assert caught.value.code is ErrorCode.NO_TEXT_LAYER


def test_too_many_pages_fails_parse_before_any_range_is_planned() -> None:
    world = ranged_world()
    job = world.pipeline.validate(world.upload(blank_and_image_pages(50)))
    with pytest.raises(PermanentError) as caught:
        world.pipeline.parse(job)
    assert caught.value.code is ErrorCode.TOO_MANY_PAGES
    assert world.objects.artifact_puts == []


# -- lanes -----------------------------------------------------------------------------------------
def test_lane_for_is_bulk_only_above_the_threshold() -> None:
    assert lane_for(200, 200) is Lane.STANDARD
    assert lane_for(201, 200) is Lane.BULK
    assert lane_for(0, 1) is Lane.STANDARD


@pytest.mark.parametrize(("bulk_above_pages", "lane"), [(4, Lane.BULK), (5, Lane.STANDARD)])
def test_parse_chooses_the_lane_from_the_page_count_and_the_status_shows_it(bulk_above_pages: int, lane: Lane) -> None:
    world = build_world(env=ENV.model_copy(update={"bulk_above_pages": bulk_above_pages}))
    job = world.pipeline.parse(world.pipeline.validate(world.upload(border_pdf())))
    assert job.page_count == 5 and job.lane is lane
    # The workflow's Choice reads the lane from the job state, as Step Functions serialises it.
    assert job.model_dump(mode="json")["lane"] == lane.value
    record = world.documents.get(job.document_id)
    assert record is not None and record.lane is lane
    assert DocumentView.of(record).lane == lane.value


def test_a_new_version_forgets_the_lane_until_parse_counts_its_pages_again() -> None:
    world = build_world(env=ENV.model_copy(update={"bulk_above_pages": 1}))
    job = world.pipeline.parse(world.pipeline.validate(world.upload(border_pdf())))
    record = world.documents.get(job.document_id)
    assert record is not None and record.lane is Lane.BULK
    world.upload(border_pdf(), document_id=job.document_id, version="v2")
    record = world.documents.get(job.document_id)
    assert record is not None and record.lane is None and DocumentView.of(record).lane is None
