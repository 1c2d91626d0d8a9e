"""The ``serve`` process: moto, the Lambda runner, the SQS pollers and the API adapter together,
with the local embedding server (Bedrock's stand-in) as its child process."""

from __future__ import annotations

import dataclasses
import faulthandler
import functools
import json
import logging
import os
import signal
import threading
import time
from typing import Any

from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
)
from moto.server import ThreadedMotoServer

from local.embedding_server.process import EmbeddingServerProcess
from local.runtime.alarms.clock_control import with_alarm_clock_control
from local.runtime.alarms.evaluator import HANDLED_TYPES, AlarmEvaluator
from local.runtime.aws import moto_client
from local.runtime.cloudformation.provision import Provisioner
from local.runtime.cloudformation.provisioned import ProvisionedStack, ProvisioningError, api_function_name
from local.runtime.cloudformation.template import CloudFormationTemplate, TemplateError
from local.runtime.http.identity import OIDC_PATH, LocalIdentityProvider
from local.runtime.http.server import ApiServer
from local.runtime.http.stream_poller import LiveStatusUnavailable, StreamPoller
from local.runtime.http.template_api import HttpApiDefinition
from local.runtime.http.websocket_api import StreamMapping, WebSocketApiDefinition, localized_environment
from local.runtime.lambda_.moto_seam import install_moto_seam, invoke_in_process
from local.runtime.lambda_.runner import LambdaRunner
from local.runtime.lambda_.sqs_poller import SqsPoller
from local.runtime.moto_server import PortInUseError, WsgiApp, configure_moto, ensure_port_free, start_moto_server
from local.runtime.moto_sfn_clients import install_sfn_client_cache
from local.runtime.persistence.durable_state import DurableState, LoadedState, StateRefusedError
from local.runtime.settings import EMBEDDING_SERVER, LIVE_PATH, RuntimeSettings

LOG = logging.getLogger("local.runtime")
# The audience when the template has no JWT authorizer (a template without an HTTP API).
FALLBACK_AUDIENCE = "local-app-client"


OIDC_KEY_FILE = "oidc-signing-key.pem"
ALARM_STATES_FILE = "alarm-states.json"
# Document statuses a workflow execution was moving when the stack stopped (the reaper's STUCK_STATUSES).
IN_FLIGHT_STATUSES = ("QUEUED", "PROCESSING")


def _signing_key(settings: RuntimeSettings) -> rsa.RSAPrivateKey | None:
    """The identity provider's key: the tests' file, else the kept one (a restart signs nobody
    out), else None (generated at start, gone at stop)."""
    key_file = settings.oidc_signing_key_file
    if key_file is None and settings.persist:
        key_file = settings.data_dir / OIDC_KEY_FILE
        if not key_file.exists():
            generated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = generated.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
            key_file.parent.mkdir(parents=True, exist_ok=True)
            temporary = key_file.with_suffix(".tmp")
            temporary.write_bytes(pem)
            temporary.chmod(0o600)
            temporary.replace(key_file)
    if key_file is None:
        return None
    key = load_pem_private_key(key_file.read_bytes(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"{key_file} is not an RSA private key")
    return key


class OfflineStack:
    def __init__(self, settings: RuntimeSettings) -> None:
        self.settings = settings
        self.phase = "starting"
        self.error: str | None = None
        self.started_at = time.time()
        self.provisioned: ProvisionedStack | None = None
        self.runner: LambdaRunner | None = None
        self.pollers: list[SqsPoller] = []
        self.alarms: AlarmEvaluator | None = None
        self.embedding_server: EmbeddingServerProcess | None = None
        self._moto: ThreadedMotoServer | None = None
        self._uninstall_seam: Any = None
        self._uninstall_sfn_client_cache: Any = None
        self._outputs: dict[str, Any] = {}
        self.durable: DurableState | None = None
        self.identity = LocalIdentityProvider(f"{settings.api_url}{OIDC_PATH}", private_key=_signing_key(settings))
        self.stream_pollers: list[StreamPoller] = []
        self._page_config: dict[str, Any] | None = None
        self._invoke = functools.partial(invoke_in_process, settings.account_id, settings.region)
        self.api = ApiServer(
            host=settings.host,
            port=settings.api_port,
            account_id=settings.account_id,
            region=settings.region,
            web_dir=settings.web_dir,
            invoke=self._invoke,
            health=self.health,
            status=self.status,
            outputs=lambda: dict(self._outputs),
            identity=self.identity,
            page_config=lambda: self._page_config,
            on_live_connect=self._wake_stream_pollers,
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        settings = self.settings
        settings.state_dir.mkdir(parents=True, exist_ok=True)
        ensure_port_free(settings.host, settings.api_port, "LOCAL_API_PORT")
        ensure_port_free(settings.host, settings.moto_port, "LOCAL_MOTO_PORT")
        self.api.start()
        LOG.info("API adapter on %s (control endpoints under /_local/)", settings.api_url)

        if settings.embedding_mode == EMBEDDING_SERVER:
            # Before the Lambda runner: the functions' environment carries the server's URL.
            self.phase = "starting the embedding server"
            # Its batch inference jobs read and write moto's S3 (local.embedding_server.batch_jobs).
            self.embedding_server = EmbeddingServerProcess(
                settings.host, settings.embedding_port, env={"LOCAL_BATCH_S3_ENDPOINT": settings.moto_endpoint}
            )
            self.embedding_server.start()
            self.settings = settings = dataclasses.replace(settings, embedding_endpoint=self.embedding_server.url)
        else:
            LOG.info("LOCAL_EMBEDDING=%s: each embedding worker loads its own model", settings.embedding_mode)

        loaded = self._load_kept_state()

        self.phase = "starting moto"
        configure_moto(settings.moto_port, verbose=bool(os.environ.get("LOCAL_MOTO_VERBOSE")))
        self.runner = LambdaRunner(settings)
        self._uninstall_seam = install_moto_seam(self.runner)
        self._uninstall_sfn_client_cache = install_sfn_client_cache()
        self.api.runner = self.runner
        self._moto = start_moto_server(settings.host, settings.moto_port, wrap=self._moto_app)
        LOG.info("moto server on %s (Step Functions execute_state_machine on)", settings.moto_endpoint)

        self.phase = "provisioning"
        LOG.info(
            "provisioning from %s (stack %s, region %s)", settings.template_path, settings.stack_name, settings.region
        )
        template = CloudFormationTemplate.load(settings.template_path)
        provisioner = Provisioner(template, settings)
        provisioned = provisioner.provision()
        self.provisioned = provisioned
        if self.durable is not None and loaded is not None:
            self.phase = "restoring the kept state"
            LOG.info("kept state: %s", self.durable.restore(loaded).summary())
            self.durable.start()
        self.alarms = self._start_alarms(template, provisioner, provisioned)
        self._log_provisioned(provisioned)
        websocket = WebSocketApiDefinition.from_template(template, provisioner.resolver)
        self._localize_live_functions(provisioned, websocket)
        self.runner.register(provisioned.functions, api_functions=provisioned.api_function_names)
        http_api = HttpApiDefinition.from_template(template, provisioner.resolver)
        self.api.set_routes(provisioned.api_routes, http_api)
        # The JWT authorizer's audience as the template resolves it locally (see docs/local-stack.md).
        audience = next(iter(http_api.audiences), FALLBACK_AUDIENCE)
        self.identity.set_audience(audience)
        LOG.info("identity provider %s: ID tokens for audience %s", self.identity.issuer, audience)
        self._start_live_status(template, provisioner, websocket)
        self._page_config = self._build_page_config(provisioned, websocket)
        self._outputs = self._stack_outputs(provisioned)
        settings.outputs_path.write_text(json.dumps(self._outputs, indent=2, sort_keys=True) + "\n")
        LOG.info("outputs written to %s", settings.outputs_path)

        if loaded is not None and self._interrupted_documents(loaded):
            self._redrive_interrupted_work()
        if loaded is not None:
            self._resume_interrupted_syncs()

        self.phase = "starting pollers"
        for mapping in provisioned.event_source_mappings:
            if not mapping.enabled:
                LOG.info("event source mapping %s is disabled in the template", mapping.logical_id)
                continue
            function = provisioned.function_named(mapping.function_name)
            if function is None:
                raise RuntimeError(
                    f"event source mapping {mapping.logical_id} targets {mapping.function_name}, not a local function"
                )
            poller = SqsPoller(mapping, settings, function.timeout_seconds)
            poller.start()
            self.pollers.append(poller)
        self.phase = "ready"
        LOG.info("local stack ready in %.1f s", time.time() - self.started_at)

    def stop(self) -> None:
        self.phase = "stopping"
        LOG.info("stopping the local stack")
        for poller in self.pollers:
            poller.stop(timeout=10)
        if self.alarms is not None:
            self.alarms.stop()
        for stream_poller in self.stream_pollers:
            stream_poller.close()
        self.api.stop()  # closes every live connection too
        if self.runner is not None:
            self.runner.shutdown()
        if self.durable is not None:
            try:
                self.durable.stop()  # the last checkpoint, before moto's memory goes
            except Exception:  # the journal still holds every change: the next start replays it
                LOG.exception("final checkpoint of the kept state failed")
        if self._moto is not None:
            self._moto.stop()
        if self._uninstall_seam is not None:
            self._uninstall_seam()
        if self._uninstall_sfn_client_cache is not None:
            self._uninstall_sfn_client_cache()
        if self.embedding_server is not None:
            self.embedding_server.stop()
        # The outputs describe resources that exist only while this process runs.
        self.settings.outputs_path.unlink(missing_ok=True)
        self.phase = "stopped"

    def serve_forever(self) -> int:
        """Run until SIGTERM/SIGINT; the exit code of ``python -m local.runtime serve``."""
        stop = threading.Event()
        # `kill -USR1 <pid>` dumps every thread's stack into the log (a stuck poller, a hung call).
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        self._write_pidfile()
        try:
            try:
                self.start()
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"
                self.phase = "failed"
                expected = isinstance(exc, TemplateError | ProvisioningError | PortInUseError | StateRefusedError)
                LOG.error("local stack failed to start: %s", self.error, exc_info=not expected)
                return 1
            stop.wait()
            return 0
        finally:
            self.stop()
            self._remove_pidfile()

    # -- helpers ------------------------------------------------------------------------------

    def _load_kept_state(self) -> LoadedState | None:
        """The kept state, read and version-checked before anything starts (docs/local-stack.md)."""
        if not self.settings.persist:
            LOG.info("LOCAL_PERSIST=0: state lives in memory and is gone at stop")
            return None
        self.phase = "loading the kept state"
        self.durable = DurableState(
            self.settings.data_dir,
            account_id=self.settings.account_id,
            region=self.settings.region,
            fsync=self.settings.state_fsync,
            checkpoint_seconds=self.settings.checkpoint_seconds,
        )
        loaded = self.durable.load()
        if loaded.journal_dropped_bytes:
            LOG.warning(
                "kept state: a torn last journal record (%d bytes, never acknowledged) was cut",
                loaded.journal_dropped_bytes,
            )
        LOG.info(
            "kept state in %s: %d entities in the snapshot, %d journal records after it",
            self.settings.data_dir,
            loaded.snapshot_entities,
            loaded.journal_records,
        )
        return loaded

    def _interrupted_documents(self, loaded: LoadedState) -> int:
        """How many kept document records a workflow was moving when the stack stopped."""
        table = self._outputs.get("DocumentsTableName")
        return sum(
            1
            for key, attributes in loaded.entities.items()
            if key[0] == "dynamodb"
            and key[1] == table
            and isinstance(attributes, dict)
            and attributes.get("status", {}).get("S") in IN_FLIGHT_STATUSES
        )

    def _redrive_interrupted_work(self) -> None:
        """Executions do not survive a stop; documents caught mid-workflow are re-driven from their
        checkpoints now, by the reaper (every QUEUED/PROCESSING record whose execution is gone),
        before the queues are polled, so nothing else is starting an execution meanwhile."""
        assert self.runner is not None
        reaper = self._outputs.get("ReaperFunctionName")
        if not reaper:
            LOG.warning("the template has no reaper: interrupted documents wait for a manual replay")
            return
        self.phase = "re-driving interrupted documents"
        result = self.runner.invoke(str(reaper), {"executions_lost": True})
        if result.errored:
            LOG.error("re-driving interrupted documents failed: %s", result.output)
            return
        report = json.loads(result.output)
        LOG.info(
            "interrupted documents: %d re-driven from their checkpoints, %d marked failed (replay budget spent)",
            len(report.get("redriven", [])),
            len(report.get("marked_failed", [])),
        )

    def _resume_interrupted_syncs(self) -> None:
        """Source syncs caught mid-way lost their execution too: the sync function starts each again
        from its checkpoint (what its schedule does in AWS once a sync has gone quiet)."""
        assert self.runner is not None
        function = self._outputs.get("SourceSyncFunctionName")
        if not function:
            return
        result = self.runner.invoke(str(function), {"resume_lost_syncs": {"stale_after_seconds": 0}})
        if result.errored:
            LOG.error("resuming interrupted source syncs failed: %s", result.output)
            return
        syncs = json.loads(result.output).get("syncs", {})
        if syncs:
            LOG.info("interrupted source syncs: %s", ", ".join(f"{k} {v}" for k, v in sorted(syncs.items())))

    def _start_alarms(
        self, template: CloudFormationTemplate, provisioner: Provisioner, provisioned: ProvisionedStack
    ) -> AlarmEvaluator:
        """The template's alarms, evaluated on what the local stack observes (local/runtime/alarms/evaluator.py)."""
        queues = {
            str(url).rstrip("/").rsplit("/", 1)[-1]: str(url)
            for logical_id, url in provisioned.physical_ids.items()
            if template.resources[logical_id].type == "AWS::SQS::Queue"
        }
        evaluator = AlarmEvaluator(
            template,
            provisioner.resolver,
            self.settings,
            queues=queues,
            functions=[function.name for function in provisioned.functions],
            state_machines=provisioned.state_machines.values(),
            state_file=self.settings.data_dir / ALARM_STATES_FILE if self.settings.persist else None,
        )
        evaluator.provision()
        # Alarms, topics and subscriptions are the evaluator's now, not skipped resources.
        for kind in [kind for kind in provisioned.skipped if kind.split(" ", 1)[0] in HANDLED_TYPES]:
            del provisioned.skipped[kind]
        assert self.runner is not None
        self.runner.invocation_observers.append(evaluator.record_invocation)
        evaluator.start()
        return evaluator

    def _moto_app(self, app: WsgiApp) -> WsgiApp:
        """moto's app behind the kept state's journal (when kept) and the alarm clock's control."""
        journaled = self.durable.wsgi(app) if self.durable is not None else app
        return with_alarm_clock_control(journaled, lambda: self.alarms)

    def _write_pidfile(self) -> None:
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        self.settings.pid_path.write_text(f"{os.getpid()}\n")

    def _remove_pidfile(self) -> None:
        try:
            if self.settings.pid_path.read_text().strip() == str(os.getpid()):
                self.settings.pid_path.unlink()
        except FileNotFoundError:
            pass

    def _wake_stream_pollers(self) -> None:
        """A live connection is coming: the pollers take the stream's position now."""
        for stream_poller in self.stream_pollers:
            stream_poller.wake()

    def _localize_live_functions(self, provisioned: ProvisionedStack, websocket: WebSocketApiDefinition | None) -> None:
        """The functions' AWS endpoints become local: the issuer's, the stage's, the HTTP API's
        (docs/local-stack.md)."""
        provisioned.functions[:] = [
            dataclasses.replace(
                function,
                environment=localized_environment(
                    function.environment,
                    issuer=self.identity.issuer,
                    websocket=websocket,
                    region=self.settings.region,
                    live_url=f"{self.settings.api_url}{LIVE_PATH}",
                    api_url=self.settings.api_url,
                ),
            )
            for function in provisioned.functions
        ]

    def _start_live_status(
        self, template: CloudFormationTemplate, provisioner: Provisioner, websocket: WebSocketApiDefinition | None
    ) -> None:
        """The WebSocket API on the API port, and its pusher fed by the stream mapping."""
        if websocket is None:
            LOG.warning("live status: the template has no WebSocket API; %s is off", LIVE_PATH)
            return
        self.api.live.definition = websocket
        for mapping in StreamMapping.from_template(template, provisioner.resolver):
            stream_poller = StreamPoller(
                mapping,
                streams=moto_client(self.settings, "dynamodbstreams"),
                sqs=moto_client(self.settings, "sqs"),
                invoke=self._invoke,
                listening=self.api.live.listening,
            )
            try:
                stream_poller.start()
            except LiveStatusUnavailable as exc:
                LOG.warning("live status: %s", exc)
                continue
            self.stream_pollers.append(stream_poller)

    def _build_page_config(
        self, provisioned: ProvisionedStack, websocket: WebSocketApiDefinition | None
    ) -> dict[str, Any]:
        """``GET /config.json``: what the page needs (the local shape of the contract)."""
        api_url = self.settings.api_url
        api_function = provisioned.function_named(api_function_name(provisioned) or "")
        max_upload = (api_function.environment if api_function else {}).get("MAX_UPLOAD_BYTES")
        return {
            "apiUrl": api_url,
            "maxUploadBytes": int(max_upload) if max_upload else None,
            "live": {"kind": "websocket", "url": self._live_url()} if websocket is not None else None,
            "auth": {"kind": "local", "tokenUrl": f"{self.identity.issuer}/token"},
        }

    def _live_url(self) -> str:
        """The WebSocket URL of live status (``wss://...execute-api.../live`` in AWS)."""
        return self.settings.api_url.replace("http://", "ws://", 1) + LIVE_PATH

    def _stack_outputs(self, provisioned: ProvisionedStack) -> dict[str, Any]:
        outputs: dict[str, Any] = dict(provisioned.outputs)
        outputs.update(
            {
                "ApiUrl": self.settings.api_url,
                "IdentityIssuer": self.identity.issuer,
                "TokenUrl": f"{self.identity.issuer}/token",
                "LiveUrl": self._live_url(),
                "MotoEndpoint": self.settings.moto_endpoint,
                "Region": self.settings.region,
                "AccountId": self.settings.account_id,
                "StackName": self.settings.stack_name,
                "OpenSearchUrl": self.settings.opensearch_url,
                # The chunk index the functions write (a bench's or eval's stack has its own): what
                # tests.support.pipeline_probe and tests/conftest.py read back.
                "OpenSearchIndex": next(
                    (
                        f.environment["OPENSEARCH_INDEX"]
                        for f in provisioned.functions
                        if "OPENSEARCH_INDEX" in f.environment
                    ),
                    "rag-chunks",  # cdk.json's default (infra/config.py)
                ),
                "EmbeddingEndpoint": self.settings.embedding_endpoint,
                "Resources": provisioned.physical_ids,
                "Functions": {function.logical_id: function.name for function in provisioned.functions},
                "Alarms": {alarm.logical_id: alarm.name for alarm in (self.alarms.alarms if self.alarms else [])},
            }
        )
        return outputs

    def _log_provisioned(self, provisioned: ProvisionedStack) -> None:
        for function in provisioned.functions:
            LOG.info(
                "function %s: %s (%s, timeout %ds, %d MB, code %s)",
                function.display_name,
                function.name,
                function.handler,
                function.timeout_seconds,
                function.memory_mb,
                function.code_dir,
            )
        for logical_id, arn in provisioned.state_machines.items():
            LOG.info("state machine %s: %s (retry intervals x%s)", logical_id, arn, self.settings.retry_scale)
        for route in provisioned.api_routes:
            LOG.info("API route %s -> %s", route.route_key, route.function_name)
        for kind, logical_ids in sorted(provisioned.skipped.items()):
            LOG.info("skipped %s: %s", kind, ", ".join(sorted(logical_ids)))

    def health(self) -> dict[str, Any]:
        return {"ready": self.phase == "ready", "phase": self.phase, "error": self.error, "pid": os.getpid()}

    def status(self) -> dict[str, Any]:
        provisioned = self.provisioned
        runner_stats = self.runner.stats() if self.runner else {}
        return {
            **self.health(),
            "uptime_seconds": round(time.time() - self.started_at, 1),
            "template": str(self.settings.template_path),
            "moto_endpoint": self.settings.moto_endpoint,
            "api_url": self.settings.api_url,
            "outputs": str(self.settings.outputs_path),
            "functions": [
                {
                    "name": function.name,
                    "logical_id": function.logical_id,
                    "path": function.display_name,
                    "handler": function.handler,
                    "timeout_seconds": function.timeout_seconds,
                    "workers": runner_stats.get(function.name, {}),
                }
                for function in (provisioned.functions if provisioned else [])
            ],
            "pollers": [
                {
                    "mapping": poller.mapping.logical_id,
                    "queue_url": poller.mapping.queue_url,
                    "function": poller.mapping.function_name,
                    "concurrency": poller.concurrency,
                    **poller.stats.as_dict(),
                }
                for poller in self.pollers
            ],
            "routes": [route.route_key for route in (provisioned.api_routes if provisioned else [])],
            "live": (
                {**self.api.live.stats(), "pollers": [poller.stats() for poller in self.stream_pollers]}
                if self.api.live.definition is not None
                else None
            ),
            "faults": self.runner.faults.pending() if self.runner else [],
            "faults_injected": self.runner.faults.injected() if self.runner else {},
            "skipped": provisioned.skipped if provisioned else {},
            "alarms": self.alarms.status() if self.alarms else [],
            "kept_state": self.durable.status() if self.durable is not None else None,
            "embedding_server": (
                {"url": self.embedding_server.url, "pid": self.embedding_server.pid}
                if self.embedding_server is not None and self.embedding_server.port is not None
                else None
            ),
        }
