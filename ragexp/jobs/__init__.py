"""``ragexp run`` and its jobs: the Hydra app (:mod:`~ragexp.jobs.app`), the one job function run,
reproduce and upload share (:mod:`~ragexp.jobs.job`), and a finished run's terminal summary
(:mod:`~ragexp.jobs.console`)."""
