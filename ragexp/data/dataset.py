"""``cfg.dataset`` -> (Corpus, EvalSet): dataset loaders are ``_target_`` components.

A loader is a class whose constructor takes the ``dataset`` group's options and checks them, and
whose ``load(cache)`` returns ``(Corpus, EvalSet)``; ``conf/dataset/*.yaml`` name one with
``_target_`` (the shipped ones below), and a user's own loader class works the same way once
registered (:mod:`ragexp.config.targets`). A config without ``_target_`` (saved by an older ragexp)
picks a shipped loader by its ``loader`` label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragexp.datamodel import Corpus, EvalSet
from ragexp.errors import RagexpInputError
from ragexp.runtime.stage_cache import StageCache


def _required(value: Any, key: str, loader: str) -> str:
    if value in (None, "", "???"):
        raise RagexpInputError(f"is required for dataset={loader} (e.g. dataset.{key}=DIR)", field=f"dataset.{key}")
    return str(value)


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise RagexpInputError(f"must be true or false, got {value!r}", field=f"dataset.{key}")
    return value


@dataclass(frozen=True)
class DemoDataset:
    """The built-in demo: a help-centre corpus and its hand-built eval set."""

    def load(self, cache: StageCache | None = None) -> tuple[Corpus, EvalSet]:
        from ragexp.data.datasets import demo_paths
        from ragexp.data.loaders.corpus import load_corpus
        from ragexp.data.loaders.evalset import load_evalset

        corpus_dir, evalset_path = demo_paths()
        corpus = load_corpus(corpus_dir)
        return corpus, load_evalset(evalset_path, corpus)


@dataclass(frozen=True)
class BeirDataset:
    """A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``)."""

    path: str | None = None
    split: str = "test"

    def __post_init__(self) -> None:
        _required(self.path, "path", "beir")

    def load(self, cache: StageCache | None = None) -> tuple[Corpus, EvalSet]:
        from ragexp.data.loaders.beir import load_beir

        return load_beir(str(self.path), split=self.split)


@dataclass(frozen=True)
class SquadDataset:
    """SQuAD v1.1 JSON rebuilt as article-level documents."""

    path: str | None = None
    evidence: str = "answer"

    def __post_init__(self) -> None:
        _required(self.path, "path", "squad")

    def load(self, cache: StageCache | None = None) -> tuple[Corpus, EvalSet]:
        from ragexp.data.loaders.squad import load_squad

        return load_squad(str(self.path), evidence=self.evidence)


@dataclass(frozen=True)
class EvalsetDataset:
    """Your own corpus (folder or JSONL) and eval set (JSONL or YAML); ``cache``: where a corpus
    folder's converted documents (HTML, PDF, DOCX) are looked up."""

    corpus: str | None = None
    evalset: str | None = None
    html_remove_boilerplate: bool = True
    strict: bool = False

    def __post_init__(self) -> None:
        _required(self.corpus, "corpus", "evalset")
        _required(self.evalset, "evalset", "evalset")
        _flag(self.html_remove_boilerplate, "html_remove_boilerplate")
        _flag(self.strict, "strict")

    def load(self, cache: StageCache | None = None) -> tuple[Corpus, EvalSet]:
        from ragexp.data.loaders.corpus import load_corpus
        from ragexp.data.loaders.evalset import load_evalset

        corpus = load_corpus(str(self.corpus), html_remove_boilerplate=self.html_remove_boilerplate, strict=self.strict,
                             cache=cache)
        return corpus, load_evalset(str(self.evalset), corpus)


#: The shipped loaders by the ``loader`` label an older saved config names them with.
LOADERS = {"demo": DemoDataset, "beir": BeirDataset, "squad": SquadDataset, "evalset": EvalsetDataset}


def dataset_loader(cfg: Mapping) -> Any:
    """The loader ``cfg`` (the ``dataset`` group) describes, its options checked; nothing is read yet."""
    from ragexp.config.targets import LABEL_KEYS, check_component, component_class

    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)  # an unset ??? stays the string "???"
    options = {str(key): value for key, value in dict(cfg).items()}
    target = options.get("_target_")
    if target is None:
        loader = options.get("loader")
        if loader not in LOADERS:
            raise RagexpInputError(f"unknown loader {loader!r}; valid: {', '.join(LOADERS)}", field="dataset.loader")
        cls = LOADERS[loader]
    else:
        check_component(options, "dataset")
        cls = component_class(target, "dataset._target_")
    kwargs = {key: value for key, value in options.items() if key != "_target_" and key not in LABEL_KEYS}
    if target is None:
        check_component({"_target_": f"{cls.__module__}.{cls.__qualname__}", **kwargs}, "dataset")
    try:
        return cls(**kwargs)
    except RagexpInputError:
        raise
    except (TypeError, ValueError) as err:
        raise RagexpInputError(f"cannot build {cls.__name__}: {err}", field="dataset") from None


def load_dataset(cfg: Mapping, cache: StageCache | None = None) -> tuple[Corpus, EvalSet]:
    """Load the corpus and eval set ``cfg`` describes (see the module docstring)."""
    return dataset_loader(cfg).load(cache)
