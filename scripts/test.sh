#!/usr/bin/env bash
# The tests: set up (including Chromium for the browser test), then the whole suite on two pytest
# workers (pytest-xdist; each test file stays on one worker, so its module fixtures are built once).
# Extra arguments go to pytest: bash scripts/test.sh -m "not slow and not browser" is the fast lane.
# RAGEXP_TEST_WORKERS=0 runs everything in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --browser
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest -n "${RAGEXP_TEST_WORKERS:-2}" --dist loadfile "$@"
