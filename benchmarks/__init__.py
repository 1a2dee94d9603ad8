"""Benchmarks and held-out measurement sets (run from the repo root: ``python -m benchmarks.<module>``)."""
