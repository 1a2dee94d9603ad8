"""``hydra/sweeper=ragexp``: Hydra's basic sweeper, validating a batch by composing a covering set.

Before launching a batch, Hydra's basic sweeper composes every job's config (so a typo in the
last value fails before the first job runs), then the launcher composes each config again.
Composing the ragexp config tree takes ~0.07 s, so a 24-job sweep spent ~3.4 s composing, half
of it twice. This sweeper validates a batch by composing configs that together use every value
of every swept key at least once: ``max(len(values))`` configs (3 for a 3x2x2x2 sweep), picked
from the same cross product. A value Hydra cannot compose (unknown option, unknown key, wrong
type) still fails before any job runs; a conflict that only a particular combination of values
raises fails when the launcher composes that job. Launching is Hydra's own.
"""

# No ``from __future__ import annotations``: Hydra's plugin scan runs this module before it is in
# ``sys.modules``, where dataclasses cannot resolve string annotations.
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore


@dataclass
class CoveringSweeperConf:
    _target_: str = "hydra_plugins.ragexp_sweeper.covering_sweeper.CoveringSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="ragexp", node=CoveringSweeperConf, provider="ragexp")


def covering_overrides(batch: Sequence[Sequence[str]]) -> List[List[str]]:
    """Override lists that use every value each position takes in ``batch`` at least once.

    The basic sweeper's jobs list one override per key in the same key order, so position ``p``
    of config ``i`` is the ``i``-th distinct value at ``p`` (cycling through shorter lists).
    """
    if not batch:
        return []
    positions = [list(dict.fromkeys(job[p] for job in batch)) for p in range(len(batch[0]))]
    width = max((len(values) for values in positions), default=1)
    return [[values[i % len(values)] for values in positions] for i in range(width)]


class CoveringSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        if len({len(job) for job in batch}) > 1:  # not the basic sweeper's shape: validate it all
            super().validate_batch_is_legal(batch)
            return
        super().validate_batch_is_legal(covering_overrides(batch))
