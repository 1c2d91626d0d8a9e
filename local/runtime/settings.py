"""Every knob of the local runtime, read from the environment in one place.

The Lambda environment overrides (``local_lambda_overrides``) are the only values in which the
local stack deliberately differs from the synthesized template; docs/local-stack.md lists them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rag_ingest.adapters.stack_resources import LOCAL_OUTPUTS
from rag_ingest.core.settings import CAPACITY_MODES
from rag_ingest.embeddings.base import LOCAL_MODEL_ID, MINILM_DIMENSION

from local.embedding_server.settings import NO_EMULATION, BedrockEmulation, emulation_from_env

REPO_ROOT = Path(__file__).resolve().parents[2]

# moto's default account: resources, ARNs and queue URLs all carry it.
LOCAL_ACCOUNT_ID = "123456789012"
# The local WebSocket API of live status, and its @connections management API below it.
LIVE_PATH = "/_local/live"
# Fake credentials for every client of moto (the handlers' boto3 clients included).
LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
DEFAULT_STACK_NAME = "RagIngest"
DEFAULT_OPENSEARCH_URL = "http://127.0.0.1:9200"
LOCAL_EMBEDDING_MODEL_ID = LOCAL_MODEL_ID
LOCAL_EMBEDDING_DIMENSION = MINILM_DIMENSION
# Worker processes per function (Lambda execution environments), at most; a function's reserved
# concurrency lowers it. Why two: docs/local-stack.md, The Lambda runner.
DEFAULT_LAMBDA_MAX_WORKERS = 2
# Niceness of the bulk lane's workers (functions tagged rag-ingest:lane=bulk): both lanes share the
# cores here, so small documents' stages get the CPU first (docs/architecture.md, Lanes).
DEFAULT_BULK_LANE_NICE = 10
# Idle workers are stopped after this, so a stage that is done for now gives its memory back.
DEFAULT_LAMBDA_IDLE_SECONDS = 30.0
# LOCAL_EMBEDDING: "server" runs the local embedding server, called through the Bedrock embedder;
# "in-process" loads a model in every embedding worker instead, to compare against it.
EMBEDDING_SERVER = "server"
EMBEDDING_IN_PROCESS = "in-process"
EMBEDDING_MODES = (EMBEDDING_SERVER, EMBEDDING_IN_PROCESS)


def _int_env(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


def _float_env(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc


def _flag_env(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be 1 or 0, got {raw!r}")


def stack_name_from_cdk_json(repo_root: Path) -> str:
    """The stack name the CDK app synthesizes: cdk.json context ``rag-ingest.stackName``."""
    cdk_json = repo_root / "cdk.json"
    if not cdk_json.is_file():
        return DEFAULT_STACK_NAME
    context = json.loads(cdk_json.read_text()).get("context", {})
    value = context.get("rag-ingest.stackName")
    if value is None and isinstance(context.get("rag-ingest"), dict):
        value = context["rag-ingest"].get("stackName")
    return str(value) if value else DEFAULT_STACK_NAME


@dataclass(frozen=True)
class RuntimeSettings:
    repo_root: Path
    stack_name: str
    template_path: Path
    region: str
    account_id: str
    host: str
    moto_port: int
    api_port: int
    state_dir: Path
    layer_source_dir: Path
    web_dir: Path
    opensearch_url: str
    # Step Functions retries really sleep in moto's interpreter: intervals are scaled by this.
    retry_scale: float
    # CloudWatch alarm periods, as the local alarm evaluator runs them (local/runtime/alarms/evaluator.py).
    alarm_period_scale: float
    lambda_max_workers: int
    lambda_init_timeout_seconds: float
    lambda_idle_seconds: float
    poller_default_concurrency: int
    # Pause between empty ReceiveMessage calls (the poller does not long-poll; see sqs_poller).
    poller_interval_seconds: float
    ready_timeout_seconds: float
    passthrough_env: tuple[str, ...] = field(default_factory=tuple)
    embedding_mode: str = EMBEDDING_SERVER
    # The embedding server's port (0: a free one) and, once it listens, its URL (set by the stack).
    embedding_port: int = 0
    embedding_endpoint: str | None = None
    # The embedding server's Bedrock emulation (LOCAL_EMBEDDING_PROFILE...), whose quotas size the Embed
    # functions' limiter; the limiter's mode (LOCAL_EMBEDDING_CAPACITY: "shared" under a quota, else "off").
    embedding_emulation: BedrockEmulation = NO_EMULATION
    embedding_capacity_mode: str | None = None
    # The local identity provider's RSA key (PEM); None: generated at start. Tests set it to sign
    # tokens the provider would not issue (wrong issuer or audience).
    oidc_signing_key_file: Path | None = None
    # Niceness of the bulk lane's worker processes (0: the same priority as the standard lane's).
    bulk_lane_nice: int = DEFAULT_BULK_LANE_NICE
    # What the stack was given is kept in ``data_dir`` across restarts and kill -9 (LOCAL_PERSIST=0:
    # in memory only). fsync: durable across a power cut too, not only a process kill.
    persist: bool = True
    state_fsync: bool = True
    checkpoint_seconds: float = 300.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RuntimeSettings:
        env = os.environ if environ is None else environ
        repo_root = Path(env.get("LOCAL_REPO_ROOT") or REPO_ROOT).resolve()
        stack_name = env.get("LOCAL_STACK_NAME") or stack_name_from_cdk_json(repo_root)
        template = env.get("LOCAL_TEMPLATE") or str(repo_root / "cdk.out" / f"{stack_name}.template.json")
        retry_scale = _float_env(env, "LOCAL_RETRY_SCALE", 0.1)
        if not 0 < retry_scale <= 1:
            raise ValueError(f"LOCAL_RETRY_SCALE must be in (0, 1], got {retry_scale}")
        alarm_period_scale = _float_env(env, "LOCAL_ALARM_PERIOD_SCALE", 0.05)
        if not 0 < alarm_period_scale <= 1:
            raise ValueError(f"LOCAL_ALARM_PERIOD_SCALE must be in (0, 1], got {alarm_period_scale}")
        embedding_mode = env.get("LOCAL_EMBEDDING", "").strip() or EMBEDDING_SERVER
        if embedding_mode not in EMBEDDING_MODES:
            raise ValueError(f"LOCAL_EMBEDDING must be one of {', '.join(EMBEDDING_MODES)}, got {embedding_mode!r}")
        passthrough = tuple(
            name.strip() for name in env.get("LOCAL_LAMBDA_PASSTHROUGH_ENV", "").split(",") if name.strip()
        )
        return cls(
            repo_root=repo_root,
            stack_name=stack_name,
            template_path=Path(template).resolve(),
            region=env.get("LOCAL_REGION") or "us-east-1",
            account_id=LOCAL_ACCOUNT_ID,
            host="127.0.0.1",
            moto_port=_int_env(env, "LOCAL_MOTO_PORT", 5000),
            api_port=_int_env(env, "LOCAL_API_PORT", 8080),
            state_dir=Path(env.get("LOCAL_STATE_DIR") or repo_root / ".local" / "runtime").resolve(),
            layer_source_dir=Path(env.get("LOCAL_LAYER_DIR") or repo_root / "layers" / "common" / "python"),
            web_dir=Path(env.get("LOCAL_WEB_DIR") or repo_root / "web"),
            opensearch_url=env.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL,
            retry_scale=retry_scale,
            alarm_period_scale=alarm_period_scale,
            lambda_max_workers=max(1, _int_env(env, "LOCAL_LAMBDA_MAX_WORKERS", DEFAULT_LAMBDA_MAX_WORKERS)),
            lambda_init_timeout_seconds=_float_env(env, "LOCAL_LAMBDA_INIT_TIMEOUT", 60.0),
            lambda_idle_seconds=_float_env(env, "LOCAL_LAMBDA_IDLE_SECONDS", DEFAULT_LAMBDA_IDLE_SECONDS),
            poller_default_concurrency=max(1, _int_env(env, "LOCAL_POLLER_CONCURRENCY", 2)),
            poller_interval_seconds=max(0.02, _float_env(env, "LOCAL_POLLER_INTERVAL", 0.2)),
            ready_timeout_seconds=_float_env(env, "LOCAL_READY_TIMEOUT", 180.0),
            passthrough_env=passthrough,
            embedding_mode=embedding_mode,
            embedding_port=_int_env(env, "LOCAL_EMBEDDING_PORT", 0),
            embedding_emulation=emulation_from_env(env),
            embedding_capacity_mode=_capacity_mode(env),
            oidc_signing_key_file=Path(env["LOCAL_OIDC_SIGNING_KEY"]) if env.get("LOCAL_OIDC_SIGNING_KEY") else None,
            bulk_lane_nice=min(19, max(0, _int_env(env, "LOCAL_BULK_LANE_NICE", DEFAULT_BULK_LANE_NICE))),
            persist=_flag_env(env, "LOCAL_PERSIST", True),
            state_fsync=_flag_env(env, "LOCAL_STATE_FSYNC", True),
            checkpoint_seconds=max(1.0, _float_env(env, "LOCAL_CHECKPOINT_SECONDS", 300.0)),
        )

    @property
    def moto_endpoint(self) -> str:
        return f"http://{self.host}:{self.moto_port}"

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.api_port}"

    @property
    def data_dir(self) -> Path:
        """The kept state: S3 objects, DynamoDB items, SQS messages, the sign-in key, alarm states."""
        return self.state_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "stack.log"

    @property
    def pid_path(self) -> Path:
        return self.state_dir / "stack.pid"

    @property
    def outputs_path(self) -> Path:
        return self.state_dir / LOCAL_OUTPUTS.name

    def _capacity_overrides(self, via_server: bool) -> dict[str, str | None]:
        """The Embed functions' limiter, sized from the emulated quota; off without one (nothing to
        share: the local model's own speed is the limit)."""
        emulation = self.embedding_emulation
        quota = (emulation.requests_per_minute, emulation.tokens_per_minute)
        limited = via_server and any(value is not None for value in quota)
        mode = (self.embedding_capacity_mode or "shared") if limited else "off"
        return {
            "EMBEDDING_CAPACITY_MODE": mode,
            "EMBEDDING_REQUESTS_PER_MINUTE": str(quota[0]) if limited and quota[0] is not None else None,
            "EMBEDDING_TOKENS_PER_MINUTE": str(quota[1]) if limited and quota[1] is not None else None,
        }

    def local_lambda_overrides(self) -> dict[str, str | None]:
        """Where a local function's environment differs from the template (None = unset).

        In AWS these come from the stack (OpenSearch domain endpoint, Bedrock model, Textract); offline
        the stack uses the local OpenSearch, Tesseract and the local MiniLM model instead: through the local
        embedding server with the same Bedrock client code (boto3 honours the service-specific
        ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` over ``AWS_ENDPOINT_URL``, which points at moto), or,
        with ``LOCAL_EMBEDDING=in-process``, a model loaded in each worker.
        """
        via_server = self.embedding_mode == EMBEDDING_SERVER
        if via_server and self.embedding_endpoint is None:
            raise RuntimeError("the embedding server's endpoint is not known yet: start the server first")
        return {
            "OPENSEARCH_ENDPOINT": self.opensearch_url,
            "EMBEDDING_PROVIDER": "bedrock" if via_server else "local",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.embedding_endpoint if via_server else None,
            # Batch inference's control plane (bedrock): the same server's job runner, over moto's S3.
            "AWS_ENDPOINT_URL_BEDROCK": self.embedding_endpoint if via_server else None,
            # POST /search's Rerank (bedrock-agent-runtime): the same server's /rerank route.
            "AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME": self.embedding_endpoint if via_server else None,
            "EMBEDDING_MODEL_ID": LOCAL_EMBEDDING_MODEL_ID,
            "EMBEDDING_DIMENSION": str(LOCAL_EMBEDDING_DIMENSION),
            **self._capacity_overrides(via_server),
            # Pages without a text layer: offline Tesseract instead of Textract (docs/ocr.md).
            "OCR_ENGINE": "local",
            "OCR_TEXTRACT_TABLES": None,  # a Textract feature (cdk.json parsing.textractTables): not offline
            # Webhook receivers on loopback (tests, a developer's listener); private addresses stay refused.
            "WEBHOOK_ALLOW_LOOPBACK_HTTP": "true",
            # Crawled sites on loopback (the tests' site, a developer's); private addresses stay refused.
            "SOURCE_ALLOW_LOOPBACK_HTTP": "true",
            # No X-Ray daemon locally.
            "POWERTOOLS_TRACE_DISABLED": "true",
            # POWERTOOLS_DEV changes logging and tracing behaviour: run as in AWS.
            "POWERTOOLS_DEV": None,
        }


def _capacity_mode(env: Mapping[str, str]) -> str | None:
    mode = env.get("LOCAL_EMBEDDING_CAPACITY", "").strip().lower() or None
    if mode is not None and mode not in CAPACITY_MODES:
        raise ValueError(f"LOCAL_EMBEDDING_CAPACITY must be one of {', '.join(CAPACITY_MODES)}, got {mode!r}")
    return mode
