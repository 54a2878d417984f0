"""The deployable repair (kgir_lib.kgir.first_retrieval): D_1's top passages beside the new passages of D'_t, one
budget and order, as a composition of the paper's steps; the reflection and the reader read them."""
from __future__ import annotations

from kgir_lib.kgir import first_retrieval as fr
from kgir_lib.kgir.loop import PAPER
from kgir_lib.kgir.variants import KGIRRAG


def script(req):
    return {"kgir_ner": '{"named_entities": ["PC maker", "1994"]}',
            "kgir_rewrite": "Rewritten question: Which company merged with Compaq in 2002?",
            "kgir_reflect": "Reasoning: enough.\nAnswer: Hewlett-Packard", "kgir_reflect_verdict": "Answer: HP",
            "reader": "Answer: HP"}[req.prompt]


def test_first_and_new_takes_the_two_lists_in_turn_within_one_budget():
    assert fr.first_and_new(["a", "b", "c"], ["x", "y"], 4) == ["a", "x", "b", "y"]
    assert fr.first_and_new(["a", "b", "c"], ["x"], 4) == ["a", "x", "b", "c"]  # one runs out: the other fills
    assert fr.first_and_new(["a", "x"], ["x", "y"], 5) == ["a", "x", "y"]  # each passage once
    assert fr.first_and_new([], ["x", "y"], 1) == ["x"] and fr.first_and_new(["a"], [], 3) == ["a"]


def test_the_composition_changes_only_the_passages_step_and_the_reader_reads_them(tiny_workspace):
    steps = fr.FIRST_AND_NEW.steps
    assert [f for f in steps.__dataclass_fields__ if getattr(steps, f) is not getattr(PAPER, f)] == ["passages"]
    ws = tiny_workspace(script)
    q = ws.dataset.questions[0]
    [out] = fr.FirstAndNewKGIRRAG().run(ws, [q])
    [paper] = KGIRRAG().run(tiny_workspace(script), [q])
    r, p = out.trace["rounds"][0], paper.trace["rounds"][0]
    d1 = [x[0] for x in r["retrieved"]]
    n = ws.cfg.context_passages
    assert r["reflection_passages"] == fr.first_and_new(d1, p["reflection_passages"], n)
    assert r["final"]["context_pids"] == r["reflection_passages"]  # the reader reads P_t after G_Ans
    assert out.trace["method"] == fr.FIRST_AND_NEW.name and fr.FirstAndNewKGIRRAG().key == fr.KEY
    assert set(d1[:1]) <= set(r["final"]["context_pids"])  # D_1's best passage is shown, as the paper never does


def test_the_family_is_declared():
    assert fr.FAMILY == (("kgir", "EM"), ("kgir", "F1"), ("naive_rag", "EM"), ("naive_rag", "F1"))


def test_the_repair_table_makes_the_declared_tests():
    import pandas as pd
    import pytest

    from kgir_lib.eval.mechanism import repair
    from kgir_lib.eval.stats import holm

    def recs(answers):
        return [{"qid": f"q{i}", "answer": a, "trace": {}} for i, a in enumerate(answers)]  # no gold in a trace

    runs = {fr.KEY: recs(["HP", "HP", "HP", "no"]), "kgir": recs(["no", "no", "HP", "no"]),
            "naive_rag": recs(["HP", "HP", "HP", "HP"])}
    gold = {f"q{i}": ("HP",) for i in range(4)}
    table = repair.repair_table(runs, gold, "ds")
    em = table[table["metric"] == "EM"].set_index("against")
    assert em.loc["kgir", ["n", "repair", "reference", "Δ", "b/c"]].tolist() == [4, 75.0, 25.0, 50.0, "2/0"]
    assert em.loc["kgir", "p"] == pytest.approx(0.5) and em.loc["naive_rag", "b/c"] == "0/1"
    assert list(table["p (Holm)"]) == pytest.approx(list(holm(list(table["p"]))))
    assert repair.repair_sentence(table, "ds").startswith(
        "ds (n = 4): D_1 beside D'_t reaches EM 75.0 against kgir's 25.0 (+50.0, 2/0, Holm p")
    without = repair.repair_table({fr.KEY: runs[fr.KEY], "kgir": runs["kgir"]}, gold, "ds")
    assert without["p"].isna().sum() == 2 and len(without) == 4  # a reference not run: its tests count as p = 1


def test_the_run_table_reads_the_trace_files_of_the_repair_and_its_references(tmp_path):
    import pytest

    from kgir_lib.data import Question
    from kgir_lib.eval.mechanism import repair
    from kgir_lib.traces import trace_file, write_traces

    def recs(answers):
        return [{"qid": f"q{i}", "answer": a, "ranked_pids": [], "usage": None, "trace": {}}
                for i, a in enumerate(answers)]

    for key, answers in ((fr.KEY, ["HP", "HP", "no"]), ("kgir", ["no", "HP", "no"]), ("naive_rag", ["HP"] * 3)):
        path = trace_file(tmp_path, key, "ds")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_traces(recs(answers), path)
    questions = [Question(qid=f"q{i}", question="?", answers=("HP",), gold_pids=(), dataset="ds") for i in range(3)]
    dataset = type("D", (), {"questions": questions})()
    table = repair.run_table(tmp_path, {"ds": dataset})
    assert list(table.index.names) == ["dataset", "against", "metric"] and len(table) == len(fr.FAMILY)
    assert table.loc[("ds", "kgir", "EM"), "b/c"] == "1/0" and table.loc[("ds", "naive_rag", "EM"), "b/c"] == "0/1"
    assert table.loc[("ds", "kgir", "EM"), "Δ"] == pytest.approx(100 / 3)
    with pytest.raises(ValueError, match="no kgir_first_and_new trace file of other"):
        repair.run_table(tmp_path, {"ds": dataset, "other": dataset})


def test_the_repair_is_a_registered_method_listed_where_a_profile_names_it():
    from kgir_lib import registry
    from kgir_lib.eval import ablation
    from kgir_lib.eval.mechanism import repair

    method = registry.build_method("kgir_first_and_new")
    assert isinstance(method, fr.FirstAndNewKGIRRAG) and method.key == fr.KEY == "kgir_first_and_new"
    assert registry.LABELS[fr.KEY] == method.name == "KGIR-RAG + D_1 beside D'_t (ours)"
    assert registry.DESCRIPTIONS[fr.KEY] == fr.FIRST_AND_NEW.description
    assert method.spec.steps.passages == fr.FirstAndNewPassages() and method.spec.steps.rewrite == PAPER.rewrite
    registry.check_method_keys(["kgir", fr.KEY])  # a profile's eval_methods takes it
    # not in notebook 05's default list (a null eval_methods: the paper profile), nor a study variant
    assert fr.KEY not in registry.DEFAULT_METHODS and fr.KEY not in registry.STUDY_METHODS
    assert list(ablation.kgir_ablation_labels(registry.DEFAULT_METHODS)) == list(ablation.KGIR_VARIANT_LABELS)
    assert ablation.kgir_ablation_labels(["kgir", fr.KEY]) == {
        "full": "KGIR-RAG (full)", "no_subgraph": "w/o subgraph", "no_reflection": "w/o reflection",
        "no_rewrite": "w/o rewrite", "first_and_new": "+ D_1 beside D'_t (ours, a repair)"}
    assert registry.build_method(f"kgir_{list(ablation.KGIR_REPAIR_LABELS)[0]}").key == fr.KEY  # 06's factory
    # REPAIR_SIGN's reading: the full method minus the repair, negative when the repair answers more; no paper value
    import pandas as pd
    labels = ablation.kgir_ablation_labels(["kgir", fr.KEY])
    means = pd.DataFrame({"dataset": "musique_train", "variant": ["full", "no_rewrite", "first_and_new"],
                          "EM": [20.0, 10.0, 30.0], "F1": [25.0, 20.0, 27.5]})
    t = ablation.ablation_table(means, labels=labels).set_index("variant")
    assert t.loc["+ D_1 beside D'_t (ours, a repair)", ["ΔEM (ours)", "ΔF1 (ours)"]].tolist() == [-10.0, -2.5]
    assert pd.isna(t.loc["+ D_1 beside D'_t (ours, a repair)", "ΔEM (paper, Qwen2.5-72B)"])
    assert t.loc["w/o rewrite", "ΔEM (ours)"] == 10.0 and pd.notna(t.loc["w/o rewrite", "ΔEM (paper, Qwen2.5-72B)"])
    assert repair.listing_note(["kgir"], "paper") == (
        "*KGIR-RAG + D_1 beside D'_t (ours)* (`kgir_first_and_new`; ours, a deployable repair, not the paper's "
        "method): not among this profile's (paper) methods. The repair ran on the sample and local profiles (its "
        "calls are in their response logs). To run it here, add `kgir_first_and_new` to the profile's "
        "`eval_methods` (null: every method of kgir_lib.registry.DEFAULT_METHODS) and run `KGIR_PROFILE=paper "
        "python -m kgir_lib.runner --only 05 06`.")
    assert repair.listing_note(["kgir", fr.KEY], "sample") == (
        "*KGIR-RAG + D_1 beside D'_t (ours)* (`kgir_first_and_new`; ours, a deployable repair, not the paper's "
        "method): " + fr.FIRST_AND_NEW.description + " Listed in this profile's (sample) tables.")
