"""Reference pipelines the runner builds from config (``_target_``): BM25, dense FAISS,
hybrid fusion, rerankers and generators, each behind the small protocols in
:mod:`reference_pipelines.base`. ``ragexp`` never imports this package by name."""
