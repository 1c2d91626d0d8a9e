"""Each cleanup rule of rag_ingest.parsing.pdf.extract on real PDFs (the evaluation corpus, eval/corpus/README.md):
raw pypdf text shows the defect, parse_pdf's text does not."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter
from pypdf.generic import NameObject, StreamObject
from rag_ingest.core.parsed import ParsedDocument
from rag_ingest.parsing.pdf.cleanup import ALL_CLEANUP_RULES, SHIPPED_CLEANUP_RULES, clean_pages
from rag_ingest.parsing.pdf.extract import parse_pdf

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[2] / "eval" / "corpus"
MAX_BYTES, MAX_PAGES = 50 * 1024 * 1024, 500
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f\u00ad\u200b\ufeff]")


@cache
def parsed(name: str, *, clean: bool = True) -> ParsedDocument:
    return parse_pdf((CORPUS / name).read_bytes(), clean=clean, max_bytes=MAX_BYTES, max_pages=MAX_PAGES)


@cache
def with_every_rule(name: str) -> list[str]:
    """The page texts with running-header removal too (it is not shipped: SHIPPED_CLEANUP_RULES)."""
    return clean_pages([page.text for page in parsed(name, clean=False).pages], ALL_CLEANUP_RULES)


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


# --- running headers and footers (the rule exists for the ablation; parsing does not apply it) ---


def test_a_document_of_one_repeated_line_per_page_keeps_its_text() -> None:
    # py-pdf's habibi-rotated.pdf: the same single line on every page, which running-header removal emptied.
    assert clean_pages(["habibi habibi"] * 4) == ["habibi habibi"] * 4


def test_parsing_keeps_running_headers_and_removes_page_numbers() -> None:
    clean = parsed("hyperref-paper.pdf").pages
    assert "PDF information and navigation elements 3" in lines(clean[2].text)
    assert not any(re.fullmatch(r"\W*\d+\W*", line) for page in clean for line in lines(page.text)[-1:])


def test_texinfo_chapter_headers_and_page_numbers_are_removed() -> None:
    raw = parsed("r-intro.pdf", clean=False).pages
    clean = with_every_rule("r-intro.pdf")
    assert "Chapter 1: Introduction and preliminaries 4" in lines(raw[9].text)
    assert lines(raw[13].text)[0] == "8"  # a chapter's first page: a bare page number on top
    for number, page in enumerate(clean, start=1):
        assert not any(re.fullmatch(r"Chapter \d+: .* \d+", line) for line in lines(page)), number
    assert lines(clean[13])[0] == "2 Simple manipulations; numbers and vectors"
    # Text that merely starts a page is kept.
    assert lines(clean[9])[0].startswith("At this point you will be asked")


def test_alternating_header_and_constant_footer_are_removed_from_every_page() -> None:
    raw = parsed("hyperref-paper.pdf", clean=False).pages
    assert "2 PDF information and navigation elements" in lines(raw[1].text)  # even page: number first
    assert "PDF information and navigation elements 3" in lines(raw[2].text)
    header = re.compile(r"(\d+ )?PDF information and navigation elements( \d+)?")
    for number, page in enumerate(with_every_rule("hyperref-paper.pdf"), start=1):
        assert not any(header.fullmatch(line) for line in lines(page)), number
        assert "Proceedings" not in page, number
    # The title on page 1 says the same words, and stays.
    assert lines(with_every_rule("hyperref-paper.pdf")[0])[0].startswith("PDF information and navigation elements")


def test_page_numbers_of_a_two_column_newsletter_are_removed() -> None:
    raw = parsed("ltnews35.pdf", clean=False).pages
    clean = parsed("ltnews35.pdf").pages
    assert lines(raw[1].text)[-1].endswith("2")
    assert [lines(page.text)[-1] for page in raw[1:]] != [lines(page.text)[-1] for page in clean[1:]]
    assert not any(re.fullmatch(r"\W*\d+\W*", lines(page.text)[-1]) for page in clean)


def test_watermark_and_draft_header_and_footer_lines_are_removed() -> None:
    for number, page in enumerate(with_every_rule("tugboat-babelbib.pdf"), start=1):
        assert "preliminary draft" not in page, number
        assert "draft" not in lines(page)[:3], number


# --- ligatures ------------------------------------------------------------------------------------


def test_ligature_glyphs_become_letters() -> None:
    raw = "\n".join(page.text for page in parsed("hyperref-paper.pdf", clean=False).pages)
    clean = "\n".join(page.text for page in parsed("hyperref-paper.pdf").pages)
    assert "\ufb01le" in raw  # "ﬁle" with the fi ligature
    assert not re.search("[\ufb00-\ufb06]", clean)
    assert "written to the .aux file" in " ".join(clean.split())


# --- line-end hyphenation ----------------------------------------------------------------------


def test_words_broken_at_line_ends_are_joined() -> None:
    raw = "\n".join(page.text for page in parsed("r-intro.pdf", clean=False).pages)
    clean = "\n".join(page.text for page in parsed("r-intro.pdf").pages)
    for broken, joined in (("com-\nplicated", "complicated"), ("pack-\nages", "packages")):
        assert broken in raw
        assert broken not in clean
        assert joined in clean


def test_real_compounds_broken_at_line_ends_keep_their_hyphen() -> None:
    raw = "\n".join(page.text for page in parsed("ltnews35.pdf", clean=False).pages)
    clean = "\n".join(page.text for page in parsed("ltnews35.pdf").pages)
    assert "Unicode-\naware" in raw
    assert "Unicode-\naware" in clean  # two dictionary words: not one broken word
    assert "Unicodeaware" not in clean


def test_hyphenation_follows_the_documents_own_spelling() -> None:
    # "right-to-left" appears whole elsewhere: "right-\nto" at a line end keeps its hyphen.
    pages = ["A right-to-left script.", "text written right-\nto-left here"]
    assert clean_pages(pages)[1] == "text written right-\nto-left here"
    assert clean_pages(["we use bookmarks here.", "book-\nmarks again"])[1] == "bookmarks again"


# --- control and invisible characters ----------------------------------------------------------


def test_control_characters_from_math_fonts_are_removed() -> None:
    raw = parsed("amsldoc.pdf", clean=False).pages
    clean = parsed("amsldoc.pdf").pages
    assert _CONTROL.search(raw[16].text)  # big parentheses of a matrix come out as \x00 and \x01
    assert not any(_CONTROL.search(page.text) for page in clean)
    assert "\x00 a b\nc d\n\x01" in raw[16].text
    assert "a b\nc d" in clean[16].text


# --- layout ---------------------------------------------------------------------------------------


def test_two_columns_are_read_one_after_the_other() -> None:
    page = parsed("ltnews35.pdf").pages[1].text
    left_bottom = page.index("Package and class authors can test if a user has used")
    right_top = page.index("are currently working on). With")
    assert left_bottom < right_top
    # Lines are a column wide: layout mode would put both columns side by side on one line.
    widths = sorted(len(line) for line in lines(page))
    assert widths[len(widths) // 2] < 60


# --- a PDF that pypdf can only partly read -------------------------------------------------------


def test_a_page_with_a_corrupt_content_stream_is_recorded_and_the_rest_kept() -> None:
    writer = PdfWriter(clone_from=PdfReader(CORPUS / "grfguide.pdf"))
    broken = StreamObject()
    broken.set_data(b"\x00 not a content stream")
    broken[NameObject("/Filter")] = NameObject("/FlateDecode")  # claims compression it does not have
    writer.pages[1][NameObject("/Contents")] = writer._add_object(broken)
    output = io.BytesIO()
    writer.write(output)

    document = parse_pdf(output.getvalue(), max_bytes=MAX_BYTES, max_pages=MAX_PAGES)

    # pypdf only logs the broken stream and reads it as empty; parse_pdf still records the page.
    assert document.failed_pages == [2]
    assert document.page_count == 16
    assert document.pages[1].text == ""
    assert all(page.text for number, page in enumerate(document.pages) if number != 1)


def test_a_blank_page_is_not_a_failed_page() -> None:
    writer = PdfWriter(clone_from=PdfReader(CORPUS / "grfguide.pdf"))
    writer.insert_blank_page(index=1)
    output = io.BytesIO()
    writer.write(output)
    document = parse_pdf(output.getvalue(), max_bytes=MAX_BYTES, max_pages=MAX_PAGES)
    assert document.failed_pages == []
    assert document.pages[1].text == ""


def test_an_empty_compressed_content_stream_is_a_blank_page_not_a_failure() -> None:
    # amsldoc's page 4 is blank: its content stream is valid zlib data for zero bytes.
    document = parsed("amsldoc.pdf")
    assert document.pages[3].text == ""
    assert document.failed_pages == []


def _synthetic_pages() -> list[str]:
    """Four pages with a running header, a page number, a ligature, an invisible character,
    a run of spaces and a word broken at a line end."""
    first = "The e\ufb00ect of  the set\u00adting is exam-\nple one."
    others = ["Lamps were lit at dusk.", "Keepers logged the weather.", "Ships steered by the beam."]
    return [f"Chapter One: Setup\n{text}\n{number}" for number, text in enumerate([first, *others], start=1)]


def test_every_rule_but_running_header_removal_ships() -> None:
    assert replace(ALL_CLEANUP_RULES, running_headers=False) == SHIPPED_CLEANUP_RULES
    assert clean_pages(_synthetic_pages()) == clean_pages(_synthetic_pages(), SHIPPED_CLEANUP_RULES)
    assert clean_pages(_synthetic_pages())[0] == "Chapter One: Setup\nThe effect of the setting is example one."
    assert clean_pages(_synthetic_pages(), ALL_CLEANUP_RULES)[0] == "The effect of the setting is example one."


@pytest.mark.parametrize(
    ("rule", "kept"),
    [
        ("ligatures", "e\ufb00ect"),
        ("invisible_chars", "set\u00adting"),
        ("whitespace", "of  the"),
        ("running_headers", "Chapter One: Setup"),
        ("page_numbers", "\n1"),
        ("dehyphenation", "exam-\nple"),
    ],
)
def test_each_cleanup_rule_can_be_switched_off_alone(rule: str, kept: str) -> None:
    without = clean_pages(_synthetic_pages(), replace(ALL_CLEANUP_RULES, **{rule: False}))[0]
    assert kept in without
    assert kept not in clean_pages(_synthetic_pages(), ALL_CLEANUP_RULES)[0]
