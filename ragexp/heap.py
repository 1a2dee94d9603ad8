"""Keep Python's cyclic garbage collector off the long-lived heap of a sweep.

A sweep process holds ~0.5-0.9 M objects that live until it exits (Hydra, MLflow, SQLAlchemy,
pandas, torch, transformers, loaded models). Each full collection walks all of them (~0.15 s
here), and the churn of composing configs and logging runs triggers one every few seconds:
18 full collections cost 4.5 s of a 75 s demo sweep (gc callbacks, ``benchmarks/bench_sweep``).

:func:`freeze_survivors` collects, then moves every surviving object to the permanent generation
(:func:`gc.freeze`), so later collections walk only objects created since. Frozen objects are
still freed by reference counting; only a frozen object that later becomes part of a garbage
cycle is never reclaimed. So it runs where what survives is long-lived (at sweep start, after a
job), and only when the heap grew by :data:`GROWTH` objects since the last freeze: a job's own
survivors (its Hydra config, ~3 k objects) are not frozen after every job.
"""

from __future__ import annotations

import gc

#: Freeze again only when this many tracked objects were created (and survived) since the last freeze.
GROWTH = 100_000


def freeze_survivors(growth: int = GROWTH) -> int:
    """Collect and freeze when at least ``growth`` unfrozen tracked objects exist; returns the
    number of objects frozen by this call (0 when the heap had not grown enough)."""
    if len(gc.get_objects()) < growth:
        return 0
    before = gc.get_freeze_count()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count() - before
