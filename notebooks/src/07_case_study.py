# %% [markdown]
# # 07 — The whole chain once: one question through KGIR-RAG, step by step (paper §3.5, Fig. 6)
#
# The paper illustrates its loop with one question (Fig. 6): *"Which company merged in 2002 with the top PC maker of
# 1994?"*. The evidence subgraph of the first retrieval says the top PC maker of 1994 was **Compaq** (a *bridge
# entity*); the question is rewritten around it, *"Which company did Compaq merge with in 2002?"*; the retrieval for
# the rewritten question finds the Compaq-HP merger, and the reflection answers **Hewlett-Packard**.
#
# That is a **chain** of five steps, the same five notebook 04's funnel counts: (1) a seed matches the question's
# entity, (2) the bridge is in `G_Ans`, (3) the rewrite names it, (4) the rewritten question's retrieval `D'_t` brings
# the next hop's passage, (5) the answer is right. This notebook shows one question of the run on which every step
# holds, follows it through KGIR-RAG's stages, and then runs the paper's own question. How the question was chosen,
# what the other questions did and every stage in full are under the last heading, *Audit: every number behind this
# notebook*.

# %% tags=["parameters"]
profile = None              # None: $KGIR_PROFILE, else "sample"
config_overrides = {}      # any other Config field, e.g. {"llm_model": "...", "top_k": 5}; a field passed
                           # by name (papermill / runner -p NAME VALUE) reaches the config too
dataset = None          # e.g. "musique"; None: the best Fig. 6 candidate of the run's traces
qid = None              # question id in `dataset`
free_question = None    # None: the paper's Fig. 6 question
free_passages = None    # [(title, text), ...]; None: the Fig. 6 corpus (case.build.FIGURE6_EXAMPLE)
free_answers = None     # gold answers of the free question (optional)
baselines = None        # method names for the baseline comparison; None: every method

# %% tags=["hide-input"]
import re

import pandas as pd
from IPython.display import Markdown, display

from kgir_lib import KGIRPipeline, report
from kgir_lib.data import load_dataset, sample_questions
from kgir_lib.eval.mechanism.funnel import NAMING_NOTES, STEPS
from kgir_lib.eval.mechanism.tables import mechanism_tables
from kgir_lib.notebook import narrative
from kgir_lib.notebook.case.baselines import baseline_answers
from kgir_lib.notebook.case.bridge_viz import bridge_view
from kgir_lib.notebook.case.bridges import bridge_summary, find_bridge_cases
from kgir_lib.notebook.case.build import FIGURE6_EXAMPLE, case_from_dataset, case_from_pipeline, checked_passages
from kgir_lib.notebook.case.chain_draw import chain_steps, draw_chain
from kgir_lib.notebook.case.choice import (INTERVENTIONS, WHOLE, case_chain, case_chain_note, chain_marks,
                                           choose_case, find_intervention, gold_bridge_names, gold_chain,
                                           next_hop_reading)
from kgir_lib.notebook.case.display import (display_case, draw_case, show_ner, show_reflections, show_retrieval,
                                            show_rewrites, show_subgraphs)
from kgir_lib.notebook.case.records import FREE_DATASET, load_kgir_traces
from kgir_lib.notebook.display import show, show_figure
from kgir_lib.notebook.opening import open_notebook
from kgir_lib.registry import LABELS, build_method

# a question asked by hand runs on its own dataset, so the first output names that dataset, not the profile's
cfg, llm = open_notebook("07_case_study", globals(), datasets=[dataset] if dataset else None)

# %% [markdown]
# ## 1. One question, and its whole chain
#
# `kgir_lib.notebook.case.choice.choose_case` reads the run's KGIR-RAG traces and takes the question that went
# furthest along the chain, judged against each question's **gold bridge entity** (MuSiQue's first-hop answers,
# HotpotQA's unnamed supporting title). When no question of the model's own run completes the chain, the smallest
# labelled intervention that does is shown beside it (`find_intervention`: one more round of the forced-rounds study
# variant, then the gold of one step, then of several; notebook 04's study variants, never the paper's method). Give
# `dataset` and `qid` to study any other question. The table has one row a round; the drawing is the round where the
# chain went furthest, each step green where it holds.

# %% tags=["hide-input"]
asked = qid is not None
chain = gold_chain(cfg.data_path, cfg.datasets)
choice = choose_case(load_kgir_traces(cfg, cfg.datasets), dataset, qid, chain=chain)
print(choice.note)
if choice.qid is not None:
    dataset, qid = choice.dataset, choice.qid
else:
    dataset = dataset or cfg.datasets[0]
    qid = sample_questions(load_dataset(dataset, cfg.data_path).questions, cfg.n_questions, cfg.seed)[0].qid
    print(f"the first sampled question of {dataset} instead: {qid}")
intervention = None
if not asked and not choice.full and len(choice.table):
    intervention = find_intervention(cfg.run_dir, cfg.datasets, chain, choice.table)
if intervention is not None:
    dataset, qid = intervention.dataset, intervention.qid
    print(f"The model's own run completes the chain on no question; {LABELS[intervention.key]} (a study variant) "
          f"completes it on {qid} of {dataset}, where the model's own run took {intervention.natural_reached} of its "
          f"steps in a row: both runs are shown.")
elif not asked and not choice.full and len(choice.table):
    print("No study variant of this run (" + ", ".join(LABELS[k] for k in INTERVENTIONS) + ") completes the chain "
          "on any question either: the question shown is the one the model's own run took furthest.")
case = case_from_dataset(cfg, dataset, qid, llm=llm)
runs = {"KGIR-RAG as the model runs it": case}
if intervention is not None:
    runs[f"{LABELS[intervention.key]} (study variant)"] = case_from_dataset(cfg, dataset, qid, llm=llm,
                                                                           method=build_method(intervention.key))
display(Markdown(f"**Question** ({dataset} `{qid}`): {case.question}  \n**Gold**: {' | '.join(case.gold_answers)}; "
                 f"gold bridge entity: {', '.join(gold_bridge_names(case)) or 'none'}"))
chains = {label: case_chain(c) for label, c in runs.items()}
if all(len(c) for c in chains.values()):
    table = pd.concat({label: c for label, c in chains.items()}, names=["run", "i"]).reset_index(level="i", drop=True)
    table.insert(0, "dataset", dataset)
    table.insert(1, "qid", qid)
    report.save_table(table, cfg, "07_case_chain",
                      f"The Fig. 6 chain of {dataset} {qid}, round by round, in the funnel's terms (notebook 04): each "
                      f"step on its own; 'breaks at' is the first step not taken with every one before it. "
                      + report.model_note(cfg, short=True))
    show(chain_marks(table.drop(columns=["dataset", "qid"]).reset_index().set_index(["run", "round"])),
         "the chain of this question, round by round", wrap=30)
    for label, c in runs.items():
        t = chains[label]
        depth = t["breaks at"].map(lambda b: len(STEPS) if b == WHOLE else STEPS.index(b))
        best = int(t.loc[depth.idxmax(), "round"])
        whole = depth.max() == len(STEPS)
        show_figure(draw_chain(chain_steps(c, best), f"{label}, round {best}: "
                               + ("every step holds" if whole else "the chain breaks")),
                    cfg, "07_case_chain" if c is case else "07_case_chain_intervention")
        print(f"{label}: {case_chain_note(t)}")
else:
    print("This question has no gold bridge entity (a comparison or yes/no question, or a bridge the question already "
          "names): its chain has no step to read; the stages below still show every step.")

# %% [markdown]
# ## 2. The question through KGIR-RAG's stages
#
# The evidence subgraph `G_Ans` of a real question holds dozens of triples; the drawing shows only the path that
# matters (`kgir_lib.notebook.case.bridge_viz`): in purple, the chain of round 1's `G_Ans` from a seed to the bridge
# entity the rewrite names; in green, triples of any round's `G_Ans` joining the bridge to an entity that names the
# answer; pale, a few more `G_Ans` triples around them. Then the rewrite (eq. 8, Fig. 4) with the passages its
# retrieval brought that the round's first retrieval `D_t` had not, and the reflection (Fig. 5) with what it and the
# shared reader read (gold passages marked).

# %%
print(bridge_view(case).note)
safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{dataset}_{qid}")
drawing = draw_case(case)
if drawing is not None:
    show_figure(drawing, cfg, f"07_case_bridge_{safe}")
show_rewrites(case)
show_reflections(case)

# %% [markdown]
# ## 3. What every method answered
#
# EM / F1 use SQuAD normalisation against the gold answer and its aliases. The other methods' answers are read from
# the run's trace files when notebooks 04/05 answered this question (`source = trace`), otherwise the method runs now
# on this one question (`source = run`, through the cache).

# %%
answers = baseline_answers(case, methods=baselines)
report.save_table(case.steps_frame(), cfg, f"07_case_steps_{safe}",
                  f"KGIR-RAG rounds for {dataset} {qid}: {case.question}")
report.save_table(answers, cfg, f"07_case_answers_{safe}",
                  f"Answers of every method for {dataset} {qid}: {case.question}")
print(report.model_note(cfg, short=True))
show(answers, "what every method answered")

# %% [markdown]
# ## 4. The paper's own question, with this run's model
#
# The same loop on a corpus given in the notebook: by default the paper's Fig. 6 question over six short passages
# written for this suite (Compaq, Hewlett-Packard and four distractors), their triples extracted with the profile's
# LLM first. **Run 1** is KGIR-RAG as the model runs it (the paper's method); **run 2** hands round 1 the ideal rewrite
# (the study variant `kgir_oracle_rewrite` of notebook 04: "Which company did Compaq merge with in 2002?", written
# without an LLM call), everything else as in run 1. The table puts round 1 of both side by side: who wrote the
# rewrite, where the Hewlett-Packard passage (the next hop) ranks in `D_1` and in the rewritten question's `D'_1`,
# whether the reflection and the reader read it, and the answer, by the model printed under it.

# %% tags=["hide-input"]
example = FIGURE6_EXAMPLE
passages = checked_passages(free_passages if free_passages is not None else example["passages"])
rag = KGIRPipeline(cfg, llm=llm).index(passages, name=FREE_DATASET)  # the public API (README)
free = case_from_pipeline(rag, free_question or example["question"],
                          free_answers if free_answers is not None else
                          (example["answers"] if free_question is None else ()),
                          decomposition=example["decomposition"] if free_question is None else ())
oracle_free = None
if free_question is None and example["decomposition"]:
    oracle_rag = KGIRPipeline(cfg, llm=llm, variant="oracle_rewrite").index(example["passages"], name=FREE_DATASET)
    oracle_free = case_from_pipeline(oracle_rag, example["question"], example["answers"],
                                     decomposition=example["decomposition"])
    free_runs = {"run 1: KGIR-RAG (the model's rewrite)": free, "run 2: oracle rewrite (study variant)": oracle_free}
    both = next_hop_reading(free_runs, example["next_hop"]).set_index("run")
    show(both, f"round 1 of both runs, answered by {cfg.llm_model} (next hop: the {', '.join(example['next_hop'])} "
               f"passage)")
    report.save_table(both, cfg, "07_free_question_runs",
                      "The paper's Fig. 6 question over its six passages, round 1 of two runs: KGIR-RAG as the model "
                      "does it, and with the oracle rewrite (notebook 07). " + report.model_note(cfg, short=True))
    print(f"Answered by {cfg.llm_model} (profile '{cfg.profile}'): run 1 {free.answer!r} "
          f"({'right' if free.em else 'wrong'}), run 2 {oracle_free.answer!r} ({'right' if oracle_free.em else 'wrong'})"
          f"; gold: {' | '.join(example['answers'])}.")
else:
    print(f"A free question of your own: answered by {cfg.llm_model} {free.answer!r}; every stage is in the audit.")

# %% [markdown]
# **What the two runs show, per model** (each profile's `07_free_question_runs` table). With the `local` profile's
# 1.5B model both runs answer Hewlett-Packard: on six passages the first retrieval already holds the HP passage, so
# a rewrite that does not name Compaq costs nothing here. With the `sample` profile's 0.5B model both runs answer
# Gateway, although its reflection and reader read the HP passage: the oracle rewrite cannot mend a reader that
# misreads what it is handed, which is where this small model's chain breaks.

# %% [markdown]
# ## What this shows, and what it does not
#
# - The chain of Fig. 6 can be followed step by step on a real question of the run: section 1 says whether the model
#   completes it by itself, and where it breaks when it does not. How often it completes it over the whole run is
#   notebook 04's funnel (and the candidates table in the audit).
# - With a small embedded model (named in the first output) the NER, rewrites and verdicts are often poor (copied
#   examples, unchanged rewrites, premature answers), which is exactly what the per-stage view makes visible.
# - The paper's Fig. 6 uses Qwen2.5-72B and bge-reranker-large; run this notebook on the `paper` profile (after the
#   main job) to see the same stages with those models.

# %% [markdown]
# ## Audit: every number behind this notebook
#
# Everything below backs the story above; each subsection stands on its own (a later table is a new subsection at
# the end). The saved tables are in `results/<profile>/tables/07_*` (the chain `07_case_chain`, the candidates
# `07_bridge_candidates`, the naming `07_bridge_naming`, the pattern `07_bridge_summary`, the case's steps and answers,
# the Fig. 6 runs `07_free_question_runs`), the figures in `figures/<profile>/07_*`.
#
# ### The run's settings
#
# Algorithm 1 and the loop as this run configures them (notebook 03 explains each).

# %%
display(Markdown(narrative.algorithm1_settings(cfg) + f"\n* loop: at most {cfg.max_iterations} rounds "
                 "(`max_iterations`)."))

# %% [markdown]
# ### The candidates: how far every question went along the chain
#
# Every full KGIR-RAG trace of the run on its datasets, with the steps of the chain it took (`reached`: how many in a
# row), judged against the question's gold bridge entity (`kgir_lib.notebook.case.choice.gold_chain`): the gold bridge
# is an entity of `G_Ans`; the rewrite names it; `D'_t` brings a passage of the next hop that `D_t` lacked; the answer
# is correct. Questions without a gold bridge (HotpotQA comparison questions) take no step.

# %%
candidates = choice.table
if len(candidates):
    cand_path = report.save_table(candidates.head(20).set_index(["dataset", "qid"]), cfg, "07_bridge_candidates",
                                  "KGIR-RAG traces ranked by how far they go along the Fig. 6 chain (notebook 07).")
    show(candidates.head(20).set_index(["dataset", "qid"])[["reached", *choice.steps, "question", "rewrite",
                                                            "bridge", "answer", "gold"]],
         "the traces that went furthest along the Fig. 6 chain", max_rows=8, wrap=30, full=cand_path)

# %% [markdown]
# ### Which method names the bridge?
#
# The funnel's "names the bridge" step asked of every iterative method (`kgir_lib.eval.mechanism.funnel.bridge_naming_table`):
# KGIR-RAG's rewrites, IRCoT's reasoning sentences, ITER-RETGEN's generations and HyDE's hypothetical passages;
# whether the retrieval made with that text then finds the next hop; and the exact McNemar test of naming against
# KGIR-RAG on the same questions (*b*: only KGIR-RAG names it, *c*: only the other method; only those count). Methods
# whose traces this run lacks are absent.

# %%
naming = mechanism_tables(cfg.run_dir, cfg.datasets, data_dir=cfg.data_path,
                          context_passages=cfg.context_passages)["bridge_naming"]
if len(naming):
    show(naming.set_index(["dataset", "method"]), "who names the gold bridge entity, and finds the next hop",
         notes=NAMING_NOTES)
    report.save_table(naming.set_index(["dataset", "method"]).round(3), cfg, "07_bridge_naming",
                      "Iterative methods naming the gold bridge entity in their generated text, and finding the "
                      "next hop with it (notebook 07). " + report.model_note(cfg, short=True));

# %% [markdown]
# ### The shape of Fig. 6 over the whole run
#
# How often each step of the pattern happens, per dataset. A reflection that answers in round 1 ends the loop after
# one rewrite and one retrieval with it: no rewritten question ever starts a second round, so on such a run KGIR-RAG's
# score measures its first round, not the iteration. This table reads the *shape* of Fig. 6 without the gold answer
# (`kgir_lib.notebook.case.bridges`): not answered in round 1, the round-1 rewrite names an entity of `G_Ans` the
# question did not name, answered in round 2. It does not ask whether that entity is the gold bridge, so its "whole
# Fig. 6 pattern" can count questions that the gold chain above does not.

# %%
steps = bridge_summary(find_bridge_cases(load_kgir_traces(cfg, cfg.datasets)))
show(steps, "traces per dataset taking each step of the Fig. 6 pattern")
if len(steps):
    report.save_table(steps, cfg, "07_bridge_summary",
                      "KGIR-RAG traces per dataset taking each step of the Fig. 6 pattern (notebook 07). "
                      + report.model_note(cfg, short=True));

# %% [markdown]
# ### The chosen question, every stage in full
#
# `case_from_dataset` builds the run's workspace for the dataset (its knowledge graph, dense index and LLM cache) and
# runs the full method on this one question, keeping its trace: one row a round; then each round's retrieval `D_t`
# (eq. 2; round 1's is the paper's `D_q`, later rounds retrieve with the rewritten question), the question's entities
# (eq. 4) and their matches in `G_q` (eq. 5: entities that do not occur in the question are dropped, and when none is
# left or none matches, the graph entities named in the question are used, the *fallback*), the heaviest `G_Ans`
# triples (eqs. 5-7), and the final answer.

# %%
show(case.steps_frame(), "one row per round")
show_retrieval(case)
show_ner(case)
show_subgraphs(case)
show(case.result_frame(), index=False)

# %% [markdown]
# ### The paper's question, every stage in full
#
# Run 1 over the six passages: the triples extracted from them (§2.1 in miniature), every stage, and its chain in the
# funnel's terms. With six passages and a `top_k` of six or more (10 on the `local` and `paper` profiles), `D_1` holds
# every passage, the next hop included: on this corpus step 4 has nothing left to find (the column "next hop already in
# D_t" says so), and a dataset question (section 1) is where it can be measured. Then run 2 round by round.

# %%
print(f"extracted {len(free.ws.kg)} triples from {len(free.ws.dataset.corpus)} passages")
show(free.ws.kg.to_frame(), "the triples extracted from the free passages", index=False)
display_case(free, cfg=cfg, name="07_free_question_bridge")
if free_question is None and example["bridge"]:
    free_chain = case_chain(free, example["bridge"], example["next_hop"])
    show(free_chain.set_index("round"), f"the Fig. 6 chain of the free question (gold bridge {example['bridge']})")
    print(case_chain_note(free_chain))
if oracle_free is not None:
    display(Markdown("**Run 2 (oracle rewrite), round by round**: what its reflection and reader read and said."))
    show_reflections(oracle_free)
    oracle_chain = case_chain(oracle_free, example["bridge"], example["next_hop"])
    show(oracle_chain.set_index("round"), "run 2 (oracle rewrite) in the funnel's terms")
    print("Run 2 (oracle rewrite): " + case_chain_note(oracle_chain))

# %% [markdown]
# ### LLM usage of this notebook
#
# By stage, cache hits included: every LLM call goes through the run's cache, so a question notebook 04 already
# answered costs nothing.

# %%
show(llm.usage.table(), "LLM usage of this notebook (calls include cache hits)")
