"""rag_ingest.sources.s3 against an in-memory bucket that lists as ListObjectVersions does (key order,
newest first within a key, pages that may end inside a key): the globs, the configuration's checks,
the change token, sidecars paired across every page boundary, and the items that fail or are skipped."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping

import pytest
from pydantic import ValidationError
from rag_ingest.core.metadata import MAX_SIDECAR_BYTES
from rag_ingest.sources.buckets import NULL_VERSION, ObjectPin, ObjectVersion, SourceCode, VersionListing
from rag_ingest.sources.connector import ItemUnavailableError, KnownItem, SourceItem
from rag_ingest.sources.s3 import S3Connector, S3SourceConfig, change_token, glob_regex

pytestmark = pytest.mark.unit
MB = 1024 * 1024


class MemoryBucket:
    """A bucket in memory, versioned or not, read through the ``BucketReader`` port."""

    def __init__(self, name: str = "team-docs", *, versioned: bool = True) -> None:
        self.name, self.versioned = name, versioned
        self.versions: dict[str, list[tuple[ObjectVersion, bytes]]] = {}  # newest first
        self.ids = itertools.count(1)
        self.list_calls: list[str] = []
        self.reads: list[str] = []

    def put(self, key: str, body: bytes = b"%PDF-1.4 x", storage_class: str = "STANDARD") -> ObjectVersion:
        version_id = f"v{next(self.ids):04d}" if self.versioned else NULL_VERSION
        etag = f'"{hashlib.md5(body).hexdigest()}"'
        version = ObjectVersion(key, version_id, True, etag=etag, size=len(body), storage_class=storage_class)
        older = [(_older(v), b) for v, b in self.versions.get(key, []) if self.versioned]
        self.versions[key] = [(version, body), *older]
        return version

    def delete(self, key: str) -> None:
        if not self.versioned:
            self.versions.pop(key)
            return
        marker = ObjectVersion(key, f"v{next(self.ids):04d}", True, is_delete_marker=True)
        self.versions[key] = [(marker, b""), *[(_older(v), b) for v, b in self.versions[key]]]

    def list_versions(
        self, bucket: str, prefix: str, *, key_marker: str | None, version_id_marker: str | None, max_keys: int
    ) -> VersionListing:
        assert bucket == self.name
        self.list_calls.append(prefix)
        entries = [v for key in sorted(self.versions) if key.startswith(prefix) for v, _ in self.versions[key]]
        start = 0
        if key_marker is not None:
            after = [i for i, v in enumerate(entries) if (v.key, v.version_id) == (key_marker, version_id_marker)]
            start = after[0] + 1 if after else sum(1 for v in entries if v.key <= key_marker)
        page = entries[start : start + max_keys]
        if start + max_keys >= len(entries):
            return VersionListing(tuple(page))
        return VersionListing(tuple(page), page[-1].key, page[-1].version_id)

    def read_version(self, pin: ObjectPin, max_bytes: int) -> bytes:
        self.reads.append(pin.key)
        for version, body in self.versions.get(pin.key, []):
            if version.is_delete_marker:
                continue
            if (pin.by_etag and version.etag == pin.etag) or (not pin.by_etag and version.version_id == pin.version_id):
                return body[: max_bytes + 1]
        raise ItemUnavailableError(SourceCode.SOURCE_ITEM_CHANGED, f"{pin.key} changed")


def _older(version: ObjectVersion) -> ObjectVersion:
    return ObjectVersion(version.key, version.version_id, False, version.is_delete_marker, version.etag, version.size)


def sidecar(**attributes: object) -> bytes:
    return json.dumps({"metadataAttributes": attributes}).encode()


def nothing_known(key: str) -> KnownItem | None:
    return None


def list_all(connector: S3Connector, known: object = nothing_known) -> tuple[list[SourceItem], list[object]]:
    items: list[SourceItem] = []
    failures: list[object] = []
    cursor: str | None = None
    while True:
        page = connector.list_page(cursor, known)  # type: ignore[arg-type]
        items += page.items
        failures += page.failures
        if page.cursor is None:
            return items, failures
        json.loads(page.cursor)  # the engine checkpoints it as JSON text
        cursor = page.cursor


def connector(bucket: MemoryBucket, page_size: int = 1000, **config: object) -> S3Connector:
    return S3Connector(
        S3SourceConfig(bucket=bucket.name, **config),  # type: ignore[arg-type]
        bucket,
        max_object_bytes=MB,
        page_size=page_size,
    )


# -- globs ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("**", "a/b/c.pdf", True),
        ("*", "c.pdf", True),
        ("*", "a/c.pdf", False),
        ("*.pdf", "a/c.pdf", False),
        ("**/*.pdf", "c.pdf", True),
        ("**/*.pdf", "a/b/c.pdf", True),
        ("**/*.pdf", "a/b/c.pdfx", False),
        ("docs/**", "docs/a/b.txt", True),
        ("docs/**", "other/docs/b.txt", False),
        ("a/**/z.md", "a/z.md", True),
        ("a/**/z.md", "a/b/c/z.md", True),
        ("?.txt", "a.txt", True),
        ("?.txt", "/.txt", False),
        ("[ab].txt", "[ab].txt", True),  # brackets are literal
        ("[ab].txt", "a.txt", False),
        ("my docs/**/*.pdf", "my docs/x/ü é.pdf", True),
        ("../*.pdf", "../a.pdf", True),
    ],
)
def test_globs_cross_folders_only_with_a_double_star(pattern: str, key: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).fullmatch(key)) is matches


def test_globs_match_the_key_below_the_prefix_and_exclude_wins() -> None:
    config = S3SourceConfig(bucket="team-docs", prefix="handbook/", include=("*.pdf", "hr/**"), exclude=("**/draft*",))
    assert config.selects("handbook/a.pdf")
    assert not config.selects("handbook/x/a.pdf")
    assert config.selects("handbook/hr/x/y.docx")
    assert not config.selects("handbook/hr/x/draft-1.docx")
    assert not config.selects("handbook/draft.pdf")
    assert S3SourceConfig(bucket="team-docs").selects("any/thing at/all.bin")


# -- configuration ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"bucket": "Team-Docs"}, "lowercase letters"),
        ({"bucket": "ab"}, "3 to 63"),
        ({"bucket": "a" * 64}, "3 to 63"),
        ({"bucket": "team..docs"}, "no '..'"),
        ({"bucket": "-team"}, "begins and ends"),
        ({"bucket": "192.168.5.4"}, "no IP address"),
        ({"bucket": "arn:aws:s3:::team-docs"}, "the bucket's name alone"),
        ({"bucket": "s3://team-docs/x"}, "the bucket's name alone"),
        ({"bucket": "team-docs", "include": ["a**b"]}, r"include\n.*\[0\] '\*\*' is a whole path segment"),
        ({"bucket": "team-docs", "exclude": ["ok", ""]}, r"exclude\n.*\[1\] a glob is not empty"),
        ({"bucket": "team-docs", "include": ["*"] * 51}, "at most 50 globs"),
        ({"bucket": "team-docs", "prefix": "é" * 513}, "at most 1024 bytes"),
        ({"bucket": "team-docs", "region": "us-east-1"}, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_configuration_is_refused_saying_why(config: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        S3SourceConfig.model_validate(config)


def test_the_defaults_take_every_key_of_the_bucket() -> None:
    config = S3SourceConfig.model_validate({"bucket": "team.docs-2024"})
    assert (config.prefix, config.include, config.exclude) == ("", ("**",), ())
    assert S3SourceConfig.model_validate_json(config.model_dump_json()) == config


def test_the_connector_refuses_limits_s3_cannot_honour() -> None:
    config = S3SourceConfig(bucket="team-docs")
    with pytest.raises(ValueError, match="max_object_bytes"):
        S3Connector(config, MemoryBucket(), max_object_bytes=6 * 1024**3)
    with pytest.raises(ValueError, match="page_size"):
        S3Connector(config, MemoryBucket(), max_object_bytes=MB, page_size=1001)


# -- change tokens ----------------------------------------------------------------------------
def test_the_token_is_the_version_id_or_the_etag_where_it_is_null() -> None:
    versioned, plain = MemoryBucket(), MemoryBucket(versioned=False)
    first = versioned.put("a.pdf")
    assert change_token(first, None) == f"v:{first.version_id}"
    same_bytes = versioned.put("a.pdf")
    assert change_token(same_bytes, None) != change_token(first, None)  # every PUT is a new version
    unversioned = plain.put("a.pdf", b"one")
    assert change_token(unversioned, None) == f"etag:{hashlib.md5(b'one').hexdigest()}"
    assert change_token(plain.put("a.pdf", b"one"), None) == change_token(unversioned, None)
    assert change_token(plain.put("a.pdf", b"two"), None) != change_token(unversioned, None)


def test_a_sidecar_change_alone_changes_the_token() -> None:
    bucket = MemoryBucket()
    bucket.put("a.pdf")
    bucket.put("a.pdf.metadata.json", sidecar(team="hr"))
    [before], _ = list_all(connector(bucket))
    bucket.put("a.pdf.metadata.json", sidecar(team="legal"))
    [after], _ = list_all(connector(bucket))
    assert before.change_token != after.change_token
    assert (before.metadata, after.metadata) == ({"team": "hr"}, {"team": "legal"})
    assert before.validators == after.validators  # the document itself did not change
    bucket.delete("a.pdf.metadata.json")
    [bare], _ = list_all(connector(bucket))
    assert bare.metadata is None and bare.change_token == f"v:{bare.validators['version_id']}"


# -- sidecars and page boundaries ----------------------------------------------------------------
def tricky_bucket(*, versioned: bool = True) -> MemoryBucket:
    """Keys that sort between a document and its sidecar, deleted sidecars, orphans, old versions."""
    bucket = MemoryBucket(versioned=versioned)
    for key in ["a.pdf", "a.pdf-2", "a.pdf.bak", "a.pdf.a/b.pdf", "c.pdf", "d/e f.pdf", "é/ü.pdf"]:
        bucket.put(key, f"%PDF {key}".encode())
    bucket.put("a.pdf-2.metadata.json", sidecar(n=2))
    bucket.put("a.pdf.metadata.json", sidecar(n=1))
    bucket.put("a.pdf.metadata.json", sidecar(n=11))  # an older version stays behind it
    bucket.put("c.pdf.metadata.json", sidecar(n=3))
    bucket.put("c.pdf", b"%PDF c v2")
    bucket.put("orphan.pdf.metadata.json", sidecar(n=4))
    bucket.put("gone.pdf", b"%PDF gone")
    bucket.put("d/e f.pdf.metadata.json", sidecar(tags=["x", "y"]))
    if versioned:
        bucket.delete("c.pdf.metadata.json")
        bucket.delete("gone.pdf")
    return bucket


EXPECTED = {
    "a.pdf": {"n": 11},
    "a.pdf-2": {"n": 2},
    "a.pdf.a/b.pdf": None,
    "a.pdf.bak": None,
    "c.pdf": None,
    "d/e f.pdf": {"tags": ["x", "y"]},
    "é/ü.pdf": None,
}


@pytest.mark.parametrize("versioned", [True, False])
def test_every_page_size_lists_each_item_once_with_its_sidecar(versioned: bool) -> None:
    bucket = tricky_bucket(versioned=versioned)
    expected = dict(EXPECTED) if versioned else {**EXPECTED, "c.pdf": {"n": 3}, "gone.pdf": None}
    whole, _ = list_all(connector(bucket))
    assert {item.key: item.metadata for item in whole} == expected
    total = sum(len(v) for v in bucket.versions.values())
    for page_size in range(1, total + 1):
        items, failures = list_all(connector(bucket, page_size=page_size))
        assert [item.key for item in items] == sorted(expected), page_size
        assert [(i.key, i.change_token, i.metadata) for i in items] == [
            (i.key, i.change_token, i.metadata) for i in whole
        ], page_size
        assert failures == []


def test_a_sidecar_beyond_the_page_is_looked_up_only_then() -> None:
    bucket = tricky_bucket()
    list_all(connector(bucket))
    assert bucket.list_calls == [""]  # one page, no lookups
    bucket.list_calls.clear()
    list_all(connector(bucket, page_size=1))
    lookups = [prefix for prefix in bucket.list_calls if prefix]
    assert lookups and all(prefix.endswith(".metadata.json") for prefix in lookups)


def test_an_unchanged_item_costs_no_sidecar_read() -> None:
    bucket = tricky_bucket()
    first, _ = list_all(connector(bucket))
    known = {item.key: KnownItem(item.change_token, item.validators) for item in first}
    bucket.reads.clear()
    again, _ = list_all(connector(bucket), known.get)
    assert bucket.reads == []
    assert [i.change_token for i in again] == [i.change_token for i in first]
    bucket.put("d/e f.pdf.metadata.json", sidecar(tags=["z"]))
    changed, _ = list_all(connector(bucket), known.get)
    assert bucket.reads == ["d/e f.pdf.metadata.json"]
    assert {i.key: i.metadata for i in changed}["d/e f.pdf"] == {"tags": ["z"]}


def test_a_bad_sidecar_fails_its_document_only() -> None:
    bucket = MemoryBucket()
    for key in ["a.pdf", "b.pdf", "c.pdf"]:
        bucket.put(key)
    bucket.put("a.pdf.metadata.json", sidecar(document_id="mine"))
    bucket.put("b.pdf.metadata.json", b"x" * (MAX_SIDECAR_BYTES + 1))
    items, failures = list_all(connector(bucket))
    assert [i.key for i in items] == ["c.pdf"]
    reasons = {f.key: (f.code, f.reason) for f in failures}  # type: ignore[attr-defined]
    assert reasons["a.pdf"][0] == "INVALID_REQUEST"
    assert reasons["a.pdf"][1].startswith("sidecar a.pdf.metadata.json: metadataAttributes.document_id:")
    assert reasons["b.pdf"] == (
        "INVALID_REQUEST",
        f"sidecar b.pdf.metadata.json: metadataAttributes: the sidecar is over {MAX_SIDECAR_BYTES} bytes",
    )
    assert bucket.reads == ["a.pdf.metadata.json"]  # the big one is never read


# -- what is not an item ------------------------------------------------------------------------
def test_folders_big_empty_and_archived_objects_are_skipped_or_failed_with_a_code() -> None:
    bucket = MemoryBucket()
    bucket.put("docs/", b"")
    bucket.put("odd/", b"bytes")
    bucket.put("big.pdf", b"x" * (MB + 1))
    bucket.put("empty.pdf", b"")
    bucket.put("cold.pdf", storage_class="DEEP_ARCHIVE")
    bucket.put("instant.pdf", storage_class="GLACIER_IR")
    items, failures = list_all(connector(bucket))
    assert [i.key for i in items] == ["instant.pdf"]
    codes = {f.key: f.code for f in failures}  # type: ignore[attr-defined]
    assert codes == {
        "odd/": "INVALID_OBJECT_KEY",
        "big.pdf": "FILE_TOO_LARGE",
        "empty.pdf": "EMPTY_FILE",
        "cold.pdf": "SOURCE_OBJECT_ARCHIVED",
    }
    assert all(f.uri == f"s3://team-docs/{f.key}" for f in failures)  # type: ignore[attr-defined]


def test_keys_are_data_never_paths() -> None:
    bucket = MemoryBucket()
    keys = ["../../etc/passwd", "a/../b.pdf", "spaced out/a b.pdf", "ünï/cødé 文书.pdf", "x/..", "/lead.pdf"]
    for key in keys:
        bucket.put(key)
    items, _ = list_all(connector(bucket))
    assert sorted(i.key for i in items) == sorted(keys)
    by_key = {i.key: i for i in items}
    assert by_key["a/../b.pdf"].uri == "s3://team-docs/a/../b.pdf"
    assert by_key["x/.."].filename == ".."
    assert by_key["ünï/cødé 文书.pdf"].filename == "cødé 文书.pdf"
    assert by_key["/lead.pdf"].filename == "lead.pdf"


def test_globs_apply_below_the_prefix() -> None:
    bucket = MemoryBucket()
    for key in ["handbook/a.pdf", "handbook/x/b.pdf", "handbook/x/b.txt", "other/c.pdf"]:
        bucket.put(key)
    items, _ = list_all(connector(bucket, prefix="handbook/", include=("**/*.pdf",)))
    assert [i.key for i in items] == ["handbook/a.pdf", "handbook/x/b.pdf"]


# -- reading and copying ----------------------------------------------------------------------------
def test_fetch_reads_the_version_listed() -> None:
    bucket = MemoryBucket()
    bucket.put("a.pdf", b"%PDF one")
    [item], _ = list_all(connector(bucket))
    bucket.put("a.pdf", b"%PDF two")
    assert connector(bucket).fetch(item) == b"%PDF one"
    plain = MemoryBucket(versioned=False)
    plain.put("a.pdf", b"%PDF one")
    [listed], _ = list_all(connector(plain))
    assert connector(plain).fetch(listed) == b"%PDF one"
    plain.put("a.pdf", b"%PDF two")
    with pytest.raises(ItemUnavailableError) as caught:
        connector(plain).fetch(listed)
    assert caught.value.code == SourceCode.SOURCE_ITEM_CHANGED


def test_fetch_refuses_an_item_it_did_not_list() -> None:
    stranger = SourceItem(key="a.pdf", change_token="x", uri="s3://team-docs/a.pdf", filename="a.pdf")
    with pytest.raises(ValueError, match="not listed by an S3Connector"):
        connector(MemoryBucket()).fetch(stranger)


class RecordingCopier:
    def __init__(self) -> None:
        self.copies: list[tuple[ObjectPin, str, str, dict[str, str]]] = []

    def copy_version(self, pin: ObjectPin, bucket: str, key: str, metadata: Mapping[str, str]) -> str:
        self.copies.append((pin, bucket, key, dict(metadata)))
        return "copy-version"


def test_copy_into_hands_the_listed_version_to_the_copier() -> None:
    bucket = MemoryBucket()
    listed = bucket.put("a.pdf")
    copier = RecordingCopier()
    source = S3Connector(S3SourceConfig(bucket=bucket.name), bucket, max_object_bytes=MB, copier=copier)
    [item], _ = list_all(source)
    assert source.copy_into(item, "stack-bucket", "raw/t/d/a.pdf", {"tenant": "t"}) == "copy-version"
    assert copier.copies == [
        (
            ObjectPin("team-docs", "a.pdf", listed.version_id, listed.etag),
            "stack-bucket",
            "raw/t/d/a.pdf",
            {"tenant": "t"},
        )
    ]
    with pytest.raises(NotImplementedError, match="without a copier"):
        connector(bucket).copy_into(item, "stack-bucket", "k", {})


@pytest.mark.parametrize("cursor", ["", "[]", '{"key_marker": 3, "version_id_marker": null}', '{"x": 1}'])
def test_a_cursor_that_is_not_ours_is_refused(cursor: str) -> None:
    with pytest.raises(ValueError, match="not an S3 listing cursor"):
        connector(MemoryBucket()).list_page(cursor, nothing_known)
