"""Bedrock Runtime's ``Converse`` as the ``AnswerModel`` port: one user message, one answer.

The request is ``modelId``, ``system`` and ``messages`` with ``inferenceConfig`` (``maxTokens``,
``temperature`` 0); the answer's ``output.message.content`` text blocks, ``usage`` and
``stopReason`` (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).
``ConverseStream`` takes the same request and answers with events: ``contentBlockDelta`` text,
``messageStop`` and ``metadata`` usage (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStreamOutput.html).
The local model server names a stand-in in the ``x-local-answer-model`` header.
"""

from __future__ import annotations

from collections.abc import Iterator
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

    def _request(self, system: str, message: str, max_tokens: int) -> dict[str, Any]:
        return {
            "modelId": self.model_id,
            "system": [{"text": system}],
            "messages": [{"role": "user", "content": [{"text": message}]}],
            "inferenceConfig": {"maxTokens": max_tokens, "temperature": 0.0},
        }

    def generate(self, system: str, message: str, *, max_tokens: int) -> Generation:
        with translated(f"Converse with {self.model_id}", catch=(ClientError, BotoCoreError)):
            response = self.client.converse(**self._request(system, message, max_tokens))
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

    def stream(self, system: str, message: str, *, max_tokens: int) -> Iterator[str | Generation]:
        # An error inside the stream (throttling, a model stream error) is raised by the iterator.
        with translated(f"ConverseStream with {self.model_id}", catch=(ClientError, BotoCoreError)):
            response = self.client.converse_stream(**self._request(system, message, max_tokens))
            headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            texts: list[str] = []
            usage: dict[str, Any] = {}
            stop_reason = ""
            for event in response["stream"]:
                text = event.get("contentBlockDelta", {}).get("delta", {}).get("text")
                if text:
                    texts.append(text)
                    yield text
                stop_reason = str(event.get("messageStop", {}).get("stopReason", stop_reason))
                usage = event.get("metadata", {}).get("usage", usage)
        yield Generation(
            text="".join(texts),
            model_id=self.model_id,
            input_tokens=int(usage.get("inputTokens", 0)),
            output_tokens=int(usage.get("outputTokens", 0)),
            stop_reason=stop_reason,
            stand_in=headers.get(STAND_IN_HEADER),
        )
