"""Workers for ``tests/test_concurrent_saves.py``: one process each, standing for a second server on
the same file, saving as fast as it can once every worker is ready (a shared barrier).

Each worker changes only what it owns (its own field of a shared annotation entry, its own claims
of a shared labels file), sending ``before`` = what it last saved, as a page does. A 409 is counted
and the worker takes the file's value as the new ``before`` (a page's reload). It returns what it
saved (landed) and how many saves were refused.
"""

from __future__ import annotations

from pathlib import Path

from ragexp.annotation.session import Session, field_value
from ragexp.judge_review.sample import ReviewClaim
from ragexp.judge_review.session import ReviewSession, verdict_of
from ragexp.judging.calibration.labels import NOT_SUPPORTED, SUPPORTED, LabelledClaim
from ragexp.web.edit_session import Conflict


def annotate_worker(evalset: str, item_id: str, field: str, tag: str, saves: int, barrier, results) -> None:
    """Append ``<tag>-<i>`` to the list field ``field`` of entry ``item_id``, ``saves`` times."""
    session = Session(Path(evalset))
    shown = field_value(session.entry(item_id), field)
    landed, refused = [], 0
    barrier.wait()
    for i in range(saves):
        new = [*shown, f"{tag}-{i}"]
        try:
            session.update(item_id, {field: new}, {field: shown})
        except Conflict:
            refused += 1
            with session.lock:
                session.reload_if_changed()
                shown = field_value(session.entry(item_id), field)
            continue
        landed.append(new[-1])
        shown = new
    results.put((tag, landed, refused))


def review_claims_for_test(count: int) -> list[ReviewClaim]:
    """``count`` judged claims ``RUN/q<i>#claim_0`` (the judge says supported for even ``i``)."""
    claims = []
    for i in range(count):
        row = LabelledClaim(id=f"RUN/q{i}#claim_0", context=f"context {i}, with a comma and \"quotes\"",
                            claim=f"claim {i}", judge_label=SUPPORTED if i % 2 == 0 else NOT_SUPPORTED)
        claims.append(ReviewClaim(row, f"question {i}", f"answer {i}", None, None))
    return claims


def review_worker(labels: str, count: int, owned: list[int], saves: int, barrier, results) -> None:
    """Flip the verdicts of the claims ``owned`` (indexes) between supported and not supported,
    ``saves`` verdicts in all, round robin."""
    session = ReviewSession(run_id="RUN", run_name="run", claims=review_claims_for_test(count), labels_path=Path(labels),
                            seed=0, total_claims=count, log=lambda metrics, tags, artifacts: None)
    ids = [session.claims[i].row.id for i in owned]
    shown = dict.fromkeys(ids, "")
    landed, refused = [], 0
    barrier.wait()
    for i in range(saves):
        claim_id = ids[i % len(ids)]
        label = NOT_SUPPORTED if shown[claim_id] == SUPPORTED else SUPPORTED
        try:
            session.label(claim_id, label, shown[claim_id])
        except Conflict:
            refused += 1
            session.state()
            shown[claim_id] = next(verdict_of(c.row) for c in session.claims if c.row.id == claim_id)
            continue
        landed.append((claim_id, label))
        shown[claim_id] = label
    results.put((tuple(owned), landed, refused))
