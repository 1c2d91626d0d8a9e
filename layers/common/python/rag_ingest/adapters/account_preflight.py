"""What ``rag-ingest preflight`` asks an AWS account before ``cdk deploy``: read-only calls, one
method per question, each answer plain data (the decisions are ``rag_ingest_client.operator.preflight``'s).

Errors: an access-denied answer becomes :class:`ProbeDenied` naming the IAM action, so the check
can say which permission it lacked; "not found" answers are ``None``; anything else propagates
and the check that asked turns it into a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from rag_ingest.adapters.aws import BOTO_CONFIG, error_code

# A preflight should answer in seconds: fewer retries and shorter timeouts than the pipeline's.
PREFLIGHT_CONFIG = BOTO_CONFIG.merge(Config(retries={"mode": "standard", "max_attempts": 2}, read_timeout=15))

_DENIED_CODES = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError", "NotAuthorizedException"}
)


class ProbeDenied(Exception):
    """The credentials may not call ``action`` (an IAM action name such as ``ssm:GetParameter``)."""

    def __init__(self, action: str, detail: str = "") -> None:
        super().__init__(f"{action} denied" + (f" ({detail})" if detail else ""))
        self.action = action


@dataclass(frozen=True)
class CallerIdentity:
    account: str
    arn: str


@dataclass(frozen=True)
class FoundationModel:
    model_id: str
    name: str
    lifecycle: str  # ACTIVE or LEGACY


@dataclass(frozen=True)
class ModelAvailability:
    """``bedrock:GetFoundationModelAvailability``'s four answers, as AWS spells them."""

    region: str  # AVAILABLE | NOT_AVAILABLE
    entitlement: str  # AVAILABLE | NOT_AVAILABLE
    authorization: str  # AUTHORIZED | NOT_AUTHORIZED
    agreement: str  # AVAILABLE | PENDING | NOT_AVAILABLE | ERROR ("" when absent)
    agreement_error: str = ""


@dataclass(frozen=True)
class Quota:
    service_code: str
    code: str
    name: str
    value: float
    applied: bool  # False: the AWS default (ListAWSDefaultServiceQuotas), the account's value unknown


def _denied(exc: ClientError, action: str) -> ProbeDenied | None:
    if error_code(exc) in _DENIED_CODES:
        return ProbeDenied(action, str(exc.response.get("Error", {}).get("Message", "")))
    return None


class AccountProbe:
    """Read-only questions to one account and region. ``clients`` overrides the client of a service
    (tests hand in botocore Stubbers' clients for the APIs moto lacks)."""

    def __init__(
        self, region: str | None = None, *, clients: Mapping[str, Any] | None = None, session: Any | None = None
    ) -> None:
        self._session = session if session is not None else boto3.Session(region_name=region)
        self._clients: dict[str, Any] = dict(clients or {})
        self._quotas: dict[str, list[Quota]] = {}

    @property
    def region(self) -> str | None:
        region = self._session.region_name
        return str(region) if region else None

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self._session.client(service, config=PREFLIGHT_CONFIG)
        return self._clients[service]

    def _call(self, service: str, operation: str, action: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._client(service), operation)(**kwargs)
        except ClientError as exc:
            denied = _denied(exc, action)
            if denied is not None:
                raise denied from exc
            raise

    # ------------------------------------------------------------ credentials
    def caller_identity(self) -> CallerIdentity:
        answer = self._call("sts", "get_caller_identity", "sts:GetCallerIdentity")
        return CallerIdentity(account=str(answer["Account"]), arn=str(answer["Arn"]))

    # ------------------------------------------------------------ CDK bootstrap
    def bootstrap_version(self, qualifier: str) -> str | None:
        """The value of ``/cdk-bootstrap/<qualifier>/version`` (None: not bootstrapped)."""
        try:
            answer = self._call("ssm", "get_parameter", "ssm:GetParameter", Name=f"/cdk-bootstrap/{qualifier}/version")
        except ClientError as exc:
            if error_code(exc) == "ParameterNotFound":
                return None
            raise
        return str(answer["Parameter"]["Value"])

    # ------------------------------------------------------------ Bedrock
    def foundation_model(self, model_id: str) -> FoundationModel | None:
        """The model as this region's Bedrock lists it (None: not offered here)."""
        try:
            answer = self._call(
                "bedrock", "get_foundation_model", "bedrock:GetFoundationModel", modelIdentifier=model_id
            )
        except ClientError as exc:
            if error_code(exc) in {"ResourceNotFoundException", "ValidationException"}:
                return None
            raise
        details = answer.get("modelDetails", {})
        return FoundationModel(
            model_id=str(details.get("modelId", model_id)),
            name=str(details.get("modelName", "")),
            lifecycle=str(details.get("modelLifecycle", {}).get("status", "")),
        )

    def has_model_availability_api(self) -> bool:
        return hasattr(self._client("bedrock"), "get_foundation_model_availability")

    def model_availability(self, model_id: str) -> ModelAvailability:
        answer = self._call(
            "bedrock",
            "get_foundation_model_availability",
            "bedrock:GetFoundationModelAvailability",
            modelId=model_id,
        )
        agreement = answer.get("agreementAvailability") or {}
        return ModelAvailability(
            region=str(answer.get("regionAvailability", "")),
            entitlement=str(answer.get("entitlementAvailability", "")),
            authorization=str(answer.get("authorizationStatus", "")),
            agreement=str(agreement.get("status", "")),
            agreement_error=str(agreement.get("errorMessage", "")),
        )

    # ------------------------------------------------------------ Service Quotas
    def quotas(self, service_code: str) -> list[Quota]:
        """The account's applied quotas of a service, plus AWS's defaults for the quotas that have no
        applied value (ListServiceQuotas leaves those out). Read once per service code."""
        if service_code not in self._quotas:
            applied = self._list_quotas("list_service_quotas", service_code, applied=True)
            known = {quota.code for quota in applied}
            defaults = [
                quota
                for quota in self._list_quotas("list_aws_default_service_quotas", service_code, applied=False)
                if quota.code not in known
            ]
            self._quotas[service_code] = applied + defaults
        return self._quotas[service_code]

    def _list_quotas(self, operation: str, service_code: str, *, applied: bool) -> list[Quota]:
        action = "servicequotas:" + ("ListServiceQuotas" if applied else "ListAWSDefaultServiceQuotas")
        found: list[Quota] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"ServiceCode": service_code, "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            try:
                page = self._call("service-quotas", operation, action, **kwargs)
            except ClientError as exc:
                if error_code(exc) == "NoSuchResourceException":
                    return found
                raise
            found.extend(
                Quota(
                    service_code=service_code,
                    code=str(item.get("QuotaCode", "")),
                    name=str(item.get("QuotaName", "")),
                    value=float(item.get("Value", 0.0)),
                    applied=applied,
                )
                for item in page.get("Quotas", [])
            )
            token = page.get("NextToken")
            if not token:
                return found

    # ------------------------------------------------------------ API Gateway
    def api_gateway_cloudwatch_role(self) -> str | None:
        answer = self._call("apigateway", "get_account", "apigateway:GET")
        role = answer.get("cloudwatchRoleArn")
        return str(role) if role else None

    # ------------------------------------------------------------ Cognito
    def user_pool_domain_owner(self, prefix: str) -> str | None:
        """The user pool that holds the prefix domain ``prefix`` in this region (None: it is free)."""
        try:
            answer = self._call(
                "cognito-idp", "describe_user_pool_domain", "cognito-idp:DescribeUserPoolDomain", Domain=prefix
            )
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        pool = (answer.get("DomainDescription") or {}).get("UserPoolId")
        return str(pool) if pool else None

    def user_pool_exists(self, user_pool_id: str) -> bool:
        """Whether the user pool is in this account (a domain's owner may be another account's pool)."""
        try:
            self._call("cognito-idp", "describe_user_pool", "cognito-idp:DescribeUserPool", UserPoolId=user_pool_id)
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return False
            raise
        return True

    # ------------------------------------------------------------ CloudFormation
    def stack_status(self, stack_name: str) -> str | None:
        """The stack's status (None: no such stack, or only a deleted one)."""
        try:
            answer = self._call(
                "cloudformation", "describe_stacks", "cloudformation:DescribeStacks", StackName=stack_name
            )
        except ClientError as exc:
            if error_code(exc) == "ValidationError" and "does not exist" in str(exc):
                return None
            raise
        stacks = answer.get("Stacks", [])
        return str(stacks[0]["StackStatus"]) if stacks else None

    # ------------------------------------------------------------ offline: botocore's endpoint data
    def offered_regions(self, service: str) -> list[str]:
        """The regions botocore's endpoint data lists for ``service`` (offline; as current as botocore)."""
        return sorted(self._session.get_available_regions(service))
