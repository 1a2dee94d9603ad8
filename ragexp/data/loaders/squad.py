"""SQuAD v1.1-style datasets: one JSON file ``{"data": [{"title", "paragraphs": [{"context", "qas"}]}]}``.

Documents are rebuilt at *article* level, so retrieval has to find the right passage inside a
long document rather than being handed one paragraph per document:

- doc id = the article title (``"Super_Bowl_50"``), ``Document.title`` = the title with ``_`` as
  spaces, text = the article's paragraph contexts joined by ``"\\n\\n"``; paragraph ``j`` starts at
  ``offset_j = sum(len(context_i) + 2 for i < j)``.
- each question becomes an :class:`~ragexp.datamodel.EvalItem`: evidence = its answer spans
  ``[offset_j + answer_start, offset_j + answer_start + len(text))``, identical spans kept once,
  each verified to read back exactly the answer text (else :class:`RagexpInputError`);
  with ``evidence="paragraph"`` the single span of the whole paragraph instead.
  ``gold_answer`` = the first answer, ``answers`` = every answer text as given (the official
  EM/F1 take the maximum over them). SQuAD 2.0 questions marked ``is_impossible`` become
  unanswerable items.

The shared ``dev-v1.1.reconstructed.json`` was rebuilt from the SQuAD explorer pages, and its
``answer_start`` is the FIRST occurrence of the answer text in the paragraph (its SOURCE.txt:
4,162 of 34,726 answer texts occur more than once, so those offsets may point at another
occurrence than the annotator's). Answer spans therefore always hold the right text but may sit at
the wrong place; ``evidence="paragraph"`` is immune to this.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

from ragexp.data.loaders.jsonl import read_text
from ragexp.datamodel import Corpus, Document, EvalItem, EvalSet, Evidence
from ragexp.errors import RagexpInputError
from ragexp.runtime import progress
from ragexp.stored import limits

EVIDENCE_MODES = ("answer", "paragraph")
PARAGRAPH_SEPARATOR = "\n\n"


def load_squad(path: str | PathLike[str], evidence: str = "answer") -> tuple[Corpus, EvalSet]:
    """Load a SQuAD-style JSON file (or a folder holding exactly one ``*.json``) as article documents."""
    if evidence not in EVIDENCE_MODES:
        raise RagexpInputError(
            f"unknown evidence mode {evidence!r}; valid: {', '.join(EVIDENCE_MODES)}", field="evidence"
        )
    file = _squad_file(Path(path))
    data = limits.parse_json(read_text(file), source=file)  # bounded depth, no key twice, finite numbers
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list) or not articles:
        raise RagexpInputError('not a SQuAD file: expected {"data": [articles...]}', file=file, field="data")

    documents: list[Document] = []
    items: list[EvalItem] = []
    for a, article in enumerate(
        progress.bar(articles, desc=f"reading {file.name}", unit=" articles", disable=None, leave=False)
    ):
        where = f"data[{a}]"
        title = _require(article, "title", str, file, where)
        paragraphs = _require(article, "paragraphs", list, file, where)
        contexts = [_require(p, "context", str, file, f"{where}.paragraphs[{j}]") for j, p in enumerate(paragraphs)]
        text = PARAGRAPH_SEPARATOR.join(contexts)
        documents.append(Document(id=title, text=text, title=title.replace("_", " ")))
        offset = 0
        for j, (paragraph, context) in enumerate(zip(paragraphs, contexts, strict=True)):
            paragraph_span = Evidence(doc_id=title, start=offset, end=offset + len(context))
            for k, qa in enumerate(_require(paragraph, "qas", list, file, f"{where}.paragraphs[{j}]")):
                qa_where = f"{where}.paragraphs[{j}].qas[{k}]"
                answers = _answers(qa, context, title, offset, file, qa_where)
                if not answers:
                    span = ()
                elif evidence == "paragraph":
                    span = (paragraph_span,)
                else:
                    span = tuple(dict.fromkeys(e for e, _ in answers))
                items.append(
                    EvalItem(
                        id=_require(qa, "id", str, file, qa_where),
                        query=_require(qa, "question", str, file, qa_where),
                        evidence=span,
                        gold_answer=answers[0][1] if answers else None,
                        answers=tuple(answer for _, answer in answers),
                        answerable=bool(answers),
                    )
                )
            offset += len(context) + len(PARAGRAPH_SEPARATOR)
    try:
        corpus = Corpus(documents, source=str(file))
    except ValueError as err:
        raise RagexpInputError(f"{err}; article titles must be unique", file=file, field="title") from None
    _check_unique_ids(items, file)
    return corpus, EvalSet(
        items=items, source=str(file), name=file.stem, meta={"format": "squad", "evidence": evidence}
    )


def _squad_file(path: Path) -> Path:
    if path.is_file():
        return path
    if path.is_dir():
        candidates = sorted(path.glob("*.json"))
        if len(candidates) == 1:
            return candidates[0]
        found = ", ".join(c.name for c in candidates) or "none"
        raise RagexpInputError(
            f"expected exactly one *.json SQuAD file in this folder (found: {found}); pass the file", file=path
        )
    raise RagexpInputError("no such file or folder; pass a SQuAD JSON file such as dev-v1.1.json", file=path)


def _answers(qa: dict, context: str, doc_id: str, offset: int, file: Path, where: str) -> list[tuple[Evidence, str]]:
    """``(span in the article, answer text)`` per answer; each must lie inside its paragraph
    ``context`` (which starts at ``offset`` in the article) and read back the answer text."""
    answers = _require(qa, "answers", list, file, where)
    if not answers and not qa.get("is_impossible"):
        raise RagexpInputError("a SQuAD v1.1 question needs at least one answer", file=file, field=f"{where}.answers")
    resolved = []
    for m, answer in enumerate(answers):
        answer_where = f"{where}.answers[{m}]"
        answer_text = _require(answer, "text", str, file, answer_where)
        start = _require(answer, "answer_start", int, file, answer_where)
        found = context[start : start + len(answer_text)] if start >= 0 else ""
        if found != answer_text:
            raise RagexpInputError(
                f"answer_start does not point at the answer text {answer_text!r} (found {found!r}); "
                "fix answer_start to the character offset of the answer in its paragraph",
                file=file,
                field=f"{answer_where}.answer_start",
            )
        span = Evidence(doc_id=doc_id, start=offset + start, end=offset + start + len(answer_text))
        resolved.append((span, answer_text))
    return resolved


_EXPECTED = {str: "a string", int: "an integer", list: "a list"}


def _require(obj: object, key: str, expected: type, file: Path, where: str):
    if not isinstance(obj, dict):
        raise RagexpInputError(f"must be an object, got {type(obj).__name__}", file=file, field=where)
    value = obj.get(key)
    if not isinstance(value, expected) or isinstance(value, bool):
        got = "nothing" if value is None else f"{type(value).__name__} {value!r:.40}"
        raise RagexpInputError(f"must be {_EXPECTED[expected]}, got {got}", file=file, field=f"{where}.{key}")
    return value


def _check_unique_ids(items: list[EvalItem], file: Path) -> None:
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise RagexpInputError(
                f"duplicate question id {item.id!r}; question ids must be unique", file=file, field="id"
            )
        seen.add(item.id)
