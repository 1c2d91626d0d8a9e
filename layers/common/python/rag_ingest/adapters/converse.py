"""Bedrock Runtime's ``Converse`` as the ``AnswerModel`` port: one user message, one answer.

The request is ``modelId``, ``system`` and ``messages`` with ``inferenceConfig`` (``maxTokens``,
``temperature`` 0); the answer's ``output.message.content`` text blocks, ``usage`` and
``stopReason`` (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).
The local model server names a stand-in in the ``x-local-answer-model`` header.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rag_ingest.adapters.aws import bedrock_runtime_client, translated
from rag_ingest.answers.ports import Generation

#: The header the local model server sets on answers its stand-in wrote.
STAND_IN_HEADER = "x-local-answer-model"


class BedrockConverse:
    """``Converse`` with one model id (a foundation model's or an inference profile's)."""

    def __init__(self, model_id: str, client: Any = None) -> None:
        self.client = client if client is not None else bedrock_runtime_client()
        self.model_id = model_id

    def generate(self, system: str, message: str, *, max_tokens: int) -> Generation:
        with translated(f"Converse with {self.model_id}", catch=(ClientError, BotoCoreError)):
            response = self.client.converse(
                modelId=self.model_id,
                system=[{"text": system}],
                messages=[{"role": "user", "content": [{"text": message}]}],
                inferenceConfig={"maxTokens": max_tokens, "temperature": 0.0},
            )
        content = response.get("output", {}).get("message", {}).get("content", [])
        usage = response.get("usage", {})
        headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        return Generation(
            text="".join(block.get("text", "") for block in content),
            model_id=self.model_id,
            input_tokens=int(usage.get("inputTokens", 0)),
            output_tokens=int(usage.get("outputTokens", 0)),
            stop_reason=str(response.get("stopReason", "")),
            stand_in=headers.get(STAND_IN_HEADER),
        )
