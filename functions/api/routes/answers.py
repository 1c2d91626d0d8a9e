"""The answer route: a cited answer from the tenant's passages the caller may read."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from rag_ingest.answers.service import AnswerRequest, AnswerResponse

from .common import get_services, principal, responses

router = Router()


@router.post(
    "/answer",
    summary="Answer a question with citations",
    description=(
        "Searches as POST /search does (same filter, access, mode and rerank), then the deployment's "
        "Converse model answers from the passages found, citing them as [1], [2]: each cited passage is "
        "returned with its number. When no passage is found, or none reaches the relevance threshold, "
        "no model is called and supported is false."
    ),
    responses=responses(200, 400, 403, 503),
    tags=["search"],
    operation_id="answerQuestion",
)
def answer(request: AnswerRequest) -> AnswerResponse:
    caller = principal(router.current_event)
    return get_services().answers.answer(caller.tenant_id, request, caller)
