"""Heading detection, heading paths, heading-aligned chunk boundaries and page spans, on real PDFs
(eval/corpus) and on small texts that isolate one rule."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from rag_ingest.core.parsed import Chunk, PageText
from rag_ingest.core.tokens import count_tokens
from rag_ingest.ingest.chunking import chunk_pages, document_text
from rag_ingest.parsing.headings import detect_headings
from rag_ingest.parsing.pdf.extract import parse_pdf

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[2] / "eval" / "corpus"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@cache
def pages_of(path: Path) -> list[PageText]:
    return parse_pdf(path.read_bytes(), max_bytes=50_000_000, max_pages=500).pages


@cache
def chunks_of(path: Path) -> list[Chunk]:
    return chunk_pages(pages_of(path), count_tokens=count_tokens, target_tokens=300, overlap_tokens=60)


def chunk_containing(chunks: list[Chunk], phrase: str) -> Chunk:
    return next(chunk for chunk in chunks if phrase in " ".join(chunk.text.split()))


def test_numbered_headings_nest_by_their_numbers() -> None:
    headings = {h.title: h.level for h in detect_headings(document_text(pages_of(CORPUS / "r-intro.pdf")))}
    assert headings["1 Introduction and preliminaries"] == 1
    assert headings["1.7 Getting help with functions and features"] == 2
    assert headings["5.7.1 Matrix multiplication"] == 3


def test_list_items_footnotes_and_contents_lines_are_not_headings() -> None:
    titles = [h.title for h in detect_headings(document_text(pages_of(CORPUS / "r-intro.pdf")))]
    assert not any(title.startswith("2. Start the R program") for title in titles)  # numbered list item
    assert not any(title.startswith("1 With other than vector types") for title in titles)  # footnote
    assert not any("...." in title or ". . ." in title for title in titles)  # table of contents


def test_a_heading_wrapped_onto_two_lines_is_one_heading() -> None:
    titles = [h.title for h in detect_headings(document_text(pages_of(CORPUS / "tugboat-babelbib.pdf")))]
    assert "3.1 More data fields supported by the bst files" in titles
    assert "3.2 Flexible typography of the bibliography" in titles


def test_unnumbered_headings_of_a_two_column_newsletter() -> None:
    titles = [h.title for h in detect_headings(document_text(pages_of(CORPUS / "ltnews35.pdf")))]
    for expected in ("Document metadata interface", "The latex-lab bundle", "A new mark mechanism for LATEX"):
        assert expected in titles
    assert not any(title.startswith("Furthermore") for title in titles)  # a sentence's first line


def test_chunks_carry_the_heading_path_of_their_text() -> None:
    chunks = chunks_of(CORPUS / "r-intro.pdf")
    help_chunk = chunk_containing(chunks, "The examples on a help topic can normally be run by")
    chapter = "1 Introduction and preliminaries"
    assert help_chunk.heading_path == [chapter, "1.7 Getting help with functions and features"]
    na_chunk = chunk_containing(chunks, "is.nan(xx) is only TRUE for NaNs")
    assert na_chunk.heading_path == ["2 Simple manipulations; numbers and vectors", "2.5 Missing values"]


def test_title_case_headings_give_each_page_of_a_sample_its_section() -> None:
    chunks = chunks_of(SAMPLES / "lighthouses.pdf")
    assert [chunk.heading_path for chunk in chunks] == [
        ["Fires on the Headland"],
        ["The Keeper and the Candle"],
        ["Fresnel and the Lens"],
        ["Fog, Sound and Radio"],
        ["The Automatic Light"],
    ]


def test_sections_start_their_own_chunk_and_overlap_never_crosses_a_heading() -> None:
    text = document_text(pages_of(CORPUS / "r-intro.pdf"))
    chunks = chunks_of(CORPUS / "r-intro.pdf")
    starts = {chunk.char_start for chunk in chunks}
    numbered = [h for h in detect_headings(text) if h.numbered]
    # A section starts a chunk unless the previous chunk was still nearly empty (then they share it).
    aligned = [h for h in numbered if h.start in starts]
    assert len(aligned) >= 0.8 * len(numbered)
    # The chunk that opens a section repeats nothing of the section before it.
    for heading in aligned:
        [opening] = [chunk for chunk in chunks if chunk.char_start == heading.start]
        if opening.chunk_index:
            assert chunks[opening.chunk_index - 1].char_end <= heading.start


def test_a_chunk_never_ends_with_a_heading() -> None:
    for name in ("r-intro.pdf", "grfguide.pdf", "latex-usrguide.pdf"):
        text = document_text(pages_of(CORPUS / name))
        heading_ends = {h.end for h in detect_headings(text)}
        chunks = chunks_of(CORPUS / name)
        assert not any(chunk.char_end in heading_ends for chunk in chunks[:-1]), name


def test_page_spans_match_where_the_text_is_on_real_pdfs() -> None:
    for name in ("r-intro.pdf", "ltnews35.pdf", "tugboat-babelbib.pdf"):
        pages = pages_of(CORPUS / name)
        by_number = {page.page_number: page.text for page in pages}
        for chunk in chunks_of(CORPUS / name):
            first_line, last_line = chunk.text.splitlines()[0], chunk.text.splitlines()[-1]
            assert first_line in by_number[chunk.page_start], (name, chunk.chunk_index)
            assert last_line in by_number[chunk.page_end], (name, chunk.chunk_index)
            assert chunk.token_count <= 300


def test_next_chunk_after_a_heading_break_has_no_overlap() -> None:
    body = " ".join(f"Sentence {index} of the first section." for index in range(12))
    second = " ".join(f"Sentence {index} of the second section." for index in range(12))
    pages = [PageText(page_number=1, text=f"1 First Section\n{body}\n2 Second Section\n{second}")]
    chunks = chunk_pages(pages, count_tokens=lambda t: len(t.split()), target_tokens=200, overlap_tokens=40)
    assert [chunk.heading_path for chunk in chunks] == [["1 First Section"], ["2 Second Section"]]
    assert chunks[1].text.startswith("2 Second Section")
    assert chunks[1].char_start >= chunks[0].char_end  # no text of the first section repeated


def test_chunk_ids_are_stable_across_runs() -> None:
    first = chunk_pages(pages_of(CORPUS / "grfguide.pdf"), count_tokens=count_tokens)
    second = chunk_pages(pages_of(CORPUS / "grfguide.pdf"), count_tokens=count_tokens)
    assert first == second
