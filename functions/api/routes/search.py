"""The search route: the tenant's passages for a query."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from rag_ingest.retrieval.search import SearchRequest, SearchResponse

from .common import get_services, principal, responses

router = Router()


@router.post(
    "/search",
    summary="Search passages",
    description=(
        "The tenant's passages for a query: hybrid (BM25 + k-NN fused by reciprocal rank), knn or bm25; "
        "optionally reranked by a reranker model (rerank)."
    ),
    responses=responses(200, 400, 403),
    tags=["search"],
    operation_id="searchPassages",
)
def search(request: SearchRequest) -> SearchResponse:
    caller = principal(router.current_event)
    return get_services().search.search(caller.tenant_id, request, caller)
