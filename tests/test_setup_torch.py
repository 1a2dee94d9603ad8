"""scripts/setup.sh installs torch's CPU build on a machine without an NVIDIA GPU.

The default index's Linux wheels of ``torch==X`` are CUDA builds (about 2.7 GB with their nvidia-*
packages); the CPU build ``X+cpu`` lives on PyTorch's CPU wheel index. ``setup.sh --torch-args``
prints the pip arguments the install uses; these tests run it under a fake ``nvidia-smi`` (one that
lists a GPU, one that fails) and hand its arguments to ``pip install --dry-run --report``, whose
report says which build pip resolved. PyTorch's index itself cannot be reached from the test
machine: a local folder laid out as a simple index, holding the same +cpu wheel, stands in for it
(``RAGEXP_TORCH_CPU_INDEX``), with pip's own configuration switched off so that only the index the
script names can supply torch.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SETUP = REPO / "scripts" / "setup.sh"
TORCH_VERSION = "2.13.0"
FAKE_SMI = {"gpu": "#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'\n",
            "driver missing": "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n"}


def torch_args(tmp_path: Path, smi: str | None = None, **env: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if smi is not None:
        (bin_dir / "nvidia-smi").write_text(FAKE_SMI[smi])
        (bin_dir / "nvidia-smi").chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if k != "RAGEXP_TORCH"}
    environ.update(PATH=f"{bin_dir}:{environ['PATH']}", PYTHON=sys.executable, **env)
    return subprocess.run(["bash", str(SETUP), "--torch-args"], capture_output=True, text=True, env=environ,
                          timeout=300)


def dry_run(tmp_path: Path, args: list[str], *extra: str, env: dict | None = None) -> list[dict]:
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
                           "--report", str(report), *args, *extra], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [item["metadata"] for item in json.loads(report.read_text())["install"]]


@pytest.fixture(scope="module")
def cpu_wheel() -> Path:
    """The +cpu wheel this machine's pip finds (its find-links folder)."""
    folders = [p for p in os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split() if Path(p).is_dir()]
    wheels = [w for folder in folders for w in glob.glob(f"{folder}/torch-{TORCH_VERSION}+cpu-*.whl")]
    if not wheels:
        pytest.skip(f"no torch-{TORCH_VERSION}+cpu wheel in a local find-links folder ({folders})")
    return Path(wheels[0])


@pytest.mark.parametrize("smi", [None, "driver missing"], ids=["no nvidia-smi", "nvidia-smi fails"])
def test_without_a_gpu_the_cpu_build_is_pinned(tmp_path, smi):
    if smi is None and any((Path(d) / "nvidia-smi").exists() for d in os.environ["PATH"].split(":")):
        pytest.skip("this machine has an nvidia-smi")
    done = torch_args(tmp_path, smi)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"torch=={TORCH_VERSION}+cpu", done.stdout


def test_with_a_gpu_the_default_build_is_pinned_and_no_index_added(tmp_path):
    done = torch_args(tmp_path, "gpu")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"torch=={TORCH_VERSION}"]


@pytest.mark.parametrize(("smi", "override", "expected"),
                         [("gpu", "cpu", f"torch=={TORCH_VERSION}+cpu"), ("driver missing", "cuda", f"torch=={TORCH_VERSION}")])
def test_ragexp_torch_overrides_the_detection(tmp_path, smi, override, expected):
    done = torch_args(tmp_path, smi, RAGEXP_TORCH=override)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == expected


@pytest.mark.parametrize("value", ["gpu", "CPU", " cpu", "cpu;cuda"])
def test_a_bad_ragexp_torch_is_refused_in_one_line(tmp_path, value):
    done = torch_args(tmp_path, "gpu", RAGEXP_TORCH=value)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"setup.sh: RAGEXP_TORCH must be auto, cpu or cuda, got '{value}'"]


def test_where_pip_has_the_cpu_wheel_already_no_index_is_added_and_the_dry_run_resolves_it(tmp_path, cpu_wheel):
    """This machine's pip finds the +cpu wheel in a local folder: nothing else is asked, and a dry
    run of torch with sentence-transformers (which pulled a CUDA torch unpinned) resolves the CPU
    build and no nvidia-* package."""
    done = torch_args(tmp_path, "driver missing")
    args = done.stdout.splitlines()
    assert args == [f"torch=={TORCH_VERSION}+cpu"], done.stdout
    installed = dry_run(tmp_path, args, "sentence-transformers")
    versions = {item["name"].lower(): item["version"] for item in installed}
    assert versions["torch"] == f"{TORCH_VERSION}+cpu"
    assert "sentence-transformers" in versions
    assert not [name for name in versions if name.startswith("nvidia")], sorted(versions)


def test_where_pip_lacks_the_cpu_wheel_the_cpu_index_supplies_it(tmp_path, cpu_wheel):
    """A plain laptop: pip's index has no +cpu build, so the script names the CPU wheel index
    (``RAGEXP_TORCH_CPU_INDEX``, here a local stand-in) and the dry run resolves torch from it."""
    empty = tmp_path / "empty-index"
    (empty / "torch").mkdir(parents=True)
    stand_in = tmp_path / "cpu-index"  # a PEP 503 simple index: one page per project, a link per file
    (stand_in / "torch").mkdir(parents=True)
    (stand_in / "torch" / "index.html").write_text(f'<a href="{cpu_wheel.as_uri()}">{cpu_wheel.name}</a>\n')
    plain_pip = {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_INDEX_URL": empty.as_uri()}
    done = torch_args(tmp_path, "driver missing", RAGEXP_TORCH_CPU_INDEX=stand_in.as_uri(), **plain_pip)
    args = done.stdout.splitlines()
    assert args == [f"torch=={TORCH_VERSION}+cpu", "--extra-index-url", stand_in.as_uri()], done.stdout
    installed = dry_run(tmp_path, args, "--no-deps", env=plain_pip)
    assert [(item["name"], item["version"]) for item in installed] == [("torch", f"{TORCH_VERSION}+cpu")]


def test_the_default_cpu_index_is_pytorchs(tmp_path):
    empty = tmp_path / "empty-index"
    (empty / "torch").mkdir(parents=True)
    plain_pip = {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_INDEX_URL": empty.as_uri()}
    done = torch_args(tmp_path, "driver missing", **plain_pip)
    assert done.stdout.splitlines()[1:] == ["--extra-index-url", "https://download.pytorch.org/whl/cpu"], done.stdout
