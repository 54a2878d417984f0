"""The loss decomposition (kgir_lib.eval.mechanism.loss_decomposition): KGIR-RAG's own final reader prompt,
rebuilt from its trace exactly as the loop sent it, then re-read with one thing changed at a time.

Known answers: the rebuilt prompts against the requests the loop and the gold-context oracle really sent on the
tiny Fig. 6 workspace; the swap rule; the declared family and Holm; the passage cut; the sentence.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from kgir_lib.config import ConfigError, load_config
from kgir_lib.data import Passage
from kgir_lib.eval.mechanism import loss_decomposition as ld
from kgir_lib.eval.stats import holm, mcnemar_exact
from kgir_lib.kgir.variants import KGIRRAG
from kgir_lib.methods.reader import reader_request
from kgir_lib.registry import build_method

READS = {"reader": "Answer: HP"}


def script(req):
    return {"kgir_ner": '{"named_entities": ["PC maker", "1994"]}',
            "kgir_rewrite": "Rewritten question: Which company merged with Compaq in 2002?",
            "kgir_reflect": "Reasoning: enough.\nAnswer: Hewlett-Packard", "kgir_reflect_verdict": "Answer: HP",
            "reader": "Answer: HP"}[req.prompt]


def reader_calls(ws) -> list:
    """Every reader request the workspace's LLM is sent, in order."""
    sent: list = []
    inner = ws.llm.generate

    def generate(requests, stage="default", desc=None):
        sent.extend(r for r in requests if r.prompt == "reader")
        return inner(requests, stage=stage, desc=desc)
    ws.llm.generate = generate
    return sent


def record(out) -> dict:
    return {"qid": out.qid, "answer": out.answer, "trace": out.trace}


@pytest.mark.parametrize("variant", ["full", "no_subgraph", "no_reflection"])
def test_the_rebuilt_prompt_is_the_one_the_loop_sent(tiny_workspace, variant):
    """(a) is KGIR-RAG's own reader request, byte for byte (so its answers come from the run's cache)."""
    ws = tiny_workspace(script)
    sent = reader_calls(ws)
    [out] = KGIRRAG(variant=variant).run(ws, ws.dataset.questions[:1])
    prompt = ld.final_prompt(record(out), ws.cfg.passage_chars)
    passage = {p.pid: p for p in ws.dataset.corpus.passages}
    rebuilt = reader_request(prompt.question, prompt.context(passage), ws.cfg.max_tokens("reader"))
    assert [rebuilt.payload()] == [r.payload() for r in sent]
    assert bool(prompt.triples) == (variant != "no_subgraph")


def test_the_gold_only_prompt_is_the_gold_context_oracles(tiny_workspace):
    """(d) is the step attribution's ceiling, the very same request."""
    ws = tiny_workspace(script)
    q = ws.dataset.questions[0]
    [out] = KGIRRAG().run(tiny_workspace(script), [q])
    sent = reader_calls(ws)
    build_method("kgir_oracle_context").run(ws, [q])
    prompts = ld.conditions(ld.final_prompt(record(out), ws.cfg.passage_chars), q.gold_pids)
    passage = {p.pid: p for p in ws.dataset.corpus.passages}
    d = prompts["gold_only"]
    assert [reader_request(d.question, d.context(passage), ws.cfg.max_tokens("reader")).payload()] == \
        [r.payload() for r in sent]
    assert prompts["gold_uncut"].cut is None and prompts["gold_with_triples"].triples == prompts["as_run"].triples


def test_swap_in_gold_keeps_budget_order_and_the_gold_already_there():
    assert ld.swap_in_gold(["a", "b", "c", "d", "e"], ["b", "x", "y"]) == ["a", "b", "c", "x", "y"]
    assert ld.swap_in_gold(["x", "a", "b"], ["x", "y"]) == ["x", "a", "y"]  # the lowest-ranked non-gold goes
    assert ld.swap_in_gold(["a", "b"], ["a", "b"]) == ["a", "b"]  # nothing missing: unchanged
    assert ld.swap_in_gold(["a"], ["x", "y", "z"]) == ["x", "y", "z"]  # gold beyond the budget is appended
    assert ld.swap_in_gold([], ["x"]) == ["x"]


def test_final_prompt_reads_the_last_reader_call_and_leaves_out_what_has_none():
    rounds = [{"evidence_source": "subgraph", "evidence": "Triples:\n(A, r, B)", "final": None},
              {"evidence_source": "passages", "evidence": "Passages:\n...", "evidence_pids": ["p1"],
               "final": {"context_pids": ["p1", "p2"]}}]
    rec = {"qid": "q", "trace": {"question": "Q?", "rounds": rounds, "gold_answers": ["B"], "gold_pids": ["p2"]}}
    assert ld.final_prompt(rec, 600) == ld.ReaderPrompt("q", "Q?", "", ("p1", "p2"), 600)
    rounds[1]["evidence_source"], rounds[1]["evidence"] = "subgraph", "Triples:\n(A, r, B)"
    assert ld.final_prompt(rec, None).triples == "(A, r, B)"
    no_reader = {"qid": "n", "trace": {"rounds": [{"final": None}], "gold_pids": ["p"]}}
    no_gold = {"qid": "g", "trace": {"question": "?", "rounds": rounds, "gold_answers": ["x"], "gold_pids": []}}
    prompts, answers, left = ld.prompts_of([rec, no_reader, no_gold], 600)
    assert list(prompts) == ["q"] and answers == {"q": ("B",)}
    assert left == {"no gold passages": 1, "no reader call": 1}


def scored(em: dict) -> pd.DataFrame:
    """A reader's scores: ``em`` maps condition -> list of 0/100 per question."""
    rows = [{"qid": f"q{i}", "condition": c, "answer": "", "EM": float(v), "F1": float(v)}
            for c, values in em.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


SMALL = {"as_run": [0, 0, 0, 0, 100, 0], "retrieval_fixed": [100, 0, 0, 0, 100, 0],
         "gold_with_triples": [100, 100, 0, 0, 0, 0], "gold_only": [100, 100, 100, 0, 0, 0],
         "gold_uncut": [100, 100, 100, 100, 0, 0]}
LARGE = {c: [100 - v if i == 5 else v for i, v in enumerate(values)] for c, values in SMALL.items()}


def test_table_tests_every_step_and_the_reader_holm_over_the_declared_family():
    table = ld.decomposition_table({"small": scored(SMALL), "large": scored(LARGE)}, "mq")
    assert len(ld.family(["small", "large"])) == 13 == table[["p", "p vs first reader"]].notna().sum().sum()
    small = table[table["reader"] == "small"].set_index("condition")
    assert small["EM"].round(4).tolist() == [16.6667, 33.3333, 33.3333, 50.0, 66.6667]
    assert small.loc["retrieval_fixed", "EM b/c"] == "1/0" and small.loc["gold_with_triples", "EM b/c"] == "1/1"
    assert small.loc["retrieval_fixed", "ΔEM"] == pytest.approx(100 / 6)
    assert small.loc["retrieval_fixed", "p"] == mcnemar_exact([1, 0, 0, 0, 1, 0], [0, 0, 0, 0, 1, 0]).p == 1.0
    large = table[table["reader"] == "large"].set_index("condition")
    assert large["EM b/c vs first reader"].tolist() == ["1/0"] * 5
    assert large["ΔEM vs first reader"].round(4).tolist() == [16.6667] * 5
    raw = [table.set_index(["reader", "condition"]).loc[(r, c), "p" if against == "previous" else "p vs first reader"]
           for r, c, against in ld.family(["small", "large"])]
    adjusted = dict(zip(ld.family(["small", "large"]), holm(raw)))
    assert small.loc["gold_only", "p (Holm)"] == adjusted[("small", "gold_only", "previous")]
    assert large.loc["as_run", "p vs first reader (Holm)"] == adjusted[("large", "as_run", "small")]
    assert np.isnan(small.loc["as_run", "p"]) and np.isnan(small.loc["as_run", "p vs first reader"])


def test_a_test_no_question_can_make_counts_as_p_one():
    one = {c: [100] for c in ld.CONDITIONS}
    table = ld.decomposition_table({"only": scored(one)}, "d")
    assert table["p"].dropna().tolist() == [1.0] * 4 and table["p (Holm)"].dropna().tolist() == [1.0] * 4


def test_sentence_adds_up_and_names_the_readers():
    table = ld.decomposition_table({"small": scored(SMALL), "large": scored(LARGE)}, "mq")
    text = ld.decomposition_sentence(table, "mq")
    assert text == ("mq (n = 6, large): of the 50.0 EM points between KGIR-RAG's own prompt (33.3) and the uncut "
                    "gold passages (83.3), in this order the missing gold passages swapped in (retrieved-but-withheld "
                    "and never-retrieved alike) add +16.7, the distractor passages removed +0.0, the triples removed "
                    "+16.7, the cut lifted +16.7; on the same prompts it gains +16.7 over small at (a) and +16.7 at "
                    "(e).")
    assert "accounts" not in text
    assert "gains" not in ld.decomposition_sentence(table, "mq", reader="small")


def test_past_the_cut_reads_names_as_whole_words_in_the_cut_and_uncut_passage():
    gold = [Passage("p1", "Iowa", "Iowa became a state in 1846. " + "Filler words. " * 50 + "James K. Polk was "
                    "the president.")]
    assert ld.past_the_cut(["James K. Polk"], gold, 200)
    assert not ld.past_the_cut(["James K. Polk"], gold, None)  # uncut: seen
    assert not ld.past_the_cut(["1846"], gold, 200)  # before the cut
    assert not ld.past_the_cut(["Iowa"], gold, 1)  # the title is always shown
    assert not ld.past_the_cut(["Zachary Taylor"], gold, 200)  # in no gold passage at all


def test_decomposition_readers_are_checked(tmp_path):
    cfg = load_config("ci", results_dir=str(tmp_path / "r"), decomposition_readers=["a", "b"])
    assert cfg.decomposition_readers == ["a", "b"]
    for bad in ([], ["a", "a"], ["a", ""]):
        with pytest.raises(ConfigError, match="parameter 'decomposition_readers'"):
            load_config("ci", results_dir=str(tmp_path / "r"), decomposition_readers=bad)
    with pytest.raises(ValueError, match="parameter 'decomposition_readers': 'no-such-model' is not an embedded"):
        ld.reader_llms(dataclasses.replace(cfg, llm_backend="llamacpp", decomposition_readers=["no-such-model"]),
                       object())


def test_the_figure_draws_each_readers_waterfall_with_a_legend():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = pd.concat([ld.decomposition_table({"small": scored(SMALL), "large": scored(LARGE)}, d)
                       for d in ("mq", "hq")], ignore_index=True)
    fig = ld.plot_decomposition(table)
    ax = fig.axes[0]
    assert len(ax.patches) == 2 * 6  # per reader: (a), four steps, (e)
    assert [round(p.get_height(), 4) for p in ax.patches[:6]] == [16.6667, 16.6667, 0.0, 16.6667, 16.6667, 66.6667]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "(a) KGIR-RAG's own prompt", "a step's gain", "a step's loss", "(e) uncut gold passages"]
    assert [a.get_title() for a in fig.axes] == ["mq (n = 6)", "hq (n = 6)"]
    from kgir_lib import report

    png = report.figure_png(fig)  # two datasets: legible on a 1024-px page too
    assert min(report.figure_text_px(png, w) for w in report.FIGURE_FITS.values()) >= report.MIN_TEXT_PX
    plt.close(fig)


def test_the_results_page_states_the_local_cut_the_family_size_and_the_datasets_covered():
    import re

    from kgir_lib.config import PROJECT_ROOT

    text = " ".join((PROJECT_ROOT / "docs" / "results.md").read_text(encoding="utf-8").split())
    section = text[text.index("## Where the answers are lost: the local run"):text.index("## Beside the peers")]
    local = load_config("local")
    assert f"`passage_chars`, {local.passage_chars} on `local`" in section
    size = int(re.search(r"family of (\d+) tests", section).group(1))
    assert size == len(ld.family(local.decomposition_readers))
    covered = local.decomposition_scope
    if covered == ["musique_train"]:
        assert "covers musique_train's questions" in section and "hotpotqa's reader calls are still running" in section
    else:
        assert "covers musique_train" not in section  # the sentence goes when the decomposition covers every dataset


def test_the_local_reading_quotes_its_tables():
    """Every number of the results page's reading of the local decomposition, against the committed tables."""
    import re

    from kgir_lib.config import PROJECT_ROOT

    run = PROJECT_ROOT / "results" / "local" / "tables"
    if not (run / "04_loss_decomposition.csv").exists():
        pytest.skip("the local decomposition is not committed")
    text = " ".join((PROJECT_ROOT / "docs" / "results.md").read_text(encoding="utf-8").split())
    section = text[text.index("On musique_train the one large step is the swap"):text.index("## Beside the peers")]
    assert "accounts for" not in section and "the loss is retrieval's" not in section
    assert "hotpotqa" in section
    t = pd.read_csv(run / "04_loss_decomposition.csv")
    t = t[t["dataset"] == "musique_train"].set_index(["reader", "condition"])
    small, large = list(dict.fromkeys(t.index.get_level_values("reader")))
    fixed = re.search(r"turns (\d+) wrong answers of the 1\.5B right and no right one wrong \(\+([\d.]+) EM, Holm p "
                      r"([\d.]+)\), and (\d+) of the 0\.5B's \((\d+/\d+), Holm p ([\d.]+)\)", section)
    row = t.loc[(large, "retrieval_fixed")]
    assert row["EM b/c"] == f"{fixed.group(1)}/0" and f"{row['ΔEM']:.1f}" == fixed.group(2)
    assert f"{row['p (Holm)']:.4f}" == fixed.group(3)
    row = t.loc[(small, "retrieval_fixed")]
    assert row["EM b/c"] == fixed.group(5) == f"{fixed.group(4)}/0" and f"{row['p (Holm)']:.4f}" == fixed.group(6)
    distract = re.search(r"changes nothing \((\d+/\d+) for the 1\.5B\)", section)
    assert t.loc[(large, "gold_with_triples"), "EM b/c"] == distract.group(1)
    assert t.loc[(large, "gold_with_triples"), "ΔEM"] == 0
    later = t.loc[[(r, c) for r in (small, large) for c in ("gold_only", "gold_uncut")]]
    assert (later["p (Holm)"] >= 0.05).all()  # "a few points that Holm does not separate from noise"
    vs = t.loc[large]
    assert (vs["ΔEM vs first reader"] > 0).all() and (vs["p vs first reader (Holm)"] >= 0.05).all()
    cut = pd.read_csv(run / "04_passage_cut.csv").set_index("dataset").loc["musique_train"]
    quoted = re.search(r"longer than the (\d+) characters on (\d+) of the (\d+) questions, but the gold answer lies "
                       r"only past the cut on (\d+) and a gold bridge on (\d+)", section)
    assert quoted.groups() == tuple(str(int(cut[c])) for c in (
        "passage_chars", "gold passage longer than the cut", "questions", "answer only past the cut",
        "bridge only past the cut"))
    hot = pd.read_csv(run / "04_loss_decomposition.csv")
    hot = hot[hot["dataset"] == "hotpotqa"].set_index(["reader", "condition"])
    quoted = re.search(r"turn (\d+) wrong answers of the 1\.5B right and (\d+) right one wrong \(\+([\d.]+) EM, Holm p "
                       r"([\d.]+)\)", section)
    row = hot.loc[(large, "retrieval_fixed")]
    assert row["EM b/c"] == f"{quoted.group(1)}/{quoted.group(2)}" and f"{row['ΔEM']:.1f}" == quoted.group(3)
    assert f"{row['p (Holm)']:.4f}" == quoted.group(4)
    ceiling = re.search(r"the 1\.5B answers ([\d.]+), above the ([\d.]+) of the gold passages alone .* dropping the "
                        r"triples loses ([\d.]+) points \((\d+/\d+), not significant\)", section)
    assert ceiling.group(1) == f"{hot.loc[(large, 'retrieval_fixed'), 'EM']:.1f}"
    assert ceiling.group(2) == f"{hot.loc[(large, 'gold_only'), 'EM']:.1f}"
    assert ceiling.group(3) == f"{-hot.loc[(large, 'gold_only'), 'ΔEM']:.1f}"
    assert ceiling.group(4) == hot.loc[(large, "gold_only"), "EM b/c"] and hot.loc[(large, "gold_only"), "p (Holm)"] >= 0.05
    attr = pd.read_csv(run / "04_step_attribution.csv").set_index(["dataset", "key"])
    assert ceiling.group(2) == f"{attr.loc[('hotpotqa', 'kgir_oracle_context'), 'EM']:.1f}"  # the attribution's ceiling
    hcut = pd.read_csv(run / "04_passage_cut.csv").set_index("dataset").loc["hotpotqa"]
    longer = re.search(r"a gold passage is longer than the cut on (\d+) of (\d+)\)", section)
    assert longer.groups() == (str(int(hcut["gold passage longer than the cut"])), str(int(hcut["questions"])))
    assert hcut["answer only past the cut"] == 0 and hcut["bridge only past the cut"] == 0  # "hides ... of no question"
    small_swap = re.search(r"The 0\.5B gains less from the same swap \((\d+/\d+), Holm p ([\d.]+)\)", section)
    assert small_swap.group(1) == hot.loc[(small, "retrieval_fixed"), "EM b/c"]
    assert small_swap.group(2) == f"{hot.loc[(small, 'retrieval_fixed'), 'p (Holm)']:.2f}"
    lead = hot.loc[large, "ΔEM vs first reader"]
    assert lead.idxmax() == "retrieval_fixed" and (hot.loc[large, "p vs first reader (Holm)"] >= 0.05).all()
    share = re.search(r"of the (\d+) points the gold passages alone add over the full method, (\d+) come with the swap",
                      section)
    assert share.group(1) == f"{attr.loc[('musique_train', 'kgir_oracle_context'), 'ΔEM']:.0f}"
    assert share.group(2) == f"{t.loc[(large, 'retrieval_fixed'), 'ΔEM']:.0f}"


def test_readers_usage_is_each_readers_decomposition_calls_since_the_snapshot(make_llm):
    from kgir_lib.llm import ChatRequest

    own, other = make_llm(lambda r: "Answer: x"), make_llm(lambda r: "Answer: y", cache=False)
    own.generate([ChatRequest.chat(None, "before")], stage="kgir_final")  # the loop's own calls: not counted
    readers = {"small": own, "large": other}
    before = {m: r.usage.snapshot() for m, r in readers.items()}
    own.generate([ChatRequest.chat(None, "a"), ChatRequest.chat(None, "b")], stage=ld.STAGE)
    other.generate([ChatRequest.chat(None, "a")], stage=ld.STAGE)
    used = ld.readers_usage(readers, before)
    assert {k: v.calls for k, v in used.stages.items()} == {f"{ld.STAGE} small": 2, f"{ld.STAGE} large": 1}
    assert ld.readers_usage(readers, {m: r.usage.snapshot() for m, r in readers.items()}).stages == {}

