"""The ingestion stages: the pipeline that runs Validate → Parse → Chunk → Embed → Index →
Finalize over the ports, chunking and the passages' rectangles, the content-addressed embedding
cache, the bulk lane's batch inference, and the rewrite of a document's chunks when its record
changes.

May import: ``core``, ``embeddings``, ``parsing`` (the readers Parse runs).
"""
