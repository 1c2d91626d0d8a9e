"""LangChain's default chunks of PDFs, as JSON; runs in the peers' virtual environment only.

    .venv-peers/bin/python -m eval.langchain_chunks FILE.pdf ...

Loads each file with PyPDFLoader (one Document per page, no cleanup) and splits it with
RecursiveCharacterTextSplitter in cl100k_base tokens, 300 per chunk with 60 of overlap, as LangChain's
documentation shows. Prints one JSON list of ``{"document": file name, "page": 1-based page, "text":
chunk}``. Imports LangChain and ``bench.peers.peer_ingest`` (the bundled tiktoken encoding), never the
product; ``make eval`` runs it with ``.venv-peers/bin/python`` and skips the row without it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CHUNK_TOKENS = 300
OVERLAP_TOKENS = 60
TIKTOKEN_ENCODING = "cl100k_base"


def langchain_chunks(paths: Sequence[Path]) -> list[dict[str, Any]]:
    from langchain_community.document_loaders import PyPDFLoader
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from bench.peers.peer_ingest import _use_bundled_tiktoken_encodings

    _use_bundled_tiktoken_encodings()
    splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name=TIKTOKEN_ENCODING, chunk_size=CHUNK_TOKENS, chunk_overlap=OVERLAP_TOKENS
    )
    chunks: list[dict[str, Any]] = []
    for path in paths:
        for chunk in splitter.split_documents(PyPDFLoader(str(path)).load()):
            # PyPDFLoader's "page" is 0-based; the questions count pages as a reader does.
            chunks.append({"document": path.name, "page": int(chunk.metadata["page"]) + 1, "text": chunk.page_content})
    return chunks


def main(argv: Sequence[str] | None = None) -> int:
    paths = [Path(arg) for arg in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    json.dump(langchain_chunks(paths), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
