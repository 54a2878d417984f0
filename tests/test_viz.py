"""Traces rendered as Markdown (kgir_lib.notebook.viz.render_trace)."""
from __future__ import annotations


def test_render_trace_shows_every_round(tiny_workspace, tiny_dataset):
    from kgir_lib.kgir.variants import KGIRRAG
    from kgir_lib.eval.mechanism.loop_tables import trace_table
    from kgir_lib.notebook.viz import render_trace

    def script(req):
        if req.prompt == "kgir_ner":
            return "Entities: 1994"
        if req.prompt == "kgir_rewrite":
            return "Which company did Compaq merge with in 2002?"
        if req.prompt == "kgir_reflect":
            return "Reasoning: no.\nMissing: the partner"
        return "Answer: HP"
    ws = tiny_workspace(script)
    outs = KGIRRAG(max_iterations=2).run(ws, tiny_dataset.questions)
    text = render_trace(outs[0].trace, tiny_dataset.corpus)
    assert text.count("**Round ") == 2 and "★ Compaq" in text
    assert "rewrite: *Which company did Compaq merge with in 2002?*" in text
    assert "missing: 'the partner'" in text and "reader (forced at the round cap)" in text and "→ **HP**" in text
    assert "worded by the reader; stopped by forced_reader; 2 round(s)" in text
    row = trace_table(outs).iloc[0]
    assert (row["iterations"], row["answered_by"], row["llm_calls"], row["calls_kgir_final"]) == (2, "forced_reader", 7, 1)
    assert row["rewrite_malformed"] == 0 and row["G_Ans_triples"] > 0
