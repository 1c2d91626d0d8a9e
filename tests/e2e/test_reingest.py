"""End to end on the local stack: the same bytes uploaded again under another name embed nothing
(every chunk an embedding-cache hit, counted on the status record) and name the earlier copy."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from local.client import OfflineClient

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_identical_bytes_under_another_name_embed_nothing_and_name_the_original(
    client: OfflineClient, tmp_path: Path
) -> None:
    # A tenant of its own: the session's tenant may have embedded this sample already.
    tenant = OfflineClient(api_url=client.api_url, tenant_id=f"reingest-{uuid.uuid4().hex[:8]}")
    original = tenant.upload(SAMPLES / "sourdough.pdf")
    first = tenant.wait_until_done([original], timeout_seconds=300)[original]
    assert first["status"] == "READY", f"{first['error_code']}: {first['error_detail']}"
    assert first["embedding_cache"] == {"hits": 0, "misses": first["chunk_count"]}
    assert first["duplicate_of"] is None

    renamed = tmp_path / "sourdough-copy.pdf"
    shutil.copyfile(SAMPLES / "sourdough.pdf", renamed)
    copy = tenant.upload(renamed)
    second = tenant.wait_until_done([copy], timeout_seconds=300)[copy]
    assert second["status"] == "READY", f"{second['error_code']}: {second['error_detail']}"
    assert second["filename"] == "sourdough-copy.pdf"
    assert second["chunk_count"] == first["chunk_count"]
    assert second["embedding_cache"] == {"hits": second["chunk_count"], "misses": 0}  # nothing embedded
    assert second["duplicate_of"] == original

    # Another tenant's upload of the same bytes shares nothing: it pays for its own embeddings.
    stranger = OfflineClient(api_url=client.api_url, tenant_id=f"reingest-{uuid.uuid4().hex[:8]}")
    theirs = stranger.upload(SAMPLES / "sourdough.pdf")
    third = stranger.wait_until_done([theirs], timeout_seconds=300)[theirs]
    assert third["embedding_cache"] == {"hits": 0, "misses": third["chunk_count"]}
    assert third["duplicate_of"] is None
