"""The source kinds' configurations: each kind's model checks its config at creation and fills its
defaults, so a bad config is a 400 then, never a failed sync later. May import this package only."""

from __future__ import annotations

from typing import Any

from rag_ingest.sources.model import SourceKind


def validate_config(kind: SourceKind, config: dict[str, Any]) -> dict[str, Any]:
    """The config as stored (defaults filled); ``ValueError`` naming what is wrong."""
    if kind == "custom":
        if config:
            raise ValueError("a custom source takes no config: its items are pushed")
        return {}
    raise ValueError(f"{kind} sources are not available yet")
