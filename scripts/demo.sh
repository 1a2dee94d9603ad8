#!/usr/bin/env bash
# The main job: set up, run the demo sweep on the built-in dataset with local models, compare
# (the tables are also written to docs/demo-results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ragexp run -m experiment=demo_sweep "$@"
# ragexp compare --sort hit_rate_at_5 and --by-tag hit_rate_at_5 on the newest sweep's experiment,
# printed and written to docs/demo-results.md
.venv/bin/python scripts/demo_report.py
echo
echo "Open the MLflow UI with:  .venv/bin/ragexp ui   (it prints the URL of the runs, headline metrics first)"
