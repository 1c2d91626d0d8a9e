"""Write (or check) docs/openapi.json: the OpenAPI 3 document the API function generates.

The document comes from the API function's own routes (Powertools' resolver with validation
enabled), imported here with a placeholder environment: building the resolver contacts nothing.

    .venv/bin/python -m tools.openapi           # rewrite docs/openapi.json
    .venv/bin/python -m tools.openapi --check   # exit 1 when the checked-in copy is stale
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "docs" / "openapi.json"
API_HANDLER_MODULE = "functions.api.app"
# Shapes only: the function validates its environment at import, nothing is contacted.
PLACEHOLDER_ENV = {
    "DOCUMENTS_TABLE": "documents",
    "WEBHOOKS_TABLE": "webhooks",
    "SOURCES_TABLE": "sources",
    "SOURCE_SYNC_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:source-sync",
    "SOURCE_SCHEDULE_GROUP": "source-syncs",
    "SOURCE_SCHEDULE_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
    "BUCKET_NAME": "documents-bucket",
    "MAX_UPLOAD_BYTES": "52428800",
    "UPLOAD_URL_EXPIRY_SECONDS": "900",
    "OPENSEARCH_ENDPOINT": "https://search.invalid",
    "OPENSEARCH_INDEX": "rag-chunks",
    "EMBEDDING_DIMENSION": "1024",
    "EMBEDDING_PROVIDER": "bedrock",
    "EMBEDDING_MODEL_ID": "amazon.titan-embed-text-v2:0",
    "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:placeholder",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_SERVICE_NAME": "rag-ingest-api",
}


def generate() -> dict[str, Any]:
    """The API function's OpenAPI document (a fresh import of functions/api/app.py and its routes/,
    with the placeholders)."""
    saved = {name: os.environ.get(name) for name in PLACEHOLDER_ENV}
    for name, value in PLACEHOLDER_ENV.items():
        os.environ.setdefault(name, value)
    try:
        # Fresh, with its route modules: the handler reads its environment at import, and one
        # imported earlier had another.
        package = API_HANDLER_MODULE.rpartition(".")[0]
        for cached in [name for name in sys.modules if name.startswith(f"{package}.")]:
            sys.modules.pop(cached, None)
        module = importlib.import_module(API_HANDLER_MODULE)
        document: dict[str, Any] = module.openapi_schema()
        return document
    finally:
        for name, previous in saved.items():
            if previous is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = previous


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail when docs/openapi.json is stale")
    args = parser.parse_args(argv)
    text = render(generate())
    if args.check:
        if not DOCUMENT.exists() or DOCUMENT.read_text() != text:
            print(f"{DOCUMENT.relative_to(ROOT)} is stale: run `make openapi`", file=sys.stderr)
            return 1
        print(f"{DOCUMENT.relative_to(ROOT)} is up to date")
        return 0
    DOCUMENT.write_text(text)
    print(f"wrote {DOCUMENT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
