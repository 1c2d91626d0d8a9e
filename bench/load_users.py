"""make load's users: locust as a library (Environment + local runner, headless) against a running stack.

    python -m bench.load_users --outputs STATE/outputs.json --tenants T1 T2 --users 2 --seconds 60 --report r.json

Started by ``bench.load`` in a process of its own: locust's gevent patches sockets and threads at import.
Each user signs in to one tenant (``local.client.OfflineClient``, the local dev token issuer) and mixes
uploads (presigned POST to the local S3; samples in several formats, and bad inputs), searches, lists,
reads, PATCHes and deletes of its own documents. Writes the per-route figures, errors, status codes and
every document made (``--report``). Imports locust, ``local``, the client's ``uploads``, ``bench.load_aftermath``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import gevent
from locust import HttpUser, between, events, task
from locust.env import Environment
from locust.log import setup_logging
from locust.stats import print_error_report, print_percentile_stats, print_stats
from rag_ingest_client.uploads import declared_type

from bench.load_aftermath import REVISION_KEY, RouteRow, Tracked
from local.client import OfflineClient

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
# Good inputs (every one must end READY): the small sample PDFs and one file of each other format.
GOOD_INPUTS = (
    SAMPLES / "sourdough.pdf",
    SAMPLES / "urban-birds.pdf",
    SAMPLES / "lighthouses.pdf",
    SAMPLES / "formats" / "harbour-manual.docx",
    SAMPLES / "formats" / "orchard-survey.pptx",
    SAMPLES / "formats" / "lighthouse-keeping.html",
    SAMPLES / "formats" / "sourdough-starter.md",
    SAMPLES / "formats" / "canal-locks.txt",
)
# Bad inputs and the permanent code each deserves (samples/README.md; the ones bench/chaos.py mixes in).
BAD_INPUTS = {
    SAMPLES / "invalid" / "not-a-pdf.pdf": "UNSUPPORTED_TYPE",
    SAMPLES / "invalid" / "encrypted.pdf": "ENCRYPTED_PDF",
    SAMPLES / "invalid" / "truncated.pdf": "CORRUPT_PDF",
    SAMPLES / "invalid" / "empty.pdf": "EMPTY_DOCUMENT",
}
BAD_EVERY = 6  # one upload in six is a bad input (each user's first at its own turn)
MODES = ("hybrid", "knn", "bm25")
STOP_SECONDS = 120.0
S3_UPLOAD = "S3 presigned POST"
# Not a failure: 503 SERVICE_UNAVAILABLE is throttling, with Retry-After (docs/api.md, "Errors"); it is
# still counted in the status codes per route.
THROTTLED = 503


def search_queries() -> list[str]:
    """Sentences of the good samples (samples/expected.json) and a few short questions."""
    expected = json.loads((SAMPLES / "expected.json").read_text())
    sentences = [s["text"] for sample in expected.values() for s in sample["sentences"]]
    return [*sentences, "how were lighthouses lit", "feeding a sourdough starter", "birds nesting on buildings"]


@dataclass
class Plan:
    """What the users do: set on the user class before the runner starts (locust makes the users)."""

    api_url: str
    tenants: list[str]
    queries: list[str]
    seed: int


class TenantUser(HttpUser):
    """One person of one tenant: uploads, searches, lists, reads, PATCHes and deletes their own documents."""

    wait_time = between(1.0, 4.0)
    plan: ClassVar[Plan]
    documents: ClassVar[dict[str, Tracked]] = {}  # every document any user made, by id
    status_codes: ClassVar[defaultdict[str, Counter[str]]] = defaultdict(Counter)
    _numbers: ClassVar[itertools.count[int]] = itertools.count()

    def on_start(self) -> None:
        number = next(self._numbers)
        self.tenant = self.plan.tenants[number % len(self.plan.tenants)]
        self.random = random.Random(self.plan.seed + number)
        self.identity = OfflineClient(self.plan.api_url, self.tenant, username=f"{self.tenant}-user{number}")
        self.identity.token()  # signed in before the first request
        self.mine: list[str] = []  # this user's documents not deleted
        self.uploads = number % BAD_EVERY

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.identity.token()}"}

    def _call(self, method: str, path: str, name: str, wanted: int, body: Any = None) -> Any:
        """One API request under ``name``; the JSON answer when it is ``wanted``, else None (a failure
        unless throttled)."""
        with self.client.request(
            method, path, name=name, headers=self._auth(), json=body, catch_response=True
        ) as response:
            if response.status_code == wanted:
                return response.json() if response.content else {}
            if response.status_code == THROTTLED:
                response.success()
            else:
                response.failure(f"{response.status_code} {response.text[:200]}")
            return None

    @task(3)
    def upload(self) -> None:
        self.uploads += 1
        bad = list(BAD_INPUTS.items())
        if self.uploads % BAD_EVERY == 0:
            path, code = bad[self.random.randrange(len(bad))]
        else:
            path, code = self.random.choice(GOOD_INPUTS), None
        data = path.read_bytes()
        content_type = declared_type(path.name, data[:64])
        ticket = self._call(
            "POST", "/documents", "POST /documents", 201, {"filename": path.name, "content_type": content_type}
        )
        if ticket is None:
            return
        document = Tracked(str(ticket["document_id"]), self.tenant, path.name, code, uploaded=False)
        self.documents[document.document_id] = document
        form = ticket["upload"]
        with self.client.post(
            form["url"], data=form["fields"], files={"file": (path.name, data, content_type)}, name=S3_UPLOAD,
            catch_response=True,
        ) as response:  # fmt: skip
            if response.status_code not in (200, 201, 204):
                response.failure(f"{response.status_code} {response.text[:200]}")
                return
        self.documents[document.document_id] = replace(document, uploaded=True)
        self.mine.append(document.document_id)

    @task(5)
    def search(self) -> None:
        body = {"query": self.random.choice(self.plan.queries), "k": 5, "mode": self.random.choice(MODES)}
        self._call("POST", "/search", "POST /search", 200, body)

    @task(3)
    def list_documents(self) -> None:
        self._call("GET", "/documents?limit=20", "GET /documents", 200)

    @task(2)
    def read(self) -> None:
        if self.mine:
            document_id = self.random.choice(self.mine)
            self._call("GET", f"/documents/{document_id}", "GET /documents/{id}", 200)

    @task(2)
    def patch(self) -> None:
        if not self.mine:
            return
        document_id = self.random.choice(self.mine)
        revision = int(time.time() * 1000) % 1_000_000_000  # new each time, a plain integer
        answer = self._call(
            "PATCH", f"/documents/{document_id}", "PATCH /documents/{id}", 200, {"metadata": {REVISION_KEY: revision}}
        )
        if answer is not None:
            self.documents[document_id] = replace(self.documents[document_id], patched_revision=revision)

    @task(1)
    def delete(self) -> None:
        if len(self.mine) < 3:  # keep a few documents to PATCH and read
            return
        document_id = self.mine.pop(self.random.randrange(len(self.mine)))
        if self._call("DELETE", f"/documents/{document_id}", "DELETE /documents/{id}", 200) is not None:
            self.documents[document_id] = replace(self.documents[document_id], deleted=True)


@events.request.add_listener
def _count_status(name: str, response: Any = None, exception: Any = None, **_: Any) -> None:
    status = str(getattr(response, "status_code", None) or type(exception).__name__)
    TenantUser.status_codes[name][status] += 1


def route_rows(environment: Environment) -> list[RouteRow]:
    """locust's per-route figures, the aggregate last."""
    stats = environment.stats
    entries = sorted(stats.entries.values(), key=lambda e: e.name)

    def row(entry: Any, route: str) -> RouteRow:
        return RouteRow(
            route=route,
            requests=entry.num_requests,
            failures=entry.num_failures,
            p50=float(entry.get_response_time_percentile(0.5) or 0),
            p95=float(entry.get_response_time_percentile(0.95) or 0),
            p99=float(entry.get_response_time_percentile(0.99) or 0),
            average=float(entry.avg_response_time),
            maximum=float(entry.max_response_time or 0),
            per_second=float(entry.total_rps),
        )

    return [*(row(e, e.name) for e in entries), row(stats.total, "all")]


def run(plan: Plan, users: int, seconds: float, spawn_rate: float) -> dict[str, Any]:
    TenantUser.plan = plan
    # stop_timeout: at the end each user finishes the task it is in, so that every request sent has its
    # answer recorded (a DELETE cut off mid-flight would leave a document DELETED that no answer explains).
    environment = Environment(user_classes=[TenantUser], host=plan.api_url, events=events, stop_timeout=STOP_SECONDS)
    runner = environment.create_local_runner()
    began = time.time()
    runner.start(users, spawn_rate=spawn_rate)
    deadline, last = time.monotonic() + seconds, time.monotonic()
    while time.monotonic() < deadline:  # a line a minute: the run is alive and how it goes
        gevent.sleep(1.0)
        if time.monotonic() - last >= 60:
            last = time.monotonic()
            total = environment.stats.total
            print(f"{time.time() - began:5.0f} s: {total.num_requests} requests, {total.num_failures} failed, "
                  f"{len(TenantUser.documents)} documents", flush=True)  # fmt: skip
    runner.quit()
    runner.greenlet.join()
    print_stats(environment.stats, current=False)
    print_percentile_stats(environment.stats)
    print_error_report(environment.stats)
    return {
        "started": began,
        "seconds": round(time.time() - began, 1),
        "users": users,
        "tenants": plan.tenants,
        "routes": [asdict(r) for r in route_rows(environment)],
        "errors": [
            {"method": e.method, "route": e.name, "error": str(e.error), "occurrences": e.occurrences}
            for e in environment.stats.errors.values()
        ],
        "status_codes": {name: dict(codes) for name, codes in sorted(TenantUser.status_codes.items())},
        "documents": [asdict(d) for d in TenantUser.documents.values()],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outputs", type=Path, required=True, help="the stack's outputs.json")
    parser.add_argument("--tenants", nargs="+", required=True, help="tenant ids; users are spread over them")
    parser.add_argument("--users", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--spawn-rate", type=float, default=2.0, help="users started per second")
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--report", type=Path, required=True, help="the JSON this run writes")
    args = parser.parse_args(argv)
    setup_logging("INFO")  # locust prints its tables through its loggers
    api_url = str(json.loads(args.outputs.read_text())["ApiUrl"]).rstrip("/")
    plan = Plan(api_url, list(args.tenants), search_queries(), args.seed)
    result = run(plan, args.users, args.seconds, args.spawn_rate)
    args.report.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
