# rag-ingest: every target installs what it needs first, so a fresh clone needs only `make demo` / `make test`.
SHELL := /bin/bash
PY := .venv/bin/python
PIP := .venv/bin/pip
export CDK_OUTDIR := cdk.out
# Bytecode caches are written even where the environment turns them off: otherwise every process
# the suites start (pytest and Lambda workers, CLI runs) compiles the project's modules again.
unexport PYTHONDONTWRITEBYTECODE
VENV_STAMP := .venv/.installed-$(shell cat requirements.txt requirements-dev.txt pyproject.toml client/pyproject.toml | sha256sum | cut -c1-12)

.PHONY: help install local-tools layer synth opensearch opensearch-stop stack-up stack-down demo test lint unit infra bench burst eval clean deploy

help:
	@echo "make demo   - set up everything, run the local pipeline end to end on the sample PDFs"
	@echo "make test   - set up everything, run lint and every test suite (starts and stops servers)"
	@echo "make check  - the fast loop: lint, type check, supply-chain audit, unit and infra tests (no server)"
	@echo "make audit  - known vulnerabilities in the pinned Python and npm packages and the layers (docs/security.md)"
	@echo "make bench  - per-stage and end-to-end throughput on the sample corpus"
	@echo "make bench-peers - rag-ingest vs LangChain and LlamaIndex on the same 315 pages (docs/benchmarks.md)"
	@echo "make bench-aws - rag-ingest vs LangChain's and LlamaIndex's Bedrock integrations under emulated Bedrock quotas"
	@echo "make bench-quota - rag-ingest and the peers on a corpus of >= 10 minutes of the default Bedrock quota: share per minute"
	@echo "make bench-searchable - upload to found by POST /search, p50/p95 for 1, 10, 100 pages, split by stage; the AWS model"
	@echo "make bench-sheets - parse time and peak memory per 10,000 spreadsheet cells, XLSX and CSV (no server)"
	@echo "make bench-reingest - a 10 %-edited new version and a copy of a 113-page PDF: speedup, cache hit rate"
	@echo "make bench-search - POST /search p50/p95/p99 per mode and k-NN recall@10 at 100,000 chunks (docs/benchmarks.md)"
	@echo "make bench-vectors - k-NN memory per million chunks and eval MRR/R@5 per vector setting (float32, sq, binary, fewer dims)"
	@echo "make bench-big - a 2,000-page PDF through the local stack: progress, time to READY, parse memory"
	@echo "make bench-sync - the S3 source at 10,000 objects (first sync, unchanged re-sync, 1 % changed/deleted) and the web source"
	@echo "make bench-isolation - fifty 5-page PDFs alone, then right behind a 2,000-page one: p50/p95 latency, the ratio"
	@echo "make bench-fairness - tenant B's 1-page uploads alone, then beside tenant A's 2,000-page backfill: p95 ratio"
	@echo "make bench-answer - POST /answer's latency beside the search it starts with, on the sample PDFs"
	@echo "make eval   - retrieval quality (recall@1/5, MRR) of k-NN, BM25 and hybrid vs a naive baseline"
	@echo "make fuzz   - schemathesis over every API route, signed in, >= 10,000 requests, tenant isolation checked"
	@echo "make burst  - 200 uploads with 10 % injected faults: READY, lost, duplicates, DLQ"
	@echo "make load   - 20 tenants upload, search, list, PATCH and delete for 10 min: p50/p95/p99 per route, then READY/codes, drift, duplicates"
	@echo "make chaos  - kill -9 of OpenSearch, the embedding server, a worker, moto, the stack during a burst"
	@echo "make cost   - AWS cost per 1,000 pages from a measured local-stack run and cdk.json (docs/cost.md)"
	@echo "make preflight - what the AWS account lacks for a deploy (credentials, bootstrap, Bedrock, quotas, ...)"
	@echo "make deploy - preflight, then cdk deploy (needs AWS credentials; REGION=... picks the region)"
	@echo "make diff / make destroy - cdk diff / cdk destroy through the same entry point"

# The Python venv only: synth and deploy need nothing more than Python and Node.
install: $(VENV_STAMP)
$(VENV_STAMP): requirements.txt requirements-dev.txt pyproject.toml client/pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt -r requirements-dev.txt
	# The domain package, editable from the layer's source (see pyproject.toml).
	$(PIP) install -q --no-deps -e .
	# The client (the rag-ingest command, the retrievers), editable, with every extra (docs/cli.md).
	$(PIP) install -q -e "./client[aws,langchain,llamaindex,mcp]"
	rm -f .venv/.installed-* && touch $@

# Java 17 and Maven: only the local stack needs them (OpenSearch and its plugins), never a deploy.
local-tools:
	@command -v java >/dev/null && command -v mvn >/dev/null || { \
	  echo "installing Java 17 and Maven (apt)"; bash tools/apt_install.sh openjdk-17-jre-headless maven; }

# Headless Chromium and its WebDriver for the browser tests (Debian packages, like Java above):
# nothing downloads a browser at run time; Selenium is pointed at these two executables.
.PHONY: chromium
chromium:
	@test -x /usr/bin/chromium && test -x /usr/bin/chromedriver || { \
	  echo "installing Chromium and chromedriver (apt)"; bash tools/apt_install.sh chromium chromium-driver; }

# OCR of pages without a text layer, offline (docs/ocr.md): Debian's Tesseract 5 and its English model,
# and the DejaVu fonts the scanned test corpus (eval/scans) is typeset in. Nothing downloads a model at run time.
.PHONY: ocr-tools
ocr-tools:
	@command -v tesseract >/dev/null && test -f /usr/share/tesseract-ocr/5/tessdata/eng.traineddata \
	  && test -f /usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf || { \
	  echo "installing Tesseract and DejaVu fonts (apt)"; bash tools/apt_install.sh tesseract-ocr tesseract-ocr-eng fonts-dejavu-core; }

layer: install
	$(PY) tools/build_layer.py

synth: layer node-modules
	$(PY) app.py

opensearch: install local-tools
	$(PY) -m local.opensearch install
	$(PY) -m local.opensearch start

opensearch-stop:
	-$(PY) -m local.opensearch stop

stack-up: synth opensearch ocr-tools
	$(PY) -m local.runtime up

stack-down:
	-$(PY) -m local.runtime down

demo: stack-up
	$(PY) -m local.demo
	@$(PY) -c 'import json; from rag_ingest.adapters.stack_resources import LOCAL_OUTPUTS; \
	  url = json.loads(LOCAL_OUTPUTS.read_text())["ApiUrl"].rstrip("/"); \
	  print(f"\nOpen the page: {url}/ (dev-only sign-in: any user name, tenant demo). make stack-down stops the stack.")'

lint: install
	.venv/bin/ruff check .
	.venv/bin/mypy app.py infra local functions layers/common/python/rag_ingest client/rag_ingest_client bench eval tools examples
	$(PY) -m tools.prose_check

# docs/openapi.json from the API function's routes (tests/unit/test_api_handler.py fails when it is stale).
.PHONY: openapi
openapi: install
	$(PY) -m tools.openapi

unit: install
	.venv/bin/pytest tests/unit -q

infra: layer node-modules
	.venv/bin/pytest tests/infra -q

# The fast loop (README, Contributing): lint, the supply-chain audit, unit and infra tests on both cores, one
# bound region synthesized instead of three, tests marked slow left out, no server. make test runs it all (CI).
.PHONY: check
check: lint layer node-modules
	$(PY) -m tools.supply_audit
	RAG_INGEST_TEST_BOUND_REGIONS=eu-west-1 .venv/bin/pytest tests/unit tests/infra -q -n 2 --dist worksteal -m "not slow" -p no:cacheprovider

# Known vulnerabilities in the venv's and both layers' Python packages (pip-audit) and package-lock.json
# (npm audit), less tools/audit-allowlist.toml's entries (docs/security.md, "Supply chain"). make audit
# also fails when a vulnerability service does not answer; make check reports that as UNAVAILABLE and goes on.
.PHONY: audit
audit: layer node-modules
	$(PY) -m tools.supply_audit --require-service $(AUDIT_ARGS)

# One pytest run over every suite; the servers the suites need are started before and stopped after.
test: synth node-modules local-tools chromium ocr-tools
	$(PY) -m local.opensearch install
	bash tools/run_tests.sh

bench: stack-up
	$(PY) -m bench

# A new version of a 113-page document (10 % of pages edited) and a copy of it, through a fresh local
# stack: times, speedup, embedding-cache hit rate, chunks embedded (docs/embedding-cache.md).
# What reading a spreadsheet costs Parse, per 10,000 cells (docs/formats.md, "Spreadsheets"); no server.
.PHONY: bench-sheets
bench-sheets: install
	$(PY) -m bench.sheet_parse $(SHEETS_ARGS)

.PHONY: bench-reingest
bench-reingest: synth opensearch
	$(PY) -m bench.reingest

# POST /search at 100,000 chunks (k-NN, BM25, hybrid: p50/p95/p99 through the API, OpenSearch's took, the
# query embedding) and k-NN recall@10 against exact search, through a local stack on free ports with an
# index of its own, deleted at the end (docs/benchmarks.md). SEARCH_ARGS="--chunks 2000 --queries 20": a quick run.
.PHONY: bench-search
bench-search: synth opensearch
	$(PY) -m bench.search_scale $(SEARCH_ARGS)

# The k-NN index's memory a chunk and make eval's quality per vector setting, on the real OpenSearch
# (bench/vector_settings.py; docs/benchmarks.md, "Vector memory"). VECTORS_ARGS="--chunks 2000" is quick.
.PHONY: bench-vectors
bench-vectors: install opensearch
	$(PY) -m bench.vector_settings $(VECTORS_ARGS)

# A 2,000-page PDF (bench/big_document.py, from the eval corpus's freely licensed text) through a fresh
# local stack: progress lines, wall time to READY, history events, peak RSS of the Parse and Chunk
# workers; then one Parse range's peak RSS against the whole document's (docs/architecture.md).
.PHONY: bench-big
BIG_PAGES ?= 2000
bench-big: synth opensearch
	$(PY) -m bench.big_document run --pages $(BIG_PAGES)
	$(PY) -m bench.big_document rss --pages $(BIG_PAGES)

# Issue 11's isolation goal: fifty distinct 5-page PDFs uploaded alone, then right behind a 2,000-page one,
# each phase through a fresh local stack: p50/p95/max from upload to READY per phase, failed and stuck
# documents, p95(with)/p95(alone) against 1.5 (docs/benchmarks.md). ISOLATION_ARGS="--small 3 --big-pages 120":
# a quick run; --wait-big also waits for the big one; --timeout bounds each phase's wait.
.PHONY: bench-isolation
bench-isolation: synth opensearch
	$(PY) -m bench.isolation run $(ISOLATION_ARGS)

# Issue 45's fair share: tenant B's 1-page uploads every few seconds alone, then beside tenant A's 2,000-page
# backfill, each phase on a fresh local stack under the bedrock quota profile: B's p50/p95 per phase, the ratio
# against 1.5, A's throughput (docs/benchmarks.md). FAIRNESS_ARGS="--pages 400 --b-docs 8": a scaled run.
.PHONY: bench-fairness
bench-fairness: synth opensearch
	$(PY) -m bench.fairness $(FAIRNESS_ARGS)

# The README's picture of the page (docs/img/page.png), written by the browser test that asks a question.
.PHONY: readme-screenshot
readme-screenshot: synth opensearch chromium ocr-tools
	RAG_INGEST_README_SCREENSHOT=1 .venv/bin/pytest -q -p no:cacheprovider \
	  "tests/browser/test_page.py::test_a_slide_and_a_word_paragraph_open_where_they_stand_in_the_rendered_view"

# Issue 44's answer path: POST /search, reranked, and POST /answer on the sample PDFs (docs/benchmarks.md).
.PHONY: bench-answer
bench-answer: synth opensearch
	$(PY) -m bench.answer_latency

# Issue 43's sync figures: the S3 source on fresh local stacks (bench/sync_s3.py: N objects with the ingest
# consumer off, the sync alone; then end to end at a smaller N: READY, Parse runs, embedding calls, search),
# then the web connector (bench-sync-web). SYNC_S3_ARGS="--objects 500 --e2e-objects 50": a quick run.
.PHONY: bench-sync
bench-sync: synth opensearch bench-sync-web
	$(PY) -m bench.sync_s3 $(SYNC_S3_ARGS)

# The web connector and its policy-checked fetcher over a test site on 127.0.0.1: pages found against
# expected, and fetches outside the scope, disallowed or to a private address, which must be 0 (docs/benchmarks.md).
.PHONY: bench-sync-web
bench-sync-web: install
	$(PY) -m bench.sync_web $(SYNC_WEB_ARGS)

# rag-ingest against LangChain and LlamaIndex on bench/corpus (docs/benchmarks.md). The peers live in
# their own venv, .venv-peers, never in the product's; the embedder there is rag-ingest's own code.
.PHONY: bench-peers
PEERS_VENV_STAMP := .venv-peers/.installed-$(shell cat bench/requirements-peers.txt pyproject.toml | sha256sum | cut -c1-12)
bench-peers: synth opensearch $(PEERS_VENV_STAMP)
	$(PY) -m bench.peers
$(PEERS_VENV_STAMP): bench/requirements-peers.txt pyproject.toml
	test -x .venv-peers/bin/python || python3 -m venv .venv-peers
	.venv-peers/bin/pip install -q --upgrade pip
	.venv-peers/bin/pip install -q -r bench/requirements-peers.txt
	.venv-peers/bin/pip install -q --no-deps -e .
	rm -f .venv-peers/.installed-* && touch $@

# rag-ingest, LangChain (langchain-aws) and LlamaIndex (llama-index-embeddings-bedrock) on bench/corpus/
# manifest-aws.json, each against the local Bedrock-compatible server under the bedrock and bedrock-low-quota
# profiles (deterministic vectors): pages/s, throttles, failed documents, % of the quota's ceiling; writes
# bench/aws/measured-<UTC date-HHMM>.json (docs/benchmarks.md). AWS_ARGS="--profiles bedrock": the default quota only.
.PHONY: bench-aws
bench-aws: synth opensearch $(PEERS_VENV_STAMP)
	$(PY) -m bench.aws $(AWS_ARGS)

# Issue 47: a corpus of more than ten minutes of the default Bedrock quota (varied copies of the real corpora, built
# once into .local/bench-quota/), then rag-ingest, and LangChain and LlamaIndex side by side, at the bedrock profile:
# the share of the quota per minute (docs/benchmarks.md). QUOTA_ARGS="--systems rag-ingest": one system.
.PHONY: bench-quota
bench-quota: synth opensearch $(PEERS_VENV_STAMP)
	test -f .local/bench-quota/manifest.json || $(PY) -m bench.aws.quota_bound build
	$(PY) -m bench.aws.quota_bound run $(QUOTA_ARGS)

# Issue 47: upload -> first passage found by POST /search for 1-, 10- and 100-page PDFs on a warm local stack at the
# bedrock profile, p50/p95 and the split by stage, then the AWS model (docs/latency.md). SEARCHABLE_ARGS="--runs 3".
.PHONY: bench-searchable
bench-searchable: synth opensearch
	$(PY) -m bench.time_to_searchable $(SEARCHABLE_ARGS)

# The API fuzzed from its own OpenAPI document by schemathesis (tools/fuzz.py, hooks in tools/fuzz_hooks.py):
# every route as tenant A, with links, while tenant B's document, source and webhook must stay out of reach;
# rounds repeat until 10,000 requests (docs/fuzzing.md). make test runs a short seeded run. FUZZ_ARGS="--examples 5
# --min-requests 0": a quick run. Needs OpenSearch (make opensearch, or OPENSEARCH_URL).
.PHONY: fuzz
fuzz: synth opensearch
	mkdir -p bench/results
	$(PY) -m tools.fuzz $(FUZZ_ARGS)

# The 200-upload burst with 10 % injected faults (make test runs a 40-upload one); figures in docs/reliability.md.
burst: synth opensearch
	mkdir -p bench/results
	RELIABILITY_BURST=200 RELIABILITY_REPORT=bench/results/burst-200.json .venv/bin/pytest tests/reliability/test_burst.py -s

# Issue 45's load test (bench/load.py): a fresh local stack with the Bedrock profile (quotas, latency,
# deterministic vectors), locust's users (bench/load_users.py) over 20 tenants for 10 minutes, then every
# document READY, FAILED with its input's code or DELETED, 0 reconciler drift, 0 passages indexed twice;
# exits 1 when a check fails. Writes bench/results/load-<time>.json and .csv (docs/benchmarks.md).
# LOAD_ARGS="--minutes 1 --tenants 4": a quick run.
.PHONY: load
load: synth opensearch
	mkdir -p bench/results
	$(PY) -m bench.load $(LOAD_ARGS)

# One kill -9 at a time during a burst of uploads (OpenSearch mid-Index, the embedding server mid-batch, a
# stage worker, moto, the whole stack), each on a fresh local stack: outcomes, reconciler drift, duplicated
# passages, time to recover (docs/chaos.md). CHAOS_ARGS="--faults worker,embedding --documents 10": a quick run.
.PHONY: chaos
chaos: synth opensearch
	mkdir -p bench/results
	$(PY) -m bench.chaos --report bench/results/chaos.json $(CHAOS_ARGS)

# The pinned CDK CLI (package.json), installed again only when the lock file changes.
.PHONY: node-modules node-version
NODE_STAMP := node_modules/.installed-$(shell sha256sum package-lock.json | cut -c1-12)
node-modules: $(NODE_STAMP)
# Optional dependencies are Node-only extras (pdfjs-dist's canvas binding for server-side rendering):
# the page's PDF viewer runs in the browser.
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error --omit=optional
	# PDF.js for the page's PDF viewer (web/pdf-view.js): the built module, its worker and its licence,
	# copied as they ship into web/vendor/pdfjs/ (not committed; deployed and served with web/).
	rm -rf web/vendor/pdfjs && mkdir -p web/vendor/pdfjs
	cp node_modules/pdfjs-dist/build/pdf.min.mjs node_modules/pdfjs-dist/build/pdf.worker.min.mjs \
	  node_modules/pdfjs-dist/LICENSE web/vendor/pdfjs/
	touch $@

# Node 20 is end-of-life (jsii warns on every synth): the CDK CLI is tested on the LTS lines, 22 and 24.
node-version:
	@command -v node >/dev/null || { echo "Node.js is missing: install Node 22 or 24 LTS (docs/deploy.md)"; exit 1; }
	@major=$$(node -p 'process.versions.node.split(".")[0]'); [ "$$major" -ge 22 ] || \
	  echo "warning: Node $$(node --version) is end-of-life; use Node 22 or 24 LTS (docs/deploy.md)"

# deploy, diff, destroy and preflight: one entry point, cdk.json's app (.venv/bin/python app.py, no
# activation needed), which the CDK CLI binds to the credentials' account and region: the synth the
# bound-synth infra tests check. REGION=eu-west-1 picks the region; CDK_ARGS passes more (e.g. --all).
CDK := npx --no-install cdk
CDK_ARGS ?=
AWS_TARGET := $(if $(REGION),AWS_REGION=$(REGION) AWS_DEFAULT_REGION=$(REGION))
.PHONY: diff destroy preflight
preflight: install
	$(AWS_TARGET) .venv/bin/rag-ingest preflight $(if $(REGION),--region $(REGION))

deploy: layer node-modules node-version preflight
	$(AWS_TARGET) $(CDK) deploy $(CDK_ARGS)

diff: layer node-modules node-version
	$(AWS_TARGET) $(CDK) diff $(CDK_ARGS)

# Buckets, tables, the domain, log groups, the user pool and the key stay unless removalPolicy is
# "destroy": docs/deploy.md#teardown says what keeps billing and how to delete it.
destroy: layer node-modules node-version
	$(AWS_TARGET) $(CDK) destroy $(CDK_ARGS)

clean: stack-down opensearch-stop
	rm -rf cdk.out .build .pytest_cache .mypy_cache .ruff_cache

# Retrieval quality on eval/corpus (recall@1/@5, MRR): ours through a local stack started on free
# ports, against a naive baseline, and ours on the corpus's scanned variant (answer pages scanned and
# OCR'd by Tesseract: docs/ocr.md); every index it creates is deleted at the end.
.PHONY: eval
eval: synth opensearch ocr-tools
	$(PY) -m eval --scanned $(EVAL_ARGS)

# The AWS cost per 1,000 pages (docs/cost.md): measures one local-stack run on the sample PDFs when
# bench/results/cost-measurement.json is missing (COST_ARGS=--measure measures again; the run needs
# OpenSearch: make opensearch, or OPENSEARCH_URL), then prices it with cdk.json's configuration.
.PHONY: cost
cost: synth
	$(PY) -m bench.cost $(COST_ARGS)

# After `make deploy`: sign a test user in, upload a sample PDF, wait for READY, search, delete, each
# step timed (docs/cli.md). Needs AWS credentials allowed to administer the stack's user pool.
.PHONY: smoke
STACK ?= RagIngest
smoke: install
	.venv/bin/rag-ingest smoke --stack $(STACK) $(if $(REGION),--region $(REGION)) $(if $(SAMPLE),--sample $(SAMPLE))
