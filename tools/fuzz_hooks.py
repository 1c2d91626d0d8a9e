"""Schemathesis hooks of ``make fuzz`` (loaded by tools/fuzz.py through SCHEMATHESIS_HOOKS). The fuzzer
signs in as tenant A while tenant B's objects exist (their ids in the file ``RAG_INGEST_FUZZ_OTHER``):
one drawn path in four names B's objects; the check ``no_other_tenant_data`` fails a response to A
carrying B's ids or secrets, or a 2xx on B's document, source or endpoint; ``filter_failure``
accepts a few failures with their reason; every response is counted into ``RAG_INGEST_FUZZ_STATS``.
Imports schemathesis and hypothesis (requirements-dev.txt) and the standard library only.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import schemathesis
from hypothesis import strategies as st
from schemathesis import Case, CheckContext, HookContext, Response

OTHER_FILE = "RAG_INGEST_FUZZ_OTHER"
STATS_FILE = "RAG_INGEST_FUZZ_STATS"
# One drawn path in four names the other tenant's objects: enough probes, most cases still A's own.
PROBE_ONE_IN = 4


def _other() -> dict[str, Any]:
    path = os.environ.get(OTHER_FILE)
    return json.loads(Path(path).read_text()) if path else {"tenant_id": None, "path_ids": {}, "secrets": []}


OTHER = _other()
# Path parameter name -> B's values for it (document_id, source_id, external_id, endpoint_id, sync_id).
PATH_IDS: dict[str, list[str]] = OTHER["path_ids"]
# B's objects addressed by a path: a 2xx to A on such a path read or changed them.
OWNED = frozenset(value for name in ("document_id", "source_id", "endpoint_id") for value in PATH_IDS.get(name, []))
# Strings only B's data contains: its ids, tenant id, filenames, a webhook secret, marker text.
SECRETS = tuple(sorted(set(OTHER["secrets"]), key=len, reverse=True))

_lock = threading.Lock()
_counts: Counter[str] = Counter()
_statuses: Counter[str] = Counter()
_probes: Counter[str] = Counter()
_accepted: Counter[str] = Counter()
# B's client-chosen names (item external ids) that A gave an item of its own with a 2xx PUT: A's
# own data carries them from then on, an echo of A's request, not B's data (B's ids and text still count).
CHOSEN_NAMES = frozenset(PATH_IDS.get("external_id", []))
_named_by_a: set[str] = set()

# Methods an HTTP API route key can name (https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_apigatewayv2.HttpMethod.html):
# API Gateway answers any other (TRACE, QUERY, ...) with its own 404 before the function runs.
ROUTABLE_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
# Refusals of schema-valid values whose validity the schema cannot say: an opaque cursor is valid only
# when the API issued it (docs/fuzzing.md, "Accepted findings").
OPAQUE_VALUE_CODES = frozenset({"INVALID_CURSOR"})


def accepted_reason(failure_type: str, method: str, status: int, body: Any) -> str | None:
    """Why a schemathesis failure is not the API's fault (None: it is a finding)."""
    gateway_404 = status == 404 and body == {"message": "Not Found"}
    if failure_type == "UnsupportedMethodResponse" and method not in ROUTABLE_METHODS and gateway_404:
        return f"{method}: API Gateway's 404, no route key can name it"
    if status == 414 and not (isinstance(body, dict) and "error" in body):
        # A query of 8,192 non-ASCII characters, percent-encoded, outgrows the front's request line
        # (HTTP APIs: 10,240 bytes of request line and headers, https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html).
        return "414: the HTTP front's request-line limit, before the function"
    if failure_type == "UseAfterFree" and isinstance(body, dict) and body.get("status") == "DELETED":
        return "DELETED: a deleted document's record answers GET with its tombstone status, by design"
    if failure_type == "RejectedPositiveData" and isinstance(body, dict):
        code = (body.get("error") or {}).get("code") if isinstance(body.get("error"), dict) else None
        if code in OPAQUE_VALUE_CODES:
            return f"{code}: an opaque value the API did not issue"
    return None


@schemathesis.hook
def filter_failure(context: HookContext, failure: Any, case: Case, response: Response) -> bool:
    try:
        body = json.loads(response.text or "null")
    except ValueError:
        body = None
    reason = accepted_reason(type(failure).__name__, str(response.request.method), response.status_code, body)
    if reason is None:
        return True
    with _lock:
        _accepted[reason] += 1
    return False


@schemathesis.hook
def flatmap_path_parameters(context: HookContext, path_parameters: dict[str, Any] | None) -> st.SearchStrategy[Any]:
    if not isinstance(path_parameters, dict):  # none, or a negative case's other shape
        return st.just(path_parameters)
    names = [name for name in path_parameters if PATH_IDS.get(name)]
    if not names:
        return st.just(path_parameters)
    theirs = st.fixed_dictionaries({name: st.sampled_from(PATH_IDS[name]) for name in names})
    return st.integers(0, PROBE_ONE_IN - 1).flatmap(
        lambda pick: theirs.map(lambda ids: {**path_parameters, **ids}) if pick == 0 else st.just(path_parameters)
    )


def _url(response: Response) -> str:
    return str(response.request.url or "")


def _path_segments(response: Response) -> set[str]:
    return {unquote(segment) for segment in urlsplit(_url(response)).path.split("/") if segment}


def _sent(response: Response) -> str:
    body = response.request.body or b""
    return unquote(_url(response)) + (body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body))


def leaks(status: int, segments: set[str], text: str, sent: str = "") -> list[str]:
    """What in one response to tenant A belongs to tenant B (empty: nothing); ``sent`` is the request,
    whose own words an error message may echo (an id asked for is not one disclosed)."""
    found = [f"B's {secret[:40]!r} in the body" for secret in SECRETS if secret in text and secret not in sent]
    if 200 <= status < 300 and OWNED & segments:
        found.append(f"{status} on B's object {sorted(OWNED & segments)[0]}")
    return found


@schemathesis.check
def no_other_tenant_data(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Tenant A never reads or changes tenant B's data."""
    with _lock:
        echoed = " ".join(sorted(_named_by_a))
    problems = leaks(response.status_code, _path_segments(response), response.text or "", _sent(response) + echoed)
    if problems:
        raise AssertionError("cross-tenant access: " + "; ".join(problems))
    return None


@schemathesis.hook
def after_call(context: HookContext, case: Case, response: Response) -> None:
    label = f"{case.method.upper()} {case.operation.path}"
    segments = _path_segments(response)
    probe = bool(OWNED & segments)
    with _lock:
        if case.method.upper() == "PUT" and 200 <= response.status_code < 300:
            _named_by_a.update(CHOSEN_NAMES & segments)
        _counts[label] += 1
        _statuses[str(response.status_code)] += 1
        if probe:
            _probes[label] += 1


@atexit.register
def _write_stats() -> None:
    path = os.environ.get(STATS_FILE)
    if not path:
        return
    with _lock:
        stats = {
            "requests": sum(_counts.values()),
            "by_operation": dict(sorted(_counts.items())),
            "by_status": dict(sorted(_statuses.items())),
            "probes_of_other_tenant": dict(sorted(_probes.items())),
            "accepted_failures": dict(sorted(_accepted.items())),
        }
    Path(path).write_text(json.dumps(stats, indent=2) + "\n")
