"""Per-document access (rag_ingest.core.access): the model's rules, the principal from claims in
every shape they arrive in, the read, edit and manage rules (readers, editors, deny lists), and the
same rules as an OpenSearch clause."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from rag_ingest.adapters.documents_table import awaiting_upload_item
from rag_ingest.adapters.opensearch_filters import access_query, chunk_access
from rag_ingest.core.access import (
    MAX_NAME_CHARS,
    MAX_PRINCIPALS,
    OPEN_ACCESS,
    AccessError,
    DocumentAccess,
    Principal,
    can_edit,
    can_manage_access,
    can_read,
    groups_of,
    parse_access,
)
from rag_ingest.core.auth import InvalidTenantError
from rag_ingest.core.record import DocumentRecord
from rag_ingest.documents.schemas import UploadRequest


def record(
    tenant: str = "acme",
    uploaded_by: str | None = "u-up",
    users: list[str] | None = None,
    groups: list[str] | None = None,
    editors: dict[str, list[str]] | None = None,
    deny: dict[str, list[str]] | None = None,
) -> DocumentRecord:
    given = (("users", users), ("groups", groups), ("editors", editors), ("deny", deny))
    access: dict[str, Any] = {name: value for name, value in given if value}
    item = awaiting_upload_item(
        document_id="01JDOC0000000000000000000A",
        tenant_id=tenant,
        filename="a.pdf",
        bucket="b",
        key="k",
        now="2026-12-01T00:00:00Z",
        uploaded_by=uploaded_by,
        access=parse_access(access) if access else None,
    )
    return DocumentRecord.model_validate(item)


def who(subject: str, *groups: str, tenant: str = "acme", admin: bool = False) -> Principal:
    return Principal(tenant_id=tenant, subject=subject, groups=frozenset(groups), is_tenant_admin=admin)


# -- the model -------------------------------------------------------------------------------------


def test_access_is_open_when_both_lists_are_empty_and_repeats_collapse() -> None:
    assert parse_access(None) is OPEN_ACCESS and OPEN_ACCESS.is_open
    assert parse_access({"users": [], "groups": []}).is_open
    access = parse_access({"users": ["a", "a", "b"], "groups": ["g"]})
    assert access.users == ["a", "b"] and access.groups == ["g"] and not access.is_open


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ([], "access"),
        ({"users": "alice"}, "access.users"),
        ({"users": [""]}, "access.users[0]"),
        ({"users": ["ok", "  "]}, "access.users[1]"),
        ({"groups": [3]}, "access.groups[0]"),
        ({"groups": ["x" * (MAX_NAME_CHARS + 1)]}, "access.groups[0]"),
        ({"users": [f"u{i}" for i in range(MAX_PRINCIPALS + 1)]}, "access.users"),
        ({"users": ["tab\there"]}, "access.users[0]"),
        ({"owners": ["x"]}, "access.owners"),
    ],
)
def test_bad_access_is_refused_naming_its_path(raw: Any, path: str) -> None:
    with pytest.raises(AccessError) as raised:
        parse_access(raw)
    assert raised.value.path == path


def test_the_upload_request_validates_access() -> None:
    request = UploadRequest.model_validate({"filename": "a.pdf", "access": {"groups": ["legal"]}})
    assert request.access == DocumentAccess(groups=["legal"])
    with pytest.raises(ValidationError, match=r"access.users\[0\]"):
        UploadRequest.model_validate({"filename": "a.pdf", "access": {"users": [""]}})
    with pytest.raises(ValidationError):
        UploadRequest.model_validate({"filename": "a.pdf", "access": {"users": ["a"], "extra": 1}})


def test_the_limits_are_inclusive() -> None:
    access = parse_access({"users": ["x" * MAX_NAME_CHARS] + [f"u{i}" for i in range(MAX_PRINCIPALS - 1)]})
    assert len(access.users) == MAX_PRINCIPALS


# -- the principal ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "groups"),
    [
        (["admins", "readers"], {"admins", "readers"}),  # the token's JSON array
        ("[admins readers]", {"admins", "readers"}),  # API Gateway's HTTP API JWT authorizer
        ("[admins]", {"admins"}),
        ('["admins", "readers"]', {"admins", "readers"}),  # a JSON array in a string
        ("[]", set()),
        ("admins", {"admins"}),
        ("admins,readers", {"admins", "readers"}),
        ("", set()),
        (None, set()),
        (42, set()),
        ([1, "ok", ""], {"ok"}),
    ],
)
def test_groups_are_read_in_every_shape_they_arrive_in(claim: Any, groups: set[str]) -> None:
    assert groups_of(claim) == groups


def test_the_principal_comes_from_verified_claims() -> None:
    claims = {"custom:tenant_id": "acme", "sub": "u-1", "cognito:groups": "[tenant-admins legal]"}
    principal = Principal.of(claims)
    assert principal == Principal("acme", "u-1", frozenset({"tenant-admins", "legal"}), is_tenant_admin=True)
    assert not Principal.of(claims, tenant_admin_group="owners").is_tenant_admin
    assert not Principal.of({"custom:tenant_id": "acme", "sub": "u-1"}).is_tenant_admin
    with pytest.raises(InvalidTenantError):
        Principal.of({"sub": "u-1"})


# -- the rules -------------------------------------------------------------------------------------

RESTRICTED = {"users": ["u-listed"], "groups": ["legal"]}


@pytest.mark.parametrize(
    ("principal", "reads", "manages"),
    [
        (who("u-up"), True, True),  # the uploader
        (who("u-listed"), True, False),  # in users
        (who("u-member", "legal"), True, False),  # in a group
        (who("u-admin", "tenant-admins", admin=True), True, True),  # a tenant admin
        (who("u-other", "sales"), False, False),  # another user of the tenant
        (who("", "sales"), False, False),  # no subject at all
        (who("u-up", "legal", tenant="globex", admin=True), False, False),  # another tenant, whatever else
    ],
)
def test_who_reads_and_who_manages_a_restricted_document(principal: Principal, reads: bool, manages: bool) -> None:
    document = record(users=RESTRICTED["users"], groups=RESTRICTED["groups"])
    assert can_read(principal, document) is reads
    assert can_manage_access(principal, document) is manages


def test_an_open_document_is_read_by_the_tenant_and_managed_by_its_uploader_and_admins() -> None:
    document = record()
    assert can_read(who("anyone"), document)
    assert not can_read(who("anyone", tenant="globex"), document)
    assert can_manage_access(who("u-up"), document) and can_manage_access(who("x", admin=True), document)
    assert not can_manage_access(who("anyone"), document)


def test_a_document_put_straight_into_the_bucket_is_managed_by_admins_only() -> None:
    document = record(uploaded_by=None, users=["u-listed"])
    assert not can_manage_access(who(""), document)
    assert not can_read(who(""), document)
    assert can_manage_access(who("x", admin=True), document)


EDITED = {"users": ["u-listed"], "groups": ["legal"], "editors": {"users": ["u-editor"], "groups": ["leads"]}}


@pytest.mark.parametrize(
    ("principal", "reads", "edits", "manages"),
    [
        (who("u-up"), True, True, True),  # the uploader
        (who("u-listed"), True, False, False),  # a listed reader: reads, nothing more
        (who("u-member", "legal"), True, False, False),  # a reader by group
        (who("u-editor"), True, True, False),  # an editor reads and edits, but grants nothing
        (who("u-lead", "leads"), True, True, False),  # an editor by group
        (who("u-admin", "tenant-admins", admin=True), True, True, True),
        (who("u-other", "sales"), False, False, False),
        (who("u-editor", "leads", tenant="globex"), False, False, False),
    ],
)
def test_readers_read_editors_edit_and_only_uploaders_and_admins_manage(
    principal: Principal, reads: bool, edits: bool, manages: bool
) -> None:
    document = record(**EDITED)
    assert (can_read(principal, document), can_edit(principal, document)) == (reads, edits)
    assert can_manage_access(principal, document) is manages


def test_an_open_document_is_read_by_everyone_but_edited_by_its_uploader_editors_and_admins() -> None:
    document = record(editors={"users": ["u-editor"]})
    assert can_read(who("anyone"), document) and not can_edit(who("anyone"), document)
    assert can_edit(who("u-editor"), document) and can_edit(who("u-up"), document)
    assert can_edit(who("x", admin=True), document)
    assert not can_edit(who("anyone"), record(uploaded_by=None))  # straight into the bucket: admins only


@pytest.mark.parametrize(
    "deny",
    [
        {"users": ["u-up"]},
        {"users": ["u-editor"]},
        {"users": ["u-admin"]},
        {"groups": ["tenant-admins"]},
        {"groups": ["leads"]},
    ],
)
def test_a_deny_overrides_every_allow_for_admins_and_uploaders_too(deny: dict[str, list[str]]) -> None:
    document = record(**EDITED, deny=deny)
    denied = [
        p
        for p in (
            who("u-up"),
            who("u-editor"),
            who("u-lead", "leads"),
            who("u-admin", "tenant-admins", admin=True),
        )
        if p.subject in deny.get("users", []) or not p.groups.isdisjoint(deny.get("groups", []))
    ]
    assert denied
    for principal in denied:
        assert not can_read(principal, document)
        assert not can_edit(principal, document)
        assert not can_manage_access(principal, document)
    assert can_read(who("u-listed"), document)  # the rest keep what they had


def test_editors_and_deny_are_validated_like_readers() -> None:
    with pytest.raises(AccessError, match=r"access.editors.users\[0\]: must be a non-empty string"):
        parse_access({"editors": {"users": [""]}})
    with pytest.raises(AccessError, match=r"access\.deny\.roles: unknown key"):
        parse_access({"deny": {"roles": ["x"]}})
    with pytest.raises(AccessError, match=r"access\.deny: must be an object"):
        parse_access({"deny": ["x"]})
    with pytest.raises(AccessError, match=f"at most {MAX_PRINCIPALS}"):
        parse_access({"editors": {"groups": [f"g{i}" for i in range(MAX_PRINCIPALS + 1)]}})
    access = parse_access({"deny": {"users": ["a", "a"]}})
    assert access.deny.users == ["a"] and access.is_open and not access.is_default


def test_the_record_round_trips_access_and_older_records_are_open() -> None:
    stored = record(users=["u-listed"]).model_dump()
    assert DocumentRecord.model_validate(stored).access == DocumentAccess(users=["u-listed"])
    older = {k: v for k, v in stored.items() if k not in ("access", "uploaded_by")}
    assert DocumentRecord.model_validate(older).access.is_open
    assert DocumentRecord.model_validate({**older, "access": None}).access.is_open


# -- the index's side ------------------------------------------------------------------------------


def test_chunks_carry_the_access_fields() -> None:
    assert chunk_access(DocumentAccess(users=["a"], groups=["g"]), "up") == {
        "access_users": ["a"],
        "access_groups": ["g"],
        "access_open": False,
        "access_deny_users": [],
        "access_deny_groups": [],
        "uploaded_by": "up",
    }
    assert chunk_access(None, None)["access_open"] is True


def test_chunks_list_editors_among_readers_and_the_deny_lists_apart() -> None:
    access = parse_access(
        {"users": ["a"], "editors": {"users": ["a", "e"], "groups": ["eg"]}, "deny": {"users": ["d"], "groups": ["dg"]}}
    )
    fields = chunk_access(access, "up")
    assert fields["access_users"] == ["a", "e"] and fields["access_groups"] == ["eg"]
    assert fields["access_deny_users"] == ["d"] and fields["access_deny_groups"] == ["dg"]
    # Editors alone list no reader: the document stays open to the tenant.
    assert chunk_access(parse_access({"editors": {"users": ["e"]}}), "up")["access_open"] is True


def _clause_matches(clause: dict[str, Any], chunk: dict[str, Any]) -> bool:
    """A small evaluator of the clause shapes access_query emits, over a chunk's fields."""
    if "match_all" in clause:
        return True
    if "bool" in clause:
        body = clause["bool"]
        if any(_clause_matches(c, chunk) for c in body.get("must_not", [])):
            return False
        if "should" not in body:
            return True
        return sum(_clause_matches(c, chunk) for c in body["should"]) >= body["minimum_should_match"]
    if "exists" in clause:
        return clause["exists"]["field"] in chunk
    if "term" in clause:
        [(field, value)] = clause["term"].items()
        held = chunk.get(field)
        return value in held if isinstance(held, list) else held == value
    [(field, values)] = clause["terms"].items()
    return any(value in (chunk.get(field) or []) for value in values)


INDEX_DOCUMENTS: list[dict[str, Any]] = [
    RESTRICTED,
    {},
    {"groups": ["legal"]},
    {"users": ["u-listed"], "editors": {"users": ["u-editor"], "groups": ["sales"]}},
    {"editors": {"groups": ["legal"]}, "deny": {"users": ["u-listed"]}},
    {"users": ["u-listed"], "groups": ["legal"], "deny": {"users": ["u-up"], "groups": ["sales"]}},
    {"deny": {"groups": ["tenant-admins"]}},
]


@pytest.mark.parametrize("subject", ["u-up", "u-listed", "u-member", "u-editor", "u-other", ""])
@pytest.mark.parametrize("groups", [(), ("legal",), ("sales",), ("legal", "sales"), ("tenant-admins",)])
@pytest.mark.parametrize("document", INDEX_DOCUMENTS)
def test_the_index_clause_agrees_with_can_read(subject: str, groups: tuple[str, ...], document: dict[str, Any]) -> None:
    principal = who(subject, *groups, admin="tenant-admins" in groups)
    doc = record(**document)
    chunk = chunk_access(doc.access, doc.uploaded_by)
    assert _clause_matches(access_query(principal), chunk) is can_read(principal, doc)


def test_chunks_indexed_before_access_existed_stay_open() -> None:
    assert _clause_matches(access_query(who("anyone")), {"tenant_id": "acme"})
