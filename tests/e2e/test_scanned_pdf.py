"""End to end on the local stack (OCR_ENGINE=local: Tesseract): an image-only scanned PDF uploaded
through the API reaches READY with its pages OCR'd, and a phrase from its second page finds that page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.embeddings.base import Embedder
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.retrieval.search import search_passages

from eval.scans.generate import STYLES, generate_style
from local.client import OfflineClient

pytestmark = pytest.mark.e2e


def test_a_scanned_pdf_is_ocrd_to_ready_and_searchable_by_page(
    client: OfflineClient, vector_store: VectorStore, embedder: Embedder, tmp_path: Path
) -> None:
    style = next(style for style in STYLES if style.name == "clean-sans-200")
    data, truths = generate_style(style)
    path = tmp_path / "scanned.pdf"
    path.write_bytes(data)

    document_id = client.upload(path)
    state: dict[str, Any] = client.wait_until_done([document_id], timeout_seconds=600)[document_id]

    assert state["status"] == "READY", f"{state['error_code']}: {state['error_detail']}"
    assert state["page_count"] == len(truths)
    assert state["ocr_pages"] == len(truths)
    assert state["failed_pages"] == []
    # A phrase of the second page, as a user would type it: two of its middle lines.
    lines = [line for line in truths[1].splitlines() if len(line) > 40]
    phrase = " ".join(lines[len(lines) // 2 : len(lines) // 2 + 2])
    hits = search_passages(vector_store, embedder, SearchQuery(tenant_id=client.tenant_id, text=phrase, k=3))
    assert hits and hits[0].document_id == document_id
    assert hits[0].page_start <= 2 <= hits[0].page_end, (phrase, hits[0])
