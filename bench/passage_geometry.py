"""How well passages get their rectangles (docs/formats.md, "Rectangles of a PDF passage"): for every
PDF of eval/corpus, parsed and chunked as the pipeline does, the share of the cleaned text's word
tokens matched to a word rectangle, the share of chunks with rectangles, the time of pdfium's pass
(Parse) and of the alignment (Chunk), and the size of the stored layouts.

    .venv/bin/python -m bench.passage_geometry
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.ingest.passage_boxes import align_page, coverage, passage_boxes
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.parsing.pdf.layout import text_layer_layouts, unpack_layout

CORPUS = Path(__file__).resolve().parents[1] / "eval" / "corpus"
_TOKEN = re.compile(r"\w+")


def main() -> None:
    print(
        f"{'document':32} {'pages':>5} {'tokens matched':>14} {'chunks boxed':>12} {'pdfium ms/page':>14} "
        f"{'align ms/page':>13} {'layout KB/page':>14}"
    )
    totals = {"pages": 0, "pdfium": 0.0, "align": 0.0, "bytes": 0}
    for path in sorted(CORPUS.glob("*.pdf")):
        data = path.read_bytes()
        parsed = parse_pdf(data, max_bytes=50 * 1024 * 1024, max_pages=5000)
        started = time.perf_counter()
        text_layer_layouts(data, [page.page_number for page in parsed.pages])
        pdfium_seconds = time.perf_counter() - started
        chunks = chunk_pages(
            parsed.pages, count_tokens=lambda text: len(text.split()), target_tokens=300, overlap_tokens=50
        )
        started = time.perf_counter()
        placed = passage_boxes(chunks, parsed.pages)
        align_seconds = time.perf_counter() - started
        matched = tokens = layout_bytes = 0
        for page in parsed.pages:
            tokens += len(_TOKEN.findall(page.text))
            if page.layout is not None:
                matched += len(align_page(page.text, unpack_layout(page.layout)))
                layout_bytes += len(page.layout.words) + len(page.layout.boxes)
        pages = parsed.page_count
        boxed = coverage(placed, {page.page_number: page for page in parsed.pages})
        print(
            f"{path.name:32} {pages:>5} {matched / max(tokens, 1):>14.3f} {boxed:>12.3f} "
            f"{pdfium_seconds / pages * 1000:>14.1f} {align_seconds / pages * 1000:>13.1f} "
            f"{layout_bytes / pages / 1024:>14.1f}"
        )
        totals["pages"] += pages
        totals["pdfium"] += pdfium_seconds
        totals["align"] += align_seconds
        totals["bytes"] += layout_bytes
    pages = int(totals["pages"])
    print(
        f"all {pages} pages: pdfium {totals['pdfium'] / pages * 1000:.1f} ms/page, alignment "
        f"{totals['align'] / pages * 1000:.1f} ms/page, layouts {totals['bytes'] / pages / 1024:.1f} KB/page"
    )


if __name__ == "__main__":
    main()
