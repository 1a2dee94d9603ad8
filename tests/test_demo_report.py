"""docs/demo-results.md is what the demo prints: scripts/demo_report.py on a stored sweep.

``bash scripts/demo.sh`` prints its tables through ``scripts/demo_report.py``, which writes the same
output to the page. On a small stored sweep (the tiny corpus, two chunkings, BM25): the tables it
prints are ``ragexp compare``'s output verbatim and appear verbatim in the page; the page names no
path of the machine (the store, the cache, the temporary folder) and says which runs have traces;
``--check`` passes on the page it wrote, still passes when only times and memory differ, and fails
when a quality number differs. The committed page has the sections and table columns the
generator writes today (the cost columns included), checked against this fresh page.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import ENV, dataset_args, ragexp

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "demo_report.py"


@pytest.fixture(scope="module")
def sweep_store(tmp_path_factory):
    from tests.helpers.tiny_dataset import write_tiny_dataset

    root = tmp_path_factory.mktemp("demo-report")
    dataset = write_tiny_dataset(root)
    db = root / "mlflow.db"
    args = dataset_args(dataset, db)
    ragexp(root, "run", "-m", "chunking=fixed,recursive", "retrieval=bm25", "cost.latency_queries=3",
           f"cache_dir={root / 'cache'}", *args)
    return root, f"sqlite:///{db}"


def demo_report(root: Path, uri: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--tracking-uri", uri, "--out", str(out), *extra],
                          cwd=root, env=ENV, capture_output=True, text=True, timeout=300)


def printed_tables(stdout: str) -> dict[str, str]:
    """``heading -> output`` of what demo_report printed (``== heading ==`` then the output)."""
    parts = re.split(r"^== (.+) ==$", stdout, flags=re.M)
    return {heading: body.strip("\n").split("\n\nwrote ")[0] for heading, body in zip(parts[1::2], parts[2::2])}


def test_the_page_quotes_what_the_demo_prints_verbatim_and_no_machine_path(sweep_store, tmp_path):
    root, uri = sweep_store
    page_path = tmp_path / "demo-results.md"
    done = demo_report(root, uri, page_path)
    assert done.returncode == 0, done.stderr[-3000:]
    tables = printed_tables(done.stdout)
    assert len(tables) == 2, done.stdout
    page = page_path.read_text()
    compare_args = {"sort": ["compare", "--sort", "hit_rate_at_5"], "tag": ["compare", "--by-tag", "hit_rate_at_5"]}
    for (heading, output), args in zip(tables.items(), compare_args.values()):
        assert f"```\n{output}\n```" in page, heading
        direct = ragexp(root, *args, "--experiment", "tiny", "--tracking-uri", uri).stdout.rstrip()
        assert output == direct
    assert "p95 ms" in page and "peak RSS MB" in page  # the cost columns compare prints
    for machine in (str(root), str(tmp_path), os.path.expanduser("~"), "sqlite:", "cache_dir"):
        assert machine not in page, machine
    traced = re.search(r"Traces \(one per query, MLflow's GenAI pages\) for (\d+) of the (\d+) runs", page)
    assert traced and traced.group(2) == "2" and int(traced.group(1)) >= 1, page


def test_check_ignores_times_and_catches_a_changed_number(sweep_store, tmp_path):
    root, uri = sweep_store
    page_path = tmp_path / "demo-results.md"
    assert demo_report(root, uri, page_path).returncode == 0
    assert demo_report(root, uri, page_path, "--check").returncode == 0
    page = page_path.read_text()
    header, rule, first = re.search(r"^(run .*p95 ms.*)\n(-[- ]+)\n(.+)$", page, flags=re.M).groups()
    spans = [m.span() for m in re.finditer(r"-+", rule)]
    p95 = spans[[header[a:b].strip() for a, b in spans].index("p95 ms")]
    slower = first[: p95[0]] + "9999.9".rjust(p95[1] - p95[0]) + first[p95[1]:]
    page_path.write_text(page.replace(first, slower))
    assert demo_report(root, uri, page_path, "--check").returncode == 0, "a time alone differs"
    number = re.search(r"\d\.\d{4}", first.split("]", 1)[1]).group(0)
    changed = f"{float(number) + 0.0001:.4f}" if number != "1.0000" else "0.9999"
    page_path.write_text(page.replace(first, first.replace(number, changed, 1)))
    done = demo_report(root, uri, page_path, "--check")
    assert done.returncode == 1 and changed in done.stdout, done.stdout


def skeleton(page: str) -> list[str]:
    """Headings and table column names of a demo-results page."""
    lines = page.splitlines()
    heads = [line for line in lines if line.startswith("#")]
    columns = [lines[i - 1].split("  ")[0:1] + re.split(r"\s{2,}", lines[i - 1].strip())[1:]
               for i, line in enumerate(lines) if re.fullmatch(r"-+(  -+)*", line)]
    return heads + [" | ".join(c[1:]) for c in columns[:1]]  # the by-tag table's columns are the eval set's tags


def test_the_committed_page_has_todays_sections_and_columns(sweep_store, tmp_path):
    root, uri = sweep_store
    fresh = tmp_path / "demo-results.md"
    assert demo_report(root, uri, fresh).returncode == 0
    committed = (REPO / "docs" / "demo-results.md").read_text()
    assert skeleton(committed) == skeleton(fresh.read_text())
    assert "/tmp/" not in committed and "sqlite:" not in committed and "cache" not in committed
