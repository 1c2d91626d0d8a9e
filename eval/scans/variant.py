"""The scanned variant of the eval corpus: answer pages and their neighbours replaced by scans of themselves.

    .venv/bin/python -m eval.scans.variant [--out DIR]

Each chosen page is rasterised from the real PDF by pdfium, degraded as ``eval.scans.generate``'s
``desk-scan-200`` style, and put back as an image-only page of the same size; the other pages keep
their text layer. Seeded, so a rebuild gives the same pages; a PDF whose sidecar ``<name>.json`` (source
hash, scanned pages) still matches is reused. Imports ``eval`` and the domain package's OCR.
Why these pages, and the results: docs/ocr.md (Retrieval on scanned pages).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pypdf import PdfReader, PdfWriter
from rag_ingest.parsing.ocr.engine import OCR_DPI, OcrEngine, OcrResult, render_page_png

from eval.retrieval import REPO_DIR, Question, corpus_pdfs, load_questions
from eval.scans.generate import STYLES, PageStyle, degrade, encode_for_pdf, images_to_pdf

DEFAULT_OUT = REPO_DIR / ".build" / "eval-scanned"
#: The scanner every scanned page goes through: the desk-scan-200 style (docs/ocr.md's CER table).
SCANNER = next(style for style in STYLES if style.name == "desk-scan-200")
#: Pages either side of an answer page that are scanned with it.
NEIGHBOURS = 1
#: Bump when the way pages are scanned changes: cached variants made before are rebuilt.
BUILDER_VERSION = 1


def pages_to_scan(answer_pages: Iterable[int], page_count: int, neighbours: int = NEIGHBOURS) -> list[int]:
    """The 1-based pages to scan: every answer page and ``neighbours`` pages either side of it."""
    chosen = {
        page + offset
        for page in answer_pages
        for offset in range(-neighbours, neighbours + 1)
        if 1 <= page + offset <= page_count
    }
    return sorted(chosen)


def scan_page(pdf: bytes, page_index: int, style: PageStyle, rng: random.Random) -> bytes:
    """A one-page image-only PDF: page ``page_index`` (0-based) of ``pdf`` as ``style``'s scanner
    sees it, at the page's own size."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(pdf)
    try:
        page = document[page_index]
        try:
            image = page.render(scale=style.dpi / 72, grayscale=True).to_pil().convert("L")
        finally:
            page.close()
    finally:
        document.close()
    scanned = encode_for_pdf(degrade(image, style, rng), style)
    return images_to_pdf([scanned], style.dpi)


def scanned_variant(pdf: bytes, scan: Sequence[int], *, style: PageStyle = SCANNER, seed: str = "") -> bytes:
    """``pdf`` with the 1-based pages in ``scan`` replaced by scanned images of themselves."""
    rng = random.Random(f"{seed}:{style.name}")
    reader = PdfReader(io.BytesIO(pdf))
    writer = PdfWriter()
    for number, page in enumerate(reader.pages, start=1):
        if number in scan:
            writer.add_page(PdfReader(io.BytesIO(scan_page(pdf, number - 1, style, rng))).pages[0])
        else:
            writer.add_page(page)
    if reader.metadata:
        writer.add_metadata({key: str(value) for key, value in reader.metadata.items()})
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _sidecar(source: bytes, scan: Sequence[int]) -> dict[str, object]:
    return {
        "builder_version": BUILDER_VERSION,
        "source_sha256": hashlib.sha256(source).hexdigest(),
        "style": SCANNER.name,
        "scanned_pages": list(scan),
    }


def answer_pages(questions: Sequence[Question]) -> dict[str, set[int]]:
    by_document: dict[str, set[int]] = {}
    for question in questions:
        by_document.setdefault(question.document, set()).add(question.page)
    return by_document


def build_scanned_corpus(
    pdfs: Sequence[Path], questions: Sequence[Question], out: Path = DEFAULT_OUT
) -> dict[Path, Path]:
    """The scanned variant of each PDF in ``out`` (same file name), built or reused; original -> variant.

    A PDF no question is about is copied as it is (nothing of it is scored).
    """
    out.mkdir(parents=True, exist_ok=True)
    pages = answer_pages(questions)
    variants: dict[Path, Path] = {}
    for pdf in pdfs:
        source = pdf.read_bytes()
        page_count = len(PdfReader(io.BytesIO(source)).pages)
        scan = pages_to_scan(pages.get(pdf.name, ()), page_count)
        target, sidecar_path = out / pdf.name, out / f"{pdf.stem}.json"
        sidecar = _sidecar(source, scan)
        current = target.is_file() and sidecar_path.is_file() and json.loads(sidecar_path.read_text()) == sidecar
        if not current:
            target.write_bytes(scanned_variant(source, scan, seed=pdf.name))
            sidecar_path.write_text(json.dumps(sidecar, indent=1) + "\n")
        variants[pdf] = target
    return variants


def scanned_page_counts(variants: Mapping[Path, Path]) -> dict[str, int]:
    """Scanned pages per variant (from the sidecars)."""
    return {
        variant.name: len(json.loads(variant.with_suffix(".json").read_text())["scanned_pages"])
        for variant in variants.values()
    }


class TimedOcrEngine:
    """An engine that counts the pages it read and the time it took (wall and this process's
    children's CPU: Tesseract runs as a subprocess)."""

    def __init__(self, engine: OcrEngine) -> None:
        self._engine = engine
        self.pages = 0
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    @property
    def name(self) -> str:
        return self._engine.name

    def recognize(self, png: bytes) -> OcrResult:
        started, cpu_started = time.perf_counter(), _cpu_seconds()
        try:
            return self._engine.recognize(png)
        finally:
            self.pages += 1
            self.seconds += time.perf_counter() - started
            self.cpu_seconds += _cpu_seconds() - cpu_started

    def describe(self) -> str:
        if not self.pages:
            return f"{self.name}: no page OCR'd"
        return (
            f"{self.name}: {self.pages} pages OCR'd in {self.seconds:.0f} s ({self.pages / self.seconds:.2f} pages/s, "
            f"{self.cpu_seconds / self.pages:.2f} CPU-s a page)"
        )


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def rasterising_time(variants: Mapping[Path, Path], dpi: int = OCR_DPI) -> tuple[int, float, float]:
    """(pages, wall seconds, CPU seconds) to rasterise every scanned page as Parse does before OCR."""
    pages, wall, cpu = 0, 0.0, 0.0
    for variant in variants.values():
        data = variant.read_bytes()
        for number in json.loads(variant.with_suffix(".json").read_text())["scanned_pages"]:
            started, cpu_started = time.perf_counter(), time.process_time()
            render_page_png(data, number - 1, dpi)
            wall += time.perf_counter() - started
            cpu += time.process_time() - cpu_started
            pages += 1
    return pages, wall, cpu


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--rasterise", action="store_true", help="also time rasterising the scanned pages as Parse does (cost model)"
    )
    args = parser.parse_args(argv)
    variants = build_scanned_corpus(corpus_pdfs(), load_questions(), args.out)
    counts = scanned_page_counts(variants)
    for name, count in sorted(counts.items()):
        print(f"{name}: {count} pages scanned")
    print(f"{sum(counts.values())} pages scanned in {len(counts)} PDFs under {args.out}")
    if args.rasterise:
        pages, wall, cpu = rasterising_time(variants)
        print(
            f"rasterising at {OCR_DPI} dpi: {pages} pages, {1000 * wall / pages:.0f} ms a page "
            f"({1000 * cpu / pages:.0f} ms of CPU; load average {os.getloadavg()[0]:.1f})"
        )


if __name__ == "__main__":
    main()
