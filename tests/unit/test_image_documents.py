"""Images as documents: PNG, JPEG and TIFF detected by their bytes, a multi-page TIFF cut into
one-page TIFFs, each page read by OCR into text and words, and the bounds with their codes.
Tesseract on real images: tests/integration/test_figure_reading.py."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest
from PIL import Image, ImageDraw
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import DocumentFormat, TextSource
from rag_ingest.core.upload_types import MAX_IMAGE_BYTES, max_bytes_for, upload_format
from rag_ingest.parsing.formats import detect_format
from rag_ingest.parsing.image_document import read_image_document, tiff_page, tiff_pages
from rag_ingest.parsing.ocr.engine import OcrPageError, OcrResult, PageOcr, PlacedWord
from rag_ingest.parsing.pdf.extract import join_page_ranges

pytestmark = pytest.mark.unit
MAX = 100 * 1024 * 1024


def image(label: str, size: tuple[int, int] = (300, 120)) -> Image.Image:
    picture = Image.new("L", size, 255)
    ImageDraw.Draw(picture).text((10, 10), label, fill=0)
    return picture


def encoded(pictures: Sequence[Image.Image], kind: str) -> bytes:
    buffer = io.BytesIO()
    first, *rest = pictures
    if kind == "TIFF":
        first.save(buffer, format="TIFF", save_all=True, append_images=rest, compression="tiff_deflate")
    else:
        first.save(buffer, format=kind)
    return buffer.getvalue()


class LabelEngine:
    """Reads each page image back with PIL (as an engine must: one page) and answers its size."""

    name = "label"

    def __init__(self, failing: Sequence[int] = ()) -> None:
        self.frames: list[int] = []
        self.sizes: list[tuple[int, int]] = []
        self._failing = set(failing)

    def recognize(self, png: bytes) -> OcrResult:
        with Image.open(io.BytesIO(png)) as opened:
            self.frames.append(getattr(opened, "n_frames", 1))
            self.sizes.append(opened.size)
        number = len(self.sizes)
        if number in self._failing:
            raise OcrPageError("unreadable")
        word = PlacedWord(f"page{number}", 0.1, 0.2, 0.3, 0.25)
        return OcrResult(text=f"page{number} of the scan", confidence=0.9, words=(word,))


@pytest.mark.parametrize(
    ("kind", "expected"), [("PNG", DocumentFormat.PNG), ("JPEG", DocumentFormat.JPEG), ("TIFF", DocumentFormat.TIFF)]
)
def test_images_are_detected_by_their_bytes(kind: str, expected: DocumentFormat) -> None:
    data = encoded([image("hello")], kind)

    found = detect_format(data[:4096], size=len(data), max_bytes=MAX, read_all=lambda: data)

    assert found is expected
    assert upload_format(expected.content_type) is expected


def test_an_image_over_the_image_limit_is_refused_on_its_size() -> None:
    data = encoded([image("hello")], "PNG")

    with pytest.raises(PermanentError) as refused:
        detect_format(data, size=MAX_IMAGE_BYTES + 1, max_bytes=MAX, read_all=lambda: data)

    assert refused.value.code is ErrorCode.FILE_TOO_LARGE
    assert max_bytes_for(DocumentFormat.TIFF, MAX) == MAX_IMAGE_BYTES


def test_gif_is_still_refused() -> None:
    data = encoded([image("hello")], "GIF")

    with pytest.raises(PermanentError) as refused:
        detect_format(data, size=len(data), max_bytes=MAX, read_all=lambda: data)

    assert refused.value.code is ErrorCode.UNSUPPORTED_TYPE


def test_each_tiff_page_becomes_a_tiff_of_that_page_alone() -> None:
    sizes = [(300, 120), (200, 400), (150, 150)]
    data = encoded([image(f"p{n}", size) for n, size in enumerate(sizes)], "TIFF")

    directories = tiff_pages(data, max_pages=10)

    assert len(directories) == 3
    for directory, size in zip(directories, sizes, strict=True):
        with Image.open(io.BytesIO(tiff_page(data, directory))) as page:
            assert getattr(page, "n_frames", 1) == 1
            assert page.size == size


def test_a_multi_page_tiff_is_one_page_per_image_read_one_at_a_time() -> None:
    data = encoded([image("one"), image("two", (200, 400))], "TIFF")
    engine = LabelEngine()

    parsed = read_image_document(data, DocumentFormat.TIFF, max_pages=10, ocr=PageOcr(engine))
    document = join_page_ranges([parsed], clean=False)

    assert engine.frames == [1, 1]
    assert engine.sizes == [(300, 120), (200, 400)]
    assert [page.text for page in document.pages] == ["page1 of the scan", "page2 of the scan"]
    assert all(page.source is TextSource.OCR and page.layout is not None for page in document.pages)
    assert document.pages[1].layout is not None and document.pages[1].layout.words == "page2"


def test_a_page_the_engine_cannot_read_or_over_the_cap_is_a_failed_page() -> None:
    data = encoded([image("one"), image("two"), image("three")], "TIFF")

    parsed = read_image_document(data, DocumentFormat.TIFF, max_pages=10, ocr=PageOcr(LabelEngine([1]), max_pages=2))

    assert parsed.failed_pages == [1, 3]
    assert parsed.failure_reasons[1] == "OCR failed: unreadable"
    assert "over the OCR limit of 2 pages" in parsed.failure_reasons[3]
    assert [page.text for page in parsed.pages] == ["", "page2 of the scan", ""]


def test_an_image_without_text_is_no_text_layer() -> None:
    class Blank(LabelEngine):
        def recognize(self, png: bytes) -> OcrResult:
            return OcrResult(text="", confidence=0.0)

    parsed = read_image_document(encoded([image("")], "PNG"), DocumentFormat.PNG, max_pages=10, ocr=PageOcr(Blank()))

    with pytest.raises(PermanentError) as refused:
        join_page_ranges([parsed], clean=False)
    assert refused.value.code is ErrorCode.NO_TEXT_LAYER


def test_with_ocr_off_an_image_is_no_text_layer() -> None:
    parsed = read_image_document(encoded([image("x")], "JPEG"), DocumentFormat.JPEG, max_pages=10, ocr=None)

    with pytest.raises(PermanentError) as refused:
        join_page_ranges([parsed], clean=False)
    assert refused.value.code is ErrorCode.NO_TEXT_LAYER
    assert "OCR is off" in parsed.failure_reasons[1]


def test_too_many_tiff_pages_too_many_pixels_and_a_broken_chain_have_their_codes() -> None:
    tiff = encoded([image("a"), image("b"), image("c")], "TIFF")
    with pytest.raises(PermanentError) as pages:
        read_image_document(tiff, DocumentFormat.TIFF, max_pages=2, ocr=None)
    assert pages.value.code is ErrorCode.TOO_MANY_PAGES

    # A PNG header claiming 20,000 x 20,000 pixels (the image data is never decoded).
    huge = bytearray(encoded([image("a")], "PNG"))
    huge[16:24] = (20_000).to_bytes(4, "big") * 2
    with pytest.raises(PermanentError) as pixels:
        read_image_document(bytes(huge), DocumentFormat.PNG, max_pages=2, ocr=PageOcr(LabelEngine()))
    assert pixels.value.code is ErrorCode.DOCUMENT_TOO_COMPLEX

    looping = bytearray(tiff)
    first = int.from_bytes(looping[4:8], "little")
    entries = int.from_bytes(looping[first : first + 2], "little")
    looping[first + 2 + 12 * entries : first + 6 + 12 * entries] = looping[4:8]  # the first page points at itself
    with pytest.raises(PermanentError) as chain:
        tiff_pages(bytes(looping), max_pages=10)
    assert chain.value.code is ErrorCode.CORRUPT_DOCUMENT
