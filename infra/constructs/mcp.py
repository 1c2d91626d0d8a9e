"""The MCP server over streamable HTTP (docs/mcp.md): a function of its own behind the HTTP API.

Routes: ``/mcp`` and the protected-resource metadata (RFC 9728: the path-inserted form and the root),
every routed method (the function answers what it does not serve 405), on routes without the API's
JWT authorizer: the function verifies the ID token itself so that a request without a valid one gets
the 401 with ``WWW-Authenticate: Bearer resource_metadata=...`` MCP clients follow. The authorizer's
own 401 names no metadata, and an HTTP API has no gateway responses to change it
(https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-vs-rest.html; the decision:
docs/decisions/mcp-over-http.md). It reads as ``GET /documents``,
``GET /documents/{id}[/content]`` and ``POST /search`` do, and holds only those grants.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Fn
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from rag_ingest.core.s3_keys import ARTIFACTS_PREFIX

from infra.config import RagIngestConfig
from infra.constructs.api import ROUTED_METHODS, Api
from infra.constructs.function import FunctionFactory
from infra.constructs.layer import McpLayer
from infra.constructs.search import Search
from infra.constructs.storage import Storage
from infra.nag import acknowledge, arn_ref

MCP_PATH = "/mcp"
# RFC 9728 section 3.1 inserts the well-known segment before the resource's path; MCP clients that
# got no header try the root last (functions/mcp_http/serving/endpoint.py serves both).
METADATA_PATHS = ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource")


class McpServer(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        factory: FunctionFactory,
        storage: Storage,
        search: Search,
        api: Api,
    ) -> None:
        super().__init__(scope, construct_id)
        # https://<api>.execute-api.<region>.amazonaws.com/mcp: the resource its metadata names.
        self.url = Fn.join("", [api.http_api.api_endpoint, MCP_PATH])
        self.function: lambda_.Function = factory.create(
            self,
            "McpFunction",
            code_dir="mcp_http",
            handler="app.handler",
            service="rag-ingest-mcp",
            settings=config.functions.mcp,
            environment={
                "BUCKET_NAME": storage.bucket.bucket_name,
                # fetch reads a DOCX, PPTX, HTML, Markdown or text document's extracted pages.
                "ARTIFACTS_PREFIX": ARTIFACTS_PREFIX,
                "TENANT_ADMIN_GROUP": config.auth.tenant_admin_group,
                # The ID tokens the API's JWT authorizer accepts: this issuer, this app client.
                "TOKEN_ISSUER": Fn.join("", ["https://", api.user_pool.user_pool_provider_url]),
                "TOKEN_AUDIENCE": api.user_pool_client.user_pool_client_id,
                "MCP_RESOURCE_URL": self.url,
                **search.query_environment,
                **search.answer_parameters,
            },
            description="rag-ingest MCP server (streamable HTTP): search, list_documents, fetch as the caller",
        )
        self.function.add_layers(McpLayer(self, "Layer", config.functions.architecture).layer)
        self._grant(storage, search)
        self._add_routes(api.http_api)
        CfnOutput(
            self, "McpUrl", value=self.url, description="The MCP server (streamable HTTP; Cognito ID token as Bearer)"
        ).override_logical_id("McpUrl")

    def _grant(self, storage: Storage, search: Search) -> None:
        role = self.function.role
        assert role is not None
        storage.grant_documents(role, "Mcp")
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadExtractedPages",
                actions=["s3:GetObject"],
                resources=[storage.bucket.arn_for_objects(f"{ARTIFACTS_PREFIX}*")],
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "Resource-scoped: the extracted pages under artifacts/ of the one bucket (fetch).",
            f"Resource::{arn_ref(storage.bucket)}/{ARTIFACTS_PREFIX}*",
        )
        search.grant_index_access(role, "Mcp")
        search.grant_embedding(role)
        search.grant_rerank(role)
        search.grant_answer(role)

    def _add_routes(self, http_api: apigwv2.HttpApi) -> None:
        integration = integrations.HttpLambdaIntegration(
            "McpIntegration", self.function, scope_permission_to_route=False
        )
        # Routes of this construct (not Api's), so the API's own route set stays the OpenAPI document's.
        for path in (MCP_PATH, *METADATA_PATHS):
            for method in ROUTED_METHODS:
                route = apigwv2.HttpRoute(
                    self,
                    f"{method}{path}",
                    http_api=http_api,
                    route_key=apigwv2.HttpRouteKey.with_(path, apigwv2.HttpMethod(method)),
                    integration=integration,
                    authorizer=apigwv2.HttpNoneAuthorizer(),
                )
                acknowledge(
                    route,
                    "AwsSolutions-APIG4",
                    f"{method} {path}: the MCP function verifies the Cognito ID token itself, so that its 401 names "
                    "the resource metadata MCP clients follow (the JWT authorizer's cannot); the metadata is public.",
                )
