# %% [markdown]
# # 02 — Dense and BM25 indexes, and single-step retrieval quality (KGIR-RAG §2.2 eq. 2, §3.3.3)
#
# KGIR-RAG's first step (Algorithm 1, step 1) is dense retrieval: the cosine similarity between the
# question embedding and every passage embedding,
#
# $$s(q, d) = \cos(\mathbf{e}_q, \mathbf{e}_d) \qquad \text{(KGIR-RAG eq. 2)}$$
#
# and the top-k passages `D_q` (paper: BGE-M3, k = 10). Every method of the suite starts from this index,
# so its quality bounds what they can find. This notebook builds, over the **whole corpus** of each dataset
# (the retrieval pool is never the question's own paragraphs):
#
# * the dense index with the profile's encoder (`all-MiniLM-L6-v2` on `sample`, BGE-M3 on `paper`),
#   embeddings cached in `results/<profile>/cache/embeddings/`;
# * Okapi BM25 (rank_bm25, k1 = 1.5, b = 0.75) over title + text;
#
# and measures **single-step** retrieval with HippoRAG's Recall@k: per question, the share of its gold
# (supporting) passages among the first k retrieved, averaged, ×100 (`kgir_lib.eval.metrics.recall_at_k`).
# The published numbers beside ours (HippoRAG 2 paper, arXiv 2502.14802) use other retrievers
# (BM25, Contriever, NV-Embed-v2) and a larger pool (the corpus of all 1,000 questions), so they frame
# ours; they are not the same experiment.

# %% tags=["parameters"]
profile = None              # None: $KGIR_PROFILE, else "sample"
config_overrides = {}      # any other Config field, e.g. {"llm_model": "...", "top_k": 5}; a field passed
                           # by name (papermill / runner -p NAME VALUE) reaches the config too
datasets = None      # e.g. ["musique", "hotpotqa", "musique_train"]; None: the profile's
n_questions = None   # size of the question sample the later notebooks answer (recall is also shown on it)
embed_model = None   # encoder override, e.g. "BAAI/bge-m3"; None: the profile's
max_k = 20           # Recall@k curve up to this k

# %%
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
import pandas as pd
from IPython.display import display

from kgir_lib import pipeline, report
from kgir_lib.data import load_dataset, sample_questions
from kgir_lib.eval.retrieval_eval import recall_by_dataset, recall_curve, recall_table, with_published_recall
from kgir_lib.notebook.display import show, show_figure
from kgir_lib.notebook.opening import open_notebook
from kgir_lib.retrieval import BM25Index

cfg, _ = open_notebook("02_index", globals(), llm=False)  # no LLM call in this notebook

# %% [markdown]
# ## 1. Build the indexes
#
# Loading a dataset validates it; the dense index reuses the embeddings notebook 01 computed (cache keyed
# by model and corpus content), BM25 is built in memory (a second or two).

# %%
loaded, indexes = {}, {}
for name in cfg.datasets:
    ds = load_dataset(name, cfg.data_path)
    loaded[name] = ds
    indexes[name] = {f"dense ({cfg.embed_model})": pipeline.dense_index(cfg, ds), "BM25": BM25Index(ds.corpus.passages)}
    print(f"{name}: {len(ds.corpus)} passages, {len(ds.questions)} questions "
          f"({sum(bool(q.gold_pids) for q in ds.questions)} with gold passages)")

# %% [markdown]
# ## 2. Recall@2 and Recall@5 beside the published numbers
#
# Ours are computed over **every question of each file** of the profile's datasets (the output below gives
# the counts): retrieval costs no LLM call, and more questions give steadier numbers. A second table
# gives the same on the profile's question sample (`n_questions`), the questions later notebooks answer,
# so their multi-step recall can be read against single-step retrieval on the same questions.

# %%
curves = {name: recall_curve(idx, loaded[name].questions, range(1, max_k + 1)) for name, idx in indexes.items()}
tables = {name: recall_table(idx, loaded[name].questions, (2, 5)) for name, idx in indexes.items()}
recall = with_published_recall(recall_by_dataset(tables, prefix="ours: "), cfg.datasets)
pools = ", ".join(f"{name} {len(ds.corpus)} passages / {int(tables[name]['n'].iloc[0])} questions"
                  for name, ds in loaded.items())
caption = (f"Single-step Recall@2 / Recall@5 (×100; HippoRAG's definition). Ours: {cfg.embed_model} dense and BM25 over "
           f"the sample data's whole corpora ({pools}). Published: HippoRAG 2 paper "
           "(arXiv 2502.14802) over the 1,000-question corpora with BM25, Contriever and NV-Embed-v2 — different "
           "retrievers and a larger pool, shown for orientation only. musique_train has no published numbers.")
report.save_table(recall, cfg, "recall_single_step", caption)
print(caption)
show(recall)

# %%
samples = {name: sample_questions(loaded[name].questions, cfg.n_questions, cfg.seed) for name in indexes}
sample_recall = recall_by_dataset({name: recall_table(idx, samples[name], (2, 5)) for name, idx in indexes.items()},
                                  with_n=True)
report.save_table(sample_recall, cfg, "recall_single_step_sample",
                  f"Single-step Recall@2 / @5 (×100) on the question sample of profile '{cfg.profile}' "
                  f"(n_questions={cfg.n_questions}, seed={cfg.seed}).")
show(sample_recall)

# %% [markdown]
# ## 3. Recall@k against k
#
# How fast each retriever gathers the gold passages as k grows. The dashed line marks k = 10, the top-k of
# KGIR-RAG's first retrieval (and of KG²RAG's seed retrieval).

# %%
fig, axes = plt.subplots(1, len(curves), figsize=(4.5 * len(curves), 3.4), squeeze=False, sharey=True)
for ax, (name, curve) in zip(axes[0], curves.items()):
    for retriever, part in curve.groupby("retriever", sort=False):
        ax.plot(part["k"], part["recall"], marker="o", markersize=3, label=retriever)
    ax.axvline(cfg.top_k, color="grey", linestyle="--", linewidth=0.8)
    ax.set_title(f"{name} (n = {int(curve['n'].iloc[0])})")
    ax.set_xlabel("k")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
axes[0][0].set_ylabel("Recall@k (×100)")
axes[0][-1].legend(loc="lower right", fontsize=10)
fig.tight_layout()
show_figure(fig, cfg, "recall_at_k")
pd.concat(curves, names=["dataset"]).reset_index(level=0).to_csv(cfg.path("tables", "recall_curve.csv"), index=False)
