# %% [markdown]
# # 03 — The evidence subgraph: connected components and maximum spanning trees (KGIR-RAG §2.2, Algorithm 1)
#
# KGIR-RAG does not hand the retrieved passages to the LLM as they are. It turns them into an **evidence
# subgraph** `G_Ans`: the triples of the retrieved passages that hang together with the question's own
# entities, pruned to a maximum spanning tree per entity. Algorithm 1, step by step (one function each, in
# `kgir_lib/kgir/subgraph.py`, `kgir_lib/kgir/entity_matching.py` (NER and eq. 5) and `kgir_lib/kg/mst.py`
# (eqs. 6-7), unit-tested on hand-made graphs in `tests/test_subgraph.py`):
#
# | step | paper | function | what it does here |
# |---|---|---|---|
# | 1 | eq. 2 | `retrieve` | `D_q` = dense cosine top-k over the whole corpus (k = `cfg.top_k`) |
# | 2 | eq. 3 | `question_triples` | `G_q` = the triples whose source passage is in `D_q` |
# | 3 | eq. 4 | `ner_requests` / `parse_entities` | `E_q` = NER(q) by the LLM (prompt `kgir_ner.txt`), parsed tolerantly |
# | 4 | eq. 5 | `match_entities` | each question entity matched to the entities of `G_q`; every match is a *seed* |
# | 4 | eq. 5 | `tmp_graph` | `G_tmp`, under the reading `cfg.gtmp_reading` (below) |
# | 5 | eq. 6 | `seed_components` | the connected components `B_i` of `G_tmp` that hold a seed |
# | 6 | §2.2 | `edge_weights` | each edge of the `B_i` weighted by its relevance to `q` |
# | 7 | eq. 7 | `maximum_spanning_tree` | one maximum spanning tree per seed's component; `G_Ans` = their union |
#
# **Choices the paper leaves open** (documented in `kgir_lib/kgir/subgraph.py` and `kgir_lib/kgir/entity_matching.py`;
# the choices this run makes are printed below the parameters, from its config):
#
# * *the similarity of eq. 5* (`cfg.match_method`) and its threshold θ (`cfg.ngram_threshold`): a question
#   entity matches **every** graph entity at or above θ, so name variants ("Dell" / "Michael Dell") all become
#   seeds; §3c compares the similarities the library offers on this run's questions.
# * *`G_tmp`* (`cfg.gtmp_reading`): the paper describes it twice. The §2.2 prose adds each seed and its adjacent
#   edges (a union of stars, `seed_star`); the description of Algorithm 1 connects the entities of the retrieved
#   passages and keeps the components holding a seed (`passages`). Under the first the trees can remove only
#   parallel edges, edges between two seeds and edges closing a cycle through a neighbour two seeds share; §3b
#   compares what each reading prunes on the same questions.
# * *edge weights*: the paper scores each triple against `q` with the cross-encoder **bge-reranker-large** and
#   mentions the eq. 2 cosine as a cheaper alternative. With a reranker configured (`cfg.reranker_model`) the
#   reranker weighs; without one the weight is the **cosine of the question and the triple text** (`head
#   relation tail`) with the encoder of eq. 2, one score per edge like the reranker's. The literal "reuse eq. 2"
#   reading (every triple weighted by its source passage's score) is compared in §5.
# * *parallel edges and ties*: Kruskal's algorithm, heaviest edge first; equal weights keep `G_q` order
#   (retrieval rank, then extraction order), so of two triples between the same entities the heavier — on a
#   tie the earlier — is kept. Self-loops are never kept.
# * *NER guard and fallback*: entities the LLM returns that do not occur in the question (a small model often
#   copies its few-shot examples) are dropped; when nothing usable is left, or nothing left matches an entity
#   of `G_q`, the graph entities that occur in the question are used instead, and the subgraph records
#   `used_fallback`. How often that happens is reported in §3c.
#
# A property worth keeping in mind: the number of edges a maximum spanning forest removes is
# `|edges| − (|nodes| − |components|)` whatever the weights are — only *which* edges go depends on them.

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
n_draw = None           # further questions drawn in §4; None: 2

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from kgir_lib import report
from kgir_lib.data import sample_questions
from kgir_lib.eval.algorithm1 import compare_readings, rebuild_subgraph, subgraph_row, summarise_steps
from kgir_lib.kgir.subgraph import build_subgraphs
from kgir_lib.notebook import narrative
from kgir_lib.notebook.display import show
from kgir_lib.notebook.opening import open_notebook
from kgir_lib.notebook.steps_draw import draw_step, steps_figure
from kgir_lib.notebook.steps_viz import edge_table, focus_view, panels, pick_case, prune_reasons
from kgir_lib.pipeline import workspace
from kgir_lib.progress import progress

cfg, llm = open_notebook("03_subgraph_mst", globals())
max_edges = 25 if max_edges is None else int(max_edges)
n_draw = 2 if n_draw is None else int(n_draw)
display(Markdown(narrative.algorithm1_settings(cfg)))

# %% [markdown]
# ## 1. Algorithm 1 for every sampled question
#
# One workspace per dataset (`kgir_lib.pipeline.workspace`: dense index over the whole corpus, the knowledge
# graph of notebook 01 — for `musique_train` the real GPT-3.5 OpenIE triples of every passage). For each
# dataset, `build_subgraphs` retrieves `D_q` for all sampled questions, extracts the triples of any retrieved
# passage not yet in the graph (on demand, `Workspace.kg_for`; that is indexing cost, stage `extract`), sends
# **one batched NER call** for all questions, and runs steps 4–7 per question. Every `EvidenceSubgraph` keeps
# the output of every step. A fresh clone embeds each corpus once (a bar shows it) unless the committed
# embeddings seed the cache.

# %%
runs = {}
for name in progress(cfg.datasets, desc="datasets"):
    ws = workspace(cfg, name, llm, progress=True)
    qs = sample_questions(ws.dataset.questions, cfg.n_questions, cfg.seed)
    subs, ner = build_subgraphs(ws, [q.question for q in qs])
    runs[name] = {"ws": ws, "questions": qs, "subs": subs, "ner": ner}
    print(f"{name}: {len(qs)} questions, KG of {len(ws.kg)} triples over {len(ws.kg.extracted)} passages")
show(llm.usage.table(), "LLM calls of this notebook, by stage")

# %% [markdown]
# ## 2. One question, drawn step by step
#
# The worked question is chosen to teach (`kgir_lib.notebook.steps_viz.pick_case`; give `dataset` and `qid` to
# choose another): a **bridge question** whose seed, whose **gold bridge entity** (the hop the question does not
# name, from the dataset's gold chain: MuSiQue's decomposition, HotpotQA's supporting titles) and the trees'
# pruning all appear in the drawing, and whose drawing has no hub too crowded to read. `G_q` holds far more
# triples than a drawing can show legibly, so every panel draws the same neighbourhood: the chain of triples from
# a seed to the bridge first, then the entities nearest the seeds with **every** triple among them, and one or
# two small components without a seed. Each panel's title says what it left out, and the tables list every drawn
# triple.

# %%
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
    report.save_figure(fig, cfg, f"03_algorithm1_{step}")
    display(fig)
    plt.close(fig)


# %% [markdown]
# ### Steps 1–2: `D_q` and `G_q`
#
# Dense retrieval ranks every passage of the corpus by cosine similarity to the question (eq. 2) and keeps the
# top `cfg.top_k`; `G_q` is the triples extracted from them (eq. 3). Gold passages (those the dataset marks as
# supporting the answer) are flagged.

# %%
if i is not None:
    show(pd.DataFrame([{"rank": r + 1, "title": titles[p], "cosine": s, "gold": p in q.gold_pids,
                        "triples": len(ws.kg.triples_of([p]))} for r, (p, s) in enumerate(sub.retrieved)]),
         "D_q", digits=3, index=False)
    print(f"G_q: {len(sub.G_q)} triples. {view.left_out()}")
    draw("G_q")

# %% [markdown]
# ### Steps 3–4: the question's entities, matched to graph entities (eq. 4–5)
#
# The LLM lists the question's entities; the entities of `G_q` that match one of them (eq. 5, the rule printed
# at the top) are the **seeds**, red in the drawing; the gold bridge entity is a purple diamond. One question
# entity can match several graph entities — every name variant, and under some similarities every longer name
# that holds it — and each match is a seed: the table gives them all, the line below it how many each entity made.
# When `G_tmp` is all of `G_q` (the `passages` reading) the seeds are drawn with the components of the next step,
# so no panel repeats another.

# %%
if i is not None:
    print(f"NER reply: {runs[name]['ner'][i].text!r}")
    print(f"parsed {sub.llm_entities} -> E_q {sub.E_q}" +
          (f"  (fallback: {sub.fallback_reason})" if sub.used_fallback else ""))
    show(pd.DataFrame([{"question entity": e, "graph entity (seed)": g, "similarity": s}
                       for e, found in sub.matches.items() for g, s in found]
                      or [{"question entity": e, "graph entity (seed)": None, "similarity": None} for e in sub.E_q]),
         f"eq. 5 matches ({cfg.match_method}, θ = {cfg.ngram_threshold})", digits=2, index=False)
    print("; ".join(f"{e!r} -> {len(found)} seed(s)" + (f", {sum(s >= 0.999 for _, s in found)} of them at 1.0"
                                                         if len(found) > 1 else "")
                    for e, found in sub.matches.items()) + f". Seeds in all: {len(sub.seeds)}.")
    if "seeds" in panels(sub):
        draw("seeds")
    else:
        print(f"G_tmp = G_q here ({len(sub.G_tmp)} triples): the seeds are drawn with the components below.")

# %% [markdown]
# ### Steps 4–5: `G_tmp` and its components (eq. 5–6)
#
# `G_tmp` is built under the reading printed at the top. Its connected components that hold a seed are the
# `B_i` (green); a component without a seed (grey, dotted) is dropped here — its triples are never weighted
# and never reach `G_Ans`. Under the `passages` reading `G_tmp` is every triple of `G_q`, so this step's work is
# the split into components, drawn with the seeds that decide which go on.

# %%
if i is not None:
    seedless = [t for t in sub.G_tmp if view.classes.get(t) == "seedless"]
    print(f"G_tmp: {len(sub.G_tmp)} triples. {len(sub.components)} component(s) with a seed: " +
          "; ".join(f"seeds {c.seeds[:3]}{' …' if len(c.seeds) > 3 else ''}: {len(c.nodes)} entities, "
                    f"{len(c.triples)} triples" for c in sub.components) +
          f". Components without a seed: {view.counts['seedless_components']} ({len(seedless)} triples).")
    draw("components")

# %% [markdown]
# ### Steps 6–7: edge weights and one maximum spanning tree per component (eq. 7)
#
# Every triple of a `B_i` is weighted by its relevance to the question (the weighting printed at the top).
# Kruskal's algorithm takes the heaviest triples first and keeps a triple only if it joins two entities the
# tree does not yet connect: a **parallel** triple (a second relation between the same two entities) and a
# triple that **closes a cycle** are pruned (orange, dashed). The table lists every drawn triple with its
# verdict, heaviest first.

# %%
if i is not None:
    reasons = pd.Series(prune_reasons(sub)).value_counts()
    print(f"The trees keep {len(sub.kept)} of the {len(sub.kept) + len(sub.pruned)} triples of the seed components "
          f"and prune {len(sub.pruned)}: " + ", ".join(f"{n} {r}" for r, n in reasons.items()) + ".")
    draw("mst")
    show(edge_table(view, titles, q.gold_pids), "the drawn triples and what the trees did with them", digits=3,
         index=False, max_rows=max_edges)

# %% [markdown]
# ### Result: `G_Ans`
#
# The union of the trees is the evidence subgraph the rewrite (eq. 8) and the reflection read, heaviest triple
# first.

# %%
if i is not None:
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
# ## 3. Over the datasets: what each step keeps, what the trees remove, whether gold passages survive
#
# Per question: `|D_q|`, `|G_q|`, `|E_q|`, whether NER fell back, seeds, `|G_tmp|`, components, `|G_Ans|`,
# triples the trees pruned; and the gold passages found in `D_q`, among the source passages of `G_tmp` edges
# and among the source passages of `G_Ans` edges. **Gold survival** = gold passages behind a `G_Ans` edge /
# gold passages in `D_q` (what the subgraph keeps of what retrieval found). **MST removal** = pruned / triples of
# the seed components `B_i` (components without a seed are never weighted). **Seed-match rate** = questions
# with at least one seed.

# %%
rows = []
for name_, run in runs.items():
    for q_, s in zip(run["questions"], run["subs"]):
        rows.append({"dataset": name_, "qid": q_.qid, **subgraph_row(s, q_.gold_pids)})
per_q = pd.DataFrame(rows)
per_q_path = report.save_table(per_q.set_index(["dataset", "qid"]), cfg, "03_subgraph_per_question",
                               "Algorithm 1 per question (counts of triples, entities, gold passages).")
show(per_q.set_index(["dataset", "qid"]), "Algorithm 1 per question", max_cols=8, full=per_q_path)




summary = per_q.groupby("dataset", sort=False).apply(summarise_steps, include_groups=False)
summary.loc["all"] = summarise_steps(per_q)
print(report.model_note(cfg, short=True))
show(summary, "Algorithm 1 step sizes, MST removal and gold survival")
report.save_table(summary.round(2), cfg, "03_subgraph_steps",
                  f"Algorithm 1 step sizes, MST removal and gold-passage survival; profile {cfg.profile}, "
                  f"{cfg.n_questions} questions a dataset, top_k {cfg.top_k}, match {cfg.match_method} at "
                  f"{cfg.ngram_threshold}, G_tmp reading {cfg.gtmp_reading}, edge weights "
                  f"{runs[cfg.datasets[0]]['subs'][0].weighting if runs[cfg.datasets[0]]['subs'] else '-'}.");

# %% [markdown]
# ### 3b. The two readings of `G_tmp`, side by side
#
# * **`seed_star`** (§2.2 prose, eq. 5): each seed entity and its adjacent edges. A union of stars: its spanning
#   tree can drop only parallel edges, edges between two seeds, and edges that close a cycle through a neighbour
#   two seeds share.
# * **`passages`** (the description of Algorithm 1): connect the entities of the retrieved passages into
#   `G_tmp`, take the connected components `B_i` holding a seed (eq. 6), weight their edges, MST per seed
#   (eq. 7): the reading under which eqs. 6-7 remove anything beyond parallel edges — the paper's stated
#   reason for the MST — and the one that reaches the second hop.
#
# `compare_readings` reruns steps 4–7 under both readings on the same `D_q`, `G_q` and NER replies (no LLM
# call): MST removal % (pruned / triples of the seed components) and gold-passage survival (gold passages behind
# a `G_Ans` edge / gold passages in `D_q`).

# %%
readings = pd.concat({n: compare_readings(run["ws"], run["subs"], [q_.gold_pids for q_ in run["questions"]])
                      for n, run in runs.items()}, names=["dataset", "reading"])
print(f"this run's reading: {cfg.gtmp_reading}")
show(readings, "both readings of G_tmp on the same questions")
report.save_table(readings.round(2), cfg, "03_gtmp_readings",
                  f"Both G_tmp readings of Algorithm 1 on the same D_q, G_q and NER (profile {cfg.profile}; "
                  f"reading of this run {cfg.gtmp_reading}).");

# %% [markdown]
# ### 3c. Seed-match rate: how often Algorithm 1 has a seed at all
#
# When no seed matches, `G_Ans` is empty; the step that fails is eq. 5 (matching `E_q` to the entities of
# `G_q`). Rewrite then has no triple to work from: the best passages of `D_q` stand in for the subgraph, for the
# rewrite, the reflection and the reader alike (notebook 04). The table
# gives, per dataset, the share of questions with at least one seed: from the LLM's entities alone, after
# whole-triple matching (entities such as "PC maker of 1994" that name no node but do occur in a triple), and
# after the fallback to graph entities written in the question — under each similarity the library offers
# (`kgir_lib.kgir.entity_matching.SIMILARITIES`, at this run's threshold; measured on real pairs in
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
# **NER fallback.** The share of questions whose NER reply gave no usable entity (none parsed, none occurring
# in the question, or none matching an entity of `G_q`), so the graph entities that occur in the question were
# used instead. The replies themselves, for the first questions:

# %%
ner_rows = [{"dataset": n, "question": q_.question, "NER reply": r.text, "E_q": ", ".join(s.E_q),
             "fallback": s.fallback_reason or ""}
            for n, run in runs.items() for q_, s, r in zip(run["questions"], run["subs"], run["ner"])]
show(pd.DataFrame(ner_rows).head(12), "NER replies", index=False)
print(f"NER fell back for {sum(1 for x in ner_rows if x['fallback'])} of {len(ner_rows)} questions "
      f"({sum(1 for x in ner_rows if x['fallback'] == 'no_entities')} without usable entities, "
      f"{sum(1 for x in ner_rows if x['fallback'] == 'no_match')} whose entities matched nothing in G_q)")

# %% [markdown]
# ## 4. The trees at work on further questions
#
# Steps 6–7 for the next questions that show them best (same conventions as §2: kept triples blue, pruned
# orange and dashed, components without a seed grey and dotted, the gold bridge a purple diamond; each title
# says what was left out).

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
    display(fig)
    plt.close(fig)
    print(v.left_out())
if not others:
    print("No other sampled question has a seed: there is nothing to draw.")

# %% [markdown]
# ## 5. Sensitivity: the threshold θ and the edge weighting
#
# Steps 4–7 rerun on the same `D_q`, `G_q` and NER replies (`rebuild_subgraph`, no LLM call):
#
# * the threshold θ trades missed name variants (high θ) against spurious seeds (low θ); the effect need not
#   be monotone, because when no LLM entity reaches θ the fallback (graph entities written in the question)
#   takes over. The sweep includes this run's θ.
# * the weighting — cosine of question and triple text (the default without a reranker) against the source
#   passage's eq. 2 score — at this run's θ: it cannot change *how many* triples the trees remove (see the
#   introduction), only *which*, and so which passages survive.

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
# ## What to take from this notebook
#
# * `G_Ans` is much smaller than `G_q`: the components that hold a seed keep part of the retrieved passages'
#   triples, and the trees remove the parallel and cycle-closing ones among them (§2 shows which, and why).
# * Gold survival shows what the subgraph costs in recall: a gold passage retrieved in `D_q` whose triples do
#   not reach a seed's component is gone from `G_Ans` (KGIR-RAG recovers it only through the rewrite and the next
#   round's retrieval, notebook 04).
# * The graphs of the LLM-extracted datasets and the NER come from the small model printed at the top, so both
#   the seeds and the triples are noisy; `musique_train` shows the same algorithm on real GPT-3.5 triples. The
#   paper uses Qwen2.5-72B for both.
