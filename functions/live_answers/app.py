"""WebSocket API route ``answer``: a cited answer streamed back to the connection that asked
(rag_ingest.live.answers; the events: docs/answers.md, "Streaming")."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import AnswerEnv, LiveAnswersEnv, SearchEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.wiring import build_live_answers

ENV = LiveAnswersEnv.from_env()
live_answers = build_live_answers(ENV, SearchEnv.from_env(), AnswerEnv.from_env())


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    connection_id = str((event.get("requestContext") or {}).get("connectionId") or "")
    outcome = live_answers.handle(connection_id, event.get("body"))
    logger.info("answer request handled", extra={"connection_id": connection_id, "outcome": outcome})
    return {"statusCode": 200}
