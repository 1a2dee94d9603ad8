"""A run that places too few of its system's passages is not a result: it is refused, with why.

An unplaced passage counts as not relevant, so a run that places little reports a system far
worse than it is. Below ``system.locate.min_located_rate`` (default 0.95) of all passages placed,
:func:`check_located_floor` refuses the run before any metric is logged (exit 2, one line) and
names the most common cause, with an example and the fix:

- ``unknown documents``: most unplaced passages, and most passages that name a document, name one
  the corpus does not have (the system's own ids): ``system.response.doc_id=null`` places by text alone;
- ``a header``: the passages' text places once a first line or block is cut, so the system wraps
  its text in a form not recognised (:mod:`ragexp.systems.passage_header`): describe it with
  ``system.response.template``;
- ``a stale index``: the unplaced passages name documents, most of which the corpus has, that are
  gone or no longer hold their text (edited or removed since the system's index was built): every
  document affected is named, including those placed only fuzzily (an edit the placement tolerated);
- otherwise the unplaced passages' most common reason, with an example.

:func:`affected_documents` lists, for the run's warning too, every document with an unplaced
passage and every document placed fuzzily.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ragexp.errors import RagexpInputError
from ragexp.systems.locate import Locator, Placement
from ragexp.systems.response import Passage

NOT_IN_CORPUS = "is not in the corpus"
#: Unplaced passages re-tried with a first line or block cut, to tell a header from a stale index.
HEADER_PROBES = 20
#: Documents named on the terminal, at most (the rest counted; all in system/placements.jsonl).
MAX_NAMED_DOCS = 200


def _quoted(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat[:limit] + ("..." if len(flat) > limit else ""))


def affected_documents(pairs: Sequence[tuple[Passage, Placement]]) -> tuple[list[str], list[str]]:
    """``(documents with an unplaced passage, documents placed only fuzzily)``, each most passages first;
    a document the system named is given as it named it."""
    unplaced = Counter(p.doc_id or passage.doc_id or passage.path for passage, p in pairs
                       if not p.located and p.how != "ambiguous")
    fuzzy = Counter(p.doc_id for _, p in pairs if p.how == "fuzzy")
    return [d for d, _ in unplaced.most_common() if d], [d for d, _ in fuzzy.most_common()]


def named(docs: Sequence[str]) -> str:
    shown = ", ".join(docs[:MAX_NAMED_DOCS])
    return shown + (f" and {len(docs) - MAX_NAMED_DOCS} more" if len(docs) > MAX_NAMED_DOCS else "")


def _header_cut(text: str) -> str | None:
    """The passage without its first block (up to a blank line) or, failing that, its first line."""
    stripped = text.strip()
    for separator in ("\n\n", "\n"):
        at = stripped.find(separator)
        if at > 0 and stripped[at:].strip():
            return stripped[at:]
    return None


def check_located_floor(pairs: Sequence[tuple[Passage, Placement]], locator: Locator, floor: float) -> None:
    """Refuse the run (module docstring) when fewer than ``floor`` of ``pairs`` are placed."""
    total = len(pairs)
    located = sum(p.located for _, p in pairs)
    if not total or located / total >= floor:
        return
    unplaced = [(passage, p) for passage, p in pairs if not p.located]
    head = (f"only {located} of {total} passages the system returned ({located / total:.1%}) were placed in the corpus, "
            f"below system.locate.min_located_rate={floor:g}, so no result is logged (the responses are cached)")
    foreign = [(passage, p) for passage, p in unplaced if NOT_IN_CORPUS in p.reason]
    named_pairs = [p for passage, p in pairs if passage.doc_id or passage.path]
    if len(foreign) * 2 >= len(unplaced) and len(foreign) * 2 > len(named_pairs):
        names = Counter(p.doc_id for _, p in foreign)
        raise RagexpInputError(
            f"{head}: {len(foreign)} name a document the corpus does not have ({named([d for d, _ in names.most_common()])}); "
            "if these are the system's own ids, place by text: system.response.doc_id=null system.response.path=null",
            field="system.locate.min_located_rate")
    probes = [(passage, p) for passage, p in unplaced if p.how == "unlocated"][:HEADER_PROBES]
    cut_placed = []
    for passage, _ in probes:
        cut = _header_cut(passage.text)
        if cut is not None and locator.locate(cut, passage.doc_id, passage.path).located:
            cut_placed.append(passage)
    if probes and len(cut_placed) * 2 > len(probes):
        example = cut_placed[0].text.strip()
        first = example[:len(example) - len(_header_cut(example).lstrip())].strip()
        raise RagexpInputError(
            f"{head}: the passages start with text their document does not hold (e.g. {_quoted(first)}), a header "
            "around the text; describe it, e.g. system.response.template='Title: {title}\\n\\n{content}' "
            "(docs/systems.md#framework-output)", field="system.locate.min_located_rate")
    stale = [(passage, p) for passage, p in unplaced if p.how == "unlocated" and (passage.doc_id or passage.path)]
    if len(stale) * 2 >= len(unplaced):
        gone, fuzzy = affected_documents(pairs)
        edited = [d for d in fuzzy if d not in gone]
        passage, p = stale[0]
        raise RagexpInputError(
            f"{head}: a stale index? {len(stale)} passages name documents that are gone or no longer hold their text, "
            f"{len(gone)} documents: {named(gone)}"
            + (f"; placed only fuzzily (edited?) in {len(edited)} more: {named(edited)}" if edited else "")
            + f"; e.g. {_quoted(passage.text)} ({p.reason}); re-index the system, or lower system.locate.min_located_rate to score it as it is",
            field="system.locate.min_located_rate")
    reasons = Counter(p.reason.split(" (")[0] for _, p in unplaced)
    reason, count = reasons.most_common(1)[0]
    passage, p = next((passage, p) for passage, p in unplaced if p.reason.split(" (")[0] == reason)
    raise RagexpInputError(
        f"{head}: most often ({count} of {len(unplaced)}) {reason}, e.g. {_quoted(passage.text)} ({p.reason}); "
        "is the system answering from this corpus (dataset.corpus)?", field="system.locate.min_located_rate")
