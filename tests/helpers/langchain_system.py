"""A real third-party RAG pipeline, as a team would have it: LangChain's
``RecursiveCharacterTextSplitter`` (``add_start_index=True``) over the demo's Markdown files, read
from disk by the team's own code, and LangChain's ``BM25Retriever`` (rank_bm25) over the chunks.
Served over HTTP it sends passage text and the file's id only; the splitter's start indices stay
with the test as the independent truth of where each passage lies. ``body["format"]`` picks how
each passage's text is written, as LangChain's ``format_document`` writes it for a prompt:
:data:`FORMATS` (bare, a ``key: value`` metadata header, ``Source: ... Content: ...``)."""

from __future__ import annotations


from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.prompts import PromptTemplate, format_document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from ragexp.data.datasets import demo_paths


FORMATS = {
    "none": "{page_content}",
    "metadata": "source: {doc_id}\nstart_index: {start_index}\ntitle: {title}\n\n{page_content}",
    "source_content": "Source: {doc_id}\nContent: {page_content}",
}


class LangChainPipeline:
    def __init__(self, k: int = 10, chunk_size: int = 400, chunk_overlap: int = 60) -> None:
        root = demo_paths()[0]
        files = [Document(page_content=p.read_text(encoding="utf-8"),
                          metadata={"doc_id": str(p.relative_to(root).with_suffix("").as_posix()),
                                    "title": p.read_text(encoding="utf-8").lstrip("# ").split("\n", 1)[0]})
                 for p in sorted(root.rglob("*.md"))]
        splitter = RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap, add_start_index=True)
        self.chunks = splitter.split_documents(files)
        self.retriever = BM25Retriever.from_documents(self.chunks, k=k)

    def search(self, query: str) -> list[Document]:
        return self.retriever.invoke(query)

    def answer(self, body: dict) -> dict:
        """The endpoint's reply: text (as ``body["format"]`` writes it) and document id per passage, no offsets."""
        prompt = PromptTemplate.from_template(FORMATS[body.get("format", "none")])
        return {"passages": [{"text": format_document(d, prompt), "doc_id": d.metadata["doc_id"]}
                             for d in self.search(body["query"])]}
