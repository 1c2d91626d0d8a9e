"""What finding tables costs Parse (docs/formats.md, "Tables"): each PDF of the eval corpus parsed as
Parse does (``parse_page_range`` over the whole document), table handling off and on, best of
``--repeat`` runs; milliseconds per page, the pages the pre-check passed on to pdfplumber and the
tables placed.

    .venv/bin/python -m bench.parse_tables [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rag_ingest.core.parsed import BlockKind
from rag_ingest.parsing.pdf.extract import parse_page_range
from rag_ingest.parsing.pdf.tables import candidate_pages

CORPUS = Path(__file__).resolve().parents[1] / "eval" / "corpus"
MAX_BYTES = 50 * 1024 * 1024
MAX_PAGES = 5000


def best_seconds(data: bytes, *, tables: bool, repeat: int) -> tuple[float, int, int]:
    """(best wall time, pages, TABLE blocks) of parsing ``data`` whole."""
    best = float("inf")
    pages = blocks = 0
    for _ in range(repeat):
        started = time.perf_counter()
        parsed = parse_page_range(
            data, first_page=1, last_page=None, max_bytes=MAX_BYTES, max_pages=MAX_PAGES, tables=tables
        )
        best = min(best, time.perf_counter() - started)
        pages = parsed.pages_parsed
        blocks = sum(1 for page in parsed.pages for block in page.blocks if block.kind is BlockKind.TABLE)
    return best, pages, blocks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    totals = [0.0, 0.0]
    all_pages = all_candidates = all_tables = 0
    print(f"{'document':<32} {'pages':>5} {'off ms/p':>9} {'on ms/p':>8} {'pre-check':>9} {'tables':>6}")
    for pdf in sorted(CORPUS.glob("*.pdf")):
        data = pdf.read_bytes()
        off, pages, _ = best_seconds(data, tables=False, repeat=args.repeat)
        on, _, tables = best_seconds(data, tables=True, repeat=args.repeat)
        candidates = len(candidate_pages(data, range(1, pages + 1)))
        totals[0] += off
        totals[1] += on
        all_pages += pages
        all_candidates += candidates
        all_tables += tables
        print(
            f"{pdf.name:<32} {pages:>5} {off / pages * 1000:>9.1f} {on / pages * 1000:>8.1f}"
            f" {candidates:>9} {tables:>6}"
        )
    off_ms, on_ms = (total / all_pages * 1000 for total in totals)
    print(
        f"{'all':<32} {all_pages:>5} {off_ms:>9.1f} {on_ms:>8.1f} {all_candidates:>9} {all_tables:>6}"
        f"   (+{on_ms - off_ms:.1f} ms a page, +{(on_ms / off_ms - 1) * 100:.0f} %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
