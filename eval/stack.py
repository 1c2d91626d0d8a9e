"""The evaluation through a local stack: upload the corpus through the API, wait READY, search.

The stack runs the synthesized template (``cdk.out``) with one change: every function's
``OPENSEARCH_INDEX`` names an index of the evaluation's own, so the scores do not depend on
what else the shared OpenSearch holds (BM25 statistics are per index) and the index can be
deleted afterwards. Asset paths are made absolute so the template copy finds the code.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_ingest.embeddings.local import MINILM_DIMENSION
from rag_ingest.retrieval.query import Expand
from rag_ingest.retrieval.search import SearchMode
from rag_ingest.wiring import vector_store_for

from eval.retrieval import EXPANSION_K, RESULTS_PER_QUESTION, Passage, Question
from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess, template_with_environment
from local.runtime.settings import REPO_ROOT, stack_name_from_cdk_json

SYSTEM_NAME = "ours, through the local stack"


def eval_template(source: Path, index_name: str) -> dict[str, Any]:
    """The synthesized template with every function's OPENSEARCH_INDEX set to ``index_name``."""
    return template_with_environment(source, {"OPENSEARCH_INDEX": index_name})


@contextmanager
def eval_stack(label: str) -> Iterator[tuple[OfflineClient, OfflineStackProcess]]:
    """A local stack on the synthesized template with an index of its own (dropped at the end), and
    a client of a tenant of its own."""
    source = REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    index_name = f"rag-eval-{label}-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix=f"rag-eval-{label}-") as work:
        template = Path(work) / "template.json"
        template.write_text(json.dumps(eval_template(source, index_name)))
        process = OfflineStackProcess(Path(work) / "state", template=template)
        print(f"starting a local stack (index {index_name}) ...", flush=True)
        outputs = process.start(timeout=300)
        opensearch_url = process.env.get("OPENSEARCH_URL") or "http://127.0.0.1:9200"
        store = vector_store_for(opensearch_url, index_name, MINILM_DIMENSION)
        try:
            yield OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"eval-{uuid.uuid4().hex[:8]}"), process
        finally:
            process.stop()
            store.drop_index()


def upload_all(
    client: OfflineClient, process: OfflineStackProcess, uploads: Mapping[Path, str], timeout: float
) -> dict[str, dict[str, Any]]:
    """Upload each file with its content type, wait until all are done: each file name's final state.
    A document that is not READY ends the evaluation, with the stack's log."""
    names = {client.upload(path, content_type): path.name for path, content_type in uploads.items()}
    print(f"uploaded {len(names)} documents; waiting for READY ...", flush=True)
    states = client.wait_until_done(list(names), timeout_seconds=timeout)
    failed = {names[d]: s.get("error_code") for d, s in states.items() if s["status"] != "READY"}
    if failed:
        raise SystemExit(f"documents not READY: {failed}\n{process.log_tail()}")
    return {names[document_id]: state for document_id, state in states.items()}


@dataclass(frozen=True)
class StackResults:
    """What the stack returned: passages per mode and question; with ``rerank``, those of hybrid
    searches with ``"rerank": true``; per ``expand`` asked for, those of hybrid searches of
    ``EXPANSION_K`` results with it."""

    name: str
    chunk_count: int
    results: dict[SearchMode, dict[str, list[Passage]]]
    reranked: dict[str, list[Passage]] | None
    expanded: dict[Expand, dict[str, list[Passage]]]


def evaluate_through_local_stack(
    pdfs: Sequence[Path],
    questions: Sequence[Question],
    modes: Sequence[SearchMode],
    timeout: float,
    *,
    rerank: bool = False,
    expansions: Sequence[Expand] = (),
) -> StackResults:
    with eval_stack("stack") as (client, process):
        states = upload_all(client, process, dict.fromkeys(pdfs, "application/pdf"), timeout)
        chunk_count = sum(int(state["chunk_count"]) for state in states.values())
        # "rerank": false, explicitly: the rows without reranking whatever the deployment's default.
        results = {
            mode: {question.id: search(client, question.question, mode, rerank=False) for question in questions}
            for mode in modes
        }
        hybrid = SearchMode.HYBRID
        reranked = {q.id: search(client, q.question, hybrid, rerank=True) for q in questions} if rerank else None
        expanded = {
            expand: {
                q.id: search(client, q.question, hybrid, rerank=False, k=EXPANSION_K, expand=expand) for q in questions
            }
            for expand in expansions
        }
        return StackResults(SYSTEM_NAME, chunk_count, results, reranked, expanded)


def search(
    client: OfflineClient,
    query: str,
    mode: SearchMode,
    *,
    rerank: bool | None = None,
    k: int = RESULTS_PER_QUESTION,
    expand: Expand = Expand.NONE,
) -> list[Passage]:
    response = client.search(query, k=k, mode=mode.value, rerank=rerank, expand=expand.value)
    if response.status_code != 200:
        raise RuntimeError(f"POST /search answered {response.status_code}: {response.text[:500]}")
    if rerank is not None and response.json().get("reranked") is not rerank:
        raise RuntimeError(f"POST /search ignored rerank={rerank}: {response.text[:200]}")
    return [
        Passage(passage["filename"] or "", passage["page_start"], passage["page_end"], passage["text"])
        for passage in response.json()["passages"]
    ]
