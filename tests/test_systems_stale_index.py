"""Must show (issues #39, #48): a system that answers from an older copy of the corpus (one document
edited since, one removed, one edited slightly enough to be placed fuzzily) is run through the CLI:
below the located-rate floor the run is refused (exit 2, nothing logged) naming every document the
stale index affects, the fuzzily placed one included; with the floor lowered the run names every
passage it could not place and its document, on the terminal and in the run's warnings, and counts
them as not relevant."""

from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from tests.helpers.cli import dataset_args, job_runs, ragexp
from tests.helpers.system_server import serve
from tests.helpers.tiny_dataset import TINY_DOCS

OLD_REFUNDS = ("# Refunds\n\n## Annual plans\n\nAnnual plans are refunded in full within 14 days of renewal, "
               "after which no refund is possible.\n")
#: the live text with "the new key" for "a new key": placed, fuzzily
OLD_KEYS = TINY_DOCS["keys"].split("\n\n")[2].replace("the new key", "a new key")
OLD_LEGACY = "# Legacy API\n\nThe v1 API accepted form-encoded bodies and returned XML error documents.\n"


def old_index_answer(body: dict) -> dict:
    """Every query gets its live webhook passage, the old refunds text and the removed page."""
    return {"passages": [
        {"text": TINY_DOCS["webhooks"].split("\n\n")[2], "doc_id": "webhooks"},
        {"text": OLD_REFUNDS.split("\n\n")[2], "doc_id": "refunds"},
        {"text": OLD_LEGACY.split("\n\n")[1], "path": "/srv/help/legacy.md"},
        {"text": OLD_KEYS, "doc_id": "keys"},
    ], "answer": "Retried for 24 hours."}


def test_a_stale_index_is_named_passage_by_passage(tiny_dataset, tmp_path):
    db = tmp_path / "mlflow.db"
    args = [*dataset_args(tiny_dataset, db), "system=http", f"cache_dir={tmp_path / 'cache'}"]
    with serve(old_index_answer) as server:
        refused = ragexp(tmp_path, "run", *args, f"system.url={server.url}", "--allow-endpoint", server.url, check=False)
        assert refused.returncode == 2
        assert not db.exists() or not job_runs(db)[2]  # no run logged
        line = refused.stderr.strip().splitlines()[-1]
        assert line.startswith("ragexp run: error: field 'system.locate.min_located_rate': only 14 of 28 passages "
                               "the system returned (50.0%) were placed"), line
        assert ("a stale index? 14 passages name documents that are gone or no longer hold their text, 2 documents: "
                "refunds, /srv/help/legacy.md; placed only fuzzily (edited?) in 1 more: keys") in line
        hits = server.hits
        proc = ragexp(tmp_path, "run", *args, f"system.url={server.url}", "--allow-endpoint", server.url,
                      "system.locate.min_located_rate=0.5")
        assert server.hits == hits  # the refused run's responses were cached
    output = proc.stdout + proc.stderr
    assert "14 of 28 passages the system returned could not be placed in the corpus (14 not found, 0 ambiguous)" in output
    assert "documents: refunds (7), /srv/help/legacy.md (7); 2 distinct:" in output
    assert "document '/srv/help/legacy.md' is not in the corpus" in output
    assert "'Annual plans are refunded in full within 14 days of renewal,' (not found in document 'refunds'" in output
    assert "t1 #2, t2 #2, t3 #2, t4 #2, t5 #2 and 2 more" in output
    assert "1 more documents were placed only fuzzily (edited since the system indexed them?): keys" in output
    _, _, (run,) = job_runs(db)
    assert run.info.status == "FINISHED"
    assert "could not be placed in the corpus" in run.data.tags["ragexp.warnings"]
    assert abs(run.data.metrics["black_box/located_rate"] - 14 / 28) < 1e-12
    assert run.data.metrics["black_box/n_unlocated"] == 14
    client = MlflowClient(f"sqlite:///{db}")
    placements = [json.loads(line) for line in
                  open(client.download_artifacts(run.info.run_id, "system/placements.jsonl", str(tmp_path)), encoding="utf-8")]
    assert [p["how"] for p in placements[0]["passages"]] == ["exact", "unlocated", "unlocated", "fuzzy"]
    # the webhook query's live passage is relevant at rank 1; the stale ones count as retrieved and not relevant
    assert run.data.metrics["retrieval/context_precision_at_3"] < 1.0


def test_a_sweep_over_two_recordings_is_one_parent_with_a_child_each(tiny_dataset, tmp_path):
    """``system`` is swept from the shell like every other group: two recorded outputs of the same
    system (before and after a change), one MLflow parent with its summary and a child per recording."""
    from tests.helpers.tiny_dataset import TINY_ITEMS

    recordings = []
    for name, docs in (("before", ["refunds"]), ("after", ["webhooks", "refunds"])):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"query_id": qid, "passages": [
            {"text": TINY_DOCS[d].split("\n\n")[2], "doc_id": d} for d in docs]}) + "\n" for qid, *_ in TINY_ITEMS) +
            json.dumps({"query_id": "t7", "passages": []}) + "\n", encoding="utf-8")
        recordings.append(str(path))
    db = tmp_path / "mlflow.db"
    ragexp(tmp_path, "run", "-m", *dataset_args(tiny_dataset, db), "system=recorded",
           f"system.path={','.join(recordings)}", f"cache_dir={tmp_path / 'cache'}")
    _, (parent,), children = job_runs(db)
    assert len(children) == 2 and all(c.info.status == "FINISHED" for c in children)
    by_path = {c.data.params["system.path"]: c for c in children}
    webhook_first = by_path[recordings[1]].data.metrics
    assert webhook_first["1_headline/mrr"] > by_path[recordings[0]].data.metrics["1_headline/mrr"]
    assert parent.info.status == "FINISHED" and "hit_rate_at_5" in parent.data.tags.get("mlflow.note.content", "") + str(
        parent.data.metrics)
