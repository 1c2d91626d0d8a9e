"""With ``context_line`` on (as shipped), BM25 searches a chunk's contextual text (document title
and heading path, then the text), while the passage returned stays the plain text; switched off,
it searches the text alone and writes no contextual field; an index made before that field
existed keeps working. Real OpenSearch at ``$OPENSEARCH_URL``, an index of the test's own (deleted
afterwards)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from rag_ingest.adapters.vector_store import INDEXED_TEXT_FIELD, IndexSettings, VectorStore, connect
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import DocumentStamp
from rag_ingest.core.retrieval_text import SHIPPED_CONTEXT_LINE
from rag_ingest.retrieval.query import SearchQuery

pytestmark = pytest.mark.integration

URL = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
DIMENSION = 4
TENANT = f"tenant-{uuid.uuid4().hex[:6]}"


def chunk(index: int, text: str, heading_path: list[str], title: str = "Admin guide") -> Chunk:
    return Chunk(
        chunk_index=index,
        text=text,
        page_start=index + 1,
        page_end=index + 1,
        heading_path=heading_path,
        char_start=0,
        char_end=len(text),
        token_count=len(text.split()),
        document_title=title,
    )


RESTORE = chunk(0, "Stop the service, copy the saved files back and start it again.", ["4 Backups", "Restoring"])
UNRELATED = chunk(1, "The service listens on port 8080 and logs to the journal.", ["2 Networking"])


def new_store(name: str, *, context_line: bool = True) -> VectorStore:
    return VectorStore(connect(URL), IndexSettings(name=name, dimension=DIMENSION, context_line=context_line))


def filled_store(*, context_line: bool) -> Iterator[VectorStore]:
    store = new_store(f"test-context-{uuid.uuid4().hex[:8]}", context_line=context_line)
    store.ensure_index()
    try:
        store.write_chunks(
            DocumentStamp(TENANT, "admin", "v1", filename="admin.pdf"),
            [RESTORE, UNRELATED],
            [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]],
        )
        yield store
    finally:
        store.drop_index()


@pytest.fixture
def store() -> Iterator[VectorStore]:
    # The shipped settings (docs/retrieval.md, the ablation: the evaluation's decision).
    assert SHIPPED_CONTEXT_LINE is True
    assert IndexSettings(name="x", dimension=DIMENSION).context_line is SHIPPED_CONTEXT_LINE
    yield from filled_store(context_line=SHIPPED_CONTEXT_LINE)


@pytest.fixture
def plain_store() -> Iterator[VectorStore]:
    yield from filled_store(context_line=False)


def test_switched_off_bm25_matches_the_text_alone(plain_store: VectorStore) -> None:
    assert plain_store.bm25_search(SearchQuery(tenant_id=TENANT, text="backups"), k=5) == []  # a heading word only
    [hit] = plain_store.bm25_search(SearchQuery(tenant_id=TENANT, text="saved files"), k=5)
    assert hit.text == RESTORE.text
    assert "<em>saved</em>" in " ".join(hit.highlights)
    stored = connect(URL).get(index=plain_store.index_name, id=hit.chunk_id)["_source"]
    assert INDEXED_TEXT_FIELD not in stored  # nothing written twice


def test_bm25_finds_a_chunk_by_a_heading_word_its_text_lacks(store: VectorStore) -> None:
    assert "backups" not in RESTORE.text.lower()
    hits = store.bm25_search(SearchQuery(tenant_id=TENANT, text="backups"), k=5)
    assert len(hits) == 1  # only the chunk under "4 Backups"
    [hit] = hits
    assert hit.page_start == 1
    assert hit.text == RESTORE.text  # the passage is the plain text: no title, no heading path
    assert hit.heading_path == ("4 Backups", "Restoring")
    assert hit.highlights == ()  # the word is in no sentence of the passage: nothing to mark


def test_bm25_finds_a_chunk_by_its_document_title_and_highlights_only_the_text(store: VectorStore) -> None:
    hits = store.bm25_search(SearchQuery(tenant_id=TENANT, text="admin guide service"), k=5)
    assert {hit.page_start for hit in hits} == {1, 2}  # the title word matches both chunks
    assert all("Admin guide" not in hit.text for hit in hits)
    assert all("<em>service</em>" in " ".join(hit.highlights) for hit in hits)
    assert all("<em>guide</em>" not in " ".join(hit.highlights) for hit in hits)


def test_knn_hits_carry_the_plain_text_too(store: VectorStore) -> None:
    [hit] = store.knn_search(SearchQuery(tenant_id=TENANT, text="saved files"), [1.0, 0.0, 0.0, 0.0], k=1)
    assert hit.text == RESTORE.text
    assert "<em>saved</em>" in " ".join(hit.highlights)


def test_an_index_made_before_indexed_text_gains_it_and_its_old_chunks_stay_searchable() -> None:
    name = f"test-context-old-{uuid.uuid4().hex[:8]}"
    store = new_store(name)
    client = connect(URL)
    old_mapping = store.mapping()
    del old_mapping["mappings"]["properties"][INDEXED_TEXT_FIELD]
    client.indices.create(index=name, body=old_mapping)
    try:
        # A chunk as the previous release wrote it: no indexed_text.
        client.index(
            index=name,
            id="old:1",
            refresh="wait_for",
            body={
                "tenant_id": TENANT, "document_id": "old", "version": "x", "chunk_index": 0, "page_start": 3,
                "page_end": 3, "heading_path": ["Backups"], "filename": "old.pdf",
                "text": "Copy the saved files back.", "embedding": [0.0, 0.0, 1.0, 0.0],
            },
        )  # fmt: skip
        store.ensure_index()
        properties = client.indices.get_mapping(index=name)[name]["mappings"]["properties"]
        assert properties[INDEXED_TEXT_FIELD] == {"type": "text"}
        store.write_chunks(
            DocumentStamp(TENANT, "admin", "v1", filename="admin.pdf"), [RESTORE], [[1.0, 0.0, 0.0, 0.0]]
        )
        by_page = {
            hit.page_start: hit for hit in store.bm25_search(SearchQuery(tenant_id=TENANT, text="saved files"), k=5)
        }
        assert set(by_page) == {1, 3}  # the old chunk matches on its text, the new one on its indexed text
        assert by_page[3].text == "Copy the saved files back."
    finally:
        store.drop_index()


def test_stop_words_of_the_query_are_not_marked(plain_store: VectorStore) -> None:
    hits = plain_store.bm25_search(SearchQuery(tenant_id=TENANT, text="copy the files back to the service"), k=5)
    [hit] = [hit for hit in hits if hit.text == RESTORE.text]
    marked = " ".join(hit.highlights)
    assert "<em>copy</em>" in marked and "<em>files</em>" in marked and "<em>service</em>" in marked
    assert "<em>the</em>" not in marked.lower()
    # A query of stop words alone still marks them: there is nothing else to show.
    only = plain_store.bm25_search(SearchQuery(tenant_id=TENANT, text="the"), k=5)
    assert only and all("<em>the</em>" in " ".join(hit.highlights).lower() for hit in only)
