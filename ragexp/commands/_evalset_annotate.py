"""``ragexp evalset annotate EVALSET --corpus DIR [--queries FILE] [--port P] [--from-run RUN_ID [--failures]]
[--annotator NAME]``:
the annotation page (:mod:`ragexp.annotation`) on 127.0.0.1.

The port is bound first: a taken port fails at once (one line, exit 2) before the corpus or any
model is loaded. ``--queries`` queues candidates (``ragexp evalset queries``) or drafts
(``ragexp evalset draft``); ``--from-run`` queues the run's unjudged top-k units (``--depth``,
default the run's ``context_k``), or with ``--failures`` its retrieval failures and
hallucinations. ``--queue-only`` writes the queue and exits without serving. ``--annotator`` is
written as ``annotator`` on every item this session changes (on a set queued for adjudication,
``ragexp evalset agreement --queue``, the header's adjudicator when not given). Each ``--queries`` row is checked
against the eval-set schema before anything is queued. Before the URL is printed the lexical
pipeline is built (seconds), so the first question's candidates show at once; the other pipelines
are built in the background and their candidates join the pool as each is ready
(:class:`ragexp.annotation.pool.Pooler`).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from ragexp.annotation.pool import DEFAULT_DEPTH, DEFAULT_PIPELINES
from ragexp.commands._runs import run_or_file_ref
from ragexp.data.evalset_schema import MAX_ANNOTATOR, valid_annotator
from ragexp.errors import RagexpInputError

HELP = "annotate in the browser: pooled candidates, spans by mouse, judged negatives, coverage"
DEFAULT_PORT = 5050


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("evalset", metavar="EVALSET", type=Path, help="eval set to build (.jsonl; created when absent)")
    parser.add_argument("--corpus", required=True, type=Path, help="corpus folder or corpus .jsonl")
    parser.add_argument("--queries", type=Path, help="candidates (ragexp evalset queries) or drafts (ragexp evalset draft) to queue")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}); a taken port fails at once")
    parser.add_argument("--from-run", metavar="RUN_ID", type=run_or_file_ref,
                        help="queue this run's unjudged top-k units (pool extension); its id, a unique prefix, "
                             "or its results file")
    parser.add_argument("--failures", action="store_true", help="with --from-run: queue the run's retrieval failures and hallucinations")
    parser.add_argument("--depth", type=int, metavar="K", help="with --from-run: the top k to judge (default: the run's context_k)")
    parser.add_argument("--tracking-uri", default=None, help="store holding --from-run (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    parser.add_argument("--pipelines", default=",".join(DEFAULT_PIPELINES),
                        help=f"conf/retrieval configs pooled (default {','.join(DEFAULT_PIPELINES)})")
    parser.add_argument("--pool-depth", type=int, default=DEFAULT_DEPTH, help=f"top k of each pipeline in the pool (default {DEFAULT_DEPTH})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pool's shuffle (default 0)")
    parser.add_argument("--queue-only", action="store_true", help="queue (--queries, --from-run) and exit without serving")
    parser.add_argument("--annotator", metavar="NAME",
                        help="who is judging: recorded as each changed item's annotator (ragexp evalset agreement compares two)")


def _check(args: argparse.Namespace) -> None:
    if args.failures and not args.from_run:
        raise RagexpInputError("--failures needs --from-run RUN_ID (whose failures to queue)", field="--failures")
    if args.depth is not None and (not args.from_run or args.depth < 1):
        raise RagexpInputError("--depth takes an integer >= 1 and only goes with --from-run", field="--depth")
    if args.annotator is not None and not valid_annotator(args.annotator):
        raise RagexpInputError(f"a name of 1 to {MAX_ANNOTATOR} characters", field="--annotator")
    if args.pool_depth < 1:
        raise RagexpInputError("must be >= 1", field="--pool-depth")
    from ragexp.config.bounds import MAX_POOL_DEPTH, check_count

    check_count(args.pool_depth, "--pool-depth", high=MAX_POOL_DEPTH)
    if args.depth is not None:
        check_count(args.depth, "--depth", high=MAX_POOL_DEPTH)
    from ragexp.config.compose import CONFIG_DIR

    for name in args.pipelines.split(","):
        if name.strip() and not (CONFIG_DIR / "retrieval" / f"{name.strip()}.yaml").is_file():
            known = ", ".join(sorted(p.stem for p in (CONFIG_DIR / "retrieval").glob("*.yaml")))
            raise RagexpInputError(f"no retrieval config {name.strip()!r} (known: {known})", field="--pipelines")
    if args.queries is not None and not args.queries.is_file():
        raise RagexpInputError("no such file; pass the candidates or drafts file", file=args.queries, field="--queries")


def _run_chunking(args: argparse.Namespace) -> dict:
    """The ``chunking`` options of the run's saved config, read through the whole gate
    (:func:`ragexp.evaluation.saved_config.read_run_config`: bounded, closed typed schema, no
    interpolation, every check a job makes) from a temporary folder removed afterwards."""
    from ragexp.config.machine import default_tracking_uri, local_cache_dir
    from ragexp.config.schema import chunker_options
    from ragexp.evaluation.saved_config import read_run_config
    from ragexp.tracking import store

    uri = args.tracking_uri or default_tracking_uri()
    with tempfile.TemporaryDirectory(prefix="ragexp-") as scratch:
        saved = store.download_artifact(args.from_run, store.CONFIG_ARTIFACT, uri, dst_dir=Path(scratch))
        try:
            spec = read_run_config(saved, tracking_uri=uri, cache_dir=local_cache_dir())
        except RagexpInputError as err:  # named by the run, not by the temporary copy
            raise RagexpInputError(err.message, file=f"run {args.from_run}: {store.CONFIG_ARTIFACT}", field=err.field) from None
    return chunker_options(spec.config.chunking)


def _queue_run(args: argparse.Namespace, session, corpus) -> str:
    from ragexp.annotation.from_run import queue_failures, queue_unjudged
    from ragexp.chunking import make_chunker
    from ragexp.commands._runs import load_results

    results = load_results(args.from_run, args.tracking_uri)
    chunker = make_chunker(_run_chunking(args))
    chunks = {chunk.id: chunk for chunk in chunker.chunk_corpus(corpus)}
    if args.failures:
        return queue_failures(session, results, chunks).render("units the generator saw")
    depth = args.depth or int(results.meta.get("context_k") or 5)
    return queue_unjudged(session, results, chunks, depth).render(f"unjudged top-{depth} units")


def run(args: argparse.Namespace) -> int:
    from ragexp.web.app import reserve_port

    _check(args)
    sock = None if args.queue_only else reserve_port(args.port)  # before anything slow
    try:
        from ragexp.annotation.live_corpus import LiveCorpus
        from ragexp.annotation.pool import Pooler
        from ragexp.annotation.server import Annotation, routers
        from ragexp.annotation.session import Session, check_queue_row
        from ragexp.data.loaders.jsonl import iter_jsonl_objects
        from ragexp.runtime import progress
        from ragexp.web.app import create_app, serve

        session = Session(args.evalset, annotator=args.annotator)
        if args.annotator is None and session.header.adjudication is not None:
            session.annotator = session.header.adjudication.adjudicator
            print(f"adjudicating as {session.annotator} (the adjudicator {args.evalset} names)")
        corpus = LiveCorpus(args.corpus)
        rows = []
        for line, obj in iter_jsonl_objects(args.queries) if args.queries is not None else ():  # bad: before any output
            check_queue_row(obj, file=args.queries, line=line)
            rows.append(obj)
        print(f"{len(session.entries)} entries in {session.sidecar.name}, {len(session.items())} items in {args.evalset}")
        if args.queries is not None:
            print(f"queued {session.queue(rows, str(args.queries))} new questions of {len(rows)} in {args.queries}")
        if args.from_run:
            print(_queue_run(args, session, corpus.current()))
            session.save()
        if args.queue_only:
            return 0
        progress.set_enabled(False)  # one bar per pooled question would bury the URL
        pipelines = [name.strip() for name in args.pipelines.split(",") if name.strip()]
        pooler = Pooler(pipelines, args.pool_depth, args.seed, chunking=session.header.chunking)
        pooler.warm(corpus.current(), first_only=True)  # the lexical pipeline: seconds; the others build meanwhile
        annotation = Annotation(session, corpus, pooler)
        annotation.chunk_map()  # the page's first request reads it
        app = create_app(routers(annotation), "annotate.html", title="ragexp annotate")
        return serve(app, sock, what=f"annotating {args.evalset} (saved at every change)")
    finally:
        if sock is not None:
            sock.close()
