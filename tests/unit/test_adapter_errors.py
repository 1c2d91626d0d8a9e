"""rag_ingest.adapters.aws.translated, the one translation of the adapters' errors: a transient error
becomes ``TransientError`` (Step Functions retries it), any other passes unchanged, and the codes a
call expects end the block quietly, handed back on its ``Refusal``."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from rag_ingest.adapters.aws import CONDITION_FAILED, error_code, error_message, http_status, translated
from rag_ingest.core.errors import PermanentError, TransientError

pytestmark = pytest.mark.unit


def client_error(code: str, status: int = 400, message: str = "refused") -> ClientError:
    response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "UpdateItem")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "error",
    [
        client_error("ThrottlingException"),
        client_error("Anything", status=503),
        client_error("Anything", status=429),
        EndpointConnectionError(endpoint_url="http://127.0.0.1:9"),
    ],
)
def test_a_transient_error_becomes_a_transient_error_naming_the_call(error: Exception) -> None:
    expected = f"^update document: {type(error).__name__}: "
    catch = (ClientError, EndpointConnectionError)
    with pytest.raises(TransientError, match=expected) as caught, translated("update document", catch=catch):
        raise error
    assert caught.value.__cause__ is error


def test_any_other_error_passes_unchanged() -> None:
    error = client_error("ValidationException")
    with pytest.raises(ClientError) as caught, translated("update document"):
        raise error
    assert caught.value is error
    with pytest.raises(ValueError, match="not caught"), translated("update document"):
        raise ValueError("not caught")  # only ``catch`` (ClientError by default) is translated
    permanent = PermanentError("INVALID_REQUEST", "no")  # type: ignore[arg-type]
    with pytest.raises(PermanentError) as raised, translated("update document", catch=Exception):
        raise permanent
    assert raised.value is permanent
    transient = TransientError("already one")
    with pytest.raises(TransientError) as kept, translated("update document", catch=Exception):
        raise transient
    assert kept.value is transient


def test_an_expected_code_ends_the_block_and_is_handed_back() -> None:
    error = client_error(CONDITION_FAILED)
    with translated("update document", expect={CONDITION_FAILED}) as refusal:
        raise error
    assert refusal.refused and refusal.error is error and refusal.code == CONDITION_FAILED
    with translated("update document", expect={CONDITION_FAILED}) as quiet:
        pass
    assert not quiet.refused and quiet.error is None and quiet.code == ""


def test_an_expected_code_is_read_by_code_of() -> None:
    class StoreError(Exception):
        error = "index_not_found_exception"

    with translated(
        "search", expect={"index_not_found_exception"}, catch=Exception, code_of=lambda e: str(getattr(e, "error", ""))
    ) as refusal:
        raise StoreError()
    assert refusal.code == "index_not_found_exception"
    # A transient test of the caller's own replaces the AWS one.
    with pytest.raises(TransientError), translated("search", catch=Exception, transient=lambda e: True):
        raise StoreError()


def test_the_client_error_readers() -> None:
    error = client_error("GoneException", status=410, message="gone")
    assert (error_code(error), error_message(error), http_status(error)) == ("GoneException", "gone", 410)
    assert (error_code(ValueError()), error_message(None), http_status(None)) == ("", "", 0)
