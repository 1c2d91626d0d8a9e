"""``AWS::S3::Bucket`` and CDK's ``Custom::S3BucketNotifications`` in moto.

A bucket gets the template's versioning, CORS, encryption, public access block and notifications;
its CORS rules also allow the origins the local API server serves the page from.
"""

from __future__ import annotations

from typing import Any

from local.runtime.cloudformation.context import ProvisioningContext
from local.runtime.cloudformation.template import TemplateResource

# CloudFormation's CORS rule keys that the S3 API names differently.
_CORS_KEYS = (
    ("AllowedHeaders", "AllowedHeaders"),
    ("ExposedHeaders", "ExposeHeaders"),
    ("Id", "ID"),
    ("MaxAge", "MaxAgeSeconds"),
)
# (CloudFormation list, S3 API list, S3 API ARN key, CloudFormation ARN key) of a bucket's notifications.
_NOTIFICATION_KEYS = (
    ("QueueConfigurations", "QueueConfigurations", "QueueArn", "Queue"),
    ("TopicConfigurations", "TopicConfigurations", "TopicArn", "Topic"),
    ("LambdaConfigurations", "LambdaFunctionConfigurations", "LambdaFunctionArn", "Function"),
)


def create_bucket(resource: TemplateResource, context: ProvisioningContext) -> None:
    props = context.properties(resource)
    region = context.settings.region
    name = context.physical_name(resource, "BucketName", 63, lowercase=True)
    s3 = context.client("s3")
    if region == "us-east-1":
        s3.create_bucket(Bucket=name)
    else:
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})
    versioning = props.get("VersioningConfiguration")
    if versioning:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning["Status"]})
    cors = props.get("CorsConfiguration")
    if cors:
        rules = [_cors_rule(rule, _local_page_origins(context)) for rule in cors.get("CorsRules", [])]
        s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": rules})
    encryption = props.get("BucketEncryption")
    if encryption:
        rules = [_encryption_rule(rule) for rule in encryption["ServerSideEncryptionConfiguration"]]
        s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={"Rules": rules})
    public_access = props.get("PublicAccessBlockConfiguration")
    if public_access:
        s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=public_access)
    if props.get("NotificationConfiguration"):
        s3.put_bucket_notification_configuration(
            Bucket=name, NotificationConfiguration=_notification_configuration(props["NotificationConfiguration"])
        )
    context.created(
        resource,
        name,
        {
            "Arn": f"arn:aws:s3:::{name}",
            "DomainName": f"{name}.s3.amazonaws.com",
            "RegionalDomainName": f"{name}.s3.{region}.amazonaws.com",
            "DualStackDomainName": f"{name}.s3.dualstack.{region}.amazonaws.com",
            "WebsiteURL": f"http://{name}.s3-website-{region}.amazonaws.com",
        },
    )


def apply_bucket_notifications(resource: TemplateResource, context: ProvisioningContext) -> None:
    """CDK's custom resource: its properties already carry the S3 API's own shape."""
    props = context.properties(resource)
    bucket = props["BucketName"]
    configuration = props.get("NotificationConfiguration", {}) or {}
    context.client("s3").put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=configuration)
    context.created(resource, f"{bucket}-notifications", {})


def _local_page_origins(context: ProvisioningContext) -> list[str]:
    """Where the local API server serves the page (by address and by name)."""
    settings = context.settings
    return list(dict.fromkeys([settings.api_url, f"http://localhost:{settings.api_port}"]))


def _cors_rule(rule: dict[str, Any], page_origins: list[str]) -> dict[str, Any]:
    # The page is served by the local API server (by CloudFront in AWS, whose URL the template
    # allows): its origin must be allowed to POST uploads from a browser.
    converted: dict[str, Any] = {
        "AllowedMethods": rule["AllowedMethods"],
        "AllowedOrigins": [*rule["AllowedOrigins"], *page_origins],
    }
    for source, target in _CORS_KEYS:
        if source in rule:
            converted[target] = rule[source]
    return converted


def _encryption_rule(rule: dict[str, Any]) -> dict[str, Any]:
    # CloudFormation's ServerSideEncryptionByDefault is the API's ApplyServerSideEncryptionByDefault.
    converted = {key: value for key, value in rule.items() if key != "ServerSideEncryptionByDefault"}
    if "ServerSideEncryptionByDefault" in rule:
        converted["ApplyServerSideEncryptionByDefault"] = rule["ServerSideEncryptionByDefault"]
    return converted


def _notification_configuration(config: dict[str, Any]) -> dict[str, Any]:
    """A bucket's own NotificationConfiguration property (CloudFormation's shape) in the S3 API's shape."""
    converted: dict[str, Any] = {}
    for source, target, arn_key, cfn_arn_key in _NOTIFICATION_KEYS:
        items = []
        for item in config.get(source, []):
            entry: dict[str, Any] = {"Events": [item["Event"]], arn_key: item[cfn_arn_key]}
            rules = item.get("Filter", {}).get("S3Key", {}).get("Rules")
            if rules:
                entry["Filter"] = {"Key": {"FilterRules": rules}}
            items.append(entry)
        if items:
            converted[target] = items
    if "EventBridgeConfiguration" in config:
        converted["EventBridgeConfiguration"] = {}
    return converted
