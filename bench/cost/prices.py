"""AWS list prices the cost model uses: us-east-1, on-demand, no free tier, each with its source.

Every figure is a constant here and nowhere else. ``source`` names the AWS pricing page the figure
is published on; ``PRICES_RECORDED`` is the date they were written down (this machine is offline:
re-check the pages before budgeting with them, and update the date when you do).
"""

from __future__ import annotations

from dataclasses import dataclass

REGION = "us-east-1"
PRICES_RECORDED = "2026-12-01"
HOURS_PER_MONTH = 730  # AWS's own monthly convention (8,760 hours / 12)
GIB = 1024**3


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str
    source: str


LAMBDA = "AWS Lambda Pricing (aws.amazon.com/lambda/pricing)"
STEP_FUNCTIONS = "AWS Step Functions Pricing (aws.amazon.com/step-functions/pricing)"
BEDROCK = "Amazon Bedrock Pricing (aws.amazon.com/bedrock/pricing), Amazon Titan models"
BEDROCK_NOVA = "Amazon Bedrock Pricing (aws.amazon.com/bedrock/pricing), Amazon Nova models"
BEDROCK_RERANK = "Amazon Bedrock Pricing (aws.amazon.com/bedrock/pricing), Amazon Rerank 1.0"
S3 = "Amazon S3 Pricing (aws.amazon.com/s3/pricing), S3 Standard"
DYNAMODB = "Amazon DynamoDB Pricing for On-Demand Capacity (aws.amazon.com/dynamodb/pricing/on-demand)"
SQS = "Amazon SQS Pricing (aws.amazon.com/sqs/pricing), standard queues"
CLOUDWATCH = "Amazon CloudWatch Pricing (aws.amazon.com/cloudwatch/pricing), Logs"
EVENTBRIDGE = "Amazon EventBridge Pricing (aws.amazon.com/eventbridge/pricing), custom events"
XRAY = "AWS X-Ray Pricing (aws.amazon.com/xray/pricing)"
API_GATEWAY = "Amazon API Gateway Pricing (aws.amazon.com/api-gateway/pricing), WebSocket APIs"
OPENSEARCH = "Amazon OpenSearch Service Pricing (aws.amazon.com/opensearch-service/pricing)"
TEXTRACT = "Amazon Textract Pricing (aws.amazon.com/textract/pricing), Detect Document Text API"
TEXTRACT_TABLES = "Amazon Textract Pricing (aws.amazon.com/textract/pricing), Analyze Document API, Tables"

LAMBDA_GB_SECOND = {
    "x86_64": Price(0.0000166667, "GB-second, x86_64 (first 6 billion GB-s a month)", LAMBDA),
    "arm64": Price(0.0000133334, "GB-second, arm64 (first 7.5 billion GB-s a month)", LAMBDA),
}
LAMBDA_REQUEST = Price(0.20 / 1_000_000, "request", LAMBDA)

SFN_STANDARD_TRANSITION = Price(0.025 / 1000, "state transition, Standard workflow", STEP_FUNCTIONS)
SFN_EXPRESS_REQUEST = Price(1.00 / 1_000_000, "request, Express workflow", STEP_FUNCTIONS)
# Billed in 64 MB memory steps and 100 ms duration steps.
SFN_EXPRESS_GB_SECOND = Price(0.00001667, "GB-second, Express workflow (first 1,000 GB-hours a month)", STEP_FUNCTIONS)

# What the Parse stage calls for each page without a text layer (docs/ocr.md: synchronous, per page image).
# Above a million pages a month the price falls to 0.60 USD per 1,000 pages; the model keeps the first tier.
TEXTRACT_DETECT_TEXT_PAGE = Price(
    1.50 / 1000, "page, DetectDocumentText (first 1 million pages a month; 0.60 per 1,000 after)", TEXTRACT
)
# What it calls instead with cdk.json parsing.textractTables on: AnalyzeDocument with FeatureTypes=["TABLES"],
# 10x DetectDocumentText (the model keeps the first tier: the first 1 million pages a month).
TEXTRACT_ANALYZE_TABLES_PAGE = Price(
    15.00 / 1000, "page, AnalyzeDocument with TABLES (first 1 million pages a month)", TEXTRACT_TABLES
)

TITAN_V2_INPUT_TOKEN = Price(0.00002 / 1000, "input token, Titan Text Embeddings V2, on-demand", BEDROCK)
# Batch inference is priced at 50 % of on-demand (the Bedrock user guide's capacity and cost page, quoted
# with its address in docs/cost.md; the pricing page lists batch beside on-demand per model).
TITAN_V2_BATCH_INPUT_TOKEN = Price(
    0.00001 / 1000, "input token, Titan Text Embeddings V2, batch inference (50 % of on-demand)", BEDROCK
)

# POST /answer's default model (cdk.json search.answer.modelId) and its rerank stage (one billed query
# per answer: up to 100 passages; docs/answers.md, "Cost").
NOVA_LITE_INPUT_TOKEN = Price(0.00006 / 1000, "input token, Amazon Nova Lite, on-demand", BEDROCK_NOVA)
NOVA_LITE_OUTPUT_TOKEN = Price(0.00024 / 1000, "output token, Amazon Nova Lite, on-demand", BEDROCK_NOVA)
RERANK_QUERY = Price(1.00 / 1000, "query (up to 100 passages), Amazon Rerank 1.0", BEDROCK_RERANK)

S3_WRITE_REQUEST = Price(0.005 / 1000, "PUT, COPY, POST or LIST request", S3)
S3_READ_REQUEST = Price(0.0004 / 1000, "GET, HEAD and all other requests (DELETE is free)", S3)
S3_STORAGE_GB_MONTH = Price(0.023, "GB-month, first 50 TB", S3)

DYNAMODB_WRITE_UNIT = Price(0.625 / 1_000_000, "write request unit (1 KB of item per write)", DYNAMODB)
DYNAMODB_READ_UNIT = Price(0.125 / 1_000_000, "read request unit (4 KB strongly consistent read)", DYNAMODB)

SQS_REQUEST = Price(0.40 / 1_000_000, "request (each 64 KB of payload)", SQS)

CLOUDWATCH_LOGS_INGESTED_GB = Price(0.50, "GB of logs ingested (Lambda logs, first tier)", CLOUDWATCH)
EVENTBRIDGE_EVENT = Price(1.00 / 1_000_000, "custom event published", EVENTBRIDGE)
XRAY_TRACE = Price(5.00 / 1_000_000, "trace recorded", XRAY)
WEBSOCKET_MESSAGE = Price(1.00 / 1_000_000, "WebSocket message (each 32 KB)", API_GATEWAY)

OPENSEARCH_INSTANCE_HOUR = {
    "t3.small.search": Price(0.036, "instance-hour, t3.small.search", OPENSEARCH),
    "t3.medium.search": Price(0.073, "instance-hour, t3.medium.search", OPENSEARCH),
    "m6g.large.search": Price(0.128, "instance-hour, m6g.large.search", OPENSEARCH),
    "r6g.large.search": Price(0.167, "instance-hour, r6g.large.search", OPENSEARCH),
    "r6g.xlarge.search": Price(0.334, "instance-hour, r6g.xlarge.search", OPENSEARCH),
    "r6g.2xlarge.search": Price(0.668, "instance-hour, r6g.2xlarge.search", OPENSEARCH),
    "r6g.4xlarge.search": Price(1.336, "instance-hour, r6g.4xlarge.search", OPENSEARCH),
}
# Each instance type's memory (GiB), which sizes a store of many vectors (bench.cost.vector_store).
OPENSEARCH_INSTANCE_RAM_GIB = {
    "t3.small.search": 2,
    "t3.medium.search": 4,
    "m6g.large.search": 8,
    "r6g.large.search": 16,
    "r6g.xlarge.search": 32,
    "r6g.2xlarge.search": 64,
    "r6g.4xlarge.search": 128,
}
OPENSEARCH_GP3_GB_MONTH = Price(0.122, "GB-month of gp3 EBS storage", OPENSEARCH)
OPENSEARCH_SERVERLESS_OCU_HOUR = Price(0.24, "OCU-hour (indexing or search), OpenSearch Serverless", OPENSEARCH)
OPENSEARCH_SERVERLESS_STORAGE_GB_MONTH = Price(0.024, "GB-month of managed storage, OpenSearch Serverless", OPENSEARCH)
# The smallest vector collection: 0.5 OCU indexing + 0.5 OCU search, doubled by the standby replicas
# (redundancy on, the production setting); with redundancy off (dev/test) the floor is halved.
SERVERLESS_MINIMUM_OCUS = {"redundant": 2.0, "dev-test (no redundancy)": 1.0}


def all_prices() -> dict[str, Price]:
    """Every price constant of this module by name (for the table's footnote and the tests)."""
    found: dict[str, Price] = {}
    for name, value in globals().items():
        if isinstance(value, Price):
            found[name] = value
        elif isinstance(value, dict) and value and all(isinstance(v, Price) for v in value.values()):
            found.update({f"{name}[{key}]": price for key, price in value.items()})
    return found
