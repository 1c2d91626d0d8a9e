"""OCR accuracy and speed on the generated scans: CER per page style, pages per second, per engine and dpi.

    .venv/bin/python -m eval.scans [--engines tesseract rapidocr] [--dpis 150 200 300] [--out DIR]

Generates the scans (eval/scans/generate.py) into ``--out`` if they are missing, then, for every
engine and rasterising resolution, renders each page with pdfium as the Parse stage does
(``rag_ingest.parsing.ocr.engine.render_page_png``), OCRs it and scores it against the typeset text. Pages per
second count rendering plus recognition, one page at a time in one process. docs/ocr.md holds the
figures this printed.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

from rag_ingest.parsing.ocr.engine import OcrEngine, render_page_png
from rag_ingest.parsing.ocr.local import RapidOcrEngine, TesseractEngine

from eval.scans.cer import character_error_rate
from eval.scans.generate import DEFAULT_OUT, STYLES, generate

ENGINES = {"tesseract": TesseractEngine, "rapidocr": RapidOcrEngine}


def make_engine(name: str, dpi: int) -> OcrEngine:
    return TesseractEngine(dpi=dpi) if name == "tesseract" else RapidOcrEngine()


def measure(out: Path, engine_names: Sequence[str], dpis: Sequence[int]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for engine_name in engine_names:
        for dpi in dpis:
            engine = make_engine(engine_name, dpi)
            engine.recognize(render_page_png((out / f"{STYLES[0].name}.pdf").read_bytes(), 0, dpi))  # warm up
            for style in STYLES:
                data = (out / f"{style.name}.pdf").read_bytes()
                truths = json.loads((out / f"{style.name}.json").read_text())["pages"]
                started = time.perf_counter()
                rates = []
                for index, truth in enumerate(truths):
                    result = engine.recognize(render_page_png(data, index, dpi))
                    rates.append(character_error_rate(result.text, truth))
                elapsed = time.perf_counter() - started
                row = {
                    "engine": engine_name,
                    "dpi": dpi,
                    "style": style.name,
                    "cer": sum(rates) / len(rates),
                    "worst_page_cer": max(rates),
                    "pages_per_second": len(truths) / elapsed,
                }
                rows.append(row)
                print(
                    f"{engine_name:<10} {dpi:>4} dpi  {style.name:<18} CER {row['cer']:.2%} "
                    f"(worst page {row['worst_page_cer']:.2%})  {row['pages_per_second']:.2f} pages/s",
                    flush=True,
                )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", choices=sorted(ENGINES), default=["tesseract", "rapidocr"])
    parser.add_argument("--dpis", nargs="+", type=int, default=[150, 200, 300])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    if not all((args.out / f"{style.name}.json").exists() for style in STYLES):
        generate(args.out)
    rows = measure(args.out, args.engines, args.dpis)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
