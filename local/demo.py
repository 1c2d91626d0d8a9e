"""make demo: upload the sample PDFs through the presigned-POST flow, follow them, then search."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from rag_ingest.embeddings.base import create_embedder
from rag_ingest.search import search_passages
from rag_ingest.wiring import vector_store_for

from local.client import LocalStackClient

SAMPLES = Path("samples")
DEFAULT_QUERIES = (
    "Why did lighthouse keepers trim the wick through the night?",
    "How do you know a sourdough starter is ready to bake with?",
    "Which birds nest on city buildings?",
)


def _describe(document_id: str, state: dict[str, Any], names: dict[str, str]) -> None:
    progress = state.get("progress") or {}
    detail = f" {progress.get('done')}/{progress.get('total')} chunks embedded" if progress else ""
    stage = f" stage={state['stage']}" if state.get("stage") else ""
    error = f" error={state['error_code']}: {state.get('error_detail')}" if state.get("error_code") else ""
    print(f"  {names[document_id]:<28} {state['status']:<10}{stage}{detail}{error}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tenant", default="demo")
    parser.add_argument("--query", action="append", help="question to search (repeatable)")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()

    client = LocalStackClient.from_outputs(tenant_id=args.tenant)
    pdfs = sorted(SAMPLES.glob("*.pdf"))
    if not pdfs:
        raise SystemExit("no sample PDFs in samples/")
    print(f"Uploading {len(pdfs)} PDFs as tenant '{args.tenant}' through presigned POSTs to {client.api_url}")
    started = time.monotonic()
    names: dict[str, str] = {}
    for pdf in pdfs:
        document_id = client.upload(pdf)
        names[document_id] = pdf.name
        print(f"  {pdf.name:<28} uploaded as {document_id}", flush=True)

    print("Following the documents (status from the documents table):")
    states = client.wait_until_done(
        list(names), timeout_seconds=args.timeout, on_change=lambda d, s: _describe(d, s, names)
    )
    elapsed = time.monotonic() - started
    ready = [d for d, s in states.items() if s["status"] == "READY"]
    pages = sum(int(states[d].get("page_count") or 0) for d in ready)
    chunks = sum(int(states[d].get("chunk_count") or 0) for d in ready)
    print(f"{len(ready)}/{len(names)} READY: {pages} pages, {chunks} chunks in {elapsed:.1f}s")

    store = vector_store_for(
        os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"), os.environ.get("OPENSEARCH_INDEX", "rag-chunks"), 384
    )
    embedder = create_embedder("local", "sentence-transformers/all-MiniLM-L6-v2", 384)
    for query in args.query or DEFAULT_QUERIES:
        print(f"\nQ: {query}")
        for rank, hit in enumerate(search_passages(store, embedder, tenant_id=args.tenant, query=query, k=3), 1):
            pages_label = f"p.{hit.page_start}" + (f"-{hit.page_end}" if hit.page_end != hit.page_start else "")
            excerpt = " ".join(hit.text.split())[:220]
            print(
                f"  {rank}. [{names.get(hit.document_id, hit.document_id)} {pages_label}] ({hit.score:.3f}) {excerpt}"
            )
    if len(ready) != len(names):
        raise SystemExit("some documents did not become READY")


if __name__ == "__main__":
    main()
