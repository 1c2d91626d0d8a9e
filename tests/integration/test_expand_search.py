"""Small-to-big against the real OpenSearch: ``expand`` returns a hit's whole section or page (its
chunks read back with ``parent_chunks``), merges hits that share one, and reads a parent only
within the caller's tenant and the documents the caller may read. An index of the test's own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from rag_ingest.adapters.vector_store import IndexSettings, VectorStore, connect
from rag_ingest.core.access import DocumentAccess, Principal
from rag_ingest.core.ids import chunk_id
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import DocumentStamp
from rag_ingest.core.settings import EXPAND_MAX_TOKENS
from rag_ingest.core.tokens import count_tokens
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.retrieval.expand import parent_scope
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.query import Expand, SearchMode, SearchQuery
from rag_ingest.retrieval.search import SearchRequest, SearchService

pytestmark = pytest.mark.integration

URL = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
CORPUS = Path(__file__).resolve().parents[2] / "eval" / "corpus"
DIMENSION = 8
TENANT, OTHER_TENANT = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("expand", "other"))
# Ann's restricted copy of the guide, and the same guide open to the tenant under another id.
RESTRICTED, OPEN = "01HZEXPANDRESTRICTED000000", "01HZEXPANDOPEN000000000000"
THEIRS = "01HZEXPANDTHEIRS0000000000"  # the other tenant's copy
ANN, BOB = (Principal(tenant_id=TENANT, subject=user) for user in ("ann", "bob"))


@cache
def guide() -> list[Chunk]:
    pages = parse_pdf((CORPUS / "grfguide.pdf").read_bytes(), max_bytes=50_000_000, max_pages=100).pages
    return chunk_pages(pages, count_tokens=count_tokens, target_tokens=300, overlap_tokens=60)


def section_of(chunk: Chunk) -> list[Chunk]:
    """The run of the guide's chunks around ``chunk`` with its heading path."""
    chunks = guide()
    run = [chunk]
    for step in (-1, 1):
        index = chunk.chunk_index + step
        while 0 <= index < len(chunks) and chunks[index].heading_path == chunk.heading_path:
            run.append(chunks[index])
            index += step
    return sorted(run, key=lambda c: c.chunk_index)


def a_short_section() -> list[Chunk]:
    """A section of three chunks or more that fits the size cap whole."""
    return next(
        section
        for section in map(section_of, guide())
        if len(section) >= 3
        and section[0].heading_path
        and count_tokens(" ".join(c.text for c in section)) < EXPAND_MAX_TOKENS
    )


@pytest.fixture(scope="module")
def store() -> Iterator[VectorStore]:
    store = VectorStore(connect(URL), IndexSettings(name=f"test-expand-{uuid.uuid4().hex[:8]}", dimension=DIMENSION))
    store.ensure_index()
    chunks = guide()
    vectors = [[1.0] * DIMENSION] * len(chunks)
    try:
        restricted = DocumentAccess(users=["ann"])
        stamp = DocumentStamp(TENANT, RESTRICTED, "v1", filename="grfguide.pdf", access=restricted, uploaded_by="cy")
        store.write_chunks(stamp, chunks, vectors)
        store.write_chunks(DocumentStamp(TENANT, OPEN, "v1", filename="grfguide-open.pdf"), chunks, vectors)
        store.write_chunks(DocumentStamp(OTHER_TENANT, THEIRS, "v1", filename="theirs.pdf"), chunks, vectors)
        yield store
    finally:
        store.drop_index()


def normalised(text: str) -> str:
    return " ".join(text.split())


def service(store: VectorStore) -> SearchService:
    return SearchService(store=lambda: store, embedder=lambda: pytest.fail("BM25 does not embed"))


def phrase_of(chunk: Chunk) -> str:
    return " ".join(chunk.text.split()[-12:])


def test_section_expansion_returns_the_whole_section_and_merges_its_hits(store: VectorStore) -> None:
    section = a_short_section()
    # Words of the section's first and last chunks: both come back, as one section.
    query = f"{phrase_of(section[0])} {phrase_of(section[-1])}"
    request = SearchRequest(query=query, k=5, mode=SearchMode.BM25, filter=_only(RESTRICTED), expand=Expand.SECTION)
    [passage, *_] = service(store).search(TENANT, request, reader=ANN).passages
    assert passage.expanded is Expand.SECTION and passage.heading_path == section[0].heading_path
    assert not passage.truncated
    for chunk in section:
        assert normalised(chunk.text) in normalised(passage.text)
    assert len(normalised(passage.text)) < sum(len(normalised(chunk.text)) for chunk in section)  # overlap dropped
    assert (passage.page_start, passage.page_end) == (section[0].page_start, section[-1].page_end)
    ids = {chunk_id(RESTRICTED, "v1", chunk.chunk_index) for chunk in section}
    assert len(passage.chunk_ids) >= 2 and set(passage.chunk_ids) <= ids and passage.chunk_id in ids


def test_page_expansion_returns_every_chunk_on_the_page(store: VectorStore) -> None:
    chunks = guide()
    page = chunks[len(chunks) // 2].page_start
    on_page = [chunk for chunk in chunks if chunk.page_start <= page <= chunk.page_end]
    request = SearchRequest(
        query=phrase_of(on_page[0]), k=1, mode=SearchMode.BM25, filter=_only(OPEN), expand=Expand.PAGE
    )
    [passage] = service(store).search(TENANT, request, reader=BOB).passages
    assert passage.expanded is Expand.PAGE and passage.page_start <= page <= passage.page_end
    assert passage.truncated or all(normalised(chunk.text) in normalised(passage.text) for chunk in on_page)
    assert normalised(on_page[0].text) in normalised(passage.text)


def test_a_parent_is_read_only_within_the_tenant_and_the_readers_documents(store: VectorStore) -> None:
    section = a_short_section()
    hit = SearchHit(
        chunk_id=chunk_id(RESTRICTED, "v1", section[1].chunk_index),
        score=1.0,
        document_id=RESTRICTED,
        page_start=section[1].page_start,
        page_end=section[1].page_end,
        text=section[1].text,
        heading_path=tuple(section[1].heading_path),
    )
    scope = parent_scope([hit], Expand.SECTION)

    def parent(tenant: str, reader: Principal | None) -> list[int]:
        [chunks] = store.parent_chunks(SearchQuery(tenant_id=tenant, text="x", reader=reader), [scope])
        return [int(chunk.chunk_id.rsplit(":", 1)[1]) for chunk in chunks]

    assert parent(TENANT, ANN) == [chunk.chunk_index for chunk in section]
    assert parent(TENANT, BOB) == []  # Bob may not read Ann's copy: not even its neighbours
    assert parent(OTHER_TENANT, None) == []  # another tenant, even one that reads all of its own
    # Bob searching with expand never sees the restricted copy; the open one he does.
    query = phrase_of(section[1])
    request = SearchRequest(query=query, k=5, mode=SearchMode.BM25, expand=Expand.SECTION)
    seen = {p.document_id for p in service(store).search(TENANT, request, reader=BOB).passages}
    assert seen == {OPEN}


def _only(document_id: str) -> dict[str, object]:
    return {"equals": {"key": "document_id", "value": document_id}}
