"""``eval.sample``: a seeded subset of the eval set for smoke runs, with its own fingerprint."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ragexp.config.schema import RagexpConfig, validate
from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.errors import RagexpInputError
from ragexp.evaluation.prepared import sample_evalset


@pytest.fixture(scope="module")
def demo_evalset():
    corpus_dir, evalset_path = demo_paths()
    return load_evalset(evalset_path, load_corpus(corpus_dir))


def test_sample_is_seeded_ordered_and_fingerprinted(demo_evalset):
    sample = sample_evalset(demo_evalset, 20, seed=0)
    ids = [item.id for item in sample.items]
    order = {item.id: i for i, item in enumerate(demo_evalset.items)}
    assert len(set(ids)) == 20 and ids == sorted(ids, key=order.__getitem__)
    assert ids == [item.id for item in sample_evalset(demo_evalset, 20, seed=0).items]
    assert ids != [item.id for item in sample_evalset(demo_evalset, 20, seed=1).items]
    assert sample.fingerprint() != demo_evalset.fingerprint()
    assert sample.meta["sampled"] == {"size": 20, "of": len(demo_evalset.items), "seed": 0}


def test_sample_at_least_the_whole_set_is_the_whole_set(demo_evalset):
    assert sample_evalset(demo_evalset, len(demo_evalset.items), seed=3) is demo_evalset


@pytest.mark.parametrize("size", [0, -5])
def test_non_positive_sample_is_an_input_error(size):
    cfg = OmegaConf.merge(OmegaConf.structured(RagexpConfig), {"eval": {"sample": size}})
    with pytest.raises(RagexpInputError) as caught:
        validate(cfg)
    assert caught.value.field == "eval.sample"
