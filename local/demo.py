"""make demo: sign in, upload the sample PDFs through the presigned-POST flow, follow them, then search.

Everything goes through the local API as a browser would: an ID token from the local identity
provider, ``POST /documents`` and the presigned POST, ``GET /documents/{id}``, ``POST /search``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from local.client import OfflineClient

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
    parser.add_argument("--user", default=None, help="user name to sign in as (default: <tenant>-user)")
    parser.add_argument("--query", action="append", help="question to search (repeatable)")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()

    client = OfflineClient.from_outputs(tenant_id=args.tenant, username=args.user)
    pdfs = sorted(SAMPLES.glob("*.pdf"))
    if not pdfs:
        raise SystemExit("no sample PDFs in samples/")
    client.token()
    print(f"Signed in as {client.username} (tenant '{args.tenant}') with the local identity provider (dev only)")
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

    for query in args.query or DEFAULT_QUERIES:
        print(f"\nQ: {query}")
        response = client.search(query, k=3)
        response.raise_for_status()
        for rank, hit in enumerate(response.json()["passages"], 1):
            pages_label = f"p.{hit['page_start']}" + (
                f"-{hit['page_end']}" if hit["page_end"] != hit["page_start"] else ""
            )
            excerpt = " ".join(hit["text"].split())[:220]
            name = names.get(hit["document_id"], hit.get("filename") or hit["document_id"])
            print(f"  {rank}. [{name} {pages_label}] ({hit['score']:.3f}) {excerpt}")
    if len(ready) != len(names):
        raise SystemExit("some documents did not become READY")


if __name__ == "__main__":
    main()
