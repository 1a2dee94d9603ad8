"""Two server processes on one file, saving at once: the annotation page's eval set (two fields of
one entry) and the review page's labels CSV (different claims). Every save either lands or is
refused with a conflict (409); none is lost: what each process saved is exactly what the file
holds at the end. While they write, this process reads the files again and again: they always
parse. Without the lock between processes (:class:`ragexp.web.edit_session.EditLock`), one process's
save is written over by the other's read-before-it (lost, or a later 409 against it).
"""

from __future__ import annotations

import json
import multiprocessing
import queue

from ragexp.annotation.session import Session, sidecar_path
from ragexp.judging.calibration.labels import read_labels
from tests.helpers.concurrent_saves import annotate_worker, review_worker

SAVES = 80  # per process
CLAIMS = 6


def run_workers(target, arguments: list[tuple], check_files) -> tuple[list, int]:
    """Start one spawned process per argument tuple, let them go at once, read the files with
    ``check_files`` until they finish; returns their results and how many reads parsed."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(arguments) + 1)
    results = context.Queue()
    workers = [context.Process(target=target, args=(*args, barrier, results)) for args in arguments]
    for worker in workers:
        worker.start()
    try:
        barrier.wait(timeout=120)
        reads, collected = 0, []
        while len(collected) < len(workers):
            check_files()
            reads += 1
            try:
                collected.append(results.get(timeout=0.01))
            except queue.Empty:
                assert all(w.is_alive() or w.exitcode == 0 for w in workers), [w.exitcode for w in workers]
        return collected, reads
    finally:
        for worker in workers:
            worker.join(timeout=60)
            if worker.is_alive():
                worker.kill()


def test_two_annotation_servers_saving_two_fields_of_one_entry_lose_nothing(tmp_path):
    evalset = tmp_path / "built.jsonl"
    session = Session(evalset)
    session.queue([{"query": "How long are webhooks retried?", "source": "log"}], "test")
    item = session.entries[0]["id"]
    session.update(item, {"answerable": False, "confirmed": True}, {"answerable": True, "confirmed": False})

    def check_files() -> None:
        for line in evalset.read_text(encoding="utf-8").splitlines():
            json.loads(line)
        json.loads(sidecar_path(evalset).read_text(encoding="utf-8"))

    results, reads = run_workers(annotate_worker, [(str(evalset), item, "key_facts", "fact", SAVES),
                                                   (str(evalset), item, "tags", "tag", SAVES)], check_files)

    by_tag = {tag: (landed, refused) for tag, landed, refused in results}
    saved = Session(evalset).entry(item)
    line = json.loads(evalset.read_text(encoding="utf-8").splitlines()[1])
    for tag, field in (("fact", "key_facts"), ("tag", "tags")):
        landed, refused = by_tag[tag]
        assert len(landed) + refused == SAVES
        assert refused == 0  # only the other field changed in between: never a conflict
        assert saved[field] == line[field] == landed  # every landed save is in both files, in order
    assert reads > 0


def test_two_review_servers_labelling_different_claims_of_one_file_lose_nothing(tmp_path):
    labels = tmp_path / "labels.csv"
    owned = [list(range(0, CLAIMS, 2)), list(range(1, CLAIMS, 2))]

    def check_files() -> None:
        if labels.exists():
            read_labels(labels)

    results, reads = run_workers(review_worker, [(str(labels), CLAIMS, mine, SAVES) for mine in owned], check_files)

    rows = {row.id: row.human_label for row in read_labels(labels)}
    for _, landed, refused in results:
        assert len(landed) + refused == SAVES
        assert refused == 0  # the other process labels other claims: never a conflict
        assert len(landed) == SAVES
        last = dict(landed)  # each claim's last landed verdict
        assert {claim_id: rows[claim_id] for claim_id in last} == last
    assert len(rows) == CLAIMS and reads > 0
