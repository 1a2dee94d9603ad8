"""Config composition from several threads at once: Hydra's global state admits one composition at
a time, so ``compose_config`` serialises them (the annotation page's pool warm-up thread composes
while request threads build the chunk map)."""

from __future__ import annotations

import threading

from ragexp.annotation.live_corpus import LiveCorpus
from ragexp.annotation.pool import Pooler
from ragexp.annotation.server import Annotation
from ragexp.annotation.session import Session
from ragexp.config.compose import compose_config
from tests.helpers.tiny_dataset import write_tiny_dataset

PIPELINES = ("bm25", "dense", "hybrid_rrf")


def run_together(jobs: list) -> list[BaseException]:
    """Run every callable in its own thread, released at the same moment; the errors raised."""
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job) -> None:
        barrier.wait()
        try:
            job()
        except BaseException as err:  # noqa: BLE001 - collected and asserted on
            errors.append(err)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_threads_composing_at_once_each_get_their_own_config():
    results: dict[int, list[str]] = {}

    def compose_many(n: int) -> None:
        name = PIPELINES[n % len(PIPELINES)]
        results[n] = [compose_config([f"retrieval={name}"]).retrieval.name for _ in range(5)]

    assert run_together([lambda n=n: compose_many(n) for n in range(6)]) == []
    single = {name: compose_config([f"retrieval={name}"]).retrieval.name for name in PIPELINES}
    assert results == {n: [single[PIPELINES[n % len(PIPELINES)]]] * 5 for n in range(6)}


def test_the_pool_warm_up_and_page_requests_compose_at_the_same_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the pool's stage cache defaults to ./.ragexp_cache
    corpus_dir, _ = write_tiny_dataset(tmp_path)
    corpus = LiveCorpus(corpus_dir)
    pooler = Pooler(["bm25", "bm25"], depth=3)
    annotation = Annotation(Session(tmp_path / "built.jsonl"), corpus, pooler)
    chunk_maps = []

    def request() -> None:  # what GET /api/state does first on a fresh server
        annotation._chunk_map = None
        chunk_maps.append(annotation.chunk_map())

    errors = run_together([lambda: pooler.warm(corpus.current()), request, request, request])
    assert errors == [] and len(chunk_maps) == 3
    assert pooler.pool(corpus.current(), "How long are webhooks retried?")
