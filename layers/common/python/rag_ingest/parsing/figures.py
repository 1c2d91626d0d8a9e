"""Figures, whatever format they come from: the passage a figure becomes, which images are
decoration, and an image's size read from its header.

Readers find figures (``pdf``, ``office``, ``html_markdown``) and call :func:`figure_text` for the
FIGURE block's text; :func:`select_figures` drops tiny images and images repeated on many pages
(logos, rules, bullets), counted, never indexed. Imports ``rag_ingest.core`` only. The rules:
docs/formats.md, "Figures".
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rag_ingest.core.parsed import Figure

#: An image narrower or shorter than this (pixels) is a bullet, an icon or a rule, not a figure.
MIN_FIGURE_SIDE_PX = 48
#: An image smaller in area than this (pixels) is decoration, whatever its shape.
MIN_FIGURE_AREA_PX = 96 * 96
#: The same image bytes on at least this many pages (and on a third of them, in documents of more
#: pages) is a logo or a background, not a figure.
MIN_REPEATS_FOR_DECORATION = 3

_LABELS = {"caption": "", "alt_text": "Alt text: ", "ocr_text": "Text in the image: ", "description": "Description: "}


@dataclass(frozen=True)
class ImageReading:
    """What was read from an image: the text inside it (OCR), and a model's description (AWS, when on)."""

    ocr_text: str = ""
    description: str = ""


class ImageReader(Protocol):
    """Reads one image (PNG or JPEG bytes); ``context`` is the text around it (its caption), for a
    model's prompt. Raises nothing for an image it cannot read: an empty reading."""

    def read(self, image: bytes, *, context: str = "") -> ImageReading: ...


class CaptionsOnly:
    """The reader where no engine is configured: a figure is its caption and alt text."""

    def read(self, image: bytes, *, context: str = "") -> ImageReading:
        return ImageReading()


def figure_text(figure: Figure) -> str:
    """The passage text of a figure: its caption, then its alt text, the text read inside it and
    a model's description, each on its own line and labelled (the caption is not)."""
    lines: list[str] = []
    seen: set[str] = set()  # alt text that repeats the caption is said once
    for attribute, label in _LABELS.items():
        text = " ".join(str(getattr(figure, attribute)).split())
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            lines.append(f"{label}{text}")
    return "\n".join(lines)


def is_tiny(width_px: int, height_px: int) -> bool:
    """An image too small to be a figure (when its size is known: 0 means unknown, never tiny)."""
    if width_px <= 0 or height_px <= 0:
        return False
    return min(width_px, height_px) < MIN_FIGURE_SIDE_PX or width_px * height_px < MIN_FIGURE_AREA_PX


@dataclass(frozen=True)
class FigureCandidate:
    """An image a reader met on a page, before the decoration filter."""

    page_number: int
    figure: Figure


@dataclass(frozen=True)
class FigureSelection:
    """The candidates kept as figures, and how many were skipped as decoration and why."""

    kept: list[FigureCandidate]
    skipped_tiny: int
    skipped_repeated: int

    @property
    def skipped(self) -> int:
        return self.skipped_tiny + self.skipped_repeated


def select_figures(candidates: Sequence[FigureCandidate], *, page_count: int) -> FigureSelection:
    """Drop tiny images, and images whose bytes repeat on many pages (``MIN_REPEATS_FOR_DECORATION``
    pages, and at least a third of a longer document's pages). A figure with a caption or alt text
    is kept whatever its size: its author described it."""
    pages_of: dict[str, set[int]] = {}
    for candidate in candidates:
        if candidate.figure.image_sha256:
            pages_of.setdefault(candidate.figure.image_sha256, set()).add(candidate.page_number)
    repeat_floor = max(MIN_REPEATS_FOR_DECORATION, -(-page_count // 3) if page_count > 9 else 0)
    kept: list[FigureCandidate] = []
    reasons: Counter[str] = Counter()
    for candidate in candidates:
        figure = candidate.figure
        described = bool(figure.caption.strip() or figure.alt_text.strip())
        digest = figure.image_sha256
        if digest and len(pages_of[digest]) >= repeat_floor:
            reasons["repeated"] += 1
        elif not described and is_tiny(figure.width_px, figure.height_px):
            reasons["tiny"] += 1
        else:
            kept.append(candidate)
    return FigureSelection(kept=kept, skipped_tiny=reasons["tiny"], skipped_repeated=reasons["repeated"])


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels of a PNG, JPEG, GIF or TIFF from its header; None when unknown."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        return _tiff_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        # Start-of-frame markers (baseline, progressive, ...), not DHT (C4), JPG (C8) or DAC (CC).
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return int(width), int(height)
        at += 2 + length
    return None


def _tiff_size(data: bytes) -> tuple[int, int] | None:
    order = "<" if data.startswith(b"II") else ">"
    if len(data) < 8:
        return None
    (ifd,) = struct.unpack(order + "I", data[4:8])
    if ifd + 2 > len(data):
        return None
    (entries,) = struct.unpack(order + "H", data[ifd : ifd + 2])
    size: dict[int, int] = {}
    for index in range(entries):
        at = ifd + 2 + 12 * index
        if at + 12 > len(data):
            return None
        tag, kind = struct.unpack(order + "HH", data[at : at + 4])
        if tag in (256, 257):  # ImageWidth, ImageLength: SHORT (3) or LONG (4)
            value = data[at + 8 : at + 10] if kind == 3 else data[at + 8 : at + 12]
            size[tag] = struct.unpack(order + ("H" if kind == 3 else "I"), value)[0]
    if 256 in size and 257 in size:
        return size[256], size[257]
    return None
