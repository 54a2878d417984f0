# %% [markdown]
# # 07 — Case study: KGIR-RAG step by step (paper §3.5, Fig. 6)
#
# The paper illustrates its loop with one question (Fig. 6): *"Which company merged in 2002 with the
# top PC maker of 1994?"*. The evidence subgraph of the first retrieval says the top PC maker of 1994
# was **Compaq** (a *bridge entity*); the question is rewritten around it — *"Which company did Compaq
# merge with in 2002?"*; the retrieval for the rewritten question finds the Compaq–HP merger, and
# reflection answers **Hewlett-Packard**.
#
# Fig. 6 is a **chain**: the bridge entity is in the first evidence subgraph, the rewrite names it, the
# rewritten question's retrieval finds the next hop, and the answer is correct. This notebook follows one
# question of the run through every stage of KGIR-RAG and draws the chain:
#
# 1. dense retrieval `D_q` (eq. 2) and the triples of those passages `G_q` (eq. 3);
# 2. the LLM's named entities `E_q` (eq. 4) and their matches in `G_q` (eq. 5; the rule of this run is printed
#    below the parameters);
# 3. the evidence subgraph `G_Ans` (eqs. 5-7; notebook 03 draws how it is built), drawn as the path that
#    matters: from a seed to the bridge entity, and from the bridge to the answer;
# 4. each rewrite `q' = Rewrite(q, q_history, G_Ans)` (eq. 8, Fig. 4);
# 5. each reflection verdict with its chain-of-thought reasoning (Fig. 5);
# 6. the final answer against the gold answers, and what every baseline answered for the same question.
#
# **Which question.** One library call, `kgir_lib.notebook.case.choice.choose_case`, reads the KGIR-RAG traces that
# notebook 04 wrote and takes the question that went **furthest along the chain**; it says plainly whether
# any question of the run completed it, and where the chosen one stopped. Give `dataset` and `qid` to study
# any other question. With no traces at all the notebook takes the first sampled question of the profile's
# first dataset.
#
# A second part runs a **free question** over a small corpus you supply (`free_question`,
# `free_passages` as `[(title, text), ...]`, `free_answers`); by default, the paper's own Fig. 6
# question over a six-passage corpus written for this suite. Its triples are extracted with the
# profile's LLM first (§2.1), then the same loop runs.
#
# Every LLM call goes through the run's cache: a question notebook 04 already answered costs nothing.

# %% tags=["parameters"]
profile = None              # None: $KGIR_PROFILE, else "sample"
config_overrides = {}      # any other Config field, e.g. {"llm_model": "...", "top_k": 5}; a field passed
                           # by name (papermill / runner -p NAME VALUE) reaches the config too
dataset = None          # e.g. "musique"; None: the best Fig. 6 candidate of the run's traces
qid = None              # question id in `dataset`
free_question = None    # None: the paper's Fig. 6 question
free_passages = None    # [(title, text), ...]; None: the Fig. 6 corpus of kgir_lib.notebook.case.build.FIGURE6_EXAMPLE
free_answers = None     # gold answers of the free question (optional)
baselines = None        # method names for the baseline comparison; None: every method

# %%
import re

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from kgir_lib import report
from kgir_lib.data import load_dataset, sample_questions
from kgir_lib.notebook import narrative
from kgir_lib.notebook.case.baselines import baseline_answers
from kgir_lib.notebook.case.bridges import bridge_summary, find_bridge_cases
from kgir_lib import KGIRPipeline
from kgir_lib.notebook.case.build import FIGURE6_EXAMPLE, case_from_dataset, case_from_pipeline, checked_passages
from kgir_lib.notebook.case.records import FREE_DATASET
from kgir_lib.notebook.case.choice import case_chain, case_chain_note, choose_case, gold_chain
from kgir_lib.notebook.case.display import (display_case, draw_case, show_ner, show_reflections, show_retrieval,
                                            show_rewrites, show_subgraphs)
from kgir_lib.notebook.case.records import load_kgir_traces
from kgir_lib.notebook.display import show
from kgir_lib.notebook.opening import open_notebook

cfg, llm = open_notebook("07_case_study", globals())
display(Markdown(narrative.algorithm1_settings(cfg) + f"\n* loop: at most {cfg.max_iterations} rounds "
                 "(`max_iterations`)."))

# %% [markdown]
# ## 1. Choosing the question
#
# Every full KGIR-RAG trace of the run on the profile's `datasets`, with the steps of the chain it took
# (`reached`: how many in a row), judged against the **gold bridge entity** of the question (`kgir_lib.notebook.case.choice.gold_chain`, the bridge
# funnel of notebook 04: MuSiQue's first-hop answers, HotpotQA's unnamed supporting title): the gold bridge is an entity
# of `G_Ans`; the rewrite names it; the rewritten question's retrieval `D'_t` brings a passage of the next hop
# that `D_t` lacked; the answer is correct. Questions without a gold bridge (HotpotQA comparison questions) take
# no step.

# %%
chain = gold_chain(cfg.data_path, cfg.datasets)
choice = choose_case(load_kgir_traces(cfg, cfg.datasets), dataset, qid, chain=chain)
print(choice.note)
candidates = choice.table
if choice.qid is not None:
    dataset, qid = choice.dataset, choice.qid
    if len(candidates):
        cand_path = report.save_table(candidates.head(20).set_index(["dataset", "qid"]), cfg, "07_bridge_candidates",
                                      "KGIR-RAG traces ranked by how far they go along the Fig. 6 chain (notebook 07).")
        show(candidates.head(20).set_index(["dataset", "qid"])[["reached", *choice.steps, "question", "rewrite",
                                                                "bridge", "answer", "gold"]],
             "the traces that went furthest along the Fig. 6 chain", max_rows=8, wrap=30, full=cand_path)
else:
    dataset = dataset or cfg.datasets[0]
    ds0 = load_dataset(dataset, cfg.data_path)
    qid = sample_questions(ds0.questions, cfg.n_questions, cfg.seed)[0].qid
    print(f"the first sampled question of {dataset} instead: {qid}")

# %% [markdown]
# **Which method finds the bridge?** The funnel's "names the bridge" step asked of every iterative method
# (`kgir_lib.eval.mechanism.funnel.bridge_naming_table`): KGIR-RAG's rewrites, IRCoT's reasoning sentences,
# ITER-RETGEN's generations and HyDE's hypothetical passages; whether the retrieval made with that text then finds the
# next hop; McNemar of naming against KGIR-RAG on the same questions. Methods whose traces this run lacks are absent.

# %%
from kgir_lib.eval.mechanism.tables import mechanism_tables

naming = mechanism_tables(cfg.run_dir, cfg.datasets, data_dir=cfg.data_path,
                          context_passages=cfg.context_passages)["bridge_naming"]
if len(naming):
    show(naming.set_index(["dataset", "method"]), "who names the gold bridge entity, and finds the next hop")
    report.save_table(naming.set_index(["dataset", "method"]).round(3), cfg, "07_bridge_naming",
                      "Iterative methods naming the gold bridge entity in their generated text, and finding the "
                      "next hop with it (notebook 07). " + report.model_note(cfg, short=True));

# %% [markdown]
# How often each step of the pattern happens over the whole run, per dataset. A reflection that answers in
# round 1 ends the loop after one rewrite and one retrieval with it: no rewritten question ever starts a second
# round, so on such a run KGIR-RAG's score measures its first round, not the iteration.
#
# This table reads the *shape* of Fig. 6 without the gold answer (`kgir_lib.notebook.case.bridges`): not answered
# in round 1, the round-1 rewrite names an entity of `G_Ans` the question did not name, answered in round 2. It
# does not ask whether that entity is the gold bridge, so its "whole Fig. 6 pattern" can count questions that the
# gold chain of section 1 (which does) does not.

# %%
steps = bridge_summary(find_bridge_cases(load_kgir_traces(cfg, cfg.datasets)))
show(steps, "traces per dataset taking each step of the Fig. 6 pattern")
if len(steps):
    report.save_table(steps, cfg, "07_bridge_summary",
                      "KGIR-RAG traces per dataset taking each step of the Fig. 6 pattern (notebook 07). "
                      + report.model_note(cfg, short=True));

# %% [markdown]
# ## 2. Running KGIR-RAG on it
#
# `case_from_dataset` builds the run's workspace for the dataset (its knowledge graph, dense index and
# LLM cache) and runs the full method on this one question, keeping its trace. The overview has one row
# per round of the loop.

# %%
case = case_from_dataset(cfg, dataset, qid, llm=llm)
display(Markdown(f"**Question** ({dataset} `{qid}`): {case.question}  \n**Gold**: {' | '.join(case.gold_answers)}"))
show(case.steps_frame(), "one row per round")

# %% [markdown]
# **Its chain, from the question's own gold.** The dataset's gold chain of this question (MuSiQue's decomposition,
# HotpotQA's supporting titles; `kgir_lib.gold`, for a question of any dataset, in the profile or not) names its
# bridge entity and the passage of the next hop; the case is read with notebook 04's funnel steps, round by round
# (`kgir_lib.notebook.case.choice.case_chain`). Each step is judged on its own, so a rewrite that names the bridge
# shows as such even where no seed matched; "breaks at" follows the chain, the first step not taken with every one
# before it (the funnel's count).

# %%
from kgir_lib.notebook.case.choice import gold_bridge_names

own_chain = case_chain(case)
if len(own_chain):
    show(own_chain.set_index("round"), f"the Fig. 6 chain of this question (gold bridge: "
                                       f"{', '.join(gold_bridge_names(case))})")
    print(case_chain_note(own_chain))
else:
    print("This question has no gold bridge entity (a comparison or yes/no question, or a bridge the question "
          "already names): its chain has no step to read; the stages below still show every step.")

# %% [markdown]
# ## 3. Retrieval (eq. 2): `D_q`, the top-k passages by cosine similarity
#
# Rounds after the first retrieve with the rewritten question. Gold (supporting) passages are marked.

# %%
show_retrieval(case)

# %% [markdown]
# ## 4. Question entities (eq. 4) and their matches in `G_q` (eq. 5)
#
# `G_q` is the set of triples extracted from the retrieved passages. The LLM lists the question's
# entities; entities that do not occur in the question are dropped (a small model copies its few-shot
# examples), and when none is left or none matches, the graph entities named in the question are used
# (the *fallback*). Each question entity is matched to every graph entity whose similarity reaches the
# threshold (the rule printed at the top); the matched entities are the *seeds*.

# %%
show_ner(case)

# %% [markdown]
# ## 5. The bridge: from a seed to the bridge entity, and on to the answer (eqs. 5-7, Fig. 6)
#
# `G_Ans` of a sample question holds dozens of triples; drawn whole it says nothing. The drawing shows only
# the path that matters (`kgir_lib.notebook.case.bridge_viz`): in purple, the chain of round 1's `G_Ans` from a seed to
# the
# **bridge entity** the rewrite names; in green, the triples of any round's `G_Ans` joining the bridge to an
# entity that names the answer (the next hop); pale, a few more `G_Ans` triples around them, 30 triples at
# most. The sentence above the drawing says what it shows; when there is nothing to draw it says so instead.
# The table below it lists the heaviest `G_Ans` triples of each round.

# %%
from kgir_lib.notebook.case.bridge_viz import bridge_view

view = bridge_view(case)
print(view.note)
fig = draw_case(case)
safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{dataset}_{qid}")
if fig is not None:
    report.save_figure(fig, cfg, f"07_case_bridge_{safe}")
    display(fig)
    plt.close(fig)
show_subgraphs(case)

# %% [markdown]
# ## 6. Rewrites (eq. 8, Fig. 4)
#
# The LLM replaces the part of the question the triples answer with the facts themselves. The entities
# of `G_Ans` that a rewrite introduces (and the question did not name) are the bridge entities of Fig. 6.

# %%
show_rewrites(case)

# %% [markdown]
# ## 7. Reflection (§2.4, Fig. 5)
#
# Reflection sees `G_Ans`, the rewrite history and the passages the rewritten question retrieved that the
# round's first retrieval had not; it reasons step by step and either answers or says what is missing,
# which drives the next round. In the last round it must answer; a question it still leaves open is stopped
# by the round cap (a *forced* answer). Either way the shared reader then words the answer from what the
# reflection read (unless `cfg.kgir_answer_source` hands that to the reflection's `Answer:` line), so the
# reflection's own answer and the final answer can differ. Each round shows, side by side, the passages the
# reflection read and those the reader read (gold ones marked), so a final answer that differs from the
# reflection's can be traced to what each was handed; section 8 puts the two answers side by side.

# %%
show_reflections(case)

# %% [markdown]
# ## 8. Final answer, and what the baselines answered
#
# EM / F1 use SQuAD normalisation against the gold answer and its aliases. Baseline answers are read from
# the run's trace files when notebooks 04/05 answered this question (`source = trace`), otherwise the
# method runs now on this one question (`source = run`, through the cache).

# %%
show(case.result_frame(), index=False)
answers = baseline_answers(case, methods=baselines)
report.save_table(case.steps_frame(), cfg, f"07_case_steps_{safe}",
                  f"KGIR-RAG rounds for {dataset} {qid}: {case.question}")
report.save_table(answers, cfg, f"07_case_answers_{safe}",
                  f"Answers of every method for {dataset} {qid}: {case.question}")
print(report.model_note(cfg, short=True))
show(answers, "what every method answered")

# %% [markdown]
# ## 9. A free question over your own passages
#
# The same loop on a corpus given in the notebook: by default the paper's Fig. 6 question over six short
# passages written for this suite (Compaq, Hewlett-Packard and four distractors). The passages' triples
# are extracted with the profile's LLM first — the offline stage of §2.1 in miniature. The example's gold hops
# (the top PC maker of 1994 is Compaq, then Compaq's 2002 merger) make the Compaq and Hewlett-Packard passages its
# gold passages: they are marked in what the reflection and the reader read, and give the case its Recall@k
# (KGIR-RAG itself reads no gold). **Run 1**: KGIR-RAG as the model runs it (the paper's method).

# %%
example = FIGURE6_EXAMPLE
passages = checked_passages(free_passages if free_passages is not None else example["passages"])
rag = KGIRPipeline(cfg, llm=llm).index(passages, name=FREE_DATASET)  # the public API (README)
free = case_from_pipeline(rag, free_question or example["question"],
                          free_answers if free_answers is not None else
                          (example["answers"] if free_question is None else ()),
                          decomposition=example["decomposition"] if free_question is None else ())
print(f"extracted {len(free.ws.kg)} triples from {len(free.ws.dataset.corpus)} passages")
show(free.ws.kg.to_frame(), "the triples extracted from the free passages", index=False)
free_fig = display_case(free)
if free_fig is not None:
    report.save_figure(free_fig, cfg, "07_free_question_bridge");

# %% [markdown]
# **The free question in the funnel's terms.** For the paper's question the gold bridge is known (Compaq) and so is
# the next hop (the Hewlett-Packard passage), so the case is read with notebook 04's funnel steps, round by round
# (`kgir_lib.notebook.case.choice.case_chain`). With six passages and a `top_k` of six or more (10 on the `local`
# and `paper` profiles), `D_1` holds every passage, the next hop included: on this corpus step 4 has nothing left
# to find (the column "next hop already in D_t" says so), and a dataset question (the sections above) is where it
# can be measured.

# %%
if free_question is None and example["bridge"]:
    free_chain = case_chain(free, example["bridge"], example["next_hop"])
    show(free_chain.set_index("round"), f"the Fig. 6 chain of the free question (gold bridge {example['bridge']})")
    print(case_chain_note(free_chain))
else:
    print("A free question of your own has no known bridge: read its stages above.")

# %% [markdown]
# **Run 2: the same question with the oracle rewrite** (the study variant `kgir_oracle_rewrite` of notebook 04
# §3b, not the paper's method). The example carries its gold decomposition (hop 1: the top PC maker of 1994 is
# Compaq; hop 2: "Which company did #1 merge with in 2002?"), so round 1's rewrite is the ideal one, hop 2 with
# `#1` replaced by Compaq: "Which company did Compaq merge with in 2002?", written without an LLM call; everything
# else (retrieval, subgraph, reflection, reader) runs as in run 1. The table puts round 1 of both runs side by
# side: who wrote the rewrite, where the Hewlett-Packard passage (the next hop) ranks in `D_1` and in the
# rewritten question's `D'_1`, whether the reflection and the reader read it, and the answer. When run 1's rewrite
# already names Compaq, the two runs coincide from retrieval on.

# %%
from kgir_lib.notebook.case.choice import next_hop_reading

if free_question is None and example["decomposition"]:
    oracle_rag = KGIRPipeline(cfg, llm=llm, variant="oracle_rewrite").index(example["passages"], name=FREE_DATASET)
    oracle_free = case_from_pipeline(oracle_rag, example["question"], example["answers"],
                                     decomposition=example["decomposition"])
    runs = {"run 1: KGIR-RAG (the model's rewrite)": free, "run 2: oracle rewrite (study variant)": oracle_free}
    both = next_hop_reading(runs, example["next_hop"]).set_index("run")
    show(both, f"round 1 of both runs (next hop: the {', '.join(example['next_hop'])} passage)")
    report.save_table(both, cfg, "07_free_question_runs",
                      "The paper's Fig. 6 question over its six passages, round 1 of two runs: KGIR-RAG as the model "
                      "does it, and with the oracle rewrite (notebook 07). " + report.model_note(cfg, short=True))
    display(Markdown("**Run 2, round by round**: what its reflection and reader read and said."))
    show_reflections(oracle_free)
    oracle_chain = case_chain(oracle_free, example["bridge"], example["next_hop"])
    show(oracle_chain.set_index("round"), "run 2 (oracle rewrite) in the funnel's terms")
    print("Run 2 (oracle rewrite): " + case_chain_note(oracle_chain))
else:
    print("A free question of your own has no gold decomposition: no oracle run.")

# %% [markdown]
# **What the two runs show, per model** (each profile's `07_free_question_runs` table). With the `local` profile's
# 1.5B model both runs answer Hewlett-Packard: on six passages the first retrieval already holds the HP passage, so
# a rewrite that does not name Compaq costs nothing here. With the `sample` profile's 0.5B model both runs answer
# Gateway, although its reflection and reader read the HP passage: the oracle rewrite cannot mend a reader that
# misreads what it is handed, which is where this small model's chain breaks.

# %% [markdown]
# ## What this shows, and what it does not
#
# - The trace exposes every intermediate the paper describes; with a small embedded model (named in the first output) the NER,
#   rewrites and verdicts are often poor (copied examples, unchanged rewrites, premature answers), which
#   is exactly what the per-stage view makes visible. The candidate table above says how often the
#   sample run followed the Fig. 6 pattern at all.
# - The paper's Fig. 6 uses Qwen2.5-72B and bge-reranker-large; run this notebook on the `paper` profile
#   (after the main job) to see the same stages with those models.

# %%
show(llm.usage.table(), "LLM usage of this notebook (calls include cache hits)")
