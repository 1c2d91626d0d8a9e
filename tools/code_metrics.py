"""Size figures of the codebase: the largest modules, the longest module docstrings and comment
runs, the lines under ``local/``, and the tests' assert statements (docs/benchmarks.md).

Reads source files only (``ast`` and ``tokenize``); imports nothing of the project.
Usage: ``python -m tools.code_metrics [--top N]``.
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE_ROOTS = ("app.py", "infra", "functions", "layers/common/python", "local", "client", "tools", "bench", "eval")
SKIPPED_PARTS = {".venv", "node_modules", "cdk.out", ".build", "__pycache__", ".local"}


def python_files(*roots: str) -> Iterator[Path]:
    for root in roots:
        path = REPO / root
        candidates = [path] if path.is_file() else sorted(path.rglob("*.py")) if path.is_dir() else []
        for candidate in candidates:
            if not SKIPPED_PARTS.intersection(candidate.relative_to(REPO).parts):
                yield candidate


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def module_docstring_lines(path: Path) -> int:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    return len(docstring.splitlines()) if docstring else 0


def comment_runs(path: Path) -> list[tuple[int, int]]:
    """(first line, length) of every run of consecutive comment-only lines."""
    runs: list[tuple[int, int]] = []
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT or token.line.strip() != token.string.strip():
            continue
        row = token.start[0]
        if runs and row == runs[-1][0] + runs[-1][1]:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((row, 1))
    return runs


def longest_comment_run(path: Path) -> tuple[int, int]:
    """(lines, first line) of the longest run of consecutive comment-only lines."""
    start, length = max(comment_runs(path), key=lambda run: run[1], default=(0, 0))
    return length, start


def assert_count(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(isinstance(node, ast.Assert) for node in ast.walk(tree))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    sources = list(python_files(*SOURCE_ROOTS))
    rel = {path: str(path.relative_to(REPO)) for path in sources}

    print(f"largest source modules (of {len(sources)}):")
    for path in sorted(sources, key=line_count, reverse=True)[: args.top]:
        print(f"  {line_count(path):5d}  {rel[path]}")
    print("longest module docstrings (lines):")
    for path in sorted(sources, key=module_docstring_lines, reverse=True)[: args.top]:
        print(f"  {module_docstring_lines(path):5d}  {rel[path]}")
    print("longest comment runs (lines):")
    runs = {path: longest_comment_run(path) for path in sources}
    for path in sorted(sources, key=lambda p: runs[p][0], reverse=True)[: args.top]:
        print(f"  {runs[path][0]:5d}  {rel[path]}:{runs[path][1]}")
    local = list(python_files("local"))
    print(f"lines under local/: {sum(map(line_count, local))} in {len(local)} modules")
    tests = list(python_files("tests"))
    test_functions = sum(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
        for path in tests
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    )
    print(f"tests: {test_functions} test functions, {sum(map(assert_count, tests))} assert statements")


if __name__ == "__main__":
    main()
