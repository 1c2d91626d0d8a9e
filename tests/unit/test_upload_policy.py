"""The presigned POST's policy document: moto accepts any upload, so the policy is asserted here."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.presigner import S3Presigner
from rag_ingest.core.config import ApiEnv
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.documents.schemas import UploadRequest
from rag_ingest.documents.service import DocumentService

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
ENV = ApiEnv.from_env(
    {
        "DOCUMENTS_TABLE": "documents",
        "BUCKET_NAME": "rag-docs",
        "MAX_UPLOAD_BYTES": str(10 * 1024 * 1024),
        "UPLOAD_URL_EXPIRY_SECONDS": "300",
        "OPENSEARCH_ENDPOINT": "https://search.example",
        "OPENSEARCH_INDEX": "rag-chunks",
        "EMBEDDING_DIMENSION": "1024",
        "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:ingest",
    }
)


class RecordedStatus:
    """Only the one call create_upload makes; the table itself is covered by integration tests."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create_awaiting_upload(self, **fields: Any) -> None:
        self.created.append(fields)


@pytest.fixture
def service_and_status() -> tuple[DocumentService, RecordedStatus]:
    # Presigning is local computation: fake credentials, no endpoint is contacted.
    s3 = boto3.client("s3", region_name="us-east-1", aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
    status = RecordedStatus()
    return DocumentService(ENV, status, S3Presigner(s3)), status  # type: ignore[arg-type]


def test_policy_pins_key_type_size_and_expiry(service_and_status: tuple[DocumentService, RecordedStatus]) -> None:
    service, status = service_and_status
    ticket = service.create_upload("acme", UploadRequest(filename="Annual report 2026.pdf"))
    fields = ticket.upload["fields"]
    policy = json.loads(base64.b64decode(fields["policy"]))
    key = f"raw/acme/{ticket.document_id}/Annual report 2026.pdf"

    assert fields["key"] == key and fields["Content-Type"] == "application/pdf"
    conditions = policy["conditions"]
    assert {"bucket": "rag-docs"} in conditions
    assert {"key": key} in conditions  # exact key: the upload cannot land elsewhere
    assert {"Content-Type": "application/pdf"} in conditions
    assert ["content-length-range", 1, 10 * 1024 * 1024] in conditions
    expires = datetime.strptime(policy["expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    remaining = (expires - datetime.now(UTC)).total_seconds()
    assert 250 < remaining <= 300
    assert status.created == [
        {"document_id": ticket.document_id, "tenant_id": "acme", "filename": "Annual report 2026.pdf",
         "bucket": "rag-docs", "key": key, "metadata": {}}
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("content_type", "code"),
    [
        ("image/gif", ErrorCode.UNSUPPORTED_TYPE),
        ("", ErrorCode.UNSUPPORTED_TYPE),
        ("application/msword", ErrorCode.LEGACY_OFFICE_FORMAT),
        ("application/vnd.ms-powerpoint", ErrorCode.LEGACY_OFFICE_FORMAT),
        ("application/vnd.ms-word.document.macroEnabled.12", ErrorCode.MACRO_ENABLED_DOCUMENT),
    ],
)
def test_types_that_are_not_accepted_get_no_upload(
    service_and_status: tuple[DocumentService, RecordedStatus], content_type: str, code: ErrorCode
) -> None:
    service, status = service_and_status
    with pytest.raises(PermanentError) as caught:
        service.create_upload("acme", UploadRequest(filename="whatever.pdf", content_type=content_type))
    assert caught.value.code is code
    assert status.created == []


@pytest.mark.parametrize(
    ("filename", "content_type", "max_bytes"),
    [
        ("notes", "application/pdf", 10 * 1024 * 1024),  # the name decides nothing: Validate reads the bytes
        ("deck.pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation", 10 * 1024 * 1024),
        ("README.md", "text/markdown; charset=utf-8", 10 * 1024 * 1024),
    ],
)
def test_the_post_pins_the_declared_type_and_its_size_limit(
    service_and_status: tuple[DocumentService, RecordedStatus], filename: str, content_type: str, max_bytes: int
) -> None:
    service, _ = service_and_status
    ticket = service.create_upload("acme", UploadRequest(filename=filename, content_type=content_type))
    conditions = json.loads(base64.b64decode(ticket.upload["fields"]["policy"]))["conditions"]
    media_type = content_type.split(";")[0]
    assert {"Content-Type": media_type} in conditions and ticket.upload["fields"]["Content-Type"] == media_type
    assert ["content-length-range", 1, max_bytes] in conditions and ticket.max_bytes == max_bytes


def test_text_formats_have_their_own_size_limit() -> None:
    from rag_ingest.core.parsed import DocumentFormat
    from rag_ingest.core.upload_types import MAX_TEXT_FORMAT_BYTES, max_bytes_for

    assert max_bytes_for(DocumentFormat.HTML, 100 * 1024 * 1024) == MAX_TEXT_FORMAT_BYTES
    assert max_bytes_for(DocumentFormat.PPTX, 100 * 1024 * 1024) == 100 * 1024 * 1024
    assert max_bytes_for(DocumentFormat.TEXT, 1024) == 1024


def test_unsafe_filenames_are_neutralised() -> None:
    assert UploadRequest(filename="../../etc/passwd.pdf").filename == "passwd.pdf"
    assert UploadRequest(filename="a<b>|c.pdf").filename == "a_b__c.pdf"


def test_the_types_clients_declare_are_the_ones_the_api_accepts() -> None:
    """The client declares by extension (rag_ingest_client.uploads); the API announces the format of
    each declared type: every extension's type is accepted, as the format its name says."""
    from rag_ingest.core.parsed import DocumentFormat
    from rag_ingest.core.upload_types import UPLOAD_CONTENT_TYPES, upload_format
    from rag_ingest_client.uploads import EXTENSION_TYPES

    assert set(EXTENSION_TYPES.values()) <= set(UPLOAD_CONTENT_TYPES)
    assert {extension: upload_format(content_type) for extension, content_type in EXTENSION_TYPES.items()} == {
        ".pdf": DocumentFormat.PDF,
        ".docx": DocumentFormat.DOCX,
        ".pptx": DocumentFormat.PPTX,
        ".html": DocumentFormat.HTML,
        ".htm": DocumentFormat.HTML,
        ".md": DocumentFormat.MARKDOWN,
        ".markdown": DocumentFormat.MARKDOWN,
        ".txt": DocumentFormat.TEXT,
        ".png": DocumentFormat.PNG,
        ".jpg": DocumentFormat.JPEG,
        ".jpeg": DocumentFormat.JPEG,
        ".tif": DocumentFormat.TIFF,
        ".tiff": DocumentFormat.TIFF,
        ".xlsx": DocumentFormat.XLSX,
        ".csv": DocumentFormat.CSV,
        ".tsv": DocumentFormat.CSV,
    }


@pytest.mark.parametrize(
    ("filename", "head", "content_type"),
    [
        ("report.docx", b"%PDF-1.7\n", "application/pdf"),  # the bytes say PDF whatever the name
        ("deck.pptx", b"PK\x03\x04rest", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
        ("notes.md", b"# Notes\n", "text/markdown"),
        ("page.HTM", b"<!doctype html>", "text/html"),
        ("README", b"plain words", "text/plain"),
        ("scan.pdf", b"II*\x00\x08\x00", "image/tiff"),  # an image whatever the name
        ("receipt", b"\xff\xd8\xff\xe0", "image/jpeg"),
    ],
)
def test_clients_declare_the_type_the_bytes_and_then_the_name_suggest(
    filename: str, head: bytes, content_type: str
) -> None:
    from rag_ingest_client.uploads import declared_type

    assert declared_type(filename, head) == content_type


@pytest.mark.parametrize(
    ("filename", "head", "words"),
    [
        ("empty.pdf", b"", "empty"),
        ("animation.gif", b"GIF89a", "a GIF image"),
        ("minutes.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "LEGACY_OFFICE_FORMAT: an old binary Word file (.doc)"),
        ("budget.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "LEGACY_OFFICE_FORMAT: an old binary Excel file (.xls)"),
        ("renamed.bin", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "old binary Office file (.doc, .ppt or .xls)"),
        ("budget.xlsm", b"PK\x03\x04", "MACRO_ENABLED_DOCUMENT: a macro-enabled Excel file (.xlsm)"),
        ("report.docm", b"PK\x03\x04", "MACRO_ENABLED_DOCUMENT: a macro-enabled Word file (.docm)"),
        ("archive.zip", b"PK\x03\x04", "zip archive"),
        ("blob.txt", b"ab\x00cd", "binary data"),
    ],
)
def test_clients_refuse_what_can_never_succeed(filename: str, head: bytes, words: str) -> None:
    from rag_ingest_client.uploads import client_refusal

    reason = client_refusal(filename, head)
    assert reason is not None and words in reason
    assert client_refusal("notes.txt", "Grüße\n".encode("utf-16")) is None


def _written_office_files(folder: Path) -> list[Path]:
    """A Word file python-docx writes and a deck python-pptx writes: real zips, NUL bytes in their headers."""
    import docx
    import pptx

    document = docx.Document()
    document.add_heading("Harbour dues", level=1)
    document.add_paragraph("Vessels over 40 m pay by the metre.")
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Orchard yields"
    written = [folder / "dues.docx", folder / "YIELDS.PPTX"]
    document.save(str(written[0]))
    deck.save(str(written[1]))
    return written


def test_clients_send_real_office_files(tmp_path: Path) -> None:
    """Every Office file of the corpora and each one the libraries write is sent, declared by its name;
    the same bytes under a name that is not Word's, PowerPoint's or Excel's are refused as a zip."""
    from rag_ingest_client.uploads import client_refusal, declared_type

    corpora = sorted(
        [*(REPO / "eval" / "formats").glob("*.[dpx][opl][cts]x"), *(REPO / "samples" / "formats").glob("*x")]
    )
    files = [*corpora, *_written_office_files(tmp_path)]
    assert len(corpora) >= 10
    for path in files:
        head = path.read_bytes()[:1024]
        assert b"\x00" in head, path  # the bytes that were refused as binary data
        assert client_refusal(path.name, head) is None, path
        kind = {".pptx": "presentationml", ".xlsx": "spreadsheetml"}.get(path.suffix.lower(), "wordprocessingml")
        assert kind in declared_type(path.name, head), path
        assert "zip archive" in (client_refusal(path.stem + ".zip", head) or ""), path
