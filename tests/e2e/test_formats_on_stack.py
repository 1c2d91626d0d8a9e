"""DOCX, PPTX, XLSX, HTML, Markdown, CSV and text through the whole local stack: each is read as its bytes
say, found by search with where it stands (slide, section anchor, paragraph), and its rendered
view holds the passage at that place."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from local.client import OfflineClient
from samples import documents, spreadsheets

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"

#: name → (bytes, declared type, a sentence of it, the format, the document's section anchors)
FORMATS: dict[str, tuple[Callable[[], bytes], str, str, str, set[str]]] = {
    "manual.docx": (
        documents.docx_bytes,
        documents.DOCX_CONTENT_TYPE,
        "Vessels longer than 200 metres moor only at berths seven to nine.",
        "docx",
        {"harbour-operations-manual", "berths", "mooring-rules", "cranes"},
    ),
    "survey.pptx": (
        documents.pptx_bytes,
        documents.PPTX_CONTENT_TYPE,
        "Marsh End suffered a late frost in April.",
        "pptx",
        {"slide-1", "slide-2", "slide-3"},
    ),
    "keeping.html": (
        lambda: documents.HTML_PAGE.encode(),
        "text/html",
        "The Fresnel lens of the Skerry light focused a paraffin flame into a beam seen thirty kilometres out.",
        "html",
        {"lighthouse-keeping", "lamps-and-lenses", "daily-routine"},
    ),
    "starter.md": (
        lambda: documents.MARKDOWN_TEXT.encode(),
        "text/markdown",
        "A fed starter keeps for a week in the refrigerator at four degrees.",
        "markdown",
        {"sourdough-starter-guide", "feeding", "storage"},
    ),
    "locks.txt": (
        lambda: documents.PLAIN_TEXT.encode(),
        "text/plain",
        "The lock keeper closes the lower gates and opens the upper sluices until the chamber fills.",
        "text",
        {"canal-locks", "how-a-lock-works"},
    ),
}


def upload(client: OfflineClient, tmp_path: Path, name: str, data: bytes, content_type: str) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return client.upload(path, content_type)


def best_passage(client: OfflineClient, query: str, document_id: str) -> dict[str, Any]:
    response = client.search(query, k=10)
    response.raise_for_status()
    passages = [p for p in response.json()["passages"] if p["document_id"] == document_id]
    assert passages, f"{query!r} did not find {document_id}"
    return dict(passages[0])


def test_every_format_is_ready_and_its_passages_say_where_they_stand(client: OfflineClient, tmp_path: Path) -> None:
    ids = {
        name: upload(client, tmp_path, name, make(), content_type)
        for name, (make, content_type, *_rest) in FORMATS.items()
    }
    states = client.wait_until_done(list(ids.values()), timeout_seconds=300)
    for name, (_make, _type, sentence, document_format, anchors) in FORMATS.items():
        state = states[ids[name]]
        assert state["status"] == "READY", (name, state["error_code"], state["error_detail"])
        assert state["document_format"] == document_format, name
        passage = best_passage(client, sentence, ids[name])
        assert sentence in " ".join(passage["text"].split()), (name, passage)
        # The passage starts in a section of the document, at one of its paragraphs (from 1).
        assert passage["document_format"] == document_format and passage["anchor"] in anchors, (name, passage)
        assert passage["paragraph_index"] and passage["paragraph_index"] >= 1, (name, passage)
        # The rendered view has every section, and the passage's first paragraph where it points.
        content = client.request("GET", f"/documents/{ids[name]}/content")
        assert content.status_code == 200, content.text
        blocks = {block["anchor"]: block for page in content.json()["pages"] for block in page["blocks"]}
        assert anchors <= set(blocks), (name, sorted(blocks))
        target = blocks[f"{passage['anchor']}-p{passage['paragraph_index']}"]
        assert target["kind"] != "heading" and target["text"][:40] in passage["text"], (name, target, passage)
    slides = client.request("GET", f"/documents/{ids['survey.pptx']}/content").json()["pages"]
    assert [page["page_number"] for page in slides] == [1, 2, 3] and states[ids["survey.pptx"]]["page_count"] == 3


def test_a_pdf_named_docx_is_read_as_a_pdf_and_has_no_rendered_view(client: OfflineClient, tmp_path: Path) -> None:
    document_id = upload(
        client, tmp_path, "report.docx", (SAMPLES / "sourdough.pdf").read_bytes(), documents.DOCX_CONTENT_TYPE
    )
    state = client.wait_until_done([document_id], timeout_seconds=300)[document_id]
    assert state["status"] == "READY" and state["document_format"] == "pdf", state
    response = client.request("GET", f"/documents/{document_id}/content")
    assert response.status_code == 409 and response.json()["error"]["code"] == "NO_RENDERED_VIEW"
    download = client.request("GET", f"/documents/{document_id}/download").json()["url"]
    assert "response-content-type=application%2Fpdf" in download


def test_a_workbook_and_a_csv_are_found_with_their_cells(client: OfflineClient, tmp_path: Path) -> None:
    """An XLSX and a CSV through the stack: a hit names its sheet and cells, the rendered view has a
    section per sheet with its table, and the hidden sheet is not indexed (the default)."""
    ids = {
        "budget.xlsx": upload(
            client, tmp_path, "budget.xlsx", spreadsheets.budget_xlsx(), spreadsheets.XLSX_CONTENT_TYPE
        ),
        "tides.csv": upload(client, tmp_path, "tides.csv", spreadsheets.TIDE_TABLE_CSV.encode(), "text/csv"),
    }
    states = client.wait_until_done(list(ids.values()), timeout_seconds=300)
    assert {name: states[ids[name]]["document_format"] for name in ids} == {"budget.xlsx": "xlsx", "tides.csv": "csv"}
    assert states[ids["budget.xlsx"]]["page_count"] == 2  # Budget and Crew roster; Old rates is hidden
    passage = best_passage(client, "Crane 3 gearbox overhaul maintenance cost", ids["budget.xlsx"])
    assert "Crane 3 gearbox overhaul | Maintenance | 64250" in passage["text"], passage
    assert passage["cell_range"].startswith("Budget!A"), passage
    tide = best_passage(client, "Dredger on the bar, keep to the west channel", ids["tides.csv"])
    assert tide["cell_range"] and "!" not in tide["cell_range"], tide
    content = client.request("GET", f"/documents/{ids['budget.xlsx']}/content").json()
    headings = [block["text"] for page in content["pages"] for block in page["blocks"] if block["kind"] == "heading"]
    tables = [block for page in content["pages"] for block in page["blocks"] if block["kind"] == "table"]
    assert headings == ["Budget", "Crew roster"], headings
    assert [table["cell_range"] for table in tables] == ["Budget!A3:E9", "'Crew roster'!A1:C4"], tables
    hidden = client.search("Berthing 2019 rate per metre", k=10).json()["passages"]
    assert all("Berthing 2019" not in p["text"] for p in hidden if p["document_id"] == ids["budget.xlsx"]), hidden


def test_images_and_a_pdf_figure_are_found_where_they_stand(client: OfflineClient, tmp_path: Path) -> None:
    """A PNG and a two-page TIFF read by OCR through the stack, each hit with its page and rectangles;
    a PDF's screenshot found by the words inside it, its rectangle the figure's, and counted."""
    formats = SAMPLES.parent / "eval" / "formats"
    corpus = SAMPLES.parent / "eval" / "corpus"
    ids = {
        "page.png": upload(client, tmp_path, "page.png", (formats / "mnras-guide-page4.png").read_bytes(), "image/png"),
        "pages.tiff": upload(
            client, tmp_path, "pages.tiff", (formats / "jacow-a4-pages1-2.tiff").read_bytes(), "image/tiff"
        ),
        "paper.pdf": upload(
            client, tmp_path, "paper.pdf", (corpus / "hyperref-paper.pdf").read_bytes(), "application/pdf"
        ),
    }
    states = client.wait_until_done(list(ids.values()), timeout_seconds=600)
    assert {name: states[ids[name]]["status"] for name in ids} == dict.fromkeys(ids, "READY"), states
    assert {name: states[ids[name]]["document_format"] for name in ids} == {
        "page.png": "png",
        "pages.tiff": "tiff",
        "paper.pdf": "pdf",
    }
    assert states[ids["pages.tiff"]]["page_count"] == 2
    for name, query, page in (
        ("page.png", "To produce bold symbols in mathematics", 1),
        ("pages.tiff", "annual meeting in December 2019 in Santos", None),
    ):
        passage = best_passage(client, query, ids[name])
        assert passage["boxes"] and all(0 <= box["x0"] < box["x1"] <= 1 for box in passage["boxes"]), passage
        assert page is None or passage["page_start"] == page, passage
    question = "Which fields does Acrobat's document information window show? File Size (Bytes)"
    found = client.search(question, k=10, expand="none")  # the figure's own passage, not its page
    figures = [
        passage
        for passage in found.json()["passages"]
        if passage["document_id"] == ids["paper.pdf"] and passage["figure_sources"]
    ]
    assert any("File Size (Bytes)" in passage["text"] for passage in figures), found.json()["passages"]
    figure = next(passage for passage in figures if "File Size (Bytes)" in passage["text"])
    assert "ocr" in figure["figure_sources"] and len(figure["boxes"]) == 1, figure  # the figure's own rectangle
    assert states[ids["paper.pdf"]]["figures"]["indexed"] >= 1, states[ids["paper.pdf"]]
