"""Error codes of FAILED documents as sentences a person understands."""

from __future__ import annotations

from rag_ingest.core.errors import ERROR_SENTENCES

SENTENCES: dict[str, str] = {code.value: text for code, text in ERROR_SENTENCES.items()}


def sentence(code: str | None) -> str:
    """The sentence of a code; unknown codes (added after this CLI was built) read as themselves."""
    if not code:
        return "The document failed."
    return SENTENCES.get(code, f"The document failed ({code}).")
