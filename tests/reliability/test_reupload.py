"""A new version uploaded while the previous one is still in the workflow replaces it: the document
ends READY on the new version, and the index never holds the chunks of both."""

from __future__ import annotations

import pytest
from rag_ingest.core.ids import version_hash
from rag_ingest.core.job import Stage
from rag_ingest.core.record import DocumentStatus

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from tests.support.pipeline_probe import FINISHED_EXECUTION, SAMPLES, TERMINAL, PipelineProbe, wait_until

pytestmark = pytest.mark.reliability

# The first version's Embed answers this late: long enough for the second version to be uploaded,
# queued and processed to READY meanwhile.
SLOW_EMBED_SECONDS = 20


def test_reupload_during_embed_ends_ready_on_the_new_version_only(
    probe: PipelineProbe, tenant: str, tenant_client: OfflineClient, faults: OfflineStackProcess
) -> None:
    first, second = SAMPLES / "lighthouses.pdf", SAMPLES / "sourdough.pdf"
    ticket = probe.ticket(tenant_client, "handbook.pdf")
    # times=1: only the first version's Embed is slow (the second one's matches the same document).
    faults.arm_fault("EmbedFunction", "delay", after_seconds=SLOW_EMBED_SECONDS, match=ticket.document_id)
    old_version = probe.send(ticket, first)
    wait_until(
        lambda: (record := probe.record(ticket.document_id)).version == old_version and record.stage == Stage.EMBED,
        timeout=60,
        what="the first version in Embed",
    )
    new_version = probe.send(ticket, second)  # the same form again: a browser re-upload of the same key

    both_versions_seen: list[tuple[int, ...]] = []

    def settled() -> bool:
        """The new version terminal and both executions finished; meanwhile, watch the index."""
        counts = tuple(probe.index_count(ticket.document_id, version) for version in (old_version, new_version))
        if all(counts):
            both_versions_seen.append(counts)
        record = probe.record(ticket.document_id)
        executions = probe.executions_of([ticket.document_id])
        return (
            record.version == new_version
            and record.status in TERMINAL
            and len(executions) == 2
            and all(execution["status"] in FINISHED_EXECUTION for execution in executions)
        )

    wait_until(settled, timeout=SLOW_EMBED_SECONDS + 120, what="both versions' executions finished")

    assert both_versions_seen == [], "the index held chunks of both versions"
    record = probe.assert_ready_exactly_once(ticket.document_id)
    assert record.version == new_version and record.status == DocumentStatus.READY
    assert probe.index_count(ticket.document_id, old_version) == 0
    one_each = {version_hash(old_version): 1, version_hash(new_version): 1}
    assert probe.executions_per_version(ticket.document_id) == one_each
    assert faults.faults()["faults"] == [], "the first version's Embed was never slowed down"
    probe.assert_queues_settled(tenant)
