"""PATCH of ``access`` and of metadata: who may change access (the uploader, a tenant admin) and
metadata (also an editor), who gets 403 (a reader, an editor asking for access) or 404 (someone who
may not read the document, someone denied it), and the chunks rewritten with the new access, so a
search sees the change (the real pipeline and refresher over the in-memory fakes of
tests/unit/test_document_patch.py)."""

from __future__ import annotations

import pytest
from rag_ingest.core.access import DocumentAccess, Principal, parse_access
from rag_ingest.core.errors import PermanentError
from rag_ingest.documents.errors import AccessChangeForbiddenError, DocumentNotFoundError, EditForbiddenError
from rag_ingest.documents.schemas import DocumentPatch
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.retrieval.search import search_passages

from tests.support.fakes import CountingEmbedder
from tests.unit.test_document_patch import World, world  # noqa: F401  (the fixture)

pytestmark = pytest.mark.unit

UPLOADER = Principal("acme", "u-up")
LISTED = Principal("acme", "u-listed")
MEMBER = Principal("acme", "u-member", frozenset({"legal"}))
ADMIN = Principal("acme", "u-admin", frozenset({"tenant-admins"}), is_tenant_admin=True)
OTHER = Principal("acme", "u-other", frozenset({"sales"}))
EDITOR = Principal("acme", "u-editor", frozenset({"leads"}))


def ready_upload(world: World) -> str:  # noqa: F811
    job = world.ready()
    world.documents.items[job.document_id]["uploaded_by"] = "u-up"  # as POST /documents records it
    return job.document_id


def patch_access(world: World, document_id: str, who: Principal, **access: list[str]) -> object:  # noqa: F811
    return world.service.update("acme", document_id, DocumentPatch(access=DocumentAccess(**access)), principal=who)


def found_by(world: World, reader: Principal) -> set[str]:  # noqa: F811
    hits = search_passages(
        world.index,
        CountingEmbedder(),
        SearchQuery(tenant_id="acme", text="lighthouse", k=50, mode="bm25", reader=reader),
    )
    return {hit.document_id for hit in hits}


def test_the_uploader_restricts_a_document_and_its_chunks_and_search_follow(world: World) -> None:  # noqa: F811
    document_id = ready_upload(world)
    assert found_by(world, OTHER) == {document_id}  # open: the whole tenant
    view = world.service.update(
        "acme", document_id, DocumentPatch(access=DocumentAccess(users=["u-listed"])), principal=UPLOADER
    )
    assert view.access == DocumentAccess(users=["u-listed"]) and view.revision == 2
    chunks = world.chunks_of(document_id)
    assert chunks and all(chunk["access"] == DocumentAccess(users=["u-listed"]) for chunk in chunks)
    assert all(chunk["uploaded_by"] == "u-up" for chunk in chunks)
    assert found_by(world, OTHER) == set() and found_by(world, MEMBER) == set()
    assert found_by(world, LISTED) == found_by(world, UPLOADER) == found_by(world, ADMIN) == {document_id}


def test_a_reader_who_does_not_manage_access_gets_403_and_nothing_changes(world: World) -> None:  # noqa: F811
    document_id = ready_upload(world)
    patch_access(world, document_id, UPLOADER, users=["u-listed"], groups=["legal"])
    for reader in (LISTED, MEMBER):
        with pytest.raises(AccessChangeForbiddenError):
            patch_access(world, document_id, reader, users=[reader.subject])
        # Being listed makes a reader, nothing more: no metadata change either.
        with pytest.raises(EditForbiddenError):
            world.service.update("acme", document_id, DocumentPatch(metadata={"topic": "sea"}), principal=reader)
    record = world.documents.get(document_id)
    assert record is not None and record.revision == 2
    assert record.access == DocumentAccess(users=["u-listed"], groups=["legal"])
    assert record.metadata == {}


def test_an_editor_changes_metadata_but_not_access_and_a_deny_hides_it_from_the_uploader(
    world: World,  # noqa: F811
) -> None:
    document_id = ready_upload(world)
    access = {"users": ["u-listed"], "editors": {"groups": ["leads"]}}
    world.service.update("acme", document_id, DocumentPatch(access=parse_access(access)), principal=UPLOADER)
    view = world.service.update("acme", document_id, DocumentPatch(metadata={"topic": "sea"}), principal=EDITOR)
    assert view.metadata == {"topic": "sea"} and view.access.editors.groups == ["leads"]
    with pytest.raises(AccessChangeForbiddenError):
        world.service.update("acme", document_id, DocumentPatch(access=parse_access({})), principal=EDITOR)
    assert found_by(world, EDITOR) == found_by(world, LISTED) == {document_id}
    assert found_by(world, OTHER) == set()
    # The admin denies the uploader: from then on it is as if the document did not exist for them.
    denied = {**access, "deny": {"users": ["u-up"]}}
    world.service.update("acme", document_id, DocumentPatch(access=parse_access(denied)), principal=ADMIN)
    with pytest.raises(DocumentNotFoundError):
        world.service.update("acme", document_id, DocumentPatch(metadata={"topic": "x"}), principal=UPLOADER)
    assert found_by(world, UPLOADER) == set() and found_by(world, EDITOR) == {document_id}


def test_someone_who_may_not_read_it_gets_404_even_for_metadata(world: World) -> None:  # noqa: F811
    document_id = ready_upload(world)
    patch_access(world, document_id, UPLOADER, groups=["legal"])
    with pytest.raises(DocumentNotFoundError):
        patch_access(world, document_id, OTHER, groups=["sales"])
    with pytest.raises(DocumentNotFoundError):
        world.service.update("acme", document_id, DocumentPatch(metadata={"a": "b"}), principal=OTHER)
    with pytest.raises(DocumentNotFoundError):
        patch_access(world, document_id, Principal("globex", "u-up", is_tenant_admin=True))


def test_a_tenant_admin_manages_any_document_even_one_put_straight_into_the_bucket(
    world: World,  # noqa: F811
) -> None:
    job = world.ready()  # no uploader: put straight into the bucket
    with pytest.raises(AccessChangeForbiddenError):
        patch_access(world, job.document_id, OTHER, users=["u-other"])
    view = patch_access(world, job.document_id, ADMIN, groups=["legal"])
    assert view.access == DocumentAccess(groups=["legal"])  # type: ignore[attr-defined]
    # Opening it again: both lists empty.
    assert patch_access(world, job.document_id, ADMIN).access.is_open  # type: ignore[attr-defined]
    assert found_by(world, OTHER) == {job.document_id}


def test_bad_access_in_a_patch_is_refused() -> None:
    with pytest.raises(ValueError, match=r"access.groups\[0\]"):
        DocumentPatch.model_validate({"access": {"groups": [""]}})
    with pytest.raises(PermanentError, match="metadata or access"):
        DocumentPatch().record_fields()
