"""The ragexp corpus format: a folder of documents (Markdown, text, HTML, PDF, DOCX), or one JSONL file.

Folder
    Every ``*.md``, ``*.markdown``, ``*.txt``, ``*.html``, ``*.htm``, ``*.pdf`` and ``*.docx`` file
    below the folder (suffix case-insensitive; files and folders whose name starts with ``.`` are
    skipped; a symbolic link to a file outside the folder is not read but reported as skipped, so
    an uploaded folder cannot pull in ``~/.aws/credentials``), in sorted order of their relative path. Document id = relative POSIX path without
    the suffix (``webhooks/retries.md`` -> ``webhooks/retries``). Markdown and text: text = the
    file's bytes decoded as UTF-8 *exactly* (no stripping, no newline translation), because
    evidence offsets index into this text; title = text of the first Markdown ``# `` heading
    outside code fences, else the file stem. HTML, PDF, DOCX: text = the file converted to
    Markdown-structured text (:mod:`ragexp.data.convert`), which is the document's text from then
    on; title = the one the file names (HTML ``<title>``), else the first ``# `` heading, else
    the file stem; a PDF's page map goes to ``Document.page_starts``. Conversions are cached by
    the file's SHA-256, the converter's identity and its options (stage ``conversion``).
    A file that cannot be converted (encrypted, damaged, a scanned PDF) is left out and reported,
    one line each, as is one converted to empty text (it is kept); ``strict=True`` makes either
    an error. Files of other suffixes are counted and reported, not read.
JSONL
    One object per line, BEIR corpus style: ``{"_id" | "id": str, "title": str?, "text": str}``;
    other keys (e.g. BEIR's ``metadata``) are ignored.

Any other problem (missing path, non-UTF-8 Markdown or text, duplicate ids, no documents) raises
:class:`RagexpInputError` naming the file and, where there is one, the line.
"""

from __future__ import annotations

import hashlib
import re
from os import PathLike
from pathlib import Path

from ragexp.datamodel import Corpus, Document
from ragexp.data.convert import (
    CONVERTED_SUFFIXES,
    Converted,
    Converter,
    ConvertOptions,
    Unconvertible,
    converter_for,
)
from ragexp.data.convert.base import MAX_DOCUMENT_BYTES
from ragexp.data.convert.history import converter_changes, record_converters
from ragexp.data.convert.report import ConversionReport
from ragexp.data.loaders.jsonl import iter_jsonl_objects, read_text
from ragexp.errors import RagexpInputError
from ragexp.runtime import progress
from ragexp.runtime.stage_cache import StageCache
from ragexp.stored import limits

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
DOCUMENT_SUFFIXES = TEXT_SUFFIXES + CONVERTED_SUFFIXES
CONVERSION_STAGE = "conversion"

_H1 = re.compile(r"^ {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def load_corpus(
    path: str | PathLike[str], *, html_remove_boilerplate: bool = True, strict: bool = False, cache: StageCache | None = None
) -> Corpus:
    """Load a corpus folder or corpus JSONL file (see the module docstring).

    ``html_remove_boilerplate``: leave navigation, site header/footer and sidebars out of HTML;
    ``strict``: a file skipped or converted to empty text is an error, not a reported warning;
    ``cache``: where conversions are looked up (they are written by :func:`persist_conversions`).
    """
    path = Path(path)
    report = ConversionReport()
    if path.is_dir():
        documents = _read_folder(path, ConvertOptions(html_remove_boilerplate=bool(html_remove_boilerplate)), report, cache)
        if cache is not None:
            report.changed = converter_changes(cache.root, path, report.converters)
        if strict and report.problems:
            file, problem = report.problems[0]
            more = f" (and {len(report.problems) - 1} more files)" if len(report.problems) > 1 else ""
            raise RagexpInputError(f"{problem}{more}; dataset.strict=true makes a skipped or empty file an error",
                                   file=path / file)
        what = f"no {'/'.join('*' + s for s in DOCUMENT_SUFFIXES)} files below this folder"
        if report.skipped:
            what += f" that could be read ({report.skipped[0][0]}: {report.skipped[0][1]})"
    elif path.is_file():
        if path.suffix.lower() in DOCUMENT_SUFFIXES:
            raise RagexpInputError(
                "a corpus is a folder of documents or a .jsonl file; pass the folder that holds this file",
                file=path,
            )
        documents = read_jsonl_corpus(path)
        what = "the file holds no documents"
    else:
        raise RagexpInputError(
            "no such file or folder; pass a folder of documents (.md, .txt, .html, .pdf, .docx) or a corpus .jsonl", file=path
        )
    if not documents:
        raise RagexpInputError(f"empty corpus: {what}; point the corpus path at your documents", file=path)
    has_report = report.formats or report.skipped or report.unsupported
    return Corpus(documents, source=str(path), conversion=report if has_report else None)


def persist_conversions(corpus: Corpus, cache: StageCache) -> None:
    """Write the conversions made while loading ``corpus`` to ``cache``, and which converters read
    its folder; called once the run's data is accepted, so refused input leaves no cache entry."""
    report = corpus.conversion
    if report is None:
        return
    for parts, value in report.pending:
        cache.put_json(CONVERSION_STAGE, parts, value)
    report.pending.clear()
    if report.converters:
        record_converters(cache.root, Path(corpus.source), report.converters)


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


def _read_folder(root: Path, options: ConvertOptions, report: ConversionReport, cache: StageCache | None) -> list[Document]:
    files = sorted(
        (p for p in root.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    documents: list[Document] = []
    source_of: dict[str, Path] = {}
    real_root = root.resolve()
    for file in progress.bar(files, desc=f"reading {root.name}", unit=" files", disable=None, leave=False):
        relative = file.relative_to(root)
        suffix = file.suffix.lower()
        if suffix not in DOCUMENT_SUFFIXES:
            report.unsupported[suffix] += 1
            continue
        if not file.resolve().is_relative_to(real_root):
            report.skipped.append((relative.as_posix(), "a symbolic link to a file outside the corpus folder (not read)"))
            continue
        doc_id = relative.with_suffix("").as_posix()
        if doc_id in source_of:
            raise RagexpInputError(
                f"document id {doc_id!r} is also produced by {source_of[doc_id]}; rename one of the two files",
                file=file,
            )
        source_of[doc_id] = file
        converter = converter_for(suffix)
        if converter is None:
            text = read_text(file, max_bytes=MAX_DOCUMENT_BYTES)
            documents.append(Document(id=doc_id, text=text, title=markdown_title(text) or file.stem))
            continue
        converted = _convert(file, relative.as_posix(), converter, options, report, cache)
        if converted is None:
            continue
        report.formats[doc_id] = converter.name
        if not converted.text.strip():
            report.empty.append(relative.as_posix())
        title = converted.title or markdown_title(converted.text) or file.stem
        documents.append(Document(id=doc_id, text=converted.text, title=title, page_starts=converted.page_starts))
    return documents


def _convert(
    file: Path, relative: str, converter: Converter, options: ConvertOptions, report: ConversionReport,
    cache: StageCache | None,
) -> Converted | None:
    """The file converted (from the cache when there), or ``None`` when it is skipped (reported)."""
    data = limits.read_bytes(file, max_bytes=MAX_DOCUMENT_BYTES)
    identity = converter.identity()
    report.converters[converter.name] = identity
    parts = {"sha256": hashlib.sha256(data).hexdigest(), "converter": identity, "options": converter.options_of(options)}
    stored = cache.get_json(CONVERSION_STAGE, parts) if cache is not None else None
    if stored is not None:
        report.cache_hits += 1
        value = stored
    else:
        try:
            converted = converter.convert(data, options)
            value = {"text": converted.text, "title": converted.title, "page_starts": list(converted.page_starts),
                     "notes": list(converted.notes)}
        except Unconvertible as err:
            value = {"skipped": str(err)}
        except Exception as err:  # a library failing on a malformed file: this file is skipped, the rest is read
            first = str(err).splitlines()[0][:200] if str(err) else ""
            value = {"skipped": f"the {converter.name} converter failed on it ({type(err).__name__}: {first})"}
        report.pending.append((parts, value))
    if "skipped" in value:
        report.skipped.append((relative, value["skipped"]))
        return None
    report.notes.extend((relative, note) for note in value["notes"])
    return Converted(value["text"], value["title"], tuple(value["page_starts"]), tuple(value["notes"]))


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
