"""A document and its next version with a fraction of its pages edited, deterministically.

``edit_pages`` edits page texts (for measuring chunk stability in process); ``write_pdf`` lays page
texts out as a real PDF (one PDF page per text page, core fonts), so the same two versions can be
uploaded through the local stack. The text comes from a corpus PDF (``bench/corpus/r-intro-full.pdf``,
113 pages, whose permission notice allows modified copies under the same notice: page 2 is kept).

    .venv/bin/python -m bench.versions out/   # writes v1.pdf and v2.pdf (10 % of pages edited)
"""

from __future__ import annotations

import argparse
import random
import re
from collections.abc import Sequence
from pathlib import Path

from rag_ingest.core.parsed import PageText
from rag_ingest.parsing.pdf.extract import parse_pdf

SOURCE_PDF = Path("bench/corpus/r-intro-full.pdf")
EDITED_FRACTION = 0.10
SEED = 40
# What an edit does to a page: a sentence in its middle reworded, one sentence added after it.
_ADDED_SENTENCE = "This passage was revised for the new edition of the manual, and its example updated."
_SENTENCE_END = re.compile(r"[.!?](?=\s)")


def pages_to_edit(page_count: int, fraction: float = EDITED_FRACTION, seed: int = SEED) -> list[int]:
    """Indexes (0-based) of the pages to edit: ``fraction`` of them, spread at random but the same every run."""
    count = max(1, round(page_count * fraction))
    return sorted(random.Random(seed).sample(range(page_count), count))


def edit_text(text: str) -> str:
    """A local edit: the sentence nearest the middle of the page gets a word changed and a sentence after it."""
    middle = len(text) // 2
    ends = [match.end() for match in _SENTENCE_END.finditer(text)]
    cut = min(ends, key=lambda end: abs(end - middle)) if ends else len(text)
    before, after = text[:cut], text[cut:]
    words = before.rsplit(" ", 2)
    if len(words) == 3:  # change the sentence's second-to-last word
        before = f"{words[0]} revised {words[2]}"
    return f"{before} {_ADDED_SENTENCE}{after}"


def edit_pages(pages: Sequence[PageText], fraction: float = EDITED_FRACTION, seed: int = SEED) -> list[PageText]:
    """The next version of ``pages``: ``fraction`` of them edited by :func:`edit_text`, the others as they were."""
    edited = set(pages_to_edit(len(pages), fraction, seed))
    return [
        PageText(page_number=page.page_number, text=edit_text(page.text) if index in edited else page.text)
        for index, page in enumerate(pages)
    ]


def source_pages(pdf: Path = SOURCE_PDF) -> list[PageText]:
    data = pdf.read_bytes()
    return parse_pdf(data, max_bytes=len(data) + 1, max_pages=10_000).pages


def write_pdf(pages: Sequence[PageText], path: Path) -> None:
    """One PDF page per text page (small type, so a page of text fits one page), in a core font."""
    from fpdf import FPDF  # a dev dependency: only the benchmarks and tests write PDFs

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=False)
    pdf.set_font("Helvetica", size=7)
    for page in pages:
        pdf.add_page()
        text = page.text.encode("latin-1", "replace").decode("latin-1")
        pdf.multi_cell(0, 3, text)
    pdf.output(str(path))


def write_versions(out: Path, fraction: float = EDITED_FRACTION) -> tuple[Path, Path]:
    """``out/v1.pdf`` (the source's text) and ``out/v2.pdf`` (``fraction`` of its pages edited)."""
    out.mkdir(parents=True, exist_ok=True)
    pages = source_pages()
    first, second = out / "v1.pdf", out / "v2.pdf"
    write_pdf(pages, first)
    write_pdf(edit_pages(pages, fraction), second)
    return first, second


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--fraction", type=float, default=EDITED_FRACTION)
    args = parser.parse_args(argv)
    for path in write_versions(args.out, args.fraction):
        print(path)


if __name__ == "__main__":
    main()
