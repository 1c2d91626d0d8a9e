"""Live status: the message a subscriber receives when a document's record changes.

One shape for both transports (the WebSocket API in AWS, Server-Sent Events locally):
``{"type": "document.updated", "document": <the JSON of GET /documents/{id}>}``. Both are fed
by the documents table's changes (its DynamoDB stream), so every transition, stage and progress
step is pushed, not only the terminal ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rag_ingest.core.record import DocumentRecord
from rag_ingest.documents.schemas import DocumentView

DOCUMENT_UPDATED = "document.updated"


@dataclass(frozen=True)
class LiveUpdate:
    tenant_id: str
    message: dict[str, Any]
    #: The record the message shows: who may read it decides who receives it (rag_ingest.core.access).
    record: DocumentRecord


def update_for(item: Mapping[str, Any]) -> LiveUpdate:
    """The update for a documents-table item (already deserialized from DynamoDB's wire format)."""
    record = DocumentRecord.model_validate(dict(item))
    view = DocumentView.of(record)
    return LiveUpdate(
        tenant_id=record.tenant_id,
        message={"type": DOCUMENT_UPDATED, "document": view.model_dump(mode="json")},
        record=record,
    )
