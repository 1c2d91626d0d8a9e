"""Text embeddings behind one interface (``base.Embedder``): a local ONNX MiniLM model offline,
Amazon Bedrock in AWS; ``factory.create_embedder`` builds the configured one.

May import: ``core``.
"""
