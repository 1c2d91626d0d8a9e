"""Each font of a PDF read once per page range, not once per page that uses it.

:func:`fonts_read_once` memoises pypdf's ``Font.from_font_resource`` on the font dictionary's
identity for the time of one extraction (a context variable: another thread, or a call outside the
context, runs pypdf unchanged). Extraction gives the same text; tests/unit/test_pdf_fonts.py checks
it on real PDFs. If pypdf's ``Font`` moves, nothing is cached and extraction is only slower. Why
and how much it saves: docs/pdf.md, "Fonts read once".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from rag_ingest.core.logs import logger

# id(font dictionary) -> (the dictionary, kept alive so its id is not reused; its Font)
_FontCache = dict[int, tuple[Any, Any]]
_CACHE: ContextVar[_FontCache | None] = ContextVar("rag_ingest_pdf_font_cache", default=None)


def _install() -> bool:
    """Wrap ``Font.from_font_resource`` once per process; False when pypdf no longer has it."""
    try:
        from pypdf.generic._font import Font
    except ImportError:
        return False
    original = Font.__dict__.get("from_font_resource")
    if not isinstance(original, classmethod):
        return False
    if getattr(original.__func__, "_rag_ingest_shared", False):
        return True

    def from_font_resource(cls: type, pdf_font_dict: Any) -> Any:
        build = from_font_resource._rag_ingest_build  # type: ignore[attr-defined]
        cache = _CACHE.get()
        if cache is None:
            return build(cls, pdf_font_dict)
        hit = cache.get(id(pdf_font_dict))
        if hit is not None and hit[0] is pdf_font_dict:
            return hit[1]
        font = build(cls, pdf_font_dict)
        cache[id(pdf_font_dict)] = (pdf_font_dict, font)
        return font

    from_font_resource._rag_ingest_shared = True  # type: ignore[attr-defined]
    from_font_resource._rag_ingest_build = original.__func__  # type: ignore[attr-defined]  # pypdf's own
    Font.from_font_resource = classmethod(from_font_resource)  # type: ignore[method-assign,assignment]
    return True


_INSTALLED = _install()
if not _INSTALLED:
    logger.warning("pypdf's Font.from_font_resource is gone: fonts are read on every page")


@contextmanager
def fonts_read_once() -> Iterator[None]:
    """Within the block, a font dictionary already read gives the same ``Font`` (one document)."""
    token = _CACHE.set({})
    try:
        yield
    finally:
        _CACHE.reset(token)
