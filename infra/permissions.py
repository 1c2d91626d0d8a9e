"""What each function's code calls on the tables and the vector index: the grants, one entry per function.

The constructs grant exactly these (no ``grant_read_write_data``: no Scan, BatchWriteItem or
DeleteItem nobody calls), and ``tests/infra/test_infra_least_privilege.py`` keeps the table true
against the code: it reads every adapter method's DynamoDB calls (``self._table.get_item(...)``,
``query(IndexName=...)``), follows each function's imports to the methods it can reach, and fails
when a function calls an action it is not granted here, or is granted one it never calls.

Function names are the construct ids without ``Function`` (``Api``, ``Validate``, ``MarkFailed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

GET = "dynamodb:GetItem"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
DELETE = "dynamodb:DeleteItem"
QUERY = "dynamodb:Query"
BATCH_GET = "dynamodb:BatchGetItem"

# Index access is keyed by the GSI's name (infra/constructs/storage.py STATUS_INDEX, TENANT_INDEX,
# CONTENT_INDEX).

STAGE_FUNCTIONS = ("Validate", "Parse", "Chunk", "Embed", "Index", "Finalize", "MarkFailed")


@dataclass(frozen=True)
class TableAccess:
    """Actions on the table itself, and per global secondary index (Query only, in practice)."""

    table: frozenset[str] = frozenset()
    indexes: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))


def _access(*table: str, **indexes: frozenset[str]) -> TableAccess:
    return TableAccess(frozenset(table), MappingProxyType(dict(indexes)))


# The documents table (rag_ingest.adapters.documents_table).
DOCUMENTS_TABLE: Mapping[str, TableAccess] = MappingProxyType(
    {
        # POST /documents creates the record (PutItem, if absent); GET reads it; DELETE marks it;
        # GET /documents lists the caller's tenant's documents, newest first (never a Scan).
        "Api": _access(GET, PUT, UPDATE, by_tenant=frozenset({QUERY})),
        # QUEUED (compare-and-set) and the execution ARN; reads the record to explain a rejection.
        "Intake": _access(GET, UPDATE),
        # Replays of FAILED documents; lists them by status.
        "Redrive": _access(GET, UPDATE, by_status=frozenset({QUERY})),
        # Stuck documents by status, then re-driven or FAILED (STUCK).
        "Reaper": _access(GET, UPDATE, by_status=frozenset({QUERY})),
        # Every record, never a Scan: the status index by status (the tenant index for one tenant),
        # re-read before each finding; its FAILED marks and replays are conditional updates.
        "Reconciler": _access(GET, UPDATE, by_status=frozenset({QUERY}), by_tenant=frozenset({QUERY})),
        # Every stage records its progress in the document's status record; Parse finds the tenant's
        # earlier READY upload of the same bytes (the stages share one code asset, so one grant).
        **dict.fromkeys(STAGE_FUNCTIONS, _access(GET, UPDATE, by_content=frozenset({QUERY}))),
        # The bulk lane's batch inference Embed (embedding.batchInference): the same stage code.
        "EmbedBatch": _access(GET, UPDATE, by_content=frozenset({QUERY})),
        # A source's items become documents: the record made or updated, then deleted when the item
        # is gone (mark deleting, deleted: as DELETE /documents/{id}).
        "SourceSync": _access(GET, PUT, UPDATE),
        # The MCP server's tools read as GET /documents and GET /documents/{id} do; nothing else.
        "Mcp": _access(GET, by_tenant=frozenset({QUERY})),
        # Answers over the live channel search the index; the documents table is not read.
        "LiveAnswers": _access(),
        # The webhook functions read only the webhooks table (WEBHOOKS_TABLE).
        "WebhookFanOut": _access(),
        "WebhookDelivery": _access(),
    }
)

# The embedding cache (rag_ingest.adapters.embedding_cache_table): only Embed looks vectors up
# (BatchGetItem) and writes the ones it paid for (PutItem).
EMBEDDING_CACHE_TABLE: Mapping[str, TableAccess] = MappingProxyType(
    {
        "Embed": _access(BATCH_GET, PUT),
        # The batch inference Embed looks vectors up; it writes the job's only with batchInference.writeCache.
        "EmbedBatch": _access(BATCH_GET),
        "EmbedBatchWritingCache": _access(BATCH_GET, PUT),
    }
)

# The shared embedding-quota ledger (rag_ingest.adapters.capacity_table): Embed books it with
# a consistent GetItem and a conditional PutItem, nothing else (embedding.capacity.mode "shared").
EMBEDDING_CAPACITY_TABLE: Mapping[str, TableAccess] = MappingProxyType({"Embed": _access(GET, PUT)})

# The webhooks table (rag_ingest.adapters.webhooks_table.WebhooksTable, key tenant_id + endpoint_id).
WEBHOOKS_TABLE: Mapping[str, TableAccess] = MappingProxyType(
    {
        # POST (PutItem), GET (Query of the tenant's partition), DELETE (DeleteItem), rotate-secret
        # (UpdateItem), deliveries (GetItem of the endpoint, Query of its latest attempts).
        "Api": _access(GET, PUT, QUERY, DELETE, UPDATE),
        # A document event: the tenant's endpoints.
        "WebhookFanOut": _access(QUERY),
        # Each delivery reads its endpoint (URL, events, current secret) and records the attempt
        # (PutItem of a new item; never updates or deletes one: DynamoDB's TTL removes them).
        "WebhookDelivery": _access(GET, PUT),
    }
)

# The sources table (rag_ingest.adapters.sources_table): sources, sync jobs, item states; the API and a
# sync step each read and write all three (BatchGetItem: a listing page's item states at once).
SOURCES_TABLE: Mapping[str, TableAccess] = MappingProxyType(
    {
        "Api": _access(GET, PUT, UPDATE, DELETE, QUERY, BATCH_GET),
        "SourceSync": _access(GET, PUT, UPDATE, DELETE, QUERY, BATCH_GET),
        # Sources, running syncs and item states queried; an item whose document is gone deleted.
        "Reconciler": _access(QUERY, DELETE),
    }
)

# The tenant usage table (adapters.tenant_usage_table): the API's rate cell and document count (UpdateItem)
# and the day's pages (GetItem); intake adds a version's bytes, Parse its pages (UpdateItem ADD).
TENANT_USAGE_TABLE: Mapping[str, TableAccess] = MappingProxyType(
    {
        "Api": _access(GET, UPDATE),
        "Intake": _access(UPDATE),
        "Parse": _access(UPDATE),
    }
)

# The idempotency table: Powertools' DynamoDBPersistenceLayer (get, put-if-absent, update, delete
# of a record whose call failed).
IDEMPOTENCY_TABLE: Mapping[str, TableAccess] = MappingProxyType({"Intake": _access(GET, PUT, UPDATE, DELETE)})

# OpenSearch: HTTP action -> paths under the chunk index ("" is the index itself). Every request names
# the index in its path (/<index>/_bulk too); the domain refuses one named in a bulk body.
IndexAccess = Mapping[str, tuple[str, ...]]
_FIND_AND_DELETE = ("_bulk", "_refresh", "_search")

OPENSEARCH_ACCESS: Mapping[str, IndexAccess] = MappingProxyType(
    {
        # POST /search (_search); DELETE /documents/{id}: exists (HEAD), refresh, find, bulk-delete by id;
        # PATCH /documents/{id}: bulk-write the chunks again, refresh.
        "Api": MappingProxyType({"es:ESHttpHead": ("",), "es:ESHttpPost": _FIND_AND_DELETE}),
        # Create the index if missing (HEAD, PUT), or add a field to its mapping (PUT _mapping);
        # bulk-write chunks; a superseded run withdraws its own.
        "Index": MappingProxyType(
            {"es:ESHttpHead": ("",), "es:ESHttpPut": ("", "_mapping"), "es:ESHttpPost": _FIND_AND_DELETE}
        ),
        # Remove older versions' chunks: refresh, find, bulk-delete by id; rewrite a PATCHed document's.
        "Finalize": MappingProxyType({"es:ESHttpPost": _FIND_AND_DELETE}),
        # Chunk counts per document version (a composite aggregation: _search), delete drifted chunks,
        # re-index a document from its checkpoints (_bulk); HEAD: is there an index at all.
        "Reconciler": MappingProxyType({"es:ESHttpHead": ("",), "es:ESHttpPost": _FIND_AND_DELETE}),
        # An S3 sidecar arriving for a READY document: bulk-write its chunks again, refresh; withdraw
        # them (find, bulk-delete) when a newer version took over meanwhile.
        "Intake": MappingProxyType({"es:ESHttpPost": _FIND_AND_DELETE}),
        # A source item that is gone: its document's chunks (HEAD: is there an index; find, bulk-delete).
        "SourceSync": MappingProxyType({"es:ESHttpHead": ("",), "es:ESHttpPost": _FIND_AND_DELETE}),
        # The MCP server's search and fetch tools: POST /search's queries only.
        "Mcp": MappingProxyType({"es:ESHttpPost": ("_search",)}),
        # Answers streamed over the live channel: the same queries.
        "LiveAnswers": MappingProxyType({"es:ESHttpPost": ("_search",)}),
    }
)

# The VectorStore methods each function's code calls (tests/integration/test_vector_store_grants.py
# replays them against a real OpenSearch and checks every request against OPENSEARCH_ACCESS).
VECTOR_STORE_CALLS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        # PATCH /documents/{id} rewrites a READY document's chunks (bulk, refresh) and withdraws them
        # when a newer version took over meanwhile; Finalize does the same after a PATCH during the run.
        "Api": ("knn_search", "bm25_search", "parent_chunks", "delete_document", "write_chunks", "delete_version"),
        "Index": ("ensure_index", "write_chunks", "delete_version"),
        "Finalize": ("delete_other_versions", "write_chunks", "delete_version"),
        "Reconciler": ("indexed_versions", "delete_chunks", "write_chunks"),
        "Intake": ("write_chunks", "delete_version"),
        "SourceSync": ("delete_document",),
        "Mcp": ("knn_search", "bm25_search", "parent_chunks"),
        "LiveAnswers": ("knn_search", "bm25_search", "parent_chunks"),
    }
)
