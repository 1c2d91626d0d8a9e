"""LocalMiniLMEmbedder on the real int8 ONNX model."""

from __future__ import annotations

import numpy as np
import pytest
from rag_ingest.core.errors import ConfigurationError, ErrorCode, PermanentError
from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import DEFAULT_MODEL_ID, LocalMiniLMEmbedder

pytestmark = pytest.mark.unit

TEXTS = [
    "The lighthouse keeper climbed the stairs to light the lamp at dusk.",
    "At nightfall the keeper went up the tower to switch on the light.",
    "Quarterly tax returns must be filed before the end of April.",
    "A sourdough starter needs daily feeding with flour and water.",
    "Short.",
]


@pytest.fixture(scope="module")
def embedder() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


def cosine(left: list[float], right: list[float]) -> float:
    return float(np.dot(left, right) / (np.linalg.norm(left) * np.linalg.norm(right)))


def test_vectors_have_384_dimensions_and_unit_norm(embedder: LocalMiniLMEmbedder) -> None:
    vectors = embedder.embed(TEXTS)
    assert len(vectors) == len(TEXTS)
    assert all(len(vector) == 384 for vector in vectors)
    assert np.allclose(np.linalg.norm(np.array(vectors), axis=1), 1.0, atol=1e-5)


def test_paraphrases_are_closer_than_unrelated_text(embedder: LocalMiniLMEmbedder) -> None:
    keeper, paraphrase, taxes, sourdough, _ = embedder.embed(TEXTS)
    assert cosine(keeper, paraphrase) > 0.6
    assert cosine(keeper, paraphrase) > cosine(keeper, taxes) + 0.3
    assert cosine(keeper, paraphrase) > cosine(keeper, sourdough) + 0.3


def test_order_is_preserved_whatever_the_lengths(embedder: LocalMiniLMEmbedder) -> None:
    forward = embedder.embed(TEXTS)
    backward = embedder.embed(TEXTS[::-1])
    assert np.allclose(np.array(forward), np.array(backward[::-1]), atol=1e-5)


def test_batched_result_matches_single_text_result(embedder: LocalMiniLMEmbedder) -> None:
    # Padding to the batch width must not change a text's vector (masked mean pooling);
    # int8 activation scales depend on the batch, so compare by cosine.
    batched = embedder.embed(TEXTS)
    for text, vector in zip(TEXTS, batched, strict=True):
        assert cosine(embedder.embed([text])[0], vector) > 0.99


def test_small_batches_give_the_same_vectors() -> None:
    small_batches = LocalMiniLMEmbedder(batch_size=2).embed(TEXTS)
    one_batch = LocalMiniLMEmbedder(batch_size=16).embed(TEXTS)
    for left, right in zip(small_batches, one_batch, strict=True):
        assert cosine(left, right) > 0.99


def test_a_spinning_session_gives_the_same_vectors(embedder: LocalMiniLMEmbedder) -> None:
    # The embedding server's query lane runs a second session whose threads spin (latency);
    # its vectors must be the ones the passages were indexed with.
    spinning = LocalMiniLMEmbedder(spin_wait=True)
    assert spinning._session is not embedder._session
    assert np.allclose(spinning.embed(TEXTS), embedder.embed(TEXTS), atol=1e-6)


def test_empty_input_gives_no_vectors(embedder: LocalMiniLMEmbedder) -> None:
    assert embedder.embed([]) == []


def test_input_at_the_limit_is_accepted(embedder: LocalMiniLMEmbedder) -> None:
    assert embedder.max_input_tokens == 510
    assert len(embedder.embed(["word " * 510])[0]) == 384


def test_input_over_512_tokens_raises_instead_of_truncating(embedder: LocalMiniLMEmbedder) -> None:
    with pytest.raises(PermanentError) as caught:
        embedder.embed(["short text", "word " * 511])
    assert caught.value.code is ErrorCode.INPUT_TOO_LONG
    assert "text 1 has 511 tokens" in caught.value.detail


def test_model_file_checksum_is_verified() -> None:
    with pytest.raises(ConfigurationError, match="sha256"):
        LocalMiniLMEmbedder(expected_sha256="0" * 64)


def test_factory_builds_the_local_embedder() -> None:
    embedder = create_embedder("local", DEFAULT_MODEL_ID, 384)
    assert isinstance(embedder, Embedder)
    assert (embedder.model_id, embedder.dimension) == (DEFAULT_MODEL_ID, 384)


@pytest.mark.parametrize(
    ("provider", "model_id", "dimension", "message"),
    [
        ("openai", DEFAULT_MODEL_ID, 384, "unknown embedding provider 'openai'"),
        ("local", DEFAULT_MODEL_ID, 768, "384"),
        ("local", "bert-base-uncased", 384, "bert-base-uncased"),
        ("bedrock", "amazon.titan-embed-text-v2:0", 1024, "bedrock-runtime client"),
    ],
)
def test_factory_rejects_bad_configuration(provider: str, model_id: str, dimension: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_embedder(provider, model_id, dimension)
