"""A figure found by search against the real OpenSearch: the Why3 manual's screenshots, read by
Tesseract, indexed as passages of their own; a hit on one says it is a figure and what its text
holds, and carries the figure's rectangle for the page's highlight (index of the test's own)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rag_ingest.adapters.vector_store import IndexSettings, VectorStore, connect
from rag_ingest.core.parsed import FigureSource
from rag_ingest.core.record import DocumentStamp
from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.ingest.passage_boxes import passage_boxes
from rag_ingest.parsing.image_reading import OcrImageReader
from rag_ingest.parsing.ocr.local import local_engine
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.parsing.pdf.figures import PdfFigures
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.retrieval.search import SearchMode, search_passages

pytestmark = pytest.mark.integration
URL = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
WHY3 = Path(__file__).resolve().parents[2] / "eval" / "corpus" / "why3-manual.pdf"
TENANT = f"tenant-figures-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION)


@pytest.fixture(scope="module")
def store(embedder: Embedder) -> Iterator[VectorStore]:
    store = VectorStore(connect(URL), IndexSettings(name=f"test-figures-{uuid.uuid4().hex[:8]}", dimension=384))
    store.ensure_index()
    try:
        figures = PdfFigures(OcrImageReader(local_engine()))
        document = parse_pdf(WHY3.read_bytes(), max_bytes=50_000_000, max_pages=100, figures=figures)
        chunks = passage_boxes(chunk_pages(document.pages, count_tokens=count_tokens), document.pages)
        stamp = DocumentStamp(TENANT, "why3", "v1", filename=WHY3.name)
        store.write_chunks(stamp, chunks, embedder.embed([chunk.text for chunk in chunks]))
        yield store
    finally:
        store.drop_index()


def test_a_figure_hit_says_what_it_holds_and_carries_its_rectangle(store: VectorStore, embedder: Embedder) -> None:
    query = SearchQuery(tenant_id=TENANT, text="The GUI after splitting goal G2", k=5, mode=SearchMode.BM25)

    hits = search_passages(store, embedder, query)

    figure = next(hit for hit in hits if hit.figure_sources is not None)
    assert figure.text.startswith("Fig. 2.4: The GUI after splitting goal G2.")
    assert figure.figure_sources == (FigureSource.CAPTION, FigureSource.OCR)
    [box] = figure.boxes
    assert box.page == figure.page_start == 14
    assert box.x1 - box.x0 > 0.5  # the screenshot spans most of the text width
    text_hits = [hit for hit in hits if hit.figure_sources is None]
    assert all(not hit.text.startswith("Fig. 2.4") for hit in text_hits)


def test_the_text_inside_a_screenshot_is_found(store: VectorStore, embedder: Embedder) -> None:
    query = SearchQuery(tenant_id=TENANT, text="Alt-Ergo 2.3.0 hello_proof.why", k=5, mode=SearchMode.BM25)

    hits = search_passages(store, embedder, query)

    assert hits[0].figure_sources is not None and "Alt-Ergo" in hits[0].text
