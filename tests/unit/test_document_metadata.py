"""Metadata end to end over the in-memory fakes: given at upload, kept on the record and shown,
carried by the Index stage onto every chunk, inherited by a new version; filters on the document
listing and on search (both legs). The DynamoDB and OpenSearch sides run in
tests/integration/test_filtered_search.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.documents.paging import decode_cursor
from rag_ingest.documents.schemas import UploadRequest
from rag_ingest.documents.service import DocumentService
from rag_ingest.retrieval.search import SearchMode, SearchRequest, SearchService

from tests.support.fakes import CountingEmbedder, InMemoryChunkIndex, InMemoryDocuments
from tests.unit.test_api_documents import ENV
from tests.unit.test_pipeline_stages_fast import World, build_world, sample

pytestmark = pytest.mark.unit


class NoPresigner:
    def presign_upload(self, **_: Any) -> dict[str, Any]:
        return {"url": "https://upload.example", "fields": {}}

    def presign_download(self, **_: Any) -> str:  # pragma: no cover - not used here
        return "https://download.example"


def service_over(documents: InMemoryDocuments) -> DocumentService:
    return DocumentService(ENV, documents, NoPresigner())  # type: ignore[arg-type]


# -- upload and the record ----------------------------------------------------------------------
def test_metadata_given_at_upload_is_kept_and_shown() -> None:
    documents = InMemoryDocuments()
    service = service_over(documents)
    metadata = {"customer": "acme", "year": 2024, "score": 0.5, "signed": True, "tags": ["nda"]}
    ticket = service.create_upload("acme", UploadRequest(filename="c.pdf", metadata=metadata))
    assert service.get("acme", ticket.document_id).metadata == metadata
    assert service.list("acme").items[0].metadata == metadata


def test_an_upload_without_metadata_has_none() -> None:
    service = service_over(InMemoryDocuments())
    ticket = service.create_upload("acme", UploadRequest(filename="c.pdf"))
    assert service.get("acme", ticket.document_id).metadata == {}


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"filename": "x"}, "metadata.filename: 'filename' is a reserved name"),
        ({"page": 3}, "metadata.page: 'page' is a reserved name"),
        ({"Bad": 1}, "metadata: a key must match"),
        ({"tags": ["a", 2]}, "metadata.tags[1]: a list holds strings only"),
    ],
)
def test_bad_metadata_is_refused_before_anything_is_written(metadata: dict[str, Any], message: str) -> None:
    documents = InMemoryDocuments()
    with pytest.raises(PermanentError) as caught:
        service_over(documents).create_upload("acme", UploadRequest(filename="c.pdf", metadata=metadata))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.detail.startswith(message)
    assert documents.items == {}


# -- the listing's filter -----------------------------------------------------------------------
def _tenant_with_documents(count: int) -> tuple[DocumentService, list[str]]:
    documents = InMemoryDocuments()
    service = service_over(documents)
    ids = []
    for n in range(count):
        customer = "acme" if n % 3 == 0 else "globex"
        ticket = service.create_upload(
            "acme", UploadRequest(filename=f"d{n}.pdf", metadata={"customer": customer, "n": n})
        )
        ids.append(ticket.document_id)
    service.create_upload("other", UploadRequest(filename="x.pdf", metadata={"customer": "acme"}))
    return service, ids


def test_the_listing_filters_by_metadata_across_pages() -> None:
    service, ids = _tenant_with_documents(12)
    where = json.dumps({"equals": {"key": "customer", "value": "acme"}})
    expected = [i for n, i in enumerate(ids) if n % 3 == 0]
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = service.list("acme", limit=2, cursor=cursor, filter_json=where)
        seen.extend(d.document_id for d in page.items)
        assert all(d.metadata["customer"] == "acme" for d in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
        assert decode_cursor(cursor, "acme")["tenant_id"] == "acme"
    assert sorted(seen) == sorted(expected)  # every match once, never another tenant's


def test_the_listing_filters_by_builtins_and_groups() -> None:
    service, ids = _tenant_with_documents(6)
    where = {
        "andAll": [
            {"in": {"key": "document_id", "value": ids[:4]}},
            {"greaterThanOrEquals": {"key": "n", "value": 2}},
            {"startsWith": {"key": "filename", "value": "d"}},
        ]
    }
    page = service.list("acme", limit=10, filter_json=json.dumps(where))
    assert sorted(d.document_id for d in page.items) == sorted(ids[2:4])
    assert page.next_cursor is None


@pytest.mark.parametrize(
    ("filter_json", "message"),
    [
        ("{", "filter: not valid JSON"),
        ('{"equals": {"key": "page", "value": 1}}', "filter.equals.key: documents have no page"),
        ('{"andAll": [{"equals": {"key": "a", "value": 1}}]}', "filter.andAll: at least 2 filters"),
        ('{"equals": {"key": "a", "value": NaN}}', "filter: not valid JSON"),
    ],
)
def test_a_bad_listing_filter_is_invalid_request_naming_its_path(filter_json: str, message: str) -> None:
    service, _ = _tenant_with_documents(1)
    with pytest.raises(PermanentError) as caught:
        service.list("acme", filter_json=filter_json)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.detail.startswith(message)


# -- the Index stage and new versions -----------------------------------------------------------
def _upload_with_metadata(world: World, metadata: dict[str, Any]) -> str:
    record = world.documents.create_awaiting_upload(
        document_id="01JCUSTOMERCONTRACT0000000",
        tenant_id="acme",
        filename="a.pdf",
        bucket="docs",
        key="raw/acme/01JCUSTOMERCONTRACT0000000/a.pdf",
        metadata=metadata,
    )
    return record.document_id


def test_index_writes_the_records_metadata_on_every_chunk_and_a_new_version_inherits_it() -> None:
    world = build_world()
    metadata = {"customer": "acme", "year": 2024}
    document_id = _upload_with_metadata(world, metadata)
    first = world.run(world.upload(sample("sourdough.pdf"), document_id=document_id))
    assert first.chunk_count and first.chunk_count > 0
    created_at = world.documents.items[document_id]["created_at"]
    for source in world.index.chunks.values():
        assert source["metadata"] == metadata and source["created_at"] == created_at

    world.run(world.upload(sample("lighthouses.pdf"), document_id=document_id, version="v2"))
    record = world.documents.get(document_id)
    assert record is not None and record.version == "v2" and record.metadata == metadata
    assert world.index.chunks and all(source["metadata"] == metadata for source in world.index.chunks.values())


def test_the_step_functions_state_never_carries_the_metadata() -> None:
    world = build_world()
    document_id = _upload_with_metadata(world, {"note": "x" * 1000})
    job = world.run(world.upload(sample("sourdough.pdf"), document_id=document_id))
    assert "x" * 1000 not in job.model_dump_json()


# -- search ---------------------------------------------------------------------------------------
def test_search_filters_both_legs() -> None:
    world = build_world()
    document_id = _upload_with_metadata(world, {"customer": "acme"})
    world.run(world.upload(sample("sourdough.pdf"), document_id=document_id))
    world.run(world.upload(sample("lighthouses.pdf")))  # no metadata
    index: InMemoryChunkIndex = world.index
    searcher = SearchService(lambda: index, CountingEmbedder)
    for mode in SearchMode:
        everything = searcher.search("acme", SearchRequest(query="bread flour light", k=50, mode=mode))
        assert {p.document_id for p in everything.passages} != {document_id}
        where = {"equals": {"key": "customer", "value": "acme"}}
        filtered = searcher.search("acme", SearchRequest(query="bread flour light", k=50, mode=mode, filter=where))
        assert filtered.passages and {p.document_id for p in filtered.passages} == {document_id}
        assert all(p.metadata == {"customer": "acme"} for p in filtered.passages)
        nothing = {"equals": {"key": "customer", "value": "globex"}}
        assert not searcher.search("acme", SearchRequest(query="bread", mode=mode, filter=nothing)).passages


def test_search_narrows_by_page_span() -> None:
    world = build_world()
    world.run(world.upload(sample("sourdough.pdf")))
    searcher = SearchService(lambda: world.index, CountingEmbedder)
    where = {"equals": {"key": "page", "value": 1}}
    passages = searcher.search("acme", SearchRequest(query="bread", k=50, mode=SearchMode.KNN, filter=where)).passages
    assert passages and all(p.page_start <= 1 <= p.page_end for p in passages)


def test_a_bad_search_filter_is_invalid_request_naming_its_path() -> None:
    searcher = SearchService(InMemoryChunkIndex, CountingEmbedder)
    bad = {"andAll": [{"equals": {"key": "a", "value": 1}}, {"equals": {"key": "a"}}]}
    with pytest.raises(PermanentError) as caught:
        searcher.search("acme", SearchRequest(query="q", filter=bad))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.detail.startswith("filter.andAll[1].equals.value: missing")
