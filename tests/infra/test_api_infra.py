"""The HTTP API the page needs, as synthesized: the tenant index, routes equal to the function's
OpenAPI document (both ways), the public /openapi.json, CORS, the Cognito app client (code flow
with PKCE, no implicit flow, no secret), the managed login domain, and the API role's new grants."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from infra.config import CLI_LOOPBACK_URL
from infra.constructs.api import PUBLIC_ROUTES, ROUTED_METHODS, SERVED_ROUTES, user_pool_domain_base
from tests.infra.template_tools import SynthResult, as_list, render_token
from tools import openapi as openapi_tool

pytestmark = pytest.mark.infra


@pytest.fixture(scope="module")
def openapi_operations() -> set[str]:
    document = openapi_tool.generate()
    return {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item}


def http_api(synth: SynthResult, resource_type: str) -> list[dict[str, Any]]:
    """Resources of the HTTP API only (the live-status WebSocket API has its own)."""
    prefix = f"{synth.stack_name}/Api/HttpApi"
    return [
        resource
        for resource in synth.of_type(resource_type).values()
        if resource.get("Metadata", {}).get("aws:cdk:path", "").startswith(prefix)
    ]


def routes(synth: SynthResult) -> dict[str, dict[str, Any]]:
    return {r["Properties"]["RouteKey"]: r["Properties"] for r in http_api(synth, "AWS::ApiGatewayV2::Route")}


def routes_by_integration(synth: SynthResult) -> dict[str, set[str]]:
    grouped: dict[str, set[str]] = defaultdict(set)
    for key, props in routes(synth).items():
        grouped[render_token(props["Target"])].add(key)
    return dict(grouped)


def test_documents_table_has_the_tenant_index(synth: SynthResult) -> None:
    props = synth.resource("Storage/DocumentsTable")["Properties"]
    (index,) = [i for i in props["GlobalSecondaryIndexes"] if i["IndexName"] == "by_tenant"]
    assert index["KeySchema"] == [
        {"AttributeName": "tenant_id", "KeyType": "HASH"},
        {"AttributeName": "created_at", "KeyType": "RANGE"},
    ]
    assert index["Projection"] == {"ProjectionType": "ALL"}
    attributes = {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]}
    assert attributes["tenant_id"] == "S" and attributes["created_at"] == "S"


def test_served_routes_are_exactly_the_openapi_operations(synth: SynthResult, openapi_operations: set[str]) -> None:
    """Both directions: every documented operation is routed to the function's served integration,
    and that integration serves nothing undocumented."""
    served = {f"{method} {path}" for path, methods in SERVED_ROUTES.items() for method in methods}
    assert served == openapi_operations
    groups = routes_by_integration(synth)
    assert len(groups) == 2, groups
    (served_in_template,) = [keys for keys in groups.values() if "GET /openapi.json" in keys]
    assert served_in_template == openapi_operations


def test_other_methods_reach_the_function_for_its_405(synth: SynthResult, openapi_operations: set[str]) -> None:
    keys = set(routes(synth))
    paths = {operation.split(" ", 1)[1] for operation in openapi_operations}
    assert keys == {f"{method} {path}" for path in paths for method in ROUTED_METHODS}
    (not_allowed,) = [group for group in routes_by_integration(synth).values() if "GET /openapi.json" not in group]
    assert not_allowed == keys - openapi_operations


def test_no_route_takes_cors_preflights_from_api_gateway(synth: SynthResult) -> None:
    # A JWT-protected OPTIONS/ANY/$default route would answer every browser preflight 401.
    for key in routes(synth):
        assert key.split(" ", 1)[0] not in ("OPTIONS", "ANY") and key != "$default", key
    (api,) = http_api(synth, "AWS::ApiGatewayV2::Api")
    cors = api["Properties"]["CorsConfiguration"]
    assert "OPTIONS" in cors["AllowMethods"]
    # If-Match: PATCH /documents/{id} is conditional on the revision GET's ETag gives (exposed).
    assert set(cors["AllowHeaders"]) == {"authorization", "content-type", "if-match"}
    assert "PATCH" in cors["AllowMethods"]
    assert [header.lower() for header in cors["ExposeHeaders"]] == ["etag"]


def test_openapi_json_is_the_only_route_without_the_jwt(synth: SynthResult) -> None:
    assert {"GET /openapi.json"} == PUBLIC_ROUTES
    for key, props in routes(synth).items():
        if key in PUBLIC_ROUTES:
            assert props["AuthorizationType"] == "NONE"
            assert "AuthorizerId" not in props
        else:
            assert props["AuthorizationType"] == "JWT", key


def test_cors_allows_only_the_configured_origins(synth: SynthResult) -> None:
    (api,) = http_api(synth, "AWS::ApiGatewayV2::Api")
    origins = api["Properties"]["CorsConfiguration"]["AllowOrigins"]
    literal = [render_token(o) for o in origins]
    # The page's own (CloudFront) origin may be added by the stack as a token.
    assert set(synth.config.allowed_origins) <= set(literal)
    assert "*" not in literal
    for origin in literal:
        assert origin.startswith("https://") or origin.startswith(("http://localhost", "http://127.0.0.1")), origin


def test_the_page_origin_can_sign_in_and_call_the_api(synth: SynthResult) -> None:
    """The stack serves the page (CloudFront); Api.add_web_app has made its origin a callback and
    logout URL, a CORS origin of the API, and of the uploads' bucket."""
    (distribution_id,) = synth.of_type("AWS::CloudFront::Distribution")
    origin = f"https://${{{distribution_id}.DomainName}}"
    client = web_client(synth)
    assert f"{origin}/" in [render_token(u) for u in client["CallbackURLs"]]
    assert f"{origin}/" in [render_token(u) for u in client["LogoutURLs"]]
    (api,) = http_api(synth, "AWS::ApiGatewayV2::Api")
    assert origin in [render_token(o) for o in api["Properties"]["CorsConfiguration"]["AllowOrigins"]]
    rules = synth.resource("Storage/DocumentsBucket")["Properties"]["CorsConfiguration"]["CorsRules"]
    assert any(origin in [render_token(o) for o in rule["AllowedOrigins"]] for rule in rules)


def web_client(synth: SynthResult) -> dict[str, Any]:
    return dict(synth.resource("Api/UserPool/WebClient")["Properties"])


def test_web_client_uses_the_code_flow_with_pkce_and_no_implicit_flow(synth: SynthResult) -> None:
    client = web_client(synth)
    assert client["AllowedOAuthFlows"] == ["code"]  # no "implicit", no "client_credentials"
    assert client["AllowedOAuthFlowsUserPoolClient"] is True
    assert client["GenerateSecret"] is False  # a public client: PKCE protects the code exchange
    assert set(client["AllowedOAuthScopes"]) == {"openid", "email", "profile"}
    assert client["SupportedIdentityProviders"] == ["COGNITO"]
    assert set(client["ExplicitAuthFlows"]) == {
        "ALLOW_USER_SRP_AUTH",
        "ALLOW_ADMIN_USER_PASSWORD_AUTH",
        "ALLOW_REFRESH_TOKEN_AUTH",
    }
    assert client["EnableTokenRevocation"] is True
    assert client["PreventUserExistenceErrors"] == "ENABLED"


def test_callback_and_logout_urls_come_from_config(synth: SynthResult) -> None:
    client = web_client(synth)
    # The page's URL, when the stack serves it, is a token: rendered as https://${Distribution.DomainName}/.
    callbacks = [render_token(u) for u in as_list(client["CallbackURLs"])]
    logouts = [render_token(u) for u in as_list(client["LogoutURLs"])]
    assert set(synth.config.auth.callback_urls) <= set(callbacks)
    assert set(synth.config.auth.logout_urls) <= set(logouts)
    assert CLI_LOOPBACK_URL in callbacks and CLI_LOOPBACK_URL in logouts
    for url in callbacks + logouts:
        assert url.startswith("https://") or url.startswith("http://localhost"), url


def test_tenant_is_in_the_token_and_never_writable_by_users(synth: SynthResult) -> None:
    client = web_client(synth)
    assert set(client["ReadAttributes"]) == {"custom:tenant_id", "email", "email_verified", "name"}
    # An explicit, non-empty list: without WriteAttributes every attribute would be writable.
    assert client["WriteAttributes"] == ["name"]
    pool = synth.resource("Api/UserPool")["Properties"]
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True


def test_managed_login_domain_and_its_output(synth: SynthResult) -> None:
    domain = synth.resource("Api/UserPool/Domain")["Properties"]
    assert domain["ManagedLoginVersion"] == 2
    assert domain["UserPoolId"] == {"Ref": synth.logical_id("Api/UserPool")}
    if synth.config.auth.domain_prefix is None:
        assert render_token(domain["Domain"]) == f"{user_pool_domain_base(synth.config)}-${{AWS::AccountId}}"
    (branding,) = synth.of_type("AWS::Cognito::ManagedLoginBranding").values()
    assert branding["Properties"]["ClientId"] == {"Ref": synth.logical_id("Api/UserPool/WebClient")}
    assert branding["Properties"]["UseCognitoProvidedValues"] is True
    output = render_token(synth.template_dict["Outputs"]["UserPoolDomain"]["Value"])
    assert output == f"https://${{{synth.logical_id('Api/UserPool/Domain')}}}.auth.${{AWS::Region}}.amazoncognito.com"


def _statement(synth: SynthResult, sid: str) -> dict[str, Any]:
    (statement,) = [s for s in synth.role_statements("Api/ApiFunction") if s.get("Sid") == sid]
    return statement


def test_api_role_new_grants_are_least_privilege(synth: SynthResult) -> None:
    table = synth.logical_id("Storage/DocumentsTable")
    bucket = synth.logical_id("Storage/DocumentsBucket")
    # GET /documents: Query on the tenant index (a documents-table grant from infra/permissions.py).
    queries = [
        render_token(resource)
        for s in synth.role_statements("Api/ApiFunction")
        if "dynamodb:Query" in as_list(s["Action"])
        for resource in as_list(s["Resource"])
    ]
    # And GET /webhooks and GET /sources: Query on the tenant's partition of those tables.
    webhooks = synth.logical_id("Webhooks/WebhooksTable")
    sources = synth.logical_id("Sources/SourcesTable")
    expected = [f"${{{table}.Arn}}/index/by_tenant", f"${{{webhooks}.Arn}}", f"${{{sources}.Arn}}"]
    assert sorted(queries) == sorted(expected)
    start_sync = _statement(synth, "StartSourceSync")
    assert start_sync["Action"] == "states:StartExecution"
    assert start_sync["Resource"] == {"Ref": synth.logical_id("Sources/SyncStateMachine")}
    retry = _statement(synth, "RetryFailedDocument")
    assert retry["Action"] == "states:StartExecution"
    assert retry["Resource"] == {"Ref": synth.logical_id("Workflow/StateMachine")}
    download = _statement(synth, "DownloadOriginalUpload")
    assert set(as_list(download["Action"])) == {"s3:GetObject", "s3:GetObjectVersion"}
    assert render_token(download["Resource"]) == f"${{{bucket}.Arn}}/raw/*"


def test_api_function_knows_the_state_machine(synth: SynthResult) -> None:
    env = synth.resource("Api/ApiFunction")["Properties"]["Environment"]["Variables"]
    assert env["STATE_MACHINE_ARN"] == {"Ref": synth.logical_id("Workflow/StateMachine")}
