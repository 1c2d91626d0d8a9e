"""Offline OCR engines (the local stack's ``local`` engine), behind ``ocr.engine.OcrEngine``.

- :class:`TesseractEngine`: Debian's ``tesseract-ocr`` 5 (English model from ``tesseract-ocr-eng``,
  installed by ``make ocr-tools``), a subprocess per page; its TSV read for words, lines,
  confidences and tables (:func:`tesseract_tables`).
- :class:`RapidOcrEngine`: ``rapidocr-onnxruntime`` (PP-OCRv4 ONNX models shipped in its wheel).

Neither downloads anything at run time. Why Tesseract is the ``local`` engine (character error rate
and pages per second on the generated scans) and how its tables are found: docs/ocr.md.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from rag_ingest.core.errors import ConfigurationError
from rag_ingest.parsing.ocr.engine import OCR_DPI, OcrPageError, OcrResult, PlacedWord
from rag_ingest.parsing.pdf.tables import keep_table

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
    """Lines (words joined by spaces, paragraphs by a blank line), the mean word confidence, each
    word's box (TSV pixels, over the level-1 row's image size), and the tables the word boxes line
    up into (:func:`tesseract_tables`)."""
    lines: dict[tuple[int, int, int, int], list[str]] = defaultdict(list)
    boxes: dict[tuple[int, int, int, int], list[PlacedWord]] = defaultdict(list)
    confidences: list[float] = []
    image_width = image_height = 0
    words: list[_Word] = []
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        if row.get("level") == "1":
            image_width, image_height = int(row["width"]), int(row["height"])
        text = (row.get("text") or "").strip()
        if row.get("level") != "5" or not text:
            continue
        key = (int(row["page_num"]), int(row["block_num"]), int(row["par_num"]), int(row["line_num"]))
        lines[key].append(text)
        confidences.append(max(0.0, float(row["conf"])) / 100)
        words.append(_Word(key, int(row["left"]), int(row["width"]), int(row["height"]), text, confidences[-1]))
        if image_width > 0 and image_height > 0:
            left, top = int(row["left"]), int(row["top"])
            right, bottom = left + int(row["width"]), top + int(row["height"])
            boxes[key].append(
                PlacedWord(text, left / image_width, top / image_height, right / image_width, bottom / image_height)
            )
    parts: list[str] = []
    previous_paragraph: tuple[int, int, int] | None = None
    for key in sorted(lines):
        paragraph = key[:3]
        if previous_paragraph is not None and paragraph != previous_paragraph:
            parts.append("")
        parts.append(" ".join(lines[key]))
        previous_paragraph = paragraph
    confidence = sum(confidences) / len(confidences) if confidences else 0.0
    placed = tuple(word for key in sorted(boxes) for word in boxes[key])
    return OcrResult(
        text="\n".join(parts), confidence=round(confidence, 4), words=placed, tables=tesseract_tables(words)
    )


@dataclass(frozen=True)
class _Word:
    line: tuple[int, int, int, int]  # page, block, paragraph, line
    left: int
    width: int
    height: int
    text: str
    confidence: float  # 0..1


#: Tesseract tables (docs/ocr.md, "Tables in scanned pages"): cells of a line are apart by more than
#: this many word heights; a table is this many lines of a block whose cells start at this many columns.
CELL_GAP_HEIGHTS = 1.5
MIN_OCR_ROWS = 3
MIN_OCR_COLUMNS = 3
#: ... read with this mean confidence at least (the dev split's scans: noise below, tables above).
MIN_OCR_TABLE_CONFIDENCE = 0.8
_ALNUM = re.compile(r"[^\W_]")
_RULE = re.compile(r"[|\u00a6\[\]]+")


def tesseract_tables(words: list[_Word]) -> tuple[list[list[str]], ...]:
    """Tables read from Tesseract's word boxes (docs/ocr.md, "Tables"): within one block of its
    layout, runs of lines whose words fall into cells separated by wide gaps, the cells' left edges
    lining up into columns. Three columns at least: two aligned columns are also what a table of
    contents, a definition list or a two-column page shows. Ruling lines are not seen (a stray
    "|" read from one is dropped), nor are merged cells: a spanning cell lands in the column where
    it starts."""
    by_line: dict[tuple[int, int, int, int], list[_Word]] = defaultdict(list)
    for word in words:
        by_line[word.line].append(word)
    blocks: dict[tuple[int, int], list[list[list[_Word]]]] = defaultdict(list)
    for key in sorted(by_line):
        line = sorted(by_line[key], key=lambda word: word.left)
        heights = sorted(word.height for word in line if _ALNUM.search(word.text))
        if not heights:
            continue
        gap = CELL_GAP_HEIGHTS * heights[len(heights) // 2]
        # Gaps are measured between all the words ("--" is a word of the sentence), but only words
        # with a letter or digit fill cells; a "|" read from a ruling line separates two cells.
        cells: list[list[_Word]] = [[line[0]]]
        for previous, word in itertools.pairwise(line):
            if word.left - (previous.left + previous.width) > gap or _RULE.fullmatch(previous.text):
                cells.append([])
            cells[-1].append(word)
        filled = [kept for kept in ([word for word in cell if _ALNUM.search(word.text)] for cell in cells) if kept]
        blocks[key[:2]].append(filled)
    tables: list[list[list[str]]] = []
    for lines in blocks.values():
        run: list[list[list[_Word]]] = []
        for cells in [*lines, []]:
            if len(cells) >= 2:
                run.append(cells)
                continue
            if len(run) >= MIN_OCR_ROWS:
                table = _columns(run)
                run_words = [word for cells in run for cell in cells for word in cell]
                confidence = sum(word.confidence for word in run_words) / len(run_words)
                if table is not None and confidence >= MIN_OCR_TABLE_CONFIDENCE and keep_table(table):
                    tables.append(table)
            run = []
    return tuple(tables)


def _columns(run: list[list[list[_Word]]]) -> list[list[str]] | None:
    """The run's rows over its columns, or None when fewer than ``MIN_OCR_COLUMNS`` line up."""
    heights = sorted(word.height for cells in run for cell in cells for word in cell)
    tolerance = heights[len(heights) // 2]
    edges = sorted(cell[0].left for cells in run for cell in cells)
    clusters: list[list[int]] = []
    for edge in edges:
        if clusters and edge - clusters[-1][-1] <= tolerance:
            clusters[-1].append(edge)
        else:
            clusters.append([edge])
    columns = [min(cluster) for cluster in clusters if len(cluster) * 3 >= len(run)]
    if len(columns) < MIN_OCR_COLUMNS:
        return None
    rows = []
    for cells in run:
        row = [""] * len(columns)
        for cell in cells:
            # The last column starting at or before the cell (within a word height): a right-aligned
            # number or a centred spanning cell lands in the column it sits in.
            column = max((i for i, left in enumerate(columns) if left <= cell[0].left + tolerance), default=0)
            row[column] = " ".join(filter(None, [row[column], *(word.text for word in cell)]))
        rows.append(row)
    return rows


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
        return rapidocr_result(found or [], png_size(png))


def png_size(png: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its IHDR chunk ((0, 0) when it is not one)."""
    if len(png) < 24 or png[:8] != b"\x89PNG\r\n\x1a\n":
        return 0, 0
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def rapidocr_result(found: list[Any], image_size: tuple[int, int] = (0, 0)) -> OcrResult:
    """Detected boxes ``[corners, text, score]`` into lines: boxes whose vertical centres lie within
    half a box height of each other are one line, read left to right; lines top to bottom. The
    engine boxes a run of words, not a word: each word gets its share of the run's width by its
    number of characters (an estimate, for the passages' rectangles)."""
    width, height = image_size
    boxes = []
    words: list[PlacedWord] = []
    for corners, text, score in found:
        ys = [point[1] for point in corners]
        xs = [point[0] for point in corners]
        boxes.append(((min(ys) + max(ys)) / 2, max(ys) - min(ys), min(xs), str(text), float(score)))
        if width > 0 and height > 0:
            words.extend(_shared_out(str(text), min(xs) / width, min(ys) / height, max(xs) / width, max(ys) / height))
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
    words.sort(key=lambda word: ((word.y0 + word.y1) / 2, word.x0))
    return OcrResult(text=text, confidence=round(sum(scores) / len(scores), 4) if scores else 0.0, words=tuple(words))


def _shared_out(text: str, x0: float, y0: float, x1: float, y1: float) -> list[PlacedWord]:
    """The words of a run boxed as a whole, each given the run's width in proportion to its characters."""
    runs = list(re.finditer(r"\S+", text))
    if not runs:
        return []
    per_char = (x1 - x0) / max(len(text), 1)
    return [PlacedWord(run.group(), x0 + run.start() * per_char, y0, x0 + run.end() * per_char, y1) for run in runs]


def local_engine() -> TesseractEngine:
    """The offline engine the local stack runs (OCR_ENGINE=local)."""
    return TesseractEngine()
