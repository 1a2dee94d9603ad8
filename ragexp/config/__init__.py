"""The configuration as data: the structured schema Hydra checks (:mod:`~ragexp.config.schema`),
Hydra's errors as one line (:mod:`~ragexp.config.hydra_errors`), the secret screen
(:mod:`~ragexp.config.secrets`) and which ``_target_`` s may be built (:mod:`~ragexp.config.targets`)."""
