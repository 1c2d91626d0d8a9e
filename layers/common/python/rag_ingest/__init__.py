"""rag-ingest domain package: shared by the Lambda handlers, the tests and the local runtime."""

__version__ = "0.1.0"
