"""``install``: fetch, unpack and assemble OpenSearch + lang-painless + reindex + k-NN, and configure it."""

from __future__ import annotations

import datetime as dt
import json
import os
import pwd
import re
import shutil
import stat
import time
import zipfile
from pathlib import Path
from typing import Any

from local.opensearch.java import Jdk, find_jdk
from local.opensearch.maven import archive_path, fetch_all, module_jar_dir
from local.opensearch.settings import (
    CLUSTER_NAME,
    DISTRIBUTION,
    HOST,
    HTTP_PORT,
    KNN_PLUGIN,
    KNN_VERSION,
    MODULES,
    OPENSEARCH_VERSION,
    SERVICE_USER,
    Layout,
    Module,
    external_url,
    layout,
)
from local.opensearch.util import OpenSearchLocalError, human_size, run, say, step, tree_size

_VERSION_SUFFIX = re.compile(r"-\d[^/]*\.jar$")


def _read_marker(paths: Layout) -> dict[str, Any] | None:
    try:
        data = json.loads(paths.marker.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_installed(paths: Layout) -> bool:
    marker = _read_marker(paths)
    return (
        marker is not None
        and marker.get("opensearch") == OPENSEARCH_VERSION
        and marker.get("knn") == KNN_VERSION
        and (paths.home / "bin" / "opensearch").is_file()
    )


def install(paths: Layout | None = None, *, force: bool = False) -> None:
    paths = paths or layout()
    url = external_url()
    if url:
        say(f"OPENSEARCH_URL={url} is set: using that server, nothing to install")
        return
    if is_installed(paths) and not force:
        say(f"already installed: {paths.home} (marker {paths.marker}); nothing to do")
        ensure_service_user(paths)
        return

    started = time.monotonic()
    paths.marker.unlink(missing_ok=True)
    jdk = find_jdk()
    say(f"Java {jdk.version} at {jdk.home}")
    paths.base.mkdir(parents=True, exist_ok=True)

    m2_before = tree_size(paths.m2)
    with step(f"Fetching OpenSearch {OPENSEARCH_VERSION}, k-NN {KNN_VERSION} and module jars with mvn"):
        fetch_all(paths)
    downloaded = tree_size(paths.m2) - m2_before
    for coordinates in (DISTRIBUTION, KNN_PLUGIN):
        archive = archive_path(paths, coordinates)
        say(f"  {coordinates}: {archive.name} {human_size(archive.stat().st_size)}")
    for module in MODULES:
        jars = sorted(module_jar_dir(paths, module).glob("*.jar"))
        size = sum(j.stat().st_size for j in jars)
        say(f"  module {module.name}: {len(jars)} jars {human_size(size)} resolved")
    say(
        f"  downloaded {human_size(downloaded)} into {paths.m2} "
        "(artifacts + Maven plugins; 0 means everything was cached)"
    )

    with step(f"Unpacking {archive_path(paths, DISTRIBUTION).name}"):
        _unpack_distribution(paths)
    for module in MODULES:
        with step(f"Assembling module {module.name}"):
            _assemble_module(paths, module)
    with step("Installing the k-NN plugin with bin/opensearch-plugin"):
        _install_knn(paths, jdk)
    with step("Writing config"):
        write_config(paths)
    ensure_service_user(paths)

    elapsed = time.monotonic() - started
    marker: dict[str, object] = {
        "opensearch": OPENSEARCH_VERSION,
        "knn": KNN_VERSION,
        "modules": [m.name for m in MODULES],
        "java_home": str(jdk.home),
        "installed_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "install_seconds": round(elapsed, 1),
        "downloaded_bytes": downloaded,
        "home_bytes": tree_size(paths.home),
    }
    paths.marker.write_text(json.dumps(marker, indent=2) + "\n")
    shutil.rmtree(paths.downloads, ignore_errors=True)  # copies of what the Maven repository keeps
    say(f"installed in {elapsed:.1f}s: {paths.home} ({human_size(tree_size(paths.home))})")


def _unpack_distribution(paths: Layout) -> None:
    """Extract the zip (keeping the executable bits zipfile would drop) and move it into place."""
    staging = paths.base / ".unpack"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    with zipfile.ZipFile(archive_path(paths, DISTRIBUTION)) as archive:
        for info in archive.infolist():
            target = Path(archive.extract(info, staging))
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                target.chmod(mode)
    unpacked = staging / paths.home.name
    if not (unpacked / "bin" / "opensearch").is_file():
        raise OpenSearchLocalError(f"unexpected layout in {archive_path(paths, DISTRIBUTION)}")
    if (unpacked / "jdk").exists():
        say("  note: the archive bundles a JDK")
    shutil.rmtree(paths.home, ignore_errors=True)
    unpacked.rename(paths.home)
    shutil.rmtree(staging)
    modules = sorted(p.name for p in (paths.home / "modules").iterdir())
    say(f"  {paths.home.name}: bundled modules {modules}, no bundled JDK")


def _jar_base(name: str) -> str:
    return _VERSION_SUFFIX.sub("", name)


def _assemble_module(paths: Layout, module: Module) -> None:
    """modules/<name>/ = the module jar + its runtime deps not already on the server classpath."""
    on_classpath = {_jar_base(p.name) for p in (paths.home / "lib").glob("*.jar")}
    dest = paths.home / "modules" / module.name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    copied: list[str] = []
    skipped: list[str] = []
    for jar in sorted(module_jar_dir(paths, module).glob("*.jar")):
        if _jar_base(jar.name) in on_classpath:
            skipped.append(jar.name)
            continue
        shutil.copy2(jar, dest / jar.name)
        copied.append(jar.name)
    if not any(name.startswith(f"{module.artifact_id}-{OPENSEARCH_VERSION}") for name in copied):
        raise OpenSearchLocalError(f"{module.artifact_id} jar missing from {module_jar_dir(paths, module)}")
    (dest / "plugin-descriptor.properties").write_text(
        "\n".join(
            [
                "# Written by local.opensearch (the module is assembled from Maven Central jars)",
                f"description={module.description}",
                f"version={OPENSEARCH_VERSION}",
                f"name={module.name}",
                f"classname={module.classname}",
                "java.version=11",
                f"opensearch.version={OPENSEARCH_VERSION}",
                "custom.foldername=",
                "extended.plugins=",
                "has.native.controller=false",
                "",
            ]
        )
    )
    (dest / "plugin-security.policy").write_text(module.security_policy)
    say(f"  {dest}: {', '.join(copied)}")
    if skipped:
        say(f"  left out (already in lib/): {', '.join(skipped)}")


def _read_descriptor(zip_path: Path) -> dict[str, str]:
    with zipfile.ZipFile(zip_path) as archive:
        text = archive.read("plugin-descriptor.properties").decode("utf-8")
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def java_env(jdk_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "JAVA_OPTS")}
    env["JAVA_HOME"] = str(jdk_home)
    env["OPENSEARCH_JAVA_HOME"] = str(jdk_home)
    return env


def _install_knn(paths: Layout, jdk: Jdk) -> None:
    zip_path = archive_path(paths, KNN_PLUGIN)
    descriptor = _read_descriptor(zip_path)
    extended = [p.strip() for p in descriptor.get("extended.plugins", "").split(",") if p.strip()]
    say(
        f"  {descriptor.get('name')} {descriptor.get('version')} for OpenSearch "
        f"{descriptor.get('opensearch.version')}, extended.plugins={extended}"
    )
    for parent in extended:
        if not (paths.home / "modules" / parent).is_dir():
            raise OpenSearchLocalError(f"k-NN extends {parent!r} but modules/{parent} was not assembled")
    output = run(
        [str(paths.home / "bin" / "opensearch-plugin"), "install", "--batch", zip_path.resolve().as_uri()],
        cwd=paths.home,
        env=java_env(jdk.home),
        what="opensearch-plugin install opensearch-knn",
    )
    for line in output.splitlines():
        if line.startswith("-> "):
            say(f"  {line}")


def write_config(paths: Layout) -> None:
    """opensearch.yml, and jvm.options with absolute log/data paths (the defaults are cwd-relative)."""
    for directory in (paths.data, paths.logs, paths.tmp):
        directory.mkdir(parents=True, exist_ok=True)
    yml = f"""# Written by `python -m local.opensearch` (re-written on every start; edit settings.py instead).
cluster.name: {CLUSTER_NAME}
node.name: local-1
discovery.type: single-node
network.host: {HOST}
http.port: {HTTP_PORT}
path.data: {paths.data}
path.logs: {paths.logs}
cluster.routing.allocation.disk.threshold_enabled: false
"""
    _write_if_changed(paths.config / "opensearch.yml", yml)
    jvm_options = paths.config / "jvm.options"
    text = jvm_options.read_text()
    text = re.sub(r"(?<=[=:])logs/", f"{paths.logs}/", text)
    text = re.sub(r"(?m)(?<=-XX:HeapDumpPath=)data$", str(paths.data), text)
    _write_if_changed(jvm_options, text)


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def service_account() -> tuple[int, int] | None:
    """(uid, gid) the server runs as when we are root; None when it runs as the current user."""
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam(SERVICE_USER)
    return entry.pw_uid, entry.pw_gid


def ensure_service_user(paths: Layout) -> None:
    """As root: create the ``opensearch`` system user if absent and give it the server's directories."""
    if os.geteuid() != 0:
        return
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        with step(f"Creating system user {SERVICE_USER!r} (OpenSearch refuses to run as root)"):
            run(
                [
                    "useradd",
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--home-dir",
                    str(paths.base),
                    "--shell",
                    "/usr/sbin/nologin",
                    SERVICE_USER,
                ],
                what="useradd",
            )
    account = service_account()
    assert account is not None
    uid, gid = account
    for directory in (paths.home, paths.data, paths.logs, paths.tmp):
        if directory.exists():
            _chown_tree(directory, uid, gid)
    if paths.base.exists():
        os.chown(paths.base, uid, gid)  # the JVM writes its pidfile there
    # the repo checkout must be traversable for the service user
    for parent in paths.base.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            raise OpenSearchLocalError(f"{parent} is not traversable by user {SERVICE_USER!r} (chmod o+x)")


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if st.st_uid != uid or st.st_gid != gid:
                os.chown(path, uid, gid, follow_symlinks=False)
        os.chown(dirpath, uid, gid, follow_symlinks=False)
