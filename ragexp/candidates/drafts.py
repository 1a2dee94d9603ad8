"""Draft questions from the corpus, written by a language model, for a person to accept or reject.

:func:`draft_questions` samples sections of the corpus (the chunks of :data:`SECTION_CHUNKING`) and
asks the model for one question per sampled section in each failure-prone category of the method
article (:data:`CATEGORIES`):

- ``paraphrase``: one section; the question words the fact differently from the text;
- ``synonym``: one section; the question uses none of the text's own key terms;
- ``boundary``: the end of one section and the start of the next; the answer is at the seam;
- ``multi-chunk``: two sections of one document; the answer needs a fact from each.

The model answers in a fixed plain-text form (``Question:``, ``Quote:`` one per line, ``Answer:``),
shown once by an example, which small local models follow more reliably than JSON. Every quote is the draft's evidence and
must occur exactly once in its document (overlapping occurrences count, as in the eval-set loader);
a draft whose reply cannot be parsed, whose quote is missing or ambiguous, or whose model call
failed is dropped and counted by reason (:class:`DraftReport`). Kept drafts carry ``source:
"draft"``: they go to a queue file, never into an eval set, until a person accepts them.
"""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ragexp.candidates.jsonl_file import write_jsonl
from ragexp.errors import RagexpInputError
from ragexp.runtime import progress

CATEGORIES = ("paraphrase", "synonym", "boundary", "multi-chunk")
SECTION_CHUNKING = {"name": "markdown", "max_size": 1024}
SEAM_CHARS = 400  # characters each side of a section boundary shown for a boundary question
BATCH = 8  # prompts per call of complete_all (a local model decodes them together), one progress step
MIN_SECTION_CHARS = 80  # shorter chunks (a heading, a stray line) are not sampled for a single-section question
PROMPT_VERSION = "draft-v1"

_INSTRUCTIONS = {
    "paraphrase": "Write one question a user might ask that this text answers. Word the question differently "
                  "from the text: do not copy its phrases.",
    "synonym": "Write one question a user might ask that this text answers, using everyday words or synonyms "
               "instead of the text's own key terms (the question must not repeat the text's technical words).",
    "boundary": "The text below is the end of one section followed by the start of the next. Write one question "
                "whose answer needs the sentences right around the place where the two sections meet.",
    "multi-chunk": "Below are two passages of one document. Write one question whose answer needs a fact from "
                   "passage A and a fact from passage B.",
}
_FORM = ("Reply in exactly this form, nothing else:\n"
         "Question: <the question>\n"
         "Quote: <a sentence copied exactly, character for character, from the text, that holds the answer>\n"
         "{more_quotes}"
         "Answer: <a short answer>\n\n"
         "Example of a reply for a text about opening hours:\n"
         "Question: Until when can I visit on a Saturday?\n"
         "Quote: On weekends the office is open from 9 am to 1 pm.\n"
         "{more_example}"
         "Answer: Until 1 pm.")


@dataclass(frozen=True)
class Draft:
    query: str
    category: str
    doc_id: str
    evidence: list[dict]  # {"doc_id", "start", "end", "quote"}
    gold_answer: str
    model: str

    def to_dict(self, added: str) -> dict:
        return {"query": self.query, "source": "draft", "tags": [self.category], "evidence": self.evidence,
                "gold_answer": self.gold_answer, "model": self.model, "prompt_version": PROMPT_VERSION, "added": added}


@dataclass
class DraftReport:
    model: str = ""
    asked: Counter = field(default_factory=Counter)  # category -> prompts sent
    kept: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)  # reason -> drafts dropped

    def lines_of_text(self) -> list[str]:
        asked = sum(self.asked.values())
        lines = [f"asked {self.model} for {asked} drafts: " + ", ".join(f"{n} {c}" for c, n in self.asked.items()),
                 f"kept {sum(self.kept.values())}: " + (", ".join(f"{n} {c}" for c, n in self.kept.items()) or "none")]
        if self.dropped:
            lines.append(f"dropped {sum(self.dropped.values())}: " + ", ".join(f"{n} {reason}" for reason, n in self.dropped.most_common()))
        return lines


def _prompt(category: str, passages: list[str]) -> str:
    if category == "multi-chunk":
        text = f"Passage A:\n{passages[0]}\n\nPassage B:\n{passages[1]}"
        more = "Quote: <a second sentence copied exactly from the other passage>\n"
        example = "Quote: Public holidays follow the weekend hours.\n"
    else:
        text = f"Text:\n{passages[0]}"
        more = example = ""
    return f"{_INSTRUCTIONS[category]}\n\n{text}\n\n{_FORM.format(more_quotes=more, more_example=example)}"


_LINE = re.compile(r"^\s*(question|quote|answer)\s*:\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_reply(text: str) -> tuple[str, list[str], str] | None:
    """``(question, quotes, answer)`` from a reply in the asked form, else ``None``."""
    question, quotes, answer = None, [], None
    for label, value in _LINE.findall(text):
        label = label.lower()
        value = value.strip().strip('"“”')
        if label == "question" and question is None and value:
            question = value
        elif label == "quote" and value:
            quotes.append(value)
        elif label == "answer" and answer is None and value:
            answer = value
    if not question or not quotes or not answer:
        return None
    return question, quotes, answer


def occurrences(text: str, quote: str) -> list[int]:
    """Start offsets of ``quote`` in ``text``, overlapping occurrences included."""
    starts, start = [], text.find(quote)
    while start >= 0:
        starts.append(start)
        start = text.find(quote, start + 1)
    return starts


@dataclass(frozen=True)
class _Task:
    category: str
    doc_id: str
    passages: list[str]


def _tasks(chunks_by_doc: dict[str, list], texts: dict[str, str], per_category: int, rng: random.Random) -> list[_Task]:
    """``per_category`` sampled sections (or pairs of sections) for every category."""
    singles = [chunk for chunks in chunks_by_doc.values() for chunk in chunks if len(chunk.text.strip()) >= MIN_SECTION_CHARS]
    seams = [(a, b) for chunks in chunks_by_doc.values() for a, b in itertools.pairwise(chunks)]
    multi = [doc for doc, chunks in chunks_by_doc.items() if len(chunks) >= 2]
    tasks = []
    for category in ("paraphrase", "synonym"):
        for chunk in rng.sample(singles, min(per_category, len(singles))):
            tasks.append(_Task(category, chunk.doc_id, [chunk.text]))
    for a, b in rng.sample(seams, min(per_category, len(seams))):
        text = texts[a.doc_id]
        tasks.append(_Task("boundary", a.doc_id, [text[max(a.start, a.end - SEAM_CHARS) : min(b.end, b.start + SEAM_CHARS)]]))
    for doc in rng.sample(multi, min(per_category, len(multi))):
        chunks = chunks_by_doc[doc]
        first = rng.randrange(len(chunks))
        others = [i for i in range(len(chunks)) if abs(i - first) > 1] or [i for i in range(len(chunks)) if i != first]
        second = rng.choice(others)
        tasks.append(_Task("multi-chunk", doc, [chunks[min(first, second)].text, chunks[max(first, second)].text]))
    return tasks


def draft_questions(corpus, model, per_category: int, *, seed: int = 0, max_tokens: int = 200) -> tuple[list[dict], DraftReport]:
    """Ask ``model`` for drafts (see the module docstring); return the kept ones as queue lines and the counts."""
    from ragexp.chunking import make_chunker
    from ragexp.data.lint import normalise_query
    from ragexp.llm.base import LLMCallError, complete_all, refused_by_endpoint

    chunker = make_chunker(SECTION_CHUNKING)
    chunks_by_doc = {doc.id: chunker.chunk(doc) for doc in corpus.documents()}
    texts = {doc.id: doc.text for doc in corpus.documents()}
    tasks = _tasks(chunks_by_doc, texts, per_category, random.Random(seed))
    report = DraftReport(model=model.model_id)
    report.asked.update(task.category for task in tasks)
    prompts = [_prompt(task.category, task.passages) for task in tasks]
    replies = []
    for start in progress.bar(range(0, len(prompts), BATCH), desc="drafting", unit="batch", disable=len(prompts) <= BATCH):
        replies += complete_all(model, prompts[start : start + BATCH], max_tokens=max_tokens)
        refused = refused_by_endpoint(replies) if start == 0 else None
        if refused is not None:
            raise RagexpInputError(f"the model endpoint refused all {len(replies)} calls: {refused}", field="--model")
    added = datetime.now(UTC).isoformat(timespec="seconds")
    kept: list[dict] = []
    seen: set[str] = set()
    for task, reply in zip(tasks, replies):
        if isinstance(reply, LLMCallError):
            report.dropped[f"model call failed ({reply.kind})"] += 1
            continue
        parsed = parse_reply(reply.text)
        if parsed is None:
            report.dropped["reply not in the asked form"] += 1
            continue
        question, quotes, answer = parsed
        evidence, problem = [], None
        for quote in quotes[: 2 if task.category == "multi-chunk" else 1]:
            starts = occurrences(texts[task.doc_id], quote)
            if len(starts) != 1:
                problem = "quote not in the document" if not starts else "quote occurs more than once"
                break
            evidence.append({"doc_id": task.doc_id, "start": starts[0], "end": starts[0] + len(quote), "quote": quote})
        if problem is None and task.category == "multi-chunk" and len(evidence) < 2:
            problem = "multi-chunk draft with one quote"
        if problem is not None:
            report.dropped[problem] += 1
            continue
        key = normalise_query(question)
        if key in seen:
            report.dropped["same question twice"] += 1
            continue
        seen.add(key)
        report.kept[task.category] += 1
        kept.append(Draft(question, task.category, task.doc_id, evidence, answer, reply.model).to_dict(added))
    return kept, report


def read_queue(path: Path) -> list[dict]:
    """The queue's lines (none when the file does not exist yet); read before any model call, so a
    broken queue file fails at once (one line, exit 2) instead of after the drafting."""
    from ragexp.data.loaders.jsonl import iter_jsonl_objects

    if not path.parent.is_dir():
        raise RagexpInputError("the folder to write the queue into does not exist", file=path.parent, field="--out")
    if path.is_dir():
        raise RagexpInputError("is a folder; name the queue file to append to, e.g. drafts.jsonl", file=path, field="--out")
    return [obj for _, obj in iter_jsonl_objects(path)] if path.exists() else []


def append_to_queue(path: Path, queued: list[dict], drafts: list[dict]) -> int:
    """Write ``queued`` (the queue as read) plus those ``drafts`` whose question, compared as
    ``ragexp evalset lint`` compares queries, is not queued yet, whole or not at all; nothing is
    written when no draft is new. Returns how many drafts were appended."""
    from ragexp.data.lint import normalise_query

    keys = {normalise_query(str(obj.get("query", ""))) for obj in queued}
    new = []
    for draft in drafts:
        key = normalise_query(draft["query"])
        if key not in keys:
            keys.add(key)
            new.append(draft)
    if not new:
        return 0  # nothing to add: the queue stays as it was (or absent)
    write_jsonl(path, [*queued, *new])
    return len(new)
