"""``ragexp reproduce RUN_ID``: re-run a logged run from its saved config and diff the metrics.

The saved ``config/resolved.yaml`` is read as data through the one gate
(:mod:`ragexp.config.run_config`: never composed by Hydra, no interpolation, a closed schema,
registered classes, this machine's store and cache) and re-executed as is (no defaults are
re-composed, so later changes to ``conf/`` do not leak in). Differences in code version or data fingerprints are
warned about first. By default a fresh, empty stage cache is used so nothing cached is trusted.
The stored config is untrusted data (docs/scale.md, "shared store"): only registered component
classes are built, and its model endpoints and key variables must be ones this machine names
(:mod:`ragexp.config.endpoints`). The temporary folders (stored config, cache, output) are removed.
A black-box system run (``system=http``/``python``/``recorded``) is re-scored from the responses
stored with it (``system/responses.jsonl``, read through the gate as ``system=recorded``): nothing
is called; ``--live`` calls the system again instead and prints, per query, what it answers
differently (:mod:`ragexp.systems.replay`).
The reproduction is logged as ``repro: <original name>``, tagged ``ragexp.reproduces`` and linked
from its description. Exit 0 when every deterministic retrieval metric matches exactly, 1 when one
differs. A store copied or moved with its ``mlruns/`` folder works as is; when ``mlruns/`` is
elsewhere, ``--artifacts DIR`` names it (:func:`ragexp.tracking.store.download_artifact`). By hand,
without MLflow: ``ragexp run --config-path /abs/folder --config-name resolved`` (docs/mlflow.md).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

from omegaconf import OmegaConf

from ragexp.commands._runs import add_tracking_argument, client_for, get_run, run_ref
from ragexp.comparison.table import format_table
from ragexp.metrics.measure import Measure, measure
from ragexp.runtime import interrupt
from ragexp.config.machine import local_cache_dir
from ragexp.evaluation.job_spec import JobSpec
from ragexp.evaluation.saved_config import read_run_config
from ragexp.tracking import experiments, run_names, store
from ragexp.errors import RagexpInputError
from ragexp.systems.build import is_black_box
from ragexp.systems.replay import drift_report, replay_config, stored_drift
from ragexp.evaluation.system_step import RESPONSES_ARTIFACT
from ragexp.tracking.metric_names import HEADLINE, results_view



def _compared(identity: Measure) -> bool:
    """The aggregates a reproduction must match exactly: retrieval measures (chunk and document
    level, overall and per tag or source) and the query counts, not confidence bounds."""
    return (identity.is_retrieval() or identity.key.startswith(("n_queries", "black_box."))) and not identity.bound


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", type=run_ref, help="the run's id or a unique prefix of it")
    parser.add_argument("--use-cache", action="store_true", help="reuse the stage cache (default: recompute everything)")
    parser.add_argument("--no-log", action="store_true", help="do not log the reproduction as a new MLflow run")
    parser.add_argument("--live", action="store_true",
                        help="a black-box system run: call the system again (default: re-score the responses stored "
                             "with the run, calling nothing) and report per query what changed")
    parser.add_argument("--artifacts", metavar="DIR", type=Path,
                        help="where the store's artifacts are now, if it was moved: the folder holding "
                             "<experiment id>/<run id>/artifacts (default: the recorded place, then mlruns/ beside "
                             "the sqlite file)")
    parser.add_argument("--allow-endpoint", action="append", default=[], metavar="URL[=VARIABLE]",
                        help="a model endpoint (and the environment variable whose key it may receive) the stored "
                             "config may call beyond those this machine's conf/ names; also $RAGEXP_ALLOWED_ENDPOINTS")
    add_tracking_argument(parser)


def reproduction_tags(original) -> dict[str, str]:
    """A reproduction is linked to its original: the ``ragexp.reproduces`` tag, a description
    linking the original run (shown on its overview page), and the original's axis tags."""
    link = experiments.run_link(original.info.experiment_id, original.info.run_id)
    return {
        store.TAG_REPRODUCES: original.info.run_id,
        store.DESCRIPTION_TAG: f"Reproduction of run [{original.info.run_name}]({link}) (`ragexp reproduce "
                               f"{original.info.run_id}`), re-run from its saved config/resolved.yaml.",
        **{key: value for key, value in original.data.tags.items() if key.startswith(run_names.AXIS_TAG_PREFIX)},
    }


def reproduce_run(original, uri: str, work: Path, args: argparse.Namespace):
    """Re-run ``original`` from its stored config (read through the gate) in the folder ``work``:
    a fresh cache there unless ``--use-cache``, logged as its reproduction unless ``--no-log``."""
    from ragexp.jobs.job import LogTo, run_job

    run_id = original.info.run_id
    saved = store.download_artifact(run_id, store.CONFIG_ARTIFACT, uri, args.artifacts, dst_dir=work / "stored")
    stored_responses: list[Path] = []

    def black_box_replay(cfg) -> None:
        """A black-box run re-scores the responses stored with it (``--live``: calls its system again)."""
        node = OmegaConf.to_container(cfg.system, resolve=True) if cfg.get("system") is not None else {}
        if not is_black_box({"system": node}):
            if args.live:
                raise RagexpInputError("only a black-box system run (system=http, python) can be called live", field="--live")
            return
        if args.live and node["name"] == "recorded":
            raise RagexpInputError("a recorded system has no system to call live; reproduce it without --live",
                                   field="--live")
        stored_responses.append(store.download_artifact(run_id, RESPONSES_ARTIFACT, uri, args.artifacts,
                                                        dst_dir=work / "stored"))
        if not args.live:
            cfg.system = replay_config(node, str(stored_responses[0]))

    spec = read_run_config(saved, tracking_uri=uri, cache_dir=local_cache_dir() if args.use_cache else str(work / "cache"),
                           overrides=[f"reproduce={run_id}"], allowed_endpoints=args.allow_endpoint, edit=black_box_replay)
    log_to = None if args.no_log else LogTo(
        experiment_id=original.info.experiment_id, tags=reproduction_tags(original),
        run_name=run_names.reproduction_name(original.info.run_name or run_id[:8]))
    result = run_job(spec, output_dir=work / "output", log_to=log_to)  # its stage cache: the spec's cache_dir
    if args.live and stored_responses:
        print(live_drift(stored_responses[0], spec, result.output))
    return result


def live_drift(stored: Path, spec: JobSpec, output) -> str:
    """What the system answers now against what it answered then (:func:`ragexp.systems.replay.live_drift`)."""
    k = 5 if 5 in spec.eval.ks else max(spec.eval.ks)
    return drift_report(stored_drift(stored, spec.block("system"), output.artifacts[RESPONSES_ARTIFACT], k), k)


def run(args: argparse.Namespace) -> int:
    client, uri = client_for(args)
    original = get_run(client, args.run_id)
    interrupt.install(signal.SIGTERM)  # an interrupt unwinds: the temporary folders below are removed
    try:
        with tempfile.TemporaryDirectory(prefix=f"ragexp-reproduce-{args.run_id[:8]}-") as scratch:
            result = reproduce_run(original, uri, Path(scratch), args)
    except KeyboardInterrupt as err:
        signum = getattr(err, "signum", signal.SIGINT)
        print(f"ragexp reproduce: interrupted by signal {signum}; nothing kept", file=sys.stderr)
        return 128 + int(signum)
    if result.run_id:
        print(f"logged reproduction as run {result.run_id}")
    return compare_with_original(original, result.output)


def compare_with_original(original, output) -> int:
    """Warn about code and data differences, print the retrieval metrics side by side; exit code
    0 when every one is identical, 1 otherwise."""
    tags = original.data.tags
    for label, tag, now in (
        ("code version", store.TAG_CODE_VERSION, store.code_version()),
        ("corpus fingerprint", store.TAG_CORPUS_FP, output.results.meta["corpus_fingerprint"]),
        ("eval-set fingerprint", store.TAG_EVALSET_FP, output.results.meta["evalset_fingerprint"]),
    ):
        if tags.get(tag) != now:
            print(f"warning: {label} differs: run has {tags.get(tag)!r}, now {now!r}", file=sys.stderr)
    before = results_view(original.data.metrics, original.data.params)
    after = output.results.aggregates
    names = sorted(n for n in after if n in before and _compared(measure(n)))
    rows = {"original": {n: before[n] for n in names}, "reproduced": {n: after[n] for n in names},
            "delta": {n: after[n] - before[n] for n in names}}
    headline = ([n for n in HEADLINE if n in names] + [n for n in names if n not in HEADLINE and not n.startswith(("tag.", "source."))])[:12]
    print(format_table(["original", "reproduced", "delta"], rows, headline))
    # MLflow stores metrics as doubles; the reproduction is compared exactly.
    differing = [n for n in names if after[n] != before[n]]
    if differing:
        print(f"{len(differing)} retrieval metrics differ: {', '.join(differing[:10])}")
        return 1
    print(f"all {len(names)} retrieval metrics identical")
    return 0
