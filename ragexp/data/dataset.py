"""``cfg.dataset`` -> (Corpus, EvalSet), dispatching on ``dataset.loader``."""

from __future__ import annotations

from collections.abc import Mapping

from ragexp.data import Corpus, EvalSet
from ragexp.errors import RagexpInputError
from ragexp.runtime.stage_cache import StageCache

LOADERS = ("demo", "beir", "squad", "evalset")


def load_dataset(cfg: Mapping, cache: StageCache | None = None) -> tuple[Corpus, EvalSet]:
    """``cache``: where a corpus folder's converted documents (HTML, PDF, DOCX) are looked up."""
    loader = cfg.get("loader")
    if loader == "demo":
        from ragexp.data.datasets import demo_paths
        from ragexp.data.loaders.corpus import load_corpus
        from ragexp.data.loaders.evalset import load_evalset

        corpus_dir, evalset_path = demo_paths()
        corpus = load_corpus(corpus_dir)
        return corpus, load_evalset(evalset_path, corpus)
    if loader == "beir":
        from ragexp.data.loaders.beir import load_beir

        return load_beir(_required(cfg, "path"), split=cfg.get("split", "test"))
    if loader == "squad":
        from ragexp.data.loaders.squad import load_squad

        return load_squad(_required(cfg, "path"), evidence=cfg.get("evidence", "answer"))
    if loader == "evalset":
        from ragexp.data.loaders.corpus import load_corpus
        from ragexp.data.loaders.evalset import load_evalset

        corpus = load_corpus(
            _required(cfg, "corpus"),
            html_remove_boilerplate=_flag(cfg, "html_remove_boilerplate", True),
            strict=_flag(cfg, "strict", False),
            cache=cache,
        )
        return corpus, load_evalset(_required(cfg, "evalset"), corpus)
    raise RagexpInputError(f"unknown loader {loader!r}; valid: {', '.join(LOADERS)}", field="dataset.loader")


def _required(cfg: Mapping, key: str) -> str:
    value = cfg.get(key)
    if value in (None, "", "???"):
        raise RagexpInputError(f"is required for dataset={cfg.get('loader')} (e.g. dataset.{key}=DIR)", field=f"dataset.{key}")
    return str(value)


def _flag(cfg: Mapping, key: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if not isinstance(value, bool):
        raise RagexpInputError(f"must be true or false, got {value!r}", field=f"dataset.{key}")
    return value
