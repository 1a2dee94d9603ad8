"""``ragexp judge review RUN_ID -n 20 [--labels FILE] [--port P]``: the judge spot-check page.

Order of checks, each bad input one line and exit 2 before anything is written: ``-n``, the run
id's form, the port (bound at once, as ``ragexp ui``), an existing labels file that the labels
reader refuses, the store and the run, and whether the run has judged claims. Only claims with a
judge verdict are drawn (a judge failure has nothing to agree with), across verdicts: the same
number of claims the judge called supported and not supported where the run has them
(:func:`ragexp.judging.ppi.draw_across`), so a lenient judge's "supported" calls and its rare
"not supported" ones are both checked; the sample is seeded (``--seed``) so the same command shows
the same claims, and a larger ``-n`` with the same seed adds claims to the smaller sample.
"""

from __future__ import annotations

import argparse
from collections import Counter

from ragexp.commands._runs import client_for, get_run, load_results
from ragexp.config.bounds import MAX_CLAIMS_DRAWN, check_count
from ragexp.errors import RagexpInputError
from ragexp.web.app import reserve_port


def review(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise RagexpInputError("must be at least 1", field="-n")
    check_count(args.n, "-n", high=MAX_CLAIMS_DRAWN)
    sock = reserve_port(args.port)
    try:
        return _serve(args, sock)
    finally:
        sock.close()


def _serve(args: argparse.Namespace, sock) -> int:
    from ragexp.judge_review.router import review_router
    from ragexp.judge_review.sample import review_claims
    from ragexp.judge_review.session import (
        ReviewSession,
        mlflow_logger,
        read_existing,
    )
    from ragexp.judging.calibration.record import judge_key
    from ragexp.evaluation import corrected
    from ragexp.judging.ppi import draw_across
    from ragexp.web.app import create_app, serve

    read_existing(args.labels)
    client, _ = client_for(args)
    run = get_run(client, args.run)
    results = load_results(args.run, args.tracking_uri)
    judged = [claim for claim in review_claims(results.per_query, prefix=f"{args.run}/") if claim.row.judge_label]
    if not judged:
        raise RagexpInputError("the run has no judged claims (was it run with a generator and a judge, "
                               "e.g. generator=extractive judge=lexical?)", field="RUN_ID")
    strata = corrected.review_strata(results.per_query)
    chosen = draw_across(judged, args.n, args.seed, lambda claim: strata[claim.row.id.rpartition("/")[2]],
                         key=lambda claim: claim.row.id)
    verdicts = Counter(claim.row.judge_label for claim in judged)
    in_strata = Counter(strata[claim.row.id.rpartition("/")[2]] for claim in judged)
    record = results.meta.get("judge")
    session = ReviewSession(run_id=args.run, run_name=run.info.run_name or args.run, claims=chosen,
                            labels_path=args.labels, seed=args.seed, total_claims=len(judged),
                            log=mlflow_logger(client, args.run, reviewed=lambda: [c.row for c in session.claims]),
                            verdict_counts=dict(in_strata), results=results,
                            judge_key=judge_key(record) if isinstance(record, dict) else None)
    app = create_app([review_router(session)], "review.html", title="ragexp judge review")
    drawn = Counter(claim.row.judge_label for claim in chosen)
    across = ", ".join(f"{drawn[v]} of {verdicts[v]} the judge called {v.replace('_', ' ')}" for v in sorted(verdicts))
    print(f"reviewing {len(chosen)} of {len(judged)} judged claims of run {session.run_name} ({across}; seed {args.seed}); "
          f"verdicts go to {args.labels}", flush=True)
    return serve(app, sock, what="judge review")
