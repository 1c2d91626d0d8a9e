"""A bucket's object events between syncs: S3 sends ``Object Created`` and ``Object Deleted`` to
EventBridge (when the bucket owner turns that on), and each S3 source over the bucket takes the one
key at once, as a sync would: the object is described again (never trusted from the event), then
applied or its document removed. A sidecar's event re-applies its document. The event's shape:
https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events. May import core and this package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote_plus

from pydantic import BaseModel

from rag_ingest.core.logs import logger
from rag_ingest.core.metadata import SIDECAR_SUFFIX
from rag_ingest.core.s3_keys import sidecar_target
from rag_ingest.sources.connector import ItemFailure, KnownItem
from rag_ingest.sources.model import ItemState, Source
from rag_ingest.sources.ports import ItemStates, SourceStore
from rag_ingest.sources.s3 import S3Connector
from rag_ingest.sources.sync import SyncEngine

#: The sync id an item state takes from an event while no sync runs.
EVENT_SYNC = "event"


class ObjectEvent(BaseModel):
    bucket: str
    key: str
    detail_type: str


def parse_object_event(event: Mapping[str, Any]) -> ObjectEvent | None:
    """An S3 EventBridge event's bucket and key; None for anything else."""
    detail = event.get("detail")
    if event.get("source") != "aws.s3" or not isinstance(detail, dict):
        return None
    try:
        return ObjectEvent(
            bucket=str(detail["bucket"]["name"]),
            key=str(detail["object"]["key"]),
            detail_type=str(event["detail-type"]),
        )
    except (KeyError, TypeError):
        return None


class ObjectEventApplier:
    def __init__(
        self,
        *,
        sources: SourceStore,
        items: ItemStates,
        engine: SyncEngine,
        connectors: Callable[[Source], S3Connector],
    ) -> None:
        self._sources = sources
        self._items = items
        self._engine = engine
        self._connectors = connectors

    def apply(self, event: ObjectEvent) -> dict[str, str]:
        """``source id -> what happened`` for every S3 source over the event's bucket."""
        outcomes: dict[str, str] = {}
        for tenant_id, source_id in self._sources.watchers(event.bucket):
            source = self._sources.get(tenant_id, source_id)
            if source is None or source.kind != "s3":
                continue
            outcomes[source_id] = self._apply(source, event)
        return outcomes

    def _apply(self, source: Source, event: ObjectEvent) -> str:
        connector = self._connectors(source)
        outcome = "ignored"
        # Keys may arrive URL-encoded; the one that names a live object or a state is the one.
        for key in dict.fromkeys((event.key, unquote_plus(event.key))):
            target = sidecar_target(key, SIDECAR_SUFFIX) or key
            state = self._items.get_many(source.source_id, [target]).get(target)
            item = connector.describe(target, _known(state))
            # A running sync counts what an event settled as its own, so it neither redoes nor deletes it.
            sync_id = source.running_sync or EVENT_SYNC
            if isinstance(item, ItemFailure):
                logger.warning("object event: item failed", extra={"item": target, "error_code": item.code})
                return "failed"
            if item is not None:
                result, _ = self._engine.apply_item(source, sync_id, item, state, connector)
                return result
            if state is not None and state.has_document:
                self._engine.remove(source, state, sync_id)
                outcome = "deleted"
        return outcome


def _known(state: ItemState | None) -> Any:
    def known(key: str) -> KnownItem | None:
        if state is None or not state.has_document or state.key != key:
            return None
        return KnownItem(change_token=state.change_token, validators=state.validators)

    return known
