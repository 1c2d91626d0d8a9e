"""Text embeddings behind one interface: a local ONNX MiniLM model offline, Amazon Bedrock in AWS."""

from rag_ingest.embeddings.base import BEDROCK_PROVIDER, LOCAL_PROVIDER, Embedder, create_embedder

__all__ = ["BEDROCK_PROVIDER", "LOCAL_PROVIDER", "Embedder", "create_embedder"]
