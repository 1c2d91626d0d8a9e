"""Images with words in them, and Office files that hold them, for the figure tests: the words are
drawn with Pillow in DejaVu Sans (``make ocr-tools`` installs the font), big and black on white,
as a diagram's label is; the files are written by python-docx and python-pptx."""

from __future__ import annotations

import io
from collections.abc import Sequence

DEJAVU_SANS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def image_with_text(text: str, *, size: tuple[int, int] = (720, 200), image_format: str = "PNG") -> bytes:
    """An image of ``size`` pixels with ``text`` drawn across it (PNG, JPEG or GIF)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", size, 255)
    if text:
        font = ImageFont.truetype(DEJAVU_SANS, 44)
        ImageDraw.Draw(image).text((24, size[1] // 2 - 28), text, fill=0, font=font)
    buffer = io.BytesIO()
    image.save(buffer, image_format)
    return buffer.getvalue()


def docx_with_picture(
    image: bytes, *, caption: str = "", alt: str = "", caption_first: bool = False, more: Sequence[bytes] = ()
) -> bytes:
    """A Word document: a heading, a paragraph, the picture (alt text ``alt``) with its caption
    paragraph (style Caption) after it, or before it, then a closing paragraph; ``more`` pictures
    after that, undescribed, at their own size."""
    import docx
    from docx.shared import Inches

    document = docx.Document()
    document.add_heading("Pump station", 1)
    document.add_paragraph("The pump room is drawn below.")
    if caption and caption_first:
        document.add_paragraph(caption, style="Caption")
    document.add_picture(io.BytesIO(image), width=Inches(5))
    properties = document.element.body.xpath(".//wp:docPr")[-1]
    properties.set("descr", alt)
    if caption and not caption_first:
        document.add_paragraph(caption, style="Caption")
    document.add_paragraph("Valves are checked weekly.")
    for extra in more:
        document.add_picture(io.BytesIO(extra))
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()
