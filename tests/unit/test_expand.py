"""Small-to-big (rag_ingest.retrieval.expand): grouping hits by section or page, joining a parent's
chunks without the chunker's overlap, the size cap around the matches, and search's ``expand``."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest
from rag_ingest.core.access import DocumentAccess, Principal
from rag_ingest.core.ids import chunk_id
from rag_ingest.core.parsed import Chunk, FigureSource, PassageBox
from rag_ingest.core.record import DocumentStamp
from rag_ingest.core.tokens import count_tokens
from rag_ingest.ingest.chunking import chunk_pages, document_text
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.retrieval.expand import (
    CHUNK_SEPARATOR,
    after_overlap,
    expand_hits,
    group_hits,
    merge_group,
    parent_scope,
)
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.query import Expand, SearchMode, SearchQuery
from rag_ingest.retrieval.search import DEFAULT_EXPAND, SearchRequest, SearchService, search_passages

from tests.support.fakes import InMemoryChunkIndex

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[2] / "eval" / "corpus"
TENANT = "acme"
DOCUMENT = "01HZEXPANDDOCUMENT00000000"


@cache
def r_intro() -> tuple[str, list[Chunk]]:
    pages = parse_pdf((CORPUS / "r-intro.pdf").read_bytes(), max_bytes=50_000_000, max_pages=500).pages
    chunks = chunk_pages(pages, count_tokens=count_tokens, target_tokens=300, overlap_tokens=60)
    return document_text(pages), chunks


def indexed(chunks: list[Chunk], *, access: DocumentAccess | None = None) -> InMemoryChunkIndex:
    index = InMemoryChunkIndex()
    stamp = DocumentStamp(TENANT, DOCUMENT, "v1", filename="r-intro.pdf", access=access, uploaded_by="ann")
    index.write_chunks(stamp, chunks, [[1.0]] * len(chunks))
    return index


def hit_of(chunk: Chunk, score: float = 1.0, *, version: str = "v1") -> SearchHit:
    return SearchHit(
        chunk_id=chunk_id(DOCUMENT, version, chunk.chunk_index),
        score=score,
        document_id=DOCUMENT,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        text=chunk.text,
        filename="r-intro.pdf",
        heading_path=tuple(chunk.heading_path),
        boxes=(PassageBox(page=chunk.page_start, x0=0.1, y0=0.1 * (chunk.chunk_index % 9), x1=0.9, y1=0.95),),
        retrieved_by=("bm25",),
    )


def longest_section() -> list[Chunk]:
    """The run of r-intro's chunks with one heading path that has the most chunks."""
    _, chunks = r_intro()
    runs: list[list[Chunk]] = []
    for chunk in chunks:
        if runs and runs[-1][-1].heading_path == chunk.heading_path:
            runs[-1].append(chunk)
        else:
            runs.append([chunk])
    return max(runs, key=len)


def normalised(text: str) -> str:
    return " ".join(text.split())


def test_a_section_joined_is_the_document_text_it_spans_without_repeating_the_overlap() -> None:
    text, chunks = r_intro()
    section = longest_section()
    assert len(section) >= 4
    assert any(after_overlap(a.text, b.text) != CHUNK_SEPARATOR + b.text for a, b in pairwise(section))
    best = hit_of(section[1])
    [group] = group_hits([best], Expand.SECTION)
    scope = parent_scope(group, Expand.SECTION, radius=len(section))
    parent = indexed(chunks).parent_chunks(SearchQuery(tenant_id=TENANT, text="q"), [scope])[0]
    result, outside = merge_group(group, parent, scope, max_tokens=100_000)
    assert outside == []
    assert normalised(result.text) == normalised(text[section[0].char_start : section[-1].char_end])
    assert (result.page_start, result.page_end) == (section[0].page_start, section[-1].page_end)
    assert result.heading_path == tuple(section[0].heading_path)
    assert (result.expanded, result.chunk_ids, result.truncated) == (Expand.SECTION, (best.chunk_id,), False)


def test_after_overlap_keeps_a_chunk_that_does_not_repeat_the_previous_end() -> None:
    assert after_overlap("One sentence here. Two sentences here.", "Two sentences here. Three.") == " Three."
    assert after_overlap("Alpha beta gamma.", "Delta epsilon.") == CHUNK_SEPARATOR + "Delta epsilon."
    # A coincidence of a word or two is no overlap: the repeat must be a whole start of words.
    assert after_overlap("see the end.", "end. Then more") == CHUNK_SEPARATOR + "end. Then more"
    # A table chunk repeats its header row, then the rows the previous chunk ended with.
    previous = "| a | b |\n| 1 | 2 |\n| 3 | four score |"
    assert after_overlap(previous, "| a | b |\n| 3 | four score |\n| 5 | 6 |") == "\n| 5 | 6 |"


def test_hits_of_one_section_merge_and_other_sections_and_versions_do_not() -> None:
    section = longest_section()
    _, chunks = r_intro()
    elsewhere = next(chunk for chunk in chunks if chunk.heading_path != section[0].heading_path)
    hits = [
        hit_of(section[2], 0.9),
        hit_of(elsewhere, 0.8),
        hit_of(section[0], 0.7),
        hit_of(section[0], 0.6, version="v2"),
    ]
    groups = group_hits(hits, Expand.SECTION)
    assert [[hit.score for hit in group] for group in groups] == [[0.9, 0.7], [0.8], [0.6]]


def test_hits_whose_pages_overlap_share_a_page_parent() -> None:
    base = hit_of(longest_section()[0])
    on = [
        base.__class__(**{**base.__dict__, "chunk_id": f"{DOCUMENT}:h:{i}", "page_start": s, "page_end": e})
        for i, (s, e) in enumerate([(3, 3), (5, 5), (3, 4), (4, 4), (7, 7)])
    ]
    groups = group_hits(on, Expand.PAGE)
    assert [[(hit.page_start, hit.page_end) for hit in group] for group in groups] == [
        [(3, 3), (3, 4), (4, 4)],
        [(5, 5)],
        [(7, 7)],
    ]


def test_a_long_parent_is_cut_around_the_best_match_and_a_match_outside_starts_its_own_result() -> None:
    _, chunks = r_intro()
    section = longest_section()
    best, far = hit_of(section[len(section) // 2], 0.9), hit_of(section[0], 0.5)
    index = indexed(chunks)
    query = SearchQuery(tenant_id=TENANT, text="q", expand=Expand.SECTION)
    budget = count_tokens(best.text) + 200
    results = expand_hits(index, query, [best, far], max_tokens=budget)
    assert [result.chunk_id for result in results] == [best.chunk_id, far.chunk_id]
    first = results[0]
    assert first.truncated and first.chunk_ids == (best.chunk_id,)
    assert best.text in first.text and len(first.text) > len(best.text)
    assert count_tokens(first.text) <= budget
    assert first.boxes == best.boxes  # the matched chunk's boxes, not its neighbours'
    assert results[1].chunk_ids == (far.chunk_id,) and far.text in results[1].text


def test_search_expands_to_the_page_and_merges_the_hits_on_it() -> None:
    _, chunks = r_intro()
    page = max({c.page_start for c in chunks}, key=lambda p: sum(c.page_start == c.page_end == p for c in chunks))
    on_page = [c for c in chunks if c.page_start == c.page_end == page]
    assert len(on_page) >= 2
    index = indexed(chunks)
    words = " ".join(on_page[0].text.split()[:6] + on_page[1].text.split()[-6:])
    query = SearchQuery(tenant_id=TENANT, text=words, k=3, mode=SearchMode.BM25, expand=Expand.PAGE)
    plain = search_passages(index, _NoEmbedder(), SearchQuery(tenant_id=TENANT, text=words, k=3, mode=SearchMode.BM25))
    expanded = search_passages(index, _NoEmbedder(), query)
    assert len(expanded) <= len(plain)
    merged = next(result for result in expanded if len(result.chunk_ids) > 1)
    assert merged.expanded is Expand.PAGE and merged.page_start <= page <= merged.page_end
    for chunk in on_page:
        assert normalised(chunk.text) in normalised(merged.text) or merged.truncated
    assert {hit.chunk_id for hit in plain} == {cid for result in expanded for cid in result.chunk_ids}


def test_the_parent_of_a_document_the_reader_may_not_read_is_never_fetched() -> None:
    _, chunks = r_intro()
    section = longest_section()
    index = indexed(chunks, access=DocumentAccess(users=["ann"]))
    scope = parent_scope([hit_of(section[1])], Expand.SECTION, radius=len(section))
    ann, bob = (Principal(tenant_id=TENANT, subject=user) for user in ("ann", "bob"))
    assert len(index.parent_chunks(SearchQuery(tenant_id=TENANT, text="q", reader=ann), [scope])[0]) == len(section)
    assert index.parent_chunks(SearchQuery(tenant_id=TENANT, text="q", reader=bob), [scope]) == [[]]
    assert index.parent_chunks(SearchQuery(tenant_id="other", text="q"), [scope]) == [[]]


def test_the_api_says_what_was_expanded_and_expands_to_the_section_by_default() -> None:
    _, chunks = r_intro()
    index = indexed(chunks)
    service = SearchService(store=lambda: index, embedder=_NoEmbedder)
    words = " ".join(longest_section()[1].text.split()[:8])
    plain = service.search(TENANT, SearchRequest(query=words, k=2, mode=SearchMode.BM25, expand=Expand.NONE))
    assert plain.expand is Expand.NONE
    assert all(p.expanded is Expand.NONE and p.chunk_ids == [p.chunk_id] for p in plain.passages)
    wide = service.search(TENANT, SearchRequest(query=words, k=2, mode=SearchMode.BM25))
    assert wide.expand is Expand.SECTION and wide.passages[0].expanded is Expand.SECTION
    assert len(wide.passages[0].text) > len(plain.passages[0].text)
    assert SearchRequest.model_json_schema()["properties"]["expand"]["default"] == DEFAULT_EXPAND == "section"


class _NoEmbedder:
    model_id = "none"
    dimension = 1
    max_input_tokens = 0

    def embed(self, texts: object) -> list[list[float]]:
        raise AssertionError("BM25 only")


def test_a_figure_of_several_chunks_stays_a_figure_with_its_one_rectangle() -> None:
    """A long figure passage is cut into chunks that share the figure's rectangle and sources: joined,
    they are still that figure, cited by the rectangle once; joined with text they are not a figure."""
    box = PassageBox(page=2, x0=0.1, y0=0.1, x1=0.3, y1=0.4)
    sources = [FigureSource.CAPTION, FigureSource.OCR]
    texts = ["Figure 1: The viewer", "Text in the image: File Size (Bytes)", "The viewer shows bookmarks."]
    chunks = [
        Chunk(chunk_index=index, text=text, page_start=2, page_end=2, char_start=0, char_end=len(text), token_count=5)
        for index, text in enumerate(texts)
    ]
    figure = [chunk.model_copy(update={"boxes": [box], "figure_sources": sources}) for chunk in chunks[:2]]
    hits = [replace(hit_of(chunk), boxes=(box,), figure_sources=tuple(sources)) for chunk in figure]
    [group] = group_hits(hits, Expand.PAGE)
    result, _ = merge_group(group, hits, parent_scope(group, Expand.PAGE), max_tokens=100_000)
    assert "File Size (Bytes)" in result.text and "bookmarks" not in result.text, result.text
    assert (result.figure_sources, result.boxes) == (tuple(sources), (box,))
    around, _ = merge_group(group, [*hits, hit_of(chunks[2])], parent_scope(group, Expand.PAGE), max_tokens=100_000)
    assert "bookmarks" in around.text and around.figure_sources is None
