"""The local identity provider, the authorizer's claim strings and the template's CORS policy."""

from __future__ import annotations

import json
import time
from http import HTTPStatus

import jwt
import pytest
from rag_ingest.core.auth import InvalidTokenError, tenant_of

from local.runtime.cloudformation.template import CloudFormationTemplate, IntrinsicResolver
from local.runtime.http.api_gateway import claim_strings
from local.runtime.http.identity import LocalIdentityProvider, TokenRequestError
from local.runtime.http.template_api import CorsPolicy, HttpApiDefinition

pytestmark = pytest.mark.unit

ISSUER = "http://127.0.0.1:8080/_local/oidc"


@pytest.fixture(scope="module")
def provider() -> LocalIdentityProvider:
    provider = LocalIdentityProvider(ISSUER)
    provider.set_audience("ApiUserPoolWebClient1234")
    return provider


def test_issued_tokens_verify_with_the_published_keys(provider: LocalIdentityProvider) -> None:
    token = provider.issue("ann", "acme")
    claims = provider.verifier().verify(token)
    assert tenant_of(claims) == "acme"
    assert claims["iss"] == ISSUER and claims["aud"] == "ApiUserPoolWebClient1234"
    assert claims["token_use"] == "id" and claims["cognito:username"] == "ann"
    assert claims["exp"] - claims["iat"] == 3600
    assert jwt.get_unverified_header(token)["kid"] == provider.jwks()["keys"][0]["kid"]
    # The same user and tenant keep their subject; another tenant's user of that name does not.
    assert provider.verifier().verify(provider.issue("ann", "acme"))["sub"] == claims["sub"]
    assert provider.verifier().verify(provider.issue("ann", "other"))["sub"] != claims["sub"]


def test_another_providers_or_audiences_tokens_are_refused(provider: LocalIdentityProvider) -> None:
    stranger = LocalIdentityProvider(ISSUER)
    stranger.set_audience("ApiUserPoolWebClient1234")
    with pytest.raises(InvalidTokenError):
        provider.verifier().verify(stranger.issue("ann", "acme"))
    with pytest.raises(InvalidTokenError):
        provider.verifier("another-client").verify(provider.issue("ann", "acme"))


def test_a_short_lived_token_expires(provider: LocalIdentityProvider) -> None:
    token = provider.issue("ann", "acme", lifetime_seconds=1)
    provider.verifier().verify(token)
    time.sleep(2.05)
    with pytest.raises(InvalidTokenError, match="expired"):
        provider.verifier().verify(token)


@pytest.mark.parametrize(
    ("username", "tenant", "code"),
    [
        ("ann", "a/b", "INVALID_TENANT"),
        ("ann", "", "INVALID_TENANT"),
        ("ann", None, "INVALID_TENANT"),
        ("ann", "x" * 65, "INVALID_TENANT"),
        ("", "acme", "INVALID_USERNAME"),
        ("two words", "acme", "INVALID_USERNAME"),
        (7, "acme", "INVALID_USERNAME"),
    ],
)
def test_bad_sign_in_requests_are_refused(
    provider: LocalIdentityProvider, username: object, tenant: object, code: str
) -> None:
    with pytest.raises(TokenRequestError) as refused:
        provider.issue(username, tenant)
    assert refused.value.code == code
    answer = provider.token_response(json.dumps({"username": username, "tenant_id": tenant}).encode())
    assert answer.status == HTTPStatus.BAD_REQUEST and answer.payload["error"]["code"] == code


def test_the_token_endpoint_waits_for_the_audience() -> None:
    provider = LocalIdentityProvider(ISSUER)
    answer = provider.token_response(b'{"username": "ann", "tenant_id": "acme"}')
    assert answer.status == HTTPStatus.SERVICE_UNAVAILABLE
    provider.set_audience("client")
    answer = provider.token_response(b'{"username": "ann", "tenant_id": "acme"}')
    assert answer.status == HTTPStatus.OK and answer.payload["token_type"] == "Bearer"
    assert answer.payload["expires_in"] == 3600


def test_claims_reach_the_function_as_strings() -> None:
    claims = {"exp": 1700000000, "email_verified": True, "aud": "c", "cognito:groups": ["a", "b"], "x": False}
    assert claim_strings(claims) == {
        "exp": "1700000000",
        "email_verified": "true",
        "aud": "c",
        "cognito:groups": "[a b]",
        "x": "false",
    }


def test_cors_policy_allows_only_configured_origins_methods_and_headers() -> None:
    policy = CorsPolicy(
        allow_origins=("https://app.example.com",),
        allow_methods=("GET", "POST"),
        allow_headers=("authorization", "content-type"),
        max_age=3600,
    ).with_origins(["http://127.0.0.1:8080"])
    assert policy.response_headers("https://app.example.com") == {
        "Access-Control-Allow-Origin": "https://app.example.com",
        "Vary": "Origin",
    }
    assert policy.response_headers("http://127.0.0.1:8080")["Access-Control-Allow-Origin"] == "http://127.0.0.1:8080"
    assert policy.response_headers("https://evil.example") == {}
    assert policy.response_headers(None) == {}
    preflight = policy.preflight_headers("https://app.example.com", "POST", "Authorization, Content-Type")
    assert preflight["Access-Control-Allow-Methods"] == "GET,POST"
    assert preflight["Access-Control-Max-Age"] == "3600"
    assert policy.preflight_headers("https://app.example.com", "DELETE", "") == {}
    assert policy.preflight_headers("https://app.example.com", "POST", "x-tenant-id") == {}
    wildcard = CorsPolicy(allow_origins=("*",), allow_methods=("*",), allow_headers=("*",))
    assert wildcard.response_headers("https://any.example") == {"Access-Control-Allow-Origin": "*"}


def test_the_http_api_definition_comes_from_the_template() -> None:
    template = CloudFormationTemplate(
        {
            "Resources": {
                "Api": {
                    "Type": "AWS::ApiGatewayV2::Api",
                    "Properties": {
                        "ProtocolType": "HTTP",
                        "CorsConfiguration": {"AllowOrigins": ["https://a.example"]},
                    },
                },
                "Socket": {"Type": "AWS::ApiGatewayV2::Api", "Properties": {"ProtocolType": "WEBSOCKET"}},
                "Client": {"Type": "AWS::Cognito::UserPoolClient", "Properties": {}},
                "Authorizer": {
                    "Type": "AWS::ApiGatewayV2::Authorizer",
                    "Properties": {
                        "ApiId": {"Ref": "Api"},
                        "AuthorizerType": "JWT",
                        "IdentitySource": ["$request.header.Authorization"],
                        "JwtConfiguration": {"Audience": [{"Ref": "Client"}], "Issuer": "https://issuer.example"},
                    },
                },
                "Get": {
                    "Type": "AWS::ApiGatewayV2::Route",
                    "Properties": {
                        "ApiId": {"Ref": "Api"},
                        "RouteKey": "GET /documents/{id}",
                        "AuthorizationType": "JWT",
                        "AuthorizerId": {"Ref": "Authorizer"},
                    },
                },
                "OpenApi": {
                    "Type": "AWS::ApiGatewayV2::Route",
                    "Properties": {
                        "ApiId": {"Ref": "Api"},
                        "RouteKey": "GET /openapi.json",
                        "AuthorizationType": "NONE",
                    },
                },
                "Connect": {
                    "Type": "AWS::ApiGatewayV2::Route",
                    "Properties": {"ApiId": {"Ref": "Socket"}, "RouteKey": "$connect", "AuthorizationType": "CUSTOM"},
                },
            }
        }
    )
    resolver = IntrinsicResolver(template, region="us-east-1", account_id="123456789012", stack_name="Test")
    for logical_id in ("Api", "Socket", "Client", "Authorizer"):
        resolver.set_resource(logical_id, logical_id)  # as the provisioner does for skipped resources
    definition = HttpApiDefinition.from_template(template, resolver)
    assert set(definition.routes) == {"GET /documents/{id}", "GET /openapi.json"}  # not the WebSocket API's
    assert definition.authorization("GET /documents/{id}").requires_jwt
    assert not definition.authorization("GET /openapi.json").requires_jwt
    assert definition.audiences == ("Client",)
    assert definition.cors is not None and definition.cors.allow_origins == ("https://a.example",)
