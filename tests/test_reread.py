"""Claims re-read from a run's trace files: scored as notebook 05 scores, read by the exact tests."""
import pytest

from kgir_lib import traces
from kgir_lib.data import load_dataset
from kgir_lib.eval import claims as cl
from kgir_lib.eval.reread import main, scores_from_traces


def _write(root, key, label, qs, answer):
    path = root / key / "musique_train.trace.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    traces.write_traces([{"qid": q.qid, "answer": answer(q), "ranked_pids": list(q.gold_pids)} for q in qs], path)
    traces.write_meta(path, {"method": label, "key": key})


@pytest.fixture
def run(tmp_path):
    qs = load_dataset("musique_train").questions[:3]
    _write(tmp_path, "kgir", "KGIR-RAG", qs, lambda q: q.answers[0])
    _write(tmp_path, "ircot", "IRCoT", qs, lambda q: "no idea")
    return tmp_path, qs


def test_scores_come_from_the_traces_with_the_labels_their_meta_names(run):
    root, qs = run
    s = scores_from_traces(root, ["musique_train"])
    assert sorted(set(s["method"])) == ["IRCoT", "KGIR-RAG"]
    assert s.groupby("method")["EM"].mean().to_dict() == {"IRCoT": 0.0, "KGIR-RAG": 100.0}
    assert (s["R@5"] == 100.0).all()  # every trace ranked its gold passages first


def test_claims_read_off_traces_use_the_exact_test(run):
    root, _ = run
    t = cl.claims_table(scores_from_traces(root, ["musique_train"]), n_boot=200, seed=0)
    row = t[(t["claim"] == "KGIR-RAG ahead of IRCoT") & (t["dataset"] == "musique_train") & (t["metric"] == "EM")]
    r = row.iloc[0]
    assert (r["diff"], r["discordant"], r["p"]) == (100.0, "3/0", 0.25)  # McNemar: 2 * 0.5**3
    assert r["reading"] == cl.CANNOT_TELL


def test_a_trace_without_meta_is_named(tmp_path):
    path = tmp_path / "kgir" / "musique_train.trace.jsonl"
    path.parent.mkdir()
    traces.write_traces([{"qid": "x", "answer": "a"}], path)
    with pytest.raises(ValueError, match="musique_train.trace.jsonl has no .meta.json"):
        scores_from_traces(tmp_path, ["musique_train"])


def test_cli_writes_the_claims_table(tmp_path, capsys):
    qs = load_dataset("musique_train").questions[:3]
    run_dir = tmp_path / "run"
    _write(run_dir / "traces", "kgir", "KGIR-RAG", qs, lambda q: q.answers[0])
    _write(run_dir / "traces", "ircot", "IRCoT", qs, lambda q: "no idea")
    out = tmp_path / "out"
    assert main([str(run_dir), "--datasets", "musique_train", "--n-boot", "100", "--out-dir", str(out)]) == 0
    assert "KGIR-RAG ahead of IRCoT" in capsys.readouterr().out
    assert (out / "05_claims.csv").exists() and (out / "05_claims.md").exists()
