"""DELETE /documents/{id}: erase a tenant's document everywhere, idempotently.

DELETING first (compare-and-set on tenant and status), so the workflow's next stage of an
in-flight run is refused and intake rejects late events for the document; then the chunks,
the artifacts and every version of the upload; DELETED last. An interrupted delete leaves
DELETING, and the same request again finishes it; a DELETE of a DELETED document changes nothing.
The delete that marks the document DELETED publishes ``DocumentDeleted`` (``events``: the
webhooks' ``document.deleted``) and gives the tenant's document count and bytes back
(rag_ingest.core.limits); a repeated DELETE does neither.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from rag_ingest.core.errors import StaleWriteError
from rag_ingest.core.limits import TenantLimiter
from rag_ingest.core.logs import logger
from rag_ingest.core.ports import ChunkEraser, DeletionDocuments, EventSink, ObjectEraser
from rag_ingest.core.record import DocumentStatus
from rag_ingest.core.s3_keys import artifacts_folder
from rag_ingest.documents.errors import DocumentNotFoundError


class DeletionReport(BaseModel):
    document_id: str
    status: str
    chunks_deleted: int = 0
    artifact_versions_deleted: int = 0
    upload_versions_deleted: int = 0


class DocumentDeletion:
    def __init__(
        self,
        *,
        documents: DeletionDocuments,
        vector_store: Callable[[], ChunkEraser],
        objects: ObjectEraser,
        bucket: str,
        artifacts_prefix: str,
        events: EventSink | None = None,
        limiter: TenantLimiter | None = None,
    ) -> None:
        self._events = events
        self._limiter = limiter
        self._documents = documents
        self._vector_store = vector_store
        self._objects = objects
        self._bucket = bucket
        self._artifacts_prefix = artifacts_prefix

    def delete(self, tenant_id: str, document_id: str) -> DeletionReport:
        record = self._documents.mark_deleting(document_id, tenant_id)
        if record is None:  # missing, or another tenant's: the same answer for both
            raise DocumentNotFoundError(document_id)
        if record.status == DocumentStatus.DELETED:
            return DeletionReport(document_id=document_id, status=DocumentStatus.DELETED.value)
        report = DeletionReport(document_id=document_id, status=DocumentStatus.DELETED.value)
        # Chunks first: from here on search no longer returns the document.
        report.chunks_deleted = self._vector_store().delete_document(document_id)
        report.artifact_versions_deleted = self._objects.delete_all(
            self._bucket, artifacts_folder(document_id, self._artifacts_prefix)
        )
        if record.key:
            report.upload_versions_deleted = self._objects.delete_all(
                record.bucket or self._bucket, record.key, exact_key=record.key
            )
        try:
            self._documents.mark_deleted(document_id)
        except StaleWriteError:
            # A concurrent DELETE of the same document finished first: the outcome is the same.
            current = self._documents.get(document_id)
            if current is None or current.status != DocumentStatus.DELETED:
                raise
        else:
            # Only the delete that marked it DELETED gives its count and bytes back (once).
            if self._limiter is not None:
                self._limiter.document_deleted(record)
            if self._events is not None:
                detail = {"document_id": document_id, "tenant_id": tenant_id, "version": record.version}
                self._events.publish("DocumentDeleted", detail)
        logger.info("document deleted", extra=report.model_dump())
        return report
