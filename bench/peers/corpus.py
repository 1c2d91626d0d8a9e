"""The benchmark corpus: bench/corpus/manifest.json, checked against the files before a run."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from local.runtime.settings import REPO_ROOT

MANIFEST = REPO_ROOT / "bench" / "corpus" / "manifest.json"


@dataclass(frozen=True)
class CorpusDocument:
    path: Path  # absolute
    pages: int
    sha256: str


def load_corpus(manifest: Path = MANIFEST) -> list[CorpusDocument]:
    """The manifest's documents; raises SystemExit if a file is missing or differs from the manifest,
    so a figure is never reported for a corpus other than the recorded one."""
    recorded = json.loads(manifest.read_text())
    documents = [
        CorpusDocument(REPO_ROOT / entry["path"], int(entry["pages"]), str(entry["sha256"]))
        for entry in recorded["documents"]
    ]
    problems = []
    for document in documents:
        if not document.path.is_file():
            problems.append(f"{document.path}: missing")
        elif hashlib.sha256(document.path.read_bytes()).hexdigest() != document.sha256:
            problems.append(f"{document.path}: sha256 differs from {manifest.name}")
    if problems:
        raise SystemExit("corpus does not match its manifest:\n  " + "\n  ".join(problems))
    if sum(document.pages for document in documents) != int(recorded["total_pages"]):
        raise SystemExit(f"{manifest}: total_pages does not add up")
    return documents
