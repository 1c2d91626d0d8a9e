"""parse_pdf and validate_pdf_header on the project's sample PDFs (samples/)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pypdf
import pytest
from pypdf import PdfReader, PdfWriter
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.parsing.pdf.cleanup import clean_page_text
from rag_ingest.parsing.pdf.extract import parse_pdf, validate_pdf_header

pytestmark = pytest.mark.unit

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"
INVALID_DIR = SAMPLES_DIR / "invalid"
EXPECTED = json.loads((SAMPLES_DIR / "expected.json").read_text(encoding="utf-8"))
LIMITS = {"max_bytes": 10 * 1024 * 1024, "max_pages": 100}


def sample_bytes(name: str) -> bytes:
    return (SAMPLES_DIR / name).read_bytes()


def collapse_whitespace(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def parse_error(
    data: bytes, *, max_bytes: int = LIMITS["max_bytes"], max_pages: int = LIMITS["max_pages"]
) -> PermanentError:
    with pytest.raises(PermanentError) as caught:
        parse_pdf(data, max_bytes=max_bytes, max_pages=max_pages)
    return caught.value


# --- header checks -------------------------------------------------------------------------


def test_header_accepts_pdf_signature_at_start() -> None:
    validate_pdf_header(sample_bytes("lighthouses.pdf")[:1024], 6000, max_bytes=10_000)


def test_header_accepts_signature_after_leading_junk_within_1024_bytes() -> None:
    validate_pdf_header(b"\x00" * 1000 + b"%PDF-1.7\n", 2000, max_bytes=10_000)


def test_header_rejects_signature_beyond_1024_bytes() -> None:
    with pytest.raises(PermanentError) as caught:
        validate_pdf_header(b" " * 1024 + b"%PDF-1.7\n", 2000, max_bytes=10_000)
    assert caught.value.code is ErrorCode.UNSUPPORTED_TYPE


def test_header_checks_size_before_type() -> None:
    with pytest.raises(PermanentError) as caught:
        validate_pdf_header(b"plain text", 20_001, max_bytes=20_000)
    assert caught.value.code is ErrorCode.FILE_TOO_LARGE
    assert "20001" in caught.value.detail


def test_header_rejects_empty_object_as_empty_file() -> None:
    with pytest.raises(PermanentError) as caught:
        validate_pdf_header(b"", 0, max_bytes=20_000)
    assert caught.value.code is ErrorCode.EMPTY_FILE


def test_zero_bytes_parse_as_empty_file() -> None:
    assert parse_error(b"").code is ErrorCode.EMPTY_FILE


# --- every error code on a real sample ------------------------------------------------------


def test_text_file_with_pdf_name_is_unsupported_type() -> None:
    assert parse_error((INVALID_DIR / "not-a-pdf.pdf").read_bytes()).code is ErrorCode.UNSUPPORTED_TYPE


def test_oversized_file_is_rejected_before_parsing() -> None:
    data = sample_bytes("lighthouses.pdf")
    error = parse_error(data, max_bytes=len(data) - 1)
    assert error.code is ErrorCode.FILE_TOO_LARGE


def test_too_many_pages() -> None:
    error = parse_error(sample_bytes("lighthouses.pdf"), max_pages=4)
    assert error.code is ErrorCode.TOO_MANY_PAGES
    assert "5 pages" in error.detail


def test_page_limit_is_inclusive() -> None:
    assert parse_pdf(sample_bytes("lighthouses.pdf"), max_bytes=LIMITS["max_bytes"], max_pages=5).page_count == 5


def test_encrypted_with_user_password_is_encrypted_pdf() -> None:
    assert parse_error((INVALID_DIR / "encrypted.pdf").read_bytes()).code is ErrorCode.ENCRYPTED_PDF


def test_truncated_file_is_corrupt() -> None:
    assert parse_error((INVALID_DIR / "truncated.pdf").read_bytes()).code is ErrorCode.CORRUPT_PDF


def test_drawn_pages_without_text_are_no_text_layer() -> None:
    error = parse_error((INVALID_DIR / "image-only.pdf").read_bytes())
    assert error.code is ErrorCode.NO_TEXT_LAYER
    assert "2 pages" in error.detail


def test_blank_pages_are_empty_document() -> None:
    error = parse_error((INVALID_DIR / "empty.pdf").read_bytes())
    assert error.code is ErrorCode.EMPTY_DOCUMENT
    assert "2 pages" in error.detail


def test_zero_pages_is_empty_document() -> None:
    output = io.BytesIO()
    PdfWriter().write(output)
    assert parse_error(output.getvalue()).code is ErrorCode.EMPTY_DOCUMENT


def test_signature_but_garbage_is_corrupt() -> None:
    assert parse_error(b"%PDF-1.7\n" + b"\x13\x37" * 500).code is ErrorCode.CORRUPT_PDF


# --- successful parses ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_good_samples_parse_with_expected_sentences_on_their_pages(name: str) -> None:
    parsed = parse_pdf(sample_bytes(name), **LIMITS)

    assert parsed.page_count == EXPECTED[name]["page_count"]
    assert [page.page_number for page in parsed.pages] == list(range(1, parsed.page_count + 1))
    assert parsed.failed_pages == []
    assert all(page.text.strip() for page in parsed.pages)
    page_texts = {page.page_number: collapse_whitespace(page.text) for page in parsed.pages}
    for sentence in EXPECTED[name]["sentences"]:
        found_on = [number for number, text in page_texts.items() if sentence["text"] in text]
        assert found_on == [sentence["page"]]


def test_every_good_sample_has_expectations() -> None:
    assert sorted(path.name for path in SAMPLES_DIR.glob("*.pdf")) == sorted(EXPECTED)
    assert all(3 <= EXPECTED[name]["page_count"] <= 8 for name in EXPECTED)


def test_empty_user_password_opens_and_parses() -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(sample_bytes("sourdough.pdf"))))
    writer.encrypt(user_password="", owner_password="owner-only", algorithm="AES-256")
    output = io.BytesIO()
    writer.write(output)

    parsed = parse_pdf(output.getvalue(), **LIMITS)
    plain = parse_pdf(sample_bytes("sourdough.pdf"), **LIMITS)
    assert parsed.pages == plain.pages


def test_a_page_failing_extraction_is_recorded_and_the_rest_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    original = pypdf.PageObject.extract_text

    def extract_text_failing_on_page_2(self: pypdf.PageObject, *args: object, **kwargs: object) -> str:
        if self.page_number == 1:  # 0-based in pypdf
            raise pypdf.errors.PdfReadError("broken content stream")
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pypdf.PageObject, "extract_text", extract_text_failing_on_page_2)
    parsed = parse_pdf(sample_bytes("sourdough.pdf"), **LIMITS)

    assert parsed.failed_pages == [2]
    assert parsed.page_count == 4
    assert parsed.pages[1].text == ""
    assert "Starting a Starter" in parsed.pages[0].text
    assert "Shaping and the Cold Proof" in parsed.pages[2].text


def test_all_pages_failing_extraction_is_corrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    def always_fails(self: pypdf.PageObject, *args: object, **kwargs: object) -> str:
        raise KeyError("/Font")

    monkeypatch.setattr(pypdf.PageObject, "extract_text", always_fails)
    assert parse_error(sample_bytes("sourdough.pdf")).code is ErrorCode.CORRUPT_PDF


# --- cleanup --------------------------------------------------------------------------------


def test_ligatures_become_ascii() -> None:
    assert clean_page_text("\ufb01re \ufb02ame o\ufb00er o\ufb03ce ba\ufb04e") == "fire flame offer office baffle"


def test_line_end_hyphenation_is_joined() -> None:
    assert clean_page_text("an exam-\nple of hyphen-  \n  ation") == "an example of hyphenation"


def test_hyphen_before_a_capital_is_kept() -> None:
    assert clean_page_text("the Anglo-\nSaxon period") == "the Anglo-\nSaxon period"


def test_control_and_invisible_characters_are_removed() -> None:
    assert clean_page_text("null\x00 bell\x07 soft\u00adhyphen zero\u200bwidth") == "null bell softhyphen zerowidth"


def test_whitespace_collapsed_and_paragraph_breaks_kept() -> None:
    raw = "  Heading \t here\r\nline  two\x0c end\n \n\n\n\nNext\u00a0paragraph  \n\n\n"
    assert clean_page_text(raw) == "Heading here\nline two end\n\nNext paragraph"
