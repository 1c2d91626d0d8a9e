"""Intake: an S3 ObjectCreated record becomes a QUEUED document and one named workflow execution."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.auth import InvalidTenantError, validate_tenant_id
from rag_ingest.errors import ErrorCode
from rag_ingest.ids import document_id_for_object, execution_name, is_api_document_id
from rag_ingest.logs import logger, run_keys
from rag_ingest.models import ETAG_VERSION_PREFIX, DocumentJob, ObjectRef, QueueOutcome
from rag_ingest.ports import ExecutionStarter, IntakeDocuments


class PoisonMessageError(ValueError):
    """The queue message is not an S3 event we can act on; it must reach the DLQ, not block the batch."""


class UnaddressableObjectError(PoisonMessageError):
    """A well-formed S3 event for an object whose key names no valid tenant (written outside the
    API). Retrying cannot help and it belongs to no tenant, so intake rejects it with
    ``INVALID_OBJECT_KEY`` (logged) instead of dead-lettering it: bad input must never page."""


class UploadedObject(BaseModel):
    """One S3 ObjectCreated record, with the key already URL-decoded."""

    model_config = ConfigDict(frozen=True)

    bucket: str = Field(min_length=1)
    key: str = Field(min_length=1)
    version: str = Field(min_length=1)
    size_bytes: int | None = None
    event_time: str


class IngestResult(BaseModel):
    document_id: str | None  # None: the object belongs to no document (INVALID_OBJECT_KEY)
    outcome: str
    execution_arn: str | None = None
    error_code: ErrorCode | None = None
    reason: str = ""


def parse_queue_message(body: str) -> list[UploadedObject]:
    """Read an SQS body holding an S3 event notification. A TestEvent yields nothing."""
    try:
        event = json.loads(body)
    except json.JSONDecodeError as exc:
        raise PoisonMessageError(f"message body is not JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise PoisonMessageError("message body is not a JSON object")
    if event.get("Event") == "s3:TestEvent":
        return []
    records = event.get("Records")
    if not isinstance(records, list) or not records:
        raise PoisonMessageError("message is not an S3 event notification (no Records)")
    return [_parse_record(record) for record in records]


def _parse_record(record: Any) -> UploadedObject:
    try:
        if not str(record["eventName"]).startswith("ObjectCreated:"):
            raise PoisonMessageError(f"unexpected S3 event {record['eventName']}")
        s3 = record["s3"]
        obj = s3["object"]
        # S3 URL-encodes keys in notifications ("+" for spaces).
        key = unquote_plus(obj["key"])
        version = obj.get("versionId")
        if (not version or version == "null") and obj.get("eTag"):
            version = ETAG_VERSION_PREFIX + str(obj["eTag"]).strip('"')
        if not version or version == "null":
            raise PoisonMessageError(f"S3 record for {key} has neither versionId nor eTag")
        return UploadedObject(
            bucket=s3["bucket"]["name"],
            key=key,
            version=str(version),
            size_bytes=int(obj["size"]) if obj.get("size") is not None else None,
            event_time=str(record.get("eventTime") or datetime.now(UTC).isoformat()),
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, PoisonMessageError):
            raise
        raise PoisonMessageError(f"malformed S3 record: {exc!r}") from exc


@dataclass(frozen=True)
class DocumentAddress:
    tenant_id: str
    document_id: str


def address_of(key: str, bucket: str, raw_prefix: str = "raw/") -> DocumentAddress:
    """``raw/{tenant}/{document_id}/{file}`` from the API; any other ``raw/{tenant}/...`` key is an
    object put without the API and gets a deterministic id from bucket + key."""
    if not key.startswith(raw_prefix):
        # The bucket notifies only for raw/: such a record was not sent by S3 (poison, for the DLQ).
        raise PoisonMessageError(f"key {key!r} is outside {raw_prefix!r}")
    parts = key[len(raw_prefix) :].split("/")
    if len(parts) < 2 or not parts[0] or not parts[-1]:
        raise UnaddressableObjectError(
            f"key {key!r} does not name a tenant folder: expected {raw_prefix}<tenant>/..."
        )
    try:
        tenant_id = validate_tenant_id(parts[0])
    except InvalidTenantError as exc:
        raise UnaddressableObjectError(f"key {key!r}: the tenant segment is not a valid tenant id: {exc}") from exc
    if len(parts) == 3 and is_api_document_id(parts[1]):
        return DocumentAddress(tenant_id, parts[1])
    return DocumentAddress(tenant_id, document_id_for_object(bucket, key))


class IntakeService:
    def __init__(self, status: IntakeDocuments, workflow: ExecutionStarter) -> None:
        self._status = status
        self._workflow = workflow

    def ingest(self, uploaded: UploadedObject) -> IngestResult:
        """One S3 record; every line logged for it carries its document_id and tenant_id (only)."""
        try:
            address = address_of(uploaded.key, uploaded.bucket)
        except UnaddressableObjectError:
            with run_keys(s3_key=uploaded.key):
                return self._ingest(uploaded)
        with run_keys(document_id=address.document_id, tenant_id=address.tenant_id, s3_key=uploaded.key):
            return self._ingest(uploaded)

    def _ingest(self, uploaded: UploadedObject) -> IngestResult:
        try:
            address = address_of(uploaded.key, uploaded.bucket)
        except UnaddressableObjectError as exc:
            logger.warning(
                "object rejected",
                extra={"error_code": ErrorCode.INVALID_OBJECT_KEY.value, "bucket": uploaded.bucket, "reason": str(exc)},
            )
            return IngestResult(
                document_id=None, outcome="REJECTED", error_code=ErrorCode.INVALID_OBJECT_KEY, reason=str(exc)
            )
        ref = ObjectRef(bucket=uploaded.bucket, key=uploaded.key, version=uploaded.version)
        queued = self._status.mark_queued(
            document_id=address.document_id,
            tenant_id=address.tenant_id,
            ref=ref,
            event_time=uploaded.event_time,
            size_bytes=uploaded.size_bytes,
        )
        if queued.outcome in (QueueOutcome.DUPLICATE, QueueOutcome.REJECTED):
            logger.warning(
                "upload not queued",
                extra={"document_id": address.document_id, "outcome": queued.outcome.value, "reason": queued.reason},
            )
            return IngestResult(document_id=address.document_id, outcome=queued.outcome.value, reason=queued.reason)
        job = DocumentJob(
            document_id=address.document_id,
            tenant_id=address.tenant_id,
            bucket=ref.bucket,
            key=ref.key,
            version=ref.version,
            size_bytes=uploaded.size_bytes,
        )
        # Named after document + version: a redelivered message starts nothing new.
        arn, started = self._workflow.start(
            execution_name(address.document_id, ref.version), job.model_dump(exclude_none=True)
        )
        self._status.set_execution(address.document_id, ref.version, arn)
        logger.info(
            "document queued",
            extra={"document_id": address.document_id, "execution_arn": arn, "started_now": started},
        )
        return IngestResult(document_id=address.document_id, outcome=queued.outcome.value, execution_arn=arn)
