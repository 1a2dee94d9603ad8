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

from omegaconf import OmegaConf

from ragexp.commands._runs import add_tracking_argument, client_for, get_run
from ragexp.config import RagexpConfig
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
    from ragexp.evaluation.generation_step import generation_step
    from ragexp.evaluation.runner import execute, prepare_data
    from ragexp.tracking.run_logger import log_evaluation

    client, uri = client_for(args)
    original = get_run(client, args.run_id)
    saved = store.download_artifact(args.run_id, store.CONFIG_ARTIFACT, uri)
    cfg = OmegaConf.merge(OmegaConf.structured(RagexpConfig), OmegaConf.load(saved))
    cfg.tracking.uri = uri
    cache_root = Path(cfg.cache_dir) if args.use_cache else Path(tempfile.mkdtemp(prefix="ragexp-reproduce-"))
    cache = StageCache(cache_root)
    data = prepare_data(cfg, cache, progress=cfg.progress)
    tags = original.data.tags
    for label, tag, now in (
        ("code version", store.TAG_CODE_VERSION, store.code_version()),
        ("corpus fingerprint", store.TAG_CORPUS_FP, data.corpus.fingerprint()),
        ("eval-set fingerprint", store.TAG_EVALSET_FP, data.evalset.fingerprint()),
    ):
        if tags.get(tag) != now:
            print(f"warning: {label} differs: run has {tags.get(tag)!r}, now {now!r}", file=sys.stderr)
    output = execute(cfg, cache=cache, data=data, progress=cfg.progress, generation_step=generation_step)
    if not args.no_log:
        experiment_id = original.info.experiment_id
        new_id = log_evaluation(client, experiment_id, cfg, output, data.evalset, overrides=[f"reproduce={args.run_id}"],
                                parent_run_id=None)
        client.set_tag(new_id, "ragexp.reproduces", args.run_id)
        print(f"logged reproduction as run {new_id}")
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
