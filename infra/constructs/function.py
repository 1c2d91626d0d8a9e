"""One way to build the project's Lambda functions: same runtime, layer, tracing, logs and role shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import jsii
from aws_cdk import CfnResource, Duration, IgnoreMode, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import FunctionSettings, RagIngestConfig
from infra.constructs.layer import LAMBDA_ARCHITECTURES, SOURCE_METADATA_KEY
from infra.nag import acknowledge
from infra.paths import FUNCTIONS_DIR, relative

METRICS_NAMESPACE = "RagIngest"
RUNTIME = lambda_.Runtime.PYTHON_3_13

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY, 3: logs.RetentionDays.THREE_DAYS, 5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK, 14: logs.RetentionDays.TWO_WEEKS, 30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS, 90: logs.RetentionDays.THREE_MONTHS, 120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS, 180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS, 545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS, 1096: logs.RetentionDays.THREE_YEARS, 1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS, 2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS, 3288: logs.RetentionDays.NINE_YEARS, 3653: logs.RetentionDays.TEN_YEARS,
}  # fmt: skip


# Lambda's advanced logging controls spell WARNING as WARN.
_APPLICATION_LOG_LEVEL = {
    "DEBUG": lambda_.ApplicationLogLevel.DEBUG,
    "INFO": lambda_.ApplicationLogLevel.INFO,
    "WARNING": lambda_.ApplicationLogLevel.WARN,
    "ERROR": lambda_.ApplicationLogLevel.ERROR,
}
_SYSTEM_LOG_LEVEL = {
    "DEBUG": lambda_.SystemLogLevel.DEBUG,
    "INFO": lambda_.SystemLogLevel.INFO,
    "WARN": lambda_.SystemLogLevel.WARN,
}


class FunctionCodeMissingError(RuntimeError):
    """A function's code directory does not exist."""


def log_retention(config: RagIngestConfig) -> logs.RetentionDays:
    return _RETENTION[config.log_retention_days]


def removal_policy(config: RagIngestConfig) -> RemovalPolicy:
    return RemovalPolicy.DESTROY if config.removal_policy == "destroy" else RemovalPolicy.RETAIN


def new_log_group(
    scope: Construct, construct_id: str, config: RagIngestConfig, log_group_name: str | None = None
) -> logs.LogGroup:
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=log_group_name,
        retention=log_retention(config),
        removal_policy=removal_policy(config),
    )


@dataclass
class FunctionFactory:
    """Builds functions that share the layer, the Powertools settings and the documents table."""

    config: RagIngestConfig
    layer: lambda_.ILayerVersion
    documents_table_name: str
    _code: dict[str, lambda_.Code] = field(default_factory=dict)

    def code(self, code_dir: str) -> lambda_.Code:
        # One asset per directory, however many functions share it (the seven stages do).
        if code_dir not in self._code:
            path = FUNCTIONS_DIR / code_dir
            if not (path / "app.py").is_file():
                raise FunctionCodeMissingError(f"function code not found: {relative(path)}/app.py")
            # "/__init__.py" (anchored to the asset's root) is for tests and mypy only; a subpackage's
            # marker stays, or any regular package of its name on sys.path would shadow it.
            self._code[code_dir] = lambda_.Code.from_asset(
                str(path),
                exclude=["__pycache__", "*.pyc", "tests", ".pytest_cache", "/__init__.py"],
                ignore_mode=IgnoreMode.GIT,
            )
        return self._code[code_dir]

    def create(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code_dir: str,
        handler: str,
        service: str,
        settings: FunctionSettings,
        environment: dict[str, str],
        description: str,
        reserved_concurrency: int | None = None,
        documents_table: bool = True,
    ) -> lambda_.Function:
        """A function with its own role and log group (siblings named ``<id>Role``, ``<id>LogGroup``).

        The role is ours rather than CDK's default so it holds no managed policy: it may write to
        its own log group only, instead of AWSLambdaBasicExecutionRole's logs:* on every group.
        ``documents_table``: whether it is told the documents table's name (the webhook functions,
        which have no access to it, are not).
        """
        log_group = new_log_group(scope, f"{construct_id}LogGroup", self.config)
        role = iam.Role(
            scope,
            f"{construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"rag-ingest {service} function",
        )
        function = lambda_.Function(
            scope,
            construct_id,
            description=description,
            runtime=RUNTIME,
            # The layer's binaries (pydantic-core, tokenizers, cryptography) are built for this one.
            architecture=LAMBDA_ARCHITECTURES[self.config.functions.architecture],
            code=self.code(code_dir),
            handler=handler,
            layers=[self.layer],
            role=role,
            memory_size=settings.memory_mb,
            timeout=Duration.seconds(settings.timeout_seconds),
            reserved_concurrent_executions=reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            # JSON lines, filtered by level before they are billed: the text format leaves the root
            # logger at WARNING and drops every INFO line (rag_ingest.core.logs).
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=_APPLICATION_LOG_LEVEL[self.config.log_level],
            system_log_level_v2=_SYSTEM_LOG_LEVEL[self.config.system_log_level],
            environment={
                "POWERTOOLS_SERVICE_NAME": service,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                "LOG_LEVEL": self.config.log_level,
                **({"DOCUMENTS_TABLE": self.documents_table_name} if documents_table else {}),
                **environment,
            },
        )
        log_group.grant_write(role)
        cast(CfnResource, function.node.default_child).add_metadata(
            SOURCE_METADATA_KEY, relative(FUNCTIONS_DIR / code_dir)
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level permissions: AWS requires '*'.",
            "Resource::*",
        )
        acknowledge(
            function,
            "AwsSolutions-L1",
            "Pinned to Python 3.13: the layer's compiled wheels are built for CPython 3.13; "
            "move the runtime and tools/build_layer.py together.",
        )
        return function


@jsii.implements(apigwv2.IAccessLogSettings)
class AccessLogSettings:
    """Access logs of an API Gateway v2 stage (CDK's L2 stage takes them only as this interface)."""

    def __init__(self, destination: apigwv2.IAccessLogDestination, log_format: apigw.AccessLogFormat) -> None:
        self._destination = destination
        self._format = log_format

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return self._format
