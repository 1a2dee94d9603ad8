"""Model names to local files (:mod:`~ragexp.models.resolve`): the one resolver for every model ragexp loads."""
