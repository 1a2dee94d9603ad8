"""What a run costs beside its quality: served latency per stage, index build time and size, peak
memory, LLM tokens and money (``cost.*`` results keys, the ``cost/`` section in MLflow), the
Pareto front of a sweep (quality against latency) and budgets; see docs/cost.md."""
