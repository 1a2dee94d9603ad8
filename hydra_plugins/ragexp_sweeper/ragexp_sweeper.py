"""A sweep that composes each job's config once (``hydra.sweeper`` in ``conf/config.yaml``).

Hydra's basic sweeper composes every job's config before the first job starts (so a value Hydra
cannot compose fails before any work), and its launcher composes each one again to run it: two
compositions per job, about 0.4 s each for ragexp's config tree. :class:`RagexpSweeper` expands the
sweep like the basic sweeper (the cross product of the swept values in command-line order,
``params`` first, ``max_batch_size`` jobs per batch), composes EVERY job's config before the
first job starts (a value Hydra cannot compose in the last job stops the sweep before any work),
and hands them to the launcher through :class:`ComposedOnce`, the config loader the launcher
is given: the launcher's own call for a job's config returns the one already composed (once; a
job composed nowhere else is composed then). Launchers that run jobs in other processes (joblib,
submitit) receive the loader with the configs inside it.

Once every config is composed, and before the sweep folder is made or any job starts, each Hydra
callback that defines :data:`SWEEP_COMPOSED_HOOK` is given the sweep's config and every job's
``(overrides, config)``: ragexp's :class:`~ragexp.tracking.sweep.MlflowSweepCallback` checks each
job through the job-spec gate there, opens the sweep's parent run only then, and marks each job's
config with it. An exception it raises stops the sweep with nothing written. Only Hydra's public
plugin API is used (``Sweeper``, ``ConfigLoader``, ``HydraContext``, ``OverridesParser``, ``Plugins``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.config_loader import ConfigLoader
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, RunMode, TaskFunction
from omegaconf import DictConfig, OmegaConf


class ComposedOnce(ConfigLoader):
    """``loader`` whose :meth:`load_sweep_config` first returns what :meth:`compose` stored for
    those overrides (and forgets it: the launcher marks the config it gets as its job's)."""

    def __init__(self, loader: ConfigLoader) -> None:
        self.loader = loader
        self.composed: dict[tuple[str, ...], DictConfig] = {}

    def compose(self, master_config: DictConfig, overrides: Sequence[str]) -> DictConfig:
        composed = self.composed[tuple(overrides)] = self.loader.load_sweep_config(master_config, list(overrides))
        return composed

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        composed = self.composed.pop(tuple(sweep_overrides), None)
        return composed if composed is not None else self.loader.load_sweep_config(master_config, sweep_overrides)

    def load_configuration(self, config_name: str | None, overrides: list[str], run_mode: RunMode,
                           from_shell: bool = True, validate_sweep_overrides: bool = True) -> DictConfig:
        return self.loader.load_configuration(config_name, overrides, run_mode, from_shell, validate_sweep_overrides)

    def get_search_path(self) -> Any:
        return self.loader.get_search_path()

    def get_sources(self) -> Any:
        return self.loader.get_sources()

    def list_groups(self, parent_name: str) -> list[str]:
        return self.loader.list_groups(parent_name)

    def get_group_options(self, group_name: str, results_filter: Any = None, config_name: str | None = None,
                          overrides: list[str] | None = None) -> list[str]:
        return self.loader.get_group_options(group_name, results_filter, config_name, overrides)

    def compute_defaults_list(self, config_name: str | None, overrides: list[str], run_mode: RunMode) -> Any:
        return self.loader.compute_defaults_list(config_name, overrides, run_mode)


def job_overrides(arguments: Sequence[str], loader: ConfigLoader) -> list[list[str]]:
    """Every job's overrides: the cross product of each key's values (a key given twice keeps its
    last values, as in Hydra's basic sweeper)."""
    values: dict[str, list[str]] = {}
    for override in OverridesParser.create(config_loader=loader).parse_overrides(list(arguments)):
        key = override.get_key_element()
        if not override.is_sweep_override():
            values[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            values[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            raise HydraException(f"{RagexpSweeper.__name__} sweeps lists of values only, not {override.value_type.name} ({key})")
    return [list(job) for job in itertools.product(*values.values())]


#: The method a Hydra callback may define to see every job's composed config before the first job
#: starts: ``on_sweep_composed(config=SWEEP_CONFIG, jobs=[(OVERRIDES, JOB_CONFIG), ...])`` (module docstring).
SWEEP_COMPOSED_HOOK = "on_sweep_composed"


class RagexpSweeper(Sweeper):
    """Hydra's basic sweep, each job's config composed once (module docstring)."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        self.max_batch_size = max_batch_size
        self.params = dict(params or {})
        self.loader: ComposedOnce | None = None
        self.config: DictConfig | None = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.loader = ComposedOnce(hydra_context.config_loader)
        self.hydra_context = HydraContext(config_loader=self.loader, callbacks=hydra_context.callbacks)
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=self.hydra_context, task_function=task_function, config=config,
        )

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.loader is not None and self.launcher is not None
        jobs = job_overrides([*(f"{key}={value}" for key, value in self.params.items()), *arguments], self.loader)
        size = self.max_batch_size if self.max_batch_size and self.max_batch_size > 0 else max(len(jobs), 1)
        composed = [(overrides, self.loader.compose(self.config, overrides)) for overrides in jobs]
        for callback in getattr(self.hydra_context.callbacks, "callbacks", None) or ():
            hook = getattr(callback, SWEEP_COMPOSED_HOOK, None)
            if hook is not None:  # called directly: Hydra's own dispatch would turn its refusal into a warning
                hook(config=self.config, jobs=composed)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        returns = []
        for start in range(0, len(jobs), size):
            batch = jobs[start : start + size]
            results = self.launcher.launch(batch, initial_job_idx=start)
            for result in results:
                _ = result.return_value  # re-raises a job's exception, as the basic sweeper does
            returns.append(results)
        return returns
