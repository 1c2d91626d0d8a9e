"""The page in headless Chromium against the local stack: sign in, upload with progress, live
status to READY, search to the right page, retry of a failed document, delete, refusals in the
page, tenant isolation, layout at phone width, keyboard use, and no console errors.

Screenshots of every step: test-artifacts/browser/. Figures (drop→READY, page weight) are printed
and written to test-artifacts/browser/figures.json.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from rag_ingest.core.errors import ErrorCode
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from samples import documents
from tests.browser.page import SAMPLES, Page, elapsed, new_driver, write_figures

pytestmark = pytest.mark.browser

EXPECTED = json.loads((SAMPLES / "expected.json").read_text())
PIPELINE_TIMEOUT = 420.0  # two documents through the whole local pipeline on a shared 2-core machine
# A sentence of lighthouses.pdf and its page (samples/expected.json): the search must cite that page.
QUERY = "Argand burner hollow circular wick glass chimney"
QUERY_FILE, QUERY_PAGE = "lighthouses.pdf", 2
EVAL_CORPUS = Path(__file__).resolve().parents[2] / "eval" / "corpus"
LIST_PAGE_SIZE = 20  # documents per GET /documents the page asks for (web/api.js)


def assert_no_console_errors(page: Page) -> None:
    errors = page.console_errors()
    assert errors == [], f"console errors: {json.dumps(errors, indent=2)}"


def letters(text: str) -> str:
    return "".join(character for character in text.casefold() if character.isalnum())


def assert_marks_lie_over_the_passage(
    page: Page, passage_text: str, page_number: int, *, partial: bool = False
) -> None:
    """The passage's marks against PDF.js's text layer (where PDF.js itself places each run of text):
    a run the marks cover is the passage's text, and the passage's runs on the page are covered.
    ``partial``: the passage covers only part of the page, so some runs must stay unmarked."""
    layout = page.js(
        """const sheet = document.querySelector(`#viewer-content .pdf-page[data-page="${arguments[0]}"]`);
           const box = (node) => { const r = node.getBoundingClientRect();
                                   return [r.left, r.top, r.right, r.bottom]; };
           return {marks: [...sheet.querySelectorAll('.pdf-passage')].map(box),
                   runs: [...sheet.querySelectorAll('.textLayer span')]
                           .filter((span) => span.textContent.trim())
                           .map((span) => ({text: span.textContent, box: box(span)}))};""",
        page_number,
    )
    marks, runs = layout["marks"], layout["runs"]
    assert marks and len(runs) >= 10, layout

    def covered(run: list[float]) -> float:
        area = max((run[2] - run[0]) * (run[3] - run[1]), 1e-6)
        overlaps = (
            max(0.0, min(run[2], mark[2]) - max(run[0], mark[0]))
            * max(0.0, min(run[3], mark[3]) - max(run[1], mark[1]))
            for mark in marks
        )
        return sum(overlaps) / area

    passage = letters(passage_text)
    marked = [run for run in runs if covered(run["box"]) >= 0.6]
    assert len(marked) >= 3, (marks, runs[:5])
    strays = [run["text"] for run in marked if letters(run["text"]) not in passage]
    assert not strays, f"marked text that is not the passage's: {strays}"
    # Runs of the passage long enough to be its own (not a word that happens to recur): covered.
    own = [run for run in runs if len(letters(run["text"])) >= 20 and letters(run["text"]) in passage]
    missed = [run["text"] for run in own if covered(run["box"]) < 0.5]
    assert own and len(missed) <= len(own) // 10, f"{len(missed)} of {len(own)} passage runs unmarked: {missed}"
    if partial:
        unmarked = [run for run in runs if covered(run["box"]) < 0.1 and letters(run["text"]) not in passage]
        assert len(unmarked) >= 5, "the marks cover the whole page, not the passage"


def wait_status(page: Page, document_id: str, status: str, timeout: float = PIPELINE_TIMEOUT) -> dict[str, Any]:
    return page.wait(
        lambda: page.rows()[document_id] if page.rows().get(document_id, {}).get("status") == status else None,
        f"{document_id} shows {status}",
        timeout,
    )


def uploaded_ids(page: Page, count: int) -> dict[str, str]:
    """filename → document id once ``count`` uploads went through (progress events seen)."""
    items = page.wait(lambda: page.uploads_in(count, "uploaded"), f"{count} uploads finish", 120)
    return {item["name"]: item["documentId"] for item in items}


def test_signed_in_user_uploads_two_pdfs_watches_them_ready_live_searches_opens_and_deletes(
    page: Page, tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The first load (nothing cached in a fresh profile): the page, its modules, stylesheet and config.
    page.wait(lambda: page.find("#local-sign-in").is_displayed(), "the sign-in form shows")
    weight = page.page_weight()
    page.screenshot("sign-in")
    assert weight["transferred"] > 0 and all(entry["body"] > 0 for entry in weight["entries"]), weight
    assert weight["transferred"] < 120 * 1024, f"the page got heavy: {weight}"

    page.sign_in("alice", tenant)
    page.wait(lambda: page.stats()["live"]["state"] == "live", "the live channel is connected")
    page.screenshot("signed-in")

    samples = [SAMPLES / "lighthouses.pdf", SAMPLES / "sourdough.pdf"]
    dropped = time.monotonic()
    page.choose_files(*samples)
    ids = uploaded_ids(page, 2)
    assert set(ids) == {sample.name for sample in samples}
    for item in page.find_all("#uploads .upload"):
        # Real upload progress events from the browser, the last one at 100 %; the bar shows 100.
        events = int(item.get_attribute("data-progress-events") or 0)
        loaded, total = item.get_attribute("data-progress-loaded"), item.get_attribute("data-progress-total")
        assert events >= 1 and loaded == total and int(total or 0) > 0, (events, loaded, total)
        bar = item.find_element(By.CSS_SELECTOR, "progress")
        assert bar.get_attribute("value") == bar.get_attribute("max") == "100"
    page.screenshot("uploaded")

    page.wait(
        lambda: any(row["stage"] or row["status"] == "READY" for row in page.rows().values()),
        "a document shows its stage while processing",
        120,
    )
    page.screenshot("processing")
    ready_after: dict[str, float] = {}

    def all_ready() -> bool:
        for name, document_id in ids.items():
            row = page.rows().get(document_id, {})
            if row.get("status") == "FAILED":
                raise AssertionError(f"{name} failed: {row}")
            if row.get("status") == "READY" and name not in ready_after:
                ready_after[name] = elapsed(dropped)
        return len(ready_after) == len(ids)

    page.wait(all_ready, "both documents show READY", PIPELINE_TIMEOUT)
    page.screenshot("ready")

    # Pushed, not reloaded: same document, the live channel delivered, and READY came from it.
    assert page.not_reloaded()
    stats = page.stats()
    assert stats["live"]["messages"] >= 2 * len(ids), stats
    sources = page.js(
        "return Object.fromEntries([...document.querySelectorAll('#document-rows tr')]"
        ".map(r => [r.dataset.documentId, r.dataset.source]))"
    )
    assert {sources[document_id] for document_id in ids.values()} == {"live"}, sources
    rows = page.rows()
    for name, document_id in ids.items():
        row = rows[document_id]
        assert row["pages"] == str(EXPECTED[name]["page_count"]), row
        assert int(row["chunks"]) > 0 and row["duration"], row
        assert row["sentence"] is None and row["actions"] == ["Delete"], row

    # Phone width: one card per document, nothing wider than the screen.
    page.driver.set_window_size(375, 900)
    page.wait(lambda: page.js("return window.innerWidth") <= 375, "the window is phone-sized")
    assert page.js("return document.documentElement.scrollWidth <= window.innerWidth"), "horizontal scrolling at 375 px"
    page.screenshot("phone-375")
    page.driver.set_window_size(1280, 1400)

    passages = page.search(QUERY)
    page.screenshot("search")
    assert passages, "the search found nothing"
    best = passages[0]
    assert (best["documentId"], best["pageStart"]) == (ids[QUERY_FILE], QUERY_PAGE), passages
    assert "<em>" in best["passageHtml"] and f"page {QUERY_PAGE}" in best["title"], best

    # Opening a hit: the PDF in the page's viewer (PDF.js) at the passage's page, the passage marked
    # over its words; then the original, through a short-lived download URL, in a new tab.
    assert_no_console_errors(page)
    page.find("#results .result .open-document").click()
    shown = page.wait(lambda: page.js("return ragIngest.pdfShown"), "the PDF viewer shows the hit", 60)
    assert shown["documentId"] == ids[QUERY_FILE] and shown["pages"][0] == QUERY_PAGE, shown
    assert_marks_lie_over_the_passage(page, shown["text"], QUERY_PAGE)
    page.screenshot("pdf-viewer")
    main_window = page.driver.current_window_handle
    page.find("#viewer-original").click()
    page.wait(lambda: len(page.driver.window_handles) == 2, "the document opens in a new tab")

    def download_url() -> str | None:
        opened = page.js("return ragIngest.lastOpened") or ""
        return opened if opened.startswith("http") else None

    opened = page.wait(download_url, "the download URL is known")
    assert opened.endswith(f"#page={QUERY_PAGE}"), opened
    original = requests.get(opened.split("#", 1)[0], timeout=30)
    assert original.status_code == 200 and original.content == (SAMPLES / QUERY_FILE).read_bytes()
    for handle in page.driver.window_handles:
        if handle != main_window:
            page.driver.switch_to.window(handle)
            page.driver.close()
    page.driver.switch_to.window(main_window)
    # The PDF's tab asks the storage origin for a favicon it does not have: that tab's log, not the page's.
    storage_favicon = f"{urlsplit(opened).scheme}://{urlsplit(opened).netloc}/favicon.ico"
    assert [e for e in page.console_errors() if not e["message"].startswith(storage_favicon)] == []
    page.find("#viewer-close").click()

    # Another tenant sees none of it: not in the list, not in search.
    page.sign_out()
    other = f"{tenant}-other"
    page.sign_in("bob", other)
    page.wait(lambda: page.find("#documents-empty").is_displayed(), "the other tenant's empty list")
    assert page.rows() == {}
    assert page.search(QUERY) == []
    page.screenshot("other-tenant")
    page.sign_out()
    page.sign_in("alice", tenant)
    page.wait(lambda: set(page.rows()) == set(ids.values()), "the tenant's documents are listed again")

    # Delete, confirmed in the dialog: gone from the list and from search.
    deleted = ids[QUERY_FILE]
    page.row_button(deleted, "Delete").click()
    page.wait(lambda: page.find("#confirm-dialog").is_displayed(), "the delete confirmation opens")
    page.screenshot("confirm-delete")
    page.find("#confirm-ok").click()
    page.wait(lambda: deleted not in page.rows(), "the deleted document leaves the list")
    assert set(page.rows()) == {ids["sourdough.pdf"]}
    assert all(passage["documentId"] != deleted for passage in page.search(QUERY))
    page.screenshot("deleted")
    assert page.not_reloaded()
    assert_no_console_errors(page)

    figures = {
        "drop_to_ready_seconds": ready_after,
        "drop_to_all_ready_seconds": max(ready_after.values()),
        "first_load_transferred_bytes": weight["transferred"],
        "first_load_transferred_kb": round(weight["transferred"] / 1024, 1),
        "first_load_resources": len(weight["entries"]),
        "screenshots": [str(path) for path in page.shots],
    }
    write_figures(figures)
    with capsys.disabled():
        print(
            f"\n[browser] drop→READY: {ready_after} s; page weight on first load: "
            f"{figures['first_load_transferred_kb']} KB in {len(weight['entries'])} requests"
        )


def test_document_failed_by_transient_errors_is_retried_from_the_page_to_ready(
    page: Page, tenant: str, stack_process: OfflineStackProcess, tmp_path: Path
) -> None:
    # A name of its own: the injected fault matches this document's Parse invocations only.
    sample = tmp_path / f"retry-{uuid.uuid4().hex[:8]}.pdf"
    shutil.copyfile(SAMPLES / "urban-birds.pdf", sample)
    page.sign_in("carol", tenant)
    stack_process.clear_faults()
    # Every Parse attempt fails with a TransientError until cleared: Step Functions' retries run out.
    stack_process.arm_fault("ParseFunction", "raise", times=1000, match=sample.name)
    try:
        page.choose_files(sample)
        document_id = uploaded_ids(page, 1)[sample.name]
        failed = wait_status(page, document_id, "FAILED")
    finally:
        stack_process.clear_faults()
    assert failed["errorCode"] == ErrorCode.TRANSIENT_RETRIES_EXHAUSTED.value, failed
    sentence = page.js_async(
        "import('./errors.js').then(m => arguments[0](m.ERROR_SENTENCES.TRANSIENT_RETRIES_EXHAUSTED))"
    )
    assert failed["sentence"] == sentence and failed["actions"] == ["Retry", "Delete"], failed
    page.screenshot("failed")

    page.row_button(document_id, "Retry").click()
    page.wait(lambda: page.rows()[document_id]["status"] != "FAILED", "the retried document leaves FAILED", 60)
    ready = wait_status(page, document_id, "READY")
    page.screenshot("retried-ready")
    assert ready["sentence"] is None and ready["actions"] == ["Delete"], ready
    assert ready["pages"] == str(EXPECTED["urban-birds.pdf"]["page_count"])
    assert page.not_reloaded()
    assert_no_console_errors(page)


def test_files_that_are_not_documents_or_too_large_are_refused_in_the_page_before_uploading(
    page: Page, tenant: str, tmp_path: Path
) -> None:
    page.sign_in("dave", tenant)
    page.wait(lambda: page.find("#documents-empty").is_displayed(), "the empty list")
    renamed = tmp_path / "notes.pdf"  # a GIF with a PDF's name: the bytes decide
    renamed.write_bytes(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")
    page.choose_files(renamed)
    # The drop zone, with files dropped from outside the page: a legacy .doc, one over the size limit.
    page.js(
        """const limit = arguments[0];
           const big = new Uint8Array(limit + 1); big.set([37, 80, 68, 70, 45]);  // "%PDF-" then zeros
           const ole2 = new Uint8Array([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, 0, 0, 0, 0]);
           const transfer = new DataTransfer();
           transfer.items.add(new File([ole2], 'minutes.doc', {type: 'application/msword'}));
           transfer.items.add(new File([big], 'huge.pdf', {type: 'application/pdf'}));
           document.getElementById('drop-zone').dispatchEvent(
             new DragEvent('drop', {dataTransfer: transfer, bubbles: true, cancelable: true}));""",
        page.js("return fetch('config.json').then(r => r.json()).then(c => c.maxUploadBytes)"),
    )
    items = page.wait(lambda: page.uploads_in(3, "refused"), "three files refused", 20)
    reasons = {item["name"]: item["status"] for item in items}
    page.screenshot("refused")
    assert "a GIF image" in reasons["notes.pdf"], reasons
    assert "old binary Office file" in reasons["minutes.doc"], reasons
    assert "over the" in reasons["huge.pdf"] and "limit" in reasons["huge.pdf"], reasons
    assert page.stats()["uploads"] == {"started": 0, "done": 0, "refused": 3, "failed": 0}
    page.find("#refresh").click()
    page.wait(lambda: page.find("#documents-empty").is_displayed(), "the list is still empty")
    assert page.rows() == {}
    assert_no_console_errors(page)


def test_a_slide_and_a_word_paragraph_open_where_they_stand_in_the_rendered_view(
    page: Page, tenant: str, tmp_path: Path
) -> None:
    """A PPTX and a DOCX uploaded from the page (type from their bytes), READY; a hit in each opens
    the rendered view scrolled to its slide or paragraph, that block marked and holding the passage."""
    page.sign_in("dave", tenant)
    deck, manual = tmp_path / "survey.pptx", tmp_path / "manual.docx"
    deck.write_bytes(documents.pptx_bytes())
    manual.write_bytes(documents.docx_bytes())
    page.choose_files(deck, manual)
    page.wait(
        lambda: len([row for row in page.rows().values() if row.get("status") == "READY"]) == 2,
        "both documents READY",
        PIPELINE_TIMEOUT,
    )
    for query, words, filename in (
        ("Westfield tonnes per hectare Marsh End", "Westfield", "survey.pptx"),
        (
            "Vessels longer than 200 metres moor at berths seven to nine",
            "Vessels longer than 200 metres",
            "manual.docx",
        ),
    ):
        passages = page.search(query)
        assert passages and passages[0]["title"].startswith(filename), (query, passages)
        before = page.js("return ragIngest.lastOpened")

        def shown(before: str | None = before) -> str | None:
            now = page.js("return ragIngest.lastOpened") or ""
            return now if now.startswith("view:") and now != before else None

        page.find("#results .result .open-document").click()
        opened = page.wait(shown, "the rendered view shows the hit")
        target = opened.split("#", 1)[1]
        assert target, opened
        hit = page.js(
            """const element = document.getElementById(arguments[0]);
               const box = element.getBoundingClientRect();
               const view = document.getElementById('viewer-content').getBoundingClientRect();
               return {text: element.textContent, marked: element.classList.contains('view-hit'),
                       visible: box.top >= view.top - 1 && box.bottom <= view.bottom + 1,
                       slide: element.closest('section').dataset.page}""",
            target,
        )
        assert hit["marked"] and hit["visible"] and words in hit["text"], (query, hit)
        if words == "Westfield":
            # The passage covers the small deck; the view shows the slide the search's words are on.
            assert hit["slide"] == "2" and "slide" in passages[0]["title"], (hit, passages[0])
        page.screenshot(f"view-{target}")
        page.find("#viewer-close").click()

    # Ask: the answer streams over the live channel above the hits, its [1] opening the cited slide.
    page.wait(lambda: page.stats()["live"]["state"] == "live", "the live channel is connected")
    page.search("What did Westfield yield in tonnes per hectare?", ask=True)
    answer = page.js(
        """const box = document.getElementById('answer');
           return {hidden: box.hidden, busy: box.getAttribute('aria-busy'),
                   text: box.querySelector('.answer-text')?.textContent || '',
                   citations: [...box.querySelectorAll('button.citation')].map(b => b.title)}"""
    )
    assert not answer["hidden"] and answer["busy"] is None and "[1]" in answer["text"], answer
    assert answer["citations"] and answer["citations"][0].startswith("survey.pptx, slide"), answer
    streamed = page.js("return ragIngest.answers")
    assert (streamed["streamed"], streamed["posted"]) == (1, 0) and streamed["deltas"] > 1, streamed
    before = page.js("return ragIngest.lastOpened")
    page.find("#answer button.citation").click()
    opened = page.wait(lambda: (page.js("return ragIngest.lastOpened") or "") != before or None, "[1] opens")
    assert str(page.js("return ragIngest.lastOpened")).startswith("view:"), opened
    page.screenshot("answer")
    page.find("#viewer-close").click()
    page.readme_screenshot("#search-title")
    assert_no_console_errors(page)


def test_a_two_column_pdf_hit_is_marked_over_its_own_words_only(
    page: Page, tenant: str, stack_process: OfflineStackProcess
) -> None:
    """A real two-column PDF (eval/corpus/ltnews35.pdf, LaTeX News 35): a hit on a page its passage
    covers only part of opens in the PDF viewer, the marks over the passage's words and not over
    the rest of the page, as PDF.js's own text layer places them."""
    client = OfflineClient(api_url=stack_process.api_url, tenant_id=tenant)
    document_id = client.upload(EVAL_CORPUS / "ltnews35.pdf")
    done = client.wait_until_done([document_id], timeout_seconds=PIPELINE_TIMEOUT)
    assert done[document_id]["status"] == "READY", done
    page.sign_in("erin", tenant)
    passages = page.search("treat each package option as a key value pair instead of a plain string")
    assert passages and passages[0]["title"].startswith("ltnews35.pdf"), passages
    page.find("#results .result .open-document").click()
    shown = page.wait(lambda: page.js("return ragIngest.pdfShown"), "the PDF viewer shows the hit", 60)
    assert shown["documentId"] == document_id and shown["boxes"] > 0, shown
    for number in shown["pages"]:
        assert_marks_lie_over_the_passage(page, shown["text"], number, partial=number == shown["pages"][0])
    page.screenshot("two-column-marks")
    page.find("#viewer-close").click()
    assert_no_console_errors(page)


def test_the_list_shows_newest_first_and_loads_more_with_the_cursor(
    page: Page, tenant: str, stack_process: OfflineStackProcess
) -> None:
    # 21 documents awaiting their upload (the page asks for 20 at a time): cheap, and real records.
    client = OfflineClient(api_url=stack_process.api_url, tenant_id=tenant)
    created = []
    for number in range(LIST_PAGE_SIZE + 1):
        ticket = client.create_upload(f"pending-{number:02d}.pdf")
        ticket.raise_for_status()
        created.append(ticket.json()["document_id"])
    newest_first = created[::-1]
    page.sign_in("gina", tenant)
    page.wait(lambda: len(page.rows()) == LIST_PAGE_SIZE, "the first page of the list")
    assert list(page.rows()) == newest_first[:LIST_PAGE_SIZE]
    more = page.find("#load-more")
    assert more.is_displayed()
    page.screenshot("first-page")
    more.click()
    page.wait(lambda: len(page.rows()) == LIST_PAGE_SIZE + 1, "the next page is appended")
    assert list(page.rows()) == newest_first
    page.wait(lambda: not page.find("#load-more").is_displayed(), "no more pages")
    assert {row["status"] for row in page.rows().values()} == {"AWAITING_UPLOAD"}
    assert page.not_reloaded()
    assert_no_console_errors(page)


def test_every_error_code_has_a_human_sentence(page: Page) -> None:
    table = page.js_async(
        "import('./errors.js').then(m => arguments[0]({sentences: m.ERROR_SENTENCES,"
        " unknown: m.errorSentence('NEW_CODE'), generic: m.GENERIC_SENTENCE}))"
    )
    missing = {code.value for code in ErrorCode} - set(table["sentences"])
    assert not missing, f"web/errors.js has no sentence for {sorted(missing)}"
    assert all(sentence.strip() for sentence in table["sentences"].values())
    assert table["unknown"] == table["generic"]
    assert table["sentences"][ErrorCode.ENCRYPTED_PDF.value] == "This PDF is password-protected."


def test_search_highlights_render_only_em_everything_else_as_text(page: Page) -> None:
    hostile = (
        "the <em>lamp</em> &amp; <b>bold</b> <script>window.pwned = 1</script> "
        '<img src=x onerror="window.pwned = 2"> &lt;i&gt;escaped&lt;/i&gt; <em>wick<em>'
    )
    rendered = page.js(
        """return import('./search.js').then(m => {
             const box = document.createElement('p');
             box.append(m.highlightFragment(arguments[0]));
             document.body.append(box);
             return {tags: [...box.querySelectorAll('*')].map(e => e.tagName), text: box.textContent,
                     ems: [...box.querySelectorAll('em')].map(e => e.textContent), pwned: window.pwned || null};
           })""",
        hostile,
    )
    assert rendered["tags"] == ["EM", "EM"], rendered
    assert rendered["ems"] == ["lamp", "wick"]
    assert "<b>bold</b>" in rendered["text"] and "<script>" in rendered["text"] and "<i>escaped</i>" in rendered["text"]
    assert "the lamp & " in rendered["text"]
    time.sleep(0.2)  # an injected handler would have run by now
    assert page.js("return window.pwned || null") is None and rendered["pwned"] is None


def test_a_passage_holding_a_table_renders_its_rows_as_a_table_and_its_text_as_text(page: Page) -> None:
    passage = {
        "document_id": "d1", "filename": "survey.pptx", "document_format": "pptx", "page_start": 2, "page_end": 2,
        "score": 0.5, "heading_path": [], "copies": [],
        "text": "Yield by orchard\nOrchard | Tonnes per hectare\nWestfield | 31\n<img onerror=x> | 18\n"
                "Notes | late frost",
        "highlights": ["<em>Westfield</em> | 31", "Tonnes per <em>hectare</em>"],
    }  # fmt: skip
    rendered = page.js(
        """return Promise.all([import('./search.js'), import('./answer.js')]).then(([m, a]) => {
             const form = document.createElement('form');
             const view = new m.SearchView({api: null, elements: {form}, onError: () => {}});
             const item = view.renderPassage(arguments[0]);
             const one = m.passageBlocks('a | b');
             const section = {expanded: 'section', page_start: 1, page_end: 9, boxes: [{page: 5}, {page: 4}]};
             const spot = a.matchedSpot(section);
             return {heads: [...item.querySelectorAll('th')].map(c => c.textContent),
                     cells: [...item.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
                     text: [...item.querySelectorAll('.passage > p')].map(p => p.textContent),
                     marked: [...item.querySelectorAll('em')].map(e => e.textContent),
                     images: item.querySelectorAll('img').length, one,
                     spot: [spot.page_start, spot.page_end], plain: a.matchedSpot({page_start: 2}).page_start};
           })""",
        passage,
    )
    assert rendered["heads"] == ["Orchard", "Tonnes per hectare"], rendered
    assert rendered["cells"] == [["Westfield", "31"], ["<img onerror=x>", "18"], ["Notes", "late frost"]], rendered
    assert rendered["text"] == ["Yield by orchard"] and rendered["images"] == 0
    assert sorted(rendered["marked"]) == ["Westfield", "hectare"]
    assert rendered["one"] == [{"kind": "text", "text": "a | b"}]  # one line of cells is no table
    # An expanded passage (a section) opens at its matched chunks' pages, not the section's first.
    assert rendered["spot"] == [4, 5] and rendered["plain"] == 2


def test_keyboard_alone_signs_in_and_reaches_every_control_with_a_visible_focus(page: Page, tenant: str) -> None:
    page.find("#username").click()
    for key in (Keys.CONTROL + "a", "erin", Keys.TAB, Keys.CONTROL + "a", tenant, Keys.ENTER):
        page.driver.switch_to.active_element.send_keys(key)
    page.wait(lambda: page.find("#workspace").is_displayed(), "signed in with the keyboard")
    page.wait(lambda: page.find("#who-tenant").text == tenant, "the tenant is shown")

    reached: list[dict[str, Any]] = []
    page.js("document.activeElement.blur(); window.scrollTo(0, 0)")
    for _ in range(24):  # enough to wrap around to the top bar's Sign out (after the page's controls)
        # Keys to the page, not to an element: a file input would take them for a file name.
        ActionChains(page.driver).send_keys(Keys.TAB).perform()
        reached.append(
            page.js(
                """const e = document.activeElement, style = getComputedStyle(e);
                   return {id: e.id, text: e.textContent.trim().slice(0, 30), tag: e.tagName,
                           outline: style.outlineStyle, outlineWidth: style.outlineWidth};"""
            )
        )
    ids = {entry["id"] for entry in reached}
    assert {"sign-out", "file-input", "query", "mode", "refresh"} <= ids, reached
    for entry in reached:
        if entry["tag"] in ("BUTTON", "INPUT", "SELECT", "A") and entry["id"] != "file-input":
            assert entry["outline"] != "none" and entry["outlineWidth"] != "0px", entry
    page.screenshot("keyboard")
    assert_no_console_errors(page)


def test_page_config_and_sign_in_form_say_local_sign_in_is_for_development_only(
    stack_process: OfflineStackProcess,
) -> None:
    """Sanity of what the page reads at start, from a browser of its own (no stack fixture page)."""
    driver = new_driver()
    try:
        page = Page(driver, stack_process.api_url, "dev-only-label")
        page.open()
        page.wait(lambda: page.find("#local-sign-in").is_displayed(), "the sign-in form shows")
        config = page.js_async("fetch('config.json').then(r => r.json()).then(arguments[0])")
        assert config["auth"]["kind"] == "local" and config["live"]["kind"] == "websocket", config
        assert "Development only" in page.find("#local-sign-in .dev-only").text
        assert_no_console_errors(page)
    finally:
        driver.quit()


# The page's document list on detached elements (no API): a test then ``list.apply``s documents
# and reads the rows, and closes the promise with ``})``.
_WITH_A_DOCUMENT_LIST = """return import('./documents.js').then(m => {
             const elements = {body: document.createElement('tbody'), empty: document.createElement('p'),
                               loadMore: document.createElement('button'), error: document.createElement('p')};
             const list = new m.DocumentList({api: {}, elements, announce: () => {}, confirmDelete: () => false,
                                              onError: () => {}});"""


def test_a_bulk_lane_document_says_so_beside_its_page_count(page: Page) -> None:
    cells = page.js(
        _WITH_A_DOCUMENT_LIST
        + """
             const base = {status: 'PROCESSING', stage: 'PARSE', pages_parsed: 150, page_count: 2000, progress: null,
                           attempts: {}, failed_pages: [], timings_ms: {}, created_at: '2026-12-01T10:00:00Z',
                           updated_at: '2026-12-01T10:00:01Z'};
             list.apply({...base, document_id: 'big', filename: 'manual.pdf', lane: 'bulk'}, {announce: false});
             list.apply({...base, document_id: 'small', filename: 'note.pdf', page_count: 5, pages_parsed: 5,
                         lane: 'standard'}, {announce: false});
             const row = (id) => list.rows.get(id);
             return {big: row('big').querySelector('td.pages').textContent, bigLane: row('big').dataset.lane,
                     small: row('small').querySelector('td.pages').textContent, smallLane: row('small').dataset.lane,
                     progress: row('big').querySelector('td.progress').textContent};
           })"""
    )
    assert cells["big"] == "2000 bulk lane" and cells["bigLane"] == "bulk"
    assert cells["small"] == "5" and cells["smallLane"] == "standard"
    assert cells["progress"] == "150/2000"  # pages parsed while Parse runs, in either lane


def test_a_document_waiting_for_embedding_capacity_says_so_until_it_goes_on(page: Page) -> None:
    # GET /documents/{id} gives waiting_for while its Embed tasks give way on the shared quota
    # (rag_ingest.documents.service.DocumentView); the row says so, and stops saying so after.
    states = page.js(
        _WITH_A_DOCUMENT_LIST
        + """
             const base = {document_id: 'doc', filename: 'manual.pdf', status: 'PROCESSING', stage: 'EMBED',
                           page_count: 40, progress: {done: 3, total: 12}, attempts: {}, failed_pages: [],
                           timings_ms: {}, created_at: '2026-12-01T10:00:00Z', updated_at: '2026-12-01T10:00:01Z'};
             const read = () => {
               const row = list.rows.get('doc');
               const line = row.querySelector('td.stage .waiting');
               const first = row.querySelector('td.stage').firstChild;
               return {stage: first && first.nodeType === Node.TEXT_NODE ? first.textContent : '',
                       waiting: line ? line.textContent : null, waitingFor: line ? line.dataset.waitingFor : null,
                       status: row.querySelector('td.status').textContent};
             };
             list.apply({...base, waiting_for: 'EMBEDDING_CAPACITY', waiting_until: '2026-12-01T10:00:31Z'},
                        {announce: false});
             const waiting = read();
             list.apply({...base, waiting_for: null, waiting_until: null, progress: {done: 4, total: 12}},
                        {announce: false});
             const goingOn = read();
             // A document no longer processing never shows the line, whatever the field says.
             list.apply({...base, status: 'READY', stage: null, waiting_for: 'EMBEDDING_CAPACITY'}, {announce: false});
             return {waiting, goingOn, ready: read()};
           })"""
    )
    assert states["waiting"] == {
        "stage": "embed",
        "waiting": "waiting for embedding capacity",
        "waitingFor": "EMBEDDING_CAPACITY",
        "status": "Processing",
    }, states
    assert states["goingOn"]["waiting"] is None and states["goingOn"]["stage"] == "embed"
    assert states["ready"]["waiting"] is None and states["ready"]["status"] == "Ready"
