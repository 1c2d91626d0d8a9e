"""A FIGURE block is a passage of its own: never merged with the text around it, split only when
longer than a chunk, carrying its sources and its box, on PDF pages and structured pages alike."""

from __future__ import annotations

import pytest
from rag_ingest.core.parsed import BlockKind, Figure, FigureSource, PageText, PassageBox, TextBlock
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.ingest.passage_boxes import passage_boxes
from rag_ingest.parsing.figures import figure_text
from rag_ingest.parsing.ocr.engine import PlacedWord
from rag_ingest.parsing.pdf.layout import pack_layout

pytestmark = pytest.mark.unit


def words(text: str) -> int:
    return len(text.split())


BEFORE = "The pump station lifts water from the lower basin. It runs at night when power is cheap."
AFTER = "Maintenance happens every spring. The crew replaces the seals and checks the motor."
BOX = PassageBox(page=1, x0=0.1, y0=0.3, x1=0.9, y1=0.6)
FIGURE = Figure(caption="Figure 2: Flow through the pump station", ocr_text="INLET 40 L/s OUTLET", box=BOX)


def page_with_figure(figure: Figure = FIGURE, *, structured: bool = False) -> PageText:
    """One page: a paragraph, the figure's passage, another paragraph (as a PDF page holds them,
    or with heading and paragraph blocks as a structured format states them)."""
    passage = figure_text(figure)
    text = f"{BEFORE}\n\n{passage}\n\n{AFTER}"
    start = len(BEFORE) + 2
    blocks = [TextBlock(start=start, end=start + len(passage), kind=BlockKind.FIGURE, figure=figure)]
    if structured:
        heading = "Pumps"
        text = f"{heading}\n\n{text}"
        shift = len(heading) + 2
        blocks = [
            TextBlock(start=0, end=len(heading), kind=BlockKind.HEADING, level=1, anchor="pumps"),
            TextBlock(start=shift, end=shift + len(BEFORE), kind=BlockKind.PARAGRAPH),
            blocks[0].model_copy(update={"start": blocks[0].start + shift, "end": blocks[0].end + shift}),
            TextBlock(start=len(text) - len(AFTER), end=len(text), kind=BlockKind.PARAGRAPH),
        ]
    return PageText(page_number=1, text=text, blocks=blocks)


def test_a_figure_is_a_chunk_of_its_own_between_text_that_would_fit_with_it() -> None:
    chunks = chunk_pages([page_with_figure()], count_tokens=words, target_tokens=200, overlap_tokens=20)

    assert [chunk.figure_sources for chunk in chunks] == [None, [FigureSource.CAPTION, FigureSource.OCR], None]
    assert chunks[0].text == BEFORE
    assert chunks[1].text == "Figure 2: Flow through the pump station\nText in the image: INLET 40 L/s OUTLET"
    assert chunks[2].text == AFTER  # no overlap into or out of the figure
    assert chunks[1].boxes == [BOX]


def test_a_figure_keeps_its_box_where_text_passages_get_their_words() -> None:
    page = page_with_figure()
    layout = pack_layout([PlacedWord(word, 0.1, 0.05, 0.2, 0.07) for word in (BEFORE + " " + AFTER).split()])
    chunks = chunk_pages([page.model_copy(update={"layout": layout})], count_tokens=words, target_tokens=200)

    placed = passage_boxes(chunks, [page.model_copy(update={"layout": layout})])

    assert placed[1].boxes == [BOX]
    assert placed[0].boxes and placed[0].boxes != [BOX]


def test_a_figure_longer_than_a_chunk_is_split_and_every_piece_is_the_figure() -> None:
    long_ocr = " ".join(f"label{number}" for number in range(60))
    figure = FIGURE.model_copy(update={"ocr_text": long_ocr})

    chunks = chunk_pages([page_with_figure(figure)], count_tokens=words, target_tokens=25, overlap_tokens=5)

    pieces = [chunk for chunk in chunks if chunk.figure_sources is not None]
    assert len(pieces) >= 3
    assert all(chunk.boxes == [BOX] for chunk in pieces)
    assert " ".join(chunk.text for chunk in pieces).count("label59") == 1  # no overlap between its pieces
    assert not any("pump station lifts" in chunk.text for chunk in pieces)


def test_a_caption_inside_a_figure_passage_is_not_a_heading_of_a_pdf() -> None:
    chunks = chunk_pages([page_with_figure()], count_tokens=words, target_tokens=200)

    assert all("Figure 2" not in " ".join(chunk.heading_path) for chunk in chunks)


def test_a_figure_on_a_structured_page_cites_its_section_and_paragraph() -> None:
    chunks = chunk_pages([page_with_figure(structured=True)], count_tokens=words, target_tokens=200)

    figure = next(chunk for chunk in chunks if chunk.figure_sources is not None)
    assert figure.anchor == "pumps"
    assert figure.heading_path == ["Pumps"]
    assert figure.paragraph_index == 2  # the paragraph before it is the section's first block
    assert figure.boxes == [BOX]
    assert "pump station lifts" not in figure.text


def test_a_figure_without_a_box_has_no_rectangle_and_says_what_it_holds() -> None:
    figure = Figure(caption="Figure 1: The sign-in page", alt_text="A form with two fields")

    chunks = chunk_pages([page_with_figure(figure, structured=True)], count_tokens=words, target_tokens=200)

    passage = next(chunk for chunk in chunks if chunk.figure_sources is not None)
    assert passage.figure_sources == [FigureSource.CAPTION, FigureSource.ALT_TEXT]
    assert passage.boxes == []
    assert passage.text == "Figure 1: The sign-in page\nAlt text: A form with two fields"


def test_a_heading_just_before_a_figure_stays_out_of_the_figure_passage() -> None:
    """A PDF page's last line (a running footer read as a heading) or a section that opens with a
    figure: the heading ends the chunk before, and the figure's passage holds the figure only."""
    passage = figure_text(FIGURE)
    heading = "Chapter 2. Getting Started"
    text = f"{BEFORE}\n\n{heading}\n\n{passage}"
    start = len(text) - len(passage)
    blocks = [TextBlock(start=start, end=len(text), kind=BlockKind.FIGURE, figure=FIGURE)]
    page = PageText(page_number=1, text=text, blocks=blocks)

    chunks = chunk_pages([page], count_tokens=words, target_tokens=200)

    assert [chunk.text for chunk in chunks] == [f"{BEFORE}\n\n{heading}", passage]
    assert chunks[1].heading_path == [heading]
