"""``rag-ingest preflight``'s decisions, on their inputs: the settings read from cdk.json (through
infra/config.py, so equal to what it reads), the Cognito prefix (equal to infra's derivation), each
check's ok / warn / missing and its fix, the assumed demand against quotas, and a run in which one
check cannot ask while the others still answer. The AWS side is tests/integration/test_preflight_aws.py."""

from __future__ import annotations

import ast
import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from rag_ingest.adapters.account_preflight import CallerIdentity, FoundationModel, ModelAvailability, ProbeDenied, Quota
from rag_ingest_client.cli import build_parser, main
from rag_ingest_client.cli.console import Console
from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.operator.preflight.checks import CHECKS, run_checks
from rag_ingest_client.operator.preflight.decisions import (
    decide_api_gateway_role,
    decide_bedrock_model,
    decide_bootstrap,
    decide_credentials,
    decide_domain,
    decide_rerank_model,
    decide_stack,
    decide_textract,
)
from rag_ingest_client.operator.preflight.quotas import (
    QuotaValue,
    bedrock_quota_matcher,
    decide_quota,
    embedding_demand,
    find_quota,
    textract_demand,
    textract_quota_matcher,
)
from rag_ingest_client.operator.preflight.render import render, report
from rag_ingest_client.operator.preflight.results import exit_code
from rag_ingest_client.operator.preflight.settings import (
    DEFAULT_QUALIFIER,
    PreflightSettings,
    read_settings,
    required_bootstrap_version,
    settings_from_context,
    user_pool_domain_prefix,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "common" / "python" / "rag_ingest"
ACCOUNT = "123456789012"
TITAN = "amazon.titan-embed-text-v2:0"
RPM_NAME = "On-demand InvokeModel requests per minute for Amazon Titan Text Embeddings V2"
TPM_NAME = "On-demand InvokeModel tokens per minute for Amazon Titan Text Embeddings V2"


# ================================================================= settings from cdk.json
def defaults(**changes: Any) -> PreflightSettings:
    """The settings of an empty cdk.json context (infra/config.py's defaults), with ``changes``."""
    return replace(settings_from_context({}), **changes)


def _overlap(settings: PreflightSettings) -> dict[str, Any]:
    return {
        "stack_name": settings.stack_name,
        "model_id": settings.model_id,
        "embed_max_concurrency": settings.embed_max_concurrency,
        "bulk_embed_max_concurrency": settings.bulk_embed_max_concurrency,
        "chunk_tokens": settings.chunk_tokens,
        "parse_max_concurrency": settings.parse_max_concurrency,
        "bulk_parse_max_concurrency": settings.bulk_parse_max_concurrency,
        "max_ocr_pages": settings.max_ocr_pages,
        "textract_tables": settings.textract_tables,
        "domain_prefix": settings.domain_prefix,
        "capacity": (
            settings.capacity_mode,
            settings.capacity_requests_per_minute,
            settings.capacity_tokens_per_minute,
        ),
    }


def _infra_overlap(raw: dict[str, Any]) -> dict[str, Any]:
    from infra.config import parse_config

    config = parse_config(raw)
    return {
        "stack_name": config.stack_name,
        "model_id": config.embedding.model_id,
        "embed_max_concurrency": config.embedding.max_concurrency,
        "bulk_embed_max_concurrency": config.lanes.bulk_embed_max_concurrency,
        "chunk_tokens": config.chunking.chunk_tokens,
        "parse_max_concurrency": config.parsing.max_concurrency,
        "bulk_parse_max_concurrency": config.lanes.bulk_parse_max_concurrency,
        "max_ocr_pages": config.limits.max_ocr_pages,
        "textract_tables": config.parsing.textract_tables,
        "domain_prefix": config.auth.domain_prefix,
        "capacity": (
            config.embedding.capacity.mode,
            config.embedding.capacity.requests_per_minute,
            config.embedding.capacity.tokens_per_minute,
        ),
    }


def test_defaults_are_infra_configs_defaults() -> None:
    assert _overlap(settings_from_context({})) == _infra_overlap({})
    assert (settings_from_context({}).qualifier, settings_from_context({}).cdk_out) == (
        DEFAULT_QUALIFIER,
        Path("cdk.out"),
    )


def test_the_repository_cdk_json_reads_as_infra_reads_it() -> None:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    assert _overlap(read_settings(ROOT / "cdk.json")) == _infra_overlap(context["rag-ingest"])


def test_settings_follow_cdk_json_and_the_stack_option(tmp_path: Path) -> None:
    raw = {
        "stackName": "Docs-Dev",
        "embedding": {"maxConcurrency": 7},
        "lanes": {"bulkEmbedMaxConcurrency": 1, "bulkParseMaxConcurrency": 3},
        "limits": {"maxOcrPages": 0},
        "auth": {"domainPrefix": "docs-login"},
        "apiGatewayAccountRole": "existing",
    }
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps({"context": {"@aws-cdk/core:bootstrapQualifier": "team42", "rag-ingest": raw}}))
    settings = read_settings(path)
    assert (settings.stack_name, settings.qualifier, settings.embed_max_concurrency) == ("Docs-Dev", "team42", 7)
    assert (settings.bulk_embed_max_concurrency, settings.bulk_parse_max_concurrency) == (1, 3)
    assert (settings.max_ocr_pages, settings.domain_prefix, settings.api_gateway_account_role) == (
        0,
        "docs-login",
        "existing",
    )
    assert settings.cdk_out == tmp_path / "cdk.out"
    assert read_settings(path, stack_name="Other").stack_name == "Other"
    # `-c rag-ingest='{...}'` gives a JSON string; the default qualifier when none is set.
    from_string = settings_from_context({"rag-ingest": json.dumps({"stackName": "S"})})
    assert (from_string.stack_name, from_string.qualifier) == ("S", DEFAULT_QUALIFIER)


def test_the_api_gateway_role_mode() -> None:
    assert settings_from_context({}).api_gateway_account_role == "create"
    assert settings_from_context({"rag-ingest": {"apiGatewayAccountRole": "existing"}}).api_gateway_account_role == (
        "existing"
    )
    with pytest.raises(CliError, match="apiGatewayAccountRole: Input should be 'create' or 'existing'"):
        settings_from_context({"rag-ingest": {"apiGatewayAccountRole": "maybe"}})


@pytest.mark.parametrize(
    ("context", "message"),
    [
        # As infra/config.py reads them ("4" would be the integer 4 there, as in a deploy).
        (
            {"rag-ingest": {"embedding": {"maxConcurrency": "four"}}},
            "embedding.maxConcurrency: Input should be a valid integer",
        ),
        ({"rag-ingest": {"lanes": []}}, "lanes: Input should be a valid dictionary"),
        ({"rag-ingest": {"auth": {"domainPrefix": 5}}}, "auth.domainPrefix: Input should be a valid string"),
        ({"rag-ingest": "{not json"}, "is not valid JSON"),
        ({"rag-ingest": [1]}, "must be an object"),
        (
            {"rag-ingest": {"embedding": {"maxConcurrency": 0}, "auth": {"domainPrefix": "aws-x"}}},
            "maxConcurrency: .*; auth",
        ),
    ],
)
def test_bad_cdk_json_values_are_named(context: dict[str, Any], message: str) -> None:
    with pytest.raises(CliError, match=message):
        settings_from_context(context)


def test_a_missing_cdk_json_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", "--cdk-json", str(tmp_path / "nope.json")]) == 1
    assert "nope.json not found: run from the repository root or pass --cdk-json PATH" in capsys.readouterr().err


def test_the_parser_takes_preflight_with_the_target_options() -> None:
    args = build_parser().parse_args(["preflight", "--region", "eu-west-1", "--stack", "X", "--json"])
    assert (args.command, args.region, args.stack, args.json, args.cdk_json) == (
        "preflight",
        "eu-west-1",
        "X",
        True,
        Path("cdk.json"),
    )


# ================================================================= the Cognito prefix
@pytest.mark.parametrize("stack_name", ["RagIngest", "Rag-Ingest-Dev", "AwsCognitoAmazon", "AWS", "A" * 60, "x--y-"])
def test_the_domain_prefix_is_infras(stack_name: str) -> None:
    from infra.config import parse_config
    from infra.constructs.api import user_pool_domain_base

    expected = f"{user_pool_domain_base(parse_config({'stackName': stack_name}))}-{ACCOUNT}"
    assert user_pool_domain_prefix(defaults(stack_name=stack_name), ACCOUNT) == expected


def test_an_explicit_domain_prefix_is_used_as_is() -> None:
    settings = defaults(domain_prefix="docs-login")
    assert user_pool_domain_prefix(settings, ACCOUNT) == "docs-login"


# ================================================================= credentials and bootstrap
def test_credentials() -> None:
    good = decide_credentials(ACCOUNT, "arn:aws:iam::123456789012:user/ana", "eu-west-1")
    assert good.status == "ok" and ACCOUNT in good.finding and "eu-west-1" in good.finding
    none = decide_credentials(None, None, "eu-west-1", "NoCredentialsError: Unable to locate credentials")
    assert none.status == "missing" and "aws configure" in (none.fix or "") and "AWS_PROFILE" in (none.fix or "")
    no_region = decide_credentials(ACCOUNT, "arn", None)
    assert no_region.status == "missing" and "--region" in (no_region.fix or "")
    assert decide_credentials(None, None, None).fix == no_region.fix


def test_the_required_bootstrap_version(tmp_path: Path) -> None:
    assert required_bootstrap_version(tmp_path / "cdk.out") == (6, "aws-cdk-lib's DefaultStackSynthesizer minimum")
    (tmp_path / "cdk.out").mkdir()
    manifest = {
        "artifacts": {
            "RagIngest.assets": {"type": "cdk:asset-manifest", "properties": {"requiresBootstrapStackVersion": 6}},
            "RagIngest": {
                "type": "aws:cloudformation:stack",
                "properties": {"requiresBootstrapStackVersion": 7, "lookupRole": {"requiresBootstrapStackVersion": 8}},
            },
            "Tree": {"type": "cdk:tree"},
        }
    }
    (tmp_path / "cdk.out" / "manifest.json").write_text(json.dumps(manifest))
    assert required_bootstrap_version(tmp_path / "cdk.out") == (7, str(tmp_path / "cdk.out" / "manifest.json"))


@pytest.mark.parametrize(
    ("value", "status"), [(None, "missing"), ("5", "missing"), ("six", "missing"), ("6", "ok"), ("28", "ok")]
)
def test_bootstrap(value: str | None, status: str) -> None:
    result = decide_bootstrap(
        value, required=6, source="src", account=ACCOUNT, region="eu-west-1", qualifier=DEFAULT_QUALIFIER
    )
    assert result.status == status
    if status == "missing":
        assert result.fix == f"npx cdk bootstrap aws://{ACCOUNT}/eu-west-1"


def test_bootstrap_with_a_custom_qualifier_says_so() -> None:
    result = decide_bootstrap(None, required=6, source="src", account=ACCOUNT, region="eu-west-1", qualifier="team42")
    assert "/cdk-bootstrap/team42/version" in result.finding
    assert result.fix == f"npx cdk bootstrap aws://{ACCOUNT}/eu-west-1 --qualifier team42"


# ================================================================= Bedrock and Textract
AVAILABLE = ("AVAILABLE", "AVAILABLE", "AUTHORIZED", "AVAILABLE")


@pytest.mark.parametrize(
    ("availability", "status", "words"),
    [
        (AVAILABLE, "ok", "available and authorized"),
        (("NOT_AVAILABLE", "AVAILABLE", "AUTHORIZED", "AVAILABLE"), "missing", "not available in"),
        (("AVAILABLE", "NOT_AVAILABLE", "AUTHORIZED", "AVAILABLE"), "missing", "no access"),
        (("AVAILABLE", "AVAILABLE", "NOT_AUTHORIZED", "AVAILABLE"), "missing", "not authorized"),
        (("AVAILABLE", "AVAILABLE", "AUTHORIZED", "PENDING"), "warn", "agreement PENDING"),
        (None, "warn", "only an InvokeModel proves it"),
    ],
)
def test_bedrock_model(availability: tuple[str, str, str, str] | None, status: str, words: str) -> None:
    result = decide_bedrock_model(TITAN, "eu-west-1", model_name="Titan Text Embeddings V2", availability=availability)
    assert result.status == status and words in result.finding
    assert (result.fix is None) == (status == "ok")


def test_a_model_not_offered_in_the_region_is_missing() -> None:
    result = decide_bedrock_model(TITAN, "ap-east-2", model_name=None)
    assert result.status == "missing" and result.finding == f"{TITAN} is not offered in ap-east-2"


def test_a_legacy_model_warns() -> None:
    result = decide_bedrock_model(TITAN, "eu-west-1", model_name="T", lifecycle="LEGACY", availability=AVAILABLE)
    assert result.status == "warn" and "LEGACY" in result.finding


def test_textract() -> None:
    offered = ["eu-central-1", "eu-west-1", "us-east-1"]
    assert decide_textract("eu-west-1", offered, max_ocr_pages=50).status == "ok"
    absent = decide_textract("eu-north-1", offered, max_ocr_pages=50)
    assert absent.status == "warn" and "failed pages" in absent.finding
    assert "(eu-central-1, eu-west-1)" in (absent.fix or "")  # the same geography first
    assert "(eu-central-1, eu-west-1, us-east-1)" in (decide_textract("me-south-1", offered, max_ocr_pages=5).fix or "")
    assert decide_textract("eu-north-1", offered, max_ocr_pages=0).status == "ok"


# ================================================================= quotas
def test_the_demand_is_what_the_shared_limiter_books() -> None:
    requests, tokens = embedding_demand(defaults())
    assert (requests.rate, tokens.rate) == (2000, 300_000)
    assert "limiter books" in requests.how
    settings = settings_from_context(
        {"rag-ingest": {"embedding": {"capacity": {"requestsPerMinute": None, "tokensPerMinute": 50_000}}}}
    )
    requests, tokens = embedding_demand(settings)
    assert (requests.rate, tokens.rate) == (0, 50_000) and "not limited" in requests.how


def test_the_assumed_demand_follows_the_configuration() -> None:
    requests, tokens = embedding_demand(defaults(capacity_mode="off"))
    # Without the limiter: (4 + 2) tasks x 4 calls in flight x 300 calls/min (200 ms each)
    assert requests.rate == 7200 and tokens.rate == 7200 * 300
    assert "embedding.maxConcurrency 4" in requests.how and "200 ms" in requests.how
    halved, _ = embedding_demand(
        replace(defaults(capacity_mode="off"), embed_max_concurrency=1, bulk_embed_max_concurrency=1)
    )
    assert halved.rate == 2400
    assert textract_demand(defaults()).rate == 15  # (10 + 5) Parse tasks, one page a second each


def test_quotas_are_found_by_name_not_code() -> None:
    quotas = [
        QuotaValue(
            "L-1", "Cross-Region InvokeModel requests per minute for Amazon Titan Text Embeddings V2", 4000, True
        ),
        QuotaValue("L-2", "On-demand InvokeModel requests per minute for Amazon Titan Text Embeddings", 10, True),
        QuotaValue("L-3", RPM_NAME, 2000, True),
        QuotaValue("L-4", TPM_NAME, 300000, True),
    ]
    assert find_quota(quotas, bedrock_quota_matcher(TITAN, "requests")) == quotas[2]
    assert find_quota(quotas, bedrock_quota_matcher(TITAN, "tokens")) == quotas[3]
    assert find_quota(quotas[:2], bedrock_quota_matcher(TITAN, "requests")) is None
    detect, analyze = textract_quota_matcher("DetectDocumentText"), textract_quota_matcher("AnalyzeDocument")
    assert detect("detectdocumenttext throttle limit in transactions per second")
    assert not detect("startdocumenttextdetection throttle limit in transactions per second")
    assert not detect("analyzedocument throttle limit in transactions per second")
    assert analyze("analyzedocument throttle limit in transactions per second")
    assert not analyze("startdocumentanalysis throttle limit in transactions per second")
    assert not analyze("detectdocumenttext throttle limit in transactions per second")


def _quota(value: float, *, rate: float = 7200, binding: bool = True) -> Any:
    requests, _ = embedding_demand(defaults())
    return decide_quota(
        "quota-embed-rpm",
        service_code="bedrock",
        described=RPM_NAME,
        quota=QuotaValue("L-ABC", RPM_NAME, value, True),
        demand=replace(requests, rate=rate),
        region="eu-west-1",
        binding=binding,
        note="not binding",
    )


def test_a_quota_below_the_assumed_peak_warns_with_the_increase_command() -> None:
    low = _quota(2000)
    assert low.status == "warn" and "2,000 requests/min < the assumed peak 7,200" in low.finding
    assert (low.fix or "").startswith(
        "aws service-quotas request-service-quota-increase --service-code bedrock --quota-code L-ABC "
        "--desired-value 7200 --region eu-west-1"
    )
    assert _quota(10_000).status == "ok"
    zero = _quota(0)
    assert zero.status == "warn" and "is 0" in zero.finding
    not_binding = _quota(2000, binding=False)
    assert not_binding.status == "ok" and "not binding" in not_binding.finding


def test_a_quota_that_cannot_be_found_warns() -> None:
    requests, _ = embedding_demand(defaults())
    result = decide_quota(
        "quota-embed-rpm", service_code="bedrock", described=RPM_NAME, quota=None, demand=requests, region="r"
    )
    assert result.status == "warn" and result.finding.startswith("could not read quota")


# ================================================================= API Gateway, Cognito, the stack
def test_api_gateway_account_role() -> None:
    role = "arn:aws:iam::123456789012:role/apigw-logs"
    assert decide_api_gateway_role(None, "create").status == "ok"
    overwrite = decide_api_gateway_role(role, "create")
    assert overwrite.status == "warn" and "replace" in overwrite.finding and "'existing'" in (overwrite.fix or "")
    assert decide_api_gateway_role(role, "existing").status == "ok"
    lacking = decide_api_gateway_role(None, "existing")
    assert lacking.status == "missing" and "CloudWatch log role ARN" in (lacking.fix or "")


def test_cognito_domain() -> None:
    def decide(**kwargs: Any) -> Any:
        return decide_domain("rag-1", "eu-west-1", **kwargs)

    assert decide(owner_pool=None, owner_in_account=False, stack_exists=False).status == "ok"
    assert decide(owner_pool="eu-west-1_A", owner_in_account=True, stack_exists=True).status == "ok"
    leftover = decide(owner_pool="eu-west-1_A", owner_in_account=True, stack_exists=False)
    assert leftover.status == "missing"
    assert "delete-user-pool-domain --domain rag-1 --user-pool-id eu-west-1_A" in (leftover.fix or "")
    foreign = decide(owner_pool="eu-west-1_B", owner_in_account=False, stack_exists=True)
    assert foreign.status == "missing" and "another account" in foreign.finding
    assert "auth.domainPrefix" in (foreign.fix or "")


@pytest.mark.parametrize(
    ("status", "expected", "fix"),
    [
        (None, "ok", None),
        ("CREATE_COMPLETE", "ok", None),
        ("UPDATE_COMPLETE", "ok", None),
        ("UPDATE_ROLLBACK_COMPLETE", "ok", None),
        ("ROLLBACK_COMPLETE", "missing", "aws cloudformation delete-stack --stack-name S --region r"),
        ("CREATE_IN_PROGRESS", "missing", "wait"),
        ("UPDATE_ROLLBACK_IN_PROGRESS", "missing", "wait"),
        ("UPDATE_ROLLBACK_FAILED", "missing", "continue-update-rollback"),
        ("CREATE_FAILED", "missing", "describe-stack-events"),
        ("DELETE_FAILED", "missing", "delete-stack"),
    ],
)
def test_stack_states(status: str | None, expected: str, fix: str | None) -> None:
    result = decide_stack(status, "S", "r")
    assert result.status == expected
    assert (result.fix is None) if fix is None else (fix in (result.fix or ""))


def test_a_new_or_complete_stack_says_what_deploy_does() -> None:
    assert decide_stack(None, "S", "r").finding == "S does not exist in r: it will be created"
    assert decide_stack("UPDATE_COMPLETE", "S", "r").finding.endswith("it will be updated")


# ================================================================= a whole run on a fake account
@dataclass
class FakeProbe:
    """An account with everything in place; ``fail`` makes a method raise."""

    region: str | None = "us-east-1"
    fail: dict[str, Exception] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def _maybe_fail(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]

    def caller_identity(self) -> CallerIdentity:
        self._maybe_fail("caller_identity")
        return CallerIdentity(ACCOUNT, f"arn:aws:iam::{ACCOUNT}:user/ana")

    def bootstrap_version(self, qualifier: str) -> str | None:
        self._maybe_fail("bootstrap_version")
        return "28"

    def foundation_model(self, model_id: str) -> FoundationModel | None:
        self._maybe_fail("foundation_model")
        return FoundationModel(model_id, "Titan Text Embeddings V2", "ACTIVE")

    def has_model_availability_api(self) -> bool:
        return True

    def model_availability(self, model_id: str) -> ModelAvailability:
        self._maybe_fail("model_availability")
        return ModelAvailability(*AVAILABLE)

    def quotas(self, service_code: str) -> list[Quota]:
        self._maybe_fail(f"quotas:{service_code}")
        if service_code == "bedrock":
            return [Quota("bedrock", "L-R", RPM_NAME, 10_000, True), Quota("bedrock", "L-T", TPM_NAME, 5e6, True)]
        return [Quota("textract", "L-D", "DetectDocumentText throttle limit in transactions per second", 25, False)]

    def api_gateway_cloudwatch_role(self) -> str | None:
        self._maybe_fail("api_gateway_cloudwatch_role")
        return None

    def user_pool_domain_owner(self, prefix: str) -> str | None:
        self._maybe_fail("user_pool_domain_owner")
        return None

    def user_pool_exists(self, user_pool_id: str) -> bool:
        return False

    def stack_status(self, stack_name: str) -> str | None:
        self._maybe_fail("stack_status")
        return None

    def offered_regions(self, service: str) -> list[str]:
        return ["us-east-1", "eu-west-1"]


def test_a_ready_account_passes_every_check() -> None:
    # us-east-1 offers Cohere's reranker, not Amazon's (the default: see the rerank-model tests).
    results = run_checks(FakeProbe(), defaults(rerank_model_id="cohere.rerank-v3-5:0"))
    assert [r.name for r in results] == ["credentials", *(name for name, _ in CHECKS)]
    assert {r.status for r in results} == {"ok"}, [render(r) for r in results if r.status != "ok"]
    assert exit_code(results) == 0


def test_the_textract_quota_is_the_one_of_the_operation_parse_calls() -> None:
    class TwoOperations(FakeProbe):
        def quotas(self, service_code: str) -> list[Quota]:
            if service_code != "textract":
                return super().quotas(service_code)
            return [
                Quota("textract", "L-D", "DetectDocumentText throttle limit in transactions per second", 25, True),
                Quota("textract", "L-S", "StartDocumentAnalysis throttle limit in transactions per second", 10, True),
                Quota("textract", "L-A", "AnalyzeDocument throttle limit in transactions per second", 5, True),
            ]

    detect = {r.name: r for r in run_checks(TwoOperations(), defaults())}["quota-textract-tps"]
    assert detect.status == "ok" and "DetectDocumentText call" in detect.finding
    tables = {r.name: r for r in run_checks(TwoOperations(), defaults(textract_tables=True))}
    analyze = tables["quota-textract-tps"]
    # 5 TPS against (10 + 5) Parse tasks calling AnalyzeDocument a page a second each.
    assert analyze.status == "warn" and analyze.finding.startswith("5 TPS < the assumed peak 15")
    assert "AnalyzeDocument call" in analyze.finding and "--quota-code L-A --desired-value 15" in (analyze.fix or "")
    assert settings_from_context({"rag-ingest": {"parsing": {"textractTables": True}}}).textract_tables
    with pytest.raises(CliError, match=r"parsing\.textractTables: Input should be a valid boolean"):
        settings_from_context({"rag-ingest": {"parsing": {"textractTables": "sometimes"}}})


def test_a_denied_or_broken_check_warns_and_the_others_still_run() -> None:
    probe = FakeProbe(
        fail={
            "bootstrap_version": ProbeDenied("ssm:GetParameter"),
            "quotas:bedrock": RuntimeError("socket closed\nmore"),
            "stack_status": ProbeDenied("cloudformation:DescribeStacks"),
        }
    )
    results = {r.name: r for r in run_checks(probe, defaults())}
    assert results["bootstrap"].status == "warn"
    assert results["bootstrap"].finding == "could not check: ssm:GetParameter denied"
    assert results["quota-embed-rpm"].finding == "could not check: RuntimeError: socket closed"
    assert results["stack"].finding == "could not check: cloudformation:DescribeStacks denied"
    assert results["bedrock-model"].status == results["cognito-domain"].status == "ok"
    assert exit_code(list(results.values())) == 0  # warnings only


def test_without_credentials_the_account_bound_checks_say_why() -> None:
    probe = FakeProbe(fail={"caller_identity": RuntimeError("Unable to locate credentials")})
    results = {r.name: r for r in run_checks(probe, defaults())}
    assert results["credentials"].status == "missing"
    assert results["bootstrap"].finding == "could not check: needs the account id (see credentials)"
    assert results["stack"].status == "ok"  # it needs no account id
    assert exit_code(list(results.values())) == 1


def test_without_a_region_nothing_is_asked() -> None:
    probe = FakeProbe(region=None)
    results = run_checks(probe, defaults())
    assert results[0].status == "missing"
    assert all(r.finding == "could not check: no region (see credentials)" for r in results[1:])
    assert probe.calls == ["caller_identity"]


def test_a_missing_bootstrap_fails_the_run() -> None:
    class Unbootstrapped(FakeProbe):
        def bootstrap_version(self, qualifier: str) -> str | None:
            return None

    results = run_checks(Unbootstrapped(), defaults())
    assert exit_code(results) == 1


def test_the_report_lines_and_json() -> None:
    results = run_checks(FakeProbe(), defaults(rerank_model_id="cohere.rerank-v3-5:0"))
    results[1] = decide_bootstrap(None, required=6, source="s", account=ACCOUNT, region="us-east-1", qualifier="q")
    out, err = io.StringIO(), io.StringIO()
    assert report(Console(out=out, err=err), results) == 1
    lines = out.getvalue().splitlines()
    assert len(lines) == len(results)
    assert lines[0].startswith("ok      credentials         account 123456789012")
    assert lines[1].startswith("missing bootstrap ") and lines[1].endswith(
        f"→ fix: npx cdk bootstrap aws://{ACCOUNT}/us-east-1 --qualifier q"
    )
    assert err.getvalue() == "preflight: 10 ok, 0 warn, 1 missing\n"
    out = io.StringIO()
    assert report(Console(out=out, err=io.StringIO(), as_json=True), results) == 1
    parsed = json.loads(out.getvalue())
    assert parsed[1] == {
        "status": "missing",
        "name": "bootstrap",
        "finding": results[1].finding,
        "fix": results[1].fix,
    }


# ================================================================= where the code lives
def test_the_layer_package_never_imports_infra() -> None:
    """rag_ingest ships in the Lambda layer: it may not import infra (CDK), in preflight or anywhere."""
    offending = []
    for source in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offending += [f"{source.relative_to(PACKAGE)}: {n}" for n in names if n.split(".")[0] == "infra"]
    assert offending == []


def test_boto3_stays_in_the_adapter() -> None:
    """The checks and decisions talk to no AWS API: the probe (rag_ingest.adapters.account_preflight) does."""
    for module in ("settings", "results", "decisions", "quotas", "checks", "render"):
        source = ROOT / "client" / "rag_ingest_client" / "operator" / "preflight" / f"{module}.py"
        tree = ast.parse(source.read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
        }
        assert not {name for name in imported if name.startswith(("boto3", "botocore", "rag_ingest.adapters"))}


def test_docs_cli_lists_every_command() -> None:
    parser = build_parser()
    choices = next(a for a in parser._actions if a.dest == "command").choices
    assert isinstance(choices, dict)
    commands = list(choices)
    text = (ROOT / "docs" / "cli.md").read_text()
    unlisted = sorted(name for name in commands if f"`{name}" not in text)
    assert unlisted == [], f"docs/cli.md does not list: {unlisted}"
    assert "preflight" in commands


def test_the_rerank_model_is_checked_against_the_documented_regions() -> None:
    assert decide_rerank_model("amazon.rerank-v1:0", "us-west-2", default_on=False).status == "ok"
    off = decide_rerank_model("amazon.rerank-v1:0", "us-east-1", default_on=False)
    assert off.status == "warn" and "not offered for Rerank in us-east-1" in off.finding
    assert off.fix == "set search.rerank.modelId to cohere.rerank-v3-5:0"
    on = decide_rerank_model("amazon.rerank-v1:0", "us-east-1", default_on=True)
    assert on.status == "missing" and "every search reranks" in on.finding
    answers = decide_rerank_model("amazon.rerank-v1:0", "us-east-1", default_on=False, answers_on=True)
    assert answers.status == "warn" and "every POST /answer would fail" in answers.finding
    nowhere = decide_rerank_model("cohere.rerank-v3-5:0", "eu-west-1", default_on=False)
    assert nowhere.status == "warn" and nowhere.fix is not None and "us-east-1" in nowhere.fix


def test_the_rerank_settings_come_from_cdk_json() -> None:
    context = {"rag-ingest": {"search": {"rerank": {"default": True, "modelId": "cohere.rerank-v3-5:0"}}}}
    settings = settings_from_context(context)
    assert (settings.rerank_default, settings.rerank_model_id) == (True, "cohere.rerank-v3-5:0")
    assert (defaults().rerank_default, defaults().rerank_model_id) == (False, "amazon.rerank-v1:0")
    with pytest.raises(CliError, match=r"search\.rerank\.default: Input should be a valid boolean"):
        settings_from_context({"rag-ingest": {"search": {"rerank": {"default": "maybe"}}}})
