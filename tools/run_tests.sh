#!/usr/bin/env bash
# make test: lint, then every test suite in one pytest run with the real servers up.
# Servers started here are stopped on exit, whatever the outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

echo "== lint (ruff, mypy, prose)"
make --no-print-directory lint

started_opensearch=""
if [[ -z "${OPENSEARCH_URL:-}" ]]; then
  if ! $PY -m local.opensearch status >/dev/null 2>&1; then
    started_opensearch=1
  fi
  $PY -m local.opensearch start
fi
cleanup() {
  [[ -n "$started_opensearch" ]] && $PY -m local.opensearch stop || true
}
trap cleanup EXIT

echo "== tests: unit, infra, integration, browser, e2e, reliability"
# Two workers, a file each at a time: each worker starts its own local stack on free ports (the
# OpenSearch server is shared, tenants keep them apart). The slowest tests go in the log.
.venv/bin/pytest tests -n "${TEST_WORKERS:-2}" --dist loadfile --durations=40 "$@"
