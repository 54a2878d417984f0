# %% [markdown]
# # 04 — The KGIR-RAG loop: rewrite, retrieve, reflect (paper §2.3-2.4, Algorithm 2, Figs. 4-5)
#
# Notebook 03 built the evidence subgraph `G_Ans` of one retrieval. KGIR-RAG goes round a loop over it:
#
# 1. **evidence subgraph** `G_Ans_t` of the current query's retrieval `D_t` (notebook 03);
# 2. **rewrite** (eq. 8, Fig. 4): the LLM replaces the multi-hop part of the question with what the triples say (the
#    paper's example: "What is the length of the track where the 2013 Liqui Moly Bathurst 12 Hour was staged?" →
#    "What is the length of Mount Panorama Circuit?");
# 3. **retrieval with the rewrite**: `D'_t`, the passages most similar to `q'_t`;
# 4. **reflection** (§2.4, Fig. 5): reading `G_Ans_t`, the rewrites so far and the new passages of `D'_t`, the LLM
#    either answers or says what is missing;
# 5. an answer ends the question (the shared reader words it); missing information sends it round again with `q'_t`
#    as the query, up to `cfg.max_iterations` rounds.
#
# This notebook runs the loop on every question of the run, watches it go round on one question, asks where the
# Fig. 6 chain breaks, and what fixing each step would buy. How the loop is built, where it deviates from the paper,
# and every table are under the last heading, *Audit: every number behind this notebook*.

# %% tags=["parameters"]
profile = None              # None: $KGIR_PROFILE, else "sample"
config_overrides = {}      # any other Config field, e.g. {"llm_model": "...", "top_k": 5}; a field passed
                           # by name (papermill / runner -p NAME VALUE) reaches the config too
datasets = None         # None: the profile's value
n_questions = None      # questions a dataset; None: the profile's value
max_iterations = None   # rounds before the forced answer; None: the profile's value
top_k = None            # |D_t|; None: the profile's value
ngram_threshold = None  # entity matching threshold (eq. 5); None: the profile's value
n_traces = None         # traces rendered in the audit; None: 3
resume = None           # read back an identical earlier run's trace files; None: True

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from kgir_lib import report
from kgir_lib.data import sample_questions
from kgir_lib.eval import evaluate as ev
from kgir_lib.eval.mechanism import calibration, forced_rounds, funnel, headroom
from kgir_lib.eval.mechanism import loss_decomposition as decomposition
from kgir_lib.eval.mechanism import loss_orders, missing_gold, rewrite_form
from kgir_lib.eval.mechanism import step_attribution as attribution
from kgir_lib.eval.mechanism.bridges import load_bridges
from kgir_lib.eval.mechanism.tables import mechanism_tables, read_run
from kgir_lib.eval.metrics import mean_recall
from kgir_lib.eval.mechanism.loop_tables import STAGES, loop_counts, seed_match_rate, trace_table, usable_table
from kgir_lib.notebook import iteration
from kgir_lib.notebook.display import show, show_figure
from kgir_lib.notebook.opening import open_notebook
from kgir_lib.notebook.viz import plot_loop, render_trace
from kgir_lib.pipeline import workspace
from kgir_lib.progress import progress
from kgir_lib.registry import LABELS, STUDY_METHODS, build_method, check_method_keys

cfg, llm = open_notebook("04_iterative_rewrite", globals())
n_traces = 3 if n_traces is None else int(n_traces)
resume = True if resume is None else bool(resume)
print(f"max_iterations {cfg.max_iterations}; eq. 5 matching {cfg.match_method} at threshold {cfg.ngram_threshold}; "
      f"reader context {cfg.context_passages} passages")

# %% [markdown]
# ## 1. KGIR-RAG on every question, and the loop in this run
#
# `kgir_lib.eval.evaluate.run_method` runs the method on the profile's question sample and writes one trace a
# question (every round's query, retrieval, `G_Ans`, rewrite, new passages, verdict, answer and LLM usage). The
# picture is Algorithm 2 with what happened at each step over every question, read from those traces.

# %%
results, ran = {}, []  # ran: the trace file of every method run of this notebook (its LLM usage, at the end)
for name in progress(cfg.datasets, desc="datasets"):
    ws = workspace(cfg, name, llm, progress=False)
    qs = sample_questions(ws.dataset.questions, cfg.n_questions, cfg.seed)
    method = build_method("kgir")  # max_iterations, top_k, threshold: from cfg (as notebook 05 builds it)
    outputs = ev.run_method(ws, method, qs, resume=resume)
    ran.append(ev.trace_path(cfg, method, name))
    dense = ws.dense.search([q.question for q in qs], cfg.top_k)
    results[name] = {"ws": ws, "questions": qs, "outputs": outputs, "scores": ev.score(outputs, qs),
                     "loop": trace_table(outputs), "dense": dense,
                     "meta": ev.read_meta(ev.trace_path(cfg, method, name))}
    print(f"{name}: {len(qs)} questions -> {report.shown(ev.trace_path(cfg, method, name))}")
counts = loop_counts([o.trace for r in results.values() for o in r["outputs"]])
show_figure(plot_loop(counts, f"KGIR-RAG's loop (Algorithm 2) in this run: {', '.join(results)}; at most "
                              f"{cfg.max_iterations} rounds"), cfg, "04_loop")

# %% [markdown]
# ## 2. The loop going round, on one question
#
# A reflection that finds something missing sends the question round again, and that round's rewrite retrieves
# anew. First, how often the rewrite changes the question at all: every round's rewrite counted by its form against
# the question it rewrites (`kgir_lib.eval.mechanism.rewrite_form`: identical, a surface edit such as a typo fix,
# naming an entity of `G_Ans` or the gold bridge the question lacks, or another rewording). Then one round 2 (or
# later) of a question with a gold bridge (`kgir_lib.notebook.iteration.find_iteration`), chosen in this order: a
# rewrite that changes the question by more than a surface edit; a round of the paper's method, else of the
# **forced-rounds** study variant (`kgir_forced`: every round runs whatever the reflection says), labelled so; a
# rewrite that brought up a passage of the question's **next hop** (the passage that answers the hop after the
# bridge, from the dataset's gold chain) that no earlier retrieval had held. When no round of the run changes the
# question by more than a surface edit, the sentence says so and shows the best round it has, with its form. The
# sentence says what the rewrite changed; below it, every round's query and rewrite, then the round's two retrievals
# side by side, before and after its rewrite.

# %% tags=["hide-input"]
for name, r in progress(results.items(), desc="forced rounds"):
    r["forced"] = ev.run_method(r["ws"], build_method("kgir_forced"), r["questions"], resume=resume)
    ran.append(ev.trace_path(cfg, build_method("kgir_forced"), name))
forms = pd.concat([rewrite_form.form_table([o.to_json() for o in r[key]], load_bridges(name, cfg.data_path), name,
                                           method)
                   for method, key in (("kgir", "outputs"), ("kgir_forced", "forced"))
                   for name, r in ((n, results[n]) for n in report.panel_order(results))], ignore_index=True)
report.save_table(forms.set_index(["method", "dataset", "round"]), cfg, "04_rewrite_form",
                  "What each round's rewrite did to the question it rewrites, from the traces: identical (case, "
                  "punctuation and spacing aside), names a gold bridge or a shown G_Ans entity it lacks, a surface "
                  f"edit (at most {rewrite_form.SURFACE_EDITS} token edits), or another rewording; per method "
                  "(the paper's loop, and every round forced), dataset and round.")
display(Markdown("\n".join(f"- {rewrite_form.form_sentence(forms, d, m)} ({m})"
                            for m in ("kgir", "kgir_forced") for d in report.panel_order(results))))
gold_bridges = {name: load_bridges(name, cfg.data_path) for name in results}
example = iteration.find_iteration(read_run(cfg.run_dir, list(results), methods=tuple(iteration.RUN_LABELS)),
                                   gold_bridges)
if example is None:
    print("No question with a gold bridge went past round 1 with a rewrite in this run, naturally or forced.")
else:
    title = {p.pid: p.title for p in results[example.dataset]["ws"].dataset.corpus.passages}.get
    q = next(q for q in results[example.dataset]["questions"] if q.qid == example.qid)
    hop = dict.fromkeys(p for b in gold_bridges[example.dataset][example.qid] for p in b.next_pids)
    display(Markdown(f"**[{example.dataset}] {q.question}** (gold: {' | '.join(q.answers[:2])}; next hop: "
                     f"{', '.join(title(p) for p in hop)})  \n*Run: {example.label}; round {example.round}'s "
                     f"rewrite form: {example.form}.*  \n"
                     + iteration.iteration_sentence(example, title)))
    show(iteration.rewrite_history(example), "every round up to this one", index=False, wrap=45)
    show(iteration.before_after(example, title), f"round {example.round}: its two retrievals, side by side",
         index=False, wrap=40)

# %% [markdown]
# ## 3. Does the mechanism happen? Where the Fig. 6 chain breaks
#
# KGIR-RAG's claim is a mechanism (§2, Fig. 6): `G_Ans` holds a **bridge entity** the question does not name ("the
# top PC maker of 1994" → Compaq), the rewrite names it, the rewritten question's retrieval `D'_t` finds the next hop,
# and the answer is right. The **bridge funnel** (`kgir_lib.eval.mechanism.funnel`) counts, over the questions with a
# gold bridge, how many pass each step with every step before it, in any round.

# %% tags=["hide-input"]
mech = mechanism_tables(cfg.run_dir, list(results), data_dir=cfg.data_path, context_passages=cfg.context_passages)
loop_funnel = mech["funnel"][mech["funnel"]["method"] == "kgir"]
strict = loop_funnel[loop_funnel[funnel.MATCH] == funnel.STRICT]
fig, ax = plt.subplots(figsize=(9.5, 3.8))
funnel.plot_funnel(strict, "any", ax=ax, order=report.panel_order(results))
ax.set_title(ax.get_title() + f" (step 2: {funnel.STRICT} names)")
fig.tight_layout()
show_figure(fig, cfg, "04_bridge_funnel")
display(Markdown("\n".join(f"- {funnel.funnel_sentence(loop_funnel, d)}"
                           for d in report.panel_order(loop_funnel["dataset"].unique()))))

# %% [markdown]
# ## 4. What would fixing each step buy?
#
# The funnel says where the chain breaks, not what repairing a step is worth: a later step may break anyway. The
# **study variants** (`kgir_lib/kgir/study.py`, beside the paper's method, never in its place) hand one step the
# question's gold and run every other step as the full method does: the **oracles** (gold seeds, the ideal rewrite,
# the gold next hop, cumulatively; the shared reader over the gold passages alone is the ceiling), and two repairs of
# ours. Each bar is a variant's EM on the same questions as the full method; the sentence gives each difference with
# its **p(Holm)**: the p-value of the exact McNemar test of the two EMs (it reads only the questions one of the two
# answers right and the other wrong), adjusted by Holm's procedure for the dataset's whole family of tests, declared
# before the run (every study variant, on EM, F1 and R@5). A small p(Holm) says this sample separates the variant
# from the full method; a large one says it cannot tell them apart. The audit defines every variant and column.

# %% tags=["hide-input"]
study_keys = list(STUDY_METHODS if cfg.attribution_methods is None else cfg.attribution_methods)
check_method_keys(study_keys, "attribution_methods", STUDY_METHODS)
attr_datasets = cfg.attribution_scope
left_out = [d for d in cfg.attribution_datasets or [] if d not in results]
print("study variants:", "; ".join(LABELS[k] for k in study_keys) or "none (attribution_methods: [])",
      "| datasets:", ", ".join(attr_datasets) or "none of this run's",
      f"(attribution_datasets names {', '.join(left_out)}, not in this run)" if left_out else "")
for name in progress(attr_datasets, desc="study variants"):
    for key in study_keys:
        ev.run_method(results[name]["ws"], build_method(key), results[name]["questions"], resume=resume)
        ran.append(ev.trace_path(cfg, build_method(key), name))
attr = mechanism_tables(cfg.run_dir, list(results), data_dir=cfg.data_path,
                        context_passages=cfg.context_passages)["step_attribution"]
if len(attr):
    show_figure(headroom.plot_headroom(attr), cfg, "04_headroom")
    display(Markdown("\n".join(f"- {headroom.headroom_sentence(attr, d)}"
                               for d in report.panel_order(attr["dataset"].unique()))))

# %% [markdown]
# ## 5. Where are the answers lost: retrieval, distractors or the reader?
#
# The oracle context of §4 fixes retrieval, removes the distractor passages and drops the triples all at once, so its
# gain cannot be booked to any one of them. The **loss decomposition** takes KGIR-RAG's own final reader prompt of
# every question (the same triples, passage budget and order) and has the reader answer it again with one thing
# changed at a time: (a) as it was; (b) the missing gold passages swapped in for the lowest-ranked others (retrieval
# fixed, the prompt's shape kept); (c) the gold passages only, the triples kept (distractors removed); (d) the gold
# passages only (the ceiling of §4); (e) as (d) with the gold passages uncut (what `passage_chars` costs). Each
# prompt is read by every model of `decomposition_readers`, smallest first, on the same prompts: the reader-capacity
# axis. The bars are EM; each step is the rise or fall from the bar before. First, from the traces alone: where
# the gold passages that (b) swaps in were. A passage the loop retrieved and its context rule did not show (the
# reader reads `G_Ans`'s triples and the *new* passages of `D'_t`, never `D_1` itself) is withheld, not missed, so
# the step (a) → (b) mixes the context rule with retrieval; the first sentences say how many of each, the last ones
# how many of the answers (b) turns right or wrong were on questions whose every missing gold passage had been
# retrieved (`04_missing_gold_swap`, the decomposition's own answers, no new call). With `decomposition_orders`
# the reader also reads (b) split in two, the withheld gold restored before the never-retrieved gold is added, and
# the same five fixes in the reverse order (`04_loss_orders`): each fix's gain in both orders.

# %% tags=["hide-input"]
dec_runs = {d: (results[d]["ws"], results[d]["questions"], results[d]["outputs"])
            for d in cfg.decomposition_scope if d in results}
where = pd.concat([missing_gold.missing_gold_table([o.to_json() for o in results[d]["outputs"]], d,
                                                   cfg.context_passages) for d in report.panel_order(results)],
                  ignore_index=True)
report.save_table(where.set_index("dataset"), cfg, "04_missing_gold_where",
                  "The gold passages missing from KGIR-RAG's final reader prompt, by where they were: in the first "
                  "retrieval D_1 (and in its top n, the reader's passage budget), only in a later round's D'_t, or "
                  "in no retrieval of the loop. From the traces, no model call.")
display(Markdown("\n".join(f"- {missing_gold.missing_gold_sentence(where, d)}" for d in where["dataset"])))
readers = decomposition.reader_llms(cfg, llm)
before = {model: reader.usage.snapshot() for model, reader in readers.items()}
decomp, decomp_cut, decomp_answers, decomp_left = decomposition.loss_decomposition(cfg, readers, dec_runs)
decomp_usage = decomposition.readers_usage(readers, before)
print("readers:", ", ".join(readers), "| datasets:", ", ".join(dec_runs) or "none")
if len(decomp):
    show_figure(decomposition.plot_decomposition(decomp), cfg, "04_loss_decomposition")
    display(Markdown("\n".join(f"- {decomposition.decomposition_sentence(decomp, d)}"
                               for d in report.panel_order(decomp["dataset"].unique()))))
    swap = pd.concat([missing_gold.swap_by_class(
        [o.to_json() for o in results[d]["outputs"]],
        {m: a for m, a in decomp_answers[decomp_answers["dataset"] == d].groupby("reader", sort=False)}, d)
        for d in report.panel_order(dec_runs)], ignore_index=True)
    report.save_table(swap.set_index(["dataset", "reader", "class"]).round(4), cfg, "04_missing_gold_swap",
                      missing_gold.SWAP_CAPTION)
    display(Markdown("\n".join(f"- {missing_gold.swap_sentence(swap, d, m)}" for d in dict.fromkeys(swap["dataset"])
                               for m in readers)))
if len(decomp) and cfg.decomposition_orders:
    orders, _, _ = loss_orders.loss_orders(cfg, readers, {d: (results[d]["ws"], [o.to_json() for o in
                                                                                 results[d]["outputs"]])
                                                          for d in dec_runs})
    loss_orders.save(orders, cfg)
    display(Markdown("\n".join(f"- {loss_orders.orders_sentence(orders, d, m)}"
                               for d in report.panel_order(dec_runs) for m in readers)))

# %% [markdown]
# ## 6. The run in numbers
#
# EM and F1 (SQuAD normalisation, best over the gold answer and its aliases, ×100), Recall@5 of the final ranked list
# beside single-step dense retrieval with the original question on the same questions, the rounds a question used and
# who stopped the loop (the reflection's "answer", or the round cap). The audit has every column of this table.

# %% tags=["hide-input"]
rows = {}
for name, r in results.items():
    s, loop, qs = r["scores"], r["loop"], r["questions"]
    dense_r = {k: 100 * mean_recall([[p for p, _ in d] for d in r["dense"]], [q.gold_pids for q in qs], k)
               for k in (2, 5)}
    rows[name] = {
        "n": len(s), "EM": s["EM"].mean(), "F1": s["F1"].mean(), "R@2": s["R@2"].mean(), "R@5": s["R@5"].mean(),
        "dense R@2": dense_r[2], "dense R@5": dense_r[5],
        "rounds / q": loop["iterations"].mean(),
        "by reflection %": 100 * (loop["answered_by"] == "reflection").mean(),
        "forced %": 100 * (loop["answered_by"] == "forced_reader").mean(),
        "LLM calls / q": loop["llm_calls"].mean(), "prompt tokens / q": loop["prompt_tokens"].mean(),
        "completion tokens / q": loop["completion_tokens"].mean(),
        "NER fallback / round %": 100 * loop["ner_fallbacks"].sum() / max(loop["iterations"].sum(), 1),
        "seed-match / round %": 100 * seed_match_rate([o.trace for o in r["outputs"]]),
        "malformed rewrites %": 100 * loop["rewrite_malformed"].sum() / max(loop["iterations"].sum(), 1),
        "malformed reflections %": 100 * loop["reflection_malformed"].sum() / max(loop["iterations"].sum(), 1),
    }
metrics = pd.DataFrame.from_dict(rows, orient="index")
metrics.index.name = "dataset"
for k, col in ((0, "published R@2 (derived)"), (1, "published R@5 (derived)")):
    metrics[col] = [report.KGIR_RECALL_DERIVED.get(d, (None, None))[k] for d in metrics.index]
print(report.model_note(cfg, short=True))
show(metrics[["n", "EM", "F1", "R@5", "dense R@5", "rounds / q", "by reflection %"]], "KGIR-RAG in this run")

# %% [markdown]
# ## What to take from this notebook
#
# * The loop runs on every dataset and every round is in the traces; how often it goes round is the reflection's
#   choice, and with the model printed at the top it answers in round 1 on nearly every question, so the run's
#   scores measure mostly its first round. §2 shows what a second round can do when it happens.
# * The funnel names the step where this model's chain breaks; the oracles of §4 say what repairing each step would
#   be worth: a step whose oracle adds little is not where the accuracy is lost, whatever the funnel's count there.
# * The rewrite often leaves the question as it was: §2's table counts every round's rewrite by its form (identical,
#   a surface edit, naming an entity of `G_Ans` or the gold bridge); the forced rounds show how often a later round
#   only repeats the question.
# * The loss decomposition of §5 changes the loop's own prompt one thing at a time and says what each change adds,
#   in that order: the missing gold passages, the distractor passages, the triples, the passage cut, and what a
#   larger reader adds on the same prompts. Its first step is not retrieval alone: the counts above it say how many
#   of the missing gold passages the first retrieval `D_1` had found and the paper's context rule withheld.
# * The paper's LLM is Qwen2.5-72B; the numbers here are a small model's (printed at the top). Notebook 05 compares
#   every method with the same LLM; notebook 06 runs the Table 7 ablations.

# %% [markdown]
# ## Audit: every number behind this notebook
#
# Everything below backs the story above; each subsection stands on its own (a later table is a new subsection at
# the end). Traces: `results/<profile>/traces/kgir/<dataset>.trace.jsonl` (and one folder per study variant); saved
# tables in `results/<profile>/tables/`: `04_kgir_metrics`, `04_kgir_usage_by_stage`, `04_kgir_usable_outputs`,
# `04_bridge_funnel`, `04_forced_rounds`, `04_oracle_stop`, `04_reflection_calibration`, `04_step_attribution`,
# `04_loss_decomposition`, `04_passage_cut`, `04_kgir_per_question`; figures in `figures/<profile>/`.
#
# ### How the loop is built (`kgir_lib/kgir/loop.py`, class `KGIRRAG`; prompts in `kgir_lib/prompts/kgir_*.txt`)
#
# * **Retrieval with the rewrite.** The round's *new passages* `P_t` are the passages of `D'_t` that `D_t` did not
#   hold, at most `context_passages` of them (`cfg.reflection_passages`; the rule `all` takes the top of `D'_t`
#   instead). This is §2.4's input ("the evidence subgraph, the rewrite history and the newly retrieved passages");
#   when none is new (the rewrite returned the question, or found the same passages), the top of `D'_t` stands in,
#   since read literally the reflection would have no passage at all, only `G_Ans`.
# * **Reflection.** The LLM reasons step by step (`Reasoning:` line) and either answers (`Answer: …`) or names what is
#   missing (`Missing: …`). The prompt carries the paper's two examples ("Where is the hometown of the author of To
#   Kill a Mockingbird?" → Alabama; "Which airport is in the hometown …?" → missing: airports in Alabama).
# * **Stop or go on.** A verdict "answer" ends the question: the reflection decides *when* to stop, and the shared
#   reader (the short-answer prompt every method of notebook 05 answers through) words the answer to `q` from what the
#   reflection read, `G_Ans_t` and the new passages (`cfg.kgir_answer_source` can hand this to the reflection's own
#   `Answer:` line instead, as Fig. 5 does; the trace keeps the reflection's answer either way). In round
#   `max_iterations` the reflection prompt says it must answer; a question it still leaves open is answered by the
#   same reader (recorded as `forced_reader`). `q_history` lists the earlier rewrites and what was still missing.
# * **Batching.** The loop runs stage by stage across all questions still open: one batched `llm.generate` call for
#   NER, one for the rewrite, one for the reflection per round (and one final reader call), so a vLLM server is kept
#   full (`benchmarks/bench_concurrency.py` measures it).
# * **Final ranked list** (Recall@k): the source passages of `G_Ans` edges over all rounds, by their best edge weight,
#   then the rewrite retrievals `D'_1 .. D'_T` interleaved by round (the first passage of each round, then the second
#   of each, …), then `D_1` (`kgir_lib/kgir/state.py::ranked_list`): a rewrite that finds a new gold passage raises
#   Recall@5.
# * **Deviations from the paper** (CPU, small model; also in docs/deviations.md): the `sample` profile runs
#   Qwen2.5-Coder-0.5B-Instruct (`local`: the 1.5B), which follows few-shot formats only loosely, so (a) the prompts
#   ask for one-line answer formats, and each user turn of the reflection prompt ends with a reminder of its two-line
#   reply, (b) the parsers are tolerant and count malformed replies instead of failing (a malformed rewrite keeps the
#   previous question), (c) a reflection reply with no `Answer:` or `Missing:` line gets **one verdict turn** (prompt
#   `kgir_reflect_verdict`, not in the paper): the reply stays in the conversation and the model is asked for the
#   verdict line alone; if that fails too the reflection counts as "not answerable", (d) the shared reader words the
#   final answer (the reflection decides when to stop), so KGIR-RAG's answers take the same form as every other
#   method's; the paper's Fig. 5 answers with the reflection's own `Answer:` line. The paper's LLM is Qwen2.5-72B.
#
# ### EM, F1, Recall@2/5, rounds, LLM calls and tokens per question
#
# *dense R@k*: single-step retrieval with the original question on the same questions. LLM calls and tokens are per
# question (cache hits included: they are what the method costs). Published KGIR-RAG recall (**derived** from the
# paper's prose: KAG's recall as the paper cites it plus the stated gains; Qwen2.5-72B, BGE-M3, 1,000 questions) is
# in separate columns.

# %%
show(metrics)
report.save_table(metrics.round(2), cfg, "04_kgir_metrics",
                  f"KGIR-RAG end to end: profile {cfg.profile}, reader {cfg.llm_model}, {report.questions_phrase(cfg)} "
                  f"(seed {cfg.seed}), max_iterations {cfg.max_iterations}, top_k {cfg.top_k}. Published "
                  f"columns: {report.SOURCES['kgir_derived']}."
                  + f" {report.model_note(cfg, short=True)}");

# %% [markdown]
# ### LLM usage by stage
#
# Calls and tokens per stage, summed over each dataset's questions, from the traces (`kgir_ner`, `kgir_rewrite`,
# `kgir_reflect`, `kgir_final`). Extraction of newly retrieved passages (stage `extract`) is indexing cost and appears
# only in the run's `.meta.json` and in `usage/04_iterative_rewrite.csv`.

# %%
usage_rows = []
for name, r in results.items():
    for stage in STAGES:
        tot = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cache_hits": 0, "truncated": 0}
        for o in r["outputs"]:
            for key in tot:
                tot[key] += o.trace.get("llm", {}).get(stage, {}).get(key, 0)
        usage_rows.append({"dataset": name, "stage": stage, **tot,
                           "calls / q": tot["calls"] / max(len(r["outputs"]), 1)})
usage = pd.DataFrame(usage_rows).set_index(["dataset", "stage"])
show(usage, digits=2)
report.save_table(usage.round(2), cfg, "04_kgir_usage_by_stage", "KGIR-RAG LLM usage by stage (from the traces).")

# %% [markdown]
# ### Usable outputs per stage, truncations and the seed-match rate
#
# Whether each stage's reply was **parsed as intended** rather than handled by a fallback (definitions in
# `kgir_lib/kgir/loop.py`): NER, a JSON entity list with an entity that occurs in the question; rewrite, a question;
# reflection, an `Answer:` or `Missing:` line in the first reply (`reflect`), in the verdict turn sent after a first
# reply without one (`reflect_verdict`), and in either (`reflect, after verdict turn`: the share of reflections the
# loop could act on); reader, a short non-empty answer. *Truncated*: replies cut at the stage's token budget
# (`max_tokens_<stage>` in the profile). The **seed-match rate** is the share of subgraph rounds with at least one seed
# (eq. 5); a round without one has an empty `G_Ans`, and the passages of `D_q` stand in for it (notebook 03). All
# stages measured on held-out tuning questions are in `results/benchmarks/usable.md`.

# %%
usable = pd.concat({name: usable_table(r["outputs"]) for name, r in results.items()}, names=["dataset", "stage"])
show(usable)
seed_rates = pd.Series({name: 100 * seed_match_rate([o.trace for o in r["outputs"]]) for name, r in results.items()},
                       name="seed-match / round %")
show(seed_rates.to_frame())
report.save_table(usable.round(2), cfg, "04_kgir_usable_outputs",
                  f"KGIR-RAG usable outputs per stage ({cfg.llm_model}); truncated = cut at the stage's token budget.")

# %% [markdown]
# ### Rounds used
#
# How many rounds each question took, split by what stopped it: the reflection (it judged the evidence enough) or the
# round cap (`forced_reader`).

# %%
fig, axes = plt.subplots(1, len(results), figsize=(4.6 * len(results), 3.4), squeeze=False)
for ax, name in zip(axes[0], report.panel_order(results)):
    r = results[name]
    by_round = r["loop"].groupby(["iterations", "answered_by"]).size().unstack(fill_value=0)
    by_round = by_round.reindex(range(1, cfg.max_iterations + 1), fill_value=0)
    by_round.plot.bar(stacked=True, ax=ax, rot=0, legend=ax is axes[0][0], fontsize=11)
    ax.set_title(name, fontsize=12)
    ax.set_xlabel("rounds used", fontsize=11)
    ax.set_ylabel("questions", fontsize=11)
    if ax.get_legend():
        ax.legend(title="stopped by", fontsize=11, title_fontsize=11)
fig.tight_layout()
show_figure(fig, cfg, "04_rounds_used")

# %% [markdown]
# ### The bridge funnel in full
#
# MuSiQue gives the gold bridge (the answer of each hop before the last, with the next hop's supporting paragraph);
# HotpotQA bridge questions give it as the supporting title the question does not name
# (`kgir_lib.eval.mechanism.bridges`; comparison questions have none). For each question with a gold bridge: (1) a
# seed matched, (2) the gold bridge is an entity of `G_Ans`, (3) the rewrite names it, (4) `D'_t` retrieves a passage
# of the next hop that `D_t` lacked, (5) the answer is correct, each step counting only after the ones before it. Step
# 2 is counted under two matches (column *bridge match*): *equal*, the entity's normalised name is the bridge's, and
# *contains*, the name holds the whole bridge ("Republic of China" for China); the sentences quote *equal*. The tables
# also give each step by itself, per round, and for the forced-rounds run.

# %%
show(funnel.weakest_step(mech["funnel"]), "where the chain breaks most (over all rounds)", notes=funnel.COLUMN_NOTES)
funnel_path = report.save_table(
    mech["funnel"].set_index(["method", funnel.MATCH, "dataset", "round", "step"]).round(2), cfg, "04_bridge_funnel",
    "The bridge funnel of KGIR-RAG (and its forced-rounds run), per dataset and round: questions with a gold bridge "
    "passing the chain up to each step; step 2 (bridge in G_Ans) under both matches ('bridge match': equal names, or "
    "a name that contains the bridge). " + report.model_note(cfg, short=True))
show(funnel.match_rules_table(mech["funnel"]).set_index(["dataset", "step"]),
     "the funnel (any round) under both matches of step 2: equal names, and a name that contains the bridge",
     notes=funnel.COLUMN_NOTES)
show(strict[strict["round"] == "any"].drop(columns=["method", "round"]).set_index(["dataset", "step"]),
     "the funnel over all rounds, equal names", full=funnel_path, notes=funnel.COLUMN_NOTES)

# %% [markdown]
# ### Forced rounds and the oracle stop
#
# A small model's reflection may answer in round 1 on nearly every question, so the loop never iterates. The
# forced-rounds variant (`kgir_forced`, a study beside the method) runs every round and the shared reader answers at
# each; the per-round table says what rounds 2 and 3 add (recall of `D'_t` alone and of the evidence so far, EM/F1 of
# that round's answer, how often the answer changes and whether for the better), and the oracle stop (the first round
# whose answer is correct) bounds what a perfect reflection could gain.

# %%
per_round = mech["forced_rounds"]
if len(per_round):
    show(per_round.set_index(["dataset", "round"]), "forced rounds: what each round adds",
         notes=forced_rounds.COLUMN_NOTES)
    report.save_table(per_round.set_index(["dataset", "round"]).round(2), cfg, "04_forced_rounds",
                      "KGIR-RAG with every round forced: per round, recall of D'_t alone and of the evidence so far, "
                      "EM/F1 of that round's answer, answer changes (McNemar against round 1). "
                      + report.model_note(cfg, short=True))
    show(mech["oracle_stop"].set_index("dataset"),
         "oracle stop: the first round whose answer is correct, against the reflection's stop",
         notes=calibration.COLUMN_NOTES)
    report.save_table(mech["oracle_stop"].set_index(["dataset"]).round(2), cfg, "04_oracle_stop",
                      "Oracle stop (first correct round of the forced run) against the reflection's own stop.")

# %% [markdown]
# ### The reflection's calibration
#
# Of its "answer" verdicts, how many answers are correct; of its "missing" verdicts, how often every gold passage was
# already in what it read. The figure counts the verdicts of the forced-rounds run, which asks the reflection in every
# round of every question (its round 1 is the full method's); the table has both runs, round by round.

# %%
calib = mech["calibration"]
forced_calib = calib[calib["method"] == ("kgir_forced" if (calib["method"] == "kgir_forced").any() else "kgir")]
show_figure(calibration.plot_calibration(
    forced_calib, order=report.panel_order(results),
    title=f"What the reflection decided, and whether it was right ({forced_calib['method'].iloc[0]})"
    if len(forced_calib) else ""), cfg, "04_reflection_calibration")
show(calib.set_index(["method", "dataset", "round"]), "the reflection's calibration per round",
     notes=calibration.COLUMN_NOTES)
report.save_table(calib.set_index(["method", "dataset", "round"]).round(2), cfg, "04_reflection_calibration",
                  "The reflection's calibration per round: P(answer correct | verdict answer), P(gold passages in its "
                  "input | verdict missing). " + report.model_note(cfg, short=True))

# %% [markdown]
# ### The step attribution: the variants and every test
#
# Each **oracle** hands one step the gold chain of the question (MuSiQue's `question_decomposition`, HotpotQA's
# supporting titles, read once by `kgir_lib/gold.py`) and runs every other step as the full method does:
#
# - *oracle seeds*: in every round `E_q` is the entities the gold sub-questions name, matched to the entities of `G_q`
#   by the profile's eq. 5 rule; no NER call;
# - *oracle rewrite*: round 1's rewrite is the **ideal rewrite**, the last sub-question with every `#k` replaced by hop
#   k's gold answer; no rewrite call in round 1. MuSiQue only: HotpotQA has no sub-questions, so there is no honest
#   ideal rewrite, and its questions run the rewrite as the full method;
# - *oracle next hop*: the gold next-hop passages (the passage of the hop after the bridge; for a HotpotQA bridge
#   question the bridge's own paragraph) are put first in the passages the reflection and the reader read;
# - *oracle context*: the shared reader answers from the gold passages alone, one call: the reader's ceiling;
# - cumulative: seeds, then + rewrite, then + next hop: the waterfall from the full method towards the ceiling.
#
# `kgir_lib/kgir/study.py` says exactly which gold each oracle uses and where it has none. Where an oracle has no gold
# to give, the question runs that step as the full method and its trace says why (`oracle.not_applied`); *oracle
# applied* counts the questions every step of the variant applied to, and *gold given: <step>* each step's own. A step
# with gold on no question of a dataset (the ideal rewrite on HotpotQA) leaves its rows the full method's: the
# waterfall skips it and the sentence says so. The two repairs are **ours**: the *bridge rewrite* (the LLM first names
# the entity of `G_Ans` that answers the hop the question depends on, then substitutes it; prompt
# `kgir_bridge_rewrite`) and *all of D'_t* (the reflection reads the top of `D'_t`, new or not).
#
# **The table** (`04_step_attribution`): each variant's EM, F1 and R@5 on the questions the full method answered, the
# full method's on the same questions and the difference, the exact paired test against the full method (McNemar for
# EM, sign-flip for F1 and R@5), Holm-adjusted within each dataset's family (every variant by every metric, declared in
# `kgir_lib/eval/mechanism/step_attribution.py` before the run: 23 tests; a profile that runs fewer variants counts
# each test it did not make as p = 1), the **minimum detectable effect** (MDE: the smallest EM difference these
# questions could detect with 80 % power at the family's first Holm level, from the row's own discordance), the funnel
# steps each variant passes and how many bridge questions had the next hop in the final answer's context. The oracle
# context retrieves nothing, so it has no recall. The paper's own KGIR-RAG EM would be a line on the figure, but the
# paper prints it only in its Tables 4-5, which are not available as text, so none is drawn.

# %%
if len(attr):
    show(attr.drop(columns=["key"]).set_index(["dataset", "method"]),
         "step attribution: each study variant against the full method", notes=attribution.COLUMN_NOTES)
    report.save_table(attr.set_index(["dataset", "key"]).round(4), cfg, "04_step_attribution",
                      "Step attribution: KGIR-RAG's study variants (oracles handed one step's gold; two repairs of "
                      "ours) against the full method on the same questions; exact paired tests (McNemar EM, sign-flip "
                      "F1 and R@5), Holm within each dataset's declared family; funnel steps passed (any round). "
                      + report.model_note(cfg, short=True))
else:
    print("No study variant ran (attribution_methods or attribution_datasets leave none).")

# %% [markdown]
# ### The loss decomposition: every condition and every test
#
# **The prompts** (`kgir_lib/eval/mechanism/loss_decomposition.py`): each question's final reader prompt is read off
# its trace (the triples of `G_Ans` or the passages standing in for them, then the passages the reflection read), and
# changed one thing at a time; conditions (b)-(e) never call the retriever, the loop or the reflection. A question
# without gold passages, or whose answer no reader call wrote, is left out and counted below.
#
# **The table** (`04_loss_decomposition`): a row per reader and condition, EM and F1 on the same questions, each
# condition against the one above (McNemar's exact test), and every reader after the first against the first on the
# same prompts. The family is declared in the module before the run, per dataset: four adjacent tests per reader and
# five reader tests per further reader (13 with two readers), Holm within it. **The cut** (`04_passage_cut`): per
# dataset, how many questions have a gold passage longer than `passage_chars`, and whose gold answer or gold bridge is
# named in a gold passage only past the cut (whole-word match on the normalised aliases).

# %%
if len(decomp):
    show(decomp.drop(columns=["label"]).set_index(["dataset", "reader", "condition"]),
         "loss decomposition: KGIR-RAG's own reader prompt, changed one thing at a time",
         notes=decomposition.COLUMN_NOTES)
    report.save_table(decomp.set_index(["dataset", "reader", "condition"]).round(4), cfg, "04_loss_decomposition",
                      "Loss decomposition: KGIR-RAG's final reader prompt re-read (a) as run, (b) with the missing "
                      "gold passages swapped in, (c) gold passages and triples, (d) gold passages only, (e) gold "
                      "passages uncut, by every reader of decomposition_readers on the same prompts; McNemar's exact "
                      "test against the condition above and against the first reader, Holm within each dataset's "
                      "declared family. " + report.model_note(cfg, short=True))
    show(decomp_cut.set_index("dataset"), "what the passage cut hides from the gold passages")
    report.save_table(decomp_cut.set_index("dataset"), cfg, "04_passage_cut",
                      "Gold passages and the passage cut: questions with a gold passage longer than passage_chars, "
                      "and whose gold answer or gold bridge is named in a gold passage only past the cut.")
    print("left out:", "; ".join(f"{d}: " + ", ".join(f"{k} {v}" for k, v in left.items())
                                 for d, left in decomp_left.items()))
else:
    print("No dataset of this run is in decomposition_datasets.")

# %% [markdown]
# ### Per question
#
# Answer, gold answer, scores, rounds and who answered, for every question.

# %%
per_q = pd.concat([r["scores"].assign(dataset=name).merge(r["loop"][["qid", "iterations", "answered_by"]], on="qid")
                   for name, r in results.items()], ignore_index=True)
cols = ["dataset", "qid", "answer", "gold", "EM", "F1", "R@2", "R@5", "iterations", "answered_by", "calls",
        "prompt_tokens", "completion_tokens"]
per_q_path = report.save_table(per_q[cols].set_index(["dataset", "qid"]).round(2), cfg, "04_kgir_per_question",
                               "KGIR-RAG per question.")
show(per_q[cols], "KGIR-RAG per question", max_cols=8, full=per_q_path)

# %% [markdown]
# ### A few traces, round by round
#
# Each round: the query, the first retrieved passages (★ = gold), the NER reply and the entities used, the sizes of
# `G_q` / `G_tmp` / `G_Ans`, the heaviest `G_Ans` triples, the rewrite, the new passages, and the reflection's
# reasoning and verdict. Shown: questions that took more than one round first.

# %%
shown = 0
for name, r in results.items():
    order = sorted(range(len(r["outputs"])), key=lambda j: -r["outputs"][j].trace.get("iterations_used", 0))
    for j in order[:max(1, n_traces // max(len(results), 1))]:
        if shown >= n_traces:
            break
        display(Markdown(f"#### [{name}]\n" + render_trace(r["outputs"][j].trace, r["ws"].dataset.corpus)))
        shown += 1

# %% [markdown]
# ### This notebook's LLM usage
#
# Every method run above (from its trace's `.meta.json`: what the run cost when it was made, the same when a rerun
# reads it back) and the loss decomposition's readers, by stage: `usage/04_iterative_rewrite.csv`.

# %%
notebook_usage = ev.runs_usage(ran, decomp_usage).table()
report.save_table(notebook_usage, cfg, "04_iterative_rewrite", folder="usage", markdown=False)
show(report.split_runtime(notebook_usage)[0], "LLM usage of this notebook, by stage (calls and tokens; cache hits "
     "and seconds describe one execution: runtime/usage/)")
