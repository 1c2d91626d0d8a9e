"""The formats corpus's figure documents read as Parse reads them with the local OCR engine
(Tesseract, ``make ocr-tools``): per document, figures found, skipped, OCR'd, and the time the
reading took with and without OCR (docs/ocr.md, "Text inside figures").

    .venv/bin/python -m bench.figure_ocr
"""

from __future__ import annotations

import os
import time

from eval.formats_eval import figure_reader, load_documents, read_document


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("document | figures | skipped (tiny, repeated, marked) | OCR'd | not OCR'd | s without OCR | s with OCR")
    for document in load_documents():
        started = time.perf_counter()
        read_document(document.path)
        plain = time.perf_counter() - started
        started = time.perf_counter()
        _format, read = read_document(document.path, figure_reader())
        with_ocr = time.perf_counter() - started
        if not (read.figures or read.figures_ocr):
            continue
        skipped = f"{read.figures_skipped_tiny}, {read.figures_skipped_repeated}, {read.figures_skipped_marked}"
        print(
            f"{document.name} | {read.figures} | {skipped} | {read.figures_ocr} | {read.figures_not_ocr}"
            f" | {plain:.2f} | {with_ocr:.2f}"
        )


if __name__ == "__main__":
    main()
