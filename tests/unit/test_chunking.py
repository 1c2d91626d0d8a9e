"""chunk_pages: packing, overlap, provenance and offsets."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from rag_ingest.core.parsed import Chunk, PageText
from rag_ingest.core.tokens import count_tokens
from rag_ingest.ingest.chunking import PAGE_SEPARATOR, chunk_pages, document_text
from rag_ingest.parsing.pdf.extract import parse_pdf

pytestmark = pytest.mark.unit

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"


def count_words(text: str) -> int:
    return len(text.split())


def sample_pages(name: str) -> list[PageText]:
    return parse_pdf((SAMPLES_DIR / name).read_bytes(), max_bytes=10_000_000, max_pages=100).pages


def assert_well_formed(chunks: list[Chunk], pages: list[PageText], target: int) -> None:
    text = document_text(pages)
    assert [chunk.chunk_index for chunk in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text.strip() == chunk.text != ""
        assert text[chunk.char_start : chunk.char_end] == chunk.text
        assert chunk.token_count == count_tokens(chunk.text) <= target
        assert chunk.page_start <= chunk.page_end
        for page in pages:
            if page.page_number in (chunk.page_start, chunk.page_end):
                assert page.text  # a chunk never starts or ends on an empty page


def covered_words(chunks: list[Chunk]) -> set[int]:
    """Start offsets of every word that some chunk contains."""
    return {chunk.char_start + match.start() for chunk in chunks for match in re.finditer(r"\S+", chunk.text)}


@pytest.mark.parametrize("name", ["lighthouses.pdf", "sourdough.pdf", "urban-birds.pdf"])
def test_samples_chunk_within_target_and_cover_every_word(name: str) -> None:
    pages = sample_pages(name)
    chunks = chunk_pages(pages, count_tokens=count_tokens, target_tokens=120, overlap_tokens=30)

    assert_well_formed(chunks, pages, target=120)
    all_words = {match.start() for match in re.finditer(r"\S+", document_text(pages))}
    assert covered_words(chunks) == all_words
    assert chunks[0].page_start == 1
    assert chunks[-1].page_end == len(pages)


def test_chunk_pages_match_where_their_text_is() -> None:
    pages = sample_pages("lighthouses.pdf")
    chunks = chunk_pages(pages, count_tokens=count_tokens, target_tokens=80, overlap_tokens=20)
    for chunk in chunks:
        first_line = chunk.text.splitlines()[0]
        last_line = chunk.text.splitlines()[-1]
        assert first_line in pages[chunk.page_start - 1].text
        assert last_line in pages[chunk.page_end - 1].text


def test_document_text_joins_pages_with_the_separator() -> None:
    pages = [PageText(page_number=1, text="one"), PageText(page_number=2, text="two")]
    assert document_text(pages) == f"one{PAGE_SEPARATOR}two"


def test_chunks_span_pages_with_correct_page_range() -> None:
    pages = [
        PageText(page_number=1, text="Alpha beta gamma. Delta epsilon."),
        PageText(page_number=2, text="Zeta eta theta. Iota kappa."),
    ]
    chunks = chunk_pages(pages, count_tokens=count_words, target_tokens=50, overlap_tokens=0)
    assert len(chunks) == 1
    assert (chunks[0].page_start, chunks[0].page_end) == (1, 2)
    assert chunks[0].text == document_text(pages)


def test_consecutive_chunks_overlap_by_whole_sentences_within_budget() -> None:
    sentences = [f"Sentence number {index} talks about topic {index}." for index in range(40)]
    pages = [PageText(page_number=1, text=" ".join(sentences))]
    chunks = chunk_pages(pages, count_tokens=count_words, target_tokens=42, overlap_tokens=14)

    assert len(chunks) > 3
    for previous, current in itertools.pairwise(chunks):
        assert current.char_start < previous.char_end  # overlap exists
        assert current.char_start > previous.char_start  # and progress is made
        assert current.char_end > previous.char_end
        overlap_text = document_text(pages)[current.char_start : previous.char_end]
        assert count_words(overlap_text) <= 14
        assert overlap_text.endswith(".")  # whole sentences


def test_no_overlap_when_disabled() -> None:
    pages = [PageText(page_number=1, text=" ".join(f"Point {index} is made here." for index in range(30)))]
    chunks = chunk_pages(pages, count_tokens=count_words, target_tokens=20, overlap_tokens=0)
    for previous, current in itertools.pairwise(chunks):
        assert current.char_start > previous.char_end


def test_sentence_longer_than_target_is_split_by_words_not_dropped() -> None:
    words = [f"w{index}" for index in range(1000)]
    pages = [PageText(page_number=1, text="Intro sentence here. " + " ".join(words) + ". Outro sentence.")]
    chunks = chunk_pages(pages, count_tokens=count_tokens, target_tokens=100, overlap_tokens=20)

    assert_well_formed(chunks, pages, target=100)
    all_words = {match.start() for match in re.finditer(r"\S+", document_text(pages))}
    assert covered_words(chunks) == all_words


def test_word_longer_than_target_is_split_by_characters() -> None:
    long_word = "x" * 250
    pages = [PageText(page_number=1, text=f"Short start. {long_word} end.")]
    chunks = chunk_pages(pages, count_tokens=len, target_tokens=100, overlap_tokens=10)

    assert all(len(chunk.text) <= 100 and chunk.token_count == len(chunk.text) for chunk in chunks)
    assert "".join(chunk.text for chunk in chunks).count("x") == 250


def test_chunk_prefers_paragraph_boundary_when_half_full() -> None:
    first = " ".join(f"First paragraph sentence {index}." for index in range(6))  # 24 words
    second = " ".join(f"Second paragraph sentence {index}." for index in range(6))
    pages = [PageText(page_number=1, text=f"{first}\n\n{second}")]
    chunks = chunk_pages(pages, count_tokens=count_words, target_tokens=40, overlap_tokens=0)

    assert [chunk.text for chunk in chunks] == [first, second]


def test_abbreviations_and_initials_do_not_end_sentences() -> None:
    text = "Dr. Smith met J. Jones at St. Mary's. They talked, e.g. about birds."
    pages = [PageText(page_number=1, text=text)]
    chunks = chunk_pages(pages, count_tokens=count_words, target_tokens=8, overlap_tokens=0)

    assert [chunk.text for chunk in chunks] == [
        "Dr. Smith met J. Jones at St. Mary's.",
        "They talked, e.g. about birds.",
    ]


def test_deterministic_for_same_input() -> None:
    pages = sample_pages("urban-birds.pdf")
    first = chunk_pages(pages, count_tokens=count_tokens, target_tokens=100, overlap_tokens=25)
    second = chunk_pages(pages, count_tokens=count_tokens, target_tokens=100, overlap_tokens=25)
    assert first == second


def test_empty_and_whitespace_pages_give_no_chunks() -> None:
    assert chunk_pages([], count_tokens=count_tokens) == []
    pages = [PageText(page_number=1, text=""), PageText(page_number=2, text="  \n\n ")]
    assert chunk_pages(pages, count_tokens=count_tokens) == []


def test_empty_pages_between_text_keep_offsets_and_page_numbers() -> None:
    pages = [
        PageText(page_number=1, text="First page text."),
        PageText(page_number=2, text=""),
        PageText(page_number=3, text="Third page text."),
    ]
    chunks = chunk_pages(pages, count_tokens=count_words, target_tokens=3, overlap_tokens=0)
    assert [(chunk.text, chunk.page_start, chunk.page_end) for chunk in chunks] == [
        ("First page text.", 1, 1),
        ("Third page text.", 3, 3),
    ]
    assert document_text(pages)[chunks[1].char_start : chunks[1].char_end] == "Third page text."


def test_default_target_keeps_chunks_well_under_the_local_model_limit() -> None:
    pages = sample_pages("lighthouses.pdf")
    chunks = chunk_pages(pages, count_tokens=count_tokens)
    assert all(chunk.token_count <= 300 for chunk in chunks)
    assert max(chunk.token_count for chunk in chunks) > 200  # packed, not one sentence each


@pytest.mark.parametrize(("target", "overlap"), [(0, 0), (100, 100), (100, -1)])
def test_invalid_sizes_are_rejected(target: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_pages(
            [PageText(page_number=1, text="text")],
            count_tokens=count_words,
            target_tokens=target,
            overlap_tokens=overlap,
        )


def test_a_word_the_tokenizer_reads_as_one_unknown_token_is_still_cut_to_an_embeddable_size() -> None:
    # WordPiece maps any word over 100 characters to one [UNK]; Titan refuses texts over 50,000 characters.
    word = "a" * 300_000
    chunks = chunk_pages([PageText(page_number=1, text=word)], count_tokens=count_tokens)
    assert count_tokens(word) == 1
    assert len(chunks) > 1
    assert max(len(chunk.text) for chunk in chunks) <= 300 * 16
    assert "".join(chunk.text for chunk in chunks) == word
