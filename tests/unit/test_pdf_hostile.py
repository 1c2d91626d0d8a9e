"""Hostile PDFs end READY or with a permanent code in seconds, with the parser's memory bounded;
every text pass is linear (a quadratic one would take minutes on these inputs).

The bounds are generous on purpose (30 s where the work takes well under a few seconds): they
only have to tell "seconds" from "the function's timeout".
"""

from __future__ import annotations

import io
import signal
import threading
import time
import tracemalloc
from collections.abc import Callable

import pytest
from pypdf import PdfReader, PdfWriter
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import PageText, ParsedDocument
from rag_ingest.core.tokens import count_tokens
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.pdf.budget import BudgetExceeded, ParseBudget, within_budget
from rag_ingest.parsing.pdf.cleanup import clean_pages
from rag_ingest.parsing.pdf.extract import parse_pdf

from tests.support import hostile_pdfs
from tests.support.hostile_pdfs import HOSTILE_PDFS

pytestmark = pytest.mark.unit

MAX_BYTES, MAX_PAGES = 50 * 1024 * 1024, 500
GENEROUS_SECONDS = 30.0
MAX_PEAK_BYTES = 400 * 1024 * 1024  # pypdf inflates at most 75 MB per stream; the Parse function has 1 GB+

#: What each hostile file must end as: None = READY (text extracted), else the permanent code.
EXPECTED: dict[str, ErrorCode | None] = {
    "flate-bomb": ErrorCode.PDF_TOO_COMPLEX,  # pypdf's decompression limit stops it
    "nested-arrays": ErrorCode.PDF_TOO_COMPLEX,  # recursion: "nested too deeply"
    "cyclic-page-tree": ErrorCode.CORRUPT_PDF,
    "enormous-word": None,  # 300,000 letters: honest-looking, linear cleanup, READY
    "many-text-operators": ErrorCode.PDF_TOO_COMPLEX,  # 400,000 Tj: over the page's time budget
    "huge-image": None,  # images are never decoded for text
    "malformed-xref": None,  # pypdf rebuilds the table
    "object-stream-loop": ErrorCode.CORRUPT_PDF,
}


#: A case that ends by running out its page's time budget runs with a short one here: the mechanism
#: is the same, and the default budget (10 s) is what tests/reliability/test_bad_input.py's
#: "400k-text-operators" meets through the local stack.
BUDGETS: dict[str, ParseBudget] = {"many-text-operators": ParseBudget(page_seconds=2.0)}


def parse(data: bytes, budget: ParseBudget | None = None) -> ParsedDocument:
    return parse_pdf(data, max_bytes=MAX_BYTES, max_pages=MAX_PAGES, budget=budget or ParseBudget())


def run_measured(work: Callable[[], object]) -> tuple[object, float, int]:
    """The outcome, the CPU seconds it took and its peak memory. CPU time, not the wall clock: the
    bound is on the work, which a busy host (the stack suites beside it) does not change."""
    tracemalloc.start()
    started = time.process_time()
    try:
        try:
            outcome: object = work()
        except PermanentError as error:
            outcome = error
        return outcome, time.process_time() - started, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_corpus_covers_every_attack_of_the_issue() -> None:
    assert set(HOSTILE_PDFS) == set(EXPECTED)
    # Small files: the attack is in the structure, not the size.
    assert all(len(make()) < 256 * 1024 for make in HOSTILE_PDFS.values())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(HOSTILE_PDFS))
def test_hostile_pdf_ends_ready_or_permanent_within_bounds(name: str) -> None:
    data = HOSTILE_PDFS[name]()
    outcome, elapsed, peak = run_measured(lambda: parse(data, BUDGETS.get(name)))
    expected = EXPECTED[name]
    if expected is None:
        assert not isinstance(outcome, PermanentError), outcome
        assert any(page.text for page in outcome.pages)  # type: ignore[attr-defined]
    else:
        assert isinstance(outcome, PermanentError), outcome
        assert outcome.code is expected, outcome
    assert elapsed < GENEROUS_SECONDS, f"{name}: {elapsed:.1f} CPU s"
    assert peak < MAX_PEAK_BYTES, f"{name}: {peak / 1e6:.0f} MB"


def test_the_enormous_word_is_kept_whole() -> None:
    parsed = parse(hostile_pdfs.enormous_word(300_000))
    assert parsed.failed_pages == []
    assert max(len(word) for word in parsed.pages[0].text.split()) == 300_000


def test_a_page_over_its_time_budget_fails_alone() -> None:
    """One honest page and one with 400,000 text operators: the honest one is read, the other
    is listed in failed_pages, in about the page budget."""
    writer = PdfWriter()
    for data in (hostile_pdfs.honest_pdf(), hostile_pdfs.many_text_operators(400_000)):
        writer.append(PdfReader(io.BytesIO(data)))
    buffer = io.BytesIO()
    writer.write(buffer)
    started = time.monotonic()
    parsed = parse(buffer.getvalue(), budget=ParseBudget(page_seconds=1.0))
    assert time.monotonic() - started < GENEROUS_SECONDS
    assert parsed.failed_pages == [2]
    assert "lighthouses" in parsed.pages[0].text


def test_the_document_budget_ends_in_a_permanent_code() -> None:
    data = hostile_pdfs.many_text_operators(40_000)
    with pytest.raises(PermanentError) as caught:
        parse(data, budget=ParseBudget(page_seconds=0.05, document_seconds=0.0))
    assert caught.value.code is ErrorCode.PDF_TOO_COMPLEX


def test_the_document_text_budget_ends_in_a_permanent_code() -> None:
    with pytest.raises(PermanentError) as caught:
        parse(hostile_pdfs.enormous_word(300_000), budget=ParseBudget(document_text_chars=100_000))
    assert caught.value.code is ErrorCode.PDF_TOO_COMPLEX
    assert "characters of text" in caught.value.detail


def test_content_and_text_size_budgets_fail_the_page() -> None:
    data = hostile_pdfs.many_text_operators(20_000)  # ~180 KB of content, 60,000 characters
    for budget in (ParseBudget(page_content_bytes=10_000), ParseBudget(page_text_chars=10_000)):
        with pytest.raises(PermanentError) as caught:
            parse(data, budget=budget)
        assert caught.value.code is ErrorCode.PDF_TOO_COMPLEX
        assert "budget" in caught.value.detail


def test_outside_the_main_thread_the_budget_is_checked_after_the_page() -> None:
    """No signal can interrupt another thread: the page still fails once it overran."""
    data = hostile_pdfs.many_text_operators(40_000)
    outcome: list[object] = []

    def work() -> None:
        try:
            outcome.append(parse(data, budget=ParseBudget(page_seconds=0.01)))
        except PermanentError as error:
            outcome.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(GENEROUS_SECONDS)
    assert isinstance(outcome[0], PermanentError) and outcome[0].code is ErrorCode.PDF_TOO_COMPLEX


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_swallowed_by_a_finalizer_is_raised_again() -> None:
    """Python swallows an exception raised inside a ``__del__`` or a weakref callback: an alarm
    that lands there must come again, or the page runs to its end (seen: 55 s, not 2)."""

    class SlowFinalizer:
        def __del__(self) -> None:
            time.sleep(0.3)  # the alarm fires in here, and its exception is lost

    finished: list[bool] = []

    def work() -> None:
        SlowFinalizer()  # dropped at once: its __del__ runs past the budget
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pass
        finished.append(True)

    started = time.monotonic()
    with pytest.raises(BudgetExceeded):
        within_budget(0.1, work)
    assert not finished, "the page ran to its end: the swallowed interrupt never came again"
    assert time.monotonic() - started < 2


def test_the_interval_timer_restores_what_was_there() -> None:
    fired: list[int] = []

    def previous(signum: int, frame: object) -> None:
        fired.append(signum)

    original = signal.signal(signal.SIGALRM, previous)
    try:
        signal.setitimer(signal.ITIMER_REAL, 2.0)
        parse(hostile_pdfs.honest_pdf())
        assert signal.getsignal(signal.SIGALRM) is previous
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < remaining <= 2.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, original)


# --- every text pass is linear --------------------------------------------------------------

HOSTILE_TEXTS = {
    "letters": "abcdefghij" * 30_000,  # the issue's 300,000-letter word (quadratic: ~17 minutes)
    "letters-before-hyphen": "abcdefghij" * 30_000 + "-\nword",
    "dot-leader": "Contents " + "." * 150_000 + " 7",
    "hash-and-dots": "#" + "." * 150_000 + "x",  # the page-number signature pattern
    "hyphen-chain": "a-" * 100_000,
    "base64": "QUJDRA==" * 25_000,
}


@pytest.mark.slow
@pytest.mark.timeout(300)  # a quadratic regression fails here instead of hanging for minutes
@pytest.mark.parametrize("name", sorted(HOSTILE_TEXTS))
def test_cleanup_and_chunking_are_linear_on_long_runs(name: str) -> None:
    text = HOSTILE_TEXTS[name]
    # The same line at the top of three pages also exercises the running-header rules.
    started = time.monotonic()
    cleaned = clean_pages([text, text, text + "\nmore"])
    chunks = chunk_pages(
        [PageText(page_number=1, text=cleaned[2] or "x")],
        count_tokens=count_tokens,
        target_tokens=512,
        overlap_tokens=60,
    )
    elapsed = time.monotonic() - started
    assert chunks
    assert all(chunk.token_count <= 512 for chunk in chunks)
    assert elapsed < GENEROUS_SECONDS, f"{name}: {elapsed:.1f} CPU s"


def test_the_hyphen_rule_still_joins_broken_words_after_the_fix() -> None:
    assert clean_pages(["an exam-\nple of a long-\nrunning ex-\nample"]) == ["an example of a longrunning example"]
