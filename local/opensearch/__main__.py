"""``python -m local.opensearch {install,start,stop,status,wait}``."""

from __future__ import annotations

import argparse
import sys

from local.opensearch import install as install_mod
from local.opensearch import server
from local.opensearch.util import PREFIX, OpenSearchLocalError

_EPILOG = """\
environment:
  OPENSEARCH_URL            use this server instead: install/start/stop do nothing, wait/status query it
  OPENSEARCH_HEAP           JVM heap of the local server (default 512m)
  OPENSEARCH_START_TIMEOUT  seconds to wait for cluster health yellow (default 120)
  OPENSEARCH_JAVA_HOME      JDK to run on (default: JDK 17, Java 11-23 accepted)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local.opensearch",
        description="Local single-node OpenSearch 2.19.1 + k-NN on 127.0.0.1:9200, installed from Maven Central.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    install_cmd = commands.add_parser("install", help="fetch and install into .local/opensearch (idempotent)")
    install_cmd.add_argument("--force", action="store_true", help="reinstall even if the marker file exists")
    commands.add_parser("start", help="start in the background (installs first if needed) and wait until ready")
    commands.add_parser("stop", help="stop the server started by `start`")
    commands.add_parser("status", help="running?, version, plugins, RSS (exit 3 when not reachable)")
    wait_cmd = commands.add_parser("wait", help="wait for cluster health yellow")
    wait_cmd.add_argument(
        "--timeout", type=float, default=None, help="seconds (default $OPENSEARCH_START_TIMEOUT or 120)"
    )
    args = parser.parse_args(argv)

    try:
        if args.command == "install":
            install_mod.install(force=args.force)
        elif args.command == "start":
            server.start()
        elif args.command == "stop":
            server.stop()
        elif args.command == "status":
            return server.status()
        elif args.command == "wait":
            server.wait(args.timeout)
    except OpenSearchLocalError as exc:
        print(f"{PREFIX} ERROR: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
