"""Passage rectangles (rag_ingest.parsing.pdf.layout): words placed from pdfium's text layer and from the
OCR engines' outputs, aligned with pypdf's cleaned page text, merged into one rectangle per line.

The rectangles are checked against pdfium's own search (an independent way to find where a phrase
is drawn), on the repository's sample PDFs and on PDFs made here (a rotated page, two pages)."""

from __future__ import annotations

import io
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter
from rag_ingest.adapters.textract import textract_result
from rag_ingest.core.parsed import Chunk, PageText, PassageBox
from rag_ingest.ingest.chunking import chunk_pages, document_text
from rag_ingest.ingest.passage_boxes import align_page, line_boxes, passage_boxes
from rag_ingest.parsing.ocr.engine import OcrResult, PageOcr, PlacedWord
from rag_ingest.parsing.ocr.local import rapidocr_result, tesseract_tsv_result
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.parsing.pdf.layout import displayed, pack_layout, text_layer_layouts, unpack_layout

pytestmark = pytest.mark.unit
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"
LIMITS = {"max_bytes": 10 * 1024 * 1024, "max_pages": 100}


def drawn_at(pdf: bytes, page_index: int, phrase: str) -> tuple[float, float, float, float]:
    """Where pdfium's own search finds ``phrase`` on the page: its first character's box centre
    as a fraction of the displayed (unrotated) page, origin top-left (x, y), twice (first, last char)."""
    document = pdfium.PdfDocument(pdf)
    page = document[page_index]
    left, bottom, right, top = page.get_bbox()
    textpage = page.get_textpage()
    searcher = textpage.search(phrase, match_case=True)
    found = searcher.get_next()
    assert found is not None, f"{phrase!r} is not on page {page_index + 1}"
    start, count = found
    first = textpage.get_charbox(start)
    last = textpage.get_charbox(start + count - 1)
    width, height = right - left, top - bottom

    def centre(box: tuple[float, float, float, float]) -> tuple[float, float]:
        return ((box[0] + box[2]) / 2 - left) / width, (top - (box[1] + box[3]) / 2) / height

    return (*centre(first), *centre(last))


def inside(x: float, y: float, boxes: list[PassageBox], page: int) -> bool:
    return any(box.page == page and box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1 for box in boxes)


def test_a_layout_packs_and_unpacks_its_words_to_within_a_65535th() -> None:
    words = [PlacedWord("Fjord", 0.1, 0.2, 0.3, 0.25), PlacedWord("ﬁsh", 0.31, 0.2, 0.4, 0.25)]
    layout = pack_layout(words)
    assert layout is not None
    back = unpack_layout(layout)
    assert [word.text for word in back] == ["Fjord", "ﬁsh"]
    for before, after in zip(words, back, strict=True):
        assert all(abs(a - b) <= 1 / 65535 for a, b in zip(before[1:], after[1:], strict=True))
    assert pack_layout([]) is None


@pytest.mark.parametrize(
    ("rotation", "expected"),
    [(0, (0.1, 0.2, 0.3, 0.4)), (90, (0.6, 0.1, 0.8, 0.3)), (180, (0.7, 0.6, 0.9, 0.8)), (270, (0.2, 0.7, 0.4, 0.9))],
)
def test_a_rectangle_turns_with_the_page(rotation: int, expected: tuple[float, ...]) -> None:
    assert displayed(0.1, 0.2, 0.3, 0.4, rotation) == pytest.approx(expected)


def test_a_sample_pdfs_passages_cover_the_words_pdfium_finds_for_them() -> None:
    data = (SAMPLES_DIR / "sourdough.pdf").read_bytes()
    parsed = parse_pdf(data, **LIMITS)
    assert all(page.layout is not None for page in parsed.pages)
    chunks = passage_boxes(
        chunk_pages(parsed.pages, count_tokens=lambda text: len(text.split()), target_tokens=120, overlap_tokens=0),
        parsed.pages,
    )
    assert chunks and all(chunk.boxes for chunk in chunks)
    checked = 0
    for chunk in chunks:
        # A phrase of the chunk's middle line: its first and last letters lie inside the chunk's boxes.
        lines = [line for line in chunk.text.splitlines() if len(line.split()) >= 6]
        if not lines or chunk.page_start != chunk.page_end:
            continue
        phrase = " ".join(lines[len(lines) // 2].split()[1:4])
        x0, y0, x1, y1 = drawn_at(data, chunk.page_start - 1, phrase)
        assert inside(x0, y0, chunk.boxes, chunk.page_start), (phrase, chunk.boxes)
        assert inside(x1, y1, chunk.boxes, chunk.page_start), (phrase, chunk.boxes)
        checked += 1
    assert checked >= 3
    # One rectangle per line: no more rectangles than lines of text, each inside the page.
    for chunk in chunks:
        assert len(chunk.boxes) <= chunk.text.count("\n") + 1 + (chunk.page_end - chunk.page_start)
        assert all(0 <= box.x0 < box.x1 <= 1 and 0 <= box.y0 < box.y1 <= 1 for box in chunk.boxes)


def two_page_pdf(rotate_second: int = 0) -> bytes:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for body in (
        "Harbour pilots board inbound freighters beyond the breakwater.",
        "Tugboats then nudge the hull alongside the container berth.",
    ):
        pdf.add_page()
        pdf.multi_cell(0, 8, body)
    data = bytes(pdf.output())
    if not rotate_second:
        return data
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.pages[1].rotate(rotate_second)
    output = io.BytesIO()
    writer.write(output)
    return output.getvalue()


def test_a_chunk_over_two_pages_has_rectangles_on_both() -> None:
    parsed = parse_pdf(two_page_pdf(), **LIMITS)
    text = document_text(parsed.pages)
    chunk = Chunk(chunk_index=0, text=text, page_start=1, page_end=2, char_start=0, char_end=len(text), token_count=20)
    [placed] = passage_boxes([chunk], parsed.pages)
    assert {box.page for box in placed.boxes} == {1, 2}


def test_a_rotated_pages_rectangles_are_where_the_viewer_shows_the_words() -> None:
    upright = parse_pdf(two_page_pdf(), **LIMITS).pages[1]
    turned = parse_pdf(two_page_pdf(rotate_second=90), **LIMITS).pages[1]
    assert upright.layout is not None and turned.layout is not None
    for plain, rotated in zip(unpack_layout(upright.layout), unpack_layout(turned.layout), strict=True):
        assert rotated[1:] == pytest.approx(displayed(*plain[1:], 90), abs=1e-3)


def test_words_the_cleanup_changed_lose_only_their_own_rectangle() -> None:
    words = [
        PlacedWord("The", 0.1, 0.1, 0.15, 0.12),
        PlacedWord("ﬁrst", 0.16, 0.1, 0.22, 0.12),
        PlacedWord("exam-", 0.23, 0.1, 0.3, 0.12),
        PlacedWord("ple", 0.1, 0.13, 0.14, 0.15),
        PlacedWord("works.", 0.15, 0.13, 0.22, 0.15),
    ]
    page = PageText(page_number=1, text="The first example works.", layout=pack_layout(words))
    chunk = Chunk(chunk_index=0, text=page.text, page_start=1, page_end=1, char_start=0, char_end=24, token_count=4)
    [placed] = passage_boxes([chunk], [page])
    # "example" matches no layout word, "ﬁrst" matches "first" (NFKC): both lines are still boxed.
    assert [(box.y0, box.y1) for box in placed.boxes] == [(0.1, 0.12), (0.13, 0.15)]
    assert placed.boxes[0].x0 == 0.1 and placed.boxes[0].x1 == 0.22
    # Only the words inside the chunk's offsets count: "works." alone is one box on line two.
    tail = Chunk(chunk_index=1, text="works.", page_start=1, page_end=1, char_start=18, char_end=24, token_count=1)
    [placed_tail] = passage_boxes([tail], [page])
    assert [(box.x0, box.x1) for box in placed_tail.boxes] == [(0.15, 0.22)]


def test_a_table_read_in_another_order_than_drawn_still_finds_its_cells() -> None:
    """The page draws a table column by column, with one merged cell; the text reads it row by row
    and repeats the merged cell in each row it spans: every cell's word finds its drawn word."""
    drawn = [("Lamp", 0.1, 0.1), ("Argand", 0.1, 0.2), ("Fresnel", 0.1, 0.3), ("Fuel", 0.4, 0.1), ("oil", 0.4, 0.25)]
    words = [PlacedWord(text, x, y, x + 0.1, y + 0.02) for text, x, y in drawn]
    text = "Lamp | Fuel\nArgand | oil\nFresnel | oil"
    page = PageText(page_number=1, text=text, layout=pack_layout(words))
    aligned = align_page(page.text, unpack_layout(page.layout))  # type: ignore[arg-type]
    assert [(text[token.start : token.end], token.word) for token in aligned] == [
        ("Lamp", 0), ("Fuel", 3), ("Argand", 1), ("oil", 4), ("Fresnel", 2), ("oil", 4)
    ]  # fmt: skip


def test_a_page_without_a_layout_gives_no_rectangles() -> None:
    page = PageText(page_number=1, text="Heading\nBody text here.")
    chunk = Chunk(chunk_index=0, text=page.text, page_start=1, page_end=1, char_start=0, char_end=23, token_count=4)
    assert passage_boxes([chunk], [page])[0].boxes == []


def test_words_of_two_columns_on_one_line_are_two_rectangles() -> None:
    left = [PlacedWord("left", 0.1, 0.1, 0.2, 0.12), PlacedWord("col", 0.21, 0.1, 0.3, 0.12)]
    right = [PlacedWord("right", 0.55, 0.1, 0.65, 0.12)]
    lower_left = [PlacedWord("next", 0.1, 0.13, 0.2, 0.15)]
    assert len(line_boxes(1, [*left, *right])) == 1  # same line, moving right: one line
    assert len(line_boxes(1, [*left, *lower_left])) == 2
    assert len(line_boxes(1, [*right, *lower_left])) == 2


TSV = "\n".join(
    [
        "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext",
        "1\t1\t0\t0\t0\t0\t0\t0\t1000\t2000\t-1\t",
        "5\t1\t1\t1\t1\t1\t100\t200\t150\t40\t96.5\tScanned",
        "5\t1\t1\t1\t1\t2\t270\t200\t100\t40\t91.0\tpage",
    ]
)


def test_tesseract_words_are_placed_on_the_image() -> None:
    result = tesseract_tsv_result(TSV)
    assert result.text == "Scanned page"
    assert result.words == (
        PlacedWord("Scanned", 0.1, 0.1, 0.25, 0.12),
        PlacedWord("page", 0.27, 0.1, 0.37, 0.12),
    )


def test_textract_words_keep_their_geometry() -> None:
    result = textract_result(
        {
            "Blocks": [
                {"BlockType": "LINE", "Text": "Tide table", "Confidence": 99.0},
                {
                    "BlockType": "WORD",
                    "Text": "Tide",
                    "Geometry": {"BoundingBox": {"Left": 0.1, "Top": 0.2, "Width": 0.05, "Height": 0.02}},
                },
                {"BlockType": "WORD", "Text": "table", "Geometry": {}},
            ]
        }
    )
    assert result.words == (PlacedWord("Tide", 0.1, 0.2, pytest.approx(0.15), pytest.approx(0.22)),)


def test_rapidocr_runs_are_shared_out_over_their_words() -> None:
    found = [[[[100, 50], [300, 50], [300, 70], [100, 70]], "ab cd", 0.9]]
    result = rapidocr_result(found, (1000, 500))
    assert [word.text for word in result.words] == ["ab", "cd"]
    assert result.words[0].x0 == pytest.approx(0.1) and result.words[1].x1 == pytest.approx(0.3)
    assert result.words[0].x1 <= result.words[1].x0


class PlacingEngine:
    """An OCR engine that reads one known line, placed where it says."""

    name = "placing"

    def recognize(self, png: bytes) -> OcrResult:
        return OcrResult(
            text="a scanned page",
            confidence=0.9,
            words=(
                PlacedWord("a", 0.1, 0.1, 0.12, 0.13),
                PlacedWord("scanned", 0.13, 0.1, 0.3, 0.13),
                PlacedWord("page", 0.31, 0.1, 0.4, 0.13),
            ),
        )


def test_an_ocr_pages_layout_is_its_engines_words() -> None:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (200, 100), 255).save(buffer, format="PNG")
    pdf = FPDF()
    pdf.add_page()
    pdf.image(io.BytesIO(buffer.getvalue()), x=10, y=10, w=100)
    parsed = parse_pdf(bytes(pdf.output()), **LIMITS, ocr=PageOcr(PlacingEngine()))
    [page] = parsed.pages
    assert page.layout is not None
    assert [word.text for word in unpack_layout(page.layout)] == ["a", "scanned", "page"]


def test_pdfium_failing_costs_the_rectangles_not_the_text() -> None:
    assert text_layer_layouts(b"%PDF-1.7 not really", [1]) == {}
