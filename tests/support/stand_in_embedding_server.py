"""A stand-in for ``python -m local.embedding_server`` (no model): the same command line and READY
line, and ``GET /ping`` answering with its pid. The supervisor's unit tests run it."""

from __future__ import annotations

import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from local.embedding_server.__main__ import READY_PREFIX


class PingHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"status": "healthy", "pid": os.getpid()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), PingHandler)
    print(READY_PREFIX + json.dumps({"port": server.server_address[1], "pid": os.getpid()}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
