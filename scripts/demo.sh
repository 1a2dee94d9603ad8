#!/usr/bin/env bash
# The main job: set up, run the demo sweep on the built-in dataset with local models, compare.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ragexp run -m experiment=demo_sweep "$@"
echo
echo "== hit rate, recall, precision, nDCG at k=5 and MRR per configuration (* = best) =="
.venv/bin/ragexp compare --experiment ragexp-demo --sort hit_rate_at_5
echo
echo "== hit rate@5 per question category =="
.venv/bin/ragexp compare --experiment ragexp-demo --by-tag hit_rate_at_5
echo
echo "Open the MLflow UI with:  .venv/bin/ragexp ui   (then http://127.0.0.1:5000)"
