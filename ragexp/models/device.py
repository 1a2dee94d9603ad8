"""The device a model runs on, from a config's ``device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

Every config group whose component takes one lists it (``embedding``, ``reranker``, the
generator's and the local judge's ``model``), ``auto`` by default::

    resolve_device("auto")   = "cuda" when torch sees a CUDA device, else "cpu"
    resolve_device("cpu")    = "cpu"
    resolve_device("cuda:N") = "cuda:N" when torch sees more than N CUDA devices, else an input error

Torch is asked only where a GPU driver is present (``/proc/driver/nvidia`` or ``/dev/kfd``), so
``auto`` costs a retrieval-only run on a machine without one no torch import.
:func:`resolved_devices` applies the same rules to a whole config before any work
(:mod:`ragexp.evaluation.checks`): ``embedding.device=cuda`` on a machine without CUDA fails
with one line and exit code 2. The devices a run's components resolved to are a tag of the run
(``ragexp.devices``, :func:`devices_tag`: ``embedding.device=cuda generator.model.device=cuda``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ragexp.errors import RagexpInputError

_DEVICE = re.compile(r"(auto|cpu|cuda)(?::(\d+))?")
GPU_DRIVER_FILES = ("/proc/driver/nvidia", "/dev/kfd")


def cuda_device_count() -> int:
    """CUDA devices torch sees (0 without a GPU driver, without importing torch)."""
    if not any(os.path.exists(path) for path in GPU_DRIVER_FILES):
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def onnx_cuda_available() -> bool:
    """Whether the installed ONNX Runtime has its CUDA provider (the ``onnxruntime-gpu`` package)."""
    import onnxruntime

    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def resolve_device(device: str, field: str = "device") -> str:
    """The device ``device`` names (see the module docstring); an input error for anything else."""
    match = _DEVICE.fullmatch(device) if isinstance(device, str) else None
    if match is None or (match.group(1) != "cuda" and match.group(2) is not None):
        raise RagexpInputError(f"must be auto, cpu, cuda or cuda:N, got {device!r}", field=field)
    if match.group(1) == "cpu":
        return "cpu"
    count = cuda_device_count()
    if match.group(1) == "auto":
        return "cuda" if count else "cpu"
    index = int(match.group(2) or 0)
    if index >= count:
        seen = "no CUDA device" if count == 0 else f"{count} CUDA device(s)"
        raise RagexpInputError(f"{device!r} asked for, but torch sees {seen} on this machine; use device=cpu or auto", field=field)
    return device


def resolved_devices(node: Any, path: str = "") -> dict[str, str]:
    """``{dotted path: device}`` for every ``device`` value in a resolved config (nested mappings
    and lists), each through :func:`resolve_device` (an input error names the path)."""
    found: dict[str, str] = {}
    if isinstance(node, Mapping):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "device" and value is not None:
                found[where] = resolve_device(value, field=where)
            else:
                found.update(resolved_devices(value, where))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.update(resolved_devices(value, f"{path}[{index}]"))
    return found


def devices_tag(config: Mapping[str, Any], groups: Sequence[str]) -> str:
    """``"<path>=<device> ..."`` for the ``device`` values of ``config``'s ``groups``, resolved
    (empty when none has one)."""
    found: dict[str, str] = {}
    for group in groups:
        found.update(resolved_devices(config.get(group), group))
    return " ".join(f"{path}={device}" for path, device in sorted(found.items()))
