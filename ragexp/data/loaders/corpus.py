"""The ragexp corpus format: a folder of Markdown / text files, or one JSONL file.

Folder
    Every ``*.md``, ``*.markdown`` and ``*.txt`` file below the folder (suffix case-insensitive;
    files and folders whose name starts with ``.`` are skipped), in sorted order of their relative
    path. Document id = relative POSIX path without the suffix (``webhooks/retries.md`` ->
    ``webhooks/retries``); title = text of the first Markdown ``# `` heading outside code fences,
    else the file stem; text = the file's bytes decoded as UTF-8 *exactly* (no stripping, no
    newline translation), because evidence offsets index into this text.
JSONL
    One object per line, BEIR corpus style: ``{"_id" | "id": str, "title": str?, "text": str}``;
    other keys (e.g. BEIR's ``metadata``) are ignored.

Any problem (missing path, non-UTF-8 bytes, duplicate ids, no documents) raises
:class:`RagexpInputError` naming the file and, where there is one, the line.
"""

from __future__ import annotations

import re
from os import PathLike
from pathlib import Path

from ragexp.data import Corpus, Document
from ragexp.data.loaders.jsonl import iter_jsonl_objects, read_text
from ragexp.errors import RagexpInputError
from ragexp.runtime import progress

DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")

_H1 = re.compile(r"^ {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def load_corpus(path: str | PathLike[str]) -> Corpus:
    """Load a corpus folder or corpus JSONL file (see the module docstring)."""
    path = Path(path)
    if path.is_dir():
        documents = _read_folder(path)
        what = f"no {'/'.join('*' + s for s in DOCUMENT_SUFFIXES)} files below this folder"
    elif path.is_file():
        if path.suffix.lower() in DOCUMENT_SUFFIXES:
            raise RagexpInputError(
                "a corpus is a folder of documents or a .jsonl file; pass the folder that holds this file",
                file=path,
            )
        documents = read_jsonl_corpus(path)
        what = "the file holds no documents"
    else:
        raise RagexpInputError("no such file or folder; pass a folder of .md/.txt files or a corpus .jsonl", file=path)
    if not documents:
        raise RagexpInputError(f"empty corpus: {what}; point the corpus path at your documents", file=path)
    return Corpus(documents, source=str(path))


def read_jsonl_corpus(path: Path) -> list[Document]:
    """Documents of a BEIR-style ``corpus.jsonl`` (``_id`` or ``id``, optional ``title``, ``text``)."""
    documents: list[Document] = []
    first_line: dict[str, int] = {}
    lines = iter_jsonl_objects(path)
    for line, obj in progress.bar(lines, desc=f"reading {path.name}", unit=" docs", disable=None, leave=False):
        id_field = "_id" if "_id" in obj else "id"
        if id_field not in obj:
            raise RagexpInputError(
                'missing document id: give every line an "_id" (or "id")', file=path, line=line, field="_id"
            )
        doc_id = _string_field(obj, id_field, path, line, required=True)
        text = _string_field(obj, "text", path, line, required=True)
        title = _string_field(obj, "title", path, line, required=False)
        if doc_id in first_line:
            raise RagexpInputError(
                f"duplicate document id {doc_id!r} (first on line {first_line[doc_id]}); document ids must be unique",
                file=path,
                line=line,
                field=id_field,
            )
        first_line[doc_id] = line
        documents.append(Document(id=doc_id, text=text, title=title))
    return documents


def markdown_title(text: str) -> str | None:
    """Text of the first level-1 ATX heading (``# Title``) outside fenced code blocks, if any."""
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (match := _H1.match(line)):
            return match.group(1)
    return None


def _read_folder(root: Path) -> list[Document]:
    files = sorted(
        (p for p in root.rglob("*") if p.suffix.lower() in DOCUMENT_SUFFIXES and p.is_file()),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    documents: list[Document] = []
    source_of: dict[str, Path] = {}
    for file in files:
        relative = file.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        doc_id = relative.with_suffix("").as_posix()
        if doc_id in source_of:
            raise RagexpInputError(
                f"document id {doc_id!r} is also produced by {source_of[doc_id]}; rename one of the two files",
                file=file,
            )
        source_of[doc_id] = file
        text = read_text(file)
        documents.append(Document(id=doc_id, text=text, title=markdown_title(text) or file.stem))
    return documents


def _string_field(obj: dict, name: str, path: Path, line: int, *, required: bool) -> str:
    value = obj.get(name)
    if value is None:
        if required:
            raise RagexpInputError(f"missing required field {name!r}", file=path, line=line, field=name)
        return ""
    if not isinstance(value, str):
        raise RagexpInputError(
            f"must be a string, got {type(value).__name__} {value!r}", file=path, line=line, field=name
        )
    return value
