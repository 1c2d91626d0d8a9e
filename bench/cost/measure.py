"""One measured run of the local stack for the cost model: what each document really used.

A fresh local stack (free ports, an OpenSearch index of its own) ingests the PDFs through the API
as a browser would. moto's request recorder is on for the run, so every AWS request the system made
is counted from the wire: S3, DynamoDB, SQS, Step Functions, Lambda invokes. Afterwards this module
reads, per document, the Step Functions execution history (``GetExecutionHistory``: the transitions
Standard workflows bill), the status record (stage timings, item size), the chunks artifact (the
tokens Titan would bill) and the artifacts' sizes (S3 storage); and, from the stack's log, every
Lambda invocation's duration. Its own reads carry a user-agent tag and are left out of the counts.
"""

from __future__ import annotations

import base64
import json
import os
import re
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import requests
from botocore.config import Config
from rag_ingest.core.tokens import count_tokens

from eval.stack import eval_template
from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from local.runtime.settings import DEFAULT_OPENSEARCH_URL, LOCAL_CREDENTIALS, REPO_ROOT, stack_name_from_cdk_json

# This module's own AWS reads say so in their user agent: they are the measurement, not the system.
PROBE_USER_AGENT = "rag-ingest-cost-probe"
# "END RequestId: <id> Duration: <ms> ms Status: ok" from local/runtime/lambda_/runner.py.
_INVOCATION_END = re.compile(r"local\.lambda\.(?P<function>\S+): END RequestId: \S+ Duration: (?P<ms>[\d.]+) ms")
_FUNCTION_LOG_LINE = re.compile(r"^\S+ \S+ \w+ +local\.lambda\.\S+: (.*)$", re.MULTILINE)
_CREDENTIAL_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/[^/]+/(?P<service>[^/]+)/aws4_request")
TERMINAL = frozenset({"READY", "FAILED"})


def probe_client(service: str, outputs: Mapping[str, Any]) -> Any:
    return boto3.session.Session(
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=LOCAL_CREDENTIALS["AWS_SESSION_TOKEN"],
        region_name=outputs["Region"],
    ).client(service, endpoint_url=outputs["MotoEndpoint"], config=Config(user_agent_extra=PROBE_USER_AGENT))


def _recorder(moto_endpoint: str, action: str) -> None:
    response = requests.post(f"{moto_endpoint}/moto-api/recorder/{action}", timeout=30)
    response.raise_for_status()


def classify_request(entry: dict[str, Any]) -> tuple[str, str] | None:
    """(service, operation) of one recorded request; None for the probe's own reads."""
    headers = {key.lower(): value for key, value in entry.get("headers", {}).items()}
    if PROBE_USER_AGENT in headers.get("user-agent", ""):
        return None
    scope = _CREDENTIAL_SCOPE.search(headers.get("authorization", ""))
    service = scope.group("service") if scope else None
    target = headers.get("x-amz-target", "")
    if target:
        operation = target.rsplit(".", 1)[-1]
        if service == "dynamodb":
            # Which table, and whether the read is strongly consistent: both change the units billed.
            body = _json_body(entry)
            table = str(body.get("TableName", "")).split("-")[1:2] or ["?"]
            consistent = "+consistent" if body.get("ConsistentRead") else ""
            return "dynamodb", f"{operation}:{table[0]}{consistent}"
        return service or target.split(".")[0], operation
    method = str(entry.get("method", "GET"))
    url = str(entry.get("url", ""))
    path, _, query = url.partition("?")
    if service == "lambda" or "/functions/" in path:
        return "lambda", "Invoke" if path.endswith("/invocations") else f"{method} {path.split('/')[-1]}"
    if service in (None, "s3"):
        # Presigned POST uploads carry no Authorization header: a form POST to the bucket.
        if method == "GET" and ("list-type=" in query or path.rstrip("/").count("/") <= 1):
            return "s3", "LIST"
        return "s3", method
    if service == "sqs":
        action = re.search(r"Action=(\w+)", query + "&" + _body_text(entry))
        return "sqs", action.group(1) if action else method
    return service, method


def _body_text(entry: dict[str, Any]) -> str:
    body = entry.get("body") or ""
    if entry.get("body_encoded"):
        try:
            return base64.b64decode(body).decode("utf-8", "replace")
        except ValueError:
            return ""
    return str(body)


def _json_body(entry: dict[str, Any]) -> dict[str, Any]:
    try:
        body = json.loads(_body_text(entry) or "{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def log_bytes(log_text: str) -> int:
    """Bytes the functions logged (their JSON lines, EMF metrics included, and START/END lines),
    the stand-in for what CloudWatch Logs would ingest from them."""
    return sum(len(match.group(1).encode()) + 1 for match in _FUNCTION_LOG_LINE.finditer(log_text))


def recorded_entries(recording: str) -> tuple[list[dict[str, Any]], int]:
    """The recorded requests, and how many bytes of the recording could not be read.

    moto's server writes the recording from one thread per request without a lock, so two requests
    can land on one line; each line is read as a sequence of JSON objects, and what is not one is
    skipped and counted (the report says so) rather than failing a long measured run.
    """
    decoder = json.JSONDecoder()
    entries: list[dict[str, Any]] = []
    unread = 0
    for line in recording.splitlines():
        position = 0
        while position < len(line):
            if line[position].isspace():
                position += 1
                continue
            try:
                entry, position = decoder.raw_decode(line, position)
            except ValueError:
                next_object = line.find('{"headers"', position + 1)
                end = next_object if next_object != -1 else len(line)
                unread += end - position
                position = end
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries, unread


def count_requests(recording: str) -> dict[str, dict[str, int]]:
    """Requests per service and operation in moto's recording (one JSON object per line)."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    entries, _unread = recorded_entries(recording)
    for entry in entries:
        kind = classify_request(entry)
        if kind is not None:
            counts[kind[0]][kind[1]] += 1
    return {service: dict(sorted(operations.items())) for service, operations in sorted(counts.items())}


def embedding_cache_entries(recording: str, dimension: int) -> dict[str, Any]:
    """The embedding cache entries the run wrote (PutItem on its table), sized from the wire: each
    item's DynamoDB size and, for packed entries, the payload of its value (format, kind and digest
    left out), which grows with the dimension."""
    from rag_ingest.ingest.embedding_cache import DIGEST_BYTES, PACKED_ATTRIBUTE

    item_bytes: list[int] = []
    payload_bytes: list[int] = []
    entries, _unread = recorded_entries(recording)
    for entry in entries:
        kind = classify_request(entry)
        if kind is None or kind[0] != "dynamodb" or not kind[1].startswith("PutItem:StorageEmbeddingCacheTable"):
            continue
        item = _json_body(entry).get("Item") or {}
        item_bytes.append(dynamodb_item_bytes(item))
        packed = item.get(PACKED_ATTRIBUTE, {}).get("B")
        if packed is not None:
            payload_bytes.append(len(base64.b64decode(packed)) - 2 - DIGEST_BYTES)
    if not item_bytes:
        return {}
    return {
        "count": len(item_bytes),
        "dimension": dimension,
        "packed": len(payload_bytes) == len(item_bytes),
        "mean_item_bytes": round(sum(item_bytes) / len(item_bytes), 1),
        "max_item_bytes": max(item_bytes),
        "max_payload_bytes": max(payload_bytes, default=0),
        "mean_payload_bytes": round(sum(payload_bytes) / len(payload_bytes), 1) if payload_bytes else 0,
    }


def invocation_durations(log_text: str) -> dict[str, list[float]]:
    """Every Lambda invocation's duration (ms) per function, from the stack's log."""
    durations: dict[str, list[float]] = defaultdict(list)
    for match in _INVOCATION_END.finditer(log_text):
        durations[match.group("function")].append(float(match.group("ms")))
    return dict(durations)


def dynamodb_item_bytes(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names plus values (UTF-8 lengths; numbers ~ their digits)."""

    def value_bytes(value: dict[str, Any]) -> int:
        ((kind, inner),) = value.items()
        if kind == "B":
            return len(base64.b64decode(inner))  # base64 on the wire, sized at its raw bytes
        if kind in ("S", "N"):
            return len(str(inner).encode())
        if kind == "BOOL" or kind == "NULL":
            return 1
        if kind in ("SS", "NS", "BS"):
            return sum(len(str(v).encode()) for v in inner)
        if kind == "L":
            return 3 + sum(1 + value_bytes(v) for v in inner)
        if kind == "M":
            return 3 + sum(len(k.encode()) + 1 + value_bytes(v) for k, v in inner.items())
        return len(json.dumps(inner))

    return sum(len(name.encode()) + value_bytes(value) for name, value in item.items())


def _wait_until_done(table: Any, table_name: str, document_ids: Sequence[str], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    items: dict[str, Any] = {}
    while True:
        for document_id in document_ids:
            if items.get(document_id, {}).get("status", {}).get("S") in TERMINAL:
                continue
            found = table.get_item(TableName=table_name, Key={"document_id": {"S": document_id}}).get("Item")
            if found:
                items[document_id] = found
        if all(items.get(d, {}).get("status", {}).get("S") in TERMINAL for d in document_ids):
            return items
        if time.monotonic() > deadline:
            raise TimeoutError(f"documents not finished after {timeout:.0f}s")
        time.sleep(1.0)


def _execution_history(sfn: Any, execution_arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for page in sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn):
        events.extend(page["events"])
    return events


def _artifacts(s3: Any, bucket: str, document_id: str) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"artifacts/{document_id}/"):
        objects.extend({"key": o["Key"], "bytes": int(o["Size"])} for o in page.get("Contents", []))
    return objects


def document_chunks(
    s3: Any, bucket: str, document_id: str, artifacts: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The document's chunks artifact (each chunk's ``text`` is what the model embeds); empty for a
    document that failed before Chunk: nothing was sent to Bedrock for it."""
    listed = _artifacts(s3, bucket, document_id) if artifacts is None else artifacts
    chunks_keys = [a["key"] for a in listed if a["key"].endswith("/chunks.json")]
    if not chunks_keys:
        return []
    return list(json.loads(s3.get_object(Bucket=bucket, Key=chunks_keys[0])["Body"].read()))


def _document_measurement(
    outputs: dict[str, Any], item: dict[str, Any], pdf: Path, clients: dict[str, Any]
) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeDeserializer

    record = {key: TypeDeserializer().deserialize(value) for key, value in item.items()}
    document_id = str(record["document_id"])
    bucket = outputs["BucketName"]
    artifacts = _artifacts(clients["s3"], bucket, document_id)
    chunks = document_chunks(clients["s3"], bucket, document_id, artifacts)
    history = _execution_history(clients["stepfunctions"], str(record["execution_arn"]))
    return {
        "document_id": document_id,
        "file": pdf.name,
        "pdf_bytes": pdf.stat().st_size,
        "status": record["status"],
        "pages": int(record.get("page_count") or 0),
        "ocr_pages": int(record.get("ocr_pages") or 0),
        "chunks": len(chunks),
        "chunk_tokens": sum(count_tokens(chunk["text"]) for chunk in chunks),
        "chunk_characters": sum(len(chunk["text"]) for chunk in chunks),
        "timings_ms": {stage: int(ms) for stage, ms in dict(record.get("timings_ms") or {}).items()},
        "status_item_bytes": dynamodb_item_bytes(item),
        "artifacts": artifacts,
        "history_event_types": dict(sorted(Counter(event["type"] for event in history).items())),
    }


def measure(pdfs: Sequence[Path], timeout: float = 1800) -> dict[str, Any]:
    """Ingest ``pdfs`` through a fresh local stack and return what the cost model needs."""
    from rag_ingest.wiring import vector_store_for

    source = REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    opensearch_url = os.environ.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL
    try:
        requests.get(opensearch_url, timeout=10).raise_for_status()
    except requests.RequestException as error:
        raise SystemExit(
            f"OpenSearch does not answer at {opensearch_url} ({error}): make opensearch, or OPENSEARCH_URL"
        ) from None
    index_name = f"rag-cost-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="rag-cost-") as work:
        template = Path(work) / "template.json"
        template.write_text(json.dumps(eval_template(source, index_name)))
        recording = Path(work) / "moto_recording.jsonl"
        process = OfflineStackProcess(
            Path(work) / "state", template=template, env={"MOTO_RECORDER_FILEPATH": str(recording)}
        )
        print(f"starting a local stack (index {index_name}) ...", flush=True)
        outputs = process.start(timeout=300)
        store = vector_store_for(opensearch_url, index_name, 384)
        try:
            client = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"cost-{uuid.uuid4().hex[:8]}")
            client.token()
            log_offset = process.log_path.stat().st_size
            _recorder(outputs["MotoEndpoint"], "reset-recording")
            _recorder(outputs["MotoEndpoint"], "start-recording")
            load_before = os.getloadavg()
            started = time.monotonic()
            files = {client.upload(pdf): pdf for pdf in pdfs}
            print(f"uploaded {len(files)} documents; waiting for READY ...", flush=True)
            clients = {name: probe_client(name, outputs) for name in ("dynamodb", "s3", "stepfunctions")}
            items = _wait_until_done(clients["dynamodb"], outputs["DocumentsTableName"], list(files), timeout)
            wall_seconds = time.monotonic() - started
            # Let the last invocations' END lines reach the log before it is read.
            time.sleep(2.0)
            _recorder(outputs["MotoEndpoint"], "stop-recording")
            with process.log_path.open(errors="replace") as log:
                log.seek(log_offset)
                log_text = log.read()
            recorded = recording.read_text(errors="replace") if recording.exists() else ""
            documents = [_document_measurement(outputs, items[d], files[d], clients) for d in files]
            return {
                "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "wall_seconds": round(wall_seconds, 1),
                "load_average_before": load_before,
                "documents": documents,
                "requests": count_requests(recorded),
                "recording_unread_bytes": recorded_entries(recorded)[1],
                "invocation_ms": invocation_durations(log_text),
                "embedding_cache_entries": embedding_cache_entries(recorded, 384),
                "log_bytes": log_bytes(log_text),
                "load_average_after": os.getloadavg(),
                "embedder": "local all-MiniLM-L6-v2 (384 dimensions): the offline stand-in for Titan v2",
            }
        finally:
            process.stop()
            store.drop_index()
