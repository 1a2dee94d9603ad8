"""Black-box systems: the RAG pipeline a team ships, scored as it is (``system=http``,
``system=python``, ``system=recorded``) against the same span gold as ragexp's reference pipelines.

A system's passages carry no ragexp chunk id: each is placed in the live corpus
(:mod:`~ragexp.systems.locate`), the placed spans become that query's units, and relevance comes
from the same overlap rule (:mod:`~ragexp.systems.scoring`), so every metric, ``compare``,
``gate`` and the sweep summary read a black-box run like any other (docs/systems.md).
"""
