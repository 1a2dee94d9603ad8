"""FAISS's OpenMP setting must not leak into torch: they share one OpenMP runtime per process."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
import torch

from ragexp.datamodel import Chunk
from reference_pipelines.dense import DenseRetriever, faiss_threads
from reference_pipelines.encoders import Encoder


class CountingEncoder(Encoder):
    """Records torch's thread count at every encoding call."""

    identity = {"model": "counting"}

    def __init__(self):
        self.threads_seen: list[int] = []

    def _vectors(self, texts):
        self.threads_seen.append(torch.get_num_threads())
        rng = np.random.default_rng(len(texts))
        vectors = rng.standard_normal((len(texts), 8)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def encode_queries(self, texts):
        return self._vectors(texts)

    def encode_passages(self, texts):
        return self._vectors(texts)


@pytest.fixture
def two_torch_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_the_thread_count_is_restored_after_the_block(two_torch_threads):
    """Inside the block FAISS runs one OpenMP thread; after it, the count is the one before and
    torch's is untouched. (Whether torch reads the same count inside the block depends on which
    OpenMP state the process has reached, so that is not asserted: tests/test_dense.py first
    changed it.)"""
    before = faiss.omp_get_max_threads()
    with faiss_threads(1):
        assert faiss.omp_get_max_threads() == 1
    assert faiss.omp_get_max_threads() == before and torch.get_num_threads() == 2


def test_encoding_runs_with_the_processes_threads_across_index_and_search(two_torch_threads):
    encoder = CountingEncoder()
    retriever = DenseRetriever(encoder=encoder, threads=1)
    chunks = [Chunk(id=f"d{i}#chunk_0", doc_id=f"d{i}", index=0, start=0, end=6, text=f"text {i}") for i in range(5)]
    retriever.index(chunks)
    retriever.search(["a query"], k=3)
    retriever.search(["another query"], k=3)
    assert encoder.threads_seen == [2, 2, 2] and torch.get_num_threads() == 2
