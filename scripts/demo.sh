#!/usr/bin/env bash
# The main job: set up, run the demo sweep on the built-in dataset with local models, compare.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ragexp run -m experiment=demo_sweep "$@"
echo
echo "== hit rate, recall, precision, nDCG at k=5 and MRR per configuration (* = best) =="
.venv/bin/ragexp compare --sort hit_rate_at_5   # the newest experiment: the demo eval set's
echo
echo "== hit rate@5 per question category =="
.venv/bin/ragexp compare --by-tag hit_rate_at_5
echo
echo "Open the MLflow UI with:  .venv/bin/ragexp ui   (it prints the URL of the runs, headline metrics first)"
