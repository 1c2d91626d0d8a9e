"""Batch inference on a local stack of its own: the stack synthesized with embedding.batchInference on,
a 14-page document in the bulk lane (6-page threshold and ranges, as the session stack), embedded by
one Bedrock batch job that the local embedding server runs over moto's S3, the workflow's wait loop
run by moto's Step Functions interpreter, then Index and READY. Deterministic vectors: what is
checked is the path, not retrieval quality."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.embeddings.base import MINILM_DIMENSION
from rag_ingest.wiring import vector_store_for

from infra.cdk_app import cdk_json_context, create_app
from infra.config import CONTEXT_KEY
from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess, template_with_environment
from tests.e2e.test_lanes import BULK_PAGES, bulk_pdf, execution_arn, states_entered
from tools.build_layer import build_layer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def batch_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    build_layer()
    context = json.loads(json.dumps(cdk_json_context()[CONTEXT_KEY]))
    context["embedding"]["batchInference"]["enabled"] = True
    context["workflow"]["timeoutMinutes"] = 24 * 60 + 60
    outdir = tmp_path_factory.mktemp("cdk.out-batch")
    app, stack, _ = create_app(context={CONTEXT_KEY: context}, outdir=str(outdir))
    app.synth()
    state_dir = tmp_path_factory.mktemp("batch-stack")
    template = state_dir / "template.json"
    index = f"rag-batch-e2e-{uuid.uuid4().hex[:8]}"
    variables = {
        "PARSE_RANGE_PAGES": "6",
        "BULK_ABOVE_PAGES": "6",
        "OPENSEARCH_INDEX": index,
        # A 14-page document has about 30 chunks: the local runner's minimum is lowered to match.
        "BATCH_MIN_RECORDS": "5",
        "BATCH_POLL_SECONDS": "1",
        "BATCH_MAX_POLL_SECONDS": "1",
    }
    template.write_text(json.dumps(template_with_environment(outdir / stack.template_file, variables)))
    process = OfflineStackProcess(
        state_dir,
        template=template,
        env={
            "LOCAL_BATCH_MIN_RECORDS": "5",
            "LOCAL_EMBEDDING_VECTORS": "deterministic",
            "LOCAL_BATCH_START_DELAY": "1",
        },
    )
    try:
        outputs = process.start(timeout=300)
        yield {"outputs": outputs, "process": process, "index": index}
    finally:
        process.stop()
        store = vector_store_for(process.env.get("OPENSEARCH_URL") or "http://127.0.0.1:9200", index, MINILM_DIMENSION)
        store._client.indices.delete(index=index, ignore_unavailable=True)


def test_a_bulk_document_is_embedded_by_one_batch_job_and_indexed(batch_stack: dict[str, Any], tmp_path: Path) -> None:
    outputs = batch_stack["outputs"]
    client = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"e2e-{uuid.uuid4().hex[:8]}")
    document = client.upload(bulk_pdf(tmp_path / "harbour-manual.pdf"))
    done = client.wait_until_done([document], timeout_seconds=240)[document]
    assert done["status"] == "READY", done
    assert done["lane"] == "bulk" and done["page_count"] == BULK_PAGES

    options = {
        "endpoint_url": outputs["MotoEndpoint"],
        "region_name": outputs.get("Region", "us-east-1"),
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    aws = {name: boto3.client(name, **options) for name in ("stepfunctions", "dynamodb")}  # type: ignore[call-overload]
    states = states_entered(aws, execution_arn(aws, outputs, document))
    # Submitted, looked at after a wait (the job stays Submitted a second), collected: no Embed Map.
    assert states["EmbedBatchBulk"] >= 2 and states["EmbedBatchWaitBulk"] >= 1, states
    assert states["EmbedBatchPhaseBulk"] == states["EmbedBatchBulk"]
    assert "EmbedBulk" not in states and states["IndexBulk"] == 1

    item = aws["dynamodb"].get_item(TableName=outputs["DocumentsTableName"], Key={"document_id": {"S": document}})
    assert item["Item"]["embed_batch_status"]["S"] == "Completed"
    assert ":model-invocation-job/" in item["Item"]["embed_batch_job_arn"]["S"]
    store = vector_store_for(
        batch_stack["process"].env.get("OPENSEARCH_URL") or "http://127.0.0.1:9200",
        batch_stack["index"],
        MINILM_DIMENSION,
    )
    assert store.count(document_id=document) == done["chunk_count"]
