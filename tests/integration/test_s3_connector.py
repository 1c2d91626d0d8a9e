"""The S3 source's connector on rag_ingest.adapters.source_bucket against moto's server: versioned and
unversioned buckets, 2,500 objects over three ListObjectVersions pages (a page ending between a document
and its sidecar), globs, keys that look like paths, changes and deletions, a copy pinned to the listed
version, and an AccessDenied (moto enforcing an IAM user's policy) that names the missing permission."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
import requests
from rag_ingest.adapters.source_bucket import SourceBucket
from rag_ingest.sources.buckets import SourceAccessDenied, SourceBucketMissing, SourceCode
from rag_ingest.sources.connector import ItemUnavailableError, KnownItem, SourceItem
from rag_ingest.sources.s3 import S3Connector, S3SourceConfig

from tests.support.aws import moto_server

pytestmark = pytest.mark.integration
MB = 1024 * 1024


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def s3(endpoint: str) -> Any:
    return boto3.client("s3")


def new_bucket(s3: Any, *, versioned: bool) -> str:
    name = f"src-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    if versioned:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def sidecar(**attributes: object) -> bytes:
    return json.dumps({"metadataAttributes": attributes}).encode()


def source(bucket: str, **config: Any) -> S3Connector:
    adapter = SourceBucket()
    return S3Connector(S3SourceConfig(bucket=bucket, **config), adapter, max_object_bytes=MB, copier=adapter)


def list_all(connector: S3Connector, known: Any = lambda key: None) -> tuple[list[SourceItem], int, list[Any]]:
    items: list[SourceItem] = []
    failures: list[Any] = []
    pages, cursor = 0, None
    while True:
        page = connector.list_page(cursor, known)
        items += page.items
        failures += page.failures
        pages += 1
        if page.cursor is None:
            return items, pages, failures
        cursor = page.cursor


@pytest.mark.parametrize("versioned", [True, False])
def test_2500_objects_over_pages_are_each_listed_once_with_their_sidecars(s3: Any, versioned: bool) -> None:
    bucket = new_bucket(s3, versioned=versioned)
    keys = [f"docs/doc-{n:05d}.pdf" for n in range(2500)]
    # Docs 5 and 998 have sidecars: doc 998 is the 1,000th entry, its sidecar the first of page two.
    with_sidecars = {keys[5]: "five", keys[998]: "boundary", keys[2400]: "late"}
    puts = [(key, f"%PDF {key}".encode()) for key in keys]
    puts += [(key + ".metadata.json", sidecar(label=label)) for key, label in with_sidecars.items()]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda put: s3.put_object(Bucket=bucket, Key=put[0], Body=put[1]), puts))
    entries = s3.list_object_versions(Bucket=bucket, MaxKeys=1000)
    assert entries["IsTruncated"] and entries["NextKeyMarker"] == keys[998]  # the split this test is about

    items, pages, failures = list_all(source(bucket))
    assert pages == 3 and failures == []
    assert [item.key for item in items] == keys
    assert {i.key: i.metadata["label"] for i in items if i.metadata} == with_sidecars
    token = {item.key: item.change_token for item in items}
    assert "|sidecar=" in token[keys[998]] and "|sidecar=" not in token[keys[999]]
    assert token[keys[0]].startswith("v:" if versioned else "etag:")

    # Nothing changed: the same tokens, and a known token costs no sidecar read.
    known = {item.key: KnownItem(item.change_token, item.validators) for item in items}
    again, _, _ = list_all(source(bucket), known.get)
    assert [(i.key, i.change_token) for i in again] == [(i.key, i.change_token) for i in items]
    assert all(i.metadata is None for i in again)


@pytest.mark.parametrize("versioned", [True, False])
def test_a_change_gets_a_new_token_and_a_deletion_leaves_the_listing(s3: Any, versioned: bool) -> None:
    bucket = new_bucket(s3, versioned=versioned)
    for key in ["a.pdf", "b.pdf", "c.pdf"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"%PDF one")
    s3.put_object(Bucket=bucket, Key="c.pdf.metadata.json", Body=sidecar(team="hr"))
    before = {i.key: i.change_token for i in list_all(source(bucket))[0]}
    s3.put_object(Bucket=bucket, Key="a.pdf", Body=b"%PDF two")
    s3.delete_object(Bucket=bucket, Key="b.pdf")
    s3.put_object(Bucket=bucket, Key="c.pdf.metadata.json", Body=sidecar(team="legal"))
    after = {i.key: i for i in list_all(source(bucket))[0]}
    assert sorted(after) == ["a.pdf", "c.pdf"]
    assert after["a.pdf"].change_token != before["a.pdf"]
    assert after["c.pdf"].change_token != before["c.pdf"] and after["c.pdf"].metadata == {"team": "legal"}
    assert source(bucket).fetch(after["a.pdf"]) == b"%PDF two"


def test_globs_and_keys_that_look_like_paths(s3: Any) -> None:
    bucket = new_bucket(s3, versioned=True)
    keys = [
        "handbook/a b/ünïcødé 文书.pdf",
        "handbook/../escape.pdf",
        "handbook/x/../../up.pdf",
        "handbook/drafts/d.pdf",
        "handbook/notes.txt",
        "handbook/empty-folder/",
        "other/a.pdf",
    ]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"" if key.endswith("/") else f"%PDF {key}".encode())
    connector = source(bucket, prefix="handbook/", include=["**/*.pdf"], exclude=["drafts/**"])
    items, _, failures = list_all(connector)
    assert failures == []
    by_key = {item.key: item for item in items}
    assert sorted(by_key) == sorted(
        ["handbook/a b/ünïcødé 文书.pdf", "handbook/../escape.pdf", "handbook/x/../../up.pdf"]
    )
    for key, item in by_key.items():
        assert item.uri == f"s3://{bucket}/{key}"
        assert connector.fetch(item) == f"%PDF {key}".encode()
    assert by_key["handbook/a b/ünïcødé 文书.pdf"].filename == "ünïcødé 文书.pdf"
    stack = new_bucket(s3, versioned=True)
    copied = connector.copy_into(by_key["handbook/../escape.pdf"], stack, "raw/t/d/escape.pdf", {"source": "s3"})
    body = s3.get_object(Bucket=stack, Key="raw/t/d/escape.pdf", VersionId=copied)
    assert body["Body"].read() == b"%PDF handbook/../escape.pdf" and body["Metadata"] == {"source": "s3"}


def test_copy_into_pins_the_version_listed_even_after_an_overwrite(s3: Any) -> None:
    bucket, stack = new_bucket(s3, versioned=True), new_bucket(s3, versioned=True)
    s3.put_object(Bucket=bucket, Key="a.pdf", Body=b"%PDF listed", Metadata={"owner": "them"})
    connector = source(bucket)
    [item], _, _ = list_all(connector)
    s3.put_object(Bucket=bucket, Key="a.pdf", Body=b"%PDF written while syncing")
    version = connector.copy_into(item, stack, "raw/t/d/a.pdf", {"document-id": "d"})
    copy = s3.get_object(Bucket=stack, Key="raw/t/d/a.pdf")
    assert copy["VersionId"] == version
    assert copy["Body"].read() == b"%PDF listed"
    assert copy["Metadata"] == {"document-id": "d"}  # REPLACE: the source's own metadata is not carried
    assert connector.fetch(item) == b"%PDF listed"
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "a.pdf", "VersionId": item.validators["version_id"]}]})
    with pytest.raises(ItemUnavailableError) as gone:
        connector.copy_into(item, stack, "raw/t/d/a.pdf", {})
    assert gone.value.code == SourceCode.SOURCE_ITEM_CHANGED
    with pytest.raises(ItemUnavailableError) as unreadable:
        connector.fetch(item)
    assert unreadable.value.code == SourceCode.SOURCE_ITEM_CHANGED


def test_a_missing_bucket_has_its_own_code(s3: Any) -> None:
    with pytest.raises(SourceBucketMissing) as caught:
        source(f"absent-{uuid.uuid4().hex[:8]}").list_page(None, lambda key: None)
    assert caught.value.code == SourceCode.SOURCE_BUCKET_NOT_FOUND


@pytest.fixture
def reader_without_versions(endpoint: str, s3: Any) -> Iterator[tuple[str, str, Any]]:
    """A bucket, and an S3 client of an IAM user allowed s3:ListBucket and s3:GetObject but not the
    version actions, with moto enforcing IAM from then on (its /moto-api/reset-auth)."""
    bucket = new_bucket(s3, versioned=True)
    version = s3.put_object(Bucket=bucket, Key="a.pdf", Body=b"%PDF x")["VersionId"]
    iam = boto3.client("iam")
    user = f"reader-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"},
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"},
        ],
    }
    iam.put_user_policy(UserName=user, PolicyName="read", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    client = boto3.client(
        "s3",
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
        aws_session_token="",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
    )
    requests.post(f"{endpoint}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    try:
        yield bucket, version, client
    finally:
        requests.post(f"{endpoint}/moto-api/reset-auth", data=b"inf", timeout=10).raise_for_status()


def test_an_unreadable_bucket_names_the_missing_permission(reader_without_versions: tuple[str, str, Any]) -> None:
    bucket, version, client = reader_without_versions
    assert client.list_objects_v2(Bucket=bucket)["KeyCount"] == 1  # what the user may do works
    adapter = SourceBucket(client)
    connector = S3Connector(S3SourceConfig(bucket=bucket), adapter, max_object_bytes=MB, copier=adapter)
    with pytest.raises(SourceAccessDenied) as listing:
        connector.list_page(None, lambda key: None)
    assert listing.value.code == SourceCode.SOURCE_ACCESS_DENIED
    assert listing.value.permission == f"s3:ListBucketVersions on arn:aws:s3:::{bucket}"
    assert f"needs s3:ListBucketVersions on arn:aws:s3:::{bucket}" in str(listing.value)
    item = SourceItem(
        key="a.pdf",
        change_token=f"v:{version}",
        uri=f"s3://{bucket}/a.pdf",
        filename="a.pdf",
        validators={"version_id": version, "etag": ""},
    )
    with pytest.raises(SourceAccessDenied) as reading:
        connector.fetch(item)
    assert reading.value.permission == f"s3:GetObjectVersion on arn:aws:s3:::{bucket}/a.pdf"
    with pytest.raises(SourceAccessDenied) as copying:
        connector.copy_into(item, bucket, "copy.pdf", {})
    assert copying.value.permission == (
        f"s3:GetObjectVersion on arn:aws:s3:::{bucket}/a.pdf and s3:PutObject on arn:aws:s3:::{bucket}/copy.pdf"
    )
