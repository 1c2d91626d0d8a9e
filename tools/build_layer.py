"""Build the shared Lambda layer (``.build/layer``) and the MCP function's (``.build/mcp-layer``) without Docker.

The shared layer: the domain package (``layers/common/python/rag_ingest``) and its dependencies
(``layers/common/requirements.txt``) as manylinux wheels for CPython 3.13 on ``functions.architecture``,
the binaries the Lambda runtime loads. The MCP layer: the SDK (``layers/mcp/requirements.txt``, resolved
against the shared layer's versions, which it leaves out) and the client's tool modules.
Idempotent: a stamp per layer holds hashes of its inputs, and only the part that changed is redone
(dependencies, or the sources copied in). Each layer's CycloneDX SBOM (``.build/*.cdx.json``) is written
beside it from what it holds, again when its dependencies are (docs/security.md). Run: ``make layer``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = ROOT / ".build"
LAYER_DIR = BUILD_DIR / "layer"
SITE_DIR = LAYER_DIR / "python"
STAMP_FILE = BUILD_DIR / "layer.stamp.json"
LOCK_FILE = BUILD_DIR / "layer.lock"
PACKAGE_SRC = ROOT / "layers" / "common" / "python" / "rag_ingest"
REQUIREMENTS = ROOT / "layers" / "common" / "requirements.txt"
MCP_LAYER_DIR = BUILD_DIR / "mcp-layer"
MCP_SITE_DIR = MCP_LAYER_DIR / "python"
MCP_STAMP_FILE = BUILD_DIR / "mcp-layer.stamp.json"
MCP_REQUIREMENTS = ROOT / "layers" / "mcp" / "requirements.txt"
CLIENT_SRC = ROOT / "client" / "rag_ingest_client"
# The client modules the MCP function imports: the tools and the error type they catch (docs/mcp.md).
MCP_CLIENT_MODULES = ("__init__.py", "http.py", "mcp_server.py")
CDK_JSON = ROOT / "cdk.json"
# The software bills of materials (CycloneDX JSON), beside the layers they describe.
SBOM_FILE = BUILD_DIR / "layer.cdx.json"
MCP_SBOM_FILE = BUILD_DIR / "mcp-layer.cdx.json"

# The wheel platform of each Lambda architecture (infra/config.py FunctionsConfig.architecture).
WHEEL_PLATFORMS = {"x86_64": "manylinux2014_x86_64", "arm64": "manylinux2014_aarch64"}
DEFAULT_ARCHITECTURE = "x86_64"


def pip_platform_args(architecture: str = DEFAULT_ARCHITECTURE) -> tuple[str, ...]:
    """pip's target: the Lambda runtime (python3.13 on ``architecture``) these wheels must load in."""
    if architecture not in WHEEL_PLATFORMS:
        raise LayerBuildError(f"unknown architecture {architecture!r}: use one of {', '.join(WHEEL_PLATFORMS)}")
    return (
        "--platform",
        WHEEL_PLATFORMS[architecture],
        "--implementation",
        "cp",
        "--python-version",
        "3.13",
        "--only-binary=:all:",
    )


def configured_architecture(cdk_json: Path = CDK_JSON) -> str:
    """``functions.architecture`` of cdk.json's ``rag-ingest`` context (x86_64 when unset)."""
    try:
        context: Any = json.loads(cdk_json.read_text()).get("context", {}).get("rag-ingest", {})
    except (OSError, ValueError):
        return DEFAULT_ARCHITECTURE
    functions = context.get("functions", {}) if isinstance(context, dict) else {}
    return (
        str(functions.get("architecture", DEFAULT_ARCHITECTURE))
        if isinstance(functions, dict)
        else DEFAULT_ARCHITECTURE
    )


# Bytecode compiled by the host interpreter (3.11) would be ignored by 3.13, so skip it; no
# compilation also keeps the asset hash stable across rebuilds.
PIP_EXTRA_ARGS: tuple[str, ...] = ("--no-compile", "--disable-pip-version-check", "--no-input", "--quiet")
# Provided by the Lambda runtime, though dependencies drag them in (aws-xray-sdk needs botocore).
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer")
# Distributions the requirements drag in that no function imports; what each is and what the
# layer saves: docs/deploy.md, "The layer" (tests/unit/test_layer_contents.py guards the list).
UNIMPORTED_DISTRIBUTIONS = (
    "huggingface_hub",
    "hf_xet",
    "fsspec",
    "filelock",
    "httpx2",
    "httpcore2",
    "h11",
    "anyio",
    "truststore",
    "click",
    "pyyaml",
    "tqdm",
    "opensearch_protobufs",
    "grpcio",
    "protobuf",
)
# Bump when the build logic changes so existing stamps are invalidated.
BUILD_LOGIC_VERSION = "2"


class LayerBuildError(RuntimeError):
    """The layer could not be built (pip failed, sources missing)."""


# The command line and the retrievers are a distribution of their own (client/), never in the layer:
# a change to them neither rebuilds the layer nor changes the functions' asset.
def _iter_source_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


def deps_hash(architecture: str = DEFAULT_ARCHITECTURE) -> str:
    digest = hashlib.sha256()
    digest.update(BUILD_LOGIC_VERSION.encode())
    digest.update("\0".join(pip_platform_args(architecture) + RUNTIME_PROVIDED + UNIMPORTED_DISTRIBUTIONS).encode())
    digest.update(REQUIREMENTS.read_bytes())
    return digest.hexdigest()


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in _iter_source_files(PACKAGE_SRC):
        digest.update(path.relative_to(PACKAGE_SRC).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _read_stamp() -> dict[str, str]:
    try:
        data = json.loads(STAMP_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    # Parallel test sessions or a synth next to `make layer` must not build into the same dir.
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _install_dependencies(target: Path, architecture: str) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        *pip_platform_args(architecture),
        *PIP_EXTRA_ARGS,
        "--target",
        str(target),
        "-r",
        str(REQUIREMENTS),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise LayerBuildError(f"pip install failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    for name in RUNTIME_PROVIDED:
        shutil.rmtree(target / name, ignore_errors=True)
        for info in target.glob(f"{name}-*.dist-info"):
            shutil.rmtree(info)
    for name in UNIMPORTED_DISTRIBUTIONS:
        _remove_distribution(target, name)
    # Console scripts carry this host's interpreter path in their shebang: useless in Lambda.
    shutil.rmtree(target / "bin", ignore_errors=True)


def _remove_distribution(site: Path, name: str) -> None:
    """Delete every file a distribution installed (its dist-info's RECORD), then the folders left
    empty: a namespace folder shared with another distribution (``google/``) keeps the other's files."""
    infos = [info for info in site.glob("*.dist-info") if info.name.split("-")[0].lower() == name.lower()]
    for info in infos:
        record = info / "RECORD"
        files = [line.split(",")[0] for line in record.read_text().splitlines() if line] if record.exists() else []
        folders: set[Path] = set()
        for relative in files:
            path = (site / relative).resolve()
            if site.resolve() not in path.parents:
                continue  # a RECORD entry outside the layer (../../bin/...) is not ours to delete
            path.unlink(missing_ok=True)
            folders.update(parent for parent in path.parents if site.resolve() in parent.parents)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            for cache in folder.glob("__pycache__"):
                shutil.rmtree(cache, ignore_errors=True)
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty
        shutil.rmtree(info, ignore_errors=True)


def _copy_package(site: Path) -> None:
    if not (PACKAGE_SRC / "__init__.py").is_file():
        raise LayerBuildError(f"domain package not found at {PACKAGE_SRC}")
    destination = site / PACKAGE_SRC.name
    shutil.rmtree(destination, ignore_errors=True)
    shutil.copytree(PACKAGE_SRC, destination, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _distribution_versions(site: Path) -> dict[str, str]:
    """``{name: version}`` of the distributions installed in ``site`` (names normalised as pip does)."""
    found = {}
    for info in site.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        found[name.lower().replace("_", "-").replace(".", "-")] = version
    return found


def mcp_deps_hash(architecture: str = DEFAULT_ARCHITECTURE) -> str:
    digest = hashlib.sha256()
    digest.update(deps_hash(architecture).encode())
    digest.update(MCP_REQUIREMENTS.read_bytes())
    return digest.hexdigest()


def mcp_source_hash() -> str:
    digest = hashlib.sha256()
    for name in MCP_CLIENT_MODULES:
        digest.update(name.encode() + b"\0" + (CLIENT_SRC / name).read_bytes() + b"\0")
    return digest.hexdigest()


def _copy_client_modules(site: Path) -> None:
    client = site / CLIENT_SRC.name
    shutil.rmtree(client, ignore_errors=True)
    client.mkdir()
    for name in MCP_CLIENT_MODULES:
        shutil.copy2(CLIENT_SRC / name, client / name)


def _build_mcp_layer(architecture: str, force: bool) -> None:
    """The MCP layer: its requirements resolved against the shared layer's versions (a constraints
    file), minus every distribution the shared layer already has, plus the client's tool modules
    (copied again alone when only they changed)."""
    try:
        stamp = {} if force else json.loads(MCP_STAMP_FILE.read_text())
    except (OSError, ValueError):
        stamp = {}
    wanted = {"deps": mcp_deps_hash(architecture), "source": mcp_source_hash(), "architecture": architecture}
    if stamp == wanted and MCP_SITE_DIR.is_dir():
        return
    if stamp.get("deps") == wanted["deps"] and MCP_SITE_DIR.is_dir():
        _copy_client_modules(MCP_SITE_DIR)
        MCP_STAMP_FILE.write_text(json.dumps(wanted, indent=2) + "\n")
        return
    shared = _distribution_versions(SITE_DIR)
    staging = BUILD_DIR / "mcp-layer.staging"
    shutil.rmtree(staging, ignore_errors=True)
    site = staging / "python"
    site.mkdir(parents=True)
    constraints = staging / "constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(shared.items())))
    command = [sys.executable, "-m", "pip", "install", *pip_platform_args(architecture), *PIP_EXTRA_ARGS]
    command += ["--target", str(site), "-r", str(MCP_REQUIREMENTS), "-c", str(constraints)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise LayerBuildError(f"pip install (MCP layer) failed ({result.returncode}):\n{result.stderr}")
    constraints.unlink()
    for info in list(site.glob("*.dist-info")):
        name = info.name.removesuffix(".dist-info").partition("-")[0]
        if name.lower().replace("_", "-").replace(".", "-") in shared or name.lower() in RUNTIME_PROVIDED:
            _remove_distribution(site, name)
    shutil.rmtree(site / "bin", ignore_errors=True)
    _copy_client_modules(site)
    MCP_STAMP_FILE.unlink(missing_ok=True)
    MCP_SBOM_FILE.unlink(missing_ok=True)
    shutil.rmtree(MCP_LAYER_DIR, ignore_errors=True)
    os.replace(staging, MCP_LAYER_DIR)
    MCP_STAMP_FILE.write_text(json.dumps(wanted, indent=2) + "\n")


def write_sbom(site: Path, output: Path, pyproject: Path) -> None:
    """cyclonedx-py's SBOM of the distributions installed in ``site``, ``pyproject``'s project as its root.

    cyclonedx-py reads the ``sys.path`` of the interpreter it is given; this one has the layer and
    the standard library on it, nothing of the venv (``-S``), as the Lambda runtime has ``/opt/python``.
    """
    with tempfile.TemporaryDirectory(prefix="sbom-env-") as scratch:
        interpreter = Path(scratch) / "bin" / "python"
        interpreter.parent.mkdir()
        launch = f"PYTHONPATH={shlex.quote(str(site))} exec {shlex.quote(sys.executable)} -S"
        interpreter.write_text(f'#!/bin/sh\n{launch} "$@"\n')
        interpreter.chmod(0o755)
        partial = output.with_suffix(".partial")
        command = [sys.executable, "-m", "cyclonedx_py", "environment", "--pyproject", str(pyproject)]
        command += ["--output-reproducible", "--output-file", str(partial), scratch]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise LayerBuildError(f"cyclonedx-py failed ({result.returncode}) for {site}:\n{result.stderr}")
    os.replace(partial, output)


def _write_missing_sboms() -> None:
    # A rebuild of a layer's dependencies deletes its SBOM first, so a missing one is the only signal.
    if not SBOM_FILE.exists():
        write_sbom(SITE_DIR, SBOM_FILE, ROOT / "pyproject.toml")
    if not MCP_SBOM_FILE.exists():
        write_sbom(MCP_SITE_DIR, MCP_SBOM_FILE, CLIENT_SRC.parent / "pyproject.toml")


def layer_size_bytes(path: Path = LAYER_DIR) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_layer(force: bool = False, architecture: str | None = None) -> Path:
    """Bring ``.build/layer`` up to date with its inputs and return its path.

    ``architecture`` defaults to cdk.json's ``functions.architecture``; the stamp records it, and
    synth refuses a layer built for another architecture than the functions'.
    """
    architecture = architecture or configured_architecture()
    with _locked():
        stamp = {} if force else _read_stamp()
        wanted = {"deps": deps_hash(architecture), "source": source_hash(), "architecture": architecture}
        if stamp == wanted and SITE_DIR.is_dir():
            _build_mcp_layer(architecture, force)
            _write_missing_sboms()
            return LAYER_DIR
        if stamp.get("deps") != wanted["deps"] or not SITE_DIR.is_dir():
            # Build beside the old layer and swap, so a failed pip run leaves no half layer.
            staging = BUILD_DIR / "layer.staging"
            shutil.rmtree(staging, ignore_errors=True)
            _install_dependencies(staging / "python", architecture)
            _copy_package(staging / "python")
            STAMP_FILE.unlink(missing_ok=True)
            SBOM_FILE.unlink(missing_ok=True)
            shutil.rmtree(LAYER_DIR, ignore_errors=True)
            os.replace(staging, LAYER_DIR)
        else:
            _copy_package(SITE_DIR)
        STAMP_FILE.write_text(json.dumps(wanted, indent=2) + "\n")
        _build_mcp_layer(architecture, force)
        _write_missing_sboms()
    return LAYER_DIR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--force", action="store_true", help="rebuild even if the inputs did not change")
    parser.add_argument(
        "--architecture", choices=sorted(WHEEL_PLATFORMS), help="default: cdk.json functions.architecture"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        path = build_layer(force=args.force, architecture=args.architecture)
    except LayerBuildError as error:
        print(f"build_layer: {error}", file=sys.stderr)
        return 1
    size_mb = layer_size_bytes(path) / 1_000_000
    print(f"layer ready: {path.relative_to(ROOT)} ({size_mb:.1f} MB unzipped, {time.monotonic() - started:.1f}s)")
    mcp_mb = layer_size_bytes(MCP_LAYER_DIR) / 1_000_000
    print(f"MCP layer ready: {MCP_LAYER_DIR.relative_to(ROOT)} ({mcp_mb:.1f} MB unzipped)")
    print(f"SBOMs (CycloneDX): {SBOM_FILE.relative_to(ROOT)}, {MCP_SBOM_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
