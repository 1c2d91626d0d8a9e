"""Find a JDK that OpenSearch 2.19 can run on (the integ-test zip bundles none)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from local.opensearch.util import OpenSearchLocalError

# OpenSearch 2.19 supports Java 11-23 (tested on 11, 17, 21). Java 24 removed the SecurityManager
# that OpenSearch 2.x relies on, so a newer default `java` (e.g. a Temurin 25) must not be picked.
MIN_JAVA = 11
MAX_JAVA = 23
PREFERRED = ("/usr/lib/jvm/java-17-openjdk-amd64", "/usr/lib/jvm/java-17-openjdk-arm64")


@dataclass(frozen=True)
class Jdk:
    home: Path
    major: int
    version: str


def _probe(home: Path) -> Jdk | None:
    java = home / "bin" / "java"
    if not os.access(java, os.X_OK):
        return None
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30, check=False).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "([^"]+)"', out)
    if not match:
        return None
    version = match.group(1)
    parts = version.split(".")
    major = int(parts[1]) if parts[0] == "1" else int(re.sub(r"\D.*", "", parts[0]) or 0)
    return Jdk(home=home, major=major, version=version)


def _candidates() -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for var in ("OPENSEARCH_JAVA_HOME", "JAVA_HOME"):
        value = os.environ.get(var, "").strip()
        if value:
            found.append((f"${var}", Path(value)))
    found.extend(("default JDK 17", Path(p)) for p in PREFERRED)
    found.extend(("JDK 17", Path(p)) for p in sorted(glob.glob("/usr/lib/jvm/*17*")))
    on_path = shutil.which("java")
    if on_path:
        found.append(("`java` on PATH", Path(os.path.realpath(on_path)).parent.parent))
    found.extend(("JDK 21", Path(p)) for p in sorted(glob.glob("/usr/lib/jvm/*21*")))
    return found


def find_jdk() -> Jdk:
    """The first supported JDK among $OPENSEARCH_JAVA_HOME, $JAVA_HOME, JDK 17, `java`, JDK 21."""
    rejected: list[str] = []
    seen: set[Path] = set()
    for origin, home in _candidates():
        if home in seen:
            continue
        seen.add(home)
        jdk = _probe(home)
        if jdk is None:
            if origin.startswith("$"):
                rejected.append(f"{origin}={home}: no working bin/java")
            continue
        if MIN_JAVA <= jdk.major <= MAX_JAVA:
            return jdk
        rejected.append(f"{origin}={home}: Java {jdk.version} is outside {MIN_JAVA}-{MAX_JAVA}")
    detail = "; ".join(rejected) or "no JDK found"
    raise OpenSearchLocalError(
        f"no usable JDK for OpenSearch (needs Java {MIN_JAVA}-{MAX_JAVA}, 17 preferred): {detail}. "
        "Install one (Debian: apt-get install openjdk-17-jdk-headless) or set OPENSEARCH_JAVA_HOME."
    )
