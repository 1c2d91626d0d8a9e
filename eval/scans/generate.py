"""A regenerable scanned corpus: real text typeset onto page images, saved as image-only PDFs.

    .venv/bin/python -m eval.scans.generate [--out DIR]

The text is the text layer of ``eval/corpus``'s PDFs, one source page per page, in Latin-1. Each
:class:`PageStyle` sets a font, size, scan resolution, slight rotation and the scanner's defects; the
same seed gives the same pages, byte for byte on one Pillow version. Writes ``<style>.pdf`` with its
ground truth ``<style>.json`` (each page's typeset lines), and ``mixed.pdf``/``mixed.json`` (text pages
alternating with scanned ones). Imports Pillow, numpy and the domain package's PDF parser.
The styles and the engines' scores on them: docs/ocr.md (The scanned corpus).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from rag_ingest.parsing.pdf.extract import parse_pdf

CORPUS_DIR = Path(__file__).resolve().parents[1] / "corpus"
DEFAULT_OUT = Path(__file__).resolve().parents[2] / ".build" / "scans"
DEJAVU_DIR = Path("/usr/share/fonts/truetype/dejavu")
#: (corpus file, 1-based page): prose pages (no dot leaders) from four producers.
SOURCE_PAGES: tuple[tuple[str, int], ...] = (
    ("r-intro.pdf", 8),
    ("cfitsio-quick.pdf", 5),
    ("latex-usrguide.pdf", 5),
    ("x11-ctext.pdf", 4),
    ("hyperref-paper.pdf", 4),
    ("cfitsio-quick.pdf", 3),
)
PAGES_PER_STYLE = 3
#: A4 in inches; the text block keeps one-inch margins.
PAGE_INCHES = (8.27, 11.69)
MARGIN_INCHES = 1.0
MAX_LINES = 40


@dataclass(frozen=True)
class PageStyle:
    name: str
    font: str  # a DejaVu file name, or "pillow-default" (Aileron, shipped in Pillow)
    points: float
    dpi: int
    rotation_degrees: float = 0.0
    blur_radius: float = 0.0
    noise_sigma: float = 0.0  # Gaussian noise on 0..255 grey levels
    paper_grey: int = 255
    jpeg_quality: int | None = None  # None: lossless
    fax: bool = False  # 1-bit, as a fax machine or a cheap scanner's "text" mode
    noisy: bool = False  # the ≤ 5 % CER goal applies instead of ≤ 2 %


STYLES: tuple[PageStyle, ...] = (
    PageStyle("clean-serif-300", "DejaVuSerif.ttf", 11, 300),
    PageStyle("clean-sans-200", "DejaVuSans.ttf", 10, 200),
    PageStyle("clean-mono-150", "DejaVuSansMono.ttf", 10, 150),
    PageStyle("clean-aileron-200", "pillow-default", 12, 200),
    PageStyle(
        "desk-scan-200",
        "DejaVuSerif.ttf",
        11,
        200,
        rotation_degrees=1.2,
        blur_radius=0.8,
        noise_sigma=18,
        paper_grey=236,
        jpeg_quality=60,
        noisy=True,
    ),
    PageStyle("fax-100", "DejaVuSans.ttf", 12, 100, rotation_degrees=0.6, noise_sigma=30, fax=True, noisy=True),
)

_KEEP = re.compile(r"[^\x20-\x7e\xa0-\xff\n]")


@cache
def source_text(name: str, page: int) -> str:
    """The cleaned text layer of one corpus page, reduced to the characters every font here draws."""
    parsed = parse_pdf((CORPUS_DIR / name).read_bytes(), max_bytes=1 << 30, max_pages=10_000)
    text = unicodedata.normalize("NFKC", parsed.pages[page - 1].text)
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    text = text.replace("\u2013", "-").replace("\u2014", "-").replace("\u2022", "-")
    return _KEEP.sub("", text)


def _font(style: PageStyle) -> ImageFont.FreeTypeFont:
    size = round(style.points * style.dpi / 72)
    if style.font == "pillow-default":
        return ImageFont.load_default(size)  # type: ignore[return-value]
    return ImageFont.truetype(str(DEJAVU_DIR / style.font), size)


def wrap(text: str, font: ImageFont.FreeTypeFont, width_px: float) -> list[str]:
    """Greedy word wrap of each source line to ``width_px``; blank lines dropped."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        words = paragraph.split()
        current = ""
        for word in words:
            candidate = f"{current} {word}" if current else word
            if current and font.getlength(candidate) > width_px:
                lines.append(current)
                current = word
            else:
                current = candidate
        if current:
            lines.append(current)
    return lines


def render_page(text: str, style: PageStyle, rng: random.Random) -> tuple[Image.Image, list[str]]:
    """One scanned page of ``text`` in ``style``, and the lines it shows (the ground truth)."""
    width, height = (round(inches * style.dpi) for inches in PAGE_INCHES)
    margin = round(MARGIN_INCHES * style.dpi)
    font = _font(style)
    lines = wrap(text, font, width - 2 * margin)
    line_height = round(font.size * 1.35)
    lines = lines[: min(MAX_LINES, (height - 2 * margin) // line_height)]
    image = Image.new("L", (width, height), 255)
    drawing = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        drawing.text((margin, margin + index * line_height), line, font=font, fill=0)
    return degrade(image, style, rng), lines


def degrade(image: Image.Image, style: PageStyle, rng: random.Random) -> Image.Image:
    """A clean greyscale page image as ``style``'s scanner leaves it: skewed, grey paper, blurred,
    noisy, or thresholded to 1 bit (the JPEG of a lossy scan is applied when saving, by
    :func:`encode_for_pdf`)."""
    if style.rotation_degrees:
        angle = style.rotation_degrees * rng.choice((-1, 1))
        image = image.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=255)
    if style.paper_grey < 255:  # grey paper: map white to paper_grey, black stays black
        image = image.point(lambda value: value * style.paper_grey // 255)
    if style.blur_radius:
        image = image.filter(ImageFilter.GaussianBlur(style.blur_radius))
    if style.noise_sigma:
        noise = np.random.default_rng(rng.getrandbits(32)).normal(0.0, style.noise_sigma, (image.height, image.width))
        image = Image.fromarray(np.clip(np.asarray(image, dtype=np.float32) + noise, 0, 255).astype(np.uint8))
    if style.fax:
        image = image.point(lambda value: 255 if value > 140 else 0).convert("1")
    return image


def encode_for_pdf(image: Image.Image, style: PageStyle) -> Image.Image:
    if style.jpeg_quality is None:
        return image
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=style.jpeg_quality)
    return Image.open(io.BytesIO(buffer.getvalue()))


def images_to_pdf(images: Sequence[Image.Image], dpi: int) -> bytes:
    """An image-only PDF: one page per image, sized so the image fills it at ``dpi``."""
    buffer = io.BytesIO()
    first, *rest = images
    first.save(buffer, format="PDF", resolution=dpi, save_all=True, append_images=rest)
    return buffer.getvalue()


def generate_style(style: PageStyle, *, seed: int = 12) -> tuple[bytes, list[str]]:
    """The style's image-only PDF and the ground-truth text of each of its pages."""
    rng = random.Random(f"{seed}:{style.name}")
    images, truths = [], []
    for index in range(PAGES_PER_STYLE):
        name, page = SOURCE_PAGES[(index + STYLES.index(style)) % len(SOURCE_PAGES)]
        image, lines = render_page(source_text(name, page), style, rng)
        images.append(encode_for_pdf(image, style))
        truths.append("\n".join(lines))
    return images_to_pdf(images, style.dpi), truths


def generate_mixed(*, seed: int = 12) -> tuple[bytes, list[str], list[bool]]:
    """A PDF of four pages, text layer / scan / text layer / scan; its truths and which pages are scans."""
    from fpdf import FPDF

    rng = random.Random(f"{seed}:mixed")
    style = STYLES[1]
    pdf = FPDF(unit="pt", format="A4")
    pdf.add_font("DejaVu", fname=str(DEJAVU_DIR / "DejaVuSans.ttf"))
    truths: list[str] = []
    scanned: list[bool] = []
    for index in range(4):
        name, page = SOURCE_PAGES[index]
        text = source_text(name, page)
        pdf.add_page()
        if index % 2 == 0:
            pdf.set_font("DejaVu", size=10)
            pdf.set_xy(72, 72)
            lines = wrap(text, ImageFont.truetype(str(DEJAVU_DIR / "DejaVuSans.ttf"), 10), 595 - 144)[:MAX_LINES]
            pdf.multi_cell(595 - 144, 13.5, "\n".join(lines))
            truths.append("\n".join(lines))
            scanned.append(False)
        else:
            image, lines = render_page(text, style, rng)
            buffer = io.BytesIO()
            image.save(buffer, format="PNG")
            pdf.image(buffer, x=0, y=0, w=pdf.w, h=pdf.h)
            truths.append("\n".join(lines))
            scanned.append(True)
    return bytes(pdf.output()), truths, scanned


def generate(out: Path, *, seed: int = 12) -> list[Path]:
    """Write every style's PDF and truths, and the mixed PDF, into ``out``; returns the PDFs."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for style in STYLES:
        data, truths = generate_style(style, seed=seed)
        (out / f"{style.name}.pdf").write_bytes(data)
        (out / f"{style.name}.json").write_text(json.dumps({"style": style.name, "pages": truths}, indent=1))
        written.append(out / f"{style.name}.pdf")
    data, truths, scanned = generate_mixed(seed=seed)
    (out / "mixed.pdf").write_bytes(data)
    (out / "mixed.json").write_text(json.dumps({"style": "mixed", "pages": truths, "scanned": scanned}, indent=1))
    written.append(out / "mixed.pdf")
    return written


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args(argv)
    for path in generate(args.out, seed=args.seed):
        print(path)


if __name__ == "__main__":
    main()
