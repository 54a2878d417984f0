# %% [markdown]
# # 03 — The evidence subgraph: connected components and maximum spanning trees (KGIR-RAG §2.2, Algorithm 1)
#
# KGIR-RAG does not hand the retrieved passages to the LLM as they are. It turns them into an **evidence
# subgraph** `G_Ans`: the triples of the retrieved passages that hang off the question's own entities, pruned
# to a maximum spanning tree per entity. Algorithm 1, step by step (one function each in
# `kgir_lib/subgraph.py`, unit-tested on hand-made graphs in `tests/test_subgraph.py`):
#
# | step | paper | function | what it does here |
# |---|---|---|---|
# | 1 | eq. 2 | `retrieve` | `D_q` = dense cosine top-k over the whole corpus (k = `top_k`) |
# | 2 | eq. 3 | `question_triples` | `G_q` = the triples whose source passage is in `D_q` |
# | 3 | eq. 4 | `ner_requests` / `parse_entities` | `E_q` = NER(q) by the LLM (prompt `kgir_ner.txt`), parsed tolerantly |
# | 4 | eq. 5 | `match_entities` | each question entity matched to the entities of `G_q` that are the same entity (rule `match_method` at θ) |
# | 4 | eq. 5 | `seed_graph` | `G_tmp` = the matched seeds and all their adjacent edges in `G_q` |
# | 5 | eq. 6 | `seed_components` | the connected components `B_i` of `G_tmp` that hold a seed |
# | 6 | §2.2 | `edge_weights` | each edge weighted by its relevance to `q` |
# | 7 | eq. 7 | `maximum_spanning_tree` | one maximum spanning tree per seed's component; `G_Ans` = their union |
#
# **Choices the paper leaves open** (documented in `kgir_lib/subgraph.py`):
#
# * *matching rule* (`match_method`, threshold θ = `ngram_threshold`): eq. 5 is to judge whether a question
#   entity and a graph entity are the same entity. The rules (character-trigram Dice and overlap coefficient,
#   token rules, best-only and length-ratio variants) were measured on hand-labelled pairs from the local
#   reference run (`results/benchmarks/matching.md`); the overlap coefficient accepts any name that contains
#   the question entity ("state" / "United States"), and a spanning tree keeps every node, so the MST cannot
#   undo a wrong seed. §3c compares the rules' seed-match rates.
# * *edge weights*: the paper scores each triple against `q` with the cross-encoder **bge-reranker-large**
#   (Algorithm 1) and mentions the eq. 2 cosine as a cheaper alternative. With a reranker configured (`paper`
#   profile) we use the reranker; without one (`sample`, `ci`) the weight is the **cosine of the question and the
#   triple text** (`head relation tail`) with the same encoder as eq. 2 — one score per edge, like the
#   reranker. The literal "reuse eq. 2" reading (every triple weighted by its source passage's score) is
#   compared in §5: it gives all triples of a passage the same weight, so ties decide the tree among them.
# * *parallel edges and ties*: Kruskal's algorithm, heaviest edge first; equal weights keep `G_q` order
#   (retrieval rank, then extraction order), so of two triples between the same entities the heavier — on a
#   tie the earlier — is kept. Self-loops are never kept.
# * *NER guard and fallback*: entities the LLM returns that do not occur in the question (a 135M model often
#   copies its few-shot examples) are dropped; when nothing usable is left, or nothing left matches an entity
#   of `G_q`, the graph entities that occur in the question are used instead, and the subgraph records
#   `used_fallback`. How often that happens is reported below.
#
# A property worth keeping in mind when reading the numbers: the number of edges a maximum spanning forest
# removes is `|edges| − (|nodes| − |components|)` whatever the weights are — only *which* edges go depends on
# them. `G_tmp` is a union of stars around the seeds, so the trees remove exactly the parallel edges (two
# triples between the same pair of entities) and the edges that close a cycle through two seeds.

# %% tags=["parameters"]
profile = None              # None: $KGIR_PROFILE, else "sample"
config_overrides = {}      # any other Config field, e.g. {"llm_model": "...", "top_k": 5}; a field passed
                           # by name (papermill / runner -p NAME VALUE) reaches the config too
datasets = None         # None: the profile's datasets (sample: musique, hotpotqa, musique_train)
n_questions = None      # questions a dataset; None: the profile's (sample: 4, ci: 2)
top_k = None            # |D_q|; None: the profile's (10, as in the paper)
ngram_threshold = None  # θ of the entity matching (eq. 5); None: the profile's
n_draw = None           # subgraphs drawn in §4; None: 3

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from kgir_lib import report
from kgir_lib.progress import progress
from kgir_lib.data import sample_questions
from kgir_lib.notebook import open_notebook
from kgir_lib.pipeline import workspace
from kgir_lib.subgraph import build_subgraphs, rebuild_subgraph, subgraph_row
from kgir_lib.viz import draw_subgraph, legend_handles, pick_drawable

cfg, llm = open_notebook("03_subgraph_mst", globals())
n_draw = 3 if n_draw is None else int(n_draw)
print(f"n-gram n {cfg.ngram_n}, threshold {cfg.ngram_threshold}")

# %% [markdown]
# ## 1. Algorithm 1 for every sampled question
#
# One workspace per dataset (`kgir_lib.pipeline.workspace`: dense index over the whole corpus, the knowledge
# graph of notebook 01 — for `musique_train` the real GPT-3.5 OpenIE triples of every passage). For each
# dataset, `build_subgraphs` retrieves `D_q` for all sampled questions, extracts the triples of any retrieved
# passage not yet in the graph (on demand, `Workspace.kg_for`; that is indexing cost, stage `extract`), sends
# **one batched NER call** for all questions, and runs steps 4–7 per question. Every `EvidenceSubgraph` keeps
# the output of every step.

# %%
runs = {}
for name in progress(cfg.datasets, desc="datasets"):
    ws = workspace(cfg, name, llm, progress=False)
    qs = sample_questions(ws.dataset.questions, cfg.n_questions, cfg.seed)
    subs, ner = build_subgraphs(ws, [q.question for q in qs])
    runs[name] = {"ws": ws, "questions": qs, "subs": subs, "ner": ner}
    print(f"{name}: {len(qs)} questions, KG of {len(ws.kg)} triples over {len(ws.kg.extracted)} passages")
display(llm.usage.table())

# %% [markdown]
# ## 2. One question, step by step
#
# The first sampled question of the first dataset whose subgraph is not empty: its retrieved passages (gold
# ones marked), the raw NER reply and the entities kept, the eq. 5 matches (with their similarity),
# the components of `G_tmp`, and every edge of `G_tmp` with its weight and whether the trees kept it.

# %%
name, i = next(((n, j) for n in runs for j, s in enumerate(runs[n]["subs"]) if s.G_tmp),
               (cfg.datasets[0], 0))
ws, q, sub = runs[name]["ws"], runs[name]["questions"][i], runs[name]["subs"][i]
print(f"[{name}] Q: {q.question}\n    gold answer: {q.answers[0]}")
print("\nStep 1 (eq. 2) — D_q:")
display(pd.DataFrame([{"rank": r + 1, "title": ws.dataset.corpus[p].title, "cosine": s, "gold": p in q.gold_pids,
                       "triples": len(ws.kg.triples_of([p]))} for r, (p, s) in enumerate(sub.retrieved)]))
print(f"Step 2 (eq. 3) — G_q: {len(sub.G_q)} triples")
print(f"Step 3 (eq. 4) — NER reply: {runs[name]['ner'][i].text!r}")
print(f"    parsed {sub.llm_entities} -> E_q {sub.E_q}" + (f"  (fallback: {sub.fallback_reason})" if sub.used_fallback else ""))
print(f"Step 4 (eq. 5) — matches ({cfg.match_method} >= {cfg.ngram_threshold}):")
display(pd.DataFrame([{"question entity": e, "graph entity": g, "similarity": s} for e, found in sub.matches.items()
                      for g, s in found] or [{"question entity": e, "graph entity": None, "similarity": None}
                                             for e in sub.E_q]))
print(f"Step 5 (eq. 6) — {len(sub.components)} component(s): " +
      "; ".join(f"seeds {c.seeds}: {len(c.nodes)} entities, {len(c.triples)} triples" for c in sub.components))
print("Steps 6-7 (eq. 7) — G_tmp edges, weights and the trees' verdict:")
kept = set(sub.kept)
display(pd.DataFrame([{"head": t.head, "relation": t.relation, "tail": t.tail, "weight": sub.weights.get(t),
                       "in G_Ans": t in kept, "source": ws.dataset.corpus[t.pid].title,
                       "gold source": t.pid in q.gold_pids} for t in sub.G_tmp]).round(3))

# %% [markdown]
# ## 3. Over the datasets: what each step keeps, what the trees remove, whether gold passages survive
#
# Per question: `|D_q|`, `|G_q|`, `|E_q|`, whether NER fell back, seeds, `|G_tmp|`, components, `|G_Ans|`,
# triples the trees pruned; and the gold passages found in `D_q`, among the source passages of `G_tmp` edges
# and among the source passages of `G_Ans` edges. **Gold survival** = gold passages behind a `G_Ans` edge /
# gold passages in `D_q` (what the subgraph keeps of what retrieval found). **MST removal** = pruned / triples of
# the seed components `B_i` (under the default `passages` reading `G_tmp` also holds components without a seed,
# which are never weighted). **Seed-match rate** = questions with at least one seed.

# %%
rows = []
for name, run in runs.items():
    for q, s in zip(run["questions"], run["subs"]):
        rows.append({"dataset": name, "qid": q.qid, **subgraph_row(s, q.gold_pids)})
per_q = pd.DataFrame(rows)
display(per_q)


def summarise_steps(df: pd.DataFrame) -> pd.Series:
    g_dq = df["gold_in_D_q"].sum()
    return pd.Series({
        "questions": len(df), "mean |G_q|": df["G_q"].mean(), "mean |G_tmp|": df["G_tmp"].mean(),
        "mean |G_Ans|": df["G_Ans"].mean(),
        "MST removal %": 100 * df["pruned"].sum() / max(df["G_Ans"].sum() + df["pruned"].sum(), 1),
        "seed-match %": 100 * df["seeded"].mean(),
        "G_q -> G_Ans kept %": 100 * df["G_Ans"].sum() / max(df["G_q"].sum(), 1),
        "empty G_Ans %": 100 * (df["G_Ans"] == 0).mean(), "NER fallback %": 100 * df["fallback"].mean(),
        "gold in D_q %": 100 * g_dq / max(df["gold"].sum(), 1),
        "gold survival G_tmp %": 100 * df["gold_in_G_tmp"].sum() / max(g_dq, 1),
        "gold survival G_Ans %": 100 * df["gold_in_G_Ans"].sum() / max(g_dq, 1),
    })


summary = per_q.groupby("dataset", sort=False).apply(summarise_steps, include_groups=False)
summary.loc["all"] = summarise_steps(per_q)
print(report.model_note(cfg, short=True))
display(summary.round(1))
report.save_table(summary.round(2), cfg, "03_subgraph_steps",
                  f"Algorithm 1 step sizes, MST removal and gold-passage survival; profile {cfg.profile}, "
                  f"{cfg.n_questions} questions a dataset, top_k {cfg.top_k}, n-gram threshold {cfg.ngram_threshold}, "
                  f"edge weights {runs[cfg.datasets[0]]['subs'][0].weighting if runs[cfg.datasets[0]]['subs'] else '-'}.")
report.save_table(per_q.set_index(["dataset", "qid"]), cfg, "03_subgraph_per_question",
                  "Algorithm 1 per question (counts of triples, entities, gold passages).")

# %% [markdown]
# ### 3b. The two readings of `G_tmp`, side by side
#
# The paper describes `G_tmp` twice (issue 10 item 4; `cfg.gtmp_reading`, documented in `kgir_lib/subgraph.py`):
#
# * **`seed_star`** (§2.2 prose, eq. 5): each seed entity and its adjacent edges. A union of stars: its spanning
#   tree can only drop parallel edges and edges between two seeds.
# * **`passages`** (the description of Algorithm 1): connect the entities of the retrieved passages into
#   `G_tmp`, take the connected components `B_i` holding a seed (eq. 6), weight their edges, MST per seed
#   (eq. 7). This is the default: it is the reading under which eqs. 6-7 remove anything beyond parallel
#   edges — the paper's stated reason for the MST — and the one that reaches the second hop.
#
# `compare_readings` reruns steps 4–7 under both readings on the same `D_q`, `G_q` and NER replies (no LLM
# call): MST removal % (pruned / triples of the seed components) and gold-passage survival (gold passages behind
# a `G_Ans` edge / gold passages in `D_q`).

# %%
from kgir_lib.subgraph import compare_readings

readings = pd.concat({n: compare_readings(run["ws"], run["subs"], [q.gold_pids for q in run["questions"]])
                      for n, run in runs.items()}, names=["dataset", "reading"])
display(readings.round(1))
report.save_table(readings.round(2), cfg, "03_gtmp_readings",
                  f"Both G_tmp readings of Algorithm 1 on the same D_q, G_q and NER (profile {cfg.profile}; "
                  f"default reading {cfg.gtmp_reading}).")

# %% [markdown]
# ### 3c. Seed-match rate: how often Algorithm 1 has a seed at all
#
# When no seed matches, `G_Ans` is empty; the step that fails is eq. 5 (matching `E_q` to the entities of
# `G_q`). Rewrite then has no fact to substitute and returns the question, so the rewritten retrieval repeats
# `D_q` (notebook 04 shows what KGIR-RAG does then: the passages of `D_q` stand in for the subgraph). The table
# gives, per dataset, the share of questions with at least one seed: from the LLM's entities alone, after
# whole-triple matching (entities such as "PC maker of 1994" that name no node but do occur in a triple), and
# after the fallback to graph entities written in the question — under each similarity (`cfg.match_method`;
# measured on real pairs in `results/benchmarks/matching.md`).

# %%
seed_rows = []
for method in dict.fromkeys(("dice", "overlap", "containment", cfg.match_method)):
    for n, run in runs.items():
        subs_m = [rebuild_subgraph(run["ws"], s, method=method) for s in run["subs"]]
        llm_only = [bool(s.seeds) and not s.used_fallback for s in subs_m]
        seed_rows.append({"dataset": n, "method": method, "questions": len(subs_m),
                          "seed from LLM entities %": 100 * sum(llm_only) / max(len(subs_m), 1),
                          "of which via whole triples %": 100 * sum(bool(s.matched_by_triple) and not s.used_fallback
                                                                    for s in subs_m) / max(len(subs_m), 1),
                          "seed after fallback %": 100 * sum(bool(s.seeds) for s in subs_m) / max(len(subs_m), 1),
                          "empty G_Ans %": 100 * sum(not s.kept for s in subs_m) / max(len(subs_m), 1),
                          "gold in G_Ans": sum(len(set(q.gold_pids) & {t.pid for t in s.kept})
                                               for q, s in zip(run["questions"], subs_m))})
seed_rate = pd.DataFrame(seed_rows).set_index(["dataset", "method"])
display(seed_rate.round(1))
report.save_table(seed_rate.round(2), cfg, "03_seed_match",
                  f"Seed-match rate per dataset and similarity (threshold {cfg.ngram_threshold}; profile "
                  f"{cfg.profile}); the default similarity is {cfg.match_method}.")

# %% [markdown]
# **NER fallback.** The count above is the share of questions whose NER reply gave no usable entity (none
# parsed, none occurring in the question, or none matching an entity of `G_q`), so the graph entities that
# occur in the question were used instead. The replies themselves, for the first questions:

# %%
ner_rows = [{"dataset": n, "question": q.question[:80], "NER reply": r.text[:80], "E_q": s.E_q,
             "fallback": s.fallback_reason or ""}
            for n, run in runs.items() for q, s, r in zip(run["questions"], run["subs"], run["ner"])]
display(pd.DataFrame(ner_rows).head(12))
print(f"NER fell back for {sum(1 for x in ner_rows if x['fallback'])} of {len(ner_rows)} questions "
      f"({sum(1 for x in ner_rows if x['fallback'] == 'no_entities')} without usable entities, "
      f"{sum(1 for x in ner_rows if x['fallback'] == 'no_match')} whose entities matched nothing in G_q)")

# %% [markdown]
# ## 4. Drawings: `G_tmp` with `G_Ans` highlighted
#
# For a few real questions (legible ones, those where the trees pruned something first): seeds are outlined
# red nodes, `G_Ans` edges are solid blue (darker = heavier), pruned edges are grey and dashed; a pruned
# triple parallel to a kept one (same two entities) is a grey arc beside it, and the label of such a pair reads
# `relation (+n)`.

# %%
picks = [(n, j) for n, run in runs.items() for j in pick_drawable(run["subs"], n=n_draw)][:n_draw]
if picks:
    fig, axes = plt.subplots(1, len(picks), figsize=(6.5 * len(picks), 6), squeeze=False)
    for ax, (n, j) in zip(axes[0], picks):
        s, q = runs[n]["subs"][j], runs[n]["questions"][j]
        draw_subgraph(ax, s, title=f"[{n}] {q.question[:70]}\n|G_tmp| {len(s.G_tmp)}, |G_Ans| {len(s.kept)}, "
                                   f"pruned {len(s.pruned)}")
    axes[0][0].legend(handles=legend_handles(), loc="lower left", fontsize=7)
    fig.tight_layout()
    report.save_figure(fig, cfg, "03_subgraphs")
    display(fig)
    plt.close(fig)
else:
    print("no subgraph small enough to draw in this sample")

# %% [markdown]
# ## 5. Sensitivity: the n-gram threshold and the edge weighting
#
# Steps 4–7 rerun on the same `D_q`, `G_q` and NER replies (`rebuild_subgraph`, no LLM call):
#
# * the threshold θ trades missed name variants (high θ) against spurious seeds (low θ); the effect need not
#   be monotone, because when no LLM entity reaches θ the fallback (graph entities written in the question)
#   takes over;
# * the weighting — cosine of question and triple text (default without a reranker) against the source
#   passage's eq.-2 score — cannot change *how many* triples the trees remove (see the introduction), only
#   *which*, and so which passages survive.

# %%
sens = []
for theta in (0.3, 0.5, 0.7, 0.9):
    for weighting in ("cosine", "passage"):
        if weighting == "passage" and theta != cfg.ngram_threshold:
            continue
        rs = []
        for n, run in runs.items():
            for q, s in zip(run["questions"], run["subs"]):
                rs.append({"dataset": n, **subgraph_row(rebuild_subgraph(run["ws"], s, threshold=theta,
                                                                         weighting=weighting), q.gold_pids)})
        row = summarise_steps(pd.DataFrame(rs))
        sens.append({"threshold": theta, "weighting": weighting, "mean seeds": pd.DataFrame(rs)["seeds"].mean(),
                     **row[["mean |G_tmp|", "mean |G_Ans|", "MST removal %", "empty G_Ans %",
                            "gold survival G_Ans %"]].to_dict()})
sens = pd.DataFrame(sens).set_index(["threshold", "weighting"])
display(sens.round(1))
report.save_table(sens.round(2), cfg, "03_subgraph_sensitivity",
                  "Steps 4-7 with other n-gram thresholds and the passage-score weighting (same D_q, G_q, NER).")

# %% [markdown]
# ## What to take from this notebook
#
# * `G_Ans` is much smaller than `G_q`: the seeds' neighbourhoods keep a small share of the retrieved
#   passages' triples, and the trees remove the parallel and cycle-closing ones among them.
# * Gold survival shows what the subgraph costs in recall: a gold passage retrieved in `D_q` whose triples do
#   not touch a seed is gone from `G_Ans` (KGIR-RAG recovers it only through the rewrite and the next round's
#   retrieval, notebook 04).
# * On the `sample` profile the graph of `musique` and `hotpotqa` comes from SmolLM2-135M (notebook 01) and the
#   NER too, so both the seeds and the triples are noisy; `musique_train` shows the same algorithm on real
#   GPT-3.5 triples. The paper uses Qwen2.5-72B for both.
