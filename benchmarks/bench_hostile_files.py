"""Hostile files and configs: peak RSS and time to refusal, before and after the parse bounds (issues #40, #52).

Each case writes a small file that parses into a lot (``tests/helpers/hostile_files.py``), then
runs the reader a command runs on it in a fresh process, once with the code of ``--before`` (a
checkout of the commit before the bounds) and once with this checkout, and reports the process's
peak RSS (``ru_maxrss``; of the process or of the child it ran a document library in, whichever
is larger), its RSS after importing the reader (the baseline), the time from the
start of the read to its end, and what it ended with. Each case also reads the largest file
within its bound ("at the cap") with this checkout, and the table checks that the hostile file's
peak stays within 2x what the cap costs (measured at the cap, or the cap itself where it is stated
in bytes of what parsing produces: PDF streams, DOCX parts) plus the baseline. A "before" process is stopped at
``--memory-gb`` of address space or ``--timeout`` seconds (shown as ``>=`` its high-water RSS).

    git archive a39e7ac | tar -x -C /tmp/before
    nice -n 10 python benchmarks/bench_hostile_files.py --before /tmp/before > table.md
    git archive bd8562d | tar -x -C /tmp/before52   # issue #52's rows, named "(#52)"
    nice -n 10 python benchmarks/bench_hostile_files.py --before /tmp/before52 --only "(#52)"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20

#: Runs in the child: baseline RSS after the imports, then the read, then what happened.
CHILD = r"""
import json, os, resource, sys, time
limit = int(sys.argv[3])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
setup, call = sys.argv[1], sys.argv[2]
exec(setup)
baseline = rss()
started = time.perf_counter()
try:
    exec(call)
    outcome = "accepted"
except MemoryError:
    outcome = "MemoryError"
except BaseException as err:
    outcome = type(err).__name__ + ": " + str(err).splitlines()[0][:90] if str(err) else type(err).__name__
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({"seconds": time.perf_counter() - started, "baseline": baseline, "peak": peak * 1024,
                  "outcome": outcome}))
"""


@dataclass(frozen=True)
class Case:
    name: str
    cap: str  # the documented bound, as the docs name it
    setup: str  # imports (the baseline is measured after them)
    call: str  # the read, with {path}
    hostile: str  # expression writing the hostile file, with {path}
    at_cap: str  # expression writing the largest accepted file, with {path}
    cap_bytes: int = 0  # a cap stated in bytes of what parsing produces (PDF streams, DOCX parts)


CASES = [
    Case("PDF whose stream inflates to 1 GiB (1 MB file)", "256 MiB decoded",
         "from ragexp.data.convert import converter_for\nfrom ragexp.data.convert.base import ConvertOptions",
         "converter_for('.pdf').convert(open({path!r},'rb').read(), ConvertOptions())",
         "pdf_bomb(Path({path!r}), 1024 * MIB)", "pdf_bomb(Path({path!r}), 16 * MIB)", 256 * MIB),
    Case("PDF whose stream inflates to 1.2 GiB, filter spelled /Fl#61teDecode (1.2 MB) (#52)",
         "1 GiB address space for PDFium",
         "from ragexp.data.convert import converter_for\nfrom ragexp.data.convert.base import ConvertOptions",
         "converter_for('.pdf').convert(open({path!r},'rb').read(), ConvertOptions())",
         "pdf_bomb(Path({path!r}), 1200 * MIB, 'name escape')", "pdf_bomb(Path({path!r}), 2 * MIB, 'name escape')",
         1024 * MIB),
    Case("PDF whose stream inflates to 1.2 GiB, filter held in an indirect array (2.6 KB) (#52)",
         "1 GiB address space for PDFium",
         "from ragexp.data.convert import converter_for\nfrom ragexp.data.convert.base import ConvertOptions",
         "converter_for('.pdf').convert(open({path!r},'rb').read(), ConvertOptions())",
         "pdf_bomb(Path({path!r}), 1200 * MIB, 'indirect array')", "pdf_bomb(Path({path!r}), 2 * MIB, 'indirect array')",
         1024 * MIB),
    Case("HTML page of 2.5M tiny elements (20 MB)", "200,000 tags",
         "from ragexp.data.convert import converter_for\nfrom ragexp.data.convert.base import ConvertOptions",
         "converter_for('.html').convert(open({path!r},'rb').read(), ConvertOptions())",
         "html_many_elements(Path({path!r}), 2_500_000)", "html_many_elements(Path({path!r}), 99_000)"),
    Case("DOCX of 10M empty paragraphs (64 MiB unpacked)", "500,000 XML tags",
         "from ragexp.data.convert import converter_for\nfrom ragexp.data.convert.base import ConvertOptions",
         "converter_for('.docx').convert(open({path!r},'rb').read(), ConvertOptions())",
         "docx_many_elements(Path({path!r}), 10_000_000)", "docx_many_elements(Path({path!r}), 100_000)", 64 * MIB),
    Case("DOCX of 10M empty paragraphs, main part named word/main.bin (#52)", "500,000 tags in any XML part",
         "from ragexp.data.convert import converter_for\nfrom ragexp.data.convert.base import ConvertOptions",
         "converter_for('.docx').convert(open({path!r},'rb').read(), ConvertOptions())",
         "docx_many_elements(Path({path!r}), 10_000_000, 'a .bin suffix')",
         "docx_many_elements(Path({path!r}), 100_000, 'a .bin suffix')", 64 * MIB),
    Case("recorded outputs of 20M empty objects over 100 lines (60 MB) (#52)", "8M values, 1 GiB produced",
         "from ragexp.systems.recorded import RecordedSystem\nfrom ragexp.systems.response import ResponseFields",
         "RecordedSystem({path!r}, ResponseFields(), response_field='response')",
         "recorded_empty_objects(Path({path!r}), 20_000_000)", "recorded_empty_objects(Path({path!r}), 7_900_000)"),
    Case("annotate's JSONL eval set of 4M tags (28 MB) (#52)", "2M JSON values",
         "from ragexp.annotation.session import Session", "Session(__import__('pathlib').Path({path!r}))",
         "jsonl_many_values(Path({path!r}), 4_000_000)", "jsonl_many_values(Path({path!r}), 1_950_000)"),
    Case("results file of 21M empty objects (64 MiB)", "4M JSON values",
         "from ragexp.evaluation.results import RunResults", "RunResults.load({path!r})",
         "results_empty_objects(Path({path!r}), 21_000_000)", "results_empty_objects(Path({path!r}), 1_999_000)"),
    Case("YAML eval set of 1.4M empty lists (4 MB)", "200,000 YAML nodes",
         "from ragexp.data.evalset_schema import read_file", "read_file({path!r})",
         "yaml_many_nodes(Path({path!r}), 1_400_000)", "yaml_many_nodes(Path({path!r}), 199_990)"),
    Case("JSONL eval set of 4M tags (28 MB)", "2M JSON values",
         "from ragexp.data.evalset_schema import read_file", "read_file({path!r})",
         "jsonl_many_values(Path({path!r}), 4_000_000)", "jsonl_many_values(Path({path!r}), 1_950_000)"),
    Case("saved resolved.yaml of 350,000 empty lists (1 MiB)", "20,000 YAML nodes",
         "from ragexp.config.run_config import parse_run_config", "parse_run_config({path!r})",
         "yaml_many_nodes(Path({path!r}), 349_000)", "yaml_many_nodes(Path({path!r}), 19_990)"),
    Case("gzip query log of 4 GiB of one query (4 MB)", "200x the compressed bytes",
         "from ragexp.candidates.log_reader import read_log", "for _ in read_log(__import__('pathlib').Path({path!r})): pass",
         "gzip_bomb(Path({path!r}), 4096 * MIB)", "gzip_bomb(Path({path!r}), 256 * MIB)"),
    Case("query log of 2M distinct queries (70 MB)", "1,000,000 distinct queries",
         "from pathlib import Path\nfrom ragexp.candidates.distinct import DistinctQueries\n"
         "from ragexp.candidates.log_reader import read_log",
         "t = DistinctQueries(); s = t.add_source('x')\nfor n, q in read_log(Path({path!r})): t.add(q, s, n)",
         "distinct_queries_log(Path({path!r}), 2_000_000)", "distinct_queries_log(Path({path!r}), 999_000)"),
]
WRITERS = ("from pathlib import Path\nfrom tests.helpers.hostile_files import *\nMIB = 1 << 20\n")


def run(tree: Path, case: Case, path: Path, limit: int, timeout: float) -> dict:
    """The child's report; a child stopped at ``timeout`` reports the high-water RSS polled until then."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, case.setup, case.call.format(path=str(path)), str(limit)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=path.parent)
    started, high_water = time.monotonic(), 0
    while child.poll() is None and time.monotonic() - started < timeout:
        high_water = max(high_water, _vm_hwm(child.pid))
        time.sleep(0.2)
    if child.poll() is None:
        child.kill()
        child.communicate()
        return {"seconds": timeout, "peak": high_water, "baseline": None, "outcome": f"stopped after {timeout:.0f} s",
                "stopped": True}
    out, err = child.communicate()
    lines = out.strip().splitlines()
    if child.returncode != 0 or not lines:
        return {"seconds": time.monotonic() - started, "peak": high_water or None, "baseline": None,
                "outcome": f"killed ({child.returncode}): {(err.strip().splitlines() or [''])[-1][:60]}"}
    return json.loads(lines[-1])


def _vm_hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            return next((int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


def mb(value: int | None, stopped: bool = False) -> str:
    return "-" if value is None else f"{'>= ' if stopped else ''}{value / MIB:,.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the code before the bounds")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit of a 'before' process")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a process may run")
    parser.add_argument("--only", help="run the cases whose name contains this")
    args = parser.parse_args()
    limit = int(args.memory_gb * 1024 * MIB)
    print("| hostile input | bound | before: peak RSS, time, outcome | after: peak RSS (baseline), time to refusal | "
          "at the cap: peak RSS | after within 2x cap + baseline |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="ragexp-hostile-") as tmp:
        for case in CASES:
            if args.only and args.only not in case.name:
                continue
            hostile, at_cap = Path(tmp) / f"hostile{_suffix(case)}", Path(tmp) / f"cap{_suffix(case)}"
            subprocess.run([sys.executable, "-c", WRITERS + case.hostile.format(path=str(hostile)) + "\n" +
                            case.at_cap.format(path=str(at_cap))], check=True, cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
            before, after, cap = (_shown(run(args.before, case, hostile, limit, args.timeout), tmp),
                                  _shown(run(REPO, case, hostile, 0, args.timeout), tmp),
                                  _shown(run(REPO, case, at_cap, 0, args.timeout), tmp))
            within = "-"
            cost = max(cap["peak"] - cap["baseline"], 0) if cap.get("baseline") is not None else 0
            if after.get("baseline") is not None and (cost or case.cap_bytes):
                allowed = 2 * max(cost, case.cap_bytes) + after["baseline"]
                within = f"{'yes' if after['peak'] <= allowed else 'NO'} ({mb(after['peak'])} <= {mb(allowed)})"
            print(f"| {case.name} | {case.cap} | {mb(before['peak'], before.get('stopped', False))}, {_s(before)}, "
                  f"{before['outcome'][:70]} | "
                  f"{mb(after['peak'])} ({mb(after['baseline'])}), {_s(after)}: {after['outcome'][:80]} | "
                  f"{mb(cap['peak'])}, {_s(cap)}, {cap['outcome'][:30]} | {within} |", flush=True)
            for file in (hostile, at_cap):
                file.unlink(missing_ok=True)


def _suffix(case: Case) -> str:
    for word, suffix in (("PDF", ".pdf"), ("HTML", ".html"), ("DOCX", ".docx"), ("results", ".json"), ("recorded", ".jsonl"), ("annotate", ".jsonl"), ("YAML", ".yaml"),
                         ("JSONL", ".jsonl"), ("resolved", ".yaml"), ("gzip", ".log.gz"), ("distinct", ".log")):
        if word in case.name:
            return suffix
    return ""


def _shown(result: dict, folder: str) -> dict:
    return {**result, "outcome": result["outcome"].replace(folder + "/", "").replace("|", "/")}


def _s(result: dict) -> str:
    return "-" if result["seconds"] is None else f"{result['seconds']:.1f} s"


if __name__ == "__main__":
    main()
