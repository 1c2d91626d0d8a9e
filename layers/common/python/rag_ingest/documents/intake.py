"""Intake: an S3 ObjectCreated record becomes a QUEUED document and one named workflow execution."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes.s3_event import S3Event, S3EventRecord
from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.ids import document_id_for_object, execution_name
from rag_ingest.core.layout import RAW_PREFIX, KeyOutsideUploadsError, NoTenantFolderError, parse_upload_key
from rag_ingest.core.logs import logger, run_keys
from rag_ingest.core.models import ETAG_VERSION_PREFIX, DocumentJob, ObjectRef, QueueOutcome
from rag_ingest.core.ports import ExecutionStarter, IntakeDocuments


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
    # Sent once when a notification is configured (moto sends one too); it names no object.
    if event.get("Event") == "s3:TestEvent":
        return []
    records = event.get("Records")
    if not isinstance(records, list) or not records:
        raise PoisonMessageError("message is not an S3 event notification (no Records)")
    # Each record is read through Powertools' S3 data class, field by field: unlike the strict
    # S3Model parser it tolerates what moto leaves out (sequencer, userIdentity, ...).
    return [_parse_record(record) for record in S3Event(event).records]


def _parse_record(record: S3EventRecord) -> UploadedObject:
    try:
        if not str(record.event_name).startswith("ObjectCreated:"):
            raise PoisonMessageError(f"unexpected S3 event {record.event_name}")
        obj = record.s3.get_object
        # S3 URL-encodes keys in notifications ("+" for spaces); S3Object.key returns them as sent.
        key = unquote_plus(obj.key)
        version = obj.version_id
        if (not version or version == "null") and obj.etag:
            version = ETAG_VERSION_PREFIX + str(obj.etag).strip('"')
        if not version or version == "null":
            raise PoisonMessageError(f"S3 record for {key} has neither versionId nor eTag")
        return UploadedObject(
            bucket=record.s3.bucket.name,
            key=key,
            version=str(version),
            size_bytes=obj.size if obj.get("size") is not None else None,
            event_time=str(record.get("eventTime") or datetime.now(UTC).isoformat()),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # AttributeError: a record or its "s3" that is not a JSON object (the data class calls .get on it).
        if isinstance(exc, PoisonMessageError):
            raise
        raise PoisonMessageError(f"malformed S3 record: {exc!r}") from exc


@dataclass(frozen=True)
class DocumentAddress:
    tenant_id: str
    document_id: str


def address_of(key: str, bucket: str, raw_prefix: str = RAW_PREFIX) -> DocumentAddress:
    """``raw/{tenant}/{document_id}/{file}`` from the API; any other ``raw/{tenant}/...`` key is an
    object put without the API and gets a deterministic id from bucket + key."""
    try:
        upload = parse_upload_key(key, raw_prefix)
    except KeyOutsideUploadsError as exc:
        # The bucket notifies only for raw/: such a record was not sent by S3 (poison, for the DLQ).
        raise PoisonMessageError(str(exc)) from exc
    except NoTenantFolderError as exc:
        raise UnaddressableObjectError(str(exc)) from exc
    return DocumentAddress(upload.tenant_id, upload.document_id or document_id_for_object(bucket, key))


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
