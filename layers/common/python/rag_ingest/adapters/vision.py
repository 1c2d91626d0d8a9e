"""A Bedrock vision model describing a figure through ``Converse``: the ``Describer`` port.

One user message holds an image content block (``format`` png, jpeg, gif or webp; ``source.bytes``:
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ImageBlock.html) and the
prompt with the figure's caption. Converse takes images up to 3.75 MB and 8,000 px a side
(https://docs.aws.amazon.com/bedrock/latest/userguide/conversation-inference-call.html): a larger
image is not sent (an empty description). Throttling and 5xx are ``TransientError`` (the stage is
retried); a refused image is logged and gets no description. Off unless FIGURE_VISION_MODEL_ID is set.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rag_ingest.adapters.aws import bedrock_runtime_client, translated
from rag_ingest.core.logs import logger
from rag_ingest.parsing.figures import image_size

MAX_IMAGE_BYTES = 3_750_000
MAX_IMAGE_SIDE_PX = 8000
#: A description is a passage's paragraph, not an essay: the output tokens paid per figure, at most.
MAX_DESCRIPTION_TOKENS = 300

_FORMATS = {b"\x89PNG": "png", b"\xff\xd8\xff": "jpeg", b"GIF8": "gif"}


def image_format(image: bytes) -> str | None:
    """Converse's name for the image's format, from its first bytes (None: not one it takes)."""
    if image[:4] == b"RIFF" and image[8:12] == b"WEBP":
        return "webp"
    return next((name for magic, name in _FORMATS.items() if image.startswith(magic)), None)


class BedrockDescriber:
    """Describes an image with one model (a foundation model's id or an inference profile's)."""

    def __init__(self, model_id: str, prompt: str, client: Any = None) -> None:
        self.client = client if client is not None else bedrock_runtime_client()
        self.model_id = model_id
        self.prompt = prompt

    def describe(self, image: bytes, *, context: str = "") -> str:
        kind = image_format(image)
        size = image_size(image)
        if kind is None or len(image) > MAX_IMAGE_BYTES or (size and max(size) > MAX_IMAGE_SIDE_PX):
            logger.warning("figure not described: over Converse's image limits", extra={"bytes": len(image)})
            return ""
        text = self.prompt if not context else f"{self.prompt}\n\nThe figure's caption: {context}"
        request = {
            "modelId": self.model_id,
            "messages": [
                {"role": "user", "content": [{"image": {"format": kind, "source": {"bytes": image}}}, {"text": text}]}
            ],
            "inferenceConfig": {"maxTokens": MAX_DESCRIPTION_TOKENS, "temperature": 0.0},
        }
        with translated(
            f"Converse with {self.model_id}", expect={"ValidationException"}, catch=(ClientError, BotoCoreError)
        ) as refusal:
            response = self.client.converse(**request)
        if refusal.refused:  # an image the model refuses: the figure keeps its caption and OCR
            logger.warning("figure not described: %s", refusal.error)
            return ""
        content = response.get("output", {}).get("message", {}).get("content", [])
        return " ".join("".join(block.get("text", "") for block in content).split())
