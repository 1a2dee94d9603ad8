"""``ragexp evalset reanchor EVALSET --corpus NEW [--old-corpus OLD] [--output FILE] [--report FILE] [--min-similarity S]``:
an eval set's gold moved to a new corpus version, and what a person must re-mark.

Each evidence's text — its ``quote``, or for a bare span the text ``[start, end)`` read in
``--old-corpus`` (checked against the header's record of that document, when there is one) — is
looked for in its document of the new corpus with the locator a black-box system's passages go
through (:class:`ragexp.systems.locate.Locator`, restricted to that document: exact, then
normalised, then a bounded fuzzy alignment; two places are ambiguous, never guessed). Outcomes
(:data:`OUTCOMES`), one per evidence:

``unchanged``  the span still reads its text (a whole document still there; a quote still found
               as the loader finds it); a bare span gains its quote.
``moved``      found verbatim, once, elsewhere in its document: the new span, with its quote.
``fuzzy``      found once after normalising or by alignment (similarity in the report): the new
               span, with the quote it reads now.
``changed``    its document is there but its text is not (or in two places): kept as it was, for a
               person to re-mark in the annotation page, which shows it as stale.
``vanished``   its document is gone: kept as it was, for a person to remove or replace.
``unverifiable`` a bare span or chunk id with nothing to tell what it read (no quote, no
               ``--old-corpus``, no record of an unchanged document): kept as it was.

The new version (``--output``, default ``<name>.reanchored.jsonl`` beside EVALSET) records its
lineage (the source file's name and SHA-256, the new corpus's fingerprint) and, per gold document,
the SHA-256 of the text its gold now reads (:func:`~ragexp.data.loaders.evalset.gold_header`).
The report (``--report``, default the output's name + ``.report.json``) lists every evidence's
outcome. Exit 0 when nothing needs a person, 1 when something changed, vanished or is
unverifiable, 2 on unusable input.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ragexp.data.evalset_schema import EvalSetFile, EvidenceRecord, LineageRecord, dumps_file, read_file
from ragexp.data.loaders.evalset import gold_header
from ragexp.datamodel import CHUNK_SEPARATOR, Corpus, text_sha256
from ragexp.errors import RagexpInputError
from ragexp.stored import limits
from ragexp.systems.locate import LocateOptions, Locator

HELP = "move an eval set's gold to a new corpus version: moved, re-found fuzzily, changed (re-mark), vanished"
OUTCOMES = ("unchanged", "moved", "fuzzy", "changed", "vanished", "unverifiable")
#: Outcomes a person must look at before the new version can be run.
NEEDS_A_PERSON = ("changed", "vanished", "unverifiable")


@dataclass(frozen=True)
class EvidenceOutcome:
    """What became of one evidence: ``item`` and ``field`` (``evidence[i]`` or ``gold_chunk_ids[i]``)
    name it; ``[start, end)`` as written, ``[new_start, new_end)`` as written now; ``read`` what it
    read, ``reads_now`` what its new (or, when kept, its old) span reads; ``similarity`` of a
    fuzzy re-find; ``reason`` why it was kept."""

    item: str
    field: str
    doc_id: str
    outcome: str
    start: int | None = None
    end: int | None = None
    new_start: int | None = None
    new_end: int | None = None
    similarity: float | None = None
    read: str | None = None
    reads_now: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class Reanchored:
    """The new version (``items`` under ``header``) and every evidence's outcome."""

    file: EvalSetFile
    outcomes: tuple[EvidenceOutcome, ...]

    def counts(self) -> dict[str, int]:
        return {name: sum(o.outcome == name for o in self.outcomes) for name in OUTCOMES}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("evalset", metavar="EVALSET", type=Path, help="the eval set to move (.jsonl, .yaml or .yml)")
    parser.add_argument("--corpus", required=True, help="the new corpus version (folder or .jsonl)")
    parser.add_argument("--old-corpus", help="the corpus the gold was marked on: gives bare spans the text they read")
    parser.add_argument("--output", "-o", type=Path, help="the new version (default: EVALSET's name + .reanchored.jsonl)")
    parser.add_argument("--report", type=Path, help="the report (default: the output's name + .report.json)")
    parser.add_argument("--min-similarity", type=float, default=LocateOptions.min_similarity,
                        help=f"least similarity (0.5-1) a fuzzy re-find is accepted at (default {LocateOptions.min_similarity})")


def run(args: argparse.Namespace) -> int:
    from ragexp.data.loaders.corpus import load_corpus
    from ragexp.runtime.atomic_file import atomic_write

    options = LocateOptions(min_similarity=args.min_similarity)
    source = read_file(args.evalset)
    corpus = load_corpus(args.corpus)
    old_corpus = load_corpus(args.old_corpus) if args.old_corpus else None
    output = args.output or args.evalset.with_name(args.evalset.stem + ".reanchored.jsonl")
    report_path = args.report or output.with_name(output.name + ".report.json")
    if output.resolve() == args.evalset.resolve():
        raise RagexpInputError("the new version needs a file of its own (its lineage names this one)", field="--output")
    result = reanchor(source, args.evalset, corpus, old_corpus, options)
    atomic_write(output, dumps_file(result.file.header, [record for _, record in result.file.items]))
    counts = result.counts()
    report = {"evalset": str(args.evalset), "sha256": result.file.header.lineage.sha256, "output": str(output),
              "corpus": str(args.corpus), "corpus_fingerprint": corpus.fingerprint(), "counts": counts,
              "evidence": [asdict(o) for o in result.outcomes]}
    atomic_write(report_path, json.dumps(report, ensure_ascii=False, indent=1) + "\n")
    print(f"reanchored {args.evalset} -> {output}: {counts['unchanged']} unchanged, {counts['moved']} moved, "
          f"{counts['fuzzy']} re-found fuzzily, {counts['changed']} changed, {counts['vanished']} vanished, "
          f"{counts['unverifiable']} unverifiable; report: {report_path}")
    for outcome in result.outcomes:
        if outcome.outcome in ("fuzzy", *NEEDS_A_PERSON):
            similarity = f" (similarity {outcome.similarity:.3f})" if outcome.similarity is not None else ""
            why = f": {outcome.reason}" if outcome.reason else ""
            print(f"  {outcome.outcome}{similarity}: item {outcome.item!r} {outcome.field} in {outcome.doc_id!r}{why}")
    if any(counts[name] for name in NEEDS_A_PERSON):
        print(f"a person must look at {sum(counts[name] for name in NEEDS_A_PERSON)} evidence: ragexp evalset annotate "
              f"{output} --corpus {args.corpus} shows each as stale")
        return 1
    return 0


def reanchor(source: EvalSetFile, path: Path, corpus: Corpus, old_corpus: Corpus | None,
             options: LocateOptions = LocateOptions()) -> Reanchored:
    """``source`` (read from ``path``) moved to ``corpus`` (module docstring); ``old_corpus`` the
    corpus its gold was marked on, if known. Raises when ``old_corpus`` holds another text of a
    document than the one the header recorded."""
    recorded = source.header.documents or {}
    if old_corpus is not None:
        for doc_id, digest in recorded.items():
            if doc_id in old_corpus and text_sha256(old_corpus[doc_id].text) != digest:
                raise RagexpInputError(f"document {doc_id!r} of the old corpus is not the text the eval set's gold was "
                                       "marked on (its SHA-256 differs from the header's record); pass the corpus "
                                       "version the eval set was made against", field="--old-corpus")
    gold_docs = {e.doc_id for _, item in source.items for e in item.evidence} | {
        c.rpartition(CHUNK_SEPARATOR)[0] for _, item in source.items for c in item.gold_chunk_ids}
    mover = _Mover(corpus, old_corpus, recorded, Locator({d: corpus[d] for d in gold_docs if d in corpus}, options))
    items, outcomes = [], []
    for line, item in source.items:
        evidence = []
        for i, entry in enumerate(item.evidence):
            moved, outcome = mover.move(item.id, f"evidence[{i}]", entry)
            evidence.append(moved)
            outcomes.append(outcome)
        for i, chunk in enumerate(item.gold_chunk_ids):
            doc_id = chunk.rpartition(CHUNK_SEPARATOR)[0]
            outcomes.append(mover.chunk_outcome(item.id, f"gold_chunk_ids[{i}]", doc_id))
        items.append((line, replace(item, evidence=tuple(evidence))))
    records = [record for _, record in items]
    lineage = LineageRecord(file=path.name, sha256=limits.file_sha256(path),
                            corpus=corpus.fingerprint())
    header = gold_header(replace(source.header, lineage=lineage), records, corpus)
    return Reanchored(EvalSetFile(header, source.header_line, tuple(items)), tuple(outcomes))


class _Mover:
    """One evidence at a time, against the new corpus (see :func:`reanchor`)."""

    def __init__(self, corpus: Corpus, old_corpus: Corpus | None, recorded: dict, locator: Locator) -> None:
        self.corpus, self.old_corpus, self.recorded, self.locator = corpus, old_corpus, recorded, locator

    def unchanged(self, doc_id: str) -> bool:
        """Whether the header records ``doc_id`` and the new corpus holds the same text."""
        return doc_id in self.recorded and doc_id in self.corpus and text_sha256(self.corpus[doc_id].text) == self.recorded[doc_id]

    def chunk_outcome(self, item: str, field: str, doc_id: str) -> EvidenceOutcome:
        if doc_id not in self.corpus:
            return EvidenceOutcome(item, field, doc_id, "vanished", reason="its document is gone")
        if self.unchanged(doc_id):
            return EvidenceOutcome(item, field, doc_id, "unchanged")
        return EvidenceOutcome(item, field, doc_id, "unverifiable", reason="a chunk id keeps no text; resolve it to a "
                               "span on the corpus it was made on first (ragexp evalset resolve EVALSET --corpus OLD)")

    def read(self, entry: EvidenceRecord) -> str | None:
        """What the evidence read when it was marked: its quote, else its span in the old corpus
        (or in the new one where the header vouches the document is unchanged)."""
        if entry.quote is not None:
            return entry.quote
        for corpus in (self.old_corpus, self.corpus if self.unchanged(entry.doc_id) else None):
            if corpus is not None and entry.doc_id in corpus and entry.end <= len(corpus[entry.doc_id].text):
                return corpus[entry.doc_id].text[entry.start:entry.end]
        return None

    def move(self, item: str, field: str, entry: EvidenceRecord) -> tuple[EvidenceRecord, EvidenceOutcome]:
        doc_id = entry.doc_id
        base = EvidenceOutcome(item, field, doc_id, "unchanged", start=entry.start, end=entry.end)
        if entry.start is None and entry.quote is None:  # a whole document
            if doc_id in self.corpus:
                return entry, base
            return entry, replace(base, outcome="vanished", reason="its document is gone")
        read = self.read(entry)
        kept = replace(entry, quote=read) if entry.start is not None and read is not None else entry
        base = replace(base, read=read)
        if doc_id not in self.corpus:
            return kept, replace(base, outcome="vanished", reason="its document is gone")
        text = self.corpus[doc_id].text
        if read is None:
            return entry, replace(base, outcome="unverifiable", reason="a bare span in a document that changed or is not "
                                  "recorded; pass --old-corpus, the corpus it was marked on")
        if entry.start is not None and text[entry.start:entry.end] == read:
            return kept, replace(base, new_start=entry.start, new_end=entry.end, reads_now=read)
        found = _count(text, read) if entry.start is None else 0
        if found >= (entry.occurrence or 1) and (entry.occurrence is not None or found == 1):
            return entry, base  # a quote the loader finds as it always did
        placement = self.locator.locate(read, doc_id=doc_id)
        if not placement.located:
            now = text[entry.start:entry.end] if entry.start is not None and entry.end <= len(text) else None
            return kept, replace(base, outcome="changed", reads_now=now, reason=placement.reason)
        start, end = placement.start, placement.end
        if placement.how == "exact":
            lead = len(read) - len(read.lstrip())
            if text[start - lead:start - lead + len(read)] == read:
                start, end = start - lead, start - lead + len(read)
        now = text[start:end]
        outcome = "moved" if now == read else "fuzzy"
        similarity = None if outcome == "moved" else placement.similarity
        return (EvidenceRecord(doc_id=doc_id, start=start, end=end, quote=now, grade=entry.grade),
                replace(base, outcome=outcome, new_start=start, new_end=end, reads_now=now, similarity=similarity))


def _count(text: str, quote: str) -> int:
    """Occurrences of ``quote`` in ``text``, overlapping ones included (as the loader counts them)."""
    count, at = 0, text.find(quote)
    while at >= 0:
        count, at = count + 1, text.find(quote, at + 1)
    return count
