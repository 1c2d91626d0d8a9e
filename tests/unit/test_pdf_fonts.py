"""Fonts read once per document in Parse (rag_ingest/parsing/pdf/fonts.py): the same text, less work."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader
from pypdf.generic._font import Font
from rag_ingest.parsing.pdf import fonts as pdf_fonts
from rag_ingest.parsing.pdf.fonts import fonts_read_once

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
# Real documents whose pages share fonts: LaTeX (Type1 with /ToUnicode) and a TrueType producer.
DOCUMENTS = ["eval/corpus/grfguide.pdf", "eval/corpus/reportlab-userguide.pdf", "eval/corpus/sil-padauk-features.pdf"]


def _texts(path: str) -> list[str]:
    reader = PdfReader(io.BytesIO((REPO / path).read_bytes()), strict=False)
    return [page.extract_text(extraction_mode="plain") for page in reader.pages]


def _wrapper() -> Any:
    """The function behind ``Font.from_font_resource`` (a classmethod: the bound method's ``__func__``)."""
    return Font.__dict__["from_font_resource"].__func__


def test_the_wrapper_is_installed_on_pypdf_font() -> None:
    assert pdf_fonts._INSTALLED
    assert getattr(_wrapper(), "_rag_ingest_shared", False)


@pytest.mark.parametrize("path", DOCUMENTS)
def test_shared_fonts_give_the_same_text_as_fonts_read_per_page(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    build = _wrapper()._rag_ingest_build

    def counting_build(cls: type, pdf_font_dict: object) -> object:
        built.append(id(pdf_font_dict))
        return build(cls, pdf_font_dict)

    monkeypatch.setattr(_wrapper(), "_rag_ingest_build", counting_build)
    per_page = _texts(path)
    fonts_read_per_page = len(built)
    built.clear()
    with fonts_read_once():
        shared = _texts(path)
    assert shared == per_page
    assert any(text.strip() for text in shared)
    # Each font dictionary was read once, where without the cache it was read on every page using it.
    assert len(built) == len(set(built)) < fonts_read_per_page


def test_outside_the_block_nothing_is_kept() -> None:
    with fonts_read_once():
        assert pdf_fonts._CACHE.get() == {}
    assert pdf_fonts._CACHE.get() is None
