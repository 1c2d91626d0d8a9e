"""Live status in AWS: a WebSocket API the page connects to, fed by the documents table's stream.

``$connect`` sits behind a Lambda REQUEST authorizer (``?token=<ID token>``, verified against the user
pool's JWKS) that puts the tenant in the connection's context; ``$connect`` and ``$disconnect``
record connections in a table (GSI by tenant, TTL after 2 h). The pusher consumes the stream
(NEW_IMAGE), posts each change to the tenant's connections, reports partial batch failures,
bisects failing batches and sends what still fails to a DLQ. Why the stream and not EventBridge:
docs/deploy.md, "The page and live status".
"""

from __future__ import annotations

import json
from typing import cast

from aws_cdk import Aws, CfnElement, CfnOutput, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import RagIngestConfig
from infra.constructs.function import AccessLogSettings, FunctionFactory, new_log_group, removal_policy
from infra.nag import acknowledge

STAGE_NAME = "live"
TENANT_INDEX = "by_tenant"  # rag_ingest.adapters.live_connections.TENANT_INDEX
TOKEN_QUERY_PARAMETER = "token"

# WebSocket APIs have their own $context variables (eventType, connectionId).
_ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "eventType": "$context.eventType",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "connectionId": "$context.connectionId",
    "integrationError": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
    "tenant": "$context.authorizer.tenant_id",
}


class LiveStatus(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        factory: FunctionFactory,
        documents_table: dynamodb.ITable,
        user_pool: cognito.UserPool,
        user_pool_client: cognito.IUserPoolClient,
    ) -> None:
        super().__init__(scope, construct_id)
        live = config.live
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        self.connections_table = dynamodb.Table(
            self,
            "ConnectionsTable",
            partition_key=dynamodb.Attribute(name="connection_id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute="expires_at",
            removal_policy=removal_policy(config),
        )
        # The pusher finds a tenant's connections; the key is all it reads.
        self.connections_table.add_global_secondary_index(
            index_name=TENANT_INDEX,
            partition_key=dynamodb.Attribute(name="tenant_id", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )

        # The issuer of the user pool's ID tokens; its keys are at <issuer>/.well-known/jwks.json.
        issuer = Fn.join("", ["https://", user_pool.user_pool_provider_url])
        self.authorizer_function = factory.create(
            self,
            "AuthorizerFunction",
            code_dir="live_authorizer",
            handler="app.handler",
            service="rag-ingest-live-authorizer",
            settings=live.authorizer,
            environment={"TOKEN_ISSUER": issuer, "TOKEN_AUDIENCE": user_pool_client.user_pool_client_id},
            description="rag-ingest live status: WebSocket $connect authorizer (Cognito ID token in ?token=)",
        )
        self.connections_function = factory.create(
            self,
            "ConnectionsFunction",
            code_dir="live_connections",
            handler="app.handler",
            service="rag-ingest-live-connections",
            settings=live.connections,
            environment={
                "CONNECTIONS_TABLE": self.connections_table.table_name,
                "CONNECTION_TTL_SECONDS": str(live.connection_ttl_seconds),
            },
            description="rag-ingest live status: WebSocket $connect/$disconnect, records connections per tenant",
        )

        self.api = apigwv2.WebSocketApi(
            self,
            "WebSocketApi",
            description="rag-ingest live document status",
            connect_route_options=apigwv2.WebSocketRouteOptions(
                integration=integrations.WebSocketLambdaIntegration("ConnectIntegration", self.connections_function),
                authorizer=authorizers.WebSocketLambdaAuthorizer(
                    "TokenAuthorizer",
                    self.authorizer_function,
                    identity_source=[f"route.request.querystring.{TOKEN_QUERY_PARAMETER}"],
                ),
            ),
            disconnect_route_options=apigwv2.WebSocketRouteOptions(
                integration=integrations.WebSocketLambdaIntegration("DisconnectIntegration", self.connections_function)
            ),
        )
        disconnect_route = self.api.node.find_child("$disconnect-Route")
        acknowledge(
            disconnect_route,
            "AwsSolutions-APIG4",
            "API Gateway accepts an authorizer only on $connect; $disconnect belongs to a connection that "
            "$connect's token authorizer already admitted.",
        )
        access_logs = new_log_group(self, "AccessLogs", config)
        self.stage = apigwv2.WebSocketStage(
            self,
            "Stage",
            web_socket_api=self.api,
            stage_name=STAGE_NAME,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=live.throttling_rate_limit, burst_limit=live.throttling_burst_limit
            ),
            access_log_settings=AccessLogSettings(
                apigwv2.LogGroupLogDestination(access_logs),
                apigw.AccessLogFormat.custom(json.dumps(_ACCESS_LOG_FORMAT)),
            ),
        )
        if config.api_gateway_account_role == "create":
            self.stage.node.add_dependency(self._api_gateway_account(config))

        self.pusher_function = factory.create(
            self,
            "PusherFunction",
            code_dir="live_pusher",
            handler="app.handler",
            service="rag-ingest-live-pusher",
            settings=live.pusher,
            environment={
                "CONNECTIONS_TABLE": self.connections_table.table_name,
                "WEBSOCKET_CALLBACK_URL": self.stage.callback_url,
                # A change goes only to connections that may read the document (tenant admins read all).
                "TENANT_ADMIN_GROUP": config.auth.tenant_admin_group,
            },
            description="rag-ingest live status: documents-table stream -> PostToConnection to the tenant's sockets",
        )
        self.dead_letter_queue = sqs.Queue(
            self,
            "PusherDeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is the on-failure destination of the pusher's stream mapping: a dead-letter queue itself.",
        )
        self.pusher_function.add_event_source(
            event_sources.DynamoEventSource(
                documents_table,
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=live.stream_batch_size,
                max_batching_window=Duration.seconds(0),
                bisect_batch_on_error=True,
                report_batch_item_failures=True,
                retry_attempts=live.stream_retry_attempts,
                # An update older than the connection's lifetime helps no one.
                max_record_age=Duration.hours(2),
                on_failure=event_sources.SqsDlq(self.dead_letter_queue),
                # A removed item has no new image: nothing to tell a subscriber.
                filters=[lambda_.FilterCriteria.filter({"eventName": lambda_.FilterRule.or_("INSERT", "MODIFY")})],
            )
        )
        # (The event source granted the stream reads on the documents table's stream.)
        self._grant()
        self._alarms(config)

        CfnOutput(self, "WebSocketUrl", value=self.stage.url).override_logical_id("WebSocketUrl")

    @property
    def url(self) -> str:
        """``wss://<api>.execute-api.<region>.amazonaws.com/live``"""
        return self.stage.url

    @property
    def origin(self) -> str:
        """The WebSocket origin for a Content-Security-Policy ``connect-src``."""
        return Fn.join("", ["wss://", self.api.api_id, ".execute-api.", Aws.REGION, ".", Aws.URL_SUFFIX])

    @property
    def post_to_connections_arn(self) -> str:
        """PostToConnection on any connection of this API's one stage (ids are known at run time only)."""
        return Fn.join(
            "",
            [
                f"arn:{Aws.PARTITION}:execute-api:{Aws.REGION}:{Aws.ACCOUNT_ID}:",
                self.api.api_id,
                f"/{STAGE_NAME}/POST/@connections/*",
            ],
        )

    @property
    def post_to_connections_finding(self) -> str:
        """How cdk-nag names that resource in an IAM5 finding."""
        api = Stack.of(self).get_logical_id(cast(CfnElement, self.api.node.default_child))
        return (
            f"Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<{api}>"
            f"/{STAGE_NAME}/POST/@connections/*"
        )

    def _grant(self) -> None:
        table = self.connections_table
        connections_role = self.connections_function.role
        pusher_role = self.pusher_function.role
        assert connections_role is not None and pusher_role is not None
        # Exactly the calls rag_ingest.adapters.live_connections makes.
        connections_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["dynamodb:PutItem", "dynamodb:DeleteItem"], resources=[table.table_arn])
        )
        pusher_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["dynamodb:Query"], resources=[f"{table.table_arn}/index/{TENANT_INDEX}"])
        )
        pusher_role.add_to_principal_policy(
            # BatchGetItem: who holds each connection (subject, groups), read after the keys-only index.
            iam.PolicyStatement(actions=["dynamodb:DeleteItem", "dynamodb:BatchGetItem"], resources=[table.table_arn])
        )
        # PostToConnection only, on this stage's connections only.
        pusher_role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["execute-api:ManageConnections"],
                resources=[self.post_to_connections_arn],
            )
        )
        acknowledge(
            pusher_role,
            "AwsSolutions-IAM5",
            "Resource-scoped: PostToConnection on any connection id of this API's one stage (connection ids are "
            "only known at run time), and dynamodb:ListStreams, which supports no resource-level permission "
            "(the stream reads themselves are on the documents table's stream ARN).",
            self.post_to_connections_finding,
            "Resource::*",
        )

    def _api_gateway_account(self, config: RagIngestConfig) -> apigw.CfnAccount:
        """API Gateway's account settings with a CloudWatch Logs role. A REST or WebSocket stage with
        access logging fails to create without one ("CloudWatch Logs role ARN must be set in account
        settings to enable logging"); an HTTP API stage does not need it. It is one setting per account
        and Region, so both are retained on destroy: other APIs of the account may log through it."""
        role = iam.Role(
            self,
            "ApiGatewayCloudWatchRole",
            assumed_by=iam.ServicePrincipal("apigateway.amazonaws.com"),
            description="API Gateway (account settings, this Region): writes stages' logs to CloudWatch Logs",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AmazonAPIGatewayPushToCloudWatchLogs")
            ],
        )
        role.apply_removal_policy(RemovalPolicy.RETAIN)
        acknowledge(
            role,
            "AwsSolutions-IAM4",
            "AWS's managed policy for API Gateway's account-level logging role is the documented one; API Gateway "
            "itself (not this stack's code) creates and writes the log groups of every logging stage.",
            "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs",
        )
        account = apigw.CfnAccount(self, "ApiGatewayAccount", cloud_watch_role_arn=role.role_arn)
        account.apply_removal_policy(RemovalPolicy.RETAIN)
        return account

    def _alarms(self, config: RagIngestConfig) -> None:
        minute = Duration.minutes(1)
        self._alarm(
            "PusherErrorsAlarm",
            self.pusher_function.metric_errors(period=Duration.minutes(5), statistic="Sum"),
            "The live-status pusher failed (crashed or timed out): pages miss live updates and fall back to polling",
            threshold=0,
        )
        self._alarm(
            "PusherIteratorAgeAlarm",
            cloudwatch.Metric(
                namespace="AWS/Lambda",
                metric_name="IteratorAge",
                dimensions_map={"FunctionName": self.pusher_function.function_name},
                period=minute,
                statistic="Maximum",
            ),
            "The live-status pusher is behind the documents stream: live updates arrive late",
            threshold=config.live.iterator_age_threshold_seconds * 1000,
            evaluation_periods=3,
        )
        self._alarm(
            "PusherDeadLetterAlarm",
            self.dead_letter_queue.metric_approximate_number_of_messages_visible(period=minute, statistic="Maximum"),
            "Document changes the pusher gave up on (see the DLQ): those updates were never pushed",
            threshold=0,
        )

    def _alarm(
        self,
        construct_id: str,
        metric: cloudwatch.IMetric,
        description: str,
        *,
        threshold: float,
        evaluation_periods: int = 1,
    ) -> None:
        self.alarms[construct_id] = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            alarm_description=description,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def alarm_to(self, topic: sns.ITopic) -> None:
        """The stack's alarm topic (Monitoring) is made after this construct."""
        action = cw_actions.SnsAction(topic)
        for alarm in self.alarms.values():
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
