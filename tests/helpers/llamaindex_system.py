"""A real LlamaIndex pipeline, as a team would have it: the demo's Markdown files read by the team's
own code into ``Document`` objects with several metadata keys, LlamaIndex's ``SentenceSplitter``
and its ``BM25Retriever`` (``llama-index-retrievers-bm25``). Served over HTTP it sends each passage
as LlamaIndex hands it to an LLM, ``node.get_content(metadata_mode=...)``: in mode ``none`` the
bare text, in ``llm`` and ``all`` a ``key: value`` header and a blank line before it (``all`` also
the keys excluded from the LLM). The nodes' ``start_char_idx``/``end_char_idx`` stay with the test
as the independent truth of where each passage lies."""

from __future__ import annotations

from llama_index.core import Document
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index.retrievers.bm25 import BM25Retriever

from ragexp.data.datasets import demo_paths

MODES = {"none": MetadataMode.NONE, "llm": MetadataMode.LLM, "all": MetadataMode.ALL}


class LlamaIndexPipeline:
    def __init__(self, k: int = 10, chunk_size: int = 160, chunk_overlap: int = 20) -> None:
        root = demo_paths()[0]
        documents = []
        for path in sorted(root.rglob("*.md")):
            doc_id = path.relative_to(root).with_suffix("").as_posix()
            text = path.read_text(encoding="utf-8")
            title = text.lstrip("# ").split("\n", 1)[0].strip()
            documents.append(Document(
                text=text, doc_id=doc_id,
                metadata={"title": title, "url": f"https://help.example.com/{doc_id}.html", "product": "Acme API",
                          "section": doc_id.split("/")[0], "file_name": path.name},
                excluded_llm_metadata_keys=["url", "file_name"]))
        self.nodes = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap).get_nodes_from_documents(documents)
        self.retriever = BM25Retriever.from_defaults(nodes=self.nodes, similarity_top_k=k)

    def search(self, query: str) -> list[NodeWithScore]:
        return self.retriever.retrieve(query)

    def answer(self, body: dict) -> dict:
        """The endpoint's reply: each passage as LlamaIndex gives it to an LLM in ``body["mode"]``,
        and its document's id; no offsets."""
        mode = MODES[body.get("mode", "none")]
        return {"passages": [{"text": hit.node.get_content(metadata_mode=mode), "doc_id": hit.node.ref_doc_id}
                             for hit in self.search(body["query"])]}
