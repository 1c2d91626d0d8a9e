"""make bench-answer: the answer path's latency on the local stack, beside the search it starts with.

    .venv/bin/python -m bench.answer_latency            # the samples, 3 rounds of 26 questions

A fresh local stack (an index of its own) takes the sample PDFs; once they are READY, each of their
expected sentences (samples/expected.json) is asked as ``POST /search`` (hybrid), ``POST /search``
reranked, and ``POST /answer`` (which reranks, then calls Converse: locally the model server's
extractive stand-in). Reports p50/p95/max per path over the rounds, and how many answers cited the
sentence's document; writes bench/results/answer-latency-<time>.json. Imports ``bench``, ``eval``,
``local``. Runs: docs/benchmarks.md ("Answers").
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.isolation import percentile

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
SAMPLES = REPO / "samples"
PATHS = ("search", "search reranked", "answer")


def questions() -> list[tuple[str, str]]:
    """(filename, sentence) for every expected sentence of the sample PDFs."""
    expected = json.loads((SAMPLES / "expected.json").read_text())
    return [(name, sentence["text"]) for name, entry in expected.items() for sentence in entry["sentences"]]


def run(rounds: int, timeout: float) -> dict[str, Any]:
    from eval.stack import eval_template
    from local.client import OfflineClient
    from local.runtime.harness import OfflineStackProcess
    from local.runtime.settings import stack_name_from_cdk_json

    source = REPO / "cdk.out" / f"{stack_name_from_cdk_json(REPO)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    with tempfile.TemporaryDirectory(prefix="rag-bench-answer-") as work:
        template = Path(work) / "template.json"
        template.write_text(json.dumps(eval_template(source, f"rag-bench-answer-{uuid.uuid4().hex[:8]}")))
        process = OfflineStackProcess(Path(work) / "state", template=template)
        outputs = process.start(timeout=300)
        try:
            client = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"bench-{uuid.uuid4().hex[:8]}")
            ids = {path.name: client.upload(path) for path in sorted(SAMPLES.glob("*.pdf"))}
            states = client.wait_until_done(list(ids.values()), timeout_seconds=timeout)
            assert {s["status"] for s in states.values()} == {"READY"}, states
            bodies = {
                "search": lambda q: ("/search", {"query": q, "k": 5}),
                "search reranked": lambda q: ("/search", {"query": q, "k": 5, "rerank": True}),
                "answer": lambda q: ("/answer", {"query": q, "k": 5}),
            }
            seconds: dict[str, list[float]] = {path: [] for path in PATHS}
            cited = 0
            for _ in range(rounds):
                for filename, sentence in questions():
                    for path in PATHS:
                        route, body = bodies[path](sentence)
                        started = time.perf_counter()
                        response = client.request("POST", route, body, timeout=60)
                        seconds[path].append(time.perf_counter() - started)
                        response.raise_for_status()
                        if path == "answer":
                            names = {c["passage"]["filename"] for c in response.json()["citations"]}
                            cited += filename in names
        finally:
            process.stop()
    asked = rounds * len(questions())
    return {
        "measured_at": datetime.now().isoformat(timespec="seconds"),
        "questions": asked,
        "answers_citing_the_document": cited,
        "ms": {
            path: {name: round(1000 * percentile(values, q), 1) for name, q in (("p50", 50), ("p95", 95), ("max", 100))}
            for path, values in seconds.items()
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args(argv)
    result = run(args.rounds, args.timeout)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"answer-latency-{datetime.now():%Y%m%d-%H%M%S}.json").write_text(json.dumps(result, indent=1) + "\n")
    cited = result["answers_citing_the_document"]
    print(f"{result['questions']} questions; answers citing the sentence's document: {cited}")
    print("| path | p50 ms | p95 ms | max ms |\n|---|---|---|---|")
    for path, figures in result["ms"].items():
        print(f"| {path} | {figures['p50']} | {figures['p95']} | {figures['max']} |")


if __name__ == "__main__":
    main()
