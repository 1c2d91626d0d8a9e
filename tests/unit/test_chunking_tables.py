"""Tables of the structured formats are chunked between rows, with the header row repeated on
every piece after the first; cells never leave their row."""

from __future__ import annotations

import pytest
from rag_ingest.core.parsed import DocumentFormat
from rag_ingest.core.tokens import count_tokens
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.blocks import FormatLimits
from rag_ingest.parsing.formats import read_structured

pytestmark = pytest.mark.unit

HEADER = "| Station | River | Flow (m3/s) | Gauge opened |"
ROWS = [f"| Station {n:02d} | River {chr(65 + n % 26)}ale | {100 + 7 * n} | {1900 + n} |" for n in range(60)]
MARKDOWN = "\n".join(
    [
        "# River gauges",
        "",
        "The network's gauging stations and their mean flows.",
        "",
        HEADER,
        "|---|---|---|---|",
        *ROWS,
        "",
        "## Method",
        "",
        "Flows are the mean of the last thirty years.",
    ]
)


def chunks(target_tokens: int = 120) -> list:
    pages = read_structured(MARKDOWN.encode(), DocumentFormat.MARKDOWN, FormatLimits(max_pages=10)).pages
    return chunk_pages(pages, count_tokens=count_tokens, target_tokens=target_tokens, overlap_tokens=0)


def test_a_long_table_is_cut_between_rows_and_every_piece_repeats_the_header() -> None:
    header = "Station | River | Flow (m3/s) | Gauge opened"
    table_chunks = [chunk for chunk in chunks() if "Station " in chunk.text]
    assert len(table_chunks) >= 3, [chunk.text for chunk in table_chunks]
    for chunk in table_chunks:
        assert header in chunk.text.splitlines(), chunk.text
        assert chunk.token_count <= 120
    # Every row whole in exactly one chunk (no overlap asked), in order.
    rows = [f"Station {n:02d} | River {chr(65 + n % 26)}ale | {100 + 7 * n} | {1900 + n}" for n in range(60)]
    found = [line for chunk in table_chunks for line in chunk.text.splitlines() if line.startswith("Station ")]
    assert [line for line in found if line != header] == rows


def test_a_piece_after_the_first_starts_with_the_header_then_its_rows() -> None:
    pieces = [chunk for chunk in chunks() if chunk.text.startswith("Station | River")]
    assert len(pieces) >= 2
    for piece in pieces[1:]:
        assert piece.text.splitlines()[1].startswith("Station ")  # a row right under the header
        assert piece.anchor == "river-gauges" and piece.heading_path == ["River gauges"]


def test_a_table_that_fits_stays_one_block_with_its_header_once() -> None:
    (chunk,) = [chunk for chunk in chunks(target_tokens=2000) if "Station 00" in chunk.text]
    assert chunk.text.count("Station | River") == 1 and "Station 59" in chunk.text
