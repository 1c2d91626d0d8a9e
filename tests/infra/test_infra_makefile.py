"""`make deploy` needs Python and Node only: the Java/Maven install belongs to the local-stack targets.

Reads make's own database (``make -p``), so variables, pattern expansion and every way of naming a
prerequisite are resolved by make itself rather than by a regex over the Makefile.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

import pytest

from infra.paths import ROOT

pytestmark = pytest.mark.infra

# Installing the local stack's Java tools; and anything that needs root (apt, sudo) at all.
JAVA_INSTALL = re.compile(r"openjdk|\bmaven\b")
NEEDS_ROOT = re.compile(r"apt-get|\bapt\b|tools/apt_install\.sh|\bdpkg\b|\bsudo\b")
DEPLOY_TARGETS = ("deploy", "synth", "layer", "install")
LOCAL_STACK_TARGETS = ("opensearch", "stack-up", "demo", "test", "bench", "eval", "burst")


@dataclass
class Rule:
    prerequisites: list[str] = field(default_factory=list)
    recipe: list[str] = field(default_factory=list)


def _make_database() -> dict[str, Rule]:
    """Target -> prerequisites and recipe lines, from ``make -p`` (nothing is run: ``-n``, ``-q``)."""
    make = shutil.which("make")
    assert make is not None, "make is not installed"
    # -q on a target nothing depends on: make prints its database and runs no recipe.
    output = subprocess.run(
        [make, "-p", "-n", "-q", "-R", "-r", "help"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout
    files = output.split("\n# Files\n", 1)[1].split("\n# files hash-table stats", 1)[0]
    rules: dict[str, Rule] = {}
    current: Rule | None = None
    for line in files.splitlines():
        if line.startswith("\t"):
            if current is not None:
                current.recipe.append(line.strip())
            continue
        if not line or line.startswith("#"):
            current = None if not line else current
            continue
        match = re.match(r"^([^\s:=][^:=]*?):(?!=)\s*(.*)$", line)
        if match is None:
            current = None
            continue
        target, prerequisites = match.groups()
        prerequisites = prerequisites.split("|", 1)[0]  # order-only prerequisites count the same
        current = rules.setdefault(target, Rule())
        current.prerequisites.extend(prerequisites.split())
    return rules


def _reachable(rules: dict[str, Rule], start: str) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        target = stack.pop()
        if target in seen:
            continue
        seen.add(target)
        stack.extend(rules.get(target, Rule()).prerequisites)
    return seen


def _java_installers(rules: dict[str, Rule]) -> set[str]:
    return {target for target, rule in rules.items() if any(JAVA_INSTALL.search(line) for line in rule.recipe)}


def _root_installers(rules: dict[str, Rule]) -> set[str]:
    return {target for target, rule in rules.items() if any(NEEDS_ROOT.search(line) for line in rule.recipe)}


@pytest.fixture(scope="module")
def rules() -> dict[str, Rule]:
    return _make_database()


def test_the_java_install_exists_and_is_one_target(rules: dict[str, Rule]) -> None:
    # Guards the other tests: if the parse found no installer, "deploy does not reach it" proves nothing.
    assert _java_installers(rules) == {"local-tools"}


@pytest.mark.parametrize("target", DEPLOY_TARGETS)
def test_deploy_and_synth_do_not_reach_the_java_install(rules: dict[str, Rule], target: str) -> None:
    assert target in rules, f"no '{target}' target in the Makefile"
    reached = _reachable(rules, target)
    forbidden = _java_installers(rules) | _root_installers(rules)
    assert _java_installers(rules) <= _root_installers(rules)  # the Java install is an apt install
    assert not reached & forbidden, f"make {target} reaches {sorted(reached & forbidden)} (Java, Maven or root)"


@pytest.mark.parametrize("target", LOCAL_STACK_TARGETS)
def test_local_stack_targets_install_java_and_maven_first(rules: dict[str, Rule], target: str) -> None:
    assert "local-tools" in _reachable(rules, target), f"make {target} does not install Java/Maven"


@pytest.mark.parametrize("verb", ["deploy", "diff", "destroy"])
def test_deploy_diff_and_destroy_share_one_entry_point(rules: dict[str, Rule], verb: str) -> None:
    """The pinned CDK CLI (npm ci from the lock file) running cdk.json's app, the layer built first."""
    assert rules[verb].recipe == ["$(AWS_TARGET) $(CDK) " + verb + " $(CDK_ARGS)"], rules[verb].recipe
    reached = _reachable(rules, verb)
    assert {"layer", "node-modules", "node-version"} <= reached, reached
    assert any(line.startswith("npm ci") for target in reached for line in rules[target].recipe)


def test_deploy_runs_the_preflight_first(rules: dict[str, Rule]) -> None:
    assert "preflight" in rules["deploy"].prerequisites
    assert any("rag-ingest preflight" in line for line in rules["preflight"].recipe)
