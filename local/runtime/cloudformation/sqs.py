"""``AWS::SQS::Queue`` in moto, with the template's attributes (redrive, visibility timeout, ...)."""

from __future__ import annotations

from local.runtime.cloudformation.context import ProvisioningContext, attribute_text
from local.runtime.cloudformation.template import TemplateResource, generated_physical_name

# The queue properties that are CreateQueue attributes of the same name.
QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "SqsManagedSseEnabled",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
)


def create_queue(resource: TemplateResource, context: ProvisioningContext) -> None:
    props = context.properties(resource)
    fifo = bool(props.get("FifoQueue"))
    default_name = generated_physical_name(
        context.settings.stack_name, resource.logical_id, max_length=75 if fifo else 80
    )
    name = str(props.get("QueueName") or (f"{default_name}.fifo" if fifo else default_name))
    attributes = {key: attribute_text(props[key]) for key in QUEUE_ATTRIBUTES if key in props}
    sqs = context.client("sqs")
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    context.queue_urls_by_arn[arn] = url
    context.created(resource, url, {"Arn": arn, "QueueName": name, "QueueUrl": url})
