"""The ``rag-ingest`` command line (``python -m rag_ingest.cli`` runs the same): user commands against
the HTTP API, the smoke test, and the operator commands redrive, replay and reap."""

from rag_ingest.cli.main import build_parser, entry_point, main
from rag_ingest.cli.operator import duration, error_code, request_for

__all__ = ["build_parser", "duration", "entry_point", "error_code", "main", "request_for"]
