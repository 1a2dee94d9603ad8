"""ragexp's Hydra sweeper (a Hydra plugin lives in the ``hydra_plugins`` namespace package)."""
