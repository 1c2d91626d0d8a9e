#!/usr/bin/env bash
# apt-get install for the local targets (Java/Maven, Chromium). Another apt run (unattended
# upgrades, a second make in parallel) holds apt's locks for a while: wait for them instead of
# failing the build.
set -euo pipefail
for attempt in $(seq 1 30); do
  if apt-get -o DPkg::Lock::Timeout=600 update -q; then break; fi
  [[ $attempt == 30 ]] && { echo "apt-get update kept failing" >&2; exit 1; }
  echo "apt-get update failed (another apt run holds its lock?), retrying in 10 s" >&2
  sleep 10
done
apt-get -o DPkg::Lock::Timeout=600 install -y -q "$@"
