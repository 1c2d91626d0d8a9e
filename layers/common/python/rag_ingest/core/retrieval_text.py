"""The contextual text of a chunk: its document's title and heading path, then the chunk itself.

A section's second chunk does not repeat its heading, so the contextual text starts with a context
line (``Admin guide > 4 Backups > Restoring a snapshot``) of at most :data:`MAX_CONTEXT_CHARS`
characters, then the chunk's text. BM25 indexes it (:data:`SHIPPED_CONTEXT_LINE`); Embed embeds
the plain text, and people always see the plain text. The title is the PDF's metadata title when
meaningful, else the file name made readable (:func:`document_title`). Why BM25 and not the
embedding, with the figures: docs/retrieval.md, "Ablation".
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from rag_ingest.core.parsed import Chunk

#: Whether BM25 indexes the contextual text (title and heading path before the chunk's text):
#: on, because it helps on the eval's test split taken as a whole (see the module docstring).
SHIPPED_CONTEXT_LINE = True
CONTEXT_SEPARATOR = " > "
#: The context line's budget: about 40-60 WordPiece tokens of English.
MAX_CONTEXT_CHARS = 200
_ELLIPSIS = "…"

# Metadata titles that name nothing: placeholders and the source file of an export.
_PLACEHOLDER_TITLES = frozenset({"untitled", "untitled document", "title", "document", "none", "null"})
_EXPORT_PREFIX = re.compile(r"^(microsoft (word|powerpoint|excel)|untitled)\s*-\s*", re.IGNORECASE)
_FILE_NAME = re.compile(r"\.(docx?|odt|rtf|pdf|tex|dvi|ps|txt|html?|md|pages|indd)$", re.IGNORECASE)
_WORD_SEPARATORS = re.compile(r"[_\s]+|(?<=[a-z])-(?=[a-z])|(?<=\w)\.(?=\w)", re.IGNORECASE)
_LETTER = re.compile(r"[^\W\d_]")


def meaningful_title(metadata_title: str | None) -> str | None:
    """``metadata_title`` cleaned, or None when it names nothing (empty, a placeholder, a file name)."""
    if not metadata_title:
        return None
    title = " ".join(_EXPORT_PREFIX.sub("", metadata_title).split())
    if _FILE_NAME.search(title) or title.casefold() in _PLACEHOLDER_TITLES:
        return None
    if len(_LETTER.findall(title)) < 3:
        return None
    return title


def readable_file_stem(filename: str) -> str:
    """``admin_guide-v2.pdf`` -> ``admin guide v2``: the file name without extension or separators."""
    stem = PurePosixPath(filename).stem if filename else ""
    return " ".join(_WORD_SEPARATORS.sub(" ", stem).split())


def document_title(metadata_title: str | None, filename: str | None) -> str:
    """The title a document's chunks carry: its metadata title if meaningful, else its file name
    made readable ('' when there is neither)."""
    return meaningful_title(metadata_title) or readable_file_stem(filename or "")


def context_line(title: str, heading_path: list[str]) -> str:
    """``title > heading > subheading`` (empty parts left out), cut to MAX_CONTEXT_CHARS: the
    innermost heading is the most specific, so the title and outer headings are shortened first."""
    parts = [part for part in (title, *heading_path) if part.strip()]
    line = CONTEXT_SEPARATOR.join(" ".join(part.split()) for part in parts)
    if len(line) <= MAX_CONTEXT_CHARS:
        return line
    return _ELLIPSIS + line[-(MAX_CONTEXT_CHARS - len(_ELLIPSIS)) :].lstrip()


def indexed_text(chunk: Chunk) -> str:
    """``chunk``'s contextual text: the context line, a blank line, its text (what BM25 indexes
    when the vector store's ``context_line`` is on)."""
    context = context_line(chunk.document_title, chunk.heading_path)
    return f"{context}\n\n{chunk.text}" if context else chunk.text
