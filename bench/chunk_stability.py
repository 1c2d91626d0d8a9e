"""How many chunks survive a local edit: re-chunk documents with 10 % of their pages edited
(``bench.versions.edit_pages``) and count the new version's chunks whose text the old version
already had (each is an embedding-cache hit on re-ingest), in process, no AWS.

    .venv/bin/python -m bench.chunk_stability [PDF ...]   # default: the 100+ page corpus PDF and the eval corpus

"reachable" is the best any chunker could do: the share of new chunks that touch no edited page.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

from rag_ingest.core.parsed import Chunk, PageText
from rag_ingest.core.tokens import count_tokens
from rag_ingest.ingest.chunking import chunk_pages

from bench.versions import EDITED_FRACTION, SOURCE_PDF, edit_pages, pages_to_edit, source_pages

EVAL_CORPUS = Path("eval/corpus")
TARGET_TOKENS, OVERLAP_TOKENS = 300, 60  # the stack's defaults (infra/config.py ChunkingConfig)


@dataclass(frozen=True)
class Stability:
    name: str
    pages: int
    chunks: int
    unchanged: int
    reachable: int
    mean_tokens: float

    @property
    def unchanged_share(self) -> float:
        return self.unchanged / self.chunks if self.chunks else 1.0


def chunk(pages: list[PageText]) -> list[Chunk]:
    return chunk_pages(pages, count_tokens=count_tokens, target_tokens=TARGET_TOKENS, overlap_tokens=OVERLAP_TOKENS)


def measure(name: str, pages: list[PageText], fraction: float = EDITED_FRACTION) -> Stability:
    before = {c.text for c in chunk(pages)}
    after = chunk(edit_pages(pages, fraction))
    edited = {pages[index].page_number for index in pages_to_edit(len(pages), fraction)}
    untouched = [c for c in after if not edited & set(range(c.page_start, c.page_end + 1))]
    return Stability(
        name=name,
        pages=len(pages),
        chunks=len(after),
        unchanged=sum(c.text in before for c in after),
        reachable=len(untouched),
        mean_tokens=statistics.fmean(c.token_count for c in after) if after else 0.0,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--fraction", type=float, default=EDITED_FRACTION)
    args = parser.parse_args(argv)
    pdfs = args.pdfs or [SOURCE_PDF, *sorted(EVAL_CORPUS.glob("*.pdf"))]
    print(f"{'document':<34} {'pages':>5} {'chunks':>6} {'unchanged':>9} {'reachable':>9} {'tokens':>6}")
    results = []
    for pdf in pdfs:
        result = measure(pdf.name, source_pages(pdf), args.fraction)
        results.append(result)
        print(
            f"{result.name:<34} {result.pages:>5} {result.chunks:>6} {result.unchanged_share:>9.1%} "
            f"{result.reachable / max(1, result.chunks):>9.1%} {result.mean_tokens:>6.1f}"
        )
    chunks = sum(r.chunks for r in results)
    print(
        f"{'all':<34} {sum(r.pages for r in results):>5} {chunks:>6} "
        f"{sum(r.unchanged for r in results) / chunks:>9.1%} {sum(r.reachable for r in results) / chunks:>9.1%} "
        f"{statistics.fmean(r.mean_tokens for r in results):>6.1f}"
    )


if __name__ == "__main__":
    main()
