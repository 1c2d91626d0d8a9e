"""Which cells a spreadsheet passage comes from: each chunk's ``cell_range`` (``Budget!A12:F40``).

A block of an XLSX or CSV page records the sheet row of each line of its text (``SheetCells``).
A chunk's range spans the rows of the lines its own offsets cover (the header row a table chunk
repeats at its top is not among them) and its blocks' columns; a chunk over two sheets names one
range per sheet, joined by ", ". Chunks of other formats are returned as they are.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple

from rag_ingest.core.cell_refs import cell_range
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import Chunk, PageText
from rag_ingest.ingest.chunking import PAGE_SEPARATOR


class _Line(NamedTuple):
    """A line of a spreadsheet block, as offsets into the document text, and the cells it is."""

    start: int
    end: int
    sheet: str | None
    first_column: int
    last_column: int
    row: int  # 0: a line the sheet does not hold (a made-up header)


def with_cell_ranges(chunks: list[Chunk], pages: Sequence[PageText]) -> list[Chunk]:
    """``chunks`` (cut from ``pages``), each spreadsheet chunk with its ``cell_range``."""
    lines = _lines(pages)
    if not lines:
        return chunks
    starts = [line.start for line in lines]
    ranged = []
    for chunk in chunks:
        areas: dict[str | None, list[int]] = {}  # sheet -> first row, last row, first column, last column
        index = max(0, bisect_right(starts, chunk.char_start) - 1)
        while index < len(lines) and lines[index].start < chunk.char_end:
            line = lines[index]
            index += 1
            if line.end <= chunk.char_start or not line.row:
                continue
            area = areas.setdefault(line.sheet, [line.row, line.row, line.first_column, line.last_column])
            area[0], area[1] = min(area[0], line.row), max(area[1], line.row)
            area[2], area[3] = min(area[2], line.first_column), max(area[3], line.last_column)
        if areas:
            named = ", ".join(
                cell_range(sheet, left, right, top, bottom) for sheet, (top, bottom, left, right) in areas.items()
            )
            chunk = chunk.model_copy(update={"cell_range": named})
        ranged.append(chunk)
    return ranged


def _lines(pages: Sequence[PageText]) -> list[_Line]:
    """Every line of the pages' spreadsheet blocks, in document order."""
    lines: list[_Line] = []
    page_start = 0
    for page in pages:
        for block in page.blocks:
            cells = block.cells
            if cells is None:
                continue
            texts = page.text[block.start : block.end].split("\n")
            if len(texts) != len(cells.rows):  # a reader's bug: the passage is still indexed, uncited
                logger.warning("a spreadsheet block's lines and rows disagree", extra={"page": page.page_number})
                continue
            offset = page_start + block.start
            for text, row in zip(texts, cells.rows, strict=True):
                lines.append(_Line(offset, offset + len(text), cells.sheet, cells.first_column, cells.last_column, row))
                offset += len(text) + 1
        page_start += len(page.text) + len(PAGE_SEPARATOR)
    return lines
