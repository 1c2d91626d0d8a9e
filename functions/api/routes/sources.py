"""The source routes: a tenant's sources (an S3 bucket, a site, a pushed custom source), their syncs
with Bedrock-style statistics, and a custom source's items, upserted by external id
(docs/sources.md). Another tenant's source answers 404 like a missing one."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from rag_ingest.core.config import SourcesApiEnv
from rag_ingest.sources.model import (
    ItemRequest,
    ItemView,
    SourceList,
    SourcePatch,
    SourceRequest,
    SourceView,
    SyncJob,
    SyncList,
)
from rag_ingest.sources.service import SourceService
from rag_ingest.wiring import build_sources

from .common import ENV, principal, responses, tenant

SOURCES_ENV = SourcesApiEnv.from_env()


@cache
def get_sources() -> SourceService:
    """The source service, built on first use; tests replace this function to run fakes."""
    return build_sources(SOURCES_ENV, ENV.tenant_limits)


router = Router()

SourceId = Annotated[str, Path(description="A source id as POST /sources returned it", max_length=64)]
SyncId = Annotated[str, Path(description="A sync id as POST /sources/{id}/sync returned it", max_length=64)]
ExternalId = Annotated[str, Path(description="The item's id in the team's own system", max_length=512)]


@router.post(
    "/sources",
    summary="Add a source",
    description=(
        "kind s3 (a bucket and prefix the stack may read), web (seeds, sitemaps, a scope) or custom "
        "(items pushed with PUT /sources/{id}/items/{external_id}); an optional schedule, and the "
        "metadata and access its documents get. 400 codes: SOURCE_CONFIG_INVALID, SOURCE_LIMIT_REACHED."
    ),
    responses=responses(201, 400, 403),
    tags=["sources"],
    operation_id="createSource",
)
def create_source(request: SourceRequest) -> Response[SourceView]:
    caller = principal(router.current_event)
    created = get_sources().create(caller.tenant_id, request, caller)
    return Response(201, content_types.APPLICATION_JSON, created)


@router.get(
    "/sources",
    summary="List sources",
    description="The tenant's sources, oldest first, each with its latest sync.",
    responses=responses(200, 403),
    tags=["sources"],
    operation_id="listSources",
)
def list_sources() -> SourceList:
    return get_sources().list(tenant(router.current_event))


@router.get(
    "/sources/<source_id>",
    summary="A source and its latest sync",
    responses=responses(200, 400, 403, 404),
    tags=["sources"],
    operation_id="getSource",
)
def get_source(source_id: SourceId) -> SourceView:
    return get_sources().get(tenant(router.current_event), source_id)


@router.patch(
    "/sources/<source_id>",
    summary="Change a source",
    description="The fields given replace the stored ones (the kind is fixed); the next sync uses them.",
    responses=responses(200, 400, 403, 404),
    tags=["sources"],
    operation_id="updateSource",
)
def update_source(source_id: SourceId, patch: SourcePatch) -> SourceView:
    return get_sources().patch(tenant(router.current_event), source_id, patch)


@router.delete(
    "/sources/<source_id>",
    summary="Delete a source",
    description=(
        "documents=delete also deletes every document the source made; documents=keep leaves them. "
        "409 SYNC_IN_PROGRESS while a sync runs; 400 INVALID_REQUEST without the choice."
    ),
    responses=responses(204, 400, 403, 404, 409),
    tags=["sources"],
    operation_id="deleteSource",
)
def delete_source(
    source_id: SourceId,
    # Required by the contract, not only by the service (its DeleteModeError stays for other callers).
    documents: Annotated[Literal["delete", "keep"], Query(description="delete or keep the source's documents")],
) -> Response[None]:
    get_sources().delete(tenant(router.current_event), source_id, documents)
    return Response(204)  # no body, so no Content-Type (a JSON type on nothing broke clients: ST109)


@router.post(
    "/sources/<source_id>/sync",
    summary="Start a sync",
    description=(
        "Lists the source, ingests what is new or changed, skips what is unchanged and deletes what is "
        "gone. 409 SYNC_IN_PROGRESS: one sync per source at a time; a custom source is not listed (400)."
    ),
    responses=responses(202, 400, 403, 404, 409),
    tags=["sources"],
    operation_id="startSourceSync",
)
def start_sync(source_id: SourceId) -> Response[SyncJob]:
    job = get_sources().start_sync(tenant(router.current_event), source_id)
    return Response(202, content_types.APPLICATION_JSON, job)


@router.get(
    "/sources/<source_id>/syncs",
    summary="A source's syncs",
    description="The latest syncs, newest first, with their statistics and failed items.",
    responses=responses(200, 400, 403, 404),
    tags=["sources"],
    operation_id="listSourceSyncs",
)
def list_syncs(source_id: SourceId) -> SyncList:
    return get_sources().list_syncs(tenant(router.current_event), source_id)


@router.get(
    "/sources/<source_id>/syncs/<sync_id>",
    summary="One sync",
    responses=responses(200, 400, 403, 404),
    tags=["sources"],
    operation_id="getSourceSync",
)
def get_sync(source_id: SourceId, sync_id: SyncId) -> SyncJob:
    return get_sources().get_sync(tenant(router.current_event), source_id, sync_id)


@router.put(
    "/sources/<source_id>/items/<external_id>",
    summary="Upsert a custom source's item",
    description=(
        "The content as text or content_base64 (at most 4 MB). The same content, filename, metadata "
        "and access again is unchanged and starts nothing; changed content becomes a new version."
    ),
    responses=responses(200, 400, 403, 404, 413),
    tags=["sources"],
    operation_id="putSourceItem",
)
def put_item(source_id: SourceId, external_id: ExternalId, request: ItemRequest) -> ItemView:
    return get_sources().put_item(tenant(router.current_event), source_id, external_id, request)


@router.delete(
    "/sources/<source_id>/items/<external_id>",
    summary="Delete a custom source's item",
    description="Its document is deleted as DELETE /documents/{id} does.",
    responses=responses(204, 400, 403, 404),
    tags=["sources"],
    operation_id="deleteSourceItem",
)
def delete_item(source_id: SourceId, external_id: ExternalId) -> Response[None]:
    get_sources().delete_item(tenant(router.current_event), source_id, external_id)
    return Response(204)  # no body, so no Content-Type (a JSON type on nothing broke clients: ST109)
