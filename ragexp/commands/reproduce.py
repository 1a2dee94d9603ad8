"""``ragexp reproduce RUN_ID``: re-run a logged run from its saved config and diff the metrics.

The saved ``config/resolved.yaml`` is re-executed as is (no defaults are re-composed, so later
changes to ``conf/`` do not leak in). Differences in code version or data fingerprints are
warned about first. By default a fresh, empty stage cache is used so nothing cached is trusted.
Exit 0 when every deterministic retrieval metric matches exactly, 1 when one differs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ragexp.commands._runs import add_tracking_argument, client_for, get_run
from ragexp.config import load_saved_config
from ragexp.summary import format_table
from ragexp.tracking import store

RETRIEVAL_PREFIXES = ("recall_at_", "hit_rate_at_", "mrr", "context_precision_at_", "ndcg_at_", "doc_", "tag.", "n_queries")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--use-cache", action="store_true", help="reuse the stage cache (default: recompute everything)")
    parser.add_argument("--no-log", action="store_true", help="do not log the reproduction as a new MLflow run")
    add_tracking_argument(parser)


def run(args: argparse.Namespace) -> int:
    from ragexp.cache import StageCache
    from ragexp.job import run_job

    client, uri = client_for(args)
    original = get_run(client, args.run_id)
    saved = store.download_artifact(args.run_id, store.CONFIG_ARTIFACT, uri)
    cfg = load_saved_config(saved)
    cfg.tracking.uri = uri
    cache = StageCache(Path(cfg.cache_dir) if args.use_cache else Path(tempfile.mkdtemp(prefix="ragexp-reproduce-")))
    output_dir = Path(tempfile.mkdtemp(prefix=f"ragexp-reproduce-{args.run_id[:8]}-"))
    result = run_job(
        cfg, output_dir=output_dir, overrides=[f"reproduce={args.run_id}"], cache=cache,
        experiment_id=original.info.experiment_id, tags={store.TAG_REPRODUCES: args.run_id}, log_to_store=not args.no_log,
    )
    output = result.output
    tags = original.data.tags
    for label, tag, now in (
        ("code version", store.TAG_CODE_VERSION, store.code_version()),
        ("corpus fingerprint", store.TAG_CORPUS_FP, output.results.meta["corpus_fingerprint"]),
        ("eval-set fingerprint", store.TAG_EVALSET_FP, output.results.meta["evalset_fingerprint"]),
    ):
        if tags.get(tag) != now:
            print(f"warning: {label} differs: run has {tags.get(tag)!r}, now {now!r}", file=sys.stderr)
    if result.run_id:
        print(f"logged reproduction as run {result.run_id}")
    before = original.data.metrics
    after = output.results.aggregates
    names = sorted(n for n in after if n in before and n.startswith(RETRIEVAL_PREFIXES) and "_ci_" not in n)
    rows = {"original": {n: before[n] for n in names}, "reproduced": {n: after[n] for n in names},
            "delta": {n: after[n] - before[n] for n in names}}
    headline = [n for n in names if not n.startswith("tag.")][:12]
    print(format_table(["original", "reproduced", "delta"], rows, headline))
    # MLflow stores metrics as doubles; the reproduction is compared exactly.
    differing = [n for n in names if after[n] != before[n]]
    if differing:
        print(f"{len(differing)} retrieval metrics differ: {', '.join(differing[:10])}")
        return 1
    print(f"all {len(names)} retrieval metrics identical")
    return 0
