"""The format readers: an upload's bytes in, pages of text and blocks out (``rag_ingest.core.parsed``).

``formats`` tells what an upload is by its bytes and hands it to its reader: ``pdf`` (a
subpackage), ``office`` (DOCX and PPTX) or ``html_markdown`` (HTML, Markdown and plain text).
They share ``blocks`` (decoding, limits, pages of blocks), ``headings`` (headings found in plain
text) and ``ocr`` (pages without a text layer). A reader raises ``PermanentError`` for a file it
refuses and keeps nothing between documents.

May import: ``core``.
"""
