"""Where the commands go and who they are: the local stack (``ApiUrl`` of its ``outputs.json``, tokens
from its identity provider) or a deployed stack (its CloudFormation outputs, Cognito sign-in)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.signin import (
    CognitoClient,
    CognitoSignIn,
    LocalSignIn,
    TokenCache,
    TokenSource,
    cognito_domain,
)
from rag_ingest_client.http import Unreachable

#: Where the local stack writes its outputs (``local.runtime``), read from the repository by default.
LOCAL_OUTPUTS = Path(".local/runtime/outputs.json")
DEFAULT_LOCAL_TENANT = "demo"
DEFAULT_LOCAL_USER = "cli-user"


@dataclass
class Target:
    """Where the commands go and who they are."""

    label: str  # "the local stack" or "stack NAME", for messages
    api_url: str
    tokens: TokenSource
    login_hint: str  # the command that signs in again
    live_url: str | None = None  # the live channel (WebSocket API) answers stream over

    def describe_network_error(self, exc: Unreachable) -> str:
        if self.label == "the local stack":
            return f"{exc} (is the local stack running? start it with `make stack-up`)"
        return str(exc)


def local_target(
    outputs_path: Path,
    *,
    username: str | None,
    tenant_id: str | None,
    cache: TokenCache,
    groups: list[str] | None = None,
) -> Target:
    if not outputs_path.is_file():
        raise CliError(f"the local stack is not running ({outputs_path} not found): start it with `make stack-up`")
    try:
        outputs = json.loads(outputs_path.read_text())
        api_url = str(outputs["ApiUrl"]).rstrip("/")
    except (ValueError, KeyError, TypeError):
        raise CliError(f"{outputs_path} has no ApiUrl: restart the local stack") from None
    previous = cache.load(f"local:{api_url}") or {}
    # The user and tenant of the last `login` stay in effect until another login names others.
    sign_in = LocalSignIn(
        api_url=api_url,
        username=username or previous.get("username") or DEFAULT_LOCAL_USER,
        tenant_id=tenant_id or previous.get("tenant_id") or DEFAULT_LOCAL_TENANT,
        cache=cache,
        groups=tuple(_groups(groups, previous, renamed=bool(username or tenant_id))),
    )
    return Target(
        "the local stack",
        api_url,
        sign_in,
        "rag-ingest login --user NAME --tenant TENANT",
        live_url=outputs.get("LiveUrl") or None,
    )


def _groups(given: list[str] | None, previous: dict[str, Any], *, renamed: bool) -> list[str]:
    """The local token's groups: those given, else the last login's unless another user or tenant is named."""
    if given is not None:
        return given
    return [] if renamed else [str(group) for group in previous.get("groups") or []]


def deployed_target(stack_name: str, outputs: dict[str, str], region: str | None, cache: TokenCache) -> Target:
    missing = [key for key in ("ApiUrl", "UserPoolClientId", "UserPoolDomain") if not outputs.get(key)]
    if missing:
        raise CliError(f"stack {stack_name} has no output {', '.join(missing)} (deployed from an older version?)")
    client = CognitoClient(
        domain=cognito_domain(outputs["UserPoolDomain"], region), client_id=outputs["UserPoolClientId"]
    )
    sign_in = CognitoSignIn(stack_name=stack_name, client=client, cache=cache)
    return Target(
        f"stack {stack_name}",
        outputs["ApiUrl"].rstrip("/"),
        sign_in,
        f"rag-ingest --stack {stack_name} login",
        live_url=outputs.get("WebSocketUrl") or None,
    )
