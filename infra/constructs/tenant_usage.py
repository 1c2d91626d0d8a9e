"""Per-tenant limits (docs/api.md, "Limits per tenant"): the tenant usage table and who may write it.

The table (key ``tenant_id`` + ``item``: ``usage``, ``rate``, ``pages#YYYY-MM-DD`` with TTL on
``expires_at``; rag_ingest.adapters.tenant_usage_table) is encrypted with point-in-time recovery
like the other tables of records. The functions that count or check get exactly their actions in
infra/permissions.py ``TENANT_USAGE_TABLE``; every stage is told the name (one environment model)
but only Parse may write; the API also gets the limits (``TENANT_LIMITS``, from cdk.json ``tenants``).
"""

from __future__ import annotations

from aws_cdk import CfnOutput
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import RagIngestConfig
from infra.constructs.storage import grant_table, recoverable_table
from infra.permissions import TENANT_USAGE_TABLE


class TenantUsage(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: RagIngestConfig) -> None:
        super().__init__(scope, construct_id)
        self._limits_json = config.tenant_limits_json()
        self.table = recoverable_table(
            self, "TenantUsageTable", config, "tenant_id", "item", time_to_live_attribute="expires_at"
        )
        CfnOutput(self, "TenantUsageTableName", value=self.table.table_name).override_logical_id("TenantUsageTableName")

    def serve(self, name: str, function: lambda_.Function) -> None:
        """Give ``function`` (``name``: its key in TENANT_USAGE_TABLE; a bulk copy is its stage's) the
        table's name and, if it is listed there, its actions; the API its limits too."""
        role = function.role
        assert role is not None
        function.add_environment("TENANT_USAGE_TABLE", self.table.table_name)
        if name == "Api":
            function.add_environment("TENANT_LIMITS", self._limits_json)
        access = TENANT_USAGE_TABLE.get(name.removesuffix("Bulk"))
        if access is not None:
            grant_table(role, self.table, access)
