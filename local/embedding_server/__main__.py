"""``python -m local.embedding_server [--host H] [--port P] [--profile bedrock] ...``: serve until
SIGTERM or SIGINT.

When it listens it prints one line, ``READY {"port": ..., "pid": ...}``, on stdout (the local stack
reads the port from it); settings come from the environment (:mod:`local.embedding_server.settings`),
and the Bedrock emulation's options on the command line override their environment variables.
A malformed setting stops it before it listens, with the variable or option named.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading

from local.embedding_server.server import EmbeddingServer, ServedModel
from local.embedding_server.settings import PROFILES, EmbeddingServerSettings, Vectors

READY_PREFIX = "READY "

#: The emulation's command-line options and the environment variables they override.
_EMULATION_OPTIONS = {
    "profile": "LOCAL_EMBEDDING_PROFILE",
    "requests_per_minute": "LOCAL_EMBEDDING_RPM",
    "tokens_per_minute": "LOCAL_EMBEDDING_TPM",
    "latency": "LOCAL_EMBEDDING_LATENCY",
    "seed": "LOCAL_EMBEDDING_SEED",
    "vectors": "LOCAL_EMBEDDING_VECTORS",
}


def settings_from(args: argparse.Namespace, environ: dict[str, str]) -> EmbeddingServerSettings:
    """The environment's settings with the command line's emulation options over them."""
    overridden = dict(environ)
    given = {}
    for option, variable in _EMULATION_OPTIONS.items():
        value = getattr(args, option)
        if value is not None:
            overridden[variable] = str(value)
            given[variable] = "--" + option.replace("_", "-")
    try:
        return EmbeddingServerSettings.from_env(overridden)
    except ValueError as exc:
        message = str(exc)
        for variable, flag in given.items():  # name what the user typed
            message = message.replace(variable, flag)
        raise ValueError(message) from None


def served_models(settings: EmbeddingServerSettings) -> tuple[ServedModel, tuple[ServedModel, ...]]:
    """The model the server serves first and the others: the local MiniLM, or, with deterministic
    vectors, the local id and Titan V2 without any model loaded."""
    if settings.emulation.vectors is Vectors.DETERMINISTIC:
        from local.embedding_server.deterministic import deterministic_models

        first, *others = deterministic_models()
        return first, tuple(others)
    from local.embedding_server.model import local_minilm  # loads onnxruntime and the model

    return local_minilm(settings), ()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m local.embedding_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    emulation = parser.add_argument_group("Bedrock emulation (each overrides its LOCAL_EMBEDDING_* variable)")
    emulation.add_argument("--profile", help=f"{', '.join(PROFILES)} (LOCAL_EMBEDDING_PROFILE)")
    emulation.add_argument("--requests-per-minute", help="per model, or off (LOCAL_EMBEDDING_RPM)")
    emulation.add_argument("--tokens-per-minute", help="per model, or off (LOCAL_EMBEDDING_TPM)")
    emulation.add_argument(
        "--latency", help="none, fixed:<ms> or lognormal:median=<ms>,p95=<ms> (LOCAL_EMBEDDING_LATENCY)"
    )
    emulation.add_argument("--seed", help="the latency generator's seed (LOCAL_EMBEDDING_SEED)")
    emulation.add_argument("--vectors", help=f"{', '.join(Vectors)} (LOCAL_EMBEDDING_VECTORS)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        settings = settings_from(args, dict(os.environ))
    except ValueError as exc:
        parser.error(str(exc))  # exits 2 with the message on stderr
    model, others = served_models(settings)
    server = EmbeddingServer(model, settings, host=args.host, port=args.port, also_serves=others)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server.start()
    print(READY_PREFIX + json.dumps({"port": server.port, "pid": os.getpid()}), flush=True)
    logging.getLogger("local.embedding_server").info(
        "serving %s on %s (%s)", ", ".join(server.models), server.url, settings
    )
    if settings.emulation.vectors is Vectors.DETERMINISTIC:
        logging.getLogger("local.embedding_server").warning(
            "deterministic vectors: no model runs, and retrieval quality is meaningless"
        )
    logging.getLogger("local.embedding_server").info(
        "Rerank (%s) answers with a stand-in scorer: %s",
        ", ".join(server.reranker.model_ids),
        server.reranker.scorer.name,
    )
    stop.wait()
    logging.getLogger("local.embedding_server").info("stopping: %s", json.dumps(server.stats()))
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
