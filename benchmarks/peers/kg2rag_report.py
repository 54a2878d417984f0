"""The KG²RAG cross-check report: ``results/benchmarks/peers_kg2rag.md`` (+ a per-question CSV).

Called by ``kg2rag_compare.py report`` (the whole cross-check: upstream's records in the work folder) or
``kg2rag_compare.py rescore`` (upstream's per-question lists read back from the committed CSV, for when the
authors' code cannot run: no peer environment). Either way the suite side is the ``suite`` step's, i.e. this
code's, and every agreement measure is recomputed (:mod:`kgir_lib.eval.kg2rag_agreement`). The maximum spanning
tree comparison uses the peer environment's networkx in a full run (``upstream_mst.jsonl``) and the main
environment's in a re-score, and says which.
"""
from __future__ import annotations

import json
import platform
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

from kgir_lib.baselines.kg2rag_code import UPSTREAM, UPSTREAM_COMMIT
from kgir_lib.config import load_config
from kgir_lib.eval.kg2rag_agreement import (BUG, INPUT, STAGES, agreement_rate, cause_summary, crosscheck_sentence,
                                            question_row, stage_summary)
from kgir_lib.report import to_markdown

sys.path.insert(0, str(Path(__file__).resolve().parent))  # records, beside this script
from records import read_jsonl  # noqa: E402

HERE = Path(__file__).resolve().parent
UP_COLS = {f"up_{s}": s for s in STAGES} | {f"ins_{s}": s for s in STAGES}


def _join(pids) -> str:
    return " ".join(pids) if pids is not None else ""


def _split(cell) -> list:
    return [] if not isinstance(cell, str) or not cell.strip() else cell.split(" ")


def chunk_pids(work: Path, dataset: str) -> dict:
    """The code's chunk id -> the suite's pid, from the suite step's inputs and suite records."""
    import gzip

    with gzip.open(work / dataset / "inputs.json.gz", "rt", encoding="utf-8") as fh:
        inputs = json.load(fh)
    from kgir_lib.data import load_dataset

    cfg = load_config(_meta(work).get("profile", "local"), results_dir=str(work / "results"))
    corpus = load_dataset(dataset, cfg.data_path).corpus
    if len(corpus.passages) != len(inputs["chunks"]):
        raise SystemExit(f"{work / dataset / 'inputs.json.gz'}: {len(inputs['chunks'])} chunks, the corpus has "
                         f"{len(corpus.passages)}")
    return {c[0]: p.pid for c, p in zip(inputs["chunks"], corpus.passages)}


def _meta(work: Path) -> dict:
    meta = work / "suite.meta.json"
    return json.loads(meta.read_text(encoding="utf-8")) if meta.exists() else {}


def upstream_lists(work: Path, dataset: str) -> pd.DataFrame:
    """Upstream's per-question lists (suite pids, space-joined) from its runs in ``work/<dataset>/``: the
    untouched run with ``PYTHONHASHSEED=0`` (``up_*``), the insertion-order run (``ins_*``), how many distinct
    final lists the hash seeds gave, any exception, and the reranker's fresh (not from the suite's table) pairs."""
    to_pid = chunk_pids(work, dataset)
    runs = sorted((work / dataset).glob("upstream_seed*.jsonl"), key=lambda p: int(p.stem.split("seed")[1]))
    if not runs or not (work / dataset / "upstream_insertion.jsonl").exists():
        raise SystemExit(f"{work / dataset}: no upstream records (run kg2rag_upstream.py first)")
    recs = {p.stem: {r["qid"]: r for r in read_jsonl(p)} for p in runs}
    partial = {mode: [{r["qid"]: r for r in read_jsonl(p)} for p in sorted((work / dataset).glob(f"upstream_{mode}[0-9]*.jsonl"))]
               for mode in ("sets", "views")}
    ins = {r["qid"]: r for r in read_jsonl(work / dataset / "upstream_insertion.jsonl")}
    first = recs[runs[0].stem]

    def pids(rec: dict, stage: str):
        if rec.get("error"):
            return None
        items = rec[stage]
        return [to_pid[x[0] if isinstance(x, list) else x] for x in items]
    rows = []
    for qid, u in first.items():
        finals = [_join(pids(r[qid], "final")) for r in recs.values()]
        row = {"dataset": dataset, "qid": qid, "upstream_hash_seeds": len(recs),
               "upstream_final_variants": len(set(finals)), "up_final_seeds": " | ".join(finals),
               "upstream_error": u.get("error") or "",
               "upstream_fresh_pairs": sum(c["n"] - c["from_table"] for c in u["rerank_calls"]),
               "insertion_fresh_pairs": sum(c["n"] - c["from_table"] for c in ins[qid]["rerank_calls"])}
        for mode, runs_of in partial.items():  # one source of hash order taken out, the other left in
            row[f"upstream_final_variants_{mode}_ordered"] = (
                len({_join(pids(r[qid], "final")) for r in runs_of}) if runs_of else float("nan"))
        for s in STAGES:
            row[f"up_{s}"] = _join(pids(u, s))
            row[f"ins_{s}"] = _join(pids(ins[qid], s))
        rows.append(row)
    return pd.DataFrame(rows)


def seed_agreement(code_final: str, seed_finals: list) -> dict:
    """kg2rag_code's final list against each hash seed's untouched run, and the runs against each other:
    ``code_final_in_seeds`` (equal to some seed's), ``code_final_seed_share`` (the share of seeds it equals),
    ``upstream_seed_pair_share`` (the share of pairs of seeds whose final lists are equal; NaN for one seed)."""
    n = len(seed_finals)
    pairs = [seed_finals[i] == seed_finals[j] for i in range(n) for j in range(i + 1, n)]
    return {"code_final_in_seeds": code_final in seed_finals,
            "code_final_seed_share": sum(code_final == f for f in seed_finals) / n,
            "upstream_seed_pair_share": sum(pairs) / len(pairs) if pairs else float("nan")}


def question_rows(work: Path, upstream: pd.DataFrame, context: int) -> pd.DataFrame:
    """One row a question: the suite's lists (this code: the ``suite`` step) against upstream's (``upstream``:
    :func:`upstream_lists` or the committed CSV's columns), agreement and causes."""
    rows = []
    for dataset, part in upstream.groupby("dataset", sort=False):
        suite = {r["qid"]: r for r in read_jsonl(work / dataset / "suite.jsonl")}
        for u in part.to_dict("records"):
            s = suite.get(str(u["qid"]))
            if s is None:
                raise SystemExit(f"{work / dataset / 'suite.jsonl'}: no suite record for question {u['qid']} "
                                 f"(run the 'suite' step of this code first)")
            err = bool(u.get("upstream_error"))
            up = {st: None if err else _split(u[f"up_{st}"]) for st in STAGES}
            ins = {st: _split(u[f"ins_{st}"]) for st in STAGES}
            row = {k: v for k, v in u.items() if not k.startswith(("up_", "ins_"))}
            row.update(question_row(s["paper"], s["code"], up, ins, context))
            row["code_final_same_insertion"] = s["code"]["final"] == ins["final"]
            row.update(seed_agreement(_join(s["code"]["final"]), str(u["up_final_seeds"]).split(" | ")))
            row["code_path"] = s["code"]["path"]
            for k in (*UP_COLS, "up_final_seeds"):
                row[k] = u[k]
            row["code_final"] = _join(s["code"]["final"])
            row["paper_final"] = _join(s["paper"]["final"])
            rows.append(row)
    return pd.DataFrame(rows)


def mst_rows(work: Path, datasets, upstream_mst: bool) -> tuple:
    """Per graph: the suite's Kruskal against networkx's ``maximum_spanning_tree`` (upstream's records when
    ``upstream_mst``, else networkx of this environment), and which networkx."""
    import networkx as nx

    rows, version = [], f"networkx {nx.__version__} (main environment)"
    for d in datasets:
        graphs = {g["id"]: g for g in read_jsonl(work / d / "mst_graphs.jsonl.gz")}
        suite = {r["id"]: r for r in read_jsonl(work / d / "suite_mst.jsonl")}
        if upstream_mst:
            theirs = {r["id"]: r["kept"] for r in read_jsonl(work / d / "upstream_mst.jsonl")}
            version = "networkx 2.5.1 (the peer environment, upstream's pin)"
        else:
            theirs = {}
            for gid, g in graphs.items():
                G = nx.MultiGraph()
                for i, (u, v, w) in enumerate(g["edges"]):
                    G.add_edge(u, v, weight=float(w), idx=i)
                theirs[gid] = sorted(dd["idx"] for _, _, dd in nx.maximum_spanning_tree(G).edges(data=True))
        for gid, g in graphs.items():
            w = [e[2] for e in g["edges"]]
            s, t = suite[gid], theirs[gid]
            rows.append({"dataset": d, "graph": gid.split("/")[0], "edges": len(w), "same_edges": s["kept"] == t,
                         "same_weight": abs(s["weight"] - sum(w[i] for i in t)) <= 1e-9,
                         "same_edges_nx_order": s["kept_nx_order"] == t})
    return pd.DataFrame(rows), version


def mst_table(rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (d, kind), part in rows.groupby(["dataset", "graph"], sort=False):
        nonempty = part[part["edges"] > 0]
        out.append({"dataset": d, "graphs": {"algorithm1": "Algorithm 1: seed components of G_tmp (KGIR-RAG, round 1)",
                                             "kg2rag": "KG²RAG (paper): G_q^m weighted by s(q, c)"}[kind],
                    "questions": len(part), "with edges": len(nonempty),
                    "edges (mean)": round(float(part["edges"].mean()), 1),
                    "same tree edges": int(nonempty["same_edges"].sum()),
                    "same total weight": int(nonempty["same_weight"].sum()),
                    "same edges, Kruskal fed networkx's edge order": int(nonempty["same_edges_nx_order"].sum())})
    return pd.DataFrame(out)


def dataset_table(rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for d, part in rows.groupby("dataset", sort=False):
        line = {"dataset": d, "questions": len(part)}
        for side in ("code", "paper"):
            for st in STAGES:
                col = f"{side}_{st}_same_set" if st == "expanded" else f"{side}_{st}_same_list"
                line[f"{side}: {st} same"] = int(part[col].astype(bool).sum())
        line["code: final = insertion-order run"] = int(part["code_final_same_insertion"].astype(bool).sum())
        line["code's final list moves with the hash seed"] = int((part["upstream_final_variants"] > 1).sum())
        for mode, words in (("sets", "its sets ordered"), ("views", "networkx's views ordered")):
            col = part[f"upstream_final_variants_{mode}_ordered"]
            line[f"... with {words}"] = int((col > 1).sum()) if col.notna().any() else "not run"
        out.append(line)
    return pd.DataFrame(out)


def write_report(work: Path, profile: str, out: Path, command: str, rescore: bool = False) -> None:
    cfg = load_config(profile, results_dir=str(work / "results"))
    csv = out.with_suffix(".csv")
    if rescore:
        if not csv.exists():
            raise SystemExit(f"{csv}: no committed cross-check to re-score against (run the whole cross-check: "
                             f"bash benchmarks/peers/kg2rag_crosscheck.sh)")
        committed = pd.read_csv(csv, dtype=str, keep_default_na=False)
        missing = [c for c in ("dataset", "qid", *UP_COLS, "upstream_final_variants") if c not in committed]
        if missing:
            raise SystemExit(f"{csv}: lacks upstream's columns {missing}; it is not a KG²RAG cross-check report")
        keep = ["dataset", "qid", *UP_COLS, "up_final_seeds", "upstream_hash_seeds", "upstream_final_variants",
                "upstream_final_variants_sets_ordered", "upstream_final_variants_views_ordered", "upstream_error",
                "upstream_fresh_pairs", "insertion_fresh_pairs"]
        upstream = committed[keep].copy()
        for c in ("upstream_hash_seeds", "upstream_final_variants", "upstream_fresh_pairs", "insertion_fresh_pairs"):
            upstream[c] = upstream[c].astype(int)
        for c in ("upstream_final_variants_sets_ordered", "upstream_final_variants_views_ordered"):
            upstream[c] = pd.to_numeric(upstream[c], errors="coerce")
        record = committed["upstream_record"].iloc[0] if "upstream_record" in committed else "the committed run"
        total = len(upstream)
        have = {(d, str(r["qid"])) for d in dict.fromkeys(upstream["dataset"]) if (work / d / "suite.jsonl").exists()
                for r in read_jsonl(work / d / "suite.jsonl")}
        upstream = upstream[[(d, q) in have for d, q in zip(upstream["dataset"], upstream["qid"])]]
        if upstream.empty:
            raise SystemExit(f"{work}: no suite record for any question of {csv} (run the 'suite' step first)")
        rescored = (f"Re-scored: this code's side on {len(upstream)} of the {total} questions of the committed run, "
                    f"against upstream's lists as its CSV keeps them (no peer environment).\n")
    else:
        upstream = pd.concat([upstream_lists(work, d) for d in cfg.datasets], ignore_index=True)
        record = f"this run ({command})"
        rescored = ""
    rows = question_rows(work, upstream, cfg.context_passages)
    rows["upstream_record"] = record
    out.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(csv, index=False)
    datasets = list(dict.fromkeys(rows["dataset"]))
    mst, nx_version = mst_rows(work, [d for d in datasets if (work / d / "suite_mst.jsonl").exists()],
                               upstream_mst=not rescore)
    code_same, n = agreement_rate(rows, "code")
    meta = _meta(work)
    paths = Counter(rows["code_path"])
    fresh = int(rows["upstream_fresh_pairs"].sum())
    errors = int((rows["upstream_error"] != "").sum())
    parts = [
        "# KG²RAG: the suite's two readings against the authors' code\n",
        f"Command: `{command}` (machine: {platform.machine()}, Python {platform.python_version()}). Upstream: GitHub "
        f"`{UPSTREAM}` at `{UPSTREAM_COMMIT}`, its post-processors run untouched in `benchmarks/peers/.venv-kg2rag` "
        f"(README.md in `benchmarks/peers/`). Suite side: the code at {meta.get('code', 'this checkout')}, cache only "
        f"(no LLM call). Upstream's lists: {record}. Per-question rows: `{csv.name}`.\n",
        rescored,
        f"**Inputs, the same on both sides**: the `{profile}` profile's questions ({', '.join(f'{d} {c}' for d, c in rows['dataset'].value_counts(sort=False).items())}); "
        f"each question's cosine top-{cfg.top_k} chunks with their scores (the suite's all-MiniLM-L6-v2 index); the "
        f"triples of every chunk of the graph the suite's KG²RAG reads in the local run (notebook 01's graph and the "
        f"seeds' on-demand extraction); every page title as the code's entity set; the authors' wiring per dataset "
        f"(MuSiQue's for musique_train: chunk ids `idx##title##seq`, facts in the candidate texts; HotpotQA's for "
        f"hotpotqa); the chunk budget `topk` = {cfg.top_k}. **The reranker**: bge-reranker-large cannot be "
        f"downloaded here, so upstream's `GraphFilterPostProcessor` gets a `FlagReranker` whose `compute_score` "
        f"returns the suite's score of each (question, text) pair: the cosine of the suite encoder's embeddings, "
        f"read from the table `kg2rag_code` scored (so a text both sides score gets the same number), else computed "
        f"by the same encoder ({fresh} pairs of the untouched runs were not in the table).\n",
        "## Agreement per stage\n",
        f"Each suite side against the authors' code run untouched with `PYTHONHASHSEED=0`. Stage 1 compares sets, "
        f"stages 2 and 3 lists; the reader's context is the first {cfg.context_passages} chunks of the final list.\n",
        to_markdown(stage_summary(rows)), "",
        "## kg2rag_code gives the authors' final list\n",
        f"- {crosscheck_sentence(rows)}",
        f"- Rate against the untouched run (`PYTHONHASHSEED=0`): **{code_same} of {n} ({100 * code_same / n:.1f} %)**; "
        f"against the insertion-order run: {int(rows['code_final_same_insertion'].sum())} of {n}; kg2rag_code's final "
        f"list is one the code gave under one of the {int(rows['upstream_hash_seeds'].max())} hash seeds on "
        f"{int(rows['code_final_in_seeds'].sum())} of {n}.",
        f"- **The ceiling of any reading**: two untouched runs of the code with different hash seeds give the same "
        f"final list on {100 * rows['upstream_seed_pair_share'].mean():.1f} % of the questions (mean over the pairs "
        f"of seeds); kg2rag_code gives a seed's final list on {100 * rows['code_final_seed_share'].mean():.1f} % "
        f"(mean over the seeds). A deterministic reading cannot match one untouched run more often than the runs "
        f"match each other, beyond chance.",
        "- Which path the code's organisation took (kg2rag_code's reading): "
        + ", ".join(f"{k} {v}" for k, v in paths.most_common()) + f"; upstream raised on {errors} questions.\n",
        to_markdown(dataset_table(rows)), "",
        "## Every difference and its cause\n",
        "Classes (`kgir_lib/eval/kg2rag_agreement.py`): a *documented deviation* where the paper's reading differs "
        "and the code's reading on the same inputs gives the code's result; an *input difference* where the code's "
        "untouched run differs from its own insertion-order run, which kg2rag_code matches (the process's string-hash "
        "seed orders the code's sets and networkx's subgraph views); a *bug in the suite* where the code's reading "
        "differs from the code with the hash order taken out.\n",
        to_markdown(cause_summary(rows)), "",
        "## Maximum spanning trees against networkx\n",
        f"The suite's Kruskal (`kgir_lib/kg/mst.py`, used by Algorithm 1 and by both KG²RAGs) against "
        f"`nx.maximum_spanning_tree` ({nx_version}) on the same weighted multigraphs, one a question: Algorithm 1's "
        f"seed components with their edge weights (KGIR-RAG's first round), and the paper-following KG²RAG's `G_q^m`. "
        f"Counted over the graphs with at least one edge.\n",
        to_markdown(mst_table(mst)) if len(mst) else "(not compared: the suite step ran with --no-mst)", "",
        "Where the edges differ the total weight is the same: both take edges heaviest first and break ties in the "
        "order they list the edges, the suite in the graph's (triple) order, networkx node by node through each "
        "node's neighbours in insertion order; fed networkx's order, the suite's Kruskal keeps networkx's edges. "
        "Within one passage every triple weighs the same in KG²RAG, so ties are the rule there.\n",
    ]
    notes = HERE / "kg2rag_differences.md"
    if notes.exists():
        parts.append(notes.read_text(encoding="utf-8"))
    out.write_text("\n".join(parts), encoding="utf-8")
    bugs = int((rows["code_final_class"] == BUG).sum())
    print(f"report: {out} (kg2rag_code = upstream's final list on {code_same} of {n}; {bugs} bug-class, "
          f"{int((rows['code_final_class'] == INPUT).sum())} hash-order differences)")

