"""HTTP API with Cognito JWT authorization in front of the API function; the user pool and its sign-in.

Routes: every operation of the function's OpenAPI document (``SERVED_ROUTES``; a test keeps the
two equal), all behind the JWT authorizer except ``GET /openapi.json``. Each of those paths also
routes the methods the function does not serve, so it answers them 405 in its one error shape
instead of API Gateway's bare 404. No route names OPTIONS (or ANY, or ``$default``): API Gateway
answers CORS preflights itself only while no route matches them, and a JWT-protected route would
turn every preflight into a 401.
"""

from __future__ import annotations

import json

from aws_cdk import Aws, CfnOutput, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from rag_ingest.core.s3_keys import ARTIFACTS_PREFIX, RAW_PREFIX

from infra.config import RagIngestConfig, user_pool_domain_base
from infra.constructs.function import AccessLogSettings, FunctionFactory, new_log_group, removal_policy
from infra.constructs.search import Search
from infra.constructs.storage import Storage
from infra.constructs.workflow import EVENT_BUS_NAME
from infra.nag import acknowledge, arn_ref

TENANT_ATTRIBUTE = "tenant_id"  # the JWT carries it as custom:tenant_id

# (path → methods) the API function serves: exactly the operations of its OpenAPI document.
SERVED_ROUTES: dict[str, tuple[str, ...]] = {
    "/documents": ("GET", "POST"),
    "/documents/{document_id}": ("GET", "PATCH", "DELETE"),
    "/documents/{document_id}/retry": ("POST",),
    "/documents/{document_id}/download": ("GET",),
    "/documents/{document_id}/content": ("GET",),
    "/search": ("POST",),
    "/answer": ("POST",),
    "/webhooks": ("GET", "POST"),
    "/webhooks/{endpoint_id}": ("DELETE",),
    "/webhooks/{endpoint_id}/rotate-secret": ("POST",),
    "/webhooks/{endpoint_id}/deliveries": ("GET",),
    "/sources": ("GET", "POST"),
    "/sources/{source_id}": ("GET", "PATCH", "DELETE"),
    "/sources/{source_id}/sync": ("POST",),
    "/sources/{source_id}/syncs": ("GET",),
    "/sources/{source_id}/syncs/{sync_id}": ("GET",),
    "/sources/{source_id}/items/{external_id}": ("PUT", "DELETE"),
    "/openapi.json": ("GET",),
}
# Served without a token.
PUBLIC_ROUTES = frozenset({"GET /openapi.json"})
# The methods a route key can name, but OPTIONS (CORS preflights stay with API Gateway) and ANY.
ROUTED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")


# HTTP APIs support a subset of $context variables (no $context.identity.caller etc.).
_ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
    # A claim with a colon (custom:tenant_id) has no documented $context spelling: the log keeps the
    # sub, and the API function logs the tenant under the same request id.
    "user": "$context.authorizer.claims.sub",
}


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        factory: FunctionFactory,
        storage: Storage,
        search: Search,
        state_machine: sfn.IStateMachine,
    ) -> None:
        super().__init__(scope, construct_id)
        self._storage = storage
        self._callback_urls = list(config.auth.callback_urls)
        self._logout_urls = list(config.auth.logout_urls)
        self._cors_origins = list(config.allowed_origins)
        self.user_pool, self.user_pool_client = self._user_pool(config)
        self.user_pool_domain = self._sign_in_domain(config)

        self.function: lambda_.Function = factory.create(
            self,
            "ApiFunction",
            code_dir="api",
            handler="app.handler",
            service="rag-ingest-api",
            settings=config.functions.api,
            environment={
                "BUCKET_NAME": storage.bucket.bucket_name,
                "RAW_PREFIX": RAW_PREFIX,
                "MAX_UPLOAD_BYTES": str(config.upload.max_upload_bytes),
                "UPLOAD_URL_EXPIRY_SECONDS": str(config.upload.url_expiry_seconds),
                # DELETE /documents/{id}: the document's chunks and artifacts go too.
                "ARTIFACTS_PREFIX": ARTIFACTS_PREFIX,
                "OPENSEARCH_ENDPOINT": search.endpoint_url,
                "OPENSEARCH_INDEX": search.index_name,
                "EMBEDDING_DIMENSION": str(config.embedding.dimension),
                # POST /search: the index parameters and the model that embeds the query.
                **search.query_environment,
                **search.answer_parameters,
                # POST /documents/{id}/retry starts a replay execution.
                "STATE_MACHINE_ARN": state_machine.state_machine_arn,
                # DELETE /documents/{id} announces DocumentDeleted (the webhooks' document.deleted).
                "EVENT_BUS_NAME": EVENT_BUS_NAME,
                # Per-document access: this group's members read and manage all of their tenant's documents.
                "TENANT_ADMIN_GROUP": config.auth.tenant_admin_group,
            },
            description="rag-ingest API: documents (upload, list, status, retry, download, delete) and search",
        )
        role = self.function.role
        assert role is not None
        # Presigned POSTs are signed with this role: it may only write new uploads under raw/.
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[storage.bucket.arn_for_objects(f"{RAW_PREFIX}*")])
        )
        storage.grant_documents(role, "Api")
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["events:PutEvents"],
                resources=[
                    Stack.of(self).format_arn(service="events", resource="event-bus", resource_name=EVENT_BUS_NAME)
                ],
            )
        )
        storage.grant_document_delete(role)
        # POST /search and DELETE /documents/{id} in the chunk index (infra/permissions.py).
        search.grant_index_access(role, "Api")
        # POST /search embeds the query with the configured model.
        search.grant_embedding(role)
        # POST /search's optional rerank stage calls Bedrock's Rerank with the configured model.
        search.grant_rerank(role)
        # POST /answer calls Converse with the configured answer model.
        search.grant_answer(role)
        self._grant_page_routes(role, storage, state_machine)
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "Resource-scoped: objects under raw/ and artifacts/ of the one bucket.",
            f"Resource::{arn_ref(storage.bucket)}/{RAW_PREFIX}*",
            f"Resource::{arn_ref(storage.bucket)}/{ARTIFACTS_PREFIX}*",
        )

        authorizer = authorizers.HttpUserPoolAuthorizer(
            "CognitoAuthorizer", self.user_pool, user_pool_clients=[self.user_pool_client]
        )
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="rag-ingest documents API",
            create_default_stage=False,
            default_authorizer=authorizer,
            cors_preflight=apigwv2.CorsPreflightOptions(
                allow_origins=list(self._cors_origins),
                allow_methods=[
                    apigwv2.CorsHttpMethod.GET,
                    apigwv2.CorsHttpMethod.POST,
                    apigwv2.CorsHttpMethod.DELETE,
                    apigwv2.CorsHttpMethod.PATCH,
                    apigwv2.CorsHttpMethod.OPTIONS,
                ],
                # PATCH /documents/{id} is conditional on If-Match, the revision GET's ETag exposes.
                allow_headers=["authorization", "content-type", "if-match"],
                expose_headers=["etag"],
                max_age=Duration.hours(1),
            ),
        )
        access_logs = new_log_group(self, "AccessLogs", config)
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.api.throttling_rate_limit, burst_limit=config.api.throttling_burst_limit
            ),
            access_log_settings=AccessLogSettings(
                apigwv2.LogGroupLogDestination(access_logs),
                apigw.AccessLogFormat.custom(json.dumps(_ACCESS_LOG_FORMAT)),
            ),
        )

        self._add_routes()

        CfnOutput(self, "ApiUrl", value=self.stage.url).override_logical_id("ApiUrl")
        CfnOutput(self, "UserPoolId", value=self.user_pool.user_pool_id).override_logical_id("UserPoolId")
        CfnOutput(self, "UserPoolClientId", value=self.user_pool_client.user_pool_client_id).override_logical_id(
            "UserPoolClientId"
        )
        CfnOutput(
            self,
            "UserPoolDomain",
            value=self.user_pool_domain.base_url(),
            description="Cognito managed login (https base URL): /oauth2/authorize, /oauth2/token, /logout",
        ).override_logical_id("UserPoolDomain")

    def add_web_app(self, origin: str) -> None:
        """Let the page served at ``origin`` (``https://host``, e.g. the CloudFront URL) sign in and call the API:
        ``origin + "/"`` becomes a callback and logout URL of the app client, and ``origin`` a CORS origin of the
        HTTP API and of the uploads' bucket (the page POSTs files straight to S3)."""
        self._callback_urls.append(f"{origin}/")
        self._logout_urls.append(f"{origin}/")
        self._cors_origins.append(origin)
        client = self.user_pool_client.node.default_child
        assert isinstance(client, cognito.CfnUserPoolClient)
        client.add_property_override("CallbackURLs", list(self._callback_urls))
        client.add_property_override("LogoutURLs", list(self._logout_urls))
        http_api = self.http_api.node.default_child
        assert isinstance(http_api, apigwv2.CfnApi)
        http_api.add_property_override("CorsConfiguration.AllowOrigins", list(self._cors_origins))
        # The page uploads with the presigned POST and its PDF viewer reads with the presigned GET.
        self._storage.bucket.add_cors_rule(
            allowed_methods=[s3.HttpMethods.POST, s3.HttpMethods.GET],
            allowed_origins=[origin],
            allowed_headers=["*"],
            exposed_headers=["ETag", "x-amz-version-id"],
            max_age=3000,
        )

    def _add_routes(self) -> None:
        # One invoke permission per integration (for this API), not one per route: 36 route-scoped
        # statements would fill most of the function's 20 KB resource policy.
        served = integrations.HttpLambdaIntegration("ApiIntegration", self.function, scope_permission_to_route=False)
        # The same function, a separate integration: the template shows which routes exist only for the 405.
        not_allowed = integrations.HttpLambdaIntegration(
            "MethodNotAllowedIntegration", self.function, scope_permission_to_route=False
        )
        for path, methods in SERVED_ROUTES.items():
            for method in ROUTED_METHODS:
                route_key = f"{method} {path}"
                self.http_api.add_routes(
                    path=path,
                    methods=[apigwv2.HttpMethod(method)],
                    integration=served if method in methods else not_allowed,
                    authorizer=apigwv2.HttpNoneAuthorizer() if route_key in PUBLIC_ROUTES else None,
                )
        for route_key in sorted(PUBLIC_ROUTES):
            method, path = route_key.split(" ", 1)
            route = self.http_api.node.find_child(f"{method}{path}")
            acknowledge(
                route,
                "AwsSolutions-APIG4",
                f"{route_key} serves the OpenAPI document of the API, which holds no data and no secret; "
                "every other route requires the Cognito JWT.",
            )

    @staticmethod
    def _grant_page_routes(role: iam.IRole, storage: Storage, state_machine: sfn.IStateMachine) -> None:
        """The page's routes, each its own statement: retry starts a replay execution, download presigns
        a GET. (GET /documents queries the tenant index: a documents-table grant, infra/permissions.py.)"""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="RetryFailedDocument",
                actions=["states:StartExecution"],
                resources=[state_machine.state_machine_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DownloadOriginalUpload",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[storage.bucket.arn_for_objects(f"{RAW_PREFIX}*")],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                # PATCH /documents/{id} rewrites a READY document's chunks from its chunks artifact and
                # Embed checkpoints (rag_ingest.ingest.chunk_rewrite); the index access is granted above.
                sid="ReadIndexArtifacts",
                actions=["s3:GetObject"],
                resources=[storage.bucket.arn_for_objects(f"{ARTIFACTS_PREFIX}*")],
            )
        )

    def _user_pool(self, config: RagIngestConfig) -> tuple[cognito.UserPool, cognito.UserPoolClient]:
        mfa = {"off": cognito.Mfa.OFF, "optional": cognito.Mfa.OPTIONAL, "required": cognito.Mfa.REQUIRED}
        user_pool = cognito.UserPool(
            self,
            "UserPool",
            # Tenants are assigned by an administrator, never chosen by the user.
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True),
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            # Immutable: once an administrator sets the tenant, no one (the user included) can change it.
            custom_attributes={TENANT_ATTRIBUTE: cognito.StringAttribute(min_len=1, max_len=64, mutable=False)},
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            mfa=mfa[config.auth.mfa],
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            feature_plan=cognito.FeaturePlan.ESSENTIALS,
            removal_policy=removal_policy(config),
        )
        client = user_pool.add_client(
            "WebClient",
            # A public client (the page, the CLI): no secret, so nothing secret ships to browsers.
            generate_secret=False,
            # SRP for scripts, admin password auth (IAM credentials) for the smoke test and operators'
            # scripts; CDK adds ALLOW_REFRESH_TOKEN_AUTH with any flow.
            auth_flows=cognito.AuthFlow(user_srp=True, admin_user_password=True),
            # Managed login with the authorization code grant only: the page and the CLI send a PKCE
            # challenge (S256) with every authorize request. No implicit grant: tokens never travel in URLs.
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True, implicit_code_grant=False),
                scopes=[cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL, cognito.OAuthScope.PROFILE],
                callback_urls=list(self._callback_urls),
                logout_urls=list(self._logout_urls),
            ),
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            # The ID token carries only what the API and the page show; the tenant is readable (it must be in
            # the token) and never writable by the user: an administrator sets it.
            read_attributes=cognito.ClientAttributes()
            .with_standard_attributes(email=True, email_verified=True, fullname=True)
            .with_custom_attributes(TENANT_ATTRIBUTE),
            write_attributes=cognito.ClientAttributes().with_standard_attributes(fullname=True),
            id_token_validity=Duration.hours(1),
            access_token_validity=Duration.hours(1),
            refresh_token_validity=Duration.days(30),
            enable_token_revocation=True,
            prevent_user_existence_errors=True,
        )
        if config.auth.mfa != "required":
            acknowledge(
                user_pool,
                "AwsSolutions-COG2",
                "MFA is optional by default (auth.mfa in cdk.json) so administrators can onboard users without "
                "TOTP enrolment; set auth.mfa to 'required' for production tenants.",
            )
        plus_plan_reason = (
            "Threat protection (advanced security) needs the Cognito Plus plan, billed per MAU; the pool uses the "
            "Essentials plan with strong passwords, admin-only sign-up and TOTP MFA."
        )
        acknowledge(user_pool, "AwsSolutions-COG8", plus_plan_reason)
        return user_pool, client

    def _sign_in_domain(self, config: RagIngestConfig) -> cognito.UserPoolDomain:
        """Cognito managed login at ``https://<prefix>.auth.<region>.amazoncognito.com``.

        Prefixes are unique per region across all accounts: without ``auth.domainPrefix`` the
        stack's name plus its account id makes one that is stable across deploys of this stack.
        """
        prefix = config.auth.domain_prefix or f"{user_pool_domain_base(config)}-{Aws.ACCOUNT_ID}"
        domain = self.user_pool.add_domain(
            "Domain",
            cognito_domain=cognito.CognitoDomainOptions(domain_prefix=prefix),
            managed_login_version=cognito.ManagedLoginVersion.NEWER_MANAGED_LOGIN,
        )
        # Managed login shows an error page for a client without a style: use Cognito's default one.
        cognito.CfnManagedLoginBranding(
            self,
            "ManagedLoginBranding",
            user_pool_id=self.user_pool.user_pool_id,
            client_id=self.user_pool_client.user_pool_client_id,
            use_cognito_provided_values=True,
        )
        return domain
