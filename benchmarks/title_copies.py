"""Title copies and end repeats in a run's stored answers and judged claims, by rules of this script's own.

For each query of ``ragexp_results.json`` (``answer``, ``judge_context``: the context the generator saw,
with its label lines; ``claims``: what the judge judged) it counts:

- **title copies left**: answer lines that are nothing but a section title of the context, however
  listed. A title is a part of a label line (``[2] Proration > Downgrades`` gives ``Proration`` and
  ``Downgrades``) or a Markdown heading line inside a passage; a line and a title are compared as
  lower-case words (every run of non-word characters, list numbers and ``#``/``*``/``[2]`` marks
  included, read as a space), a line of several titles joined by ``>`` counting too;
- **end repeats**: answers whose last sentence (split at ``.``/``!``/``?`` + space and at line
  breaks, compared as lower-case words) equals an earlier sentence of the same answer;
- **title claims**: judged claims that are nothing but a title, by the same comparison.

The rules are deliberately not ``ragexp.data.context``'s (no misspelling tolerance): a count here does
not depend on the code it checks. Run: ``python -m benchmarks.title_copies RESULTS.json [...]``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

_LABEL = re.compile(r"^\[\d{1,3}\]\s*(.*)$")
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_LIST_NUMBER = re.compile(r"^\s*(?:\d{1,3}[.)]|\[\d{1,3}\])?\s*")


def words(text: str) -> str:
    return " ".join(re.findall(r"[^\W_]+", _LIST_NUMBER.sub("", text).casefold()))


def titles(context: str) -> set[str]:
    found = set()
    for line in context.splitlines():
        label, heading = _LABEL.match(line), _HEADING.match(line)
        if label:
            found.update(words(part) for part in re.split(r"\s+>\s+", label.group(1)))
        elif heading:
            found.add(words(heading.group(1)))
    return {title for title in found if title}


def is_title(text: str, known: set[str]) -> bool:
    parts = [words(part) for part in re.split(r"\s+>\s+", text.strip())]
    return bool(parts) and all(part and part in known for part in parts)


def end_repeat(answer: str) -> bool:
    sentences = [words(s) for s in _SENTENCE.split(answer.strip())]
    sentences = [s for s in sentences if s]
    return len(sentences) > 1 and sentences[-1] in sentences[:-1]


def counts(path: Path) -> dict:
    rows = json.loads(path.read_text(encoding="utf-8"))["per_query"]
    out = {"answers": 0, "answers with a title copy": 0, "title copy lines": 0, "end repeats": 0, "claims": 0,
           "title claims": 0, "answers the run stripped lines from": 0}
    for row in rows:
        if "answer" not in row:
            continue
        known = titles(row.get("judge_context") or "")
        lines = [line for line in row["answer"].splitlines() if line.strip()]
        copied = sum(is_title(line, known) for line in lines)
        claims = [c["claim"] for c in row.get("claims") or []]
        out["answers"] += 1
        out["answers with a title copy"] += copied > 0
        out["title copy lines"] += copied
        out["end repeats"] += end_repeat(row["answer"])
        out["claims"] += len(claims)
        out["title claims"] += sum(is_title(claim, known) for claim in claims)
        out["answers the run stripped lines from"] += (row.get("label_lines_removed") or 0) > 0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="ragexp_results.json of a run with a generator")
    for path in parser.parse_args().results:
        print(path, json.dumps(counts(path)))


if __name__ == "__main__":
    main()
