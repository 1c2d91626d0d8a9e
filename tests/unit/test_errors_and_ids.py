import json

import pytest
from rag_ingest.core.config import StagesEnv
from rag_ingest.core.errors import ConfigurationError, ErrorCode, PermanentError, parse_failure
from rag_ingest.core.ids import chunk_id, execution_name, is_api_document_id, new_document_id

pytestmark = pytest.mark.unit


def lambda_cause(error_type: str, message: str) -> str:
    return json.dumps({"errorType": error_type, "errorMessage": message, "stackTrace": []})


def test_permanent_error_code_survives_the_lambda_boundary() -> None:
    error = PermanentError(ErrorCode.ENCRYPTED_PDF, "the PDF needs a password")
    code, detail = parse_failure("PermanentError", lambda_cause("PermanentError", str(error)))
    assert code is ErrorCode.ENCRYPTED_PDF
    assert detail == "the PDF needs a password"


@pytest.mark.parametrize(
    ("error_type", "expected"),
    [
        ("TransientError", ErrorCode.TRANSIENT_RETRIES_EXHAUSTED),
        ("States.Timeout", ErrorCode.TIMEOUT),
        ("Sandbox.Timedout", ErrorCode.TIMEOUT),
        ("KeyError", ErrorCode.INTERNAL_ERROR),
    ],
)
def test_other_failures_map_to_codes(error_type: str, expected: ErrorCode) -> None:
    code, detail = parse_failure(error_type, lambda_cause(error_type, "boom"))
    assert code is expected
    assert "boom" in detail


def test_unknown_permanent_code_is_internal_error_with_the_message_kept() -> None:
    code, detail = parse_failure("PermanentError", lambda_cause("PermanentError", "NOT_A_CODE: x"))
    assert code is ErrorCode.INTERNAL_ERROR
    assert "NOT_A_CODE: x" in detail


def test_execution_names_are_deterministic_and_valid() -> None:
    document_id = new_document_id()
    name = execution_name(document_id, "v1")
    assert name == execution_name(document_id, "v1")
    assert name != execution_name(document_id, "v2")
    assert execution_name(document_id, "v1", replay=1).endswith("-r1")
    assert len(name) <= 80
    assert all(c.isalnum() or c in "-_" for c in execution_name("obj-weird id/with:chars", '"etag"'))


def test_chunk_ids_are_stable_per_version() -> None:
    assert chunk_id("doc", "v1", 3) == chunk_id("doc", "v1", 3)
    assert chunk_id("doc", "v1", 3) != chunk_id("doc", "v2", 3)
    assert is_api_document_id(new_document_id())
    assert not is_api_document_id("inbox")


def test_bad_environment_fails_with_every_problem_named() -> None:
    with pytest.raises(ConfigurationError) as caught:
        StagesEnv.from_env({"DOCUMENTS_TABLE": "docs", "OPENSEARCH_ENDPOINT": "ftp://x", "CHUNK_TOKENS": "9"})
    message = str(caught.value)
    for name in ("OPENSEARCH_ENDPOINT", "CHUNK_TOKENS", "BUCKET_NAME", "EMBEDDING_PROVIDER"):
        assert name in message


def test_the_alarmed_system_codes_are_the_domain_s_list() -> None:
    """The SystemFailuresAlarm (infra) counts exactly the codes the domain calls system failures:
    a new input code can never page by accident, nor a system code go unwatched."""
    from rag_ingest.core.errors import SYSTEM_ERROR_CODES

    from infra.constructs.monitoring import SYSTEM_ERROR_CODES as ALARMED

    assert set(ALARMED) == {code.value for code in SYSTEM_ERROR_CODES}
    input_codes = {
        ErrorCode.EMPTY_FILE,
        ErrorCode.PDF_TOO_COMPLEX,
        ErrorCode.INVALID_OBJECT_KEY,
        ErrorCode.CORRUPT_PDF,
        ErrorCode.UNSUPPORTED_TYPE,
    }
    assert not input_codes & set(SYSTEM_ERROR_CODES)
