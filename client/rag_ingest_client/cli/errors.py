"""The errors that end a command with one line on stderr and exit code 1 (never a traceback)."""

from __future__ import annotations

from rag_ingest_client.http import RagIngestError


class CliError(RagIngestError):
    """The command cannot go on: a usage problem found late, a missing file, a refusal explained."""


class TargetError(CliError):
    """The target cannot serve any request (unreachable, or the caller is not let in): no use going on."""
