"""Answers streamed over the live channel (docs/answers.md, "Streaming"): the WebSocket API's
``answer`` route and the function behind it.

The function searches as the connection's principal (the connections table's record, written by
``$connect`` behind the token authorizer) and posts the answer's events to that connection as
ConverseStream writes them. It reads what ``POST /search`` reads and holds only those grants, with
ConverseStream on the answer model, GetItem on the connections table and PostToConnection.
"""

from __future__ import annotations

from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from rag_ingest.live.answers import ROUTE_KEY

from infra.config import RagIngestConfig
from infra.constructs.function import FunctionFactory
from infra.constructs.live_status import LiveStatus
from infra.constructs.search import Search
from infra.nag import acknowledge


class LiveAnswers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        factory: FunctionFactory,
        live: LiveStatus,
        search: Search,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function: lambda_.Function = factory.create(
            self,
            "AnswersFunction",
            code_dir="live_answers",
            handler="app.handler",
            service="rag-ingest-live-answers",
            settings=config.live.answers,
            environment={
                "CONNECTIONS_TABLE": live.connections_table.table_name,
                "WEBSOCKET_CALLBACK_URL": live.stage.callback_url,
                "TENANT_ADMIN_GROUP": config.auth.tenant_admin_group,
                **search.query_environment,
                **search.answer_parameters,
            },
            description="rag-ingest live answers: WebSocket route 'answer' -> ConverseStream -> PostToConnection",
        )
        self._grant(live, search)
        route = apigwv2.WebSocketRoute(
            self,
            "AnswerRoute",
            web_socket_api=live.api,
            route_key=ROUTE_KEY,
            integration=integrations.WebSocketLambdaIntegration("AnswerIntegration", self.function),
        )
        acknowledge(
            route,
            "AwsSolutions-APIG4",
            "API Gateway accepts an authorizer only on $connect; this route's messages come on a connection "
            "the token authorizer admitted, and the function answers as that connection's recorded principal.",
        )

    def _grant(self, live: LiveStatus, search: Search) -> None:
        role = self.function.role
        assert role is not None
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=[live.connections_table.table_arn])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["execute-api:ManageConnections"], resources=[live.post_to_connections_arn])
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "Resource-scoped: PostToConnection on any connection id of the live API's one stage (connection ids "
            "are only known at run time).",
            live.post_to_connections_finding,
        )
        search.grant_index_access(role, "LiveAnswers")
        search.grant_embedding(role)
        search.grant_rerank(role)
        search.grant_answer(role, stream=True)
