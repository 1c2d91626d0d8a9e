"""Deterministic vectors: what the server answers instead of running a model
(``LOCAL_EMBEDDING_VECTORS=deterministic``), so a benchmark measures orchestration, not this CPU.

A text's vector is a normal draw per coordinate, seeded by a hash of the text and the size, unit
length when ``normalize`` asks: the same text always gets the same vector, in any process. Served
under the Bedrock embedder's model ids (``rag_ingest.embeddings.bedrock.SERVED_MODELS``); tokens are
counted with MiniLM's WordPiece. Retrieval quality is meaningless in this mode. Why and what it
means for quotas: docs/local-stack.md, "The Bedrock emulation".
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence

from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import LOCAL_MODEL_ID
from rag_ingest.embeddings.bedrock import SERVED_MODELS, TITAN_V2_MODEL_ID

from local.embedding_server.server import ServedModel

#: The vector size a request without ``dimensions`` gets, per model (Titan V2: 1024, its default).
DEFAULT_DIMENSIONS = {TITAN_V2_MODEL_ID: 1024, LOCAL_MODEL_ID: SERVED_MODELS[LOCAL_MODEL_ID].dimensions[0]}


def deterministic_vector(text: str, dimension: int, normalize: bool = True) -> list[float]:
    """``dimension`` floats derived from ``text`` alone: unit length when ``normalize``."""
    if dimension < 1:
        raise ValueError(f"dimension must be at least 1, not {dimension}")
    digest = hashlib.blake2b(f"{dimension}\0{text}".encode(), digest_size=16).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimension)]
    if not normalize:
        return vector
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector]


def deterministic_models() -> list[ServedModel]:
    """The Bedrock embedder's models, answered with deterministic vectors; the local model's id first."""
    served = []
    for model_id in (LOCAL_MODEL_ID, TITAN_V2_MODEL_ID):
        model = SERVED_MODELS[model_id]
        default = DEFAULT_DIMENSIONS[model_id]

        def embed(texts: Sequence[str], size: int = default) -> list[list[float]]:
            return [deterministic_vector(text, size) for text in texts]

        served.append(
            ServedModel(
                model_id=model_id,
                dimension=default,
                max_input_tokens=model.max_input_tokens,
                count_tokens=count_tokens,
                embed=embed,
                other_dimensions=tuple(sorted((size for size in model.dimensions if size != default), reverse=True)),
                vector=deterministic_vector,
            )
        )
    return served
