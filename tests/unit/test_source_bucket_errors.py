"""rag_ingest.adapters.source_bucket's refusals in botocore's own ClientError shape: KMS denials name
kms:Decrypt, throttling becomes TransientError, an archived object and a gone version get their codes."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from rag_ingest.adapters.source_bucket import SourceBucket
from rag_ingest.core.errors import TransientError
from rag_ingest.sources.buckets import ObjectPin, SourceAccessDenied, SourceCode
from rag_ingest.sources.connector import ItemUnavailableError

pytestmark = pytest.mark.unit
PIN = ObjectPin("team-docs", "a b/ü.pdf", "v1", '"abc"')


class Refusing:
    def __init__(self, code: str, status: int, message: str = "refused") -> None:
        self.error = ClientError(
            {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
            "GetObject",
        )

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            raise self.error

        return call


def test_a_kms_denial_names_kms_decrypt() -> None:
    said = "User: arn:aws:sts::1:assumed-role/r is not authorized to perform: kms:Decrypt"
    with pytest.raises(SourceAccessDenied) as caught:
        SourceBucket(Refusing("AccessDenied", 403, said)).read_version(PIN, 10)
    assert caught.value.permission.startswith("kms:Decrypt on the KMS key")
    assert "s3:GetObjectVersion on arn:aws:s3:::team-docs/a b/ü.pdf" in caught.value.permission
    assert said in str(caught.value)


def test_an_unversioned_read_needs_get_object() -> None:
    with pytest.raises(SourceAccessDenied) as caught:
        SourceBucket(Refusing("AccessDenied", 403)).read_version(ObjectPin("b-1", "k", "null", '"e"'), 10)
    assert caught.value.permission == "s3:GetObject on arn:aws:s3:::b-1/k"


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("InvalidObjectState", 403, SourceCode.SOURCE_OBJECT_ARCHIVED),
        ("NoSuchVersion", 404, SourceCode.SOURCE_ITEM_CHANGED),
        ("PreconditionFailed", 412, SourceCode.SOURCE_ITEM_CHANGED),
        ("NoSuchBucket", 404, SourceCode.SOURCE_BUCKET_NOT_FOUND),
    ],
)
def test_a_read_or_copy_refusal_gets_its_code(code: str, status: int, expected: str) -> None:
    adapter = SourceBucket(Refusing(code, status))
    with pytest.raises(ItemUnavailableError) as read:
        adapter.read_version(PIN, 10)
    with pytest.raises(ItemUnavailableError) as copy:
        adapter.copy_version(PIN, "stack", "raw/x", {})
    assert read.value.code == copy.value.code == expected


def test_throttling_is_transient_and_other_errors_pass() -> None:
    with pytest.raises(TransientError):
        SourceBucket(Refusing("SlowDown", 503)).list_versions(
            "b-1", "", key_marker=None, version_id_marker=None, max_keys=1
        )
    with pytest.raises(ClientError):
        SourceBucket(Refusing("InvalidArgument", 400)).read_version(PIN, 10)
