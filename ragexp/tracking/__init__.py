"""MLflow: the store (:mod:`~ragexp.tracking.store`), one run's record
(:mod:`~ragexp.tracking.run_logger`) and a sweep's parent run (:mod:`~ragexp.tracking.sweep`)."""
