"""The embedding server's Bedrock emulation: the quota accounting (sliding minute, per model,
requests and tokens), the latency distribution (sampled quantiles against the configuration), the
deterministic vectors, the profiles and their validation, and all of it through a real boto3
bedrock-runtime client on a loopback port. Clocks and sleeps are injected: nothing here waits."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from rag_ingest.core.errors import TransientError
from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import LOCAL_MODEL_ID
from rag_ingest.embeddings.bedrock import TITAN_V2_MODEL_ID, BedrockTitanEmbedder

from local.embedding_server.__main__ import _parser, main, settings_from
from local.embedding_server.deterministic import deterministic_models, deterministic_vector
from local.embedding_server.latency import (
    ASSUMED_BEDROCK_LATENCY,
    LatencyDistribution,
    LatencyKind,
    LatencySampler,
)
from local.embedding_server.quota import (
    THROTTLE_MESSAGES,
    ModelQuota,
    QuotaBook,
    QuotaKind,
    SlidingWindow,
)
from local.embedding_server.server import EmbeddingServer
from local.embedding_server.settings import (
    NO_EMULATION,
    PROFILES,
    BedrockEmulation,
    EmbeddingServerSettings,
    Vectors,
)

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# -- quota accounting --------------------------------------------------------------------------------
def test_a_sliding_window_holds_at_most_its_limit_in_any_minute() -> None:
    window = SlidingWindow(3)
    for second in (0.0, 10.0, 20.0):
        assert window.fits(1, second)
        window.record(1, second)
    assert not window.fits(1, 30.0)
    assert window.used(59.999) == 3
    # The first entry leaves exactly 60 s after it was admitted, the others later.
    assert window.used(60.0) == 2 and window.fits(1, 60.0)
    assert window.seconds_until_fits(2, 60.0) == pytest.approx(10.0)  # when the 10 s entry leaves
    assert window.seconds_until_fits(4, 60.0) is None  # more than the whole quota: never


def test_the_window_slides_where_a_fixed_minute_would_let_a_burst_through() -> None:
    # 60 requests in the second half of one minute, then the next minute starts: a fixed window
    # would allow 60 more at once (120 within 31 s); the sliding one allows none until they age out.
    clock = FakeClock(start=30.0)
    quota = ModelQuota(60, None, clock=clock)
    assert all(quota.admit(1) is None for _ in range(60))
    clock.now = 61.0
    refusal = quota.admit(1)
    assert refusal is not None and refusal.kind is QuotaKind.REQUESTS_PER_MINUTE
    clock.now = 90.0
    assert quota.admit(1) is None
    assert quota.usage() == {"requests_per_minute": {"limit": 60, "used": 1}}


def test_tokens_per_minute_counts_each_requests_tokens_and_a_refused_request_spends_nothing() -> None:
    clock = FakeClock()
    quota = ModelQuota(10, 100, clock=clock)
    assert quota.admit(60) is None
    refusal = quota.admit(41)
    assert refusal is not None
    assert (refusal.kind, refusal.message) == (
        QuotaKind.TOKENS_PER_MINUTE,
        "Too many tokens, please wait before trying again.",
    )
    # The refused request took neither a request nor its tokens: 40 more tokens still fit.
    assert quota.usage() == {
        "requests_per_minute": {"limit": 10, "used": 1},
        "tokens_per_minute": {"limit": 100, "used": 60},
    }
    assert quota.admit(40) is None
    assert quota.admit(1) is not None
    clock.advance(60)
    assert quota.admit(100) is None
    # A request of more tokens than the whole quota never fits, even in an idle minute.
    assert ModelQuota(10, 100, clock=clock).admit(101) is not None


def test_requests_are_refused_before_tokens_and_a_zero_quota_refuses_everything() -> None:
    quota = ModelQuota(1, 5, clock=FakeClock())
    assert quota.admit(5) is None
    refusal = quota.admit(5)  # over both: the requests quota is named
    assert refusal is not None and refusal.message == THROTTLE_MESSAGES[QuotaKind.REQUESTS_PER_MINUTE]
    zero = ModelQuota(0, None, clock=FakeClock())
    assert zero.admit(1) is not None
    unlimited = ModelQuota(None, None, clock=FakeClock())
    assert all(unlimited.admit(10_000) is None for _ in range(1_000))
    assert unlimited.usage() == {}


def test_the_quota_book_keeps_one_quota_per_model_and_counts_throttles_by_cause() -> None:
    book = QuotaBook(2, 10, clock=FakeClock())
    assert book.enforced
    assert book.admit("model-a", 4) is None
    assert book.admit("model-a", 4) is None
    assert book.admit("model-a", 1) is not None  # the third request in the minute
    assert book.admit("model-b", 10) is None  # its own quota
    assert book.admit("model-b", 1) is not None  # its tokens are spent
    stats = book.stats()
    assert (stats["admitted"], stats["admitted_tokens"]) == (3, 18)
    assert stats["throttled"] == {"requests_per_minute": 1, "tokens_per_minute": 1}
    assert stats["last_minute"] == {
        "model-a": {"requests_per_minute": {"limit": 2, "used": 2}, "tokens_per_minute": {"limit": 10, "used": 8}},
        "model-b": {"requests_per_minute": {"limit": 2, "used": 1}, "tokens_per_minute": {"limit": 10, "used": 10}},
    }
    assert not QuotaBook(None, None).enforced


# -- latency distribution ----------------------------------------------------------------------------
def empirical_quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.parametrize(
    "spec", ["lognormal:median=60,p95=150", "lognormal:median=25,p99=400", "lognormal:median=80,p95=80.5"]
)
def test_sampled_latencies_match_the_configured_quantiles(spec: str) -> None:
    distribution = LatencyDistribution.parse(spec)
    assert distribution.quantile_ms(0.5) == pytest.approx(distribution.median_ms)
    assert distribution.quantile_ms(distribution.upper_q) == pytest.approx(distribution.upper_ms)
    rng = random.Random(7)
    samples = [distribution.sample_ms(rng) for _ in range(20_000)]
    assert min(samples) > 0
    # 20,000 draws: the empirical p50/p95 sit within ~1 % (one standard error) of the configured
    # ones, p99 within ~2 %; the tolerances are several standard errors wide.
    for q, tolerance in ((0.5, 0.03), (0.95, 0.05), (0.99, 0.08)):
        assert empirical_quantile(samples, q) == pytest.approx(distribution.quantile_ms(q), rel=tolerance)


def test_the_sampler_is_reproducible_for_a_seed_and_counts_its_draws() -> None:
    first = LatencySampler(ASSUMED_BEDROCK_LATENCY, seed=3)
    second = LatencySampler(ASSUMED_BEDROCK_LATENCY, seed=3)
    other = LatencySampler(ASSUMED_BEDROCK_LATENCY, seed=4)
    draws = [first.next_seconds() for _ in range(50)]
    assert draws == [second.next_seconds() for _ in range(50)]
    assert draws != [other.next_seconds() for _ in range(50)]
    stats = first.stats()
    assert stats["samples"] == 50
    assert stats["mean_ms"] == pytest.approx(sum(draws) * 1000 / 50, abs=1e-3)
    assert stats["distribution"] == "lognormal:median=60,p95=150"


def test_fixed_and_none_latencies() -> None:
    rng = random.Random(0)
    fixed = LatencyDistribution.parse("fixed:45")
    assert (fixed.kind, [fixed.sample_ms(rng) for _ in range(3)]) == (LatencyKind.FIXED, [45.0, 45.0, 45.0])
    assert fixed.quantile_ms(0.99) == 45.0
    none = LatencyDistribution.parse("none")
    assert none == LatencyDistribution.parse("") == LatencyDistribution()
    assert none.sample_ms(rng) == 0.0 and none.quantile_ms(0.5) == 0.0
    for distribution in (fixed, none, ASSUMED_BEDROCK_LATENCY, LatencyDistribution.parse("lognormal:median=5,p99=9")):
        assert LatencyDistribution.parse(distribution.describe()) == distribution


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("gaussian:10", "expected none, fixed"),
        ("fixed:-1", "must not be negative"),
        ("fixed:soon", "could not convert"),
        ("lognormal:median=100", "median= and one of p95= or p99="),
        ("lognormal:median=100,p95=50", "must not be below its median"),
        ("lognormal:median=0,p95=50", "median above 0"),
        ("lognormal:median=10,p95=20,p99=30", "one of p95= or p99="),
        ("lognormal:median=10,p90=20", "one of p95= or p99="),
        ("lognormal:median", "not name=value"),
        ("fixed:inf", "finite"),
    ],
)
def test_a_malformed_latency_is_refused_with_the_spec_quoted(spec: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint) as refused:
        LatencyDistribution.parse(spec)
    assert repr(spec) in str(refused.value)


# -- deterministic vectors ---------------------------------------------------------------------------
def test_deterministic_vectors_come_from_the_text_alone() -> None:
    vector = deterministic_vector("a chunk of a page", 1024)
    assert len(vector) == 1024
    assert math.fsum(value * value for value in vector) == pytest.approx(1.0)
    assert deterministic_vector("a chunk of a page", 1024) == vector
    other = deterministic_vector("another chunk", 1024)
    assert abs(sum(a * b for a, b in zip(vector, other, strict=True))) < 0.2  # unrelated texts
    assert deterministic_vector("a chunk of a page", 256) != vector[:256]
    raw = deterministic_vector("a chunk of a page", 1024, normalize=False)
    norm = math.sqrt(math.fsum(value * value for value in raw))
    assert norm > 2 and [value / norm for value in raw] == pytest.approx(vector)


def test_deterministic_vectors_are_the_same_in_another_process() -> None:
    # Benchmarks compare runs of separate processes: no per-process hash seed may enter the vector.
    code = (
        "import json; from local.embedding_server.deterministic import deterministic_vector; "
        "print(json.dumps(deterministic_vector('the same text', 8)))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        env={"PYTHONHASHSEED": "123"},
    ).stdout
    assert json.loads(output) == deterministic_vector("the same text", 8)


# -- profiles and their validation -------------------------------------------------------------------
def test_no_profile_keeps_the_server_as_it_was() -> None:
    assert EmbeddingServerSettings.from_env({}).emulation == NO_EMULATION == PROFILES["none"]
    assert (NO_EMULATION.requests_per_minute, NO_EMULATION.tokens_per_minute) == (None, None)
    assert NO_EMULATION.latency.kind is LatencyKind.NONE and NO_EMULATION.vectors is Vectors.MODEL


def test_the_bedrock_profiles_and_their_overrides() -> None:
    bedrock = EmbeddingServerSettings.from_env({"LOCAL_EMBEDDING_PROFILE": "bedrock"}).emulation
    assert (bedrock.requests_per_minute, bedrock.tokens_per_minute) == (2_000, 300_000)
    assert bedrock.latency == ASSUMED_BEDROCK_LATENCY and bedrock.vectors is Vectors.MODEL
    low = EmbeddingServerSettings.from_env({"LOCAL_EMBEDDING_PROFILE": "Bedrock-Low-Quota"}).emulation
    assert (low.profile, low.requests_per_minute, low.tokens_per_minute) == ("bedrock-low-quota", 60, 300_000)
    tuned = EmbeddingServerSettings.from_env(
        {
            "LOCAL_EMBEDDING_PROFILE": "bedrock",
            "LOCAL_EMBEDDING_RPM": "off",
            "LOCAL_EMBEDDING_TPM": "1000",
            "LOCAL_EMBEDDING_LATENCY": "fixed:5",
            "LOCAL_EMBEDDING_SEED": "9",
            "LOCAL_EMBEDDING_VECTORS": "deterministic",
        }
    ).emulation
    assert tuned == BedrockEmulation(
        "bedrock",
        requests_per_minute=None,
        tokens_per_minute=1000,
        latency=LatencyDistribution(LatencyKind.FIXED, median_ms=5),
        seed=9,
        vectors=Vectors.DETERMINISTIC,
    )
    # A quota without a profile is allowed: only what is set is emulated.
    assert EmbeddingServerSettings.from_env({"LOCAL_EMBEDDING_RPM": "0"}).emulation == replace(
        NO_EMULATION, requests_per_minute=0
    )


@pytest.mark.parametrize(
    ("environ", "complaint"),
    [
        ({"LOCAL_EMBEDDING_PROFILE": "aws"}, "LOCAL_EMBEDDING_PROFILE must be one of none, bedrock, bedrock-low-quota"),
        ({"LOCAL_EMBEDDING_RPM": "many"}, "LOCAL_EMBEDDING_RPM must be a whole number per minute or off"),
        ({"LOCAL_EMBEDDING_TPM": "-5"}, "LOCAL_EMBEDDING_TPM must not be negative"),
        ({"LOCAL_EMBEDDING_LATENCY": "fixed"}, "LOCAL_EMBEDDING_LATENCY: latency 'fixed'"),
        ({"LOCAL_EMBEDDING_SEED": "-1"}, "LOCAL_EMBEDDING_SEED must be at least 0"),
        ({"LOCAL_EMBEDDING_VECTORS": "random"}, "LOCAL_EMBEDDING_VECTORS must be one of model, deterministic"),
    ],
)
def test_malformed_emulation_settings_name_their_variable(environ: dict[str, str], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        EmbeddingServerSettings.from_env(environ)


@pytest.mark.timeout(30)  # main() serves forever if the refusal ever regressed
def test_the_command_line_overrides_the_environment_and_refuses_bad_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = _parser().parse_args(["--profile", "bedrock", "--requests-per-minute", "60", "--vectors", "deterministic"])
    emulation = settings_from(args, {"LOCAL_EMBEDDING_RPM": "500", "LOCAL_EMBEDDING_TPM": "700"}).emulation
    assert (emulation.profile, emulation.requests_per_minute, emulation.tokens_per_minute) == ("bedrock", 60, 700)
    assert emulation.vectors is Vectors.DETERMINISTIC
    with pytest.raises(SystemExit) as exited:
        main(["--latency", "lognormal:median=10"])
    assert exited.value.code == 2
    assert "--latency: latency 'lognormal:median=10'" in capsys.readouterr().err
    # A bad variable is named as the variable.
    with pytest.raises(ValueError, match="LOCAL_EMBEDDING_TPM must not be negative"):
        settings_from(args, {"LOCAL_EMBEDDING_TPM": "-1"})


# -- through the server and a real boto3 client -------------------------------------------------------
ServerFactory = Callable[..., EmbeddingServer]


@pytest.fixture
def make_server() -> Iterator[ServerFactory]:
    servers: list[EmbeddingServer] = []

    def make(
        clock: FakeClock | None = None, sleep: Callable[[float], None] | None = None, **emulation: Any
    ) -> EmbeddingServer:
        settings = EmbeddingServerSettings(
            emulation=BedrockEmulation(vectors=Vectors.DETERMINISTIC, **emulation),
        )
        first, *others = deterministic_models()
        server = EmbeddingServer(
            first,
            settings,
            also_serves=tuple(others),
            clock=clock or FakeClock(),
            sleep=sleep or (lambda seconds: None),
        )
        server.start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def bedrock_client(server: EmbeddingServer) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )


def invoke(client: Any, text: str, model_id: str = TITAN_V2_MODEL_ID, **request: Any) -> dict[str, Any]:
    response = client.invoke_model(modelId=model_id, body=json.dumps({"inputText": text, **request}))
    payload: dict[str, Any] = json.loads(response["body"].read())
    return payload


def test_boto3_sees_the_requests_quota_as_bedrocks_throttling_exception(make_server: ServerFactory) -> None:
    clock = FakeClock()
    server = make_server(clock, requests_per_minute=2)
    client = bedrock_client(server)
    invoke(client, "one")
    invoke(client, "two")
    with pytest.raises(ClientError) as caught:
        invoke(client, "three")
    error = caught.value.response
    assert error["Error"]["Code"] == "ThrottlingException"
    assert error["Error"]["Message"] == "Too many requests, please wait before trying again."
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 429
    clock.advance(60)
    assert len(invoke(client, "three")["embedding"]) == 1024

    stats = server.stats()
    assert (stats["requests"], stats["throttled"], stats["throttled_in_flight"]) == (4, 1, 0)
    assert stats["quota"]["admitted"] == 3
    assert stats["quota"]["throttled"] == {"requests_per_minute": 1, "tokens_per_minute": 0}


def test_the_tokens_quota_counts_what_the_response_reports(make_server: ServerFactory) -> None:
    text = "Amazon Bedrock embeds one text per call."
    tokens = count_tokens(text)
    server = make_server(tokens_per_minute=2 * tokens)
    client = bedrock_client(server)
    assert invoke(client, text)["inputTextTokenCount"] == tokens
    assert invoke(client, text)["inputTextTokenCount"] == tokens
    # The product's embedder sees what it would see from Bedrock: a ThrottlingException, retried as transient.
    embedder = BedrockTitanEmbedder(client, model_id=TITAN_V2_MODEL_ID, dimension=1024)
    with pytest.raises(TransientError, match=r"ThrottlingException.*Too many tokens"):
        embedder.embed(["x"])
    # The local model's id has a quota of its own.
    assert len(invoke(client, text, model_id=LOCAL_MODEL_ID)["embedding"]) == 384

    with urllib.request.urlopen(server.url + "/_local/stats", timeout=5) as response:
        stats = json.loads(response.read())
    assert stats["quota"]["admitted_tokens"] == 3 * tokens
    assert stats["quota"]["throttled"]["tokens_per_minute"] == 1
    assert stats["quota"]["last_minute"][TITAN_V2_MODEL_ID]["tokens_per_minute"] == {
        "limit": 2 * tokens,
        "used": 2 * tokens,
    }
    assert stats["emulation"]["vectors"] == "deterministic"
    assert stats["model_ids"] == sorted([LOCAL_MODEL_ID, TITAN_V2_MODEL_ID])


def test_each_request_takes_at_least_its_drawn_latency(make_server: ServerFactory) -> None:
    slept: list[float] = []
    server = make_server(latency=ASSUMED_BEDROCK_LATENCY, seed=11, sleep=slept.append)
    client = bedrock_client(server)
    for index in range(5):
        invoke(client, f"text {index}")
    # The fake clock stands still, so each request sleeps exactly its draw: the seeded sequence.
    rng = random.Random(11)
    assert slept == pytest.approx([ASSUMED_BEDROCK_LATENCY.sample_ms(rng) / 1000 for _ in range(5)])
    assert server.stats()["latency"]["samples"] == 5


def test_a_request_slower_than_its_draw_is_not_delayed_further(make_server: ServerFactory) -> None:
    clock, slept = FakeClock(), list[float]()

    def slow_vector(text: str, dimension: int, normalize: bool) -> list[float]:
        clock.advance(0.5)  # the model took 500 ms: more than the fixed 100 ms
        return deterministic_vector(text, dimension, normalize)

    server = make_server(clock, latency=LatencyDistribution.parse("fixed:100"), sleep=slept.append)
    server.models[TITAN_V2_MODEL_ID] = replace(server.models[TITAN_V2_MODEL_ID], vector=slow_vector)
    invoke(bedrock_client(server), "slow")
    assert slept == []


def test_titan_v2_requests_get_titans_sizes_and_deterministic_vectors(make_server: ServerFactory) -> None:
    server = make_server()
    client = bedrock_client(server)
    text = "OpenSearch stores the vectors in a k-NN index."
    payload = invoke(client, text)
    assert payload["embedding"] == pytest.approx(deterministic_vector(text, 1024))
    assert payload["inputTextTokenCount"] == count_tokens(text)
    assert len(invoke(client, text, dimensions=256)["embedding"]) == 256
    unnormalised = invoke(client, text, dimensions=512, normalize=False)["embedding"]
    assert math.sqrt(math.fsum(value * value for value in unnormalised)) > 2
    with pytest.raises(ClientError) as caught:
        invoke(client, text, dimensions=384)
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "1024 or 512 or 256 only" in caught.value.response["Error"]["Message"]
    # The product's own embedder, configured as for AWS.
    vectors = BedrockTitanEmbedder(client, model_id=TITAN_V2_MODEL_ID, dimension=512).embed([text, text])
    assert vectors[0] == vectors[1] == pytest.approx(deterministic_vector(text, 512))
    assert server.stats()["batcher"]["texts"] == 0  # no model, no batch
