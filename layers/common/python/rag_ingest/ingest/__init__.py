"""The ingestion stages' logic: PDF parsing and its limits, OCR of pages without a text layer,
chunking, the content-addressed embedding cache, and the pipeline that runs Validate → Parse →
Chunk → Embed → Index → Finalize over the ports.

May import: ``core``, ``embeddings``.
"""
