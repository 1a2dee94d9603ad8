"""Fitting a judge's threshold and cross-validating it, checked against brute force with
scikit-learn; ``ragexp judge calibrate`` and the calibration file a judge loads."""

from __future__ import annotations

import json
import random
from itertools import pairwise
from pathlib import Path
from typing import ClassVar

import pytest
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import StratifiedGroupKFold

from ragexp.cli import main
from ragexp.errors import RagexpInputError
from ragexp.judging.calibration.labels import (
    NOT_SUPPORTED,
    SUPPORTED,
    LabelledClaim,
    read_labels,
    write_labels,
)
from ragexp.judging.calibration.record import (
    MIN_KAPPA,
    judge_run_record,
    load_calibration,
)
from ragexp.judging.calibration.threshold import fit_threshold
from ragexp.judging.judges import LexicalJudge

S, N = SUPPORTED, NOT_SUPPORTED


def brute_force_kappas(scores, labels) -> dict[float, float]:
    """sklearn's kappa at every threshold between two distinct scores (the midpoints)."""
    distinct = sorted(set(scores))
    thresholds = [(a + b) / 2 for a, b in pairwise(distinct)]
    return {t: cohen_kappa_score(labels, [S if s >= t else N for s in scores]) for t in thresholds}


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    """The commands here cache judge scores under ./.ragexp_cache by default: keep it out of the checkout."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("seed", range(25))
def test_fitted_threshold_maximises_kappa_by_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randint(6, 60)
    labels = [rng.choice((S, N)) for _ in range(n)]
    labels[0], labels[1] = S, N
    # scores that carry some signal, rounded so that ties between rows occur
    scores = [round(rng.gauss(0.6 if label == S else 0.4, 0.25), 1) for label in labels]
    if len(set(scores)) < 2:
        scores[0] += 1.0
    threshold = fit_threshold(scores, labels)
    kappas = brute_force_kappas(scores, labels)
    achieved = cohen_kappa_score(labels, [S if s >= threshold else N for s in scores])
    assert achieved == pytest.approx(max(kappas.values()), abs=1e-12)
    assert min(scores) < threshold < max(scores)


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.0, 0.1, 0.9, 1.0], 0.5),  # separable: the middle of the gap
        ([0.0, 1.0, 5.0, 6.0], 0.5),  # two equally good, equally wide runs: the lower one
        ([0.0, 2.0, 5.0, 6.0], 1.0),  # the wider run wins
        ([0.0, 1.0, 5.0, 7.0], 6.0),
    ],
)
def test_ties_go_to_the_middle_of_the_widest_run(scores, expected):
    labels = [N, S, N, S] if scores[1] != 0.1 else [N, N, S, S]
    assert fit_threshold(scores, labels) == pytest.approx(expected)


def test_a_constant_score_cannot_be_fitted():
    with pytest.raises(ValueError):
        fit_threshold([0.5, 0.5], [S, N])


# A labelled set whose lexical supports are known by construction: context "alpha beta gamma
# delta <name>", claims made of context words and foreign words.
def labelled_set(n_contexts: int = 8, seed: int = 1) -> list[LabelledClaim]:
    rng = random.Random(seed)
    inside = ["alpha", "beta", "gamma", "delta"]
    outside = ["zeta", "theta", "kappa", "lambda"]
    rows = []
    for c in range(n_contexts):
        context = " ".join(inside) + f" passage{c}"
        for k in range(rng.randint(2, 4)):
            n_in = rng.randint(0, 4)
            n_out = rng.randint(0 if n_in else 1, 3)
            claim = " ".join(inside[:n_in] + outside[:n_out])
            support = n_in / (n_in + n_out)
            noisy = rng.random() < 0.2
            label = S if (support >= 0.6) != noisy else N
            rows.append(LabelledClaim(id=f"c{c}-{k}", context=context, claim=claim, human_label=label))
    return rows


def test_calibrate_command_matches_an_independent_cross_validation(tmp_path, capsys):
    rows = labelled_set()
    rows.append(LabelledClaim(id="unlabelled", context="alpha beta", claim="alpha"))
    rows.append(LabelledClaim(id="no-content", context="alpha beta", claim="It is.", human_label=S))
    labels_csv = write_labels(tmp_path / "tiny_labels.csv", rows)
    out = tmp_path / "calib.json"
    assert main(["judge", "calibrate", str(labels_csv), "--judge", "lexical", "--folds", "4", "--seed", "3",
                 "--out", str(out), "--cache-dir", str(tmp_path / "cache")]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())

    used = [r for r in rows if r.human_label and r.id != "no-content"]
    judge = LexicalJudge()
    scores = [judge.scores([r.claim], r.context)[0] for r in used]
    labels = [r.human_label for r in used]
    groups = [r.context for r in used]
    assert data["judge"] == {"kind": "lexical", "model_id": "lexical"}
    assert data["n"] == len(used) and data["n_unscored"] == 1 and data["n_unlabelled"] == 1
    assert data["label_counts"] == {S: labels.count(S), N: labels.count(N)}
    assert data["labels"]["file"] == "tiny_labels.csv" and data["labels"]["set"] == "tiny_labels"
    import hashlib

    assert data["labels"]["sha256"] == hashlib.sha256(labels_csv.read_bytes()).hexdigest()
    assert data["folds"] == 4 and data["seed"] == 3

    # The threshold for use: fitted on all rows, best kappa by brute force.
    full = brute_force_kappas(scores, labels)
    assert cohen_kappa_score(labels, [S if s >= data["threshold"] else N for s in scores]) == pytest.approx(max(full.values()))
    assert data["in_sample"]["kappa"] == pytest.approx(max(full.values()))

    # Cross-validation: sklearn's grouped stratified folds, each fold scored with a threshold that
    # is best on the other folds, verdicts pooled.
    folds = StratifiedGroupKFold(n_splits=4, shuffle=True, random_state=3).split(scores, labels, groups)
    predicted = [None] * len(used)
    for fold, (train, test) in zip(data["per_fold"], folds):
        assert len({groups[i] for i in test} & {groups[i] for i in train}) == 0  # no passage on both sides
        assert fold["n"] == len(test)
        train_kappas = brute_force_kappas([scores[i] for i in train], [labels[i] for i in train])
        at_fold_threshold = cohen_kappa_score([labels[i] for i in train],
                                              [S if scores[i] >= fold["threshold"] else N for i in train])
        assert at_fold_threshold == pytest.approx(max(train_kappas.values()))
        for i in test:
            predicted[i] = S if scores[i] >= fold["threshold"] else N
        assert fold["accuracy"] == pytest.approx(sum(predicted[i] == labels[i] for i in test) / len(test))
    assert data["accuracy"] == pytest.approx(sum(p == h for p, h in zip(predicted, labels)) / len(used))
    assert data["kappa"] == pytest.approx(cohen_kappa_score(labels, predicted))
    majority = max((S, N), key=labels.count)
    assert data["baselines"]["always_supported_accuracy"] == pytest.approx(labels.count(S) / len(labels))
    assert data["baselines"]["majority_accuracy"] == pytest.approx(labels.count(majority) / len(labels))
    assert f"4-fold cross-validation grouped by context: accuracy {data['accuracy']:.3f}" in printed

    # A run's judge built from the file uses its threshold and reports it.
    calibrated = LexicalJudge(calibration=str(out))
    assert calibrated.threshold == data["threshold"] and calibrated.threshold_source == "calibration"
    record = judge_run_record(calibrated)
    assert record["calibration"]["kappa"] == data["kappa"] and record["calibration"]["set"] == "tiny_labels"
    assert (record["warning"] is None) == (data["kappa"] >= MIN_KAPPA)


def test_agreement_applies_a_calibration_fitted_on_another_set(tmp_path, capsys):
    fit_csv = write_labels(tmp_path / "fit.csv", labelled_set(seed=1))
    test_rows = labelled_set(seed=2)
    test_csv = write_labels(tmp_path / "test.csv", test_rows)
    calib = tmp_path / "calib.json"
    assert main(["judge", "calibrate", str(fit_csv), "--judge", "lexical", "--folds", "3", "--out", str(calib),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    threshold = json.loads(calib.read_text())["threshold"]
    capsys.readouterr()
    judged = tmp_path / "judged.csv"
    assert main(["judge", "agreement", str(test_csv), "--judge", "lexical", "--calibration", str(calib),
                 "--out", str(judged)]) == 0
    assert f"threshold {threshold:.6g} (calibration)" in capsys.readouterr().out
    for row in read_labels(judged):
        assert row.judge_label == (S if float(row.judge_score) >= threshold else N)


def test_calibrate_refuses_bad_input_with_one_line(tmp_path, capsys):
    one_class = [LabelledClaim(id=f"r{i}", context=f"alpha passage{i}", claim="alpha", human_label=S) for i in range(12)]
    path = write_labels(tmp_path / "one_class.csv", one_class)
    assert main(["judge", "calibrate", str(path), "--judge", "lexical", "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "needs both labels" in err and err.count("\n") == 1
    # 8 rows about 2 passages: too few rows for 5 folds, too few passages for 3
    few_rows = [LabelledClaim(id=f"r{i}", context=f"alpha beta passage{i % 2}", claim=["alpha beta", "zeta"][i % 2],
                              human_label=[S, N][i // 4]) for i in range(8)]
    few = write_labels(tmp_path / "few.csv", few_rows)
    assert main(["judge", "calibrate", str(few), "--judge", "lexical", "--out", str(tmp_path / "x.json")]) == 2
    assert "8 labelled, scored rows are too few for 5 folds (need at least 10)" in capsys.readouterr().err
    assert main(["judge", "calibrate", str(few), "--judge", "lexical", "--folds", "3", "--out", str(tmp_path / "x.json")]) == 2
    assert "distinct contexts cannot fill 3 folds" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def _lexical_calibration(tmp_path: Path) -> Path:
    out = tmp_path / "lexical.json"
    csv = write_labels(tmp_path / "fit.csv", labelled_set())
    assert main(["judge", "calibrate", str(csv), "--judge", "lexical", "--folds", "3", "--out", str(out),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    return out


def test_a_calibration_for_another_judge_is_refused_naming_both(tmp_path, capsys):
    path = _lexical_calibration(tmp_path)
    data = json.loads(path.read_text())
    data["judge"] = {"kind": "local_likelihood", "method": "pmi", "model_id": "smollm2-135m@0123"}
    path.write_text(json.dumps(data))
    with pytest.raises(RagexpInputError, match=r"field 'calibration': fitted for judge local_likelihood method=pmi "
                                                r"model_id=smollm2-135m@0123, but the configured judge is lexical"):
        LexicalJudge(calibration=str(path))
    with pytest.raises(RagexpInputError, match="not both"):
        (tmp_path / "other").mkdir()
        LexicalJudge(threshold=0.5, calibration=str(_lexical_calibration(tmp_path / "other")))
    with pytest.raises(RagexpInputError, match="no such judge calibration file"):
        load_calibration(tmp_path / "absent.json", {"kind": "lexical", "model_id": "lexical"})
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    with pytest.raises(RagexpInputError, match="not a judge calibration file"):
        LexicalJudge(calibration=str(tmp_path / "bad.json"))
    capsys.readouterr()
    csv = write_labels(tmp_path / "any.csv", labelled_set())
    assert main(["judge", "agreement", str(csv), "--judge", "lexical", "--calibration", str(path)]) == 2
    assert "field '--calibration': fitted for judge local_likelihood" in capsys.readouterr().err


def test_run_record_warns_when_uncalibrated_or_weak(tmp_path):
    record = judge_run_record(LexicalJudge())
    assert record["threshold_source"] == "default" and record["calibration"] is None
    assert record["warning"].startswith("faithfulness comes from an uncalibrated judge (lexical")
    path = _lexical_calibration(tmp_path)
    data = json.loads(path.read_text())
    for kappa, warns in ((MIN_KAPPA - 0.01, True), (MIN_KAPPA, False), (None, True)):
        data["kappa"] = kappa
        path.write_text(json.dumps(data))
        warning = judge_run_record(LexicalJudge(calibration=str(path)))["warning"]
        assert (warning is not None) is warns
        if warns:
            assert "agrees weakly with human labels" in warning and "'fit'" in warning


class BagOfWordsEncoder:
    """An :class:`~reference_pipelines.encoders.Encoder`: word counts over a fixed vocabulary."""

    identity: ClassVar[dict] = {"model": {"name": "bow", "weights": "0123456789abcdef0123"}}
    VOCAB = ("webhooks", "retried", "24", "48", "hours", "keys", "rotate", "downtime")

    def encode_queries(self, texts):
        return self.encode_passages(texts)

    def encode_passages(self, texts):
        import numpy as np

        return np.array([[text.lower().replace(".", "").split().count(w) for w in self.VOCAB] for text in texts], dtype=float)


def test_embedding_judge_scores_the_best_matching_context_sentence():
    import numpy as np

    from ragexp.judging.judges import EmbeddingJudge

    context = "Webhooks are retried for 24 hours. You can rotate keys without downtime."
    claims = ["Webhooks are retried for 48 hours.", "Rotate keys.", "Nothing in the vocabulary."]
    judge = EmbeddingJudge(BagOfWordsEncoder(), threshold=0.6)
    encoder = BagOfWordsEncoder()
    sentences = encoder.encode_passages(["Webhooks are retried for 24 hours.", "You can rotate keys without downtime."])
    expected = []
    for claim in encoder.encode_queries(claims):
        norms = np.linalg.norm(sentences, axis=1) * max(np.linalg.norm(claim), 1e-12)
        expected.append(float(np.max(sentences @ claim / norms)))
    verdicts = judge.judge_claims(claims, context)
    assert [v.score for v in verdicts] == pytest.approx(expected)
    assert expected[0] == pytest.approx(3 / 4) and expected[2] == 0.0  # 3 shared words of 4 in each
    assert [v.supported for v in verdicts] == [s >= 0.6 for s in expected]
    assert judge.identity() == {"kind": "embedding", "model_id": "bow@0123456789abcdef"}
    assert judge.generate_question("anything") is None and judge.threshold_source == "config"


def test_an_llm_judge_records_its_plain_agreement(tmp_path, capsys):
    from ragexp.judging.judges import LLMJudge
    from ragexp.llm.openai_compat import OpenAIChatModel
    from tests.helpers.fake_openai_server import FakeOpenAIServer, ok

    rows = labelled_set()
    labels_csv = write_labels(tmp_path / "labels.csv", rows)
    out = tmp_path / "llm.json"
    with FakeOpenAIServer() as server:
        server.script(*[ok("Yes.")] * len(rows))  # a judge that accepts everything
        assert main(["judge", "calibrate", str(labels_csv), "--judge", "openai", "--base-url", server.base_url,
                     "--model", "judge-model", "--api-key-env", "RAGEXP_TEST_NO_KEY", "--out", str(out)]) == 0
        assert len(server.requests) == len(rows)
        data = json.loads(out.read_text())
        assert data["judge"] == {"kind": "llm", "model_id": "judge-model"} and data["threshold"] is None
        supported = sum(r.human_label == S for r in rows) / len(rows)
        assert data["accuracy"] == pytest.approx(supported) and data["kappa"] == pytest.approx(0.0)
        assert data["estimate"] == "agreement (nothing fitted)" and data["folds"] is None
        judge = LLMJudge(OpenAIChatModel(server.base_url, "judge-model"), claim_splitter="sentences", calibration=str(out))
    record = judge_run_record(judge)
    assert record["calibration"]["estimate"] == "agreement (nothing fitted)" and "agrees weakly" in record["warning"]
    # an agreement-only file handed to a scoring judge has no threshold to give it
    data["judge"] = {"kind": "lexical", "model_id": "lexical"}
    out.write_text(json.dumps(data))
    with pytest.raises(RagexpInputError, match="fitted no threshold"):
        LexicalJudge(calibration=str(out))


def _demo_fit(tmp_path: Path, judge: str) -> dict:
    from ragexp.data.datasets import DEMO_DIR

    out = tmp_path / f"{judge}.json"
    assert main(["judge", "calibrate", str(DEMO_DIR / "calibration.csv"), "--judge", judge, "--out", str(out),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    return json.loads(out.read_text())


def test_the_shipped_lexical_threshold_is_the_demo_set_fit(tmp_path):
    fitted = _demo_fit(tmp_path, "lexical")
    assert LexicalJudge.DEFAULT_THRESHOLD == pytest.approx(fitted["threshold"], abs=1e-6)
    assert (fitted["n"], fitted["folds"]) == (72, 5)


@pytest.mark.slow  # loads all-MiniLM-L6-v2
def test_the_shipped_embedding_threshold_is_the_demo_set_fit(tmp_path):
    from ragexp.judging.judges import EmbeddingJudge

    assert EmbeddingJudge.DEFAULT_THRESHOLD == pytest.approx(_demo_fit(tmp_path, "embedding")["threshold"], abs=1e-6)
