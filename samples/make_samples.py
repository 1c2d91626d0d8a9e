"""Build the project's sample PDFs from the prose in ``samples/text/`` and the failure fixtures.

Run from the repository root:

    PYTHONPATH=layers/common/python .venv/bin/python samples/make_samples.py

Output is deterministic (fixed creation date, no clock or randomness), except ``encrypted.pdf``:
AES encryption draws random salts and IVs, so that file is rewritten only when it is missing or
no longer matches its source. The script then parses every output with ``rag_ingest.pdf`` and
writes ``expected.json`` (distinctive sentences and their 1-based pages) only from what the
parser really finds.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from fpdf import FPDF
from PIL import Image, ImageDraw
from pypdf import PdfReader, PdfWriter

SAMPLES_DIR = Path(__file__).resolve().parent
TEXT_DIR = SAMPLES_DIR / "text"
INVALID_DIR = SAMPLES_DIR / "invalid"
EXPECTED_PATH = SAMPLES_DIR / "expected.json"

CREATION_DATE = datetime(2026, 1, 1, tzinfo=UTC)
AUTHOR = "rag-ingest project"
ENCRYPTED_USER_PASSWORD = "rag-ingest-user"
ENCRYPTED_OWNER_PASSWORD = "rag-ingest-owner"
# Generous limits for the self-check; the pipeline's real limits are configuration.
CHECK_MAX_BYTES = 10 * 1024 * 1024
CHECK_MAX_PAGES = 100

_SENTENCE = re.compile(r"[^.!?]+[.!?]")
_WHITESPACE = re.compile(r"\s+")


@dataclass
class Section:
    heading: str
    paragraphs: list[str] = field(default_factory=list)


@dataclass
class SourceDocument:
    """One ``text/*.txt`` file: ``# title``, ``## heading`` per section, ``---`` between pages."""

    title: str
    pages: list[list[Section]]


def read_source(path: Path) -> SourceDocument:
    title = ""
    pages: list[list[Section]] = [[]]
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
        block = block.strip()
        if not block:
            continue
        if block == "---":
            pages.append([])
        elif block.startswith("## "):
            pages[-1].append(Section(heading=block[3:].strip()))
        elif block.startswith("# "):
            title = block[2:].strip()
        else:
            pages[-1][-1].paragraphs.append(" ".join(block.split()))
    return SourceDocument(title=title, pages=pages)


def new_pdf(title: str) -> FPDF:
    pdf = FPDF(format="A4", unit="mm")
    pdf.set_creation_date(CREATION_DATE)
    pdf.set_title(title)
    pdf.set_author(AUTHOR)
    pdf.set_margins(left=25, top=25, right=25)
    pdf.set_auto_page_break(auto=True, margin=25)
    return pdf


def render_document(source: SourceDocument) -> bytes:
    pdf = new_pdf(source.title)
    for page_index, sections in enumerate(source.pages):
        pdf.add_page()
        if page_index == 0:
            pdf.set_font("Helvetica", "B", 20)
            pdf.multi_cell(0, 10, source.title, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(4)
        for section in sections:
            pdf.set_font("Helvetica", "B", 14)
            pdf.multi_cell(0, 8, section.heading, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
            pdf.set_font("Helvetica", "", 11)
            for paragraph in section.paragraphs:
                pdf.multi_cell(0, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(3)
    return bytes(pdf.output())


def render_gif_image() -> bytes:
    """A small GIF photo-like gradient (no text): deterministic bytes."""
    image = Image.new("RGB", (64, 48))
    draw = ImageDraw.Draw(image)
    for row in range(48):
        draw.line([(0, row), (63, row)], fill=(row * 5, 120, 255 - row * 5))
    buffer = io.BytesIO()
    image.save(buffer, format="GIF", optimize=False)
    return buffer.getvalue()


def render_image_only() -> bytes:
    """Two pages that draw things but hold no text: a vector drawing and a raster image."""
    pdf = new_pdf("Image-only sample")
    pdf.add_page()
    # A lighthouse in vector shapes: tower, lantern, beams.
    pdf.set_fill_color(200, 40, 40)
    pdf.polygon([(95, 240), (115, 240), (110, 120), (100, 120)], style="DF")
    pdf.set_fill_color(250, 220, 90)
    pdf.rect(98, 105, 14, 15, style="DF")
    pdf.set_line_width(1.5)
    pdf.line(112, 112, 180, 90)
    pdf.line(98, 112, 30, 90)
    pdf.set_fill_color(60, 110, 180)
    pdf.rect(20, 240, 170, 30, style="F")

    pdf.add_page()
    image = Image.new("RGB", (240, 160), (235, 235, 225))
    drawing = ImageDraw.Draw(image)
    for step in range(0, 240, 12):
        drawing.line([(step, 0), (240 - step, 160)], fill=(40, 90 + step // 3, 140), width=3)
    drawing.ellipse([(80, 40), (160, 120)], outline=(20, 20, 20), width=4)
    pdf.image(image, x=25, y=40, w=160)
    return bytes(pdf.output())


def render_blank_pages() -> bytes:
    """Two pages with nothing drawn on them (EMPTY_DOCUMENT, not NO_TEXT_LAYER)."""
    pdf = new_pdf("Blank sample")
    pdf.add_page()
    pdf.add_page()
    return bytes(pdf.output())


def encrypt(pdf_bytes: bytes) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes)))
    writer.encrypt(user_password=ENCRYPTED_USER_PASSWORD, owner_password=ENCRYPTED_OWNER_PASSWORD, algorithm="AES-256")
    output = io.BytesIO()
    writer.write(output)
    return output.getvalue()


def still_encrypts(path: Path, source_bytes: bytes) -> bool:
    """True when ``path`` is an AES-256 encryption of a PDF with the same text as ``source_bytes``."""
    if not path.exists():
        return False
    try:
        reader = PdfReader(path, password=ENCRYPTED_USER_PASSWORD)
        source = PdfReader(io.BytesIO(source_bytes))
        return [page.extract_text() for page in reader.pages] == [page.extract_text() for page in source.pages]
    except Exception:
        return False


def collapse_whitespace(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def distinctive_sentences(source: SourceDocument) -> list[tuple[int, str]]:
    """Per page: the opening sentence of its second paragraph and the last sentence of the page."""
    picked: list[tuple[int, str]] = []
    for page_number, sections in enumerate(source.pages, start=1):
        paragraphs = [paragraph for section in sections for paragraph in section.paragraphs]
        candidates = [_SENTENCE.findall(paragraphs[1])[0], _SENTENCE.findall(paragraphs[-1])[-1]]
        picked.extend((page_number, sentence.strip()) for sentence in candidates)
    return picked


def verify_and_describe(path: Path, source: SourceDocument) -> dict[str, object]:
    """Parse ``path`` with the project's parser and keep only sentences found on their page alone."""
    from rag_ingest.pdf import parse_pdf  # needs PYTHONPATH=layers/common/python

    parsed = parse_pdf(path.read_bytes(), max_bytes=CHECK_MAX_BYTES, max_pages=CHECK_MAX_PAGES)
    if parsed.page_count != len(source.pages) or parsed.failed_pages:
        raise SystemExit(f"{path.name}: parsed {parsed.page_count} pages, failed {parsed.failed_pages}")
    page_texts = {page.page_number: collapse_whitespace(page.text) for page in parsed.pages}
    sentences = []
    for page_number, sentence in distinctive_sentences(source):
        found_on = [number for number, text in page_texts.items() if sentence in text]
        if found_on != [page_number]:
            raise SystemExit(f"{path.name}: {sentence!r} expected on page {page_number}, found on {found_on}")
        sentences.append({"page": page_number, "text": sentence})
    return {"title": source.title, "page_count": parsed.page_count, "sentences": sentences}


def main() -> None:
    INVALID_DIR.mkdir(exist_ok=True)
    expected: dict[str, object] = {}
    rendered: dict[str, bytes] = {}
    for text_path in sorted(TEXT_DIR.glob("*.txt")):
        source = read_source(text_path)
        pdf_path = SAMPLES_DIR / f"{text_path.stem}.pdf"
        rendered[pdf_path.name] = render_document(source)
        pdf_path.write_bytes(rendered[pdf_path.name])
        expected[pdf_path.name] = verify_and_describe(pdf_path, source)

    # An image with a .pdf name: the type comes from the bytes, and a GIF is no accepted format
    # (PNG, JPEG and TIFF are read by OCR). A text file with a .pdf name is read as the text it is.
    (INVALID_DIR / "not-a-pdf.pdf").write_bytes(render_gif_image())
    truncated_source = rendered["lighthouses.pdf"]
    (INVALID_DIR / "truncated.pdf").write_bytes(truncated_source[: len(truncated_source) // 2])
    (INVALID_DIR / "image-only.pdf").write_bytes(render_image_only())
    (INVALID_DIR / "empty.pdf").write_bytes(render_blank_pages())
    encrypted_path = INVALID_DIR / "encrypted.pdf"
    if not still_encrypts(encrypted_path, rendered["sourdough.pdf"]):
        encrypted_path.write_bytes(encrypt(rendered["sourdough.pdf"]))

    EXPECTED_PATH.write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(rendered)} samples, 5 invalid fixtures and {EXPECTED_PATH.name}")


if __name__ == "__main__":
    main()
