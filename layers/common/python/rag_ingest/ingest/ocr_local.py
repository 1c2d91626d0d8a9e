"""Offline OCR engines (the ``local`` engine of the local stack), behind ``rag_ingest.ingest.ocr.OcrEngine``.

- :class:`TesseractEngine`: Debian's ``tesseract-ocr`` 5 (LSTM, English model from
  ``tesseract-ocr-eng``), run as a subprocess per page, its TSV output read for words, lines and
  confidences. Installed by ``make ocr-tools`` (apt).
- :class:`RapidOcrEngine`: ``rapidocr-onnxruntime`` (PP-OCRv4 detection + recognition as ONNX
  models shipped in its wheel) on onnxruntime.

Neither downloads anything at run time. docs/ocr.md has the measurements (character error rate and
pages per second on the generated scans) that made Tesseract the ``local`` engine.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from collections import defaultdict
from typing import Any

from rag_ingest.core.errors import ConfigurationError
from rag_ingest.ingest.ocr import OCR_DPI, OcrPageError, OcrResult

#: One page's OCR may take this long before it counts as a failed page (a 300-dpi A4 page takes ~2 s).
TESSERACT_TIMEOUT_SECONDS = 60.0


class TesseractEngine:
    """Tesseract 5 through its command line: ``tesseract stdin stdout -l eng --dpi N tsv``."""

    name = "tesseract"

    def __init__(self, executable: str | None = None, *, language: str = "eng", dpi: int = OCR_DPI) -> None:
        found = executable or shutil.which("tesseract")
        if not found:
            raise ConfigurationError("OCR_ENGINE=local needs the tesseract executable (make ocr-tools installs it)")
        self._executable = found
        self._language = language
        self._dpi = dpi

    def recognize(self, png: bytes) -> OcrResult:
        command = [self._executable, "stdin", "stdout", "-l", self._language, "--dpi", str(self._dpi), "tsv"]
        try:
            completed = subprocess.run(
                command,
                input=png,
                capture_output=True,
                timeout=TESSERACT_TIMEOUT_SECONDS,
                check=False,
                env={"OMP_THREAD_LIMIT": "1", "PATH": "/usr/bin:/bin"},  # one thread per page: workers run in parallel
            )
        except subprocess.TimeoutExpired as error:
            raise OcrPageError(f"tesseract took more than {TESSERACT_TIMEOUT_SECONDS:g} s") from error
        if completed.returncode != 0:
            detail = completed.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
            raise OcrPageError(f"tesseract exited {completed.returncode}: {detail[0]}")
        return tesseract_tsv_result(completed.stdout.decode("utf-8", "replace"))


def tesseract_tsv_result(tsv: str) -> OcrResult:
    """Lines (words joined by spaces, paragraphs by a blank line) and the mean word confidence."""
    lines: dict[tuple[int, int, int, int], list[str]] = defaultdict(list)
    confidences: list[float] = []
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        text = (row.get("text") or "").strip()
        if row.get("level") != "5" or not text:
            continue
        key = (int(row["page_num"]), int(row["block_num"]), int(row["par_num"]), int(row["line_num"]))
        lines[key].append(text)
        confidences.append(max(0.0, float(row["conf"])) / 100)
    parts: list[str] = []
    previous_paragraph: tuple[int, int, int] | None = None
    for key in sorted(lines):
        paragraph = key[:3]
        if previous_paragraph is not None and paragraph != previous_paragraph:
            parts.append("")
        parts.append(" ".join(lines[key]))
        previous_paragraph = paragraph
    confidence = sum(confidences) / len(confidences) if confidences else 0.0
    return OcrResult(text="\n".join(parts), confidence=round(confidence, 4))


class RapidOcrEngine:
    """rapidocr-onnxruntime (PP-OCRv4, ONNX models inside the wheel); loaded on first use."""

    name = "rapidocr"

    def __init__(self) -> None:
        self._engine: Any = None

    def recognize(self, png: bytes) -> OcrResult:
        if self._engine is None:
            try:
                from rapidocr_onnxruntime import RapidOCR
            except ImportError as error:  # pragma: no cover - depends on the environment
                raise ConfigurationError("the rapidocr engine needs rapidocr-onnxruntime") from error
            self._engine = RapidOCR()
        try:
            found, _elapsed = self._engine(png)
        except Exception as error:  # decode errors and the like: this page cannot be read
            raise OcrPageError(f"rapidocr: {error!r}") from error
        return rapidocr_result(found or [])


def rapidocr_result(found: list[Any]) -> OcrResult:
    """Detected boxes ``[corners, text, score]`` into lines: boxes whose vertical centres lie within
    half a box height of each other are one line, read left to right; lines top to bottom."""
    boxes = []
    for corners, text, score in found:
        ys = [point[1] for point in corners]
        xs = [point[0] for point in corners]
        boxes.append(((min(ys) + max(ys)) / 2, max(ys) - min(ys), min(xs), str(text), float(score)))
    boxes.sort()
    lines: list[list[tuple[float, str]]] = []
    line_centre = -1e9
    line_height = 0.0
    for centre, height, left, text, _score in boxes:
        if lines and abs(centre - line_centre) <= max(line_height, height) / 2:
            lines[-1].append((left, text))
        else:
            lines.append([(left, text)])
            line_centre, line_height = centre, height
    text = "\n".join(" ".join(word for _left, word in sorted(line)) for line in lines)
    scores = [box[4] for box in boxes]
    return OcrResult(text=text, confidence=round(sum(scores) / len(scores), 4) if scores else 0.0)


def local_engine() -> TesseractEngine:
    """The offline engine the local stack runs (OCR_ENGINE=local)."""
    return TesseractEngine()
