"""Versions, Maven coordinates, on-disk layout and environment knobs of the local OpenSearch."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

OPENSEARCH_VERSION = "2.19.1"
KNN_VERSION = "2.19.1.0"

# Maven Central coordinates (groupId:artifactId:version[:type]).
DISTRIBUTION = f"org.opensearch.distribution.integ-test-zip:opensearch:{OPENSEARCH_VERSION}:zip"
KNN_PLUGIN = f"org.opensearch.plugin:opensearch-knn:{KNN_VERSION}:zip"

# maven-dependency-plugin pinned (Maven 3.8's CLI default is the 2.8 from 2013).
DEPENDENCY_PLUGIN_VERSION = "3.6.1"


@dataclass(frozen=True)
class Module:
    """A module that the integ-test zip lacks, assembled from its jar and runtime dependencies."""

    name: str
    group_id: str
    artifact_id: str
    classname: str
    description: str
    security_policy: str


_PAINLESS_POLICY = """\
grant {
  // needed to generate runtime classes
  permission java.lang.RuntimePermission "createClassLoader";

  // needed to find the classloader to load whitelisted classes from
  permission java.lang.RuntimePermission "getClassLoader";
};
"""

_REINDEX_POLICY = """\
grant {
  // reindex opens socket connections using the rest client
  permission java.net.SocketPermission "*", "connect";
};

grant codeBase "${codebase.opensearch-rest-client}" {
  // rest client uses system properties which gets the default proxy
  permission java.net.NetPermission "getProxySelector";
};

grant codeBase "${codebase.httpasyncclient}" {
  // rest client uses system properties which gets the default proxy
  permission java.net.NetPermission "getProxySelector";
};
"""

# Policies and class names as in OpenSearch 2.19.1's modules/*/src/main/plugin-metadata and the jars.
MODULES: tuple[Module, ...] = (
    Module(
        name="lang-painless",
        group_id="org.opensearch.plugin",
        artifact_id="lang-painless",
        classname="org.opensearch.painless.PainlessPlugin",
        description="An easy, safe and fast scripting language for OpenSearch",
        security_policy=_PAINLESS_POLICY,
    ),
    Module(
        name="reindex",
        group_id="org.opensearch.plugin",
        artifact_id="reindex-client",
        classname="org.opensearch.index.reindex.ReindexPlugin",
        description="The Reindex module adds APIs to reindex from one index to another or update documents in place.",
        security_policy=_REINDEX_POLICY,
    ),
)

HOST = "127.0.0.1"
HTTP_PORT = 9200
DEFAULT_URL = f"http://{HOST}:{HTTP_PORT}"
CLUSTER_NAME = "rag-ingest-local"
SERVICE_USER = "opensearch"
DEFAULT_HEAP = "512m"
DEFAULT_START_TIMEOUT_S = 120.0

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Layout:
    """Where everything lives under ``.local/opensearch/``."""

    base: Path

    @property
    def m2(self) -> Path:
        """Maven repository used for the downloads (kept, so a reinstall needs no network)."""
        return self.base / "m2"

    @property
    def build(self) -> Path:
        """Generated Maven project and the artifacts it copies out of the repository."""
        return self.base / "build"

    @property
    def downloads(self) -> Path:
        return self.build / "artifacts"

    @property
    def home(self) -> Path:
        return self.base / f"opensearch-{OPENSEARCH_VERSION}"

    @property
    def config(self) -> Path:
        return self.home / "config"

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def logs(self) -> Path:
        return self.base / "logs"

    @property
    def tmp(self) -> Path:
        return self.base / "tmp"

    @property
    def pidfile(self) -> Path:
        return self.base / "opensearch.pid"

    @property
    def server_log(self) -> Path:
        return self.logs / f"{CLUSTER_NAME}.log"

    @property
    def console_log(self) -> Path:
        """stdout/stderr of the launcher: errors that happen before logging is set up land here."""
        return self.logs / "console.log"

    @property
    def marker(self) -> Path:
        """Written last by a successful install."""
        return self.base / ".installed.json"


def layout() -> Layout:
    # Resolved: a git worktree whose .local/opensearch links to the main checkout's install finds the
    # server by the same path.home its command line carries.
    return Layout(base=(REPO_ROOT / ".local" / "opensearch").resolve())


def external_url() -> str | None:
    """``OPENSEARCH_URL`` if set: then nothing is installed, started or stopped locally."""
    url = os.environ.get("OPENSEARCH_URL", "").strip()
    return url.rstrip("/") or None


def server_url() -> str:
    return external_url() or DEFAULT_URL


def heap_size() -> str:
    return os.environ.get("OPENSEARCH_HEAP", "").strip() or DEFAULT_HEAP


def start_timeout() -> float:
    raw = os.environ.get("OPENSEARCH_START_TIMEOUT", "").strip()
    return float(raw) if raw else DEFAULT_START_TIMEOUT_S
