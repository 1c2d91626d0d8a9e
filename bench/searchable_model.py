"""Time to searchable in AWS, modelled: the local stack's measured stage compute plus AWS's overheads.

``breakdown`` splits one measured run by the workflow's history (upload, to the workflow, the
workflow up to Index, Index to the search that found it); ``aws_model`` adds the AWS overheads of
``AwsOverheads`` to the measured Lambda compute, for three paths (Standard as built, Express, one
Lambda for a one-page document), with each path's bill per 1,000 documents (``bench.cost.prices``).
Every overhead's source, and what is assumed where AWS publishes no figure: docs/latency.md.
Imports only the standard library and ``bench.cost.prices``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bench.cost.prices import (
    LAMBDA_GB_SECOND,
    LAMBDA_REQUEST,
    SFN_EXPRESS_GB_SECOND,
    SFN_EXPRESS_REQUEST,
    SFN_STANDARD_TRANSITION,
)

REPO = Path(__file__).resolve().parents[1]
INDEX_STATE = "Index"
INTAKE_MEMORY_MB = 256  # cdk.json functions.intake.memoryMb
DEFAULT_STAGE_MEMORY_MB = 1024
# Express bills the execution's memory in 64 MB steps and its duration in 100 ms steps (AWS Step Functions Pricing).
EXPRESS_MEMORY_GB = 64 / 1024
EXPRESS_DURATION_STEP = 0.1


def _seconds(value: Any) -> float:
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value)


@dataclass(frozen=True)
class Breakdown:
    """One run, split: seconds of each part in order, and the workflow's states and Lambda calls."""

    PARTS: ClassVar[tuple[str, ...]] = ("upload", "to_workflow", "workflow_to_index", "index_to_found")
    upload: float  # the upload request until S3 answered
    to_workflow: float  # S3's answer until the execution started (S3 event, SQS, Intake, StartExecution)
    workflow_to_index: float  # the execution's start until the Index state exited
    index_to_found: float  # Index's exit until the search that found the document answered (may be < 0)
    lambda_to_index: float  # Lambda runs (started -> succeeded) before Index's exit, summed
    lambda_by_state: dict[str, float] = field(default_factory=dict)  # the same per state, the whole run
    states: dict[str, float] = field(default_factory=dict)  # each state's first entry to last exit
    transitions: int = 0  # states entered, the whole execution: what Standard bills
    transitions_to_index: int = 0
    invocations: int = 0  # Lambda invocations, the whole execution
    invocations_to_index: int = 0
    execution_seconds: float = 0.0  # start to end of the whole execution


def breakdown(events: Sequence[Mapping[str, Any]], *, started: float, uploaded: float, found: float) -> Breakdown:
    """The split of one run from its execution's history events (Step Functions' GetExecutionHistory)."""
    entered: dict[str, float] = {}
    exited: dict[str, float] = {}
    lambda_by_state: dict[str, float] = {}
    current_state = ""
    running: dict[int, tuple[str, float]] = {}
    execution_start = execution_end = None
    transitions = invocations = 0
    lambda_runs: list[tuple[float, float]] = []
    entries: list[float] = []
    for event in events:
        kind = str(event["type"])
        at = _seconds(event["timestamp"])
        if kind == "ExecutionStarted":
            execution_start = at
        elif kind in ("ExecutionSucceeded", "ExecutionFailed", "ExecutionAborted", "ExecutionTimedOut"):
            execution_end = at
        elif kind.endswith("StateEntered"):
            name = str(event["stateEnteredEventDetails"]["name"])
            entered.setdefault(name, at)
            current_state = name
            transitions += 1
            entries.append(at)
        elif kind.endswith("StateExited"):
            exited[str(event["stateExitedEventDetails"]["name"])] = at
        elif kind == "LambdaFunctionStarted":
            running[int(event["id"])] = (current_state, at)
            invocations += 1
        elif kind in ("LambdaFunctionSucceeded", "LambdaFunctionFailed", "LambdaFunctionTimedOut"):
            previous = int(event.get("previousEventId", 0))
            state, began = running.pop(previous, (current_state, at))
            lambda_by_state[state] = lambda_by_state.get(state, 0.0) + at - began
            lambda_runs.append((began, at))
    if execution_start is None or INDEX_STATE not in exited:
        raise ValueError("the history has no ExecutionStarted or no Index exit")
    index_end = exited[INDEX_STATE]
    return Breakdown(
        upload=round(uploaded - started, 3),
        to_workflow=round(execution_start - uploaded, 3),
        workflow_to_index=round(index_end - execution_start, 3),
        index_to_found=round(found - index_end, 3),
        lambda_to_index=round(sum(end - begin for begin, end in lambda_runs if end <= index_end), 3),
        lambda_by_state={name: round(seconds, 3) for name, seconds in lambda_by_state.items()},
        states={name: round(exited[name] - entered[name], 3) for name in entered if name in exited},
        transitions=transitions,
        transitions_to_index=sum(1 for at in entries if at < index_end),
        invocations=invocations,
        invocations_to_index=sum(1 for _, end in lambda_runs if end <= index_end),
        execution_seconds=round((execution_end or index_end) - execution_start, 3),
    )


@dataclass(frozen=True)
class AwsOverheads:
    """Seconds AWS adds around the stages' compute (each figure's source or assumption: docs/latency.md)."""

    s3_event_delivery: float = 1.0  # S3 -> SQS: "typically in seconds"; 1 s assumed
    sqs_poll: float = 0.2  # Lambda's long poll returns as a message arrives; batching window 0 (cdk.json)
    intake_compute: float = 0.15  # Intake's own work: one DynamoDB write and StartExecution
    warm_invoke: float = 0.03  # Lambda's invoke overhead per call on a warm environment
    cold_init: float = 1.0  # Init Duration of one stage function with this layer (measured locally)
    standard_transition: float = 0.06  # Standard: from one state's exit to the next task's start
    express_transition: float = 0.02  # Express: the same, in memory
    search_request: float = 0.25  # POST /search through API Gateway, a warm API function, OpenSearch
    upload: float = 0.5  # POST /documents then the presigned POST of a few hundred KB


@dataclass(frozen=True)
class PathChoice:
    name: str
    express: bool
    single_lambda: bool  # Validate .. Index in one invocation (a one-page document's path)


CHOICES = (
    PathChoice("Standard, as built", express=False, single_lambda=False),
    PathChoice("Express workflow", express=True, single_lambda=False),
    PathChoice("Express, one Lambda for Validate..Index", express=True, single_lambda=True),
)
# The stage functions a cold document meets before it is searchable (Intake, Validate, Parse, Chunk, Embed, Index).
COLD_FUNCTIONS = 6
# The stages before a document is searchable (Finalize runs after Index has refreshed the index).
SEARCHABLE_STAGES = frozenset({"Validate", "Parse", "Chunk", "Embed", "Index"})


def stage_memory_mb(config: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Each stage's memoryMb by state name (cdk.json ``functions.stages``)."""
    if config is None:
        context = json.loads((REPO / "cdk.json").read_text())["context"]
        config = next(value for key, value in context.items() if isinstance(value, dict) and "functions" in value)
    stages = config["functions"]["stages"]
    return {name.capitalize(): int(values["memoryMb"]) for name, values in stages.items()}


def aws_model(
    size: Mapping[str, Any],
    choice: PathChoice,
    overheads: AwsOverheads = AwsOverheads(),
    memory: Mapping[str, int] | None = None,
    architecture: str = "x86_64",
) -> dict[str, float]:
    """Latency (warm, and with every function on the path cold) and the bill per 1,000 documents of one
    size; ``size``: a run's ``breakdown`` with its ``timings_ms`` (the handlers' own time per stage)."""
    memory = dict(memory or stage_memory_mb())
    timings = {stage.capitalize(): ms / 1000 for stage, ms in size["timings_ms"].items()}
    compute = sum(seconds for stage, seconds in timings.items() if stage in SEARCHABLE_STAGES)
    transition = overheads.express_transition if choice.express else overheads.standard_transition
    invocations = 1 if choice.single_lambda else int(size["invocations_to_index"])
    transitions = 2 if choice.single_lambda else int(size["transitions_to_index"])
    before_workflow = overheads.upload + overheads.s3_event_delivery + overheads.sqs_poll + overheads.intake_compute
    warm = before_workflow + overheads.warm_invoke * (invocations + 1) + compute + transition * transitions
    warm += overheads.search_request
    cold_functions = 2 if choice.single_lambda else COLD_FUNCTIONS
    if choice.single_lambda:  # one function sized for the largest stage does them all
        lambda_gb_s = (
            sum(timings.values()) * max(memory.get(stage, DEFAULT_STAGE_MEMORY_MB) for stage in timings) / 1024
        )
        all_invocations, all_transitions = 3, 4  # Intake, the one stage, Finalize
    else:
        lambda_gb_s = sum(
            seconds * memory.get(stage, DEFAULT_STAGE_MEMORY_MB) / 1024 for stage, seconds in timings.items()
        )
        all_invocations, all_transitions = int(size["invocations"]) + 1, int(size["transitions"])
    lambda_gb_s += overheads.intake_compute * INTAKE_MEMORY_MB / 1024
    lambda_usd = lambda_gb_s * LAMBDA_GB_SECOND[architecture].usd + all_invocations * LAMBDA_REQUEST.usd
    if choice.express:
        duration = sum(timings.values()) + all_transitions * transition + all_invocations * overheads.warm_invoke
        billed = math.ceil(duration / EXPRESS_DURATION_STEP) * EXPRESS_DURATION_STEP
        workflow_usd = SFN_EXPRESS_REQUEST.usd + billed * EXPRESS_MEMORY_GB * SFN_EXPRESS_GB_SECOND.usd
    else:
        workflow_usd = all_transitions * SFN_STANDARD_TRANSITION.usd
    return {
        "compute_seconds": round(compute, 2),
        "warm_seconds": round(warm, 2),
        "cold_seconds": round(warm + overheads.cold_init * cold_functions, 2),
        "lambda_usd_per_1000": round(1000 * lambda_usd, 4),
        "workflow_usd_per_1000": round(1000 * workflow_usd, 4),
        "usd_per_1000": round(1000 * (lambda_usd + workflow_usd), 4),
    }


def model_inputs(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per size, the median run (by its handlers' time to searchable): its breakdown and ``timings_ms``."""
    by_size: dict[int, list[Mapping[str, Any]]] = {}
    for run in runs:
        by_size.setdefault(int(run["pages"]), []).append(run)

    def handler_seconds(run: Mapping[str, Any]) -> float:
        return sum(ms for stage, ms in run["timings_ms"].items() if stage.capitalize() in SEARCHABLE_STAGES) / 1000

    inputs = {}
    for pages, group in sorted(by_size.items()):
        median = sorted(group, key=handler_seconds)[len(group) // 2]
        inputs[str(pages)] = {**median["breakdown"], "timings_ms": dict(median["timings_ms"])}
    return inputs


def aws_model_report(runs: Sequence[Mapping[str, Any]], overheads: AwsOverheads = AwsOverheads()) -> str:
    """The model's table: per size and path, warm and cold latency and the bill per 1,000 documents."""
    lines = [
        "AWS model (measured Lambda compute + AWS overheads; docs/latency.md):",
        "| pages | path | handlers s | warm p50 s | all cold s | Lambda $/1,000 docs | workflow $/1,000 docs |",
        "|---|---|---|---|---|---|---|",
    ]
    for pages, size in model_inputs(runs).items():
        for choice in CHOICES:
            if choice.single_lambda and pages != "1":
                continue
            figures = aws_model(size, choice, overheads)
            lines.append(
                f"| {pages} | {choice.name} | {figures['compute_seconds']:.2f} | {figures['warm_seconds']:.2f} | "
                f"{figures['cold_seconds']:.2f} | {figures['lambda_usd_per_1000']:.4f} | "
                f"{figures['workflow_usd_per_1000']:.4f} |"
            )
    return "\n".join(lines)


def main() -> None:
    """Prints the model from the newest bench/results/searchable-*.json (make bench-searchable writes it)."""
    results = sorted((REPO / "bench" / "results").glob("searchable-*.json"))
    if not results:
        raise SystemExit("no bench/results/searchable-*.json: run make bench-searchable first")
    print(aws_model_report(json.loads(results[-1].read_text())["runs"]))


if __name__ == "__main__":
    main()
