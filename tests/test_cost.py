"""kgir_lib.eval.cost: the paper-scale extrapolation's arithmetic on exact numbers."""
from __future__ import annotations

import pandas as pd
import pytest

from kgir_lib.eval.cost import (ASSUMED_72B_8xA800, HIPPORAG2_INDEXING_M, PAPER_CORPUS_PASSAGES, Throughput,
                                extraction_cost, from_run, hipporag2_comparison, online_cost)

TP = Throughput("test", prefill_tok_s=10_000.0, decode_tok_s=1_000.0, gpus=8)


def test_throughput_hours_and_gpu_hours_exact():
    # 36e6 prompt tokens / 1e4 = 3600 s; 3.6e6 completion / 1e3 = 3600 s -> 2 h wall, 16 GPU-hours
    assert TP.hours(36e6, 3.6e6) == pytest.approx(2.0)
    assert TP.gpu_hours(36e6, 3.6e6) == pytest.approx(16.0)
    assert TP.gpu_hours(0, 0) == 0
    with pytest.raises(ValueError):
        Throughput("bad", 0.0, 1.0).hours(1, 1)


def test_online_cost_scales_per_question_tokens():
    per_q = pd.DataFrame({"method": ["A", "B"], "LLM calls / q": [1.0, 4.5],
                          "prompt tokens / q": [1000.0, 3000.0], "completion tokens / q": [10.0, 200.0]})
    out = online_cost(per_q, n_questions=1000, n_datasets=2, throughputs=(TP,)).set_index("method")
    assert out.loc["A", "questions"] == 2000
    assert out.loc["A", "prompt tokens (M)"] == pytest.approx(2.0)       # 1000 x 2000
    assert out.loc["B", "completion tokens (M)"] == pytest.approx(0.4)   # 200 x 2000
    tot = out.loc["total (every method)"]
    assert (tot["prompt tokens (M)"], tot["completion tokens (M)"]) == pytest.approx((8.0, 0.42))
    assert tot["LLM calls / q"] == pytest.approx(5.5)
    # 8e6 / 1e4 = 800 s, 0.42e6 / 1e3 = 420 s -> 1220 s x 8 GPUs
    assert tot["GPU-hours, test"] == pytest.approx(1220 * 8 / 3600)


def test_extraction_cost_full_corpora_and_hipporag2_side_by_side():
    out = extraction_cost(500.0, 150.0, throughputs=(TP,)).set_index("corpus")
    assert PAPER_CORPUS_PASSAGES == {"musique": 11_656, "hotpotqa": 9_811}
    assert out.loc["musique", "prompt tokens (M)"] == pytest.approx(5.828)      # 500 x 11656
    assert out.loc["hotpotqa", "completion tokens (M)"] == pytest.approx(1.47165)  # 150 x 9811
    assert out.loc["total", "passages"] == 21_467
    assert out.loc["total", "GPU-hours, test"] == pytest.approx(
        (21_467 * 500 / 1e4 + 21_467 * 150 / 1e3) * 8 / 3600)
    cmp = hipporag2_comparison(out.reset_index())
    assert cmp.iloc[0]["input tokens (M)"] == pytest.approx(5.828)
    assert HIPPORAG2_INDEXING_M["HippoRAG 2"] == (9.2, 3.0)
    assert cmp.set_index("system").loc["HippoRAG 2", "output tokens (M)"] == 3.0


def test_assumptions_are_labelled_and_ordered():
    assert all("assumed" in tp.label and tp.gpus == 8 for tp in ASSUMED_72B_8xA800)
    low, mid, high = ASSUMED_72B_8xA800
    assert low.gpu_hours(1e6, 1e5) > mid.gpu_hours(1e6, 1e5) > high.gpu_hours(1e6, 1e5)


def test_from_run(tmp_path):
    per_q = tmp_path / "05_cost_per_question.csv"
    pd.DataFrame({"method": ["Naive RAG"], "LLM calls / q": [1.0], "prompt tokens / q": [2000.0],
                  "completion tokens / q": [20.0]}).to_csv(per_q, index=False)
    measured = {"dataset": "hotpotqa", "passages": 4, "prompt_tokens": 1600, "completion_tokens": 400, "seconds": 1.0}
    online, extraction, comparison = from_run(per_q, measured)
    assert online.set_index("method").loc["Naive RAG", "prompt tokens (M)"] == pytest.approx(4.0)
    ex = extraction.set_index("corpus")
    assert (ex.loc["musique", "prompt tokens / passage"], ex.loc["musique", "completion tokens / passage"]) == (400, 100)
    assert comparison.iloc[0]["input tokens (M)"] == pytest.approx(400 * 11_656 / 1e6)
    with pytest.raises(ValueError):
        from_run(per_q, {**measured, "passages": 0})


def test_measured_extraction_reads_the_graph_calls_at_the_profile_budget(tmp_path, monkeypatch):
    """Only the stored graph's extraction calls at cfg.max_tokens('extract') count, not other budgets."""
    from kgir_lib.config import load_config
    from kgir_lib.data import Corpus, Dataset, Passage, Question
    from kgir_lib.kg import KnowledgeGraph
    from kgir_lib.kg.extract import extraction_requests
    from kgir_lib.kg.store import kg_dir, save_kg
    from kgir_lib.llm.cache import LLMCache, cache_key
    from kgir_lib.eval import cost

    cfg = load_config("ci", results_dir=str(tmp_path / "r"), max_tokens_extract=1024)
    ps = [Passage("p1", "A", "Alpha is a city."), Passage("p2", "B", "Beta is a river.")]
    ds = Dataset("toy", [Question("q1", "Where?", ("x",), ("p1",), "toy")], Corpus(ps))
    monkeypatch.setattr("kgir_lib.eval.cost.load_dataset", lambda name, path: ds)
    kg = KnowledgeGraph()
    kg.add("p1", [])
    kg.add("p2", [])
    save_kg(kg, kg_dir(cfg, "toy"))
    cache = LLMCache(cfg.path("cache", "llm.sqlite"))
    model_id = f"{cfg.llm_backend}:{cfg.llm_model}"
    for req, (pt, ct) in zip(extraction_requests(ps, 1024), [(300, 100), (500, 60)]):
        cache.put(cache_key(model_id, req.payload()), model_id, req.payload(), "x | y | z", pt, ct, 2.0)
    req256 = extraction_requests(ps[:1], 256)[0]  # notebook 01's raw-output display with the default budget
    cache.put(cache_key(model_id, req256.payload()), model_id, req256.payload(), "x | y | z", 999, 999, 2.0)
    cache.close()
    got = cost.measured_extraction(cfg, "toy")
    assert got == {"dataset": "toy", "passages": 2, "prompt_tokens": 800, "completion_tokens": 160, "seconds": 4.0}
