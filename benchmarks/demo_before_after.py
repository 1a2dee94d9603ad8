"""The generation half of two demo runs side by side: the table of docs/generation.md, "Repetition".

Reads two ``ragexp_results.json`` files (the run before the repetition stop and the judge's label
change, and the run after) and prints one markdown row per measure. The repetition counts are
computed here from the answers, independently of ``ragexp.llm.answer_end``: an answer is split
into sentences at ``.``, ``!`` or ``?`` followed by white space and at line breaks; a sentence is
compared lower-cased, without a leading list marker (``4.``, ``-``, ``*``), with white space
collapsed and trailing punctuation dropped. Label copies and degeneration (issue #41) are counted
here too, by rules of this script's own: an answer *copies a label line* when one of its lines
(a list marker dropped) starts with a bracketed passage number (``[3] ...``) or is a heading path
(two ``>`` between words, no sentence end); it *degenerates into markers* when it holds three list
or citation markers in a row (``1. 1. 1.``, ``- - -``, ``[3] [4] [5]``). ``label_lines_removed`` is the run's own record of the
lines it took out (after #41 only). The other rows are the runs' own aggregates.

Run: ``python -m benchmarks.demo_before_after BEFORE.json AFTER.json``
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")
_LABEL_LINE = re.compile(r"^\[\d+\]|^[^.!?]*\S\s+>\s+[^.!?]*\S\s+>\s+[^.!?]*$")
_MARKER_RUN = re.compile(r"(?:^|\s)(?:\d+[.)]|[-*•]|\[\d+\])(?:\s+(?:\d+[.)]|[-*•]|\[\d+\])){2}(?=\s|$)")


def copies_label(answer: str) -> bool:
    return any(_LABEL_LINE.search(_MARKER.sub("", line).strip()) for line in answer.splitlines())


def degenerates(answer: str) -> bool:
    return _MARKER_RUN.search(answer) is not None


def sentence_counts(answer: str) -> Counter:
    """How often each normalised sentence occurs in ``answer``."""
    sentences = (_MARKER.sub("", part) for part in _SPLIT.split(answer))
    normalised = (" ".join(s.lower().split()).rstrip(".!?;:, ") for s in sentences)
    return Counter(s for s in normalised if s)


def most_repeated(answer: str) -> int:
    return max(sentence_counts(answer).values(), default=0)


def measures(path: Path) -> dict[str, str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    agg, rows = data["aggregates"], data["per_query"]
    answers = [row.get("answer") or "" for row in rows if not row.get("generation_error")]
    classes = Counter(row.get("failure_class") for row in rows)
    answerable = sum(1 for row in rows if row.get("answerable", True))

    def number(key: str, digits: int = 3) -> str:
        return "—" if key not in agg else f"{agg[key]:.{digits}f}"

    claims = Counter()
    for row in rows:
        for claim in row.get("claims") or []:
            claims["all"] += 1
            text = claim.get("claim", "")
            claims["label"] += copies_label(text)
            claims["marker"] += bool(re.fullmatch(r"\s*(?:\d+[.)]\s*)+", text))
    return {
        "answers copying a label line (as stored)": str(sum(copies_label(a) for a in answers)),
        "answers the run took label lines out of (`label_lines_removed`)": (
            str(sum(bool(row.get("label_lines_removed")) for row in rows)) if any("label_lines_removed" in row for row in rows)
            else "—"),
        "answers degenerating into list markers": str(sum(degenerates(a) for a in answers)),
        "answers ended where they degenerated (`gen.degenerate_stopped`)": number("gen.degenerate_stopped", 0),
        "claims judged: all / copies of a label / bare list numbers": f"{claims['all']} / {claims['label']} / {claims['marker']}",
        "answers with a sentence 3 or more times": str(sum(most_repeated(a) >= 3 for a in answers)),
        "answers with any sentence twice": str(sum(most_repeated(a) >= 2 for a in answers)),
        "answers at the 96-token cap (`gen.length_capped`)": number("gen.length_capped", 0),
        "answers ended at a repetition (`gen.repetition_stopped`)": number("gen.repetition_stopped", 0),
        "generated tokens": number("gen.completion_tokens", 0),
        "key-fact recall / F1 / exact match": f"{number('key_fact_recall')} / {number('f1')} / {number('exact_match')}",
        "faithfulness (local judge) / claims judged": (
            f"{number('faithfulness')} / {sum(row.get('n_claims') or 0 for row in rows)}"
        ),
        "answer relevance": number("answer_relevance"),
        f"generation failures (of {answerable} answerable)": str(classes.get("generation_failure", 0)),
        "failure classes": ", ".join(f"{name} {count}" for name, count in sorted(classes.items(), key=str)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = measures(args.before), measures(args.after)
    print("| 148 demo questions | before | after |\n|---|---|---|")
    for name in after:
        print(f"| {name} | {before[name]} | {after[name]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
