"""``AWS::DynamoDB::Table`` (and ``GlobalTable``) in moto: keys, indexes, stream, TTL, recovery."""

from __future__ import annotations

from typing import Any

from local.runtime.cloudformation.context import ProvisioningContext
from local.runtime.cloudformation.template import TemplateResource

# CreateTable needs a throughput for PROVISIONED tables even when the template leaves it out.
_DEFAULT_THROUGHPUT = {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}


def create_table(resource: TemplateResource, context: ProvisioningContext) -> None:
    props = context.properties(resource)
    name = context.physical_name(resource, "TableName", 255)
    dynamodb = context.client("dynamodb")
    description = dynamodb.create_table(**_create_table_request(name, props))["TableDescription"]
    ttl = props.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        dynamodb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
        )
    pitr = props.get("PointInTimeRecoverySpecification") or next(
        (replica.get("PointInTimeRecoverySpecification") for replica in props.get("Replicas", []) or []),
        None,
    )
    if pitr and pitr.get("PointInTimeRecoveryEnabled"):
        dynamodb.update_continuous_backups(
            TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
        )
    attributes = {"Arn": description["TableArn"]}
    if description.get("LatestStreamArn"):
        attributes["StreamArn"] = description["LatestStreamArn"]
    context.created(resource, name, attributes)


def _create_table_request(name: str, props: dict[str, Any]) -> dict[str, Any]:
    billing_mode = props.get("BillingMode", "PROVISIONED")
    request: dict[str, Any] = {
        "TableName": name,
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": billing_mode,
    }
    provisioned = props.get("ProvisionedThroughput") or _DEFAULT_THROUGHPUT
    if billing_mode == "PROVISIONED":
        request["ProvisionedThroughput"] = provisioned
    indexes = []
    for index in props.get("GlobalSecondaryIndexes", []) or []:
        entry = {key: index[key] for key in ("IndexName", "KeySchema", "Projection") if key in index}
        if billing_mode == "PROVISIONED":
            entry["ProvisionedThroughput"] = index.get("ProvisionedThroughput", provisioned)
        indexes.append(entry)
    if indexes:
        request["GlobalSecondaryIndexes"] = indexes
    local_indexes = props.get("LocalSecondaryIndexes")
    if local_indexes:
        request["LocalSecondaryIndexes"] = local_indexes
    stream = props.get("StreamSpecification")
    if stream and stream.get("StreamViewType"):
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    if "DeletionProtectionEnabled" in props:
        request["DeletionProtectionEnabled"] = bool(props["DeletionProtectionEnabled"])
    return request
