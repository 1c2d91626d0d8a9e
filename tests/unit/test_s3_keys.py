import pytest
from rag_ingest.core.ids import new_document_id, version_hash
from rag_ingest.core.s3_keys import (
    ARTIFACTS_PREFIX,
    CHUNKS_ARTIFACT,
    EMBEDDINGS_FOLDER,
    PAGES_FOLDER,
    RAW_PREFIX,
    KeyOutsideUploadsError,
    NoTenantFolderError,
    UploadKey,
    artifact_key,
    artifacts_folder,
    embedding_batch_key,
    filename_of,
    parse_upload_key,
    upload_key,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("filename", ["report.pdf", "Annual report 2026.pdf", "a+b (1).pdf"])
@pytest.mark.parametrize("raw_prefix", [RAW_PREFIX, "uploads/", "uploads"])
def test_an_upload_key_parses_back_to_what_built_it(filename: str, raw_prefix: str) -> None:
    document_id = new_document_id()
    key = upload_key("acme", document_id, filename, raw_prefix)
    assert parse_upload_key(key, raw_prefix) == UploadKey(tenant_id="acme", document_id=document_id, filename=filename)
    assert filename_of(key) == filename


def test_the_default_upload_key_is_raw_tenant_document_file() -> None:
    assert upload_key("acme", "01JDX3ZK5Q8W7N2M4P6R8T0V2X", "a.pdf") == "raw/acme/01JDX3ZK5Q8W7N2M4P6R8T0V2X/a.pdf"


@pytest.mark.parametrize(
    "key",
    [
        "raw/acme/inbox/report.pdf",  # a folder, not a document id
        "raw/acme/report.pdf",  # no document folder
        "raw/acme/01JDX3ZK5Q8W7N2M4P6R8T0V2X/deeper/report.pdf",  # an id, but not the API's depth
    ],
)
def test_a_key_put_without_the_api_has_a_tenant_and_no_document_id(key: str) -> None:
    parsed = parse_upload_key(key)
    assert (parsed.tenant_id, parsed.document_id, parsed.filename) == ("acme", None, "report.pdf")


@pytest.mark.parametrize(
    "key",
    [
        "other/acme/x.pdf",
        "artifacts/01JDX3ZK5Q8W7N2M4P6R8T0V2X/abc/pages.json",
        "raw%2Facme%2F01JDX3ZK5Q8W7N2M4P6R8T0V2X%2Fx.pdf",  # still URL-encoded: intake decodes first
        "rawacme/x.pdf",
        "/raw/acme/x.pdf",
        "",
    ],
)
def test_keys_outside_the_uploads_prefix_are_refused(key: str) -> None:
    with pytest.raises(KeyOutsideUploadsError):
        parse_upload_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "raw/",
        "raw/x.pdf",  # too few parts: no tenant folder
        "raw//x.pdf",
        "raw/acme/",  # a folder, no file
        "raw/acme%2F01/x.pdf",  # an encoded slash is not a tenant id
        "raw/acme corp/x.pdf",
        "raw/../x.pdf",
        "raw/acmé/x.pdf",
    ],
)
def test_keys_without_a_tenant_folder_are_a_typed_error(key: str) -> None:
    with pytest.raises(NoTenantFolderError):
        parse_upload_key(key)


def test_artifacts_of_a_version_live_in_the_document_folder() -> None:
    document_id, version = new_document_id(), "3HL4kqtJvjVBH40Nrjfkd"
    folder = artifacts_folder(document_id)
    assert folder == f"{ARTIFACTS_PREFIX}{document_id}/"
    keys = [artifact_key(document_id, version, name) for name in (PAGES_FOLDER, CHUNKS_ARTIFACT, EMBEDDINGS_FOLDER)]
    assert keys == [f"{folder}{version_hash(version)}/{name}" for name in ("pages/", "chunks.json", "embeddings/")]
    assert embedding_batch_key(keys[2], 7) == f"{folder}{version_hash(version)}/embeddings/000007.json"


def test_a_configured_artifacts_prefix_is_a_folder_with_or_without_its_slash() -> None:
    assert artifacts_folder("d", "stage-output") == artifacts_folder("d", "stage-output/") == "stage-output/d/"
    assert artifact_key("d", "v1", PAGES_FOLDER, "stage-output") == f"stage-output/d/{version_hash('v1')}/pages/"
