"""Per-tenant limits in the template (infra/constructs/tenant_usage.py): the usage table (encrypted,
point-in-time recovery, TTL on the day counters), which functions get it (the API with its limits,
intake, Parse in both lanes; nobody else), and that the API's environment stays inside Lambda's
4 KB with TENANT_LIMITS at its largest (infra/config.py MAX_TENANT_LIMITS_BYTES)."""

from __future__ import annotations

import json

import pytest
from rag_ingest.core.limits import LimitsTable

from infra.config import MAX_TENANT_LIMITS_BYTES
from tests.infra.template_tools import SynthResult, as_list, render_token

pytestmark = pytest.mark.infra

TABLE_PATH = "TenantUsage/TenantUsageTable"
#: Granted the table (tests/infra/test_infra_least_privilege.py checks the actions).
USERS = {"Api/ApiFunction", "Intake/IntakeFunction", "Workflow/ParseFunction", "Workflow/ParseBulkFunction"}
# Lambda: "the total size of the set" of a function's environment variables is at most 4 KB
# (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
LAMBDA_ENVIRONMENT_BYTES = 4096
# A reference (a table's generated name, an ARN, the domain's endpoint) resolves at deploy time; none
# of these is longer than this (a state machine ARN with an 80-character name is ~130).
RESOLVED_REFERENCE_BYTES = 160


def _environment(synth: SynthResult, path: str) -> dict[str, object]:
    return dict(synth.resource(path)["Properties"].get("Environment", {}).get("Variables", {}))


def test_the_usage_table_is_encrypted_recoverable_and_expires_day_counters(synth: SynthResult) -> None:
    table = synth.resource(TABLE_PATH)["Properties"]
    assert table["KeySchema"] == [
        {"AttributeName": "tenant_id", "KeyType": "HASH"},
        {"AttributeName": "item", "KeyType": "RANGE"},
    ]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["SSESpecification"]["SSEEnabled"] is True
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}


def test_only_the_counting_functions_get_the_table_and_only_the_api_its_limits(synth: SynthResult) -> None:
    table_arn = f"${{{synth.logical_id(TABLE_PATH)}.Arn}}"
    told, granted = set(), set()
    for resource in synth.of_type("AWS::Lambda::Function").values():
        path = resource.get("Metadata", {}).get("aws:cdk:path", "").removeprefix(f"{synth.stack_name}/")
        path = path.removesuffix("/Resource")
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        if variables.get("TENANT_USAGE_TABLE") == {"Ref": synth.logical_id(TABLE_PATH)}:
            told.add(path)
            statements = synth.role_statements(path)
            if any(render_token(r) == table_arn for s in statements for r in as_list(s["Resource"])):
                granted.add(path)
        assert ("TENANT_LIMITS" in variables) == (path == "Api/ApiFunction"), path
    assert granted == USERS
    # Every stage reads one environment model (StagesEnv), so all are told the name; only Parse writes.
    assert told - USERS and all(path.startswith("Workflow/") for path in told - USERS)
    limits = LimitsTable.from_json(str(_environment(synth, "Api/ApiFunction")["TENANT_LIMITS"]))
    assert limits == synth.config.tenant_limits()
    assert limits.defaults.sources == synth.config.sources.max_per_tenant


def test_the_api_environment_fits_lambdas_4_kb_with_the_largest_tenant_limits(synth: SynthResult) -> None:
    variables = _environment(synth, "Api/ApiFunction")
    total = 0
    for name, value in variables.items():
        if name == "TENANT_LIMITS":
            value = "x" * MAX_TENANT_LIMITS_BYTES
        total += len(name) + (len(value.encode()) if isinstance(value, str) else RESOLVED_REFERENCE_BYTES)
    assert total <= LAMBDA_ENVIRONMENT_BYTES, f"the API's environment could reach {total} bytes"
    assert json.loads(str(variables["TENANT_LIMITS"]))["overrides"] == {}  # cdk.json has none
