"""Cognito user-pool administration for the smoke test: a test user with a tenant, signed in
without a browser (``ADMIN_USER_PASSWORD_AUTH``, with the operator's AWS credentials)."""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from rag_ingest.adapters.aws import BOTO_CONFIG
from rag_ingest.core.auth import TENANT_CLAIM


class UserPoolError(RuntimeError):
    """A Cognito call failed (its code and message are in the text)."""


def strong_password(length: int = 32) -> str:
    """Random, and meets any Cognito password policy: lower, upper, digit and symbol, 32 characters."""
    alphabet = string.ascii_letters + string.digits + "!#%+-.:=?@^_~"
    required = [secrets.choice(group) for group in (string.ascii_lowercase, string.ascii_uppercase, string.digits)]
    required.append(secrets.choice("!#%+-.:=?@^_~"))
    rest = [secrets.choice(alphabet) for _ in range(length - len(required))]
    characters = required + rest
    secrets.SystemRandom().shuffle(characters)
    return "".join(characters)


@dataclass
class UserPoolAdmin:
    user_pool_id: str
    client_id: str
    cognito: Any

    @classmethod
    def connect(cls, user_pool_id: str, client_id: str, region: str | None) -> UserPoolAdmin:
        return cls(user_pool_id, client_id, boto3.client("cognito-idp", region_name=region, config=BOTO_CONFIG))

    def ensure_user(self, username: str, email: str, tenant_id: str) -> bool:
        """Creates the user (no invitation e-mail) or sets its tenant; True when it was created."""
        attributes = [{"Name": TENANT_CLAIM, "Value": tenant_id}]
        try:
            self.cognito.admin_get_user(UserPoolId=self.user_pool_id, Username=username)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "UserNotFoundException":
                raise _failure("admin-get-user", exc) from None
        except BotoCoreError as exc:
            raise _failure("admin-get-user", exc) from None
        else:
            self._call("admin_update_user_attributes", Username=username, UserAttributes=attributes)
            return False
        self._call(
            "admin_create_user",
            Username=username,
            MessageAction="SUPPRESS",
            UserAttributes=[
                {"Name": "email", "Value": email},
                {"Name": "email_verified", "Value": "true"},
                *attributes,
            ],
        )
        return True

    def set_permanent_password(self, username: str, password: str) -> None:
        """A permanent password: the user is CONFIRMED, never stuck in FORCE_CHANGE_PASSWORD."""
        self._call("admin_set_user_password", Username=username, Password=password, Permanent=True)

    def id_token(self, username: str, password: str) -> str:
        answer = self._call(
            "admin_initiate_auth",
            ClientId=self.client_id,
            AuthFlow="ADMIN_USER_PASSWORD_AUTH",
            AuthParameters={"USERNAME": username, "PASSWORD": password},
        )
        result = answer.get("AuthenticationResult") or {}
        if not result.get("IdToken"):
            raise UserPoolError(f"admin-initiate-auth answered a challenge ({answer.get('ChallengeName')}), not tokens")
        return str(result["IdToken"])

    def delete_user(self, username: str) -> None:
        self._call("admin_delete_user", Username=username)

    def _call(self, operation: str, **parameters: Any) -> dict[str, Any]:
        try:
            return dict(getattr(self.cognito, operation)(UserPoolId=self.user_pool_id, **parameters))
        except (ClientError, BotoCoreError) as exc:
            raise _failure(operation.replace("_", "-"), exc) from None


def _failure(operation: str, exc: Exception) -> UserPoolError:
    return UserPoolError(f"cognito {operation}: {exc}")
