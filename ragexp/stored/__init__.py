"""Everything ragexp reads that it did not compose on this machine: stored or handed data.

A shared MLflow store, a saved ``resolved.yaml``, an uploaded run folder, ``ragexp_results.json``,
eval sets, annotation queues, review labels and calibration files are untrusted input
(docs/scale.md). Each is parsed at one gate into closed, typed structures before any command or
page uses it; :mod:`ragexp.stored.limits` holds the bounds every such reader applies first (what a
path may name, how large, how deep, no YAML aliases) and :mod:`ragexp.stored.urls` the one canonical
form of every URL this machine sends credentials or data to. This package is the bottom of the gate:
it imports nothing of ragexp but its error type, and the readers built on it live with their data
(:mod:`ragexp.config.run_config` for run configs: a saved ``resolved.yaml`` and ``overrides.yaml``).
tests/security/test_entry_points.py fails when a command or module reads a file without them.
"""
