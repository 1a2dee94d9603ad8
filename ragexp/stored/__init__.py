"""Everything ragexp reads that it did not compose on this machine: stored or handed data.

A shared MLflow store, a saved ``resolved.yaml``, an uploaded run folder, ``ragexp_results.json``,
eval sets, annotation queues, review labels and calibration files are untrusted input
(docs/scale.md). Each is parsed at one gate into closed, typed structures before any command or
page uses it; :mod:`ragexp.stored.limits` holds the bounds every such reader applies first (what a
path may name, how large, how deep, no YAML aliases), :mod:`ragexp.stored.run_config` is the gate
for run configs (a saved ``resolved.yaml`` and ``overrides.yaml``). tests/security/test_entry_points.py
fails when a command or module reads a file without them.
"""
