"""A four-document Markdown corpus and a seven-item eval set in ragexp's own format."""

from __future__ import annotations

import json
from pathlib import Path

TINY_DOCS = {
    "webhooks": "# Webhooks\n\n## Retries\n\nFailed deliveries are retried with exponential backoff for 24 hours. "
    "After that the event is marked failed.\n\n## Timeouts\n\nEach delivery attempt times out after 10 seconds. "
    "Respond with a 2xx status quickly and process the event later.\n",
    "keys": "# API keys\n\n## Rotation\n\nYou can have two active keys at once. Create the new key, deploy it, "
    "then revoke the old key: there is no downtime.\n\n## Scopes\n\nKeys can be restricted to read-only scopes.\n",
    "limits": "# Rate limits\n\n## Search\n\nThe search endpoint allows 30 requests per minute per key. "
    "Other endpoints allow 100 requests per minute.\n\n## Headers\n\nEvery response carries X-RateLimit-Remaining.\n",
    "refunds": "# Refunds\n\n## Annual plans\n\nAnnual plans are refunded pro rata within 30 days of renewal. "
    "Monthly plans are not refunded.\n",
}


TINY_ITEMS = [
    ("t1", "How long are webhooks retried?", "webhooks", "retried with exponential backoff for 24 hours", ["verbatim"]),
    ("t2", "When does a webhook delivery time out?", "webhooks", "times out after 10 seconds", ["paraphrase"]),
    ("t3", "Can I rotate an API key without downtime?", "keys", "there is no downtime", ["paraphrase"]),
    ("t4", "What is the search endpoint rate limit?", "limits", "30 requests per minute per key", ["verbatim"]),
    ("t5", "Do I get money back on a yearly subscription?", "refunds", "refunded pro rata within 30 days", ["synonym"]),
    ("t6", "Which header tells me my remaining quota?", "limits", "X-RateLimit-Remaining", ["synonym"]),
]


def write_tiny_dataset(root: Path) -> tuple[Path, Path]:
    """The ``tiny_dataset`` files under ``root`` (also for module-scoped fixtures)."""
    corpus = root / "corpus"
    corpus.mkdir()
    for doc_id, text in TINY_DOCS.items():
        (corpus / f"{doc_id}.md").write_text(text, encoding="utf-8")
    evalset = root / "evalset.jsonl"
    lines = [json.dumps({"ragexp_evalset": 1, "name": "tiny"})]
    for qid, query, doc_id, quote, tags in TINY_ITEMS:
        lines.append(json.dumps({"id": qid, "query": query, "evidence": [{"doc_id": doc_id, "quote": quote}],
                                 "gold_answer": quote, "tags": tags}))
    lines.append(json.dumps({"id": "t7", "query": "What is the CEO's favourite colour?", "answerable": False,
                             "evidence": [], "gold_answer": "The documents do not say.", "tags": ["unanswerable"]}))
    evalset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus, evalset
