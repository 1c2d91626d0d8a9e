"""The ``rag-ingest`` command (``python -m rag_ingest_client.cli`` runs the same): the user commands
against the HTTP API, the smoke test, preflight and the operator commands (docs/cli.md).

May import: ``rag_ingest_client`` outside ``operator``, and ``operator`` only inside the function
that runs one of its commands.
"""

from rag_ingest_client.cli.main import build_parser, entry_point, main

__all__ = ["build_parser", "entry_point", "main"]
