"""A document library's parse in a child process with bounded memory, time and output.

What PDFium and mammoth build while they read a file depends on everything the format lets the
file say (every spelling of a filter, of a name, of a part's path, indirect objects, object
streams); a check that recognises spellings misses the ones it does not know. The bound here is
on what the parse *produces*, whatever the file says: :func:`run_isolated` runs one function of
a converter module in a fresh Python process (``python -m ragexp.data.convert.isolated
MODULE:FUNCTION``, the file's bytes on its standard input) that first sets its own limits:

- address space (``RLIMIT_AS``): :data:`MAX_MEMORY_BYTES`; an allocation past it fails in the
  child (PDFium stops the process, Python raises ``MemoryError``), never in ragexp's process;
- CPU time (``RLIMIT_CPU``): :data:`MAX_CPU_SECONDS`, and :data:`MAX_WALL_SECONDS` of wall-clock
  time before the parent kills it;
- output: the task's result as ASCII JSON of at most :data:`MAX_OUTPUT_BYTES`, parsed by the
  parent within :func:`ragexp.stored.limits.parse_json`'s bounds.

A child that stops any other way than with its result is :class:`Unconvertible`, one line: the
memory bound, the time bound, the output bound, or the library's own refusal (a damaged or
encrypted file), which the child reports as ``{"refused": reason}``.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from ragexp.data.convert.base import MAX_DOCUMENT_BYTES, Unconvertible
from ragexp.errors import RagexpInputError
from ragexp.stored.limits import parse_json

#: Address space of the child (its own ~40 MiB of Python and the libraries included): a 1,000-page
#: PDF's text extraction or a 300-page DOCX's mammoth tree need well under a quarter of it.
MAX_MEMORY_BYTES = 1024 * 1024 * 1024
MAX_CPU_SECONDS = 300
MAX_WALL_SECONDS = 600
#: The task's JSON result (page lines with font sizes, or mammoth's HTML): no more than a plain-text
#: document may hold, read back within :mod:`ragexp.stored.limits`' value bound (2M values).
MAX_OUTPUT_BYTES = MAX_DOCUMENT_BYTES
#: The child's exit status when Python itself ran out of its address space.
_OUT_OF_MEMORY = 3


#: The modules whose functions a child may run (its argument names one; nothing else is imported).
_TASK_PACKAGE = "ragexp.data.convert."


def run_isolated(task: Callable[[bytes], Any], data: bytes, what: str) -> Any:
    """``task(data)`` computed in a bounded child (module docstring): ``task`` is a module-level
    function of :mod:`ragexp.data.convert` returning JSON data; ``what`` names the library in
    refusals (``"PDFium"``)."""
    name = f"{task.__module__}:{task.__qualname__}"
    if not task.__module__.startswith(_TASK_PACKAGE) or "." in task.__qualname__:
        raise ValueError(f"{name} is not a converter module's function")
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, "-m", "ragexp.data.convert.isolated", name], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        out, _ = child.communicate(data, timeout=MAX_WALL_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise Unconvertible(f"{what} ran past {MAX_WALL_SECONDS} s on it (refused)") from None
    if child.returncode == _OUT_OF_MEMORY or child.returncode in (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGTRAP,
                                                                  -signal.SIGBUS, -signal.SIGKILL):
        raise Unconvertible(f"{what} needed more than {MAX_MEMORY_BYTES // 2**20} MiB of memory to read it (refused "
                            "as a possible decompression bomb)")
    if child.returncode == -signal.SIGXCPU:
        raise Unconvertible(f"{what} ran past {MAX_CPU_SECONDS} s of CPU time on it (refused)")
    if child.returncode != 0:
        raise Unconvertible(f"{what} stopped on it (exit status {child.returncode})")
    if len(out) > MAX_OUTPUT_BYTES:
        raise Unconvertible(f"its text is more than {MAX_OUTPUT_BYTES // 2**20} MiB (refused)")
    try:
        result = parse_json(out.decode("ascii"), max_depth=8)
    except RagexpInputError as err:
        raise Unconvertible(f"{what}'s result for it is too large ({err.message})") from None
    if "refused" in result:
        raise Unconvertible(result["refused"])
    return result["value"]


def _child(name: str) -> int:
    resource.setrlimit(resource.RLIMIT_AS, (MAX_MEMORY_BYTES, MAX_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (MAX_CPU_SECONDS, MAX_CPU_SECONDS + 5))
    module, function = name.split(":")
    if not module.startswith(_TASK_PACKAGE):
        raise SystemExit(f"not a converter module: {module}")
    task = getattr(importlib.import_module(module), function)
    data = sys.stdin.buffer.read()
    try:
        result = {"value": task(data)}
    except Unconvertible as err:
        result = {"refused": str(err)}
    except MemoryError:
        return _OUT_OF_MEMORY
    except Exception as err:  # noqa: BLE001 - a library failing on a malformed file: the file is refused, one line
        first = str(err).splitlines()[0][:200] if str(err) else ""
        result = {"refused": f"{function} failed on it ({type(err).__name__}: {first})"}
    try:  # ASCII JSON: a lone surrogate in the text comes back as the same escape
        text = json.dumps(result, allow_nan=False, separators=(",", ":")).encode("ascii")
    except MemoryError:
        return _OUT_OF_MEMORY
    if len(text) > MAX_OUTPUT_BYTES:
        text = json.dumps({"refused": f"its text is more than {MAX_OUTPUT_BYTES // 2**20} MiB (refused)"}).encode()
    sys.stdout.buffer.write(text)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
