"""``python -m local.embedding_server [--host H] [--port P]``: serve until SIGTERM or SIGINT.

When it listens it prints one line, ``READY {"port": ..., "pid": ...}``, on stdout (the local stack
reads the port from it); settings come from the environment (:mod:`local.embedding_server.settings`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading

from local.embedding_server.model import local_minilm
from local.embedding_server.server import EmbeddingServer
from local.embedding_server.settings import EmbeddingServerSettings

READY_PREFIX = "READY "


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.embedding_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = EmbeddingServerSettings.from_env()
    server = EmbeddingServer(local_minilm(settings), settings, host=args.host, port=args.port)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server.start()
    print(READY_PREFIX + json.dumps({"port": server.port, "pid": os.getpid()}), flush=True)
    logging.getLogger("local.embedding_server").info(
        "serving %s on %s (%s)", server.model.model_id, server.url, settings
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
