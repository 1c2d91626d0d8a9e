"""The AWS half of ``rag-ingest smoke --stack``, against moto's server: the stack's outputs from
CloudFormation, and a test user with a tenant and a permanent random password that signs in with
ADMIN_USER_PASSWORD_AUTH (never stuck in FORCE_CHANGE_PASSWORD). The other half (upload, READY,
search, delete) runs against the local stack in test_cli_local.py."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.stack_resources import StackResourcesError, stack_outputs
from rag_ingest.adapters.user_pool import UserPoolAdmin, UserPoolError, strong_password
from rag_ingest_client.cli import main
from rag_ingest_client.cli.console import Console
from rag_ingest_client.cli.smoke import SmokeRun, StaticToken, StepFailed
from rag_ingest_client.cli.tokens import unverified_claims
from rag_ingest_client.operator.smoke_sign_in import deployed_sign_in

from tests.support.aws import moto_server

pytestmark = pytest.mark.integration


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with moto_server():
        cognito = boto3.client("cognito-idp")
        pool = cognito.create_user_pool(
            PoolName=f"pool-{uuid.uuid4().hex[:6]}",
            Schema=[{"Name": "tenant_id", "AttributeDataType": "String", "Mutable": True}],
        )["UserPool"]
        client = cognito.create_user_pool_client(
            UserPoolId=pool["Id"],
            ClientName="web",
            ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
        )["UserPoolClient"]
        stack_name = f"RagIngest{uuid.uuid4().hex[:6]}"
        outputs = {
            "ApiUrl": "https://abc123.execute-api.us-east-1.amazonaws.com/",
            "UserPoolId": pool["Id"],
            "UserPoolClientId": client["ClientId"],
        }
        template = {
            "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
            "Outputs": {key: {"Value": value} for key, value in outputs.items()},
        }
        boto3.client("cloudformation").create_stack(StackName=stack_name, TemplateBody=json.dumps(template))
        yield {"cognito": cognito, "pool_id": pool["Id"], "client_id": client["ClientId"], "stack": stack_name,
               "outputs": outputs}  # fmt: skip


def test_stack_outputs_from_cloudformation(aws: dict[str, Any]) -> None:
    outputs, region = stack_outputs(aws["stack"])
    assert outputs == aws["outputs"] and region == "us-east-1"
    with pytest.raises(StackResourcesError, match="cannot read stack NoSuchStack"):
        stack_outputs("NoSuchStack")


def test_strong_passwords_meet_every_cognito_policy() -> None:
    for _ in range(100):
        password = strong_password()
        assert len(password) == 32
        assert any(c.islower() for c in password) and any(c.isupper() for c in password)
        assert any(c.isdigit() for c in password) and any(not c.isalnum() for c in password)


def test_test_user_is_created_then_reused_and_signs_in(aws: dict[str, Any]) -> None:
    admin = UserPoolAdmin.connect(aws["pool_id"], aws["client_id"], "us-east-1")
    password = strong_password()
    assert admin.ensure_user("smoke-user", "smoke@example.com", "smoke") is True
    admin.set_permanent_password("smoke-user", password)
    user = aws["cognito"].admin_get_user(UserPoolId=aws["pool_id"], Username="smoke-user")
    assert user["UserStatus"] == "CONFIRMED"
    assert {"Name": "custom:tenant_id", "Value": "smoke"} in user["UserAttributes"]

    claims = unverified_claims(admin.id_token("smoke-user", password))
    assert claims["token_use"] == "id" and claims["aud"] == aws["client_id"]
    assert claims["cognito:username"] == "smoke-user"

    # A second run reuses the user, moves it to the tenant asked for and gives it a new password.
    assert admin.ensure_user("smoke-user", "smoke@example.com", "smoke-2") is False
    second = strong_password()
    admin.set_permanent_password("smoke-user", second)
    user = aws["cognito"].admin_get_user(UserPoolId=aws["pool_id"], Username="smoke-user")
    assert {"Name": "custom:tenant_id", "Value": "smoke-2"} in user["UserAttributes"]
    with pytest.raises(UserPoolError, match="cognito admin-initiate-auth"):
        admin.id_token("smoke-user", password)  # the first run's password no longer works
    assert admin.id_token("smoke-user", second)


def test_smoke_sign_in_steps_print_their_latency(aws: dict[str, Any]) -> None:
    out = io.StringIO()
    run = SmokeRun(Console(out=out, err=io.StringIO()))
    target = deployed_sign_in(aws["stack"], "us-east-1", username="smoke-user", tenant_id="smoke", email=None)(run)

    assert target.api_url == "https://abc123.execute-api.us-east-1.amazonaws.com"
    assert isinstance(target.tokens, StaticToken)
    assert unverified_claims(target.tokens.token())["cognito:username"] == "smoke-user"
    assert [result["step"] for result in run.results] == ["stack outputs", "test user", "sign in"]
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("ok   test user") and "created smoke-user (tenant smoke)" in lines[1]
    assert all(float(line.split()[3]) >= 0 for line in lines)  # "ok   <step> <seconds> s ..."


def test_smoke_stops_at_the_failing_step(aws: dict[str, Any]) -> None:
    out = io.StringIO()
    run = SmokeRun(Console(out=out, err=io.StringIO()))
    with pytest.raises(StepFailed):
        deployed_sign_in("NoSuchStack", "us-east-1", username="u", tenant_id="t", email=None)(run)
    assert run.results[0]["step"] == "stack outputs" and run.results[0]["ok"] is False
    assert out.getvalue().startswith("FAIL stack outputs")


def test_user_commands_on_a_deployed_stack_need_its_sign_in(
    aws: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    # The stack above has no UserPoolDomain output (as before the managed login existed).
    assert main(["--stack", aws["stack"], "ls"]) == 1
    assert (
        capsys.readouterr().err
        == f"error: stack {aws['stack']} has no output UserPoolDomain (deployed from an older version?)\n"
    )

    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in
                    {**aws["outputs"], "UserPoolDomain": "https://ragingest.auth.us-east-1.amazoncognito.com"}.items()},
    }  # fmt: skip
    boto3.client("cloudformation").create_stack(StackName="WithLogin", TemplateBody=json.dumps(template))
    assert main(["ls", "--stack", "WithLogin"]) == 1
    assert (
        capsys.readouterr().err == "error: not signed in to stack WithLogin: run `rag-ingest --stack WithLogin login`\n"
    )

    assert main(["--stack", "NoSuchStack", "status", "01J"]) == 1
    assert capsys.readouterr().err.startswith("error: cannot read stack NoSuchStack: ")
