"""The reconciler at scale: its run time and memory over N documents of M chunks each.

    .venv/bin/python -m bench.reconcile_scale --documents 1000 --chunks 100   # 100,000 chunks

Builds the state the reconciler reads (a versioned bucket and a documents table on in-process moto,
every chunk in an OpenSearch index of its own, without vectors: the reconciler never reads one),
damages 1 % of the documents, and times a report-only run in this process with ``ru_maxrss`` and
tracemalloc's peak. Imports the domain package, ``tests.support``, boto3 and opensearch-py.
Method: docs/benchmarks.md (The reconciler at scale); figures: docs/operations.md (The reconciler).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
import tracemalloc
import uuid
from typing import Any

import boto3
from opensearchpy import helpers
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.object_store import ObjectStore
from rag_ingest.adapters.object_versions import ObjectVersions
from rag_ingest.adapters.workflow import WorkflowStarter
from rag_ingest.core.ids import chunk_id, new_document_id, version_hash
from rag_ingest.core.s3_keys import upload_key
from rag_ingest.operations.reconciler import Reconciler, ReconcilerSettings
from rag_ingest.operations.replay import Replayer
from rag_ingest.wiring import vector_store_for

from tests.support.aws import moto_server
from tests.support.operations import create_documents_table

OPENSEARCH_URL = os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200")
DIMENSION = 8


def _chunk_actions(document_id: str, version: str, chunks: int) -> Any:
    for index in range(chunks):
        yield {
            "_op_type": "index",
            "_id": chunk_id(document_id, version, index),
            "_source": {
                "tenant_id": "acme",
                "document_id": document_id,
                "version": version_hash(version),
                "chunk_index": index,
                "page_start": 1,
                "page_end": 1,
                "heading_path": [],
                "filename": "a.pdf",
                "text": f"passage {index} of {document_id}",
            },
        }


def run(documents: int, chunks: int) -> dict[str, Any]:
    with moto_server():
        suffix = uuid.uuid4().hex[:8]
        bucket, table, index = f"bench-{suffix}", f"bench-documents-{suffix}", f"bench-reconcile-{suffix}"
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        create_documents_table(table)
        store = vector_store_for(OPENSEARCH_URL, index, DIMENSION)
        store.ensure_index()
        dynamo = boto3.resource("dynamodb").Table(table)
        started = time.monotonic()
        ids = []
        now = "2026-01-01T00:00:00.000+00:00"
        with dynamo.batch_writer() as batch:
            for _ in range(documents):
                document_id = new_document_id()
                key = upload_key("acme", document_id, "a.pdf")
                version = str(s3.put_object(Bucket=bucket, Key=key, Body=b"%PDF-1.4")["VersionId"])
                batch.put_item(
                    Item={
                        "document_id": document_id, "tenant_id": "acme", "status": "READY", "filename": "a.pdf",
                        "bucket": bucket, "key": key, "version": version, "chunk_count": chunks,
                        "indexed_count": chunks, "created_at": now, "updated_at": now,
                    }
                )  # fmt: skip
                ids.append((document_id, version))
        # The bench's bulk load: big requests, one refresh at the end.
        actions = (action for document_id, version in ids for action in _chunk_actions(document_id, version, chunks))
        try:
            return _measure(store, s3, bucket, table, ids, chunks, started, actions)
        finally:
            store.drop_index()


def _measure(
    store: Any, s3: Any, bucket: str, table: str, ids: list[tuple[str, str]], chunks: int, started: float, actions: Any
) -> dict[str, Any]:
    """Load the chunks, damage 1 % of the documents, time a report-only run."""
    client = store._client
    helpers.bulk(client, actions, chunk_size=2000, index=store.index_name, request_timeout=600)
    client.indices.refresh(index=store.index_name, request_timeout=600)
    damaged = ids[:: max(1, 100)]  # 1 % of the documents lose their last two chunks
    for document_id, version in damaged:
        store.delete_chunks(document_id, version_hash(version), from_index=chunks - 2)
    loaded_seconds = time.monotonic() - started
    documents_table = DocumentsTable(table)
    reconciler = Reconciler(
        documents=documents_table,
        objects=ObjectVersions(s3),
        checkpoints=ObjectStore(s3),
        index=store,
        replayer=Replayer(documents_table, WorkflowStarter("arn:aws:states:us-east-1:123456789012:stateMachine:x")),
        settings=ReconcilerSettings(bucket=bucket, stuck_after_seconds=1800, object_grace_seconds=0),
    )
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run_started = time.monotonic()
    report = reconciler.reconcile()
    run_seconds = time.monotonic() - run_started
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    reconciler.reconcile()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "documents": len(ids),
        "chunks": report.chunks,
        "indexed_versions": report.indexed_versions,
        "findings": len(report.findings),
        "damaged": len(damaged),
        "load_seconds": round(loaded_seconds, 1),
        "run_seconds": round(run_seconds, 2),
        "python_peak_mb_during_run": round(peak / 1e6, 1),
        "max_rss_mb_before_run": round(rss_before / 1024, 1),
        "max_rss_mb_after_run": round(rss_after / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=100, help="chunks per document")
    args = parser.parse_args()
    print(json.dumps(run(args.documents, args.chunks), indent=2))


if __name__ == "__main__":
    main()
