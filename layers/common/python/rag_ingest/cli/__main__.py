"""``python -m rag_ingest.cli`` (the same as the ``rag-ingest`` console script)."""

from rag_ingest.cli.main import entry_point

entry_point()
