"""Intake: an S3 ObjectCreated record becomes a QUEUED document and one named workflow execution.

A ``<name>.metadata.json`` next to a document (an S3 sidecar: rag_ingest.core.metadata) is never a
document itself; it gives the document its metadata whichever arrives first. The document's event
reads its sidecar after marking the version QUEUED and before starting the workflow (a bad sidecar
fails the version at once, ``INVALID_REQUEST``); a sidecar's own event replaces an existing
document's metadata as ``PATCH`` does, does nothing for one not there yet, and is only reported
when bad. The details: docs/api.md, "S3 sidecars".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes.s3_event import S3Event, S3EventRecord
from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.core.errors import ErrorCode, IndexArtifactsMissingError, StaleWriteError, TransientError
from rag_ingest.core.ids import document_id_for_object, execution_name
from rag_ingest.core.job import DocumentJob, ObjectRef
from rag_ingest.core.limits import UsageCounter
from rag_ingest.core.logs import logger, run_keys
from rag_ingest.core.metadata import MAX_SIDECAR_BYTES, SIDECAR_SUFFIX, MetadataError, metadata_from_sidecar
from rag_ingest.core.ports import ChunkFieldsRefresher, ExecutionStarter, IntakeDocuments, SidecarObjects
from rag_ingest.core.record import ETAG_VERSION_PREFIX, DocumentRecord, DocumentStatus, QueueOutcome
from rag_ingest.core.s3_keys import (
    RAW_PREFIX,
    KeyOutsideUploadsError,
    NoTenantFolderError,
    parse_upload_key,
    sidecar_target,
)

#: A sidecar's metadata write that lost to another writer (the workflow, a PATCH) reads again this often.
MAX_SIDECAR_ATTEMPTS = 3


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
    def __init__(
        self,
        status: IntakeDocuments,
        workflow: ExecutionStarter,
        *,
        sidecars: SidecarObjects | None = None,
        refresher: ChunkFieldsRefresher | None = None,
        usage: UsageCounter | None = None,
    ) -> None:
        self._status = status
        self._usage = usage
        self._workflow = workflow
        self._sidecars = sidecars
        self._refresher = refresher

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
        target = sidecar_target(uploaded.key, SIDECAR_SUFFIX)
        if target is not None and self._sidecars is not None:
            return self._sidecar_arrived(uploaded, target)
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
        if queued.record is not None and self._usage is not None:
            self._count_upload(queued.record)
        if queued.record is not None and self._sidecars is not None:
            refused = self._apply_sidecar_before_workflow(queued.record, uploaded)
            if refused is not None:
                return refused
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

    # -- S3 sidecars ---------------------------------------------------------------------------
    def _count_upload(self, record: DocumentRecord) -> None:
        """The version's bytes toward the tenant's stored bytes, once (only the QUEUED write gets
        here). A counter that cannot be written never holds the upload back: it is logged."""
        assert self._usage is not None
        try:
            self._usage.upload_arrived(record)
        except Exception:
            logger.warning("stored bytes not counted", exc_info=True, extra={"size_bytes": record.size_bytes})

    def _read_sidecar(self, bucket: str, key: str) -> dict[str, Any] | None:
        """The sidecar's metadata, None when there is no sidecar; MetadataError when it is bad."""
        assert self._sidecars is not None
        raw = self._sidecars.read_current(bucket, key, MAX_SIDECAR_BYTES)
        return None if raw is None else metadata_from_sidecar(raw)

    def _apply_sidecar_before_workflow(self, record: DocumentRecord, uploaded: UploadedObject) -> IngestResult | None:
        """The document's own event: its sidecar's metadata onto the record before the workflow
        starts (Index reads it there); a bad sidecar fails this version (None: go on)."""
        sidecar_key = uploaded.key + SIDECAR_SUFFIX
        try:
            metadata = self._read_sidecar(uploaded.bucket, sidecar_key)
        except MetadataError as exc:
            detail = f"sidecar {sidecar_key}: {exc}"
            self._status.mark_failed(record.document_id, uploaded.version, ErrorCode.INVALID_REQUEST, detail)
            logger.warning("bad sidecar", extra={"error_code": ErrorCode.INVALID_REQUEST.value, "reason": detail})
            return IngestResult(
                document_id=record.document_id, outcome="FAILED", error_code=ErrorCode.INVALID_REQUEST, reason=detail
            )
        if metadata is not None and metadata != record.metadata:
            self._status.update_fields(record, {"metadata": metadata})
            logger.info("sidecar metadata applied", extra={"keys": sorted(metadata)})
        return None

    def _sidecar_arrived(self, uploaded: UploadedObject, target: str) -> IngestResult:
        """A sidecar's own event: never a document. Its metadata replaces the document's as PATCH does."""
        document_id = address_of(target, uploaded.bucket).document_id
        tenant_id = address_of(uploaded.key, uploaded.bucket).tenant_id
        try:
            metadata = self._read_sidecar(uploaded.bucket, uploaded.key)
        except MetadataError as exc:
            detail = f"sidecar {uploaded.key}: {exc}"
            logger.warning("bad sidecar", extra={"error_code": ErrorCode.INVALID_REQUEST.value, "reason": detail})
            return IngestResult(
                document_id=document_id, outcome="REJECTED", error_code=ErrorCode.INVALID_REQUEST, reason=detail
            )
        if metadata is None:  # deleted again since: nothing to apply
            return IngestResult(document_id=document_id, outcome="SIDECAR_GONE")
        for _ in range(MAX_SIDECAR_ATTEMPTS):
            record = self._status.get(document_id)
            if (
                record is None
                or record.tenant_id != tenant_id
                or record.status in (DocumentStatus.DELETING, DocumentStatus.DELETED)
            ):
                # Not there (yet): the document's own event reads the sidecar.
                return IngestResult(document_id=document_id, outcome="SIDECAR_WAITING")
            if record.metadata == metadata:
                return IngestResult(document_id=document_id, outcome="SIDECAR_UNCHANGED")
            try:
                updated = self._status.update_fields(record, {"metadata": metadata})
            except StaleWriteError:
                continue
            if updated.status is DocumentStatus.READY and self._refresher is not None:
                try:
                    self._refresher.refresh(document_id)
                except IndexArtifactsMissingError as exc:
                    logger.warning("sidecar metadata saved, passages not rewritten", extra={"reason": str(exc)})
            logger.info("sidecar metadata applied", extra={"keys": sorted(metadata), "revision": updated.revision})
            return IngestResult(document_id=document_id, outcome="SIDECAR_APPLIED")
        # Retried with the message (the idempotency record is dropped on an exception).
        raise TransientError(f"document {document_id} kept changing while applying its sidecar")
