"""The documents a source's items become (``rag_ingest.sources.ports.SourceDocuments``): their records
in the documents table and their bytes under the stack bucket's uploads prefix, each object written
with the item's change token as user metadata, so a restarted sync can tell it already wrote it.
Also the sync cursors (``SyncCursors``) and the files of staged items (``StagedPages``) under the
bucket's ``sources/`` prefix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rag_ingest.adapters.aws import client, translated
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.core.access import DocumentAccess
from rag_ingest.core.errors import StaleWriteError, TransientError
from rag_ingest.core.s3_keys import SOURCES_PREFIX
from rag_ingest.core.tracing import traced
from rag_ingest.sources.model import StagedPage
from rag_ingest.sources.sync import CHANGE_TOKEN_METADATA

_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})
MAX_RECORD_ATTEMPTS = 3


@traced
class SourceDocumentStore:
    def __init__(self, documents: DocumentsTable, bucket: str, s3_client: Any | None = None) -> None:
        self._documents = documents
        self._bucket = bucket
        self._s3 = s3_client if s3_client is not None else client("s3")

    def bucket(self) -> str:
        return self._bucket

    def upsert_record(
        self,
        *,
        tenant_id: str,
        document_id: str,
        filename: str,
        key: str,
        metadata: Mapping[str, Any],
        access: DocumentAccess,
        origin: Mapping[str, str],
    ) -> None:
        for _ in range(MAX_RECORD_ATTEMPTS):
            record = self._documents.get(document_id)
            if record is None:
                self._documents.create_awaiting_upload(
                    document_id=document_id,
                    tenant_id=tenant_id,
                    filename=filename,
                    bucket=self._bucket,
                    key=key,
                    metadata=metadata,
                    access=access,
                    origin=origin,
                )
                return
            fields = {"metadata": dict(metadata), "access": access.model_dump(), **origin}
            try:
                self._documents.update_fields(record, fields)
                return
            except StaleWriteError:
                continue  # the pipeline moved the record on: read it again
        raise TransientError(f"document {document_id} kept changing while its source item was written")

    def stored_token(self, key: str) -> str | None:
        with translated(f"head {key}", expect=_MISSING) as refusal:
            response = self._s3.head_object(Bucket=self._bucket, Key=key)
        if refusal.refused:
            return None
        token = response.get("Metadata", {}).get(CHANGE_TOKEN_METADATA)
        return str(token) if token else None

    def put_bytes(self, key: str, body: bytes, change_token: str) -> None:
        with translated(f"put {key}"):
            self._s3.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=body,
                Metadata={CHANGE_TOKEN_METADATA: change_token},
                ServerSideEncryption="AES256",
            )


@traced
class SyncCursorObjects:
    """``rag_ingest.sources.ports.SyncCursors`` on the stack's bucket."""

    def __init__(self, bucket: str, s3_client: Any | None = None) -> None:
        self._bucket = bucket
        self._s3 = s3_client if s3_client is not None else client("s3")

    def _key(self, source_id: str, sync_id: str) -> str:
        return f"{SOURCES_PREFIX}{source_id}/{sync_id}/cursor.txt"

    def save(self, source_id: str, sync_id: str, cursor: str | None) -> None:
        with translated("save sync cursor"):
            self._s3.put_object(
                Bucket=self._bucket,
                Key=self._key(source_id, sync_id),
                Body=(cursor or "").encode(),
                ServerSideEncryption="AES256",
            )

    def load(self, source_id: str, sync_id: str) -> str | None:
        with translated("read sync cursor", expect=_MISSING) as refusal:
            response = self._s3.get_object(Bucket=self._bucket, Key=self._key(source_id, sync_id))
        if refusal.refused:
            return None
        return response["Body"].read().decode() or None


@traced
class StagedPageObjects:
    """``rag_ingest.sources.ports.StagedPages`` on the stack's bucket, where the sync workflow's
    Distributed Map reads them (``ItemReader`` ``s3:getObject``, ``InputType`` ``JSON``)."""

    def __init__(self, bucket: str, s3_client: Any | None = None) -> None:
        self._bucket = bucket
        self._s3 = s3_client if s3_client is not None else client("s3")

    def write(self, source_id: str, sync_id: str, number: int, batches: list[dict[str, Any]]) -> StagedPage:
        key = f"{SOURCES_PREFIX}{source_id}/{sync_id}/staged/{number:06d}.json"
        with translated("stage listed items"):
            self._s3.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=json.dumps(batches, separators=(",", ":")).encode(),
                ContentType="application/json",
                ServerSideEncryption="AES256",
            )
        return StagedPage(bucket=self._bucket, key=key)
