#!/usr/bin/env bash
# The report screenshots of docs/guide/report-and-whatif.md and docs/guide/plan.md, taken
# by headless Chromium:
#   scripts/report_screenshots.sh [SHADOW_EVENTS_DIR]
# docs/images/plan.png: `kcsim plan --report` of a roll of examples/plan/state.jsonl.
# docs/images/whatif-migration.png: the migration preview of examples/migration (a recorded
# ZooKeeper-mode chaos day under both engines). docs/images/report.png: the report of
# examples/events. With SHADOW_EVENTS_DIR (a `kcsim shadow
# --out file:DIR` directory), docs/images/report-shadow.png: the report of those events.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kcsim() { PYTHONPATH="$PWD" python -m streaming.cli "$@"; }

shoot() {  # shoot PAGE PNG HEIGHT
  chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-sync \
    --disable-background-networking --disable-component-update --hide-scrollbars \
    --user-data-dir="$work/profile" --virtual-time-budget=10000 \
    --window-size=1280,"$3" --screenshot="$2" "file://$1" 2>/dev/null
}

kcsim whatif examples/migration --vs kcsim.engine=kraft --report "$work/migration.html" >/dev/null
shoot "$work/migration.html" docs/images/whatif-migration.png 1500
kcsim replay examples/events --out "$work/examples" --quiet
kcsim report --replay "$work/examples" --out "$work/examples.html" --quiet
shoot "$work/examples.html" docs/images/report.png 4000
# (exit 4: the roll is unsafe, which is what the page shows)
kcsim plan --state events:examples/plan/state.jsonl --steps roll:1,2,3 \
  --report "$work/plan.html" --quiet || [ $? -eq 4 ]
shoot "$work/plan.html" docs/images/plan.png 1700
if [ $# -ge 1 ]; then
  kcsim replay "$1" --out "$work/shadow" --quiet
  kcsim report --replay "$work/shadow" --out "$work/shadow.html" --quiet
  shoot "$work/shadow.html" docs/images/report-shadow.png 2300
fi
