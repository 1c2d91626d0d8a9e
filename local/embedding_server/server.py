"""The HTTP side of the embedding server: Bedrock's wire format on loopback, on Werkzeug.

Bedrock Runtime's ``InvokeModel`` (``POST [/lanes/<lane>]/model/{modelId}/invoke``: ``inputText``,
``dimensions``, ``normalize`` -> ``embedding``, ``inputTextTokenCount``), ``Converse`` and
``ConverseStream`` (answered by a labelled extractive stand-in), Bedrock Agent Runtime's ``Rerank``
(``POST [/lanes/<lane>]/rerank``, scored by a labelled lexical stand-in), batch inference's control
plane (:mod:`local.embedding_server.batch_jobs`), ``GET /ping`` and ``GET /_local/stats``.
Errors as botocore reads them: ``x-amzn-ErrorType`` and ``{"message"}`` with the service model's
status. The Bedrock emulation (quotas, latency, deterministic vectors) is ``settings.emulation``.
Imports Werkzeug and this package. The wire format in full: docs/local-stack.md, "The embedding server".
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from local.embedding_server import eventstream
from local.embedding_server.batch_jobs import BatchApiError, BatchJobRunner, server_embedder
from local.embedding_server.batcher import DynamicBatcher, EmbedFunction, Lane, QueueTimeout
from local.embedding_server.latency import LatencySampler
from local.embedding_server.quota import Clock, QuotaBook
from local.embedding_server.settings import EmbeddingServerSettings

LOG = logging.getLogger("local.embedding_server")

# Bedrock's routes, also under /lanes/<lane>: botocore keeps an endpoint URL's path, so each
# function's lane is its endpoint's (the batcher serves queries first: batcher.DynamicBatcher).
_LANE = f"<any({', '.join(lane.value for lane in Lane)}):lane>"
_ROUTES = Map(
    [
        Rule("/ping", methods=["GET"], endpoint="ping"),
        Rule("/_local/stats", methods=["GET"], endpoint="stats"),
        Rule("/rerank", methods=["POST"], endpoint="rerank"),
        Rule(f"/lanes/{_LANE}/rerank", methods=["POST"], endpoint="rerank"),
        Rule("/model/<path:model_id>/invoke", methods=["POST"], endpoint="invoke"),
        Rule(f"/lanes/{_LANE}/model/<path:model_id>/invoke", methods=["POST"], endpoint="invoke"),
        Rule("/model/<path:model_id>/converse", methods=["POST"], endpoint="converse"),
        Rule("/model/<path:model_id>/converse-stream", methods=["POST"], endpoint="converse_stream"),
        Rule(f"/lanes/{_LANE}/model/<path:model_id>/converse-stream", methods=["POST"], endpoint="converse_stream"),
        Rule(f"/lanes/{_LANE}/model/<path:model_id>/converse", methods=["POST"], endpoint="converse"),
    ]
)
# The model ARN Rerank takes, or the bare model id (botocore's BedrockModelArn pattern allows both).
_RERANK_MODEL = re.compile(r"^(?:arn:aws[a-z-]*:bedrock:[a-z0-9-]+::foundation-model/)?(?P<model_id>[a-z0-9.:-]+)$")
#: Rerank's limits (botocore's bedrock-agent-runtime model; the API reference cited in
#: rag_ingest.adapters.reranker): one query, 1 to 1,000 sources, texts of 1 to 32,000 characters.
RERANK_MAX_SOURCES = 1_000
RERANK_MAX_TEXT_CHARS = 32_000


def lane_endpoint(endpoint: str, lane: Lane) -> str:
    """The endpoint URL a Bedrock client uses for ``lane``'s texts (the server at ``endpoint``)."""
    return f"{endpoint.rstrip('/')}/lanes/{lane.value}"


# Titan v2's request keys; Bedrock refuses any other ("extraneous key").
_REQUEST_KEYS = frozenset({"inputText", "dimensions", "normalize"})
# Titan v2 accepts up to 50,000 characters of inputText.
MAX_INPUT_CHARS = 50_000
MAX_BODY_BYTES = 1 << 20


@dataclass(frozen=True)
class ServedModel:
    """The one model the server serves: its id, vector size, input limit in tokens, and functions."""

    model_id: str
    dimension: int
    max_input_tokens: int
    count_tokens: Callable[[str], int]
    # Unit vectors, one per text; the batcher calls it with a whole batch.
    embed: EmbedFunction
    # The same vectors for the query lane's batches, computed for latency instead of throughput;
    # None: ``embed``.
    embed_queries: EmbedFunction | None = None
    # Other sizes a request's "dimensions" may ask for (Titan V2: 512, 256); ``dimension`` is the default.
    other_dimensions: tuple[int, ...] = ()
    # Set: vector(text, dimensions, normalize) answers in the request's thread, without the batcher
    # (the deterministic vectors); None: the batcher runs ``embed``.
    vector: Callable[[str, int, bool], list[float]] | None = None

    @property
    def dimensions(self) -> tuple[int, ...]:
        return (self.dimension, *self.other_dimensions)


# How often the serving loop looks for a stop request: stop() waits for it (socketserver's 0.5 s).
STOP_POLL_SECONDS = 0.05


class StandInReranker:
    """Bedrock Agent Runtime's ``Rerank`` over the lexical stand-in scorer (module doc)."""

    #: The header every Rerank answer carries, naming what scored it.
    HEADER = "x-local-reranker"

    def __init__(self) -> None:
        from rag_ingest.core.settings import RERANK_MODEL_IDS
        from rag_ingest.retrieval.rerank import LexicalStandInReranker

        self.model_ids = RERANK_MODEL_IDS
        self.scorer = LexicalStandInReranker()

    def rerank(self, body: bytes) -> dict[str, Any]:
        try:
            request = json.loads(body)
        except ValueError:
            raise validation_error("Malformed request body: not JSON") from None
        if not isinstance(request, dict):
            raise validation_error("Malformed request body: expected an object")
        for key in ("queries", "sources", "rerankingConfiguration"):
            if key not in request:
                raise validation_error(
                    f"1 validation error detected: Value null at '{key}' failed to satisfy constraint: "
                    "Member must not be null"
                )
        queries, sources = request["queries"], request["sources"]
        if not isinstance(queries, list) or len(queries) != 1:
            raise validation_error("queries: exactly 1 query is allowed")
        query = _text_of(queries[0], "queries[0]", "textQuery", "TEXT")
        if not isinstance(sources, list) or not 1 <= len(sources) <= RERANK_MAX_SOURCES:
            raise validation_error(f"sources: between 1 and {RERANK_MAX_SOURCES} sources are allowed")
        texts = []
        for position, source in enumerate(sources):
            if not isinstance(source, dict) or source.get("type") != "INLINE":
                raise validation_error(f"sources[{position}].type must be INLINE")
            texts.append(_text_of(source.get("inlineDocumentSource"), f"sources[{position}]", "textDocument", "TEXT"))
        configuration = request["rerankingConfiguration"]
        bedrock = configuration.get("bedrockRerankingConfiguration") if isinstance(configuration, dict) else None
        if not isinstance(bedrock, dict) or configuration.get("type") != "BEDROCK_RERANKING_MODEL":
            raise validation_error(
                "rerankingConfiguration: type BEDROCK_RERANKING_MODEL with a bedrockRerankingConfiguration"
            )
        model = bedrock.get("modelConfiguration", {})
        match = _RERANK_MODEL.match(str(model.get("modelArn", "")) if isinstance(model, dict) else "")
        if match is None or match["model_id"] not in self.model_ids:
            raise BedrockError(
                HTTPStatus.NOT_FOUND,
                "ResourceNotFoundException",
                f"reranker model {model!r} not served here: {', '.join(self.model_ids)} (a lexical stand-in)",
            )
        number = bedrock.get("numberOfResults", len(texts))
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= RERANK_MAX_SOURCES:
            raise validation_error(f"numberOfResults must be between 1 and {RERANK_MAX_SOURCES}")
        ranked = self.scorer.rerank(query, texts, min(number, len(texts)))
        return {"results": [{"index": index, "relevanceScore": score} for index, score in ranked]}


class StandInAnswerModel:
    """Bedrock Runtime's ``Converse`` answered by the extractive stand-in (rag_ingest.answers.extractive)
    for any model id: the same client code runs, and the header says what answered."""

    HEADER = "x-local-answer-model"
    NAME = "extractive-stand-in"

    @staticmethod
    def converse(model_id: str, body: bytes, started: float) -> dict[str, Any]:
        from rag_ingest.answers.extractive import ExtractiveAnswerModel

        try:
            request = json.loads(body)
        except ValueError:
            raise validation_error("Malformed request body: not JSON") from None
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
            raise validation_error("messages: at least one message is required")
        last = messages[-1]
        if last.get("role") != "user":
            raise validation_error("messages: the last message must be the user's")
        texts = [block.get("text") for block in last.get("content") or [] if isinstance(block, dict)]
        message = "\n".join(text for text in texts if isinstance(text, str))
        if not message.strip():
            raise validation_error("messages: the user's message has no text")
        system = " ".join(
            str(block.get("text", "")) for block in request.get("system") or [] if isinstance(block, dict)
        )
        max_tokens = (request.get("inferenceConfig") or {}).get("maxTokens")
        generation = ExtractiveAnswerModel(model_id).generate(
            system, message, max_tokens=max_tokens if isinstance(max_tokens, int) else sys.maxsize
        )
        tokens_in, tokens_out = generation.input_tokens, generation.output_tokens
        LOG.info("Converse %s answered by the %s", model_id, StandInAnswerModel.NAME)
        return {
            "output": {"message": {"role": "assistant", "content": [{"text": generation.text}]}},
            "stopReason": generation.stop_reason,
            "usage": {"inputTokens": tokens_in, "outputTokens": tokens_out, "totalTokens": tokens_in + tokens_out},
            "metrics": {"latencyMs": int((time.perf_counter() - started) * 1000)},
        }

    @staticmethod
    def events(response: dict[str, Any]) -> Iterator[bytes]:
        """``Converse``'s ``response`` as ``ConverseStream``'s events, its text a few words at a time."""
        from rag_ingest.answers.extractive import stream_pieces

        yield eventstream.event("messageStart", {"role": "assistant"})
        for piece in stream_pieces(response["output"]["message"]["content"][0]["text"]):
            yield eventstream.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
        yield eventstream.event("contentBlockStop", {"contentBlockIndex": 0})
        yield eventstream.event("messageStop", {"stopReason": response["stopReason"]})
        yield eventstream.event("metadata", {"usage": response["usage"], "metrics": response["metrics"]})


def _text_of(document: Any, where: str, field: str, kind: str) -> str:
    """The text of a ``{"type": kind, field: {"text"}}`` object, or a ValidationException naming ``where``."""
    if not isinstance(document, dict) or document.get("type") != kind:
        raise validation_error(f"{where}: type must be {kind}")
    text = (document.get(field) or {}).get("text") if isinstance(document.get(field), dict) else None
    if not isinstance(text, str) or not 1 <= len(text) <= RERANK_MAX_TEXT_CHARS:
        raise validation_error(f"{where}.{field}.text must be 1 to {RERANK_MAX_TEXT_CHARS} characters")
    return text


class BedrockError(Exception):
    def __init__(self, status: HTTPStatus, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def validation_error(message: str) -> BedrockError:
    return BedrockError(HTTPStatus.BAD_REQUEST, "ValidationException", message)


class EmbeddingServer:
    """Serves ``model`` (and ``also_serves``) over HTTP on ``host:port`` (0 = a free port), batching
    across callers. ``clock`` (the quotas' and the latency's) and ``sleep`` are injected by tests."""

    def __init__(
        self,
        model: ServedModel,
        settings: EmbeddingServerSettings,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        also_serves: tuple[ServedModel, ...] = (),
        clock: Clock = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.models = {served.model_id: served for served in (model, *also_serves)}
        self.settings = settings
        self.host = host
        emulation = settings.emulation
        self.quotas = QuotaBook(emulation.requests_per_minute, emulation.tokens_per_minute, clock=clock)
        self.latency = LatencySampler(emulation.latency, emulation.seed)
        self._clock = clock
        self._sleep = sleep
        self.batcher = DynamicBatcher(
            model.embed,
            embed_queries=model.embed_queries,
            max_batch=settings.max_batch,
            max_wait_seconds=settings.max_wait_ms / 1000,
        )
        self._lock = threading.Lock()
        self._in_flight = 0
        self._requests = 0
        self._requests_by_lane = dict.fromkeys(Lane, 0)
        self._throttled = 0
        self._throttled_in_flight = 0
        self._httpd = make_server(host, port, self._wsgi, threaded=True, request_handler=_RequestHandler)
        self._thread: threading.Thread | None = None
        self.reranker = StandInReranker()
        self._reranks = 0
        self._converses = 0
        self._converse_streams = 0
        # Bedrock's batch inference control plane and its job runner (local.embedding_server.batch_jobs).
        self.batch_jobs = BatchJobRunner(
            server_embedder(self.models, lambda text: self.batcher.submit(text, lane=Lane.STANDARD))
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        serve = {"poll_interval": STOP_POLL_SECONDS}
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs=serve, name="embedding-http")
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self.batcher.close()
        self.batch_jobs.close()

    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counters = {
                "requests": self._requests,
                "requests_by_lane": {lane.value: count for lane, count in self._requests_by_lane.items()},
                "throttled": self._throttled,
                "throttled_in_flight": self._throttled_in_flight,
                "in_flight": self._in_flight,
                "reranks": self._reranks,
                "converses": self._converses,
                "converse_streams": self._converse_streams,
            }
        return {
            "model_id": self.model.model_id,
            "model_ids": sorted(self.models),
            "settings": {
                "intra_op_threads": self.settings.intra_op_threads,
                "max_batch": self.settings.max_batch,
                "max_wait_ms": self.settings.max_wait_ms,
                "max_in_flight": self.settings.max_in_flight,
                "queue_timeout_seconds": self.settings.queue_timeout_seconds,
            },
            **counters,
            "emulation": self.settings.emulation.as_dict(),
            "quota": self.quotas.stats(),
            "latency": self.latency.stats(),
            "batcher": self.batcher.stats(),
        }

    # -- HTTP ---------------------------------------------------------------------------------

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        request = Request(environ)
        request_id = str(uuid.uuid4())
        try:
            response = self._answer(request, request_id)
        except BedrockError as error:
            response = _error_response(error, request_id)
        except Exception:  # a bug here must reach the client as Bedrock's 500, not a dropped connection
            LOG.exception("%s %s failed", request.method, request.path)
            internal = BedrockError(HTTPStatus.INTERNAL_SERVER_ERROR, "InternalServerException", "internal error")
            response = _error_response(internal, request_id)
        return response(environ, start_response)

    def _answer(self, request: Request, request_id: str) -> Response:
        started = time.perf_counter()
        if (request.content_length or 0) > MAX_BODY_BYTES:
            raise validation_error(f"request body of {request.content_length} bytes is too large")
        body = request.get_data()
        # The raw target: a job's ARN in the path holds an encoded "/".
        raw_path = str(request.environ.get("REQUEST_URI") or request.full_path)
        try:
            job_answer = self.batch_jobs.route(request.method, raw_path, body)
        except BatchApiError as error:
            raise BedrockError(error.status, error.code, error.message) from None
        if job_answer is not None:
            return _json_response(HTTPStatus.OK, job_answer, {"x-amzn-RequestId": request_id})
        try:
            endpoint, arguments = _ROUTES.bind_to_environ(request.environ).match()
        except HTTPException:
            if request.method == "POST":
                raise BedrockError(
                    HTTPStatus.NOT_FOUND, "UnknownOperationException", f"no operation at {request.path}"
                ) from None
            return _json_response(HTTPStatus.NOT_FOUND, {"message": f"no resource at {request.path}"}, {})
        if endpoint == "ping":
            return _json_response(HTTPStatus.OK, {"status": "healthy"}, {})
        if endpoint == "stats":
            return _json_response(HTTPStatus.OK, self.stats(), {})
        if endpoint == "rerank":
            headers = {"x-amzn-RequestId": request_id, StandInReranker.HEADER: self.reranker.scorer.name}
            return _json_response(HTTPStatus.OK, self.rerank(body), headers)
        if endpoint == "converse":
            payload = self.converse(str(arguments["model_id"]), body, started)
            headers = {"x-amzn-RequestId": request_id, StandInAnswerModel.HEADER: StandInAnswerModel.NAME}
            return _json_response(HTTPStatus.OK, payload, headers)
        if endpoint == "converse_stream":
            # Validated and answered before the first byte: an invalid request is a JSON error, as Bedrock's.
            payload = self.converse(str(arguments["model_id"]), body, started, streamed=True)
            headers = {"x-amzn-RequestId": request_id, StandInAnswerModel.HEADER: StandInAnswerModel.NAME}
            return Response(StandInAnswerModel.events(payload), 200, headers, content_type=eventstream.CONTENT_TYPE)
        lane = Lane(arguments.get("lane") or Lane.STANDARD)
        payload, tokens = self.invoke(str(arguments["model_id"]), body, lane)
        headers = {
            "x-amzn-RequestId": request_id,
            "X-Amzn-Bedrock-Input-Token-Count": str(tokens),
            "X-Amzn-Bedrock-Invocation-Latency": str(int((time.perf_counter() - started) * 1000)),
        }
        return _json_response(HTTPStatus.OK, payload, headers)

    def converse(self, model_id: str, body: bytes, started: float, *, streamed: bool = False) -> dict[str, Any]:
        """One ``Converse`` (``streamed``: ``ConverseStream``'s answer): the response body, or a BedrockError."""
        with self._lock:
            if streamed:
                self._converse_streams += 1
            else:
                self._converses += 1
        return StandInAnswerModel.converse(model_id, body, started)

    def rerank(self, body: bytes) -> dict[str, Any]:
        """One ``Rerank``: the response body, or a BedrockError."""
        with self._lock:
            self._reranks += 1
        return self.reranker.rerank(body)

    def invoke(self, model_id: str, body: bytes, lane: Lane = Lane.STANDARD) -> tuple[dict[str, Any], int]:
        """One ``InvokeModel``: the response body and the input's token count, or a BedrockError.

        In order: the model id, the in-flight limit, the body and the input limit, the quotas (a
        refused request spends none), then the vector, answered no sooner than the drawn latency."""
        model = self.models.get(model_id)
        if model is None:
            raise BedrockError(
                HTTPStatus.NOT_FOUND,
                "ResourceNotFoundException",
                f"Model {model_id} not found: this local server serves {', '.join(sorted(self.models))}",
            )
        with self._lock:
            self._requests += 1
            self._requests_by_lane[lane] += 1
            if self._in_flight >= self.settings.max_in_flight:
                self._throttled += 1
                self._throttled_in_flight += 1
                raise BedrockError(
                    HTTPStatus.TOO_MANY_REQUESTS,
                    "ThrottlingException",
                    "Too many requests, please wait before trying again.",
                )
            self._in_flight += 1
        try:
            text, dimensions, normalize = self._parse(model, body)
            tokens = model.count_tokens(text)
            if tokens > model.max_input_tokens:
                raise validation_error(
                    f"400 Bad Request: Too many input tokens. Max input tokens: {model.max_input_tokens}, "
                    f"request input token count: {tokens}"
                )
            refusal = self.quotas.admit(model.model_id, tokens) if self.quotas.enforced else None
            if refusal is not None:
                with self._lock:
                    self._throttled += 1
                raise BedrockError(HTTPStatus.TOO_MANY_REQUESTS, "ThrottlingException", refusal.message)
            admitted_at = self._clock()
            latency = self.latency.next_seconds()
            if model.vector is not None:
                embedding = model.vector(text, dimensions, normalize)
            else:
                deadline = time.monotonic() + self.settings.queue_timeout_seconds
                try:
                    embedding = self.batcher.submit(text, deadline, lane).result()
                except QueueTimeout as timeout:
                    raise BedrockError(
                        HTTPStatus.REQUEST_TIMEOUT,
                        "ModelTimeoutException",
                        f"The model did not answer in time: {timeout}",
                    ) from None
            remaining = latency - (self._clock() - admitted_at)
            if remaining > 0:
                self._sleep(remaining)
        finally:
            with self._lock:
                self._in_flight -= 1
        # MiniLM's vectors are unit length by construction (sentence-transformers ends the model with a
        # Normalize layer), so "normalize": false gets the same vector.
        return {"embedding": embedding, "inputTextTokenCount": tokens}, tokens

    def _parse(self, model: ServedModel, body: bytes) -> tuple[str, int, bool]:
        """The request's text, vector size and normalize flag, or a ValidationException."""
        try:
            request = json.loads(body)
        except ValueError:
            raise validation_error("Malformed input request, please reformat your input and try again.") from None
        if not isinstance(request, dict):
            raise validation_error("Malformed input request: expected type: JSONObject, please reformat your input.")
        extraneous = sorted(set(request) - _REQUEST_KEYS)
        if extraneous:
            raise validation_error(f"Malformed input request: extraneous key [{extraneous[0]}] is not permitted")
        text = request.get("inputText")
        if not isinstance(text, str):
            raise validation_error("Malformed input request: required key [inputText] not found")
        if not text:
            raise validation_error("Malformed input request: expected minLength: 1, actual: 0")
        if len(text) > MAX_INPUT_CHARS:
            raise validation_error(
                f"Malformed input request: expected maxLength: {MAX_INPUT_CHARS}, actual: {len(text)}, "
                "please reformat your input and try again."
            )
        dimensions = request.get("dimensions", model.dimension)
        if dimensions not in model.dimensions or isinstance(dimensions, bool):
            raise validation_error(
                f"Malformed input request: dimensions {dimensions!r} is not valid for {model.model_id}: "
                f"{' or '.join(str(size) for size in model.dimensions)} only"
            )
        normalize = request.get("normalize", True)
        if not isinstance(normalize, bool):
            raise validation_error("Malformed input request: normalize must be a boolean")
        return text, int(dimensions), normalize


class _RequestHandler(WSGIRequestHandler):
    # Headers and body go out in two writes: with Nagle's algorithm on, the body waited for the
    # client's delayed ACK of the headers (docs/benchmarks.md).
    disable_nagle_algorithm = True

    def log(self, type: str, message: str, *args: Any) -> None:
        LOG.debug("%s " + message, self.address_string(), *args)


def _json_response(status: int, payload: dict[str, Any], headers: dict[str, str]) -> Response:
    return Response(json.dumps(payload), status, headers, content_type="application/json")


def _error_response(error: BedrockError, request_id: str) -> Response:
    headers = {
        "x-amzn-ErrorType": f"{error.code}:http://internal.amazon.com/coral/com.amazon.bedrock/",
        "x-amzn-RequestId": request_id,
    }
    return _json_response(error.status, {"message": error.message}, headers)
