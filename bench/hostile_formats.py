"""The hostile documents of docs/formats.md, each detected and read as Validate and Parse do, with
its outcome and time (the table in docs/formats.md, "Hostile inputs").

    .venv/bin/python -m bench.hostile_formats
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rag_ingest.core.errors import PermanentError
from rag_ingest.parsing.blocks import SNIFF_BYTES, FormatLimits
from rag_ingest.parsing.formats import detect_format, read_structured

from samples import documents, spreadsheets

# cdk.json's limits (limits.maxPages, limits.maxFileBytes).
MAX_PAGES = 5000
MAX_FILE_BYTES = 50 * 1024 * 1024

CASES: dict[str, Callable[[], bytes]] = {
    "zip bomb DOCX (600 MB of XML declared)": documents.zip_bomb_docx,
    "zip bomb DOCX, one 300 MB part (under the total)": lambda: documents.zip_bomb_docx(300 * 1024 * 1024),
    "entity expansion DOCX": documents.entity_expansion_docx,
    "external entity DOCX": documents.external_entity_docx,
    "PPTX of 10,000 slides": documents.many_slides_pptx,
    "HTML nested 100,000 deep": documents.deeply_nested_html,
    "Markdown, one 10 MB line": documents.one_line_markdown,
    "legacy .doc (OLE2)": documents.ole2_document,
    "macro-enabled .docm": lambda: documents.macro_enabled(documents.docx_bytes(), "word/document.xml"),
    "undecodable text": documents.undecodable_text,
    "zip bomb XLSX (600 MB of XML declared)": spreadsheets.zip_bomb_xlsx,
    "entity expansion XLSX": spreadsheets.entity_expansion_xlsx,
    "XLSX of 1,000,000 rows": spreadsheets.million_rows_xlsx,
    "XLSX, one 10 MB cell": spreadsheets.huge_cell_xlsx,
    "CSV of 1,000,000 rows": spreadsheets.million_rows_csv,
    "CSV, one 10 MB cell": spreadsheets.huge_cell_csv,
    "macro-enabled .xlsm": spreadsheets.macro_enabled_xlsx,
    "legacy .xls (OLE2)": spreadsheets.legacy_xls,
}


def outcome(data: bytes) -> str:
    try:
        document_format = detect_format(
            data[:SNIFF_BYTES], size=len(data), max_bytes=MAX_FILE_BYTES, read_all=lambda: data
        )
        read_structured(data, document_format, FormatLimits(max_pages=MAX_PAGES))
    except PermanentError as error:
        return error.code.value
    return "READ (no code)"


def main() -> None:
    print("| hostile file | size | outcome | time |")
    print("|---|---|---|---|")
    for name, make in CASES.items():
        data = make()
        started = time.perf_counter()
        result = outcome(data)
        print(f"| {name} | {len(data):,} bytes | `{result}` | {(time.perf_counter() - started) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
