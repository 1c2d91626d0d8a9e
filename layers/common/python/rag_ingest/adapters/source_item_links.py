"""The sources table as the reconciler reads it (``rag_ingest.core.ports.SourceItemLinks``): the
items of idle sources that point at a document, and forgetting one. A class of its own, so the
reconciler is granted exactly Query and DeleteItem (rag_ingest.adapters.sources_table keeps the keys).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from boto3.dynamodb.conditions import Key

from rag_ingest.adapters.aws import resource, translated
from rag_ingest.adapters.sources_table import RUNNING, item_sk
from rag_ingest.core.operations import SourceItemLink
from rag_ingest.core.tracing import traced
from rag_ingest.sources.model import ItemState


@traced
class SourceItemLinksTable:
    def __init__(self, table_name: str, table: Any | None = None) -> None:
        self._table = table if table is not None else resource("dynamodb").Table(table_name)

    def links(self, tenant_ids: Iterable[str]) -> Iterator[SourceItemLink]:
        syncing = {str(item["sk"]) for item in self._partition(RUNNING)}
        for tenant_id in sorted(set(tenant_ids)):
            for source in self._partition(f"tenant#{tenant_id}"):
                source_id = str(source["sk"])
                if f"{tenant_id}#{source_id}" in syncing:
                    continue  # its items are being written: not drift, at worst a moment early
                for item in self._partition(f"items#{source_id}"):
                    state = ItemState.model_validate_json(item["body"])
                    if state.has_document and state.document_id is not None:
                        yield SourceItemLink(tenant_id, source_id, state.key, state.document_id)

    def unlink(self, link: SourceItemLink) -> None:
        with translated("forget source item"):
            self._table.delete_item(Key={"pk": f"items#{link.source_id}", "sk": item_sk(link.key)})

    def _partition(self, pk: str) -> Iterator[dict[str, Any]]:
        arguments: dict[str, Any] = {"KeyConditionExpression": Key("pk").eq(pk), "ConsistentRead": True}
        while True:
            with translated("read source items"):
                page = self._table.query(**arguments)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]
