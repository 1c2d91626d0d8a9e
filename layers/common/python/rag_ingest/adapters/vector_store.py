"""OpenSearch k-NN: one index for all tenants, every query filtered by tenant.

Chunk ``_id`` = ``{document_id}:{version hash}:{chunk_index}``, so a replay overwrites. Bulk requests
name the index in their path, never in the body (IAM grants are scoped to the index's paths:
infra/permissions.py); stale versions are removed by id, found with a query (no reindex module
needed; OpenSearch Serverless alike). Two retrievers, the tenant filter inside each query (a tenant
gets its own top k): k-NN (lucene HNSW on the plain text's embedding) and BM25 (``indexed_text``, the
contextual text, where a chunk has it: rag_ingest.core.retrieval_text; else ``text``). Both return
HTML-escaped fragments of the plain ``text``, the query's words in ``<em>``. Small-to-big reads a
hit's section or page (``parent_chunks``) with the same tenant and access filter.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlparse

from opensearchpy import OpenSearch, Urllib3HttpConnection, helpers
from opensearchpy.exceptions import (
    ConnectionError as OpenSearchConnectionError,
)
from opensearchpy.exceptions import (
    ConnectionTimeout,
    TransportError,
)

from rag_ingest.adapters.aws import Refusal, translate, translated
from rag_ingest.adapters.opensearch_filters import (
    ACCESS_FIELDS_MAPPING,
    FILTER_FIELDS_MAPPING,
    METADATA_DYNAMIC_TEMPLATES,
    METADATA_FIELD,
    TOTAL_FIELDS_LIMIT,
    access_query,
    chunk_access,
    chunk_metadata,
    filter_query,
    metadata_of_chunk,
)
from rag_ingest.core.access import Principal
from rag_ingest.core.config import SHIPPED_VECTOR_ENCODING
from rag_ingest.core.errors import TransientError
from rag_ingest.core.filters import Filter
from rag_ingest.core.ids import chunk_id, version_hash
from rag_ingest.core.operations import IndexedVersion
from rag_ingest.core.parsed import Chunk, DocumentFormat, FigureSource, PassageBox
from rag_ingest.core.record import DocumentStamp
from rag_ingest.core.retrieval_text import SHIPPED_CONTEXT_LINE, indexed_text
from rag_ingest.core.tracing import traced
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.ports import ParentScope
from rag_ingest.retrieval.query import Expand, SearchQuery
from rag_ingest.retrieval.rerank import STOP_WORDS

#: Concurrent segment search modes of an index (OpenSearch's ``index.search.concurrent_segment_search.mode``).
ConcurrentSegmentSearch = Literal["auto", "all", "none"]
#: How the index stores each vector: 4-byte floats; Lucene's 7-bit scalar quantization of them (OpenSearch
#: >= 2.16); or packed sign bits compared by Hamming distance, which the embedder must return packed.
VectorEncoding = Literal["float32", "sq", "binary"]
#: Lucene's scalar quantizer: 7 bits a dimension (the only width OpenSearch 2.19 accepts for lucene).
SQ_BITS = 7


@dataclass(frozen=True)
class IndexSettings:
    name: str
    dimension: int
    space_type: str = "cosinesimil"
    hnsw_m: int = 16
    ef_construction: int = 128
    ef_search: int = 200
    #: Replicas per shard: the node count minus one (capped) where the stack knows it; None keeps
    #: the cluster's default. A single node with a replica would stay yellow forever.
    replicas: int | None = None
    #: Index each chunk's contextual text (title, heading path, text) for BM25 as well.
    context_line: bool = SHIPPED_CONTEXT_LINE
    #: The index's concurrent segment search mode (OpenSearch >= 2.17): ``auto`` lets the k-NN
    #: query search the shard's segments (one HNSW graph each) in parallel; None keeps the cluster's.
    concurrent_segment_search: ConcurrentSegmentSearch | None = "auto"
    #: The tiered merge policy's segments per tier and floor segment (MB), None: the cluster's. Fewer,
    #: larger segments (one HNSW graph each) answer k-NN faster (docs/benchmarks.md, 110,000 chunks).
    merge_segments_per_tier: int | None = 4
    merge_floor_segment_mb: int | None = 256
    #: The stored vectors' encoding (docs/benchmarks.md, "Vector memory"); ``binary``'s dimension is in bits.
    vector_encoding: VectorEncoding = SHIPPED_VECTOR_ENCODING


#: Buckets per composite aggregation request (the reconciler's chunk counts per document version).
_COMPOSITE_PAGE = 1000

#: Highlighting: up to two fragments of ~160 characters, HTML-escaped, query terms in <em>.
HIGHLIGHT_FRAGMENT_CHARS = 160
HIGHLIGHT_FRAGMENTS = 2


#: The analysed field BM25 searches where a chunk has it: title and heading path, then its text.
INDEXED_TEXT_FIELD = "indexed_text"
_INDEXED_TEXT_MAPPING = {INDEXED_TEXT_FIELD: {"type": "text"}}
# Where a passage stands beyond its pages (docs/formats.md, "Provenance"), and what its document is.
_PROVENANCE_MAPPING = {
    "document_format": {"type": "keyword"},
    "anchor": {"type": "keyword"},
    "paragraph_index": {"type": "integer"},
    # A PDF passage's rectangles (page, x0, y0, x1, y1): returned with a hit, never searched.
    "boxes": {"type": "object", "enabled": False},
    # Where a source's item lives (s3://..., https://...): what its hits cite.
    "source_uri": {"type": "keyword"},
    # A figure's passage: what its text holds (caption, alt_text, ocr, vision); absent on text.
    "figure_sources": {"type": "keyword"},
    # A spreadsheet passage's cells ("Budget!A12:F40"): returned with a hit, never searched.
    "cell_range": {"type": "keyword", "index": False},
}


#: Fields a chunk has only in some formats (a PDF's chunks carry neither), or only as a source's item.
OPTIONAL_CHUNK_FIELDS = frozenset({"anchor", "paragraph_index", "boxes", "source_uri", "figure_sources", "cell_range"})


def chunk_provenance(chunk: Chunk) -> dict[str, Any]:
    """A chunk's format, media type, and (structured formats) section anchor and paragraph index,
    (PDF) rectangles, (spreadsheets) cell range."""
    fields: dict[str, Any] = {
        "document_format": chunk.document_format.value,
        "content_type": chunk.document_format.content_type,
    }
    if chunk.anchor is not None:
        fields["anchor"] = chunk.anchor
    if chunk.paragraph_index is not None:
        fields["paragraph_index"] = chunk.paragraph_index
    if chunk.boxes:
        fields["boxes"] = [box.model_dump() for box in chunk.boxes]
    if chunk.figure_sources is not None:
        fields["figure_sources"] = [source.value for source in chunk.figure_sources]
    if chunk.cell_range is not None:
        fields["cell_range"] = chunk.cell_range
    return fields


def _highlight(query_text: str) -> dict[str, Any]:
    """Fragments of the plain ``text`` with ``query_text``'s words marked, whichever field matched:
    a ``highlight_query`` of its own, as a vector query has no terms and BM25's may have matched
    ``indexed_text``, so a title or heading never shows as a passage's words. The plain highlighter:
    a chunk is a short text, which it re-analyses faster than the unified highlighter does
    (docs/benchmarks.md, search at 100,000 chunks)."""
    return {
        "type": "plain",
        "encoder": "html",
        "pre_tags": ["<em>"],
        "post_tags": ["</em>"],
        "fields": {"text": {"fragment_size": HIGHLIGHT_FRAGMENT_CHARS, "number_of_fragments": HIGHLIGHT_FRAGMENTS}},
        "highlight_query": {"match": {"text": highlight_terms(query_text)}},
    }


_WORD = re.compile(r"\w+")


def highlight_terms(query_text: str) -> str:
    """The query's words to mark: its stop words (the reranker's list: they say nothing of why a
    passage matched) left out, unless it has nothing else."""
    words = _WORD.findall(query_text)
    kept = [word for word in words if word.casefold() not in STOP_WORDS]
    return " ".join(kept) if kept else query_text


def _filters(tenant_id: str, where: Filter | None, reader: Principal | None = None) -> dict[str, Any]:
    """The tenant's term, ``where``'s clause and what ``reader`` may read, as one ``bool`` of
    filters (no scoring)."""
    clauses: list[dict[str, Any]] = [{"term": {"tenant_id": tenant_id}}]
    if reader is not None:
        if reader.tenant_id != tenant_id:
            raise ValueError("the reader is of another tenant")
        clauses.append(access_query(reader))
    if where is not None:
        clauses.append(filter_query(where))
    return {"bool": {"filter": clauses}}


def _scope_query(scope: ParentScope) -> dict[str, Any]:
    """A parent's chunks: its document version and chunk range, then its section's headings (each
    one: the exact path is checked on the hits) or its pages."""
    clauses: list[dict[str, Any]] = [
        {"term": {"document_id": scope.document_id}},
        {"term": {"version": scope.version_hash}},
        {"range": {"chunk_index": {"gte": scope.first_chunk, "lte": scope.last_chunk}}},
    ]
    if scope.expand is Expand.SECTION:
        clauses.extend({"term": {"heading_path": heading}} for heading in scope.heading_path)
        if not scope.heading_path:
            return {"bool": {"filter": clauses, "must_not": [{"exists": {"field": "heading_path"}}]}}
    else:
        clauses.append({"range": {"page_start": {"lte": scope.page_end}}})
        clauses.append({"range": {"page_end": {"gte": scope.page_start}}})
    return {"bool": {"filter": clauses}}


def _vector_field(s: IndexSettings) -> dict[str, Any]:
    """The embedding's mapping: lucene HNSW, pure Java, on every OpenSearch build (no native libs)."""
    parameters: dict[str, Any] = {"m": s.hnsw_m, "ef_construction": s.ef_construction}
    if s.vector_encoding == "sq":
        parameters["encoder"] = {"name": "sq", "parameters": {"bits": SQ_BITS}}
    binary = s.vector_encoding == "binary"
    return {
        "type": "knn_vector",
        "dimension": s.dimension,
        **({"data_type": "binary"} if binary else {}),
        "method": {
            "name": "hnsw",
            "engine": "lucene",
            "space_type": "hamming" if binary else s.space_type,
            "parameters": parameters,
        },
    }


def _require_tenant(tenant_id: str) -> None:
    if not tenant_id:
        raise ValueError("a tenant is required: search never crosses tenants")


def connect(endpoint: str) -> OpenSearch:
    """HTTPS endpoints (AWS) are signed with SigV4; plain HTTP is only for a local server.

    urllib3 directly, not through requests: faster per request (docs/benchmarks.md, search at 100,000 chunks).
    """
    url = urlparse(endpoint)
    kwargs: dict[str, Any] = {
        "hosts": [{"host": url.hostname, "port": url.port or (443 if url.scheme == "https" else 80)}],
        "use_ssl": url.scheme == "https",
        "verify_certs": url.scheme == "https",
        "connection_class": Urllib3HttpConnection,
        "timeout": 30,
        "max_retries": 2,
        "retry_on_timeout": True,
    }
    if url.scheme == "https":
        import boto3
        from opensearchpy import Urllib3AWSV4SignerAuth

        session = boto3.Session()
        credentials = session.get_credentials()
        kwargs["http_auth"] = Urllib3AWSV4SignerAuth(credentials, session.region_name or "us-east-1", "es")
    return OpenSearch(**kwargs)


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, OpenSearchConnectionError | ConnectionTimeout):
        return True
    if isinstance(exc, TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        return status == 429 or status >= 500
    return False


def _error_type(exc: BaseException) -> str:
    """An OpenSearch error's type (``index_not_found_exception``...); "" for any other exception."""
    return str(getattr(exc, "error", "")) if isinstance(exc, TransportError) else ""


def _opensearch(what: str, expect: Collection[str] = ()) -> AbstractContextManager[Refusal]:
    """``translated`` for the OpenSearch client: any error, OpenSearch's transient test, its error
    type as the code ``expect`` lists."""
    return translated(
        f"OpenSearch {what}", expect=expect, catch=Exception, transient=_is_transient, code_of=_error_type
    )


@traced
class VectorStore:
    def __init__(self, client: OpenSearch, settings: IndexSettings) -> None:
        self._client = client
        self._settings = settings

    @property
    def index_name(self) -> str:
        return self._settings.name

    def mapping(self) -> dict[str, Any]:
        s = self._settings
        # Each metadata key is a field of the mapping (rag_ingest.adapters.opensearch_filters).
        index_settings: dict[str, Any] = {"knn": True, "mapping.total_fields.limit": TOTAL_FIELDS_LIMIT}
        if s.replicas is not None:
            index_settings["number_of_replicas"] = s.replicas
        if s.concurrent_segment_search is not None:
            index_settings["search.concurrent_segment_search.mode"] = s.concurrent_segment_search
        if s.merge_segments_per_tier is not None:
            index_settings["merge.policy.segments_per_tier"] = s.merge_segments_per_tier
        if s.merge_floor_segment_mb is not None:
            index_settings["merge.policy.floor_segment"] = f"{s.merge_floor_segment_mb}mb"
        return {
            "settings": {"index": index_settings},
            "mappings": {
                "dynamic": "strict",
                # Only under metadata (its object sets dynamic: true): typed by path, see opensearch_filters.
                "dynamic_templates": METADATA_DYNAMIC_TEMPLATES,
                # The vector lives in the HNSW graph; in _source every hit would load and parse it too
                # (docs/benchmarks.md). Nothing reads it back: a replay rewrites whole documents.
                "_source": {"excludes": ["embedding"]},
                "properties": {
                    "tenant_id": {"type": "keyword"},
                    "document_id": {"type": "keyword"},
                    "version": {"type": "keyword"},
                    "chunk_index": {"type": "integer"},
                    "page_start": {"type": "integer"},
                    "page_end": {"type": "integer"},
                    "heading_path": {"type": "keyword"},
                    **_PROVENANCE_MAPPING,
                    "filename": {"type": "keyword"},
                    "text": {"type": "text"},
                    **_INDEXED_TEXT_MAPPING,
                    **FILTER_FIELDS_MAPPING,
                    **ACCESS_FIELDS_MAPPING,
                    "embedding": _vector_field(s),
                },
            },
        }

    def ensure_index(self) -> None:
        # resource_already_exists_exception: a concurrent Index stage created it first.
        with _opensearch("create index", expect={"resource_already_exists_exception"}):
            if self._client.indices.exists(index=self.index_name):
                # An index made before indexed_text, metadata, created_at and content_type existed:
                # adding fields and dynamic templates is allowed (and idempotent).
                self._client.indices.put_mapping(
                    index=self.index_name,
                    body={
                        "dynamic_templates": METADATA_DYNAMIC_TEMPLATES,
                        "properties": {
                            **_INDEXED_TEXT_MAPPING,
                            **FILTER_FIELDS_MAPPING,
                            **ACCESS_FIELDS_MAPPING,
                            **_PROVENANCE_MAPPING,
                        },
                    },
                )
                return
            self._client.indices.create(index=self.index_name, body=self.mapping())

    def drop_index(self) -> None:
        """Delete the whole index: only for indexes a test or an evaluation created for itself."""
        self._client.indices.delete(index=self.index_name, ignore_unavailable=True)

    def write_chunks(self, stamp: DocumentStamp, chunks: Sequence[Chunk], vectors: Iterable[Sequence[float]]) -> int:
        document_fields: dict[str, Any] = {
            METADATA_FIELD: chunk_metadata(stamp.metadata or {}),
            **chunk_access(stamp.access, stamp.uploaded_by),
            **({"created_at": stamp.created_at} if stamp.created_at else {}),
            **({"source_uri": stamp.source_uri} if stamp.source_uri else {}),
        }
        if isinstance(vectors, Sequence) and len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        actions = (
            {
                "_op_type": "index",  # index = create or overwrite: replays do not duplicate
                "_id": chunk_id(stamp.document_id, stamp.version, chunk.chunk_index),
                "_source": {
                    "tenant_id": stamp.tenant_id,
                    "document_id": stamp.document_id,
                    "version": version_hash(stamp.version),
                    "chunk_index": chunk.chunk_index,
                    "page_start": chunk.page_start,
                    "page_end": chunk.page_end,
                    "heading_path": chunk.heading_path,
                    **chunk_provenance(chunk),
                    "filename": stamp.filename,
                    **document_fields,
                    "text": chunk.text,
                    **({INDEXED_TEXT_FIELD: indexed_text(chunk)} if self._settings.context_line else {}),
                    "embedding": list(vector),
                },
            }
            for chunk, vector in zip(chunks, vectors, strict=True)
        )
        try:
            written, errors = helpers.bulk(
                self._client,
                actions,
                chunk_size=200,
                max_retries=3,
                raise_on_error=False,
                index=self.index_name,
            )
            # One refresh for the document, not one wait_for per 200-chunk request: each of those
            # waited for the next scheduled refresh (up to 1 s), about 45 s for a 9,000-chunk manual.
            self._client.indices.refresh(index=self.index_name)
        except ValueError:
            raise  # more or fewer vectors than chunks (zip strict): a bug, not an OpenSearch error
        except Exception as exc:
            raise translate(exc, "OpenSearch bulk index", transient=_is_transient) from exc
        if errors:
            statuses = {int(next(iter(e.values())).get("status", 0)) for e in errors}  # type: ignore[union-attr]
            detail = f"{len(errors)} of {len(chunks)} chunks failed to index: {str(errors[0])[:500]}"
            if any(s == 429 or s >= 500 for s in statuses):
                raise TransientError(detail)
            raise RuntimeError(detail)
        return int(written)

    def _ids_matching(self, query: dict[str, Any]) -> Iterator[str]:
        search_after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": 1000,
                "query": query,
                "_source": False,
                "sort": [{"document_id": "asc"}, {"chunk_index": "asc"}, {"version": "asc"}],
            }
            if search_after is not None:
                body["search_after"] = search_after
            hits = self._client.search(index=self.index_name, body=body)["hits"]["hits"]
            if not hits:
                return
            for hit in hits:
                yield str(hit["_id"])
            search_after = hits[-1]["sort"]

    def _delete_ids(self, ids: list[str]) -> int:
        if not ids:
            return 0
        actions = ({"_op_type": "delete", "_id": i} for i in ids)
        deleted, _ = helpers.bulk(
            self._client, actions, raise_on_error=False, refresh="wait_for", index=self.index_name
        )
        return int(deleted)

    def delete_other_versions(self, document_id: str, keep_version: str) -> int:
        """After the swap to ``keep_version``: remove every chunk of the document's older versions."""
        query = {
            "bool": {
                "filter": [{"term": {"document_id": document_id}}],
                "must_not": [{"term": {"version": version_hash(keep_version)}}],
            }
        }
        with _opensearch("delete stale chunks"):
            self._client.indices.refresh(index=self.index_name)
            return self._delete_ids(list(self._ids_matching(query)))

    def delete_version(self, document_id: str, version: str) -> int:
        """Withdraw one version's chunks (a superseded run cleaning up after itself)."""
        query = {
            "bool": {"filter": [{"term": {"document_id": document_id}}, {"term": {"version": version_hash(version)}}]}
        }
        with _opensearch("delete superseded chunks"):
            self._client.indices.refresh(index=self.index_name)
            return self._delete_ids(list(self._ids_matching(query)))

    def delete_document(self, document_id: str) -> int:
        with _opensearch("delete document chunks"):
            if not self._client.indices.exists(index=self.index_name):
                return 0
            self._client.indices.refresh(index=self.index_name)
            return self._delete_ids(list(self._ids_matching({"term": {"document_id": document_id}})))

    def indexed_versions(self, tenant_id: str | None = None) -> Iterator[IndexedVersion]:
        """Chunks per (tenant, document, version hash), 1,000 buckets a request: a composite
        aggregation paged by ``after_key``, so no request and no page holds more than 1,000 counts,
        however many chunks there are (the reconciler's view of the index; it never reads a chunk).
        ``after`` retrieves "the composite buckets that are after the last composite buckets returned
        in a previous round" (https://opensearch-project.github.io/opensearch-net/api/OpenSearch.Client.ICompositeAggregation.html)."""
        sources = [
            {"tenant_id": {"terms": {"field": "tenant_id"}}},
            {"document_id": {"terms": {"field": "document_id"}}},
            {"version": {"terms": {"field": "version"}}},
        ]
        after: dict[str, Any] | None = None
        with _opensearch("count chunks per version"):
            if not self._client.indices.exists(index=self.index_name):
                return
            self._client.indices.refresh(index=self.index_name)
            while True:
                composite: dict[str, Any] = {"size": _COMPOSITE_PAGE, "sources": sources}
                if after is not None:
                    composite["after"] = after
                body: dict[str, Any] = {"size": 0, "aggs": {"versions": {"composite": composite}}}
                if tenant_id is not None:
                    body["query"] = {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}]}}
                result = self._client.search(index=self.index_name, body=body)["aggregations"]["versions"]
                for bucket in result["buckets"]:
                    key = bucket["key"]
                    yield IndexedVersion(
                        tenant_id=str(key["tenant_id"]),
                        document_id=str(key["document_id"]),
                        version_hash=str(key["version"]),
                        chunks=int(bucket["doc_count"]),
                    )
                after = result.get("after_key")
                if not result["buckets"] or after is None:
                    return

    def delete_chunks(self, document_id: str, version_hash: str | None = None, *, from_index: int = 0) -> int:
        """Delete a document's chunks (of one version hash; from chunk ``from_index`` on), by id."""
        filters: list[dict[str, Any]] = [{"term": {"document_id": document_id}}]
        if version_hash is not None:
            filters.append({"term": {"version": version_hash}})
        if from_index:
            filters.append({"range": {"chunk_index": {"gte": from_index}}})
        with _opensearch("delete chunks"):
            if not self._client.indices.exists(index=self.index_name):
                return 0
            self._client.indices.refresh(index=self.index_name)
            return self._delete_ids(list(self._ids_matching({"bool": {"filter": filters}})))

    def count(self, *, document_id: str, version: str | None = None) -> int:
        filters: list[dict[str, Any]] = [{"term": {"document_id": document_id}}]
        if version is not None:
            filters.append({"term": {"version": version_hash(version)}})
        self._client.indices.refresh(index=self.index_name)
        body = {"query": {"bool": {"filter": filters}}}
        return int(self._client.count(index=self.index_name, body=body)["count"])

    def knn_search(self, query: SearchQuery, vector: Sequence[float], *, k: int) -> list[SearchHit]:
        """The ``k`` nearest chunks of the query's tenant (and of its ``where`` and ``reader``): the
        filters are applied inside the k-NN search (lucene's efficient filtering: with a selective
        filter it searches the matching chunks exactly, so k matches come back whenever k exist),
        never after it. The query's words, when it has any, are highlighted in each hit."""
        _require_tenant(query.tenant_id)
        body: dict[str, Any] = {
            "size": k,
            "_source": {"excludes": ["embedding", INDEXED_TEXT_FIELD]},
            "query": {
                "knn": {
                    "embedding": {
                        "vector": list(vector),
                        "k": k,
                        "filter": _filters(query.tenant_id, query.where, query.reader),
                        # lucene explores only k candidates unless told otherwise: recall needs more.
                        "method_parameters": {"ef_search": max(self._settings.ef_search, k)},
                    }
                }
            },
        }
        if query.text.strip():
            body["highlight"] = _highlight(query.text)
        return self._search(body, "knn")

    def bm25_search(self, query: SearchQuery, *, k: int) -> list[SearchHit]:
        """The ``k`` chunks of the query's tenant (and of its ``where`` and ``reader``, a ``bool.filter``)
        that best match its words (BM25) in their text (or their contextual text, where it was
        indexed), with highlights of the plain text."""
        _require_tenant(query.tenant_id)
        without_indexed_text = {"bool": {"must_not": [{"exists": {"field": INDEXED_TEXT_FIELD}}]}}
        body = {
            "size": k,
            "_source": {"excludes": ["embedding", INDEXED_TEXT_FIELD]},
            "query": {
                "bool": {
                    # Each chunk is scored on one field: indexed_text where it was written, else text.
                    "should": [
                        {"match": {INDEXED_TEXT_FIELD: {"query": query.text}}},
                        {
                            "bool": {
                                "must": [{"match": {"text": {"query": query.text}}}],
                                "filter": [without_indexed_text],
                            }
                        },
                    ],
                    "minimum_should_match": 1,
                    "filter": _filters(query.tenant_id, query.where, query.reader)["bool"]["filter"],
                }
            },
            "highlight": _highlight(query.text),
        }
        return self._search(body, "bm25")

    def parent_chunks(self, query: SearchQuery, scopes: Sequence[ParentScope]) -> list[list[SearchHit]]:
        """Per scope, its chunks the query's tenant and ``reader`` may read, by chunk index: one
        request for every scope (a ``should`` of each one's terms), each chunk then given to the
        scopes that ``hold`` it (a section's exact heading path is checked here)."""
        _require_tenant(query.tenant_id)
        if not scopes:
            return []
        body = {
            "size": sum(scope.last_chunk - scope.first_chunk + 1 for scope in scopes),
            "_source": {"excludes": ["embedding", INDEXED_TEXT_FIELD]},
            "sort": [{"chunk_index": "asc"}],
            "query": {
                "bool": {
                    "should": [_scope_query(scope) for scope in scopes],
                    "minimum_should_match": 1,
                    "filter": _filters(query.tenant_id, None, query.reader)["bool"]["filter"],
                }
            },
        }
        chunks = self._search(body, "parent")
        return [[chunk for chunk in chunks if scope.holds(chunk)] for scope in scopes]

    def _search(self, body: dict[str, Any], retriever: str) -> list[SearchHit]:
        with _opensearch("search", expect={"index_not_found_exception"}) as refusal:
            hits = self._client.search(index=self.index_name, body=body)["hits"]["hits"]
        if refusal.refused:
            return []  # nothing was ever indexed: no passages, not an error
        return [
            SearchHit(
                chunk_id=str(hit["_id"]),
                score=float(hit["_score"] or 0.0),  # None when sorted (parent_chunks)
                document_id=hit["_source"]["document_id"],
                page_start=int(hit["_source"]["page_start"]),
                page_end=int(hit["_source"]["page_end"]),
                text=hit["_source"]["text"],
                filename=hit["_source"].get("filename"),
                source_uri=hit["_source"].get("source_uri"),
                heading_path=tuple(hit["_source"].get("heading_path") or ()),
                # Chunks indexed before other formats were accepted are a PDF's.
                document_format=DocumentFormat(hit["_source"].get("document_format") or DocumentFormat.PDF),
                anchor=hit["_source"].get("anchor"),
                paragraph_index=hit["_source"].get("paragraph_index"),
                boxes=tuple(PassageBox(**box) for box in hit["_source"].get("boxes") or ()),
                figure_sources=_figure_sources(hit["_source"]),
                cell_range=hit["_source"].get("cell_range"),
                highlights=tuple(hit.get("highlight", {}).get("text", ())),
                retrieved_by=(retriever,),
                metadata=metadata_of_chunk(hit["_source"].get(METADATA_FIELD)),
            )
            for hit in hits
        ]


def _figure_sources(source: dict[str, Any]) -> tuple[FigureSource, ...] | None:
    """A figure passage's sources as indexed (None: a passage of text)."""
    if "figure_sources" not in source:
        return None
    return tuple(FigureSource(value) for value in source["figure_sources"] or ())
