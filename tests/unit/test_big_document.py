"""The big-document generator: every page's text distinct (the embedding cache must not flatter a
long document), real sentences kept, and the same arguments giving the same text and bytes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench.big_document import Source, load_sources, page_texts, revised, write_big_document

pytestmark = pytest.mark.unit

PAGES = 400  # about 3.5 passes over the sources' text: several revisions of every paragraph


@pytest.fixture(scope="module")
def sources() -> list[Source]:
    return load_sources()


def _paragraphs(pages: int, sources: list[Source]) -> list[str]:
    return [paragraph for _, body, _ in page_texts(pages, sources) for paragraph in body.split("\n\n")]


def test_page_bodies_repeat_no_paragraph(sources: list[Source]) -> None:
    paragraphs = _paragraphs(PAGES, sources)
    source_paragraphs = sum(len(source.paragraphs) for source in sources)
    assert len(paragraphs) > 2 * source_paragraphs, "the document should pass over its sources more than twice"
    repeated = [text[:80] for text, count in Counter(paragraphs).items() if count > 1]
    assert repeated == []


def test_page_bodies_are_distinct(sources: list[Source]) -> None:
    bodies = [body for _, body, _ in page_texts(PAGES, sources)]
    assert len(set(bodies)) == PAGES


def test_later_passes_are_revisions_of_the_source_text(sources: list[Source]) -> None:
    """Past the sources' end, a paragraph is a revision: the marker, then a source paragraph's own
    words (its sentences reordered), never made-up text."""
    original = {paragraph for source in sources for paragraph in source.paragraphs}
    words = {tuple(sorted(paragraph.split())) for paragraph in original}
    paragraphs = _paragraphs(PAGES, sources)
    assert paragraphs[0] in original  # the first pass prints the text as it is
    revisions = [paragraph for paragraph in paragraphs if paragraph not in original]
    assert len(revisions) > len(original), "400 pages should go past the sources' end more than once"
    for paragraph in revisions:
        marker, _, text = paragraph.partition(". ")
        assert marker.removeprefix("Revision ").isdigit(), paragraph[:80]
        assert tuple(sorted(text.split())) in words, paragraph[:80]


def test_a_revision_shuffles_the_clauses_after_its_marker() -> None:
    paragraph = "One here. Two, e.g. this; three: version 2.1 of it? Four! Five. Six. Seven."
    clauses = ["One here.", "Two, e.g. this;", "three:", "version 2.1 of it?", "Four!", "Five.", "Six.", "Seven."]
    assert revised(paragraph, 0) == paragraph
    revisions = [revised(paragraph, revision) for revision in range(1, 13)]
    for revision, text in enumerate(revisions, start=1):
        marker = f"Revision {revision}. "
        assert text.startswith(marker)
        assert sorted(text.removeprefix(marker).split(" ")) == sorted(paragraph.split(" "))
        assert all(clause in text for clause in clauses)  # "e.g." and "2.1" end no clause
    assert len(set(revisions)) == 12
    assert sum(text.endswith(paragraph) for text in revisions) <= 1  # the order changes (nearly) every time
    assert revisions == [revised(paragraph, revision) for revision in range(1, 13)]


def test_a_source_much_shorter_than_the_document_still_gives_distinct_pages() -> None:
    tiny = [
        Source("Alpha", ("Alpha one is a sentence. " * 50, "Alpha two is another one. It has two sentences." * 30)),
        Source("Beta", ("Beta is a single long sentence without an end " * 40,)),
    ]
    paragraphs = _paragraphs(120, tiny)
    assert len(paragraphs) == len(set(paragraphs))


def test_same_arguments_same_text(sources: list[Source]) -> None:
    assert list(page_texts(120, sources)) == list(page_texts(120, sources))


def test_same_pages_same_bytes(tmp_path: Path, sources: list[Source]) -> None:
    first = write_big_document(tmp_path / "first.pdf", 12, sources).read_bytes()
    second = write_big_document(tmp_path / "second.pdf", 12, sources).read_bytes()
    assert first == second
    assert first.startswith(b"%PDF-")
