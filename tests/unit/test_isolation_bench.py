"""The isolation benchmark's pure parts: percentiles, a phase's summary (failed and stuck documents
counted, never dropped), the verdict against issue 11's 1.5x goal, and the small-PDF generator."""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader

from bench.big_document import Source, small_documents, write_small_documents
from bench.isolation import (
    NO_LANE,
    UPLOAD_FAILED,
    Outcome,
    PhaseSummary,
    Upload,
    epoch_seconds,
    lane_counts,
    outcomes_of,
    percentile,
    report,
    summarize,
    table,
    verdict,
)

pytestmark = pytest.mark.unit

# Two short sources, so a few documents already go past their end (and into revisions).
LAMP = "Lamp {n} is trimmed at dusk. The keeper logs the oil used. Fog means the horn, every minute. "
TIDE = "Table {n} lists high water. Springs follow the new moon. Neaps follow the quarters. "
SOURCES = [
    Source("Lighthouse Keeping", tuple((LAMP * 4).format(n=n).strip() for n in range(6))),
    Source("Tide Tables", tuple((TIDE * 4).format(n=n).strip() for n in range(5))),
]


def _ready(seconds: float, name: str = "note.pdf") -> Outcome:
    return Outcome(name, f"doc-{name}", "READY", seconds)


def _summary(phase: str, n: int, ready: int, p95: float | None) -> PhaseSummary:
    return PhaseSummary(phase, n, ready, n - ready, 0, p95, p95, p95)


# -- percentiles -------------------------------------------------------------------------------------
def test_percentile_interpolates_between_ranks_like_numpy() -> None:
    values = [float(n) for n in range(1, 21)]  # 1..20
    assert percentile(values, 50) == pytest.approx(10.5)
    assert percentile(values, 95) == pytest.approx(19.05)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 20.0


def test_percentile_ignores_input_order_and_takes_one_value() -> None:
    assert percentile([9.0, 1.0, 5.0], 50) == 5.0
    assert percentile([3.5], 95) == 3.5


@pytest.mark.parametrize("values, q", [([], 50), ([1.0], -1), ([1.0], 101)])
def test_percentile_refuses_nonsense(values: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        percentile(values, q)


# -- a phase's summary -------------------------------------------------------------------------------
def test_summary_of_ready_documents() -> None:
    summary = summarize("alone", [_ready(float(n), f"{n}.pdf") for n in range(1, 21)])
    assert summary == PhaseSummary("alone", 20, 20, 0, 0, 10.5, 19.05, 20.0)
    assert summary.all_ready


def test_failed_and_stuck_documents_are_counted_not_dropped() -> None:
    outcomes = [
        _ready(4.0, "a"),
        _ready(6.0, "b"),
        Outcome("c", "doc-c", "FAILED", 3.0, error="PARSE_FAILED: bad xref"),
        Outcome("d", "doc-d", "PROCESSING", None),  # still in flight when the wait ended
        Outcome("e", None, UPLOAD_FAILED, None, error="ConnectionError: refused"),
        Outcome("f", "doc-f", "no record", None),
    ]
    summary = summarize("with big", outcomes)
    assert (summary.n, summary.ready, summary.failed, summary.stuck) == (6, 2, 2, 2)
    assert (summary.p50, summary.p95, summary.max) == (5.0, 5.9, 6.0)  # over the READY ones only
    assert not summary.all_ready


def test_a_phase_with_nothing_ready_has_no_latency() -> None:
    summary = summarize("alone", [Outcome("a", "doc-a", "QUEUED", None)])
    assert (summary.stuck, summary.p50, summary.p95, summary.max) == (1, None, None, None)
    assert "-" in table([summary]).splitlines()[1]


def test_table_shows_every_count() -> None:
    lines = table([PhaseSummary("alone", 50, 48, 1, 1, 12.04, 20.0, 31.5)]).splitlines()
    assert lines[0].split() == ["phase", "n", "READY", "failed", "stuck", "p50", "s", "p95", "s", "max", "s"]
    assert lines[1].split() == ["alone", "50", "48", "1", "1", "12.0", "20.0", "31.5"]


# -- the verdict -------------------------------------------------------------------------------------
def test_goal_met_at_exactly_one_and_a_half() -> None:
    decided = verdict(_summary("alone", 50, 50, 20.0), _summary("with big", 50, 50, 30.0))
    assert (decided.ratio, decided.met) == (1.5, True)


def test_goal_missed_above_one_and_a_half() -> None:
    decided = verdict(_summary("alone", 50, 50, 20.0), _summary("with big", 50, 50, 30.2))
    assert (decided.ratio, decided.met) == (1.51, False)
    assert "> 1.5" in decided.reason


def test_goal_missed_when_a_document_is_not_ready_whatever_the_ratio() -> None:
    decided = verdict(_summary("alone", 50, 50, 20.0), _summary("with big", 50, 49, 10.0))
    assert (decided.ratio, decided.met) == (0.5, False)
    assert decided.reason == "with big: 1 of 50 not READY"


def test_no_ratio_without_latencies() -> None:
    decided = verdict(_summary("alone", 3, 0, None), _summary("with big", 3, 3, 10.0))
    assert (decided.ratio, decided.met) == (None, False)


# -- from the stack's records to outcomes -----------------------------------------------------------
def test_outcomes_keep_every_upload_and_read_lanes() -> None:
    uploads = [
        Upload("a.pdf", 100.0, "doc-a"),
        Upload("b.pdf", 100.5, "doc-b"),
        Upload("c.pdf", 101.0, None, "HTTPError: 500"),
    ]
    items = {
        "doc-a": {"status": "READY"},
        "doc-b": {"status": "FAILED", "error_code": "PARSE_FAILED", "error_detail": "no text"},
        "doc-d": {"status": "PROCESSING", "stage": "EMBED"},
    }
    uploads.append(Upload("d.pdf", 101.5, "doc-d"))
    outcomes = outcomes_of(uploads, {"doc-a": 12.5, "doc-b": 3.0}, items, {"doc-a": "standard", "doc-d": "bulk"})
    assert outcomes == [
        Outcome("a.pdf", "doc-a", "READY", 12.5, lane="standard"),
        Outcome("b.pdf", "doc-b", "FAILED", 3.0, lane=NO_LANE, error="PARSE_FAILED: no text"),
        Outcome("c.pdf", None, UPLOAD_FAILED, None, error="HTTPError: 500"),
        Outcome("d.pdf", "doc-d", "PROCESSING", None, lane="bulk", stage="EMBED"),
    ]
    assert [(o.ready, o.failed, o.stuck) for o in outcomes] == [
        (True, False, False),
        (False, True, False),
        (False, True, False),
        (False, False, True),
    ]
    assert lane_counts(outcomes) == "- 2, bulk 1, standard 1"


def test_record_times_are_read_to_the_millisecond() -> None:
    later = epoch_seconds("2026-12-01T20:03:49.123+00:00")
    assert later - epoch_seconds("2026-12-01T20:03:40.000+00:00") == pytest.approx(9.123)


def _phase(name: str, outcomes: list[Outcome], **extra: Any) -> dict[str, Any]:
    """A phase as run_phase returns it."""
    return {
        "phase": name,
        "summary": asdict(summarize(name, outcomes)),
        "lanes": lane_counts(outcomes),
        "load_average_before": [1.0, 1.0, 1.0],
        "load_average_after": [2.0, 2.0, 2.0],
        "documents": [asdict(outcome) for outcome in outcomes],
        **extra,
    }


def test_report_names_every_document_not_ready_and_the_big_ones_state() -> None:
    alone = [_ready(10.0, "a.pdf"), _ready(12.0, "b.pdf")]
    with_big = [_ready(11.0, "a.pdf"), Outcome("b.pdf", "doc-b", "PROCESSING", None, stage="EMBED")]
    big = {"pages": None, "status": "PROCESSING", "stage": "PARSE", "pages_parsed": 350, "chunks_embedded": None,
           "chunks": None, "lane": "bulk", "seconds": None}  # fmt: skip
    results = {
        "big_pages": 2000,
        "phases": [_phase("alone", alone), _phase("with big", with_big, big=big)],
        "verdict": asdict(verdict(summarize("alone", alone), summarize("with big", with_big))),
    }
    printed = report(results).splitlines()
    assert printed[2].split() == ["with", "big", "2", "1", "0", "1", "11.0", "11.0", "11.0"]
    assert "  b.pdf doc-b: PROCESSING EMBED" in printed
    assert any("big document (2000 pages)" in line and "PROCESSING PARSE, pages parsed 350/2000" in line
               and line.endswith("lane bulk") for line in printed)  # fmt: skip
    assert printed[-1].endswith("not met (with big: 1 of 2 not READY)")


# -- the small PDFs ----------------------------------------------------------------------------------
def test_small_documents_share_no_paragraph_and_have_their_own_titles() -> None:
    documents = list(small_documents(12, sources=SOURCES))
    assert len(documents) == 12
    titles = [title for title, _ in documents]
    assert len(set(titles)) == 12
    assert titles[:3] == ["Note 1: Lighthouse Keeping", "Note 2: Tide Tables", "Note 3: Lighthouse Keeping"]
    paragraphs = [p for _, pages in documents for _, body, _ in pages for p in body.split("\n\n")]
    assert len(paragraphs) == len(set(paragraphs))
    for title, pages in documents:
        assert len(pages) == 5
        assert pages[0][0] == title  # the title heads the first page only
        assert all(top is None for top, _, _ in pages[1:])


def test_small_pdfs_are_distinct_deterministic_five_page_pdfs(tmp_path: Path) -> None:
    first = write_small_documents(tmp_path / "first", 4, sources=SOURCES)
    second = write_small_documents(tmp_path / "second", 4, sources=SOURCES)
    assert [path.name for path in first] == ["note-001.pdf", "note-002.pdf", "note-003.pdf", "note-004.pdf"]
    digests = [hashlib.sha256(path.read_bytes()).hexdigest() for path in first]
    assert len(set(digests)) == 4  # identical bytes would be a duplicate upload: nothing embedded
    assert digests == [hashlib.sha256(path.read_bytes()).hexdigest() for path in second]
    for path in first:
        assert len(PdfReader(path).pages) == 5
