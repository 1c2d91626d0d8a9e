"""Groups at sign-in: the local issuer signs ``cognito:groups``, the claims reach the API as API
Gateway's authorizer passes them and become the same principal; the CLI's --groups and
--access-user / --access-group options."""

from __future__ import annotations

import json
from http import HTTPStatus

import jwt
import pytest
from rag_ingest.core.access import Principal
from rag_ingest_client.cli import build_parser
from rag_ingest_client.cli.main import split_groups
from rag_ingest_client.cli.upload import upload_access

from local.runtime.http.api_gateway import claim_strings
from local.runtime.http.identity import LocalIdentityProvider, TokenRequestError

pytestmark = pytest.mark.unit

ISSUER = "http://127.0.0.1:8080/_local/oidc"


@pytest.fixture(scope="module")
def provider() -> LocalIdentityProvider:
    provider = LocalIdentityProvider(ISSUER)
    provider.set_audience("client")
    return provider


def test_the_local_issuer_signs_groups_and_the_api_reads_them_through_the_authorizer(
    provider: LocalIdentityProvider,
) -> None:
    answer = provider.token_response(
        json.dumps({"username": "ann", "tenant_id": "acme", "groups": ["tenant-admins", "legal"]}).encode()
    )
    assert answer.status == HTTPStatus.OK
    claims = provider.verifier().verify(answer.payload["id_token"])
    assert claims["cognito:groups"] == ["tenant-admins", "legal"]
    passed = claim_strings(claims)  # what the JWT authorizer hands the function
    assert passed["cognito:groups"] == "[tenant-admins legal]"
    assert Principal.of(passed) == Principal.of(claims)
    assert Principal.of(passed).is_tenant_admin and Principal.of(passed).subject == claims["sub"]


def test_a_token_without_groups_has_no_groups_claim(provider: LocalIdentityProvider) -> None:
    token = provider.issue("ann", "acme")
    assert "cognito:groups" not in jwt.decode(token, options={"verify_signature": False})


@pytest.mark.parametrize("groups", ["admins", [""], ["two words"], [3], ["g"] * 101])
def test_bad_groups_are_refused(provider: LocalIdentityProvider, groups: object) -> None:
    with pytest.raises(TokenRequestError) as refused:
        provider.issue("ann", "acme", groups=groups)
    assert refused.value.code == "INVALID_GROUPS"


def test_cli_groups_and_access_options() -> None:
    args = build_parser().parse_args(
        ["upload", "a.pdf", "--access-user", "u-1", "--access-group", "legal", "--access-user", "u-1"]
    )
    assert upload_access(args.access_user, args.access_group) == {"users": ["u-1"], "groups": ["legal"]}
    assert upload_access(None, None) is None
    args = build_parser().parse_args(["login", "--groups", "tenant-admins,legal", "--groups", "ops"])
    assert split_groups(args.groups) == ["tenant-admins", "legal", "ops"]
    assert split_groups(None) is None
