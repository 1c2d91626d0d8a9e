"""The vision describer (adapters/vision.py) and the reader that adds it to OCR: the Converse
request it sends (an image block and the prompt with the caption), Converse's limits, throttling as
TransientError, a refused image as no description, and the per-document cap. Converse's answers to
an image are Botocore's Stubber: the local model server answers Converse with an extractive
stand-in that ignores images (docs/answers.md), so nothing here describes an image for real."""

from __future__ import annotations

import io

import boto3
import pytest
from botocore.stub import Stubber
from PIL import Image
from rag_ingest.adapters.vision import MAX_DESCRIPTION_TOKENS, MAX_IMAGE_BYTES, BedrockDescriber, image_format
from rag_ingest.core.errors import TransientError
from rag_ingest.parsing.figures import ImageReading
from rag_ingest.parsing.image_reading import DescribingReader

pytestmark = pytest.mark.unit
MODEL = "amazon.nova-lite-v1:0"
PROMPT = "Describe this figure."


def png(size: tuple[int, int] = (120, 80)) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", size, 200).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def client() -> object:
    return boto3.client("bedrock-runtime", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")


def answer(text: str) -> dict[str, object]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1300, "outputTokens": 20, "totalTokens": 1320},
        "metrics": {"latencyMs": 900},
    }


def test_the_request_holds_the_image_and_the_prompt_with_the_caption(client: object) -> None:
    image = png()
    with Stubber(client) as stub:
        stub.add_response(
            "converse",
            answer("A bar chart of  river levels,\nhighest in March."),
            {
                "modelId": MODEL,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"image": {"format": "png", "source": {"bytes": image}}},
                            {"text": "Describe this figure.\n\nThe figure's caption: Figure 2: River levels"},
                        ],
                    }
                ],
                "inferenceConfig": {"maxTokens": MAX_DESCRIPTION_TOKENS, "temperature": 0.0},
            },
        )
        description = BedrockDescriber(MODEL, PROMPT, client).describe(image, context="Figure 2: River levels")
        stub.assert_no_pending_responses()
    assert description == "A bar chart of river levels, highest in March."


def test_throttling_is_transient_and_a_refused_image_gets_no_description(client: object) -> None:
    describer = BedrockDescriber(MODEL, PROMPT, client)
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ThrottlingException", http_status_code=429)
        stub.add_client_error("converse", "ValidationException", "bad image", 400)
        with pytest.raises(TransientError):
            describer.describe(png())
        assert describer.describe(png()) == ""
        stub.assert_no_pending_responses()


def test_images_over_converse_limits_are_not_sent(client: object) -> None:
    describer = BedrockDescriber(MODEL, PROMPT, client)
    with Stubber(client):  # any call would fail: none is expected
        assert describer.describe(png((8001, 10))) == ""
        assert describer.describe(b"\x89PNG\r\n\x1a\n" + bytes(MAX_IMAGE_BYTES)) == ""
        assert describer.describe(b"II*\x00 a TIFF") == ""
    assert [image_format(data) for data in (png(), b"\xff\xd8\xff\xe0", b"GIF89a", b"RIFF0000WEBP")] == [
        "png",
        "jpeg",
        "gif",
        "webp",
    ]


class Ocr:
    def read(self, image: bytes, *, context: str = "") -> ImageReading:
        return ImageReading(ocr_text="LABEL")


class Describer:
    def __init__(self) -> None:
        self.calls = 0

    def describe(self, image: bytes, *, context: str = "") -> str:
        self.calls += 1
        return f"described with {context}"


def test_the_describing_reader_adds_a_description_up_to_its_cap() -> None:
    describer = Describer()
    reader = DescribingReader(Ocr(), describer, max_described=2)

    readings = [reader.read(b"image", context=f"Figure {n}") for n in range(1, 4)]

    assert readings[0] == ImageReading(ocr_text="LABEL", description="described with Figure 1")
    assert readings[2] == ImageReading(ocr_text="LABEL")  # over the cap: OCR only
    assert (describer.calls, reader.described, reader.over_cap) == (2, 2, 1)
