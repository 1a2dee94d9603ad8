"""Keep Python's cyclic garbage collector off the long-lived heap of a sweep.

A sweep process holds ~0.5-0.9 M objects that live until it exits (Hydra, MLflow, SQLAlchemy,
pandas, torch, transformers, loaded models). Each full collection walks all of them (~0.15 s
here), and the churn of importing, composing configs and logging runs triggers one every few
seconds: 18 full collections cost 4.5 s of a 75 s demo sweep (measured with ``gc.callbacks``).

- :func:`pause_collection` stops collection while ``ragexp run`` starts (imports and Hydra's
  composition make no garbage cycles worth a pass over a growing heap).
- :func:`freeze_survivors` collects, moves every surviving object to the permanent generation
  (:func:`gc.freeze`) so later collections walk only objects created since, and resumes
  collection. It runs where what survives is long-lived (sweep start, a model loaded, a job
  done), and freezes only when :data:`GROWTH` objects were created since the last freeze.

Frozen objects are still freed by reference counting; a frozen object that later dies in a
garbage cycle (a finished job's Hydra config, ~3 k objects) is reclaimed by the full pass that
every :data:`RECLAIM_EVERY`-th freeze makes over the unfrozen heap (:func:`gc.unfreeze` first).
"""

from __future__ import annotations

import gc

#: Freeze again only when this many tracked objects were created (and survived) since the last freeze.
GROWTH = 25_000
#: Every this many freezes, unfreeze and collect everything once (frees frozen garbage cycles).
RECLAIM_EVERY = 8

_freezes = 0


def pause_collection() -> None:
    """Stop cyclic collection until the next :func:`freeze_survivors` (process start-up)."""
    gc.disable()


def freeze_survivors(growth: int = GROWTH) -> bool:
    """Collect and freeze when at least ``growth`` unfrozen tracked objects exist, and resume
    collection; returns whether it froze. (Not the frozen count: :func:`gc.get_freeze_count`
    walks the whole permanent generation, ~10 ms per million objects.)"""
    global _freezes
    try:
        if len(gc.get_objects()) < growth:  # the permanent generation is not listed: cheap
            return False
        _freezes += 1
        if _freezes % RECLAIM_EVERY == 0:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        return True
    finally:
        gc.enable()
