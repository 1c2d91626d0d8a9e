"""The sources table (DynamoDB, key ``pk`` + ``sk``): a tenant's sources, each source's sync jobs,
and each source's item states, told apart by their partition's prefix.

- a source: ``pk = tenant#{tenant}``, ``sk = {source id}``; ``running_sync`` is its own attribute,
  set and cleared by conditional writes (one sync at a time);
- a sync job: ``pk = syncs#{source id}``, ``sk = {sync id}`` (ULID-based: newest last);
- an item state: ``pk = items#{source id}``, ``sk`` = the item key's SHA-256 (keys run to 2 KB);
- a bucket's watchers: ``pk = bucket#{name}``, ``sk = {tenant}#{source id}`` (its object events);
- the running syncs: ``pk = running``, ``sk = {tenant}#{source id}``, the one-sync-per-source lock.
Bodies are stored as JSON text, so nested configs keep their types (no Decimal round trip).
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from boto3.dynamodb.conditions import Key

from rag_ingest.adapters.aws import CONDITION_FAILED, resource, translated
from rag_ingest.core.errors import StaleWriteError
from rag_ingest.core.tracing import traced
from rag_ingest.sources.model import ItemState, Source, SyncJob

BATCH_GET_LIMIT = 100  # DynamoDB's BatchGetItem takes at most 100 keys
RUNNING = "running"


def item_sk(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@traced
class SourcesTable:
    def __init__(self, table_name: str, table: Any | None = None) -> None:
        self._resource: Any = None
        if table is None:
            self._resource = resource("dynamodb")
            table = self._resource.Table(table_name)
        self._table = table
        self._name = table_name

    # -- sources -------------------------------------------------------------------------------
    def create(self, source: Source) -> None:
        with translated("create source"):
            self._table.put_item(Item=_source_item(source), ConditionExpression="attribute_not_exists(pk)")

    def get(self, tenant_id: str, source_id: str) -> Source | None:
        with translated("read source"):
            item = self._table.get_item(Key={"pk": f"tenant#{tenant_id}", "sk": source_id}, ConsistentRead=True)
        return _source(item["Item"]) if "Item" in item else None

    def list(self, tenant_id: str) -> list[Source]:
        return [_source(item) for item in self._query(f"tenant#{tenant_id}", forward=True)]

    def replace(self, source: Source, *, expected_updated_at: str) -> None:
        with translated("update source", expect={CONDITION_FAILED}) as refusal:
            # Body and time only: the running sync is the claim's, never a PATCH's to overwrite.
            item = _source_item(source)
            self._table.update_item(
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET body = :body, updated_at = :now",
                ConditionExpression="updated_at = :expected",
                ExpressionAttributeValues={
                    ":expected": expected_updated_at,
                    ":body": item["body"],
                    ":now": item["updated_at"],
                },
            )
        if refusal.refused:
            raise StaleWriteError(f"source {source.source_id} changed since it was read") from refusal.error

    def delete(self, tenant_id: str, source_id: str) -> None:
        with translated("delete source"):
            self._table.delete_item(Key={"pk": f"tenant#{tenant_id}", "sk": source_id})

    def claim_sync(self, tenant_id: str, source_id: str, sync_id: str) -> bool:
        """The lock is a ``running`` item, one per source (what the lost-sync check lists), then the
        source's own ``running_sync`` (what its view shows); released in the reverse order."""
        running = {"pk": RUNNING, "sk": f"{tenant_id}#{source_id}"}
        with translated("claim sync", expect={CONDITION_FAILED}) as refusal:
            self._table.put_item(Item={**running, "sync_id": sync_id}, ConditionExpression="attribute_not_exists(pk)")
        if refusal.refused:
            return False
        with translated("mark source syncing", expect={CONDITION_FAILED}) as missing:
            self._table.update_item(
                Key={"pk": f"tenant#{tenant_id}", "sk": source_id},
                UpdateExpression="SET running_sync = :sync",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":sync": sync_id},
            )
        if missing.refused:  # the source is gone
            self._release_running(tenant_id, source_id, sync_id)
            return False
        return True

    def release_sync(self, tenant_id: str, source_id: str, sync_id: str) -> None:
        with translated("release sync", expect={CONDITION_FAILED}):
            self._table.update_item(
                Key={"pk": f"tenant#{tenant_id}", "sk": source_id},
                UpdateExpression="REMOVE running_sync SET last_sync = :sync",
                ConditionExpression="running_sync = :sync",
                ExpressionAttributeValues={":sync": sync_id},
            )
        self._release_running(tenant_id, source_id, sync_id)

    def _release_running(self, tenant_id: str, source_id: str, sync_id: str) -> None:
        with translated("release sync lock", expect={CONDITION_FAILED}):
            self._table.delete_item(
                Key={"pk": RUNNING, "sk": f"{tenant_id}#{source_id}"},
                ConditionExpression="sync_id = :sync",
                ExpressionAttributeValues={":sync": sync_id},
            )

    def running_syncs(self) -> builtins.list[tuple[str, str, str]]:
        found = []
        for item in self._query(RUNNING, forward=True):
            tenant_id, source_id = str(item["sk"]).split("#", 1)
            found.append((tenant_id, source_id, str(item["sync_id"])))
        return found

    def watch(self, bucket: str, tenant_id: str, source_id: str) -> None:
        with translated("watch bucket"):
            self._table.put_item(Item={"pk": f"bucket#{bucket}", "sk": f"{tenant_id}#{source_id}"})

    def unwatch(self, bucket: str, tenant_id: str, source_id: str) -> None:
        with translated("unwatch bucket"):
            self._table.delete_item(Key={"pk": f"bucket#{bucket}", "sk": f"{tenant_id}#{source_id}"})

    def watchers(self, bucket: str) -> builtins.list[tuple[str, str]]:
        pairs = (str(item["sk"]).split("#", 1) for item in self._query(f"bucket#{bucket}", forward=True))
        return [(tenant, source) for tenant, source in pairs]

    # -- sync jobs -------------------------------------------------------------------------------
    def put(self, job: SyncJob) -> None:
        body = job.model_dump(mode="json") | {
            "tenant_id": job.tenant_id,
            "failed_unknown": job.failed_unknown,
            "staged": job.staged.model_dump() if job.staged is not None else None,
            "staged_files": job.staged_files,
        }
        with translated("save sync"):
            self._table.put_item(Item={"pk": f"syncs#{job.source_id}", "sk": job.id, "body": json.dumps(body)})

    def get_job(self, source_id: str, sync_id: str) -> SyncJob | None:
        if not sync_id:
            return None
        with translated("read sync"):
            item = self._table.get_item(Key={"pk": f"syncs#{source_id}", "sk": sync_id}, ConsistentRead=True)
        return SyncJob.model_validate_json(item["Item"]["body"]) if "Item" in item else None

    def list_jobs(self, source_id: str, limit: int) -> builtins.list[SyncJob]:
        items = self._query(f"syncs#{source_id}", forward=False, limit=limit)
        return [SyncJob.model_validate_json(item["body"]) for item in items]

    # -- item states -----------------------------------------------------------------------------
    def get_many(self, source_id: str, keys: Iterable[str]) -> dict[str, ItemState]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, ItemState] = {}
        for start in range(0, len(wanted), BATCH_GET_LIMIT):
            request: dict[str, Any] = {
                self._name: {
                    "Keys": [
                        {"pk": f"items#{source_id}", "sk": item_sk(key)}
                        for key in wanted[start : start + BATCH_GET_LIMIT]
                    ],
                    "ConsistentRead": True,
                }
            }
            tables = self._tables()
            while request:
                with translated("read item states"):
                    response = tables.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._name, []):
                    state = ItemState.model_validate_json(item["body"])
                    found[state.key] = state
                request = response.get("UnprocessedKeys") or {}
        return found

    def put_state(self, state: ItemState) -> None:
        item = {"pk": f"items#{state.source_id}", "sk": item_sk(state.key), "body": state.model_dump_json()}
        with translated("save item state"):
            self._table.put_item(Item=item)

    def delete_state(self, source_id: str, key: str) -> None:
        with translated("delete item state"):
            self._table.delete_item(Key={"pk": f"items#{source_id}", "sk": item_sk(key)})

    def scan_states(self, source_id: str) -> Iterator[ItemState]:
        for item in self._query(f"items#{source_id}", forward=True):
            yield ItemState.model_validate_json(item["body"])

    # -- helpers ---------------------------------------------------------------------------------
    def _query(self, pk: str, *, forward: bool, limit: int | None = None) -> Iterator[dict[str, Any]]:
        arguments: dict[str, Any] = {
            "KeyConditionExpression": Key("pk").eq(pk),
            "ConsistentRead": True,
            "ScanIndexForward": forward,
        }
        if limit is not None:
            arguments["Limit"] = limit
        yielded = 0
        while True:
            with translated("query sources table"):
                page = self._table.query(**arguments)
            for item in page.get("Items", []):
                yield item
                yielded += 1
                if limit is not None and yielded >= limit:
                    return
            if "LastEvaluatedKey" not in page:
                return
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _tables(self) -> Any:
        """The service resource: its batch_get_item (de)serializes items as the Table's calls do."""
        if self._resource is None:
            self._resource = resource("dynamodb")
        return self._resource


class SyncJobsView:
    """The table seen as ``rag_ingest.sources.ports.SyncJobs``."""

    def __init__(self, table: SourcesTable) -> None:
        self._table = table

    def put(self, job: SyncJob) -> None:
        self._table.put(job)

    def get(self, source_id: str, sync_id: str) -> SyncJob | None:
        return self._table.get_job(source_id, sync_id)

    def list(self, source_id: str, limit: int) -> list[SyncJob]:
        return self._table.list_jobs(source_id, limit)


class ItemStatesView:
    """The table seen as ``rag_ingest.sources.ports.ItemStates``."""

    def __init__(self, table: SourcesTable) -> None:
        self._table = table

    def get_many(self, source_id: str, keys: Iterable[str]) -> dict[str, ItemState]:
        return self._table.get_many(source_id, keys)

    def put(self, state: ItemState) -> None:
        self._table.put_state(state)

    def delete(self, source_id: str, key: str) -> None:
        self._table.delete_state(source_id, key)

    def scan(self, source_id: str) -> Iterator[ItemState]:
        return self._table.scan_states(source_id)


def _source_item(source: Source) -> dict[str, Any]:
    body = source.model_dump(mode="json", exclude={"running_sync", "last_sync"})
    item: dict[str, Any] = {
        "pk": f"tenant#{source.tenant_id}",
        "sk": source.source_id,
        "body": json.dumps(body),
        "updated_at": source.updated_at,
    }
    if source.running_sync:
        item["running_sync"] = source.running_sync
    if source.last_sync:
        item["last_sync"] = source.last_sync
    return item


def _source(item: dict[str, Any]) -> Source:
    return Source.model_validate(
        json.loads(item["body"]) | {"running_sync": item.get("running_sync"), "last_sync": item.get("last_sync")}
    )
