"""Locating accuracy and cost: a system's passages, perturbed as real systems perturb them, placed
in a 100k-passage corpus by :class:`ragexp.systems.locate.Locator`, text only (no document id).

Corpus. The real documents of SciFact (5,183 abstracts) and SQuAD v1.1 dev (2,067 paragraphs,
``$RAGEXP_SHARED_DATA``), written as a team's Markdown/HTML pages are: a ``# title`` line, 8 % of
the words in ``**bold**`` or ``<b>bold</b>``, ``&`` as ``&amp;``. Then near-duplicate pages until the
corpus holds ``--passages`` fixed-512 passages (stride 448): each a real page with its sentences
shuffled and 15 % of its words replaced by words of the corpus, so most real sentences have close
copies elsewhere (the hard case for a fuzzy match: a wrong place that looks right). Seeded.

Passages. ``--sample`` fixed-512 windows (512 characters every 448, whitespace-trimmed, as ragexp's
``fixed`` chunker cuts) from random pages, each then perturbed:

* ``verbatim``: as cut (the control);
* ``whitespace``: every whitespace run collapsed to one space;
* ``html_stripped``: tags, ``**``, ``#`` removed and entities decoded (a system indexing rendered text);
* ``truncated``: cut at a word boundary after 40-80 % of its characters, ``...`` appended;
* ``title``: the page's title and a newline prepended;
* ``noise_2pct``: 2 % of the characters edited (substituted, deleted or a letter inserted);
* ``llamaindex_header``: LlamaIndex's ``MetadataMode.ALL`` header (``title``, ``url``, ``product``,
  ``file_name`` as ``key: value`` lines, a blank line) before the text;
* ``source_content``: ``Source: <page>\nContent: <text>``.

Placement time against passage length (``--lengths``): passages of 1k ... 200k characters made of
the corpus's own words in a random order (in no page: the worst case, every stage runs and BM25
finds windows to align), each placed text only; milliseconds per passage.

Truth: the window's span (for ``truncated``, the span of the kept prefix). A placement is WRONG when
it names another document or overlaps the true span by less than half of the shorter of the two;
``boundary`` is the median ``|start - true start| + |end - true end|`` of the right ones. The
locator's options are its defaults (``min_similarity`` 0.9, ``candidates`` 10, ``ambiguity_margin``
0.03), fixed before this benchmark was written; nothing here is tuned on its output.

Cost: the index build (BM25 over 1,000-character windows), and milliseconds per passage (mean,
p95), wall time on this machine (load printed).

    python -m benchmarks.bench_locate [--passages 100000] [--sample 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import random
import re
import statistics
import time
from collections import Counter

from benchmarks import shared_data_dir
from ragexp.datamodel import Document
from ragexp.systems.locate import Locator

WINDOW, STRIDE = 512, 448
PERTURBATIONS = ("verbatim", "whitespace", "html_stripped", "truncated", "title", "noise_2pct", "llamaindex_header",
                 "source_content")
LENGTHS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def real_pages() -> list[tuple[str, str]]:
    """``(title, text)`` of SciFact's abstracts and SQuAD dev's paragraphs."""
    data = shared_data_dir()
    pages = []
    with open(data / "scifact" / "corpus.jsonl", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            pages.append((record["title"].strip(), record["text"].strip()))
    squad = json.loads((data / "squad_v1.1_dev" / "dev-v1.1.reconstructed.json").read_text(encoding="utf-8"))
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            pages.append((article["title"].replace("_", " "), paragraph["context"].strip()))
    return pages


def marked_up(title: str, text: str, rng: random.Random) -> str:
    words = text.replace("&", "&amp;").split(" ")
    for i, word in enumerate(words):
        if word.isalpha() and rng.random() < 0.08:
            words[i] = f"**{word}**" if rng.random() < 0.5 else f"<b>{word}</b>"
    return f"# {title}\n\n" + " ".join(words) + "\n"


def near_duplicate(text: str, vocabulary: list[str], rng: random.Random) -> str:
    sentences = _SENTENCE.split(text)
    rng.shuffle(sentences)
    words = " ".join(sentences).split(" ")
    return " ".join(rng.choice(vocabulary) if rng.random() < 0.15 else w for w in words)


def build_corpus(target_passages: int, rng: random.Random) -> dict[str, Document]:
    pages = real_pages()
    vocabulary = sorted({w for _, text in pages[:2000] for w in text.split(" ") if w.isalpha()})
    corpus: dict[str, Document] = {}
    passages = 0

    def add(doc_id: str, title: str, text: str) -> None:
        nonlocal passages
        body = marked_up(title, text, rng)
        corpus[doc_id] = Document(doc_id, body, title)
        passages += max(1, -(-(len(body) - WINDOW) // STRIDE) + 1)

    for i, (title, text) in enumerate(pages):
        add(f"real/{i}", title, text)
    copy = 0
    while passages < target_passages:
        title, text = pages[rng.randrange(len(pages))]
        add(f"near/{copy}", title, near_duplicate(text, vocabulary, rng))
        copy += 1
    return corpus


def windows(text: str) -> list[tuple[int, int]]:
    out = []
    for start in range(0, max(1, len(text) - WINDOW + STRIDE), STRIDE):
        end = min(len(text), start + WINDOW)
        piece = text[start:end]
        s, e = start + len(piece) - len(piece.lstrip()), end - len(piece) + len(piece.rstrip())
        if e - s >= 40:
            out.append((s, e))
    return out


def perturb(kind: str, document: Document, start: int, end: int, rng: random.Random) -> tuple[str, int, int]:
    """The perturbed passage and its true span."""
    text = document.text[start:end]
    if kind == "whitespace":
        return " ".join(text.split()), start, end
    if kind == "html_stripped":
        return html.unescape(re.sub(r"<[^>]*>|\*\*|^#+ ", "", text, flags=re.M)), start, end
    if kind == "truncated":
        cut = text.rfind(" ", 0, int(len(text) * rng.uniform(0.4, 0.8)))
        cut = cut if cut > 20 else len(text) // 2
        kept = text[:cut].rstrip()
        return kept + "...", start, start + len(kept)
    if kind == "title":
        return f"{document.title}\n{text}", start, end
    if kind == "llamaindex_header":
        return (f"title: {document.title}\nurl: https://help.example.com/{document.id}.html\nproduct: Acme\n"
                f"file_name: {document.id.replace('/', '_')}.md\n\n{text}"), start, end
    if kind == "source_content":
        return f"Source: {document.id}\nContent: {text}", start, end
    if kind == "noise_2pct":
        out = []
        for char in text:
            if rng.random() < 0.02:
                edit = rng.randrange(3)
                if edit == 0:
                    out.append(rng.choice("abcdefghijklmnopqrstuvwxyz"))
                elif edit == 2:
                    out.extend([char, rng.choice("abcdefghijklmnopqrstuvwxyz")])
            else:
                out.append(char)
        return "".join(out), start, end
    return text, start, end


def time_lengths(locator: Locator, corpus: dict[str, Document], lengths: list[int], per_length: int,
                 rng: random.Random) -> None:
    """Placement time of passages in no page, by length (module docstring)."""
    words = [w for d in list(corpus.values())[:500] for w in d.text.split() if w.isalpha()]
    print(f"\n| characters | ms/passage mean | max | ms per 1k characters | how |")
    print("|---|---|---|---|---|")
    for length in lengths:
        costs, hows = [], Counter()
        for _ in range(per_length):
            text = " ".join(rng.choice(words) for _ in range(length // 4))[:length]
            t0 = time.perf_counter()
            hows[locator.locate(text).how] += 1
            costs.append((time.perf_counter() - t0) * 1000)
        print(f"| {length:,} | {statistics.mean(costs):.0f} | {max(costs):.0f} | {statistics.mean(costs) / length * 1000:.2f} "
              f"| {dict(hows)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(PERTURBATIONS), help="comma-separated perturbations to run")
    parser.add_argument("--lengths", default="", help="comma-separated passage lengths to time instead (e.g. 1000,200000)")
    parser.add_argument("--per-length", type=int, default=3, help="passages per length")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    corpus = build_corpus(args.passages, rng)
    total_passages = sum(len(windows(d.text)) for d in corpus.values())
    print(f"corpus: {len(corpus):,} pages, {sum(len(d.text) for d in corpus.values()) / 1e6:.1f} M characters, "
          f"{total_passages:,} fixed-512 passages (built in {time.perf_counter() - started:.0f} s)")
    locator = Locator(corpus)
    started = time.perf_counter()
    locator._index()  # noqa: SLF001 - timed on its own: the one-off cost per run
    print(f"index (BM25 over 1,000-character windows): {time.perf_counter() - started:.1f} s")
    if args.lengths:
        time_lengths(locator, corpus, [int(n) for n in args.lengths.split(",")], args.per_length, rng)
        print(f"\nload {os.getloadavg()[0]:.1f} at the end")
        return
    ids = list(corpus)
    picks = []
    while len(picks) < args.sample:
        doc_id = ids[rng.randrange(len(ids))]
        spans = windows(corpus[doc_id].text)
        if spans:
            picks.append((doc_id, *spans[rng.randrange(len(spans))]))
    print(f"\n{args.sample} passages per perturbation, text only (no document id); load {load:.1f} at start\n")
    print("| perturbation | located | exact | normalised | fuzzy | ambiguous | not found | **wrong** | boundary (median chars) | ms/passage mean | p95 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    wrong_cases = []
    for kind in PERTURBATIONS:
        if kind not in args.only.split(","):
            continue
        hows, wrong, boundary, costs = Counter(), 0, [], []
        for doc_id, start, end in picks:
            text, true_start, true_end = perturb(kind, corpus[doc_id], start, end, rng)
            t0 = time.perf_counter()
            placed = locator.locate(text)
            costs.append((time.perf_counter() - t0) * 1000)
            hows[placed.how] += 1
            if placed.located:
                overlap = min(placed.end, true_end) - max(placed.start, true_start)
                shorter = min(placed.end - placed.start, true_end - true_start)
                if placed.doc_id != doc_id or overlap < shorter / 2:
                    wrong += 1
                    wrong_cases.append(f"{kind}: {doc_id} [{true_start}, {true_end}) placed {placed}: {text!r}")
                else:
                    boundary.append(abs(placed.start - true_start) + abs(placed.end - true_end))
        n = args.sample
        located = hows["exact"] + hows["normalised"] + hows["fuzzy"]
        costs.sort()
        print(f"| {kind} | {located / n:.1%} | {hows['exact']} | {hows['normalised']} | {hows['fuzzy']} | {hows['ambiguous']} "
              f"| {hows['unlocated']} | **{wrong}** | {statistics.median(boundary) if boundary else '-'} "
              f"| {statistics.mean(costs):.1f} | {costs[int(0.95 * (n - 1))]:.1f} |")
    for case in wrong_cases:
        print(f"WRONG {case}")
    print(f"\nload {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
