"""Listed items handed to the sync workflow's Distributed Map: one JSON array of batches per staged
run of pages (a child workflow applies one batch), and what a batch reports back. Only items whose
bytes the stack copies server-side travel this way; their content is never in the file.
docs/decisions/sync-at-scale.md. May import core and this package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from rag_ingest.core.access import DocumentAccess
from rag_ingest.sources.connector import SourceItem
from rag_ingest.sources.model import SyncFailure, SyncStatistics

#: Failures one batch reports back (all stay in the item states; the job keeps the first few), so
#: that a file's gathered results stay small.
MAX_FAILURES_REPORTED = 2


class ItemBatch(BaseModel):
    """One child workflow's input: a batch of a staged page file."""

    tenant_id: str
    source_id: str
    sync_id: str
    items: list[dict[str, Any]] = Field(min_length=1)

    def source_items(self) -> list[SourceItem]:
        return [item_from_json(item) for item in self.items]


class BatchResult(BaseModel):
    """What a child reports: its counts and its first failures (the Map gathers these)."""

    statistics: SyncStatistics = Field(default_factory=SyncStatistics)
    failures: list[SyncFailure] = Field(default_factory=list)


def item_json(item: SourceItem) -> dict[str, Any]:
    if item.content is not None:
        raise ValueError(f"{item.uri}: an item read by its listing is applied where it was read")
    return {
        "key": item.key,
        "change_token": item.change_token,
        "uri": item.uri,
        "filename": item.filename,
        "size_bytes": item.size_bytes,
        "validators": dict(item.validators),
        "metadata": dict(item.metadata) if item.metadata is not None else None,
        "access": item.access.model_dump() if item.access is not None else None,
    }


def item_from_json(data: dict[str, Any]) -> SourceItem:
    access = data.get("access")
    return SourceItem(
        key=data["key"],
        change_token=data["change_token"],
        uri=data["uri"],
        filename=data["filename"],
        size_bytes=data.get("size_bytes"),
        validators=dict(data.get("validators") or {}),
        metadata=data.get("metadata"),
        access=DocumentAccess.model_validate(access) if access is not None else None,
    )


def batches(
    tenant_id: str, source_id: str, sync_id: str, items: Sequence[SourceItem], size: int
) -> list[dict[str, Any]]:
    """The Map's items: ``items`` in batches of at most ``size``, each a child's whole input."""
    encoded = [item_json(item) for item in items]
    ids = {"tenant_id": tenant_id, "source_id": source_id, "sync_id": sync_id}
    return [ItemBatch(**ids, items=encoded[at : at + size]).model_dump() for at in range(0, len(encoded), size)]


def gathered(results: Sequence[dict[str, Any]], keep: int) -> tuple[SyncStatistics, list[SyncFailure]]:
    """The Map's output summed: the counts, and the first ``keep`` failures."""
    statistics, failures = SyncStatistics(), []
    for raw in results:
        result = BatchResult.model_validate(raw)
        statistics = statistics.plus(result.statistics)
        failures += result.failures
    return statistics, failures[:keep]
