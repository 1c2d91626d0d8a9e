"""The figure contract: a figure's passage text, the decoration filter, image sizes from headers."""

from __future__ import annotations

import struct
import zlib

import pytest
from rag_ingest.core.parsed import Figure, FigureSource
from rag_ingest.parsing.figures import FigureCandidate, figure_text, image_size, is_tiny, select_figures

pytestmark = pytest.mark.unit


def _png(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = b"IHDR" + header
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(header)) + body + struct.pack(">I", zlib.crc32(body))


def test_figure_text_labels_each_source_and_says_a_repeat_once() -> None:
    figure = Figure(
        caption="Figure 2: Latency by stage", alt_text="figure 2:  latency by stage", ocr_text="Parse 1.2 s"
    )
    assert figure_text(figure) == "Figure 2: Latency by stage\nText in the image: Parse 1.2 s"
    assert figure.sources == [FigureSource.CAPTION, FigureSource.ALT_TEXT, FigureSource.OCR]
    assert figure_text(Figure(alt_text="A cat")) == "Alt text: A cat"
    assert figure_text(Figure()) == ""


def test_tiny_images_are_decoration_unless_their_size_is_unknown() -> None:
    assert is_tiny(16, 400) and is_tiny(80, 80)
    assert not is_tiny(300, 200)
    assert not is_tiny(0, 0)


def test_select_figures_skips_tiny_and_repeated_images_but_keeps_described_ones() -> None:
    logo = [FigureCandidate(page, Figure(width_px=400, height_px=120, image_sha256="logo")) for page in (1, 2, 3)]
    chart = FigureCandidate(2, Figure(width_px=800, height_px=600, image_sha256="chart"))
    bullet = FigureCandidate(1, Figure(width_px=12, height_px=12, image_sha256="bullet"))
    small_but_captioned = FigureCandidate(3, Figure(caption="Figure 1: Key", width_px=40, height_px=40))
    selection = select_figures([*logo, chart, bullet, small_but_captioned], page_count=3)
    assert [candidate.figure.image_sha256 for candidate in selection.kept] == ["chart", None]
    assert (selection.skipped_tiny, selection.skipped_repeated, selection.skipped) == (1, 3, 4)


def test_an_image_on_two_pages_of_a_long_document_is_not_a_logo() -> None:
    twice = [FigureCandidate(page, Figure(width_px=500, height_px=500, image_sha256="same")) for page in (4, 9)]
    assert len(select_figures(twice, page_count=40).kept) == 2
    thrice = [FigureCandidate(page, Figure(width_px=500, height_px=500, image_sha256="same")) for page in (4, 9, 12)]
    assert len(select_figures(thrice, page_count=40).kept) == 3  # a long document's floor is a third of its pages


def test_image_size_reads_png_gif_jpeg_and_tiff_headers() -> None:
    assert image_size(_png(640, 480)) == (640, 480)
    assert image_size(b"GIF89a" + struct.pack("<HH", 32, 16)) == (32, 16)
    jpeg = (
        b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 4) + b"JF" + b"\xff\xc0" + struct.pack(">HBHH", 11, 8, 300, 200)
    )
    assert image_size(jpeg + b"\x00" * 8) == (200, 300)
    tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 2)
    tiff += struct.pack("<HHII", 256, 4, 1, 1024) + struct.pack("<HHIHH", 257, 3, 1, 768, 0)
    assert image_size(tiff) == (1024, 768)
    assert image_size(b"not an image") is None
