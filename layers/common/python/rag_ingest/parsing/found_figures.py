"""Which of the figures a structured document's readers found are indexed, and the text inside them.

The readers (``office``, ``html_markdown``) place each figure in their ``PageBuilder`` as they meet
it; once the whole document is read, :func:`structured_document` drops decoration
(``figures.select_figures``, over every page at once), reads the kept images through an
``ImageReader`` (PNG and JPEG only, within ``FormatLimits``' caps) and builds the pages. Imports
``rag_ingest.core`` and ``rag_ingest.parsing`` only. The rules: docs/formats.md, "Figures".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from rag_ingest.parsing.blocks import FormatLimits, FoundFigure, PageBuilder, StructuredDocument
from rag_ingest.parsing.figures import FigureCandidate, ImageReader, ImageReading, image_size, is_tiny, select_figures

#: Textract reads images up to this many pixels on a side (and Tesseract is slow far below it).
MAX_OCR_SIDE_PX = 10_000
#: Alt text that is only a file's name or path ("image.png", "fig: images/ssh-L.png"): what
#: python-pptx, pandoc and older Office versions write when nobody described the picture.
_FILE_NAME = re.compile(r"(?:\w+:\s*)?\S+\.(?:png|jpe?g|gif|bmp|tiff?|emf|wmf|svg|webp)", re.IGNORECASE)


def alt_text(text: str) -> str:
    """Alt text as a figure keeps it: whitespace collapsed, a bare file name dropped."""
    text = " ".join(text.split())
    return "" if _FILE_NAME.fullmatch(text) else text


def is_ocr_format(image: bytes) -> bool:
    """A PNG or a JPEG: what Tesseract and Textract both read (EMF, WMF, GIF, TIFF, SVG are not)."""
    return image.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"))


def within_bounds(image: bytes, limits: FormatLimits) -> bool:
    """Whether an image is small enough to OCR: bytes, pixels and sides under the caps (an image
    whose size its header does not give is judged by its bytes)."""
    if len(image) > limits.max_figure_image_bytes:
        return False
    size = image_size(image)
    if size is None:
        return True
    width, height = size
    return width * height <= limits.max_figure_image_pixels and max(width, height) <= MAX_OCR_SIDE_PX


def structured_document(
    builders: Sequence[PageBuilder], *, title: str | None, images: ImageReader, limits: FormatLimits
) -> StructuredDocument:
    """The document's pages once its figures are decided: decoration skipped (in a one-page
    format each occurrence counts as a page, so an image three times over is an icon), then
    the kept images' text read, at most ``limits.max_figures_ocr`` of them, each image once."""
    found = [figure for builder in builders for figure in builder.figures]
    marked = [figure for figure in found if figure.marked]
    marked_tiny = sum(1 for figure in marked if is_tiny(figure.figure.width_px, figure.figure.height_px))
    candidates = [figure for figure in found if not figure.marked]
    one_page = len(builders) == 1
    selection = select_figures(
        [
            FigureCandidate(page_number=ordinal if one_page else figure.page_number, figure=figure.figure)
            for ordinal, figure in enumerate(candidates, start=1)
        ],
        page_count=1 if one_page else len(builders),
    )
    kept_ids = {id(candidate.figure) for candidate in selection.kept}
    for figure in found:
        figure.kept = not figure.marked and id(figure.figure) in kept_ids
    kept = [figure for figure in candidates if figure.kept]
    read, not_read = _read_images(kept, images, limits)
    pages = [builder.page() for builder in builders]
    indexed = sum(1 for page in pages for block in page.blocks if block.figure is not None)
    return StructuredDocument(
        pages=pages,
        title=title,
        figures=indexed,
        figures_skipped_tiny=selection.skipped_tiny + marked_tiny,
        figures_skipped_repeated=selection.skipped_repeated,
        figures_skipped_marked=len(marked) - marked_tiny,
        figures_ocr=read,
        figures_not_ocr=not_read,
        figures_without_text=len(kept) - indexed,
    )


def _read_images(kept: Sequence[FoundFigure], images: ImageReader, limits: FormatLimits) -> tuple[int, int]:
    """OCR the kept figures' images in document order: (images read, images not read)."""
    readings: dict[str, ImageReading] = {}  # the same image twice is read once
    read = not_read = 0
    for found in kept:
        image = found.image
        if image is None:
            continue
        digest = found.figure.image_sha256 or hashlib.sha256(image).hexdigest()
        if digest not in readings:
            if not (is_ocr_format(image) and within_bounds(image, limits) and len(readings) < limits.max_figures_ocr):
                not_read += 1
                continue
            readings[digest] = images.read(image, context=found.figure.caption or found.figure.alt_text)
        reading = readings[digest]
        read += 1
        found.figure = found.figure.model_copy(
            update={"ocr_text": reading.ocr_text, "description": reading.description}
        )
    return read, not_read
