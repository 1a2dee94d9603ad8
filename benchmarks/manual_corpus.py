"""A held-out manual-style corpus with section titles: the READMEs of packages installed here.

The demo corpus is the one the label-copy rules were written on; this corpus is not. Each document
is the long description (README, Markdown with ``#``/``##``/``###`` section titles) that a package
ships in its ``*.dist-info/METADATA``, changelog left out, so chunk titles are real heading paths
(``python-dotenv > Other Use Cases > Parse configuration as a stream``). The eval set is 20 questions
written by hand from those READMEs (evidence: the document). Nothing is copied into the repository:
the files are rebuilt from the installed packages.

Run: ``python -m benchmarks.manual_corpus OUT_DIR`` writes ``OUT_DIR/docs/*.md`` and
``OUT_DIR/evalset.jsonl``; then
``ragexp run dataset=evalset dataset.corpus=OUT_DIR/docs dataset.evalset=OUT_DIR/evalset.jsonl generator=local ...``
and ``python -m benchmarks.title_copies RESULTS.json`` count the title copies and end repeats.
"""

from __future__ import annotations

import argparse
import json
from importlib import metadata
from pathlib import Path

PACKAGES = ("python-dotenv", "httpx-sse", "sqlparse", "distro", "faiss-cpu", "urllib3", "gguf")
"""The packages whose README becomes a document (id = the package name)."""

QUESTIONS = (
    ("m01", "What does python-dotenv read from a .env file?", "python-dotenv", "key-value pairs"),
    ("m02", "Does load_dotenv override existing environment variables by default?", "python-dotenv", "override=False"),
    ("m03", "Which function parses a .env file without changing the environment?", "python-dotenv", "dotenv_values"),
    ("m04", "How do I disable load_dotenv in production?", "python-dotenv", "PYTHON_DOTENV_DISABLED=1"),
    ("m05", "How do I load a .env file in IPython?", "python-dotenv", "%load_ext dotenv"),
    ("m06", "How are variables expanded in values of a .env file?", "python-dotenv", "${DOMAIN}"),
    ("m07", "What does httpx-sse consume?", "httpx-sse", "Server-Sent Event"),
    ("m08", "Which helper connects to an SSE endpoint asynchronously?", "httpx-sse", "aconnect_sse"),
    ("m09", "How do I handle reconnections with httpx-sse?", "httpx-sse", "Last-Event-ID"),
    ("m10", "How do I split a SQL script into statements?", "sqlparse", "sqlparse.split"),
    ("m11", "Is sqlparse still maintained?", "sqlparse", "no longer actively maintained"),
    ("m12", "Which options does sqlparse format accept?", "sqlparse", "reindent"),
    ("m13", "What information does distro provide?", "distro", "machine-readable ID"),
    ("m14", "Which Python function does distro replace?", "distro", "platform.linux_distribution"),
    ("m15", "Which operating systems does distro support?", "distro", "Linux and BSD"),
    ("m16", "What is Faiss used for?", "faiss-cpu", "similarity search"),
    ("m17", "Who implemented the GPU version of Faiss?", "faiss-cpu", "Jeff Johnson"),
    ("m18", "How do I install urllib3?", "urllib3", "python -m pip install urllib3"),
    ("m19", "Which encodings does urllib3 support?", "urllib3", "zstd"),
    ("m20", "How are gguf packages published?", "gguf", "publishing"),
)
"""``(id, query, document, key fact)``: each key fact occurs in its document (checked when built)."""


def readme(package: str) -> str:
    """The package's long description without its changelog (``# Changelog`` and after)."""
    body = metadata.metadata(package).get_payload()
    return body.split("\n# Changelog", 1)[0].strip() + "\n"


def build(out: Path) -> None:
    docs = out / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    texts = {package: readme(package) for package in PACKAGES}
    for package, text in texts.items():
        (docs / f"{package}.md").write_text(text, encoding="utf-8")
    with (out / "evalset.jsonl").open("w", encoding="utf-8") as handle:
        handle.write(json.dumps({"ragexp_evalset": 1, "name": "package-readmes"}) + "\n")
        for qid, query, doc, fact in QUESTIONS:
            if fact not in texts[doc]:
                raise SystemExit(f"{qid}: key fact {fact!r} is not in the {doc} README of this install")
            item = {"id": qid, "query": query, "evidence": [{"doc_id": doc}], "key_facts": [fact], "source": "hand"}
            handle.write(json.dumps(item) + "\n")
    print(f"{len(texts)} documents, {len(QUESTIONS)} questions -> {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write docs/ and evalset.jsonl into")
    build(parser.parse_args().out)


if __name__ == "__main__":
    main()
