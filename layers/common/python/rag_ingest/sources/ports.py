"""What the sources need from the world outside them, as Protocols: the sources table (sources,
sync jobs, item states), the sync's cursor checkpoints and staged pages, and the documents a sync writes
and removes.

``rag_ingest.adapters`` implements them over DynamoDB and S3; tests/support/sources.py in memory.
May import ``rag_ingest.core`` and this package's model only.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from rag_ingest.core.access import DocumentAccess
from rag_ingest.sources.model import ItemState, Source, StagedPage, SyncJob


class SourceStore(Protocol):
    def create(self, source: Source) -> None: ...

    def get(self, tenant_id: str, source_id: str) -> Source | None: ...

    def list(self, tenant_id: str) -> list[Source]:
        """The tenant's sources, oldest first."""
        ...

    def replace(self, source: Source, *, expected_updated_at: str) -> None:
        """Store ``source`` only while the stored one is as read (else ``StaleWriteError``)."""
        ...

    def delete(self, tenant_id: str, source_id: str) -> None: ...

    def claim_sync(self, tenant_id: str, source_id: str, sync_id: str) -> bool:
        """Mark ``sync_id`` the source's running sync; False when another one runs."""
        ...

    def release_sync(self, tenant_id: str, source_id: str, sync_id: str) -> None:
        """Clear the running sync (only if it is ``sync_id``) and record it as the last one."""
        ...

    def running_syncs(self) -> builtins.list[tuple[str, str, str]]:
        """``(tenant_id, source_id, sync_id)`` of every claimed sync, across tenants."""
        ...

    def watch(self, bucket: str, tenant_id: str, source_id: str) -> None:
        """The bucket's object events concern this source (an S3 source over it)."""
        ...

    def unwatch(self, bucket: str, tenant_id: str, source_id: str) -> None: ...

    def watchers(self, bucket: str) -> builtins.list[tuple[str, str]]:
        """``(tenant_id, source_id)`` of every source over ``bucket``."""
        ...


class SyncJobs(Protocol):
    def put(self, job: SyncJob) -> None: ...

    def get(self, source_id: str, sync_id: str) -> SyncJob | None: ...

    def list(self, source_id: str, limit: int) -> list[SyncJob]:
        """The source's latest syncs, newest first."""
        ...


class SyncCursors(Protocol):
    """A sync's listing checkpoint (the connector's cursor), kept outside the job: it can be large."""

    def save(self, source_id: str, sync_id: str, cursor: str | None) -> None: ...

    def load(self, source_id: str, sync_id: str) -> str | None: ...


class StagedPages(Protocol):
    """Files of listed items the sync workflow's Distributed Map reads (rag_ingest.sources.fan_out)."""

    def write(self, source_id: str, sync_id: str, number: int, batches: list[dict[str, Any]]) -> StagedPage: ...


class ItemStates(Protocol):
    def get_many(self, source_id: str, keys: Iterable[str]) -> dict[str, ItemState]: ...

    def put(self, state: ItemState) -> None: ...

    def delete(self, source_id: str, key: str) -> None: ...

    def scan(self, source_id: str) -> Iterator[ItemState]: ...


class SourceDocuments(Protocol):
    """The documents a source's items become: their records and their bytes in the stack's bucket."""

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
        """Create the record (AWAITING_UPLOAD) or update an existing one's metadata, access and
        ``origin`` (source_id, source_uri, change_token)."""
        ...

    def stored_token(self, key: str) -> str | None:
        """The change token the current object at ``key`` was written with (None: no object)."""
        ...

    def put_bytes(self, key: str, body: bytes, change_token: str) -> None: ...

    def bucket(self) -> str: ...


class SyncStarter(Protocol):
    """Starts the sync workflow: a named execution (a second start of one name is a no-op)."""

    def start(self, name: str, payload: dict[str, Any]) -> tuple[str, bool]: ...


class SyncSchedules(Protocol):
    """A source's schedule: the managed scheduler starts the sync workflow (phase ``start``) on it."""

    def set(self, tenant_id: str, source_id: str, expression: str) -> None: ...

    def clear(self, tenant_id: str, source_id: str) -> None: ...


class DocumentRemover(Protocol):
    def delete(self, tenant_id: str, document_id: str) -> object: ...
