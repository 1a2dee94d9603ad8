"""Hydra sweeper plugin shipped with ragexp (Hydra loads plugins only from ``hydra_plugins``)."""
