"""``python -m rag_ingest_client.cli`` (the same as the ``rag-ingest`` console script)."""

from rag_ingest_client.cli.main import entry_point

entry_point()
