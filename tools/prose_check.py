"""Keep the prose in code contract-first: module docstrings of at most 10 lines, comments of at
most 2 consecutive lines. Longer rationale, figures and history belong in docs/ (docs/decisions/).

``python -m tools.prose_check [PATH ...]`` prints each violation and exits 1 if there is one; with
no paths it checks every source module (tests excepted). Reads source only.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tools.code_metrics import REPO, SOURCE_ROOTS, module_docstring_lines, python_files
from tools.code_metrics import comment_runs as _comment_runs

MAX_DOCSTRING_LINES = 10
MAX_COMMENT_LINES = 2


def violations(path: Path) -> list[str]:
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    found = []
    lines = module_docstring_lines(path)
    if lines > MAX_DOCSTRING_LINES:
        found.append(f"{where}:1: module docstring of {lines} lines (at most {MAX_DOCSTRING_LINES})")
    for start, length in _comment_runs(path):
        if length > MAX_COMMENT_LINES:
            found.append(f"{where}:{start}: {length} comment lines in a row (at most {MAX_COMMENT_LINES})")
    return found


def main(argv: list[str]) -> int:
    paths = [Path(arg).resolve() for arg in argv] or list(python_files(*SOURCE_ROOTS))
    files = [p for path in paths for p in ([path] if path.is_file() else sorted(path.rglob("*.py")))]
    found = [line for path in files for line in violations(path)]
    print("\n".join(found) if found else f"prose: {len(files)} modules within bounds")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
