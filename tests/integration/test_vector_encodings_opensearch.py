"""Each vector encoding against the real OpenSearch: the index made from the functions' environment
stores what it says (the quantized or packed vector files) and k-NN still finds the page that answers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.core.config import IndexParamsEnv
from rag_ingest.core.record import DocumentStamp
from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.wiring import vector_store_for

from bench.vector_settings import SETTINGS, file_sizes, shaped

pytestmark = pytest.mark.integration

URL = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
LIGHTHOUSES = Path(__file__).resolve().parents[2] / "samples" / "lighthouses.pdf"
QUESTION = "How was the Fresnel lens made from rings of glass prisms?"
TENANT = f"tenant-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION)


def loaded(store: VectorStore, embedder: Embedder, encode: bool = False) -> list[str]:
    """Index lighthouses.pdf's chunks (sign bits packed when ``encode``), flushed into a segment."""
    pages = parse_pdf(LIGHTHOUSES.read_bytes(), max_bytes=50_000_000, max_pages=100).pages
    chunks = chunk_pages(pages, count_tokens=count_tokens, target_tokens=300, overlap_tokens=60)
    vectors = embedder.embed([chunk.text for chunk in chunks])
    if encode:
        binary = next(setting for setting in SETTINGS if setting.encoding == "binary")
        vectors = shaped(np.asarray(vectors, dtype=np.float32), binary)
    store.ensure_index()
    store.write_chunks(DocumentStamp(TENANT, "lighthouses", "v1", filename=LIGHTHOUSES.name), chunks, vectors)
    store._client.indices.flush(index=store.index_name)
    store._client.indices.refresh(index=store.index_name)
    return [chunk.text for chunk in chunks]


@pytest.fixture
def sq_store() -> Iterator[VectorStore]:
    params = IndexParamsEnv.from_env({"OPENSEARCH_REPLICAS": "0", "OPENSEARCH_VECTOR_ENCODING": "sq"})
    store = vector_store_for(URL, f"test-sq-{uuid.uuid4().hex[:8]}", MINILM_DIMENSION, params)
    yield store
    store.drop_index()


def test_sq_from_the_environment_quantizes_in_the_index_and_still_finds_the_page(
    sq_store: VectorStore, embedder: Embedder
) -> None:
    loaded(sq_store, embedder)
    index = sq_store.index_name
    field = sq_store._client.indices.get_mapping(index=index)[index]["mappings"]["properties"]["embedding"]
    assert field["method"]["parameters"]["encoder"] == {"name": "sq", "parameters": {"bits": 7}}
    sizes = file_sizes(sq_store._client, index)
    # Lucene keeps the floats (for merges) and searches the 7-bit copy: a byte and a correction a dimension.
    assert sizes["veq"] < sizes["vec"] / 3
    [hit] = sq_store.knn_search(SearchQuery(tenant_id=TENANT, text=QUESTION), embedder.embed([QUESTION])[0], k=1)
    assert hit.page_start <= 3 <= hit.page_end  # "Fresnel and the Lens" is page 3


def test_binary_stores_packed_bits_and_hamming_finds_the_page(embedder: Embedder) -> None:
    from rag_ingest.adapters.vector_store import IndexSettings, connect

    settings = IndexSettings(
        name=f"test-binary-{uuid.uuid4().hex[:8]}", dimension=MINILM_DIMENSION, replicas=0, vector_encoding="binary"
    )
    store = VectorStore(connect(URL), settings)
    try:
        texts = loaded(store, embedder, encode=True)
        sizes = file_sizes(store._client, store.index_name)
        assert sizes["vec"] < len(texts) * (MINILM_DIMENSION // 8 + 64)  # 48 bytes a chunk, and a header
        binary = next(setting for setting in SETTINGS if setting.encoding == "binary")
        [query] = shaped(np.asarray(embedder.embed([QUESTION]), dtype=np.float32), binary)
        hits = store.knn_search(SearchQuery(tenant_id=TENANT, text=QUESTION), query, k=3)
        assert any(hit.page_start <= 3 <= hit.page_end for hit in hits)
    finally:
        store.drop_index()
