"""Linting an eval set against the live corpus (``ragexp evalset lint``).

Errors (exit 1) — the eval set would measure the wrong thing:
    every content problem of :func:`ragexp.data.loaders.evalset.read_evalset`, all at once: gold that
    no longer resolves in the live corpus (unknown document, quote gone or ambiguous, span out of
    range, chunk index out of range — the method article's stale-export pitfall; stale gold: a span
    that no longer reads what it read, a recorded document changed under a bare span or gone,
    docs/living-evalset.md), duplicate item
    ids, empty queries, evidence contradicting ``answerable``; plus evidence spans that hold only
    whitespace, items whose gold lies only in documents with neither text nor title, and
    unanswerable items with ``key_facts`` (facts an answer must contain, for a question the corpus
    does not answer: key-fact recall would score a correct refusal as wrong; the ``gold_answer`` of
    an unanswerable item is the reply expected instead, such as "The docs do not say ...").
Warnings — the eval set is usable but weaker than it should be:
    gold spans that moved within their documents (a run re-anchors them; ``ragexp evalset reanchor``
    writes them), bare spans whose text cannot be verified (no quote, no document fingerprint),
    documents with neither text nor title (no run indexes them; their count is reported),
    duplicate or near-duplicate queries (equal after Unicode NFKC, case folding and collapsing
    punctuation and spacing), answerable items without ``gold_answer``/``answers``/``key_facts``
    (answer correctness cannot be scored), and each of the method article's failure-prone
    categories (:data:`FAILURE_PRONE_CATEGORIES`) that is missing or below
    :data:`MIN_CATEGORY_SHARE` of the items (tags compared ignoring case and punctuation, so
    ``multi_chunk`` counts as ``multi-chunk``; unanswerable items count as ``unanswerable``).
Corpus files (a folder with HTML, PDF or DOCX documents, read as a run reads it, conversions looked
up in the default stage cache and never written): every file skipped (encrypted, damaged, a
scanned PDF) or converted to empty text is a warning, an error with ``strict``; notes on a file
(a guessed encoding, pages without text), files of unsupported suffixes and a converter that
changed since the folder was last read are warnings; how many quotes resolved only by their
visible text is a note.
Note — how small a change this eval set can detect:
    over ``n`` answerable items the standard error of a proportion metric (hit rate, recall@k) near
    ``p = 0.8`` is ``SE = sqrt(p(1-p)/n)``, and a paired difference smaller than about ``2 SE`` is
    within noise (:class:`NoiseFloor`).

Unusable input (missing or empty corpus, unreadable eval set) raises
:class:`~ragexp.errors.RagexpInputError` (exit 2).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field
from os import PathLike
from pathlib import Path

from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import EvalSetReading, gold_check_warnings, read_evalset
from ragexp.datamodel import Corpus, EvalItem
from ragexp.errors import RagexpInputError
from ragexp.runtime.stage_cache import StageCache

FAILURE_PRONE_CATEGORIES = ("paraphrase", "synonym", "multi-chunk", "boundary", "unanswerable")
MIN_CATEGORY_SHARE = 0.05
PLANNING_HIT_RATE = 0.8
ARTICLE_TOLERANCE = 0.02
"""The method article's fixed two-point recall tolerance, for comparison in the noise note."""

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class LintFinding:
    severity: str
    check: str
    message: str
    file: str | None = None
    line: int | None = None
    field: str | None = None
    item_id: str | None = None

    def render(self) -> str:
        location = RagexpInputError(self.message, file=self.file, line=self.line, field=self.field).render()
        return f"{self.severity}[{self.check}] {location}"


@dataclass(frozen=True)
class NoiseFloor:
    """Sampling noise of a proportion metric over ``n`` queries at rate ``p``.

    ``standard_error = sqrt(p(1-p)/n)``; ``minimum_detectable_difference = 2 * standard_error``;
    ``n_for_article_tolerance`` = the smallest ``n`` whose ``2 SE`` is within the article's 2 points.
    """

    n: int
    p: float
    standard_error: float
    minimum_detectable_difference: float
    n_for_article_tolerance: int

    @classmethod
    def for_size(cls, n: int, p: float = PLANNING_HIT_RATE) -> NoiseFloor:
        variance = p * (1 - p)
        standard_error = math.sqrt(variance / n)
        return cls(n, p, standard_error, 2 * standard_error, math.ceil(4 * variance / ARTICLE_TOLERANCE**2))

    def sentence(self) -> str:
        return (
            f"with n={self.n} answerable items the standard error of a hit rate near {self.p:.0%} is "
            f"{100 * self.standard_error:.1f} points (sqrt(p(1-p)/n)), so a hit-rate change smaller than "
            f"{100 * self.minimum_detectable_difference:.1f} points (~2 standard errors) is within noise; size the "
            f"regression-gate tolerance to that (a fixed {100 * ARTICLE_TOLERANCE:.0f}-point tolerance needs "
            f"n >= {self.n_for_article_tolerance})"
        )


@dataclass
class LintReport:
    evalset: str
    corpus: str
    n_documents: int
    n_items: int
    n_answerable: int
    findings: list[LintFinding] = field(default_factory=list)
    tag_counts: dict[str, int] = field(default_factory=dict)
    noise_floor: NoiseFloor | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[LintFinding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[LintFinding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def exit_code(self) -> int:
        """0 when clean (warnings allowed), 1 when there is any error."""
        return 1 if self.errors else 0

    def to_dict(self) -> dict:
        return {
            "evalset": self.evalset,
            "corpus": self.corpus,
            "n_documents": self.n_documents,
            "n_items": self.n_items,
            "n_answerable": self.n_answerable,
            "errors": [asdict(f) for f in self.errors],
            "warnings": [asdict(f) for f in self.warnings],
            "tag_counts": self.tag_counts,
            "noise_floor": None if self.noise_floor is None else asdict(self.noise_floor),
            "notes": self.notes,
            "exit_code": self.exit_code,
        }

    def render_text(self) -> str:
        n_unanswerable = self.n_items - self.n_answerable
        lines = [
            f"{self.evalset}: {self.n_items} items ({self.n_answerable} answerable, {n_unanswerable} unanswerable) "
            f"against corpus {self.corpus} ({self.n_documents} documents)"
        ]
        lines += [finding.render() for finding in self.findings]
        tags = ", ".join(f"{tag} {count} ({count / self.n_items:.1%})" for tag, count in self.tag_counts.items())
        lines.append(f"tags: {tags or 'none'}")
        lines += [f"note: {note}" for note in self.notes]
        if self.noise_floor is not None:
            lines.append(f"note: {self.noise_floor.sentence()}")
        lines.append(f"{len(self.errors)} error(s), {len(self.warnings)} warning(s)")
        return "\n".join(lines)


def lint_evalset(
    evalset_path: str | PathLike[str], corpus_path: str | PathLike[str], *, html_remove_boilerplate: bool = True,
    strict: bool = False,
) -> LintReport:
    """Lint the eval set at ``evalset_path`` against the corpus at ``corpus_path`` (see module doc);
    ``html_remove_boilerplate`` as the run's ``dataset.html_remove_boilerplate``, ``strict`` makes a
    skipped or empty corpus file an error."""
    corpus = load_corpus(corpus_path, html_remove_boilerplate=html_remove_boilerplate, cache=StageCache())
    reading = read_evalset(evalset_path, corpus)
    items = reading.evalset.items
    findings = _corpus_file_findings(corpus, strict)
    findings += _problem_findings(reading)
    findings += [LintFinding(WARNING, "gold-check", line, reading.evalset.source) for line in gold_check_warnings(reading)]
    findings += _whitespace_spans(reading, corpus)
    findings += _unindexable_documents(reading, corpus)
    findings += _duplicate_queries(reading)
    findings += _missing_gold_answers(reading)
    findings += _answers_of_unanswerable(reading)
    findings += _category_coverage(reading)
    findings.sort(key=lambda f: (f.line is None, f.line or 0))
    n_answerable = sum(item.answerable for item in items)
    return LintReport(
        evalset=str(evalset_path),
        corpus=str(corpus_path),
        n_documents=len(corpus),
        n_items=len(items),
        n_answerable=n_answerable,
        findings=findings,
        tag_counts=dict(Counter(tag for item in items for tag in item.tags).most_common()),
        noise_floor=NoiseFloor.for_size(n_answerable) if n_answerable else None,
        notes=[f"{reading.visible_quotes} quotes in converted documents (HTML, PDF, DOCX) were found by their visible "
               "text, markup, bullets and whitespace ignored (docs/evalset-format.md)"] if reading.visible_quotes else [],
    )


def _corpus_file_findings(corpus: Corpus, strict: bool) -> list[LintFinding]:
    """Files of a corpus folder skipped, converted to empty text, noted or not read (see the module doc)."""
    report = corpus.conversion
    if report is None:
        return []
    root = Path(corpus.source)
    findings = [LintFinding(WARNING, "converter-changed", f"corpus changed because {change}", str(root))
                for change in report.changed]
    findings += [LintFinding(ERROR if strict else WARNING, "unusable-file", f"{problem}; no run can use this file",
                             str(root / file)) for file, problem in report.problems]
    findings += [LintFinding(WARNING, "conversion-note", note, str(root / file)) for file, note in report.notes]
    if report.unsupported:
        shown = ", ".join(f"{suffix or '(no suffix)'} x{n}" for suffix, n in sorted(report.unsupported.items()))
        findings.append(LintFinding(WARNING, "unsupported-files", f"{sum(report.unsupported.values())} files with "
                                    f"suffixes ragexp does not read are ignored ({shown})", str(root)))
    return findings


def normalise_query(query: str) -> str:
    """Unicode NFKC, case-folded, every run of non-word characters collapsed to one space."""
    return re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", query).casefold()).strip()


def category_key(tag: str) -> str:
    """A tag compared ignoring case and punctuation: ``"Multi_Chunk"`` -> ``"multichunk"``."""
    return re.sub(r"[\W_]+", "", tag.casefold())


def _lines_and_items(reading: EvalSetReading) -> list[tuple[int, EvalItem]]:
    return list(zip(reading.item_lines, reading.evalset.items, strict=True))


def _finding(
    severity: str, check: str, message: str, reading: EvalSetReading, line: int, item: EvalItem, field: str
) -> LintFinding:
    return LintFinding(severity, check, message, reading.evalset.source, line, field, item.id)


def _problem_findings(reading: EvalSetReading) -> list[LintFinding]:
    id_at_line = dict(zip(reading.item_lines, (item.id for item in reading.evalset.items), strict=True))
    return [
        LintFinding(
            ERROR, p.kind, p.error.message, p.error.file, p.error.line, p.error.field, id_at_line.get(p.error.line)
        )
        for p in reading.problems
    ]


def _whitespace_spans(reading: EvalSetReading, corpus: Corpus) -> list[LintFinding]:
    findings = []
    for line, item in _lines_and_items(reading):
        for evidence in item.evidence:
            if evidence.is_span and not corpus[evidence.doc_id].text[evidence.start : evidence.end].strip():
                message = (
                    f"evidence span [{evidence.start}, {evidence.end}) of document {evidence.doc_id!r} holds only "
                    "whitespace; point it at the text that answers the query"
                )
                findings.append(_finding(ERROR, "whitespace-span", message, reading, line, item, "evidence"))
    return findings


def _unindexable_documents(reading: EvalSetReading, corpus: Corpus) -> list[LintFinding]:
    """Documents with neither text nor title get no chunk in any run: a warning with their count,
    and an error for every item whose gold lies only in such documents (it has no gold to find)."""
    empty = {doc_id for doc_id, doc in corpus.items() if not doc.text.strip() and not doc.title.strip()}
    if not empty:
        return []
    shown = ", ".join(repr(doc_id) for doc_id in sorted(empty)[:5]) + (" ..." if len(empty) > 5 else "")
    findings = [LintFinding(
        WARNING, "unindexable-document",
        f"{len(empty)} of {len(corpus)} documents have neither text nor title and are not indexed by any run "
        f"({shown}); give them text or a title, or remove them",
        str(corpus.source) or None, field="text",
    )]
    for line, item in _lines_and_items(reading):
        docs = {evidence.doc_id for evidence in item.evidence}
        if docs and docs <= empty:
            message = (
                f"all gold evidence lies in documents without text or title ({', '.join(sorted(docs))}): nothing of "
                "them is indexed, so the item has no gold a run can find; point the evidence at indexed text"
            )
            findings.append(_finding(ERROR, "unindexable-gold", message, reading, line, item, "evidence"))
    return findings


def _duplicate_queries(reading: EvalSetReading) -> list[LintFinding]:
    findings = []
    first: dict[str, tuple[int, EvalItem]] = {}
    for line, item in _lines_and_items(reading):
        key = normalise_query(item.query)
        if not key:
            continue
        if key not in first:
            first[key] = (line, item)
            continue
        first_line, first_item = first[key]
        if item.query.strip() == first_item.query.strip():
            check, how = "duplicate-query", "the same query as"
        else:
            check, how = "near-duplicate-query", "the same query (up to case, punctuation and spacing) as"
        message = (
            f"{how} item {first_item.id!r} on line {first_line}; a repeated query counts twice in every "
            "average — remove it or rephrase it as a distinct question"
        )
        findings.append(_finding(WARNING, check, message, reading, line, item, "query"))
    return findings


def _missing_gold_answers(reading: EvalSetReading) -> list[LintFinding]:
    message = (
        'no "gold_answer", "answers" or "key_facts": answer correctness cannot be scored for this item; '
        "add the reference answer or the facts it must contain"
    )
    return [
        _finding(WARNING, "no-gold-answer", message, reading, line, item, "gold_answer")
        for line, item in _lines_and_items(reading)
        if item.answerable and not item.reference_answers and not item.key_facts
    ]


def _answers_of_unanswerable(reading: EvalSetReading) -> list[LintFinding]:
    message = ('"answerable": false, yet the item has key_facts, the facts an answer must contain: a correct refusal '
               'would score key-fact recall 0; remove them, or remove "answerable": false if the corpus does answer it')
    return [_finding(ERROR, "facts-of-unanswerable", message, reading, line, item, "key_facts")
            for line, item in _lines_and_items(reading) if not item.answerable and item.key_facts]


def _category_coverage(reading: EvalSetReading) -> list[LintFinding]:
    items = reading.evalset.items
    counts = Counter()
    for item in items:
        keys = {category_key(tag) for tag in item.tags} | (set() if item.answerable else {category_key("unanswerable")})
        counts.update(keys)
    needed = max(1, math.ceil(MIN_CATEGORY_SHARE * len(items)))
    findings = []
    for category in FAILURE_PRONE_CATEGORIES:
        count = counts[category_key(category)]
        if count >= needed:
            continue
        have = "no item is" if count == 0 else f"only {count} of {len(items)} items ({count / len(items):.1%}) are"
        message = (
            f"{have} tagged {category!r}; the method article's failure-prone categories expose chunking and "
            f"retrieval weaknesses that easy questions miss — aim for at least {MIN_CATEGORY_SHARE:.0%} "
            f"({needed} item{'s' if needed != 1 else ''})"
        )
        findings.append(LintFinding(WARNING, "category-coverage", message, reading.evalset.source, field="tags"))
    return findings
