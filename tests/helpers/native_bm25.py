"""ragexp's own BM25 over the demo's fixed-512 chunks as a black-box system would serve it:
``NativeBM25(cache_dir)(query)`` returns ``{"passages": [{"text", "doc_id"}]}``: passage text and
document id only, no chunk id, no offset, best first (trec_eval's order, as the native run ranks).

Registered as a ``ragexp.components`` entry point by :func:`register` (a dist-info folder on
``sys.path``, as ``pip install`` of a package declaring it would leave it)."""

from __future__ import annotations

from pathlib import Path

from ragexp.config.compose import compose_config
from ragexp.evaluation.pipeline import build_pipeline
from ragexp.evaluation.prepared import prepare_data
from ragexp.metrics.ranking import trec_order
from ragexp.runtime.stage_cache import StageCache
from ragexp.evaluation.job_spec import job_spec

NATIVE = ("retrieval=bm25", "chunking=fixed", "progress=false")
TARGET = "tests.helpers.native_bm25.NativeBM25"


class NativeBM25:
    def __init__(self, cache_dir: str, k: int = 100, with_doc_id: bool = True) -> None:
        spec = job_spec(compose_config([*NATIVE, f"cache_dir={cache_dir}"]))
        cache = StageCache(Path(cache_dir))
        data = prepare_data(spec, cache, progress=False)
        self.chunks = data.chunks_by_id
        self.retriever = build_pipeline(spec, cache).retriever
        self.retriever.index(data.chunks)
        self.k, self.with_doc_id = k, with_doc_id

    def __call__(self, query: str) -> dict:
        ranking = trec_order(self.retriever.search([query], self.k)[0])
        return {"passages": [{"text": self.chunks[cid].text, **({"doc_id": self.chunks[cid].doc_id} if self.with_doc_id else {})}
                             for cid, _ in ranking]}


def register(folder: Path) -> Path:
    """A dist-info folder in ``folder`` registering :data:`TARGET`; put ``folder`` on ``sys.path``."""
    info = folder / "native_bm25_system-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: native-bm25-system\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[ragexp.components]\nnative_bm25 = {TARGET.rsplit('.', 1)[0]}:NativeBM25\n",
                                           encoding="utf-8")
    return folder
