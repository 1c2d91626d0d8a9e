"""The text a chunk is found by: document title, heading path, then the chunk's text."""

from __future__ import annotations

import pytest
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.retrieval_text import (
    CONTEXT_SEPARATOR,
    MAX_CONTEXT_CHARS,
    context_line,
    document_title,
    indexed_text,
    meaningful_title,
    readable_file_stem,
)

pytestmark = pytest.mark.unit


def chunk(text: str = "Stop the service first.", heading_path: list[str] | None = None, title: str = "") -> Chunk:
    return Chunk(
        chunk_index=0,
        text=text,
        page_start=1,
        page_end=1,
        heading_path=heading_path or [],
        char_start=0,
        char_end=len(text),
        token_count=5,
        document_title=title,
    )


def test_indexed_text_is_title_and_heading_path_then_the_plain_text() -> None:
    restoring = chunk(heading_path=["4 Backups", "Restoring a snapshot"], title="Admin guide")
    assert indexed_text(restoring) == "Admin guide > 4 Backups > Restoring a snapshot\n\nStop the service first."
    assert restoring.text == "Stop the service first."  # what people see is untouched


def test_a_chunk_without_title_or_headings_is_indexed_as_its_text() -> None:
    assert indexed_text(chunk()) == "Stop the service first."
    assert indexed_text(chunk(heading_path=["  ", ""], title="")) == "Stop the service first."


def test_context_line_folds_white_space_and_skips_empty_parts() -> None:
    assert context_line("Admin\nguide", ["", "4  Backups"]) == f"Admin guide{CONTEXT_SEPARATOR}4 Backups"


def test_a_long_context_keeps_its_innermost_heading_within_the_budget() -> None:
    line = context_line("T" * 150, ["Outer " * 20, "Restoring a snapshot"])
    assert len(line) == MAX_CONTEXT_CHARS
    assert line.startswith("…")
    assert line.endswith("Restoring a snapshot")


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ("LaTeX News", "LaTeX News"),
        ("  Producing PDFs   with groff ", "Producing PDFs with groff"),
        ("Microsoft Word - Installation Guide", "Installation Guide"),
        ("Microsoft Word - report.docx", None),
        ("chapter3.tex", None),
        ("Untitled", None),
        ("untitled document", None),
        ("", None),
        (None, None),
        ("12", None),
        ("A-1", None),
    ],
)
def test_meaningful_title(metadata: str | None, expected: str | None) -> None:
    assert meaningful_title(metadata) == expected


def test_the_file_name_stands_in_for_a_missing_title() -> None:
    assert readable_file_stem("admin_guide-v2.pdf") == "admin guide v2"
    assert readable_file_stem("R-intro.pdf") == "R intro"
    assert readable_file_stem("") == ""
    assert document_title(None, "sil-padauk-features.pdf") == "sil padauk features"
    assert document_title("Untitled", "release notes.pdf") == "release notes"
    assert document_title("LaTeX News", "ltnews35.pdf") == "LaTeX News"
    assert document_title(None, None) == ""
