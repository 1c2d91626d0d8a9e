"""The OpenSearch domain is watched (AWS's recommended alarms), and its index fits its node count."""

from __future__ import annotations

from typing import Any

import pytest

from infra.constructs.search import FREE_STORAGE_FRACTION, index_replicas
from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra

# construct id -> (metric, statistic, comparison, threshold (None: computed), evaluation periods)
OPENSEARCH_ALARMS: dict[str, tuple[str, str, str, float | None, int]] = {
    "ClusterRedAlarm": ("ClusterStatus.red", "Maximum", "GreaterThanOrEqualToThreshold", 1, 1),
    "ClusterYellowAlarm": ("ClusterStatus.yellow", "Maximum", "GreaterThanOrEqualToThreshold", 1, 1),
    "FreeStorageAlarm": ("FreeStorageSpace", "Minimum", "LessThanOrEqualToThreshold", None, 1),
    "JvmMemoryPressureAlarm": ("JVMMemoryPressure", "Maximum", "GreaterThanOrEqualToThreshold", 95, 3),
    "AutomatedSnapshotFailureAlarm": ("AutomatedSnapshotFailure", "Maximum", "GreaterThanOrEqualToThreshold", 1, 1),
}


def _alarm(synth: SynthResult, name: str) -> dict[str, Any]:
    return dict(synth.resource(f"Search/{name}")["Properties"])


@pytest.mark.parametrize("name", sorted(OPENSEARCH_ALARMS))
def test_opensearch_alarm(synth: SynthResult, name: str) -> None:
    metric, statistic, comparison, threshold, periods = OPENSEARCH_ALARMS[name]
    props = _alarm(synth, name)
    assert (props["Namespace"], props["MetricName"], props["Statistic"], props["Period"]) == (
        "AWS/ES",
        metric,
        statistic,
        60,
    )
    domain = synth.logical_id("Search/Domain")
    dimensions = {d["Name"]: d["Value"] for d in props["Dimensions"]}
    assert dimensions["DomainName"] == {"Ref": domain}
    assert dimensions["ClientId"] == {"Ref": "AWS::AccountId"}
    assert props["ComparisonOperator"] == comparison
    assert props["EvaluationPeriods"] == periods
    if threshold is None:  # FreeStorageSpace is in MB, per node: a quarter of the volume
        threshold = synth.config.opensearch.volume_size_gb * 1024 * FREE_STORAGE_FRACTION
    assert props["Threshold"] == threshold
    topic = {"Ref": synth.logical_id("Monitoring/AlarmTopic")}
    assert props["AlarmActions"] == [topic]
    assert props["OKActions"] == [topic]


def test_a_single_node_index_has_no_replicas(synth: SynthResult) -> None:
    assert synth.config.opensearch.instance_count == 1
    for path in ("Workflow/IndexFunction", "Api/ApiFunction"):
        env = synth.resource(path)["Properties"]["Environment"]["Variables"]
        assert env["OPENSEARCH_REPLICAS"] == "0", path


@pytest.mark.parametrize(("nodes", "replicas"), [(1, 0), (2, 1), (3, 2), (6, 2)])
def test_replicas_follow_the_node_count(nodes: int, replicas: int) -> None:
    # A copy of each shard on another node, never beside its primary (which one node cannot avoid).
    assert index_replicas(nodes) == replicas
