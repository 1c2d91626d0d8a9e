"""Figures on PDF pages: the images pdfium finds, their captions, what is read inside them.

:func:`find_figures` lists each page's image objects (pypdfium2) with their rectangles as fractions
of the page as displayed (origin top-left, ``/Rotate`` applied), pixel sizes and digests, drops
decoration (``rag_ingest.parsing.figures.select_figures``), takes each figure's caption (the
"Figure n"/"Fig. n" line nearest above or below it among the page's words) and, up to the
document's cap and within the parse budget, reads its region of the rendered page with an
``ImageReader``. :func:`attach_figures` appends them to cleaned pages as FIGURE blocks. Imports
``rag_ingest.core`` and ``rag_ingest.parsing``. The rules: docs/formats.md, "Figures".
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import BlockKind, Figure, FigureCounts, PageLayout, PageText, PassageBox, TextBlock
from rag_ingest.core.settings import DEFAULT_MAX_FIGURES_READ, OCR_DPI
from rag_ingest.parsing.figures import CaptionsOnly, FigureCandidate, ImageReader, figure_text, select_figures
from rag_ingest.parsing.ocr.engine import PlacedWord, grey_png
from rag_ingest.parsing.pdf.layout import displayed, unpack_layout

#: Image objects looked at per page: a page drawn from thousands of tiles is not a page of figures.
MAX_IMAGES_PER_PAGE = 64
#: An image this much of the page (area) is its background or a scan, not a figure.
MAX_FIGURE_PAGE_SHARE = 0.9
#: How far (fraction of the page's height) a caption may stand from its figure.
CAPTION_REACH = 0.12
#: Lines after a caption's first that continue it (a wrapped caption), at most.
CAPTION_MORE_LINES = 3

FIGURE_CAPTION = re.compile(r"(?:Figure|Fig\.?)\s*[A-Z]?\d+(?:[.\-]\d+)*\b", re.IGNORECASE)


@dataclass(frozen=True)
class PdfFigures:
    """How Parse reads a PDF's figures: the reader, at most ``max_read`` figures a document (the
    rest keep their caption only), rendered at ``dpi``."""

    reader: ImageReader = field(default_factory=CaptionsOnly)
    max_read: int = DEFAULT_MAX_FIGURES_READ
    dpi: int = OCR_DPI


@dataclass(frozen=True)
class FoundFigures:
    """The figures of a page range by page number (in page order), and the decoration skipped."""

    by_page: dict[int, list[Figure]]
    counts: FigureCounts


@dataclass(frozen=True)
class _Line:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float


def find_figures(
    pdf: bytes,
    layouts: Mapping[int, PageLayout | None],
    *,
    page_count: int,
    reading: PdfFigures,
    cap: int,
    deadline: float,
) -> FoundFigures:
    """The figures on the pages in ``layouts`` (1-based numbers; pages with a text layer: a scanned
    page is not a figure), their captions from the pages' words, up to ``cap`` of them read by
    ``reading.reader`` before ``deadline`` (``time.monotonic()``). Never raises for the document's
    sake: a page pdfium cannot read has no figures."""
    if not layouts:
        return FoundFigures({}, FigureCounts())
    import pypdfium2 as pdfium  # loaded by Parse only

    try:
        document = pdfium.PdfDocument(pdf)
    except Exception as error:  # pdfium refuses what pypdf read: no figures, nothing else lost
        logger.warning("pdfium cannot open the PDF: no figures: %r", error)
        return FoundFigures({}, FigureCounts())
    try:
        candidates: list[FigureCandidate] = []
        over_page_cap = 0
        for number in sorted(layouts):
            try:
                found = _page_images(document, number)
            except Exception as error:  # one page's images; its text stands
                logger.warning("page %d: images not read: %r", number, error)
                continue
            over_page_cap += max(0, len(found) - MAX_IMAGES_PER_PAGE)
            lines = _lines(unpack_layout(layout)) if (layout := layouts[number]) is not None else []
            for figure in found[:MAX_IMAGES_PER_PAGE]:
                caption = _caption(figure.box, lines) if figure.box is not None else ""
                candidates.append(FigureCandidate(number, figure.model_copy(update={"caption": caption})))
        selection = select_figures(candidates, page_count=page_count)
        by_page: dict[int, list[Figure]] = {}
        read = unread = 0
        rendered: dict[int, tuple[memoryview, int, int, int]] = {}
        for candidate in selection.kept:
            figure = candidate.figure
            if read < cap and time.monotonic() < deadline and figure.box is not None:
                image = _figure_png(document, candidate.page_number, figure.box, reading.dpi, rendered)
                if image is not None:
                    read += 1
                    result = reading.reader.read(image, context=figure.caption)
                    figure = figure.model_copy(update={"ocr_text": result.ocr_text, "description": result.description})
            else:
                unread += 1
            by_page.setdefault(candidate.page_number, []).append(figure)
        counts = FigureCounts(
            skipped_tiny=selection.skipped_tiny,
            skipped_repeated=selection.skipped_repeated,
            over_read_cap=unread + over_page_cap,
        )
        return FoundFigures(by_page, counts)
    finally:
        document.close()


def attach_figures(
    pages: Sequence[PageText], figures: Mapping[int, Sequence[Figure]], counts: FigureCounts, *, page_count: int
) -> tuple[list[PageText], FigureCounts]:
    """``pages`` with their figures appended, each a FIGURE block after the page's text, and the
    document's counts. Images that repeat across page ranges are decoration too (the ranges could
    not see each other's); a figure with no text at all (no caption, nothing read) has no passage."""
    candidates = [FigureCandidate(number, figure) for number in sorted(figures) for figure in figures[number]]
    selection = select_figures(candidates, page_count=page_count)
    kept: dict[int, list[Figure]] = {}
    for candidate in selection.kept:
        kept.setdefault(candidate.page_number, []).append(candidate.figure)
    indexed = without_text = 0
    result: list[PageText] = []
    for page in pages:
        text, blocks = page.text, list(page.blocks)
        for figure in kept.get(page.page_number, ()):
            passage = figure_text(figure)
            if not passage:
                without_text += 1
                continue
            text = f"{text}\n\n" if text else text
            end = len(text) + len(passage)
            blocks.append(TextBlock(start=len(text), end=end, kind=BlockKind.FIGURE, figure=figure))
            text += passage
            indexed += 1
        result.append(page.model_copy(update={"text": text, "blocks": blocks}) if text is not page.text else page)
    # ``counts`` may already hold figures a reader placed itself (a structured format's FIGURE blocks).
    return result, FigureCounts(
        indexed=counts.indexed + indexed,
        without_text=counts.without_text + without_text,
        skipped_tiny=counts.skipped_tiny + selection.skipped_tiny,
        skipped_repeated=counts.skipped_repeated + selection.skipped_repeated,
        over_read_cap=counts.over_read_cap,
    )


def _page_images(document: object, number: int) -> list[Figure]:
    """The page's image objects (forms opened), each with its displayed rectangle, size and digest."""
    import pypdfium2.raw as pdfium_c

    page = document[number - 1]  # type: ignore[index]
    try:
        left, bottom, right, top = page.get_bbox()
        width, height = right - left, top - bottom
        if width <= 0 or height <= 0:
            return []
        rotation = int(page.get_rotation())
        figures: list[Figure] = []
        for image in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=4):
            if len(figures) > MAX_IMAGES_PER_PAGE:
                break  # one more than the cap: enough to count the page as over it
            image_left, image_bottom, image_right, image_top = image.get_bounds()
            x0, x1 = (max(image_left, left) - left) / width, (min(image_right, right) - left) / width
            y0, y1 = (top - min(image_top, top)) / height, (top - max(image_bottom, bottom)) / height
            if x1 - x0 <= 0 or y1 - y0 <= 0 or (x1 - x0) * (y1 - y0) >= MAX_FIGURE_PAGE_SHARE:
                continue
            box_x0, box_y0, box_x1, box_y1 = displayed(x0, y0, x1, y1, rotation)
            width_px, height_px = image.get_px_size()
            figures.append(
                Figure(
                    box=PassageBox(
                        page=number, x0=round(box_x0, 4), y0=round(box_y0, 4), x1=round(box_x1, 4), y1=round(box_y1, 4)
                    ),
                    width_px=max(0, int(width_px)),
                    height_px=max(0, int(height_px)),
                    image_sha256=hashlib.sha256(image.get_data(decode_simple=False)).hexdigest(),
                )
            )
        return figures
    finally:
        page.close()


def _figure_png(
    document: object,
    number: int,
    box: PassageBox,
    dpi: int,
    rendered: dict[int, tuple[memoryview, int, int, int]],
) -> bytes | None:
    """The figure's region of its page, rendered upright in greyscale at ``dpi``, as PNG (what a
    reader sees there: the image and any text drawn over it). None when too small to read."""
    if number not in rendered:
        rendered.clear()  # pages come in order: one page's bitmap in memory at a time
        page = document[number - 1]  # type: ignore[index]
        try:
            bitmap = page.render(scale=dpi / 72, grayscale=True)
            rendered[number] = (memoryview(bitmap.buffer).cast("B"), bitmap.width, bitmap.height, bitmap.stride)
        finally:
            page.close()
    pixels, width, height, stride = rendered[number]
    x0, y0 = max(0, math.floor(box.x0 * width) - 2), max(0, math.floor(box.y0 * height) - 2)
    x1, y1 = min(width, math.ceil(box.x1 * width) + 2), min(height, math.ceil(box.y1 * height) + 2)
    if x1 - x0 < 16 or y1 - y0 < 16:
        return None
    return grey_png(pixels[y0 * stride + x0 :], x1 - x0, y1 - y0, stride)


def _lines(words: Sequence[PlacedWord]) -> list[_Line]:
    """The page's words, in their source's order, joined into lines (vertical extents overlapping
    by half the smaller word's height)."""
    lines: list[list[PlacedWord]] = []
    for word in words:
        if lines:
            last = lines[-1][-1]
            overlap = min(last.y1, word.y1) - max(last.y0, word.y0)
            smaller = min(last.y1 - last.y0, word.y1 - word.y0)
            if smaller > 0 and overlap >= 0.5 * smaller and word.x0 >= last.x0:
                lines[-1].append(word)
                continue
        lines.append([word])
    return [
        _Line(
            " ".join(word.text for word in line),
            min(word.x0 for word in line),
            min(word.y0 for word in line),
            max(word.x1 for word in line),
            max(word.y1 for word in line),
        )
        for line in lines
    ]


def _caption(box: PassageBox, lines: Sequence[_Line]) -> str:
    """The "Figure n" line nearest below or above ``box`` (within ``CAPTION_REACH``, overlapping it
    across), with the lines that continue it; "" when there is none."""
    best: tuple[float, int] | None = None
    for index, line in enumerate(lines):
        if not FIGURE_CAPTION.match(line.text) or line.x1 <= box.x0 or line.x0 >= box.x1:
            continue
        below, above = line.y0 - box.y1, box.y0 - line.y1
        gap = below if below >= -0.01 else above if above >= -0.01 else math.inf
        if gap <= CAPTION_REACH and (best is None or gap < best[0]):
            best = (gap, index)
    if best is None:
        return ""
    first = lines[best[1]]
    parts, previous = [first.text], first
    for line in lines[best[1] + 1 : best[1] + 1 + CAPTION_MORE_LINES]:
        height = previous.y1 - previous.y0
        if FIGURE_CAPTION.match(line.text) or not 0 <= line.y0 - previous.y1 <= 0.8 * height:
            break
        if line.x0 >= box.x1 or line.x1 <= box.x0:
            break
        parts.append(line.text)
        previous = line
    return " ".join(parts)
