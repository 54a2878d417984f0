# %% [markdown]
# # 03 — The evidence subgraph: Algorithm 1 drawn on one question (KGIR-RAG §2.2)
#
# KGIR-RAG does not hand the retrieved passages to the LLM as they are. It keeps the triples of those passages that
# hang together with the question's own entities and prunes each such group to a **maximum spanning tree**: the
# **evidence subgraph** `G_Ans` that the rewrite and the reflection read (notebook 04). This notebook draws
# Algorithm 1 step by step on one question of the run, then says what it does over every question. Every number
# behind it is under the last heading, *Audit: every number behind this notebook*.
#
# | steps | paper | what happens |
# |---|---|---|
# | 1-2 | eqs. 2-3 | `D_q`: the passages most similar to the question (top `cfg.top_k`); `G_q`: their triples |
# | 3-4 | eqs. 4-5 | the question's entities (the LLM's NER), matched to entities of `G_q`: the **seeds** |
# | 4-5 | eqs. 5-6 | `G_tmp` and its connected components that hold a seed |
# | 6-7 | eq. 7 | every triple weighted by its relevance to the question; one maximum spanning tree per component; `G_Ans` = their union |

# %% tags=["parameters"]
profile = None              # None: $KGIR_PROFILE, else "sample"
config_overrides = {}      # any other Config field, e.g. {"llm_model": "...", "top_k": 5}; a field passed
                           # by name (papermill / runner -p NAME VALUE) reaches the config too
datasets = None         # None: the profile's value
n_questions = None      # questions a dataset; None: the profile's value
top_k = None            # |D_q|; None: the profile's value
ngram_threshold = None  # θ of eq. 5; None: the profile's value
dataset = None          # dataset of the worked question in §2; None: chosen with qid, else automatically
qid = None              # the worked question of §2; None: a question where every step does something
max_edges = None        # triples drawn in a panel; None: 25
n_draw = None           # further questions drawn in the audit; None: 2

# %% tags=["hide-input"]
import pandas as pd
from IPython.display import Markdown, display

from kgir_lib import report
from kgir_lib.data import sample_questions
from kgir_lib.eval.algorithm1 import compare_readings, rebuild_subgraph, subgraph_row, summarise_steps
from kgir_lib.kgir.subgraph import build_subgraphs
from kgir_lib.notebook import narrative
from kgir_lib.notebook.display import show, show_figure
from kgir_lib.notebook.opening import open_notebook
from kgir_lib.notebook.steps_draw import draw_step, steps_figure
from kgir_lib.notebook.steps_viz import edge_table, focus_view, panels, pick_case, prune_reasons
from kgir_lib.pipeline import fresh_view, workspace
from kgir_lib.progress import progress

cfg, llm = open_notebook("03_subgraph_mst", globals())
max_edges = 25 if max_edges is None else int(max_edges)
n_draw = 2 if n_draw is None else int(n_draw)
display(Markdown(narrative.algorithm1_settings(cfg)))

# %% [markdown]
# ## 1. Algorithm 1 for every sampled question
#
# One workspace per dataset (the dense index over the whole corpus and notebook 01's knowledge graph, which grows
# by the passages these questions retrieve: `fresh_view` reads the graph as a fresh run does, whatever later
# notebooks of an earlier run added to the stored one);
# `build_subgraphs` retrieves `D_q` for every sampled question, asks the LLM for every question's entities in one
# batched call, and runs steps 4-7 per question, keeping the output of every step.

# %%
runs = {}
for name in progress(cfg.datasets, desc="datasets"):
    ws = fresh_view(workspace(cfg, name, llm, progress=True))
    qs = sample_questions(ws.dataset.questions, cfg.n_questions, cfg.seed)
    subs, ner = build_subgraphs(ws, [q.question for q in qs])
    runs[name] = {"ws": ws, "questions": qs, "subs": subs, "ner": ner}
    print(f"{name}: {len(qs)} questions, KG of {len(ws.kg)} triples over {len(ws.kg.extracted)} passages")

# %% [markdown]
# ## 2. One question, drawn step by step
#
# The worked question is chosen to teach (`kgir_lib.notebook.steps_viz.pick_case`; give `dataset` and `qid` to
# choose another): a **bridge question** (its answer needs an entity the question does not name, the **gold bridge
# entity**, from the dataset's gold chain) whose seed, bridge and the trees' pruning all appear in the drawing.
# `G_q` holds far more triples than a drawing can show, so every panel draws the same neighbourhood: the chain from
# a seed to the bridge first, then the entities nearest the seeds. Each panel's title says what it leaves out.

# %% tags=["hide-input"]
gold = {n: [q.gold_bridges for q in r["questions"]] for n, r in runs.items()}
name, i, note = pick_case({n: r["subs"] for n, r in runs.items()},
                          {n: [q.qid for q in r["questions"]] for n, r in runs.items()}, dataset, qid, max_edges,
                          bridges=gold)
print(note)
if i is not None:
    ws, q, sub = runs[name]["ws"], runs[name]["questions"][i], runs[name]["subs"][i]
    view = focus_view(sub, max_edges, bridges=q.gold_bridges)
    titles = {p: ws.dataset.corpus[p].title for p, _ in sub.retrieved}
    hops = " → ".join(b.name for b in q.gold_bridges) or "none (no gold bridge)"
    display(Markdown(f"**[{name}] {q.question}**  \ngold answer: {q.answers[0]}; gold bridge entity: {hops}"
                     + (f" (drawn: {', '.join(view.bridges)})" if view.bridges else "")))


def draw(step: str):
    """One step of the worked question, on the same layout as the other panels."""
    fig, ax = steps_figure()
    draw_step(ax, view, step)
    show_figure(fig, cfg, f"03_algorithm1_{step}")


# %% [markdown]
# ### Steps 1-2: `D_q` and `G_q`
#
# Dense retrieval keeps the top `cfg.top_k` passages by cosine similarity to the question (eq. 2); `G_q` is the
# triples extracted from them (eq. 3). Gold passages (those the dataset marks as supporting the answer) are flagged.

# %% tags=["hide-input"]
if i is not None:
    show(pd.DataFrame([{"rank": r + 1, "title": titles[p], "cosine": s, "gold": p in q.gold_pids,
                        "triples": len(ws.kg.triples_of([p]))} for r, (p, s) in enumerate(sub.retrieved)]),
         "D_q", digits=3, index=False)
    print(f"G_q: {len(sub.G_q)} triples. {view.left_out()}")
    draw("G_q")

# %% [markdown]
# ### Steps 3-5: the seeds, `G_tmp` and its components (eqs. 4-6)
#
# The LLM lists the question's entities; every entity of `G_q` that matches one of them (eq. 5, the rule printed
# at the top) is a **seed** (red). `G_tmp` is built under the reading printed at the top; its connected components
# that hold a seed go on (green), a component without a seed (grey, dotted) is dropped: its triples never reach
# `G_Ans`. The gold bridge entity is a purple diamond.

# %% tags=["hide-input"]
if i is not None:
    print(f"NER reply: {runs[name]['ner'][i].text!r} -> E_q {sub.E_q}" +
          (f"  (fallback: {sub.fallback_reason})" if sub.used_fallback else ""))
    print("; ".join(f"{e!r} -> {', '.join(g for g, _ in found) or 'no seed'}" for e, found in sub.matches.items()))
    if "seeds" in panels(sub):
        draw("seeds")
    seedless = [t for t in sub.G_tmp if view.classes.get(t) == "seedless"]
    print(f"G_tmp: {len(sub.G_tmp)} triples; {len(sub.components)} component(s) with a seed, "
          f"{view.counts['seedless_components']} without ({len(seedless)} triples).")
    draw("components")

# %% [markdown]
# ### Steps 6-7: one maximum spanning tree per component, and `G_Ans`
#
# Every triple of a component is weighted by its relevance to the question (the weighting printed at the top).
# Kruskal's algorithm takes the heaviest triples first and keeps a triple only if it joins two entities the tree
# does not yet connect: a **parallel** triple (a second relation between the same two entities) and a triple that
# **closes a cycle** are pruned (orange, dashed). What the trees keep is `G_Ans`, the evidence the rewrite and the
# reflection read.

# %% tags=["hide-input"]
if i is not None:
    reasons = pd.Series(prune_reasons(sub)).value_counts()
    print(f"The trees keep {len(sub.kept)} of the {len(sub.kept) + len(sub.pruned)} triples of the seed components "
          f"and prune {len(sub.pruned)}: " + ", ".join(f"{n} {r}" for r, n in reasons.items()) + ".")
    draw("mst")
    draw("G_Ans")
    gold_kept = sorted({titles.get(t.pid, t.pid) for t in sub.kept if t.pid in set(q.gold_pids)})
    print(f"|G_Ans| = {len(sub.kept)} triples; gold passages behind a G_Ans triple: {gold_kept or 'none'}")
    if view.bridges:
        path = "; ".join(f"({t.head}, {t.relation}, {t.tail})" for t in view.bridge_path)
        kept = all(t in set(sub.kept) for t in view.bridge_path)
        print(f"From a seed to the gold bridge {', '.join(view.bridges)}: {path} — "
              + ("every triple of the chain is in G_Ans, so the rewrite can name the bridge (notebook 04)." if kept
                 else "the trees pruned part of the chain; G_Ans reaches the bridge another way or not at all."))

# %% [markdown]
# ## 3. Over every question: what each step keeps
#
# The means over the run's questions: `|G_q|` and `|G_Ans|`; **MST removal**, the triples the trees prune as a share
# of the triples of the seed components; **gold survival**, the gold passages behind a `G_Ans` triple as a share of
# the gold passages `D_q` retrieved (what the subgraph keeps of what retrieval found).

# %% tags=["hide-input"]
rows = []
for name_, run in runs.items():
    for q_, s in zip(run["questions"], run["subs"]):
        rows.append({"dataset": name_, "qid": q_.qid, **subgraph_row(s, q_.gold_pids)})
per_q = pd.DataFrame(rows)
summary = per_q.groupby("dataset", sort=False).apply(summarise_steps, include_groups=False)
summary.loc["all"] = summarise_steps(per_q)
print(report.model_note(cfg, short=True))
show(summary[["questions", "mean |G_q|", "mean |G_Ans|", "MST removal %", "gold survival G_Ans %"]],
     "Algorithm 1 over the run: step sizes, MST removal and gold survival")

# %% [markdown]
# ## What to take from this notebook
#
# * `G_Ans` is much smaller than `G_q`: the components that hold a seed keep part of the retrieved passages'
#   triples, and the trees remove the parallel and cycle-closing ones among them (§2 shows which, and why).
# * Gold survival is what the subgraph costs in recall: a gold passage retrieved in `D_q` whose triples do not reach
#   a seed's component is gone from `G_Ans` (KGIR-RAG can still recover it through the rewrite and the next round's
#   retrieval, notebook 04).
# * The graphs of the LLM-extracted datasets and the NER come from the small model printed at the top, so both the
#   seeds and the triples are noisy; `musique_train` shows the same algorithm on real GPT-3.5 triples. The paper
#   uses Qwen2.5-72B for both.

# %% [markdown]
# ## Audit: every number behind this notebook
#
# Everything below backs the story above; each subsection stands on its own (a later table is a new subsection at
# the end). The saved tables are in `results/<profile>/tables/` (`03_subgraph_per_question`, `03_subgraph_steps`,
# `03_gtmp_readings`, `03_seed_match`, `03_subgraph_sensitivity`), the figures in `figures/<profile>/`.
#
# ### The functions, and the choices the paper leaves open
#
# One function a step, in `kgir_lib/kgir/subgraph.py`, `kgir_lib/kgir/entity_matching.py` (NER and eq. 5) and
# `kgir_lib/kg/mst.py` (eqs. 6-7), unit-tested on hand-made graphs in `tests/test_subgraph.py`: `retrieve` (eq. 2),
# `question_triples` (eq. 3), `ner_requests` / `parse_entities` (eq. 4, prompt `kgir_ner.txt`), `match_entities` and
# `tmp_graph` (eq. 5), `seed_components` (eq. 6), `edge_weights`, `maximum_spanning_tree` (eq. 7). The choices this
# run makes are printed at the top, from its config:
#
# * *the similarity of eq. 5* (`cfg.match_method`) and its threshold θ (`cfg.ngram_threshold`): a question entity
#   matches **every** graph entity at or above θ, so name variants ("Dell" / "Michael Dell") all become seeds; the
#   seed-match table below compares the similarities the library offers on this run's questions.
# * *`G_tmp`* (`cfg.gtmp_reading`): the paper describes it twice. The §2.2 prose adds each seed and its adjacent
#   edges (a union of stars, `seed_star`); the description of Algorithm 1 connects the entities of the retrieved
#   passages and keeps the components holding a seed (`passages`). Under the first the trees can remove only
#   parallel edges, edges between two seeds and edges closing a cycle through a neighbour two seeds share; the
#   readings table below compares what each prunes on the same questions.
# * *edge weights*: the paper scores each triple against `q` with the cross-encoder **bge-reranker-large** and
#   mentions the eq. 2 cosine as a cheaper alternative. With a reranker configured (`cfg.reranker_model`) the
#   reranker weighs; without one the weight is the **cosine of the question and the triple text** (`head relation
#   tail`) with the encoder of eq. 2. The literal "reuse eq. 2" reading (every triple weighted by its source
#   passage's score) is in the sensitivity table below.
# * *parallel edges and ties*: Kruskal's algorithm, heaviest edge first; equal weights keep `G_q` order (retrieval
#   rank, then extraction order), so of two triples between the same entities the heavier (on a tie the earlier) is
#   kept. Self-loops are never kept.
# * *NER guard and fallback*: entities the LLM returns that do not occur in the question (a small model often copies
#   its few-shot examples) are dropped; when nothing usable is left, or nothing left matches an entity of `G_q`, the
#   graph entities that occur in the question are used instead, and the subgraph records `used_fallback`.
#
# The number of edges a maximum spanning forest removes is `|edges| − (|nodes| − |components|)` whatever the weights
# are: only *which* edges go depends on them.
#
# ### The worked question: its matches and every drawn triple
#
# Each question entity's matches (eq. 5) with their similarity, then every triple drawn in §2 with what the trees
# did with it, heaviest first.

# %%
if i is not None:
    show(pd.DataFrame([{"question entity": e, "graph entity (seed)": g, "similarity": s}
                       for e, found in sub.matches.items() for g, s in found]
                      or [{"question entity": e, "graph entity (seed)": None, "similarity": None} for e in sub.E_q]),
         f"eq. 5 matches ({cfg.match_method}, θ = {cfg.ngram_threshold})", digits=2, index=False)
    show(edge_table(view, titles, q.gold_pids), "the drawn triples and what the trees did with them", digits=3,
         index=False, max_rows=max_edges)

# %% [markdown]
# ### Per question, and the step sizes
#
# Per question: `|D_q|`, `|G_q|`, `|E_q|`, whether NER fell back, seeds, `|G_tmp|`, components, `|G_Ans|`, triples the
# trees pruned; and the gold passages found in `D_q`, among the source passages of `G_tmp` edges and among those of
# `G_Ans` edges. **Seed-match rate** = questions with at least one seed (components without a seed are never
# weighted, so MST removal counts the seed components' triples only).

# %%
per_q_path = report.save_table(per_q.set_index(["dataset", "qid"]), cfg, "03_subgraph_per_question",
                               "Algorithm 1 per question (counts of triples, entities, gold passages).")
show(per_q.set_index(["dataset", "qid"]), "Algorithm 1 per question", max_cols=8, full=per_q_path)
show(summary, "Algorithm 1 step sizes, MST removal and gold survival")
report.save_table(summary.round(2), cfg, "03_subgraph_steps",
                  f"Algorithm 1 step sizes, MST removal and gold-passage survival; profile {cfg.profile}, "
                  f"{report.questions_phrase(cfg)}, top_k {cfg.top_k}, match {cfg.match_method} at "
                  f"{cfg.ngram_threshold}, G_tmp reading {cfg.gtmp_reading}, edge weights "
                  f"{runs[cfg.datasets[0]]['subs'][0].weighting if runs[cfg.datasets[0]]['subs'] else '-'}.");

# %% [markdown]
# ### The two readings of `G_tmp`, side by side
#
# * **`seed_star`** (§2.2 prose, eq. 5): each seed entity and its adjacent edges. A union of stars: its spanning tree
#   can drop only parallel edges, edges between two seeds, and edges that close a cycle through a neighbour two seeds
#   share.
# * **`passages`** (the description of Algorithm 1): connect the entities of the retrieved passages into `G_tmp`, take
#   the connected components holding a seed (eq. 6), weight their edges, one tree per seed (eq. 7): the reading under
#   which eqs. 6-7 remove anything beyond parallel edges (the paper's stated reason for the MST) and the one that
#   reaches the second hop.
#
# `compare_readings` reruns steps 4-7 under both readings on the same `D_q`, `G_q` and NER replies (no LLM call): MST
# removal % and gold-passage survival as above.

# %%
readings = pd.concat({n: compare_readings(run["ws"], run["subs"], [q_.gold_pids for q_ in run["questions"]])
                      for n, run in runs.items()}, names=["dataset", "reading"])
print(f"this run's reading: {cfg.gtmp_reading}")
show(readings, "both readings of G_tmp on the same questions")
report.save_table(readings.round(2), cfg, "03_gtmp_readings",
                  f"Both G_tmp readings of Algorithm 1 on the same D_q, G_q and NER (profile {cfg.profile}; "
                  f"reading of this run {cfg.gtmp_reading}).");

# %% [markdown]
# ### Seed-match rate: how often Algorithm 1 has a seed at all
#
# When no seed matches, `G_Ans` is empty; the step that fails is eq. 5 (matching `E_q` to the entities of `G_q`).
# The rewrite then has no triple to work from: the best passages of `D_q` stand in for the subgraph, for the rewrite,
# the reflection and the reader alike (notebook 04). Per dataset, the share of questions with at least one seed: from
# the LLM's entities alone, after whole-triple matching (entities such as "PC maker of 1994" that name no node but do
# occur in a triple), and after the fallback to graph entities written in the question, under each similarity the
# library offers (`kgir_lib.kgir.entity_matching.SIMILARITIES`, at this run's threshold; measured on real pairs in
# `results/benchmarks/matching.md`).

# %%
from kgir_lib.kgir.entity_matching import SIMILARITIES

seed_rows = []
for method in SIMILARITIES:
    for n, run in runs.items():
        subs_m = [rebuild_subgraph(run["ws"], s, method=method) for s in run["subs"]]
        llm_only = [bool(s.seeds) and not s.used_fallback for s in subs_m]
        seed_rows.append({"dataset": n, "method": method, "questions": len(subs_m),
                          "seed from LLM entities %": 100 * sum(llm_only) / max(len(subs_m), 1),
                          "of which via whole triples %": 100 * sum(bool(s.matched_by_triple) and not s.used_fallback
                                                                    for s in subs_m) / max(len(subs_m), 1),
                          "seed after fallback %": 100 * sum(bool(s.seeds) for s in subs_m) / max(len(subs_m), 1),
                          "empty G_Ans %": 100 * sum(not s.kept for s in subs_m) / max(len(subs_m), 1),
                          "gold in G_Ans": sum(len(set(q_.gold_pids) & {t.pid for t in s.kept})
                                               for q_, s in zip(run["questions"], subs_m))})
seed_rate = pd.DataFrame(seed_rows).set_index(["dataset", "method"])
print(f"this run's similarity: {cfg.match_method}, threshold {cfg.ngram_threshold}")
show(seed_rate, "seed-match rate per similarity")
report.save_table(seed_rate.round(2), cfg, "03_seed_match",
                  f"Seed-match rate per dataset and similarity (threshold {cfg.ngram_threshold}; profile "
                  f"{cfg.profile}); the similarity of this run is {cfg.match_method}.");

# %% [markdown]
# ### NER fallback
#
# The share of questions whose NER reply gave no usable entity (none parsed, none occurring in the question, or none
# matching an entity of `G_q`), so the graph entities that occur in the question were used instead. The replies
# themselves, for the first questions:

# %%
ner_rows = [{"dataset": n, "question": q_.question, "NER reply": r.text, "E_q": ", ".join(s.E_q),
             "fallback": s.fallback_reason or ""}
            for n, run in runs.items() for q_, s, r in zip(run["questions"], run["subs"], run["ner"])]
show(pd.DataFrame(ner_rows).head(12), "NER replies", index=False)
print(f"NER fell back for {sum(1 for x in ner_rows if x['fallback'])} of {len(ner_rows)} questions "
      f"({sum(1 for x in ner_rows if x['fallback'] == 'no_entities')} without usable entities, "
      f"{sum(1 for x in ner_rows if x['fallback'] == 'no_match')} whose entities matched nothing in G_q)")

# %% [markdown]
# ### The trees at work on further questions
#
# Steps 6-7 for the next questions that show them best (the conventions of §2: kept triples blue, pruned orange and
# dashed, components without a seed grey and dotted, the gold bridge a purple diamond; each title says what was left
# out).

# %%
from kgir_lib.notebook.steps_viz import teaching_score

others = sorted(((teaching_score(focus_view(s, max_edges, bridges=gold[n][j])), n, j) for n, run in runs.items()
                 for j, s in enumerate(run["subs"]) if s.seeds and s.kept and (n, j) != (name, i)), reverse=True)
for _, n, j in others[:n_draw]:
    s = runs[n]["subs"][j]
    v = focus_view(s, max_edges, bridges=gold[n][j])
    fig, ax = steps_figure()
    draw_step(ax, v, "mst", title=f"[{n}] {runs[n]['questions'][j].question}\n"
                                  f"|G_Ans| {len(s.kept)}, pruned by the MST {len(s.pruned)}")
    show_figure(fig)
    print(v.left_out())
if not others:
    print("No other sampled question has a seed: there is nothing to draw.")

# %% [markdown]
# ### Sensitivity: the threshold θ and the edge weighting
#
# Steps 4-7 rerun on the same `D_q`, `G_q` and NER replies (`rebuild_subgraph`, no LLM call):
#
# * the threshold θ trades missed name variants (high θ) against spurious seeds (low θ); the effect need not be
#   monotone, because when no LLM entity reaches θ the fallback (graph entities written in the question) takes over.
#   The sweep includes this run's θ.
# * the weighting (cosine of question and triple text, the default without a reranker, against the source passage's
#   eq. 2 score) at this run's θ: it cannot change *how many* triples the trees remove (see above), only *which*, and
#   so which passages survive.

# %%
thetas = sorted({0.5, 0.7, 0.9, float(cfg.ngram_threshold)})
points = [(theta, "cosine") for theta in thetas] + [(float(cfg.ngram_threshold), "passage")]
sens = []
for theta, weighting in progress(points, desc="sensitivity"):
    rs = [{"dataset": n, **subgraph_row(rebuild_subgraph(run["ws"], s, threshold=theta, weighting=weighting),
                                        q_.gold_pids)}
          for n, run in runs.items() for q_, s in zip(run["questions"], run["subs"])]
    row = summarise_steps(pd.DataFrame(rs))
    run_weighting = next((s.weighting for r in runs.values() for s in r["subs"]), "cosine")
    sens.append({"threshold": theta, "weighting": weighting,
                 "this run": theta == cfg.ngram_threshold and weighting == run_weighting,
                 "mean seeds": pd.DataFrame(rs)["seeds"].mean(),
                 **row[["mean |G_tmp|", "mean |G_Ans|", "MST removal %", "empty G_Ans %",
                        "gold survival G_Ans %"]].to_dict()})
sens = pd.DataFrame(sens).set_index(["threshold", "weighting"])
show(sens, "steps 4-7 at other thresholds, and with the passage-score weighting")
report.save_table(sens.round(2), cfg, "03_subgraph_sensitivity",
                  f"Steps 4-7 with other eq. 5 thresholds ({cfg.match_method}) and the passage-score weighting "
                  f"(same D_q, G_q, NER).");

# %% [markdown]
# ### LLM calls of this notebook
#
# By stage, cache hits included (what the notebook costs on a fresh run). Passages a question retrieved that notebook
# 01 had not extracted are extracted here, on demand (stage `extract`: indexing cost).

# %%
show(llm.usage.table(), "LLM calls of this notebook, by stage")
