"""The KG²RAG cross-check report: ``results/benchmarks/peers_kg2rag.md``, rendered from three files beside it.

- ``peers_kg2rag.csv``: one row a question: its inputs (upstream's lists of every run, the suite's two sides' lists,
  the seeds with their scores, the gold passages: :data:`INPUT_COLS`) after every measure computed from them
  (:func:`question_rows`);
- ``peers_kg2rag_mst.csv``: one row a spanning-tree graph (the suite's Kruskal against networkx);
- ``peers_kg2rag.json``: the header (command, machine, code, networkx, the triple loader's drops).

Called by ``kg2rag_compare.py report`` (the whole cross-check: upstream's records in the work folder) or
``kg2rag_compare.py rescore`` (upstream's per-question lists read back from the committed CSV, for when the
authors' code cannot run: no peer environment). Either way the suite side is the ``suite`` step's, i.e. this
code's, and every agreement measure is recomputed (:mod:`kgir_lib.eval.kg2rag_agreement`). The maximum spanning
tree comparison uses the peer environment's networkx in a full run (``upstream_mst.jsonl``) and the main
environment's in a re-score, and says which. :func:`rebuild` renders the report from the three committed files
alone (no model, no work folder), which is how it is written, so a re-render gives the same bytes.
"""
from __future__ import annotations

import io
import json
import platform
import sys
from collections import Counter
from pathlib import Path
from typing import Optional

import pandas as pd

from kgir_lib.baselines.kg2rag_code import UPSTREAM, UPSTREAM_COMMIT
from kgir_lib.config import load_config
from kgir_lib.eval.kg2rag_agreement import (BUG, INPUT, STAGES, agreement_rate, cause_summary, crosscheck_sentence,
                                            padded_recall_from, question_row, seed_agreement, stage_summary)
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


def seed_runs(folder: Path, hash_seeds: Optional[int] = None) -> list:
    """The untouched runs' record files in ``folder``, ``upstream_seed0.jsonl`` to ``upstream_seed{n-1}.jsonl``:
    the first ``hash_seeds`` of them (each must be there), or, with ``None``, every one from seed 0 up to the first
    gap. A run stopped part-way leaves further seeds of one dataset only; reading a stated count keeps both
    datasets on the same seeds."""
    if hash_seeds is None:
        n = 0
        while (folder / f"upstream_seed{n}.jsonl").exists():
            n += 1
        return [folder / f"upstream_seed{i}.jsonl" for i in range(n)]
    runs = [folder / f"upstream_seed{i}.jsonl" for i in range(hash_seeds)]
    missing = [p.name for p in runs if not p.exists()]
    if missing:
        raise SystemExit(f"{folder}: {len(missing)} of the {hash_seeds} hash seeds' records are missing "
                         f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): run them first")
    return runs


def upstream_lists(work: Path, dataset: str, hash_seeds: Optional[int] = None) -> pd.DataFrame:
    """Upstream's per-question lists (suite pids, space-joined) from its runs in ``work/<dataset>/``: the
    untouched run with ``PYTHONHASHSEED=0`` (``up_*``), the insertion-order run (``ins_*``), how many distinct
    final lists the hash seeds gave (the first ``hash_seeds``: :func:`seed_runs`), any exception, and the
    reranker's fresh (not from the suite's table) pairs."""
    to_pid = chunk_pids(work, dataset)
    runs = seed_runs(work / dataset, hash_seeds)
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


INT_COLS = ("upstream_hash_seeds", "upstream_final_variants", "upstream_fresh_pairs", "insertion_fresh_pairs")
ORDERED_COLS = ("upstream_final_variants_sets_ordered", "upstream_final_variants_views_ordered")
SIDE_COLS = tuple(f"{side}_{s}" for side in ("code", "paper") for s in STAGES)
# What a question's row is computed from (the CSV keeps them, after the computed columns): upstream's runs, the
# suite's two sides, the seeds with their scores (``pid:score``) and the gold passages.
INPUT_COLS = ("dataset", "qid", *INT_COLS[:2], *ORDERED_COLS, "upstream_error", *INT_COLS[2:], "code_path",
              *UP_COLS, "up_final_seeds", *SIDE_COLS, "seeds", "gold", "upstream_record")


def typed_inputs(table: pd.DataFrame) -> pd.DataFrame:
    """The input columns (:data:`INPUT_COLS`) of a CSV read as text, typed as the report computes with them; a clear
    error naming the missing columns."""
    missing = [c for c in INPUT_COLS if c not in table]
    if missing:
        raise SystemExit(f"the KG²RAG cross-check's rows lack the columns {missing}")
    out = table[list(INPUT_COLS)].copy()
    for c in INT_COLS:
        out[c] = out[c].astype(int)
    for c in ORDERED_COLS:
        out[c] = pd.to_numeric(out[c], errors="coerce")
    return out


def _seeds(cell: str) -> list:
    return [(x.rsplit(":", 1)[0], float(x.rsplit(":", 1)[1])) for x in _split(cell)]


def question_rows(inputs: pd.DataFrame, context: int) -> pd.DataFrame:
    """One row a question, computed from its inputs (:data:`INPUT_COLS`, :func:`typed_inputs`): the suite's two
    sides against upstream's untouched run and insertion-order run stage by stage (agreement and causes), the hash
    seeds' runs against each other and against kg2rag_code (:func:`kgir_lib.eval.kg2rag_agreement.seed_agreement`),
    and where kg2rag_code's padded ranked list changes Recall@k; then the inputs themselves."""
    rows = []
    for u in inputs.to_dict("records"):
        err = bool(u["upstream_error"])
        up = {st: None if err else _split(u[f"up_{st}"]) for st in STAGES}
        ins = {st: _split(u[f"ins_{st}"]) for st in STAGES}
        code = {st: _split(u[f"code_{st}"]) for st in STAGES}
        paper = {st: _split(u[f"paper_{st}"]) for st in STAGES}
        row = {"dataset": u["dataset"], "qid": u["qid"]}
        row.update(question_row(paper, code, up, ins, context))
        row["code_final_same_insertion"] = code["final"] == ins["final"]
        row["code_expanded_same_insertion"] = code["expanded"] == ins["expanded"]
        row.update(seed_agreement(u["code_final"], str(u["up_final_seeds"]).split(" | ")))
        row["code_padded_recall_from_k"] = padded_recall_from(code["final"], [p for p, _ in _seeds(u["seeds"])],
                                                              _split(u["gold"]))
        row.update({k: v for k, v in u.items() if k not in ("dataset", "qid")})
        rows.append(row)
    return pd.DataFrame(rows)


def suite_inputs(work: Path, upstream: pd.DataFrame, profile: str) -> pd.DataFrame:
    """Upstream's per-question columns (:func:`upstream_lists` or the committed CSV's) joined with the suite's side
    (this code: the ``suite`` step's records), the seeds with their scores and the gold passages."""
    import gzip

    from kgir_lib.data import load_dataset

    cfg = load_config(profile, results_dir=str(work / "results"))
    rows = []
    for dataset, part in upstream.groupby("dataset", sort=False):
        suite = {r["qid"]: r for r in read_jsonl(work / dataset / "suite.jsonl")}
        with gzip.open(work / dataset / "inputs.json.gz", "rt", encoding="utf-8") as fh:
            seeds = {q["qid"]: q["seeds"] for q in json.load(fh)["questions"]}
        to_pid = chunk_pids(work, dataset)
        gold = {q.qid: q.gold_pids for q in load_dataset(dataset, cfg.data_path).questions}
        for u in part.to_dict("records"):
            qid = str(u["qid"])
            s = suite.get(qid)
            if s is None:
                raise SystemExit(f"{work / dataset / 'suite.jsonl'}: no suite record for question {qid} "
                                 f"(run the 'suite' step of this code first)")
            row = {k: u[k] for k in INPUT_COLS if k in u}
            row["qid"] = qid
            row["code_path"] = s["code"]["path"]
            for side in ("code", "paper"):
                for st in STAGES:
                    row[f"{side}_{st}"] = _join(s[side][st])
            row["seeds"] = " ".join(f"{to_pid[c]}:{score!r}" for c, score in seeds[qid])
            row["gold"] = _join(gold[qid])
            rows.append(row)
    table = pd.DataFrame(rows)[list(INPUT_COLS)]
    # through text, as a re-score reads it back, so both paths compute on the same values
    return typed_inputs(pd.read_csv(io.StringIO(table.to_csv(index=False)), dtype=str, keep_default_na=False))


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
            kind, qid = gid.split("/", 1)
            rows.append({"dataset": d, "graph": kind, "qid": qid, "edges": len(w), "same_edges": s["kept"] == t,
                         "same_weight": abs(s["weight"] - sum(w[i] for i in t)) <= 1e-9,
                         "same_edges_nx_order": s["kept_nx_order"] == t})
    cols = ["dataset", "graph", "qid", "edges", "same_edges", "same_weight", "same_edges_nx_order"]
    return pd.DataFrame(rows, columns=cols), version


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
    seeds = int(rows["upstream_hash_seeds"].max())
    for d, part in rows.groupby("dataset", sort=False):
        line = {"dataset": d, "questions": len(part)}
        for side in ("code", "paper"):
            for st in STAGES:
                col = f"{side}_{st}_same_set" if st == "expanded" else f"{side}_{st}_same_list"
                line[f"{side}: {st} same"] = int(part[col].astype(bool).sum())
            line[f"{side}: expanded in the same order"] = int(part[f"{side}_expanded_same_list"].astype(bool).sum())
        line["code: final = insertion-order run"] = int(part["code_final_same_insertion"].astype(bool).sum())
        line[f"code's final list moves with the hash seed (at least; {seeds} seeds)"] = int(
            (part["upstream_final_variants"] > 1).sum())
        for mode, words in (("sets", "its sets ordered"), ("views", "networkx's views ordered")):
            col = part[f"upstream_final_variants_{mode}_ordered"]
            line[f"... with {words}"] = int((col > 1).sum()) if col.notna().any() else "not run"
        out.append(line)
    return pd.DataFrame(out)


CSV_META = "peers_kg2rag.json"     # the report's header: command, machine, code, networkx, the loader's drops
CSV_MST = "peers_kg2rag_mst.csv"   # one row a spanning-tree graph
CSV_UNCLEANED = "peers_kg2rag_uncleaned.csv"    # the run on the uncleaned triples: one row a question, as the CSV
META_UNCLEANED = "peers_kg2rag_uncleaned.json"  # its header: command, the self-loops and repeats the sides read


def write_uncleaned(work: Path, profile: str, folder: Path, command: str) -> None:
    """The run on the uncleaned triples (``kg2rag_compare.py suite --uncleaned``, then upstream): its per-question
    rows (:data:`CSV_UNCLEANED`, the same columns as the report's CSV) and header (:data:`META_UNCLEANED`) in
    ``folder``; the report (:func:`rebuild`) renders them beside the run on the cleaned triples, and is rendered
    again here when its files are in ``folder``."""
    meta = _meta(work)
    if meta.get("triples") != "uncleaned":
        raise SystemExit(f"{work / 'suite.meta.json'}: not a suite step on the uncleaned triples "
                         f"(run kg2rag_compare.py suite --uncleaned first)")
    cfg = load_config(profile, results_dir=str(work / "results"))
    upstream = pd.concat([upstream_lists(work, d) for d in cfg.datasets], ignore_index=True)
    upstream["upstream_record"] = f"this run ({command})"
    rows = question_rows(suite_inputs(work, upstream, profile), cfg.context_passages)
    folder.mkdir(parents=True, exist_ok=True)
    rows.to_csv(folder / CSV_UNCLEANED, index=False)
    head = {"command": command, "code": meta.get("code", "this checkout"),
            "read": {d: (v or {}).get("read") for d, v in meta.get("triple_drops", {}).items()},
            "touched": {d: touched(work, d) for d in cfg.datasets}}
    (folder / META_UNCLEANED).write_text(json.dumps(head, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                                         encoding="utf-8")
    same = int(rows["code_final_same_list"].astype(bool).sum())
    print(f"uncleaned: {folder / CSV_UNCLEANED} (kg2rag_code = upstream's final list on {same} of {len(rows)})")
    if (folder / "peers_kg2rag.csv").exists():  # the report, rendered again from its committed files with this run
        text, _ = rebuild(folder)
        (folder / "peers_kg2rag.md").write_text(text, encoding="utf-8")
        print(f"report: {folder / 'peers_kg2rag.md'} rendered again with the run on the uncleaned triples")


def touched(work: Path, dataset: str) -> dict:
    """How many chunks of the uncleaned inputs hold a self-loop or a repeat up to case (what the suite's loader
    drops), and on how many questions one of them is a seed, or in the authors' code's (untouched run's) added
    chunks or final list."""
    import gzip

    from kgir_lib.kg.parse import validate

    with gzip.open(work / dataset / "inputs.json.gz", "rt", encoding="utf-8") as fh:
        inputs = json.load(fh)
    held = set()
    for cid, facts in inputs["facts"].items():
        drops: Counter = Counter()
        seen: set = set()
        for f in facts:
            validate(list(f), drops, seen)
        if drops["head_equals_tail"] or drops["duplicate"]:
            held.add(cid)
    runs = list(read_jsonl(work / dataset / "upstream_seed0.jsonl"))

    def hit(items) -> bool:
        return any((x[0] if isinstance(x, list) else x) in held for x in items)
    return {"chunks": len(held), "questions": len(inputs["questions"]),
            "seeds": sum(any(c in held for c, _ in q["seeds"]) for q in inputs["questions"]),
            "expanded": sum(hit(r["expanded"]) for r in runs if not r.get("error")),
            "final": sum(hit(r["final"]) for r in runs if not r.get("error"))}


def read_uncleaned(folder: Path, context: int) -> tuple:
    """``(rows, head)`` of the run on the uncleaned triples, recomputed from the committed CSV's input columns, or
    ``(None, None)`` when it was not run."""
    csv = folder / CSV_UNCLEANED
    if not csv.exists():
        return None, None
    if not (folder / META_UNCLEANED).exists():
        raise SystemExit(f"{folder / META_UNCLEANED}: missing beside {csv}")
    head = json.loads((folder / META_UNCLEANED).read_text(encoding="utf-8"))
    return question_rows(typed_inputs(pd.read_csv(csv, dtype=str, keep_default_na=False)), context), head


def uncleaned_table(clean: pd.DataFrame, unclean: pd.DataFrame) -> pd.DataFrame:
    """One line a (dataset, stage): each suite side's agreement with the authors' code run untouched
    (``PYTHONHASHSEED=0``) on the cleaned triples and on the uncleaned ones (the expansion as a set and in order, the
    later stages as lists), and on how many questions each list changed between the two runs: the authors' code
    untouched, with the hash order taken out (insertion order), and kg2rag_code."""
    keys = ["dataset", "qid"]
    both = clean.merge(unclean, on=keys, suffixes=("_c", "_u"), validate="one_to_one")
    if len(both) != len(clean) or len(both) != len(unclean):
        raise SystemExit(f"the runs on the cleaned and the uncleaned triples hold different questions "
                         f"({len(clean)} and {len(unclean)}, {len(both)} in both)")
    out = []
    for d, part in both.groupby("dataset", sort=False):
        for st in STAGES:
            for kind in (("set", "list") if st == "expanded" else ("list",)):
                line = {"dataset": d, "stage": st, "compared as": kind if st != "expanded" or kind == "set"
                        else "list (order)", "questions": len(part)}
                for side in ("code", "paper"):
                    col = f"{side}_{st}_same_{kind}"
                    line[f"{side}: same, cleaned"] = int(part[col + "_c"].astype(bool).sum())
                    line[f"{side}: same, uncleaned"] = int(part[col + "_u"].astype(bool).sum())
                for col, label in ((f"up_{st}", "changed: the code untouched"),
                                   (f"ins_{st}", "changed: the code in insertion order"),
                                   (f"code_{st}", "changed: kg2rag_code"), (f"paper_{st}", "changed: kg2rag")):
                    line[label] = int((part[col + "_c"] != part[col + "_u"]).sum())
                out.append(line)
    return pd.DataFrame(out)


def score_drift(clean: pd.DataFrame, unclean: pd.DataFrame) -> tuple:
    """``(questions, of, largest)``: on how many of the questions both runs hold the seed chunks' scores differ
    (each run computes its inputs itself, so a recomputed embedding can move a score in its last bits), and the largest
    difference of one chunk's score. Seed sets that differ count as a difference of their common chunks' scores."""
    keys = ["dataset", "qid"]
    both = clean[keys + ["seeds"]].merge(unclean[keys + ["seeds"]], on=keys, suffixes=("_c", "_u"))
    moved, largest = 0, 0.0
    for a, b in zip(both["seeds_c"], both["seeds_u"]):
        sa, sb = dict(_seeds(a)), dict(_seeds(b))
        if sa != sb:
            moved += 1
            largest = max([largest] + [abs(float(sa[c]) - float(sb[c])) for c in sa.keys() & sb.keys()])
    return moved, len(both), largest


def uncleaned_section(clean: pd.DataFrame, unclean, head) -> list:
    """The report's section on the run on the uncleaned triples (:func:`uncleaned_table`)."""
    if unclean is None:
        return []
    read = "; ".join(f"{d}: {v['head_equals_tail']} self-loops and {v['duplicate']} repeats among {v['triples']} "
                     f"triples" for d, v in (head.get("read") or {}).items() if v)
    paths = Counter(unclean["code_path"])
    errors = int((unclean["upstream_error"] != "").sum())
    return [
        "## The cross-check on the uncleaned triples\n",
        f"Command: `{head['command']}` (the suite side: the code at {head['code']}). The same questions and inputs, "
        f"except the triples: both sides read each passage's triples as extracted, with the self-loops and the "
        f"repeats up to case the suite's loader drops (a triple without three non-empty parts is still dropped; "
        f"`kgir_lib/kg/parse.py`, `validate` with `clean=False`); the graph the sides read holds {read}. The "
        f"authors' code runs untouched once (`PYTHONHASHSEED=0`) and once with the hash order taken out; the "
        f"table puts each side's agreement with the untouched run beside the cleaned run's, and counts the questions "
        f"whose list changed between the two runs. Where those triples are: "
        + "; ".join(f"{d}: {v['chunks']} chunks hold one; one of them is a seed on {v['seeds']} of {v['questions']} "
                    f"questions, among the code's added chunks on {v['expanded']} and in its final list on "
                    f"{v['final']}" for d, v in (head.get("touched") or {}).items())
        + ". kg2rag_code's organisation on the uncleaned triples: "
        + ", ".join(f"{k} {v}" for k, v in paths.most_common()) + f"; upstream raised on {errors} questions. "
        + _drift_words(*score_drift(clean, unclean)) + "\n",
        to_markdown(uncleaned_table(clean, unclean)), "",
    ]


def _drift_words(moved: int, of: int, largest: float) -> str:
    if not moved:
        return "The two runs' seed chunks carry the same scores on every question."
    return (f"The two runs computed their inputs separately, and their seed chunks' scores differ in the last bits on "
            f"{moved} of {of} questions (at most {largest:.1e}): a list counted as changed may have moved with those "
            f"scores (a near tie broken the other way) as well as with the triples.")


def write_report(work: Path, profile: str, out: Path, command: str, rescore: bool = False,
                 hash_seeds: Optional[int] = None) -> None:
    """The per-question CSV, the spanning-tree CSV and the header (:data:`CSV_META`), then the report rendered from
    those three files alone (:func:`rebuild`), so a re-render from the committed files gives the same bytes.
    ``hash_seeds``: how many untouched runs to read (:func:`seed_runs`)."""
    cfg = load_config(profile, results_dir=str(work / "results"))
    csv = out.with_suffix(".csv")
    meta = _meta(work)
    if rescore:
        if not csv.exists():
            raise SystemExit(f"{csv}: no committed cross-check to re-score against (run the whole cross-check: "
                             f"bash benchmarks/peers/kg2rag_crosscheck.sh)")
        committed = pd.read_csv(csv, dtype=str, keep_default_na=False)
        missing = [c for c in ("dataset", "qid", *UP_COLS, "upstream_final_variants") if c not in committed]
        if missing:
            raise SystemExit(f"{csv}: lacks upstream's columns {missing}; it is not a KG²RAG cross-check report")
        keep = ["dataset", "qid", *UP_COLS, "up_final_seeds", *INT_COLS, *ORDERED_COLS, "upstream_error"]
        upstream = committed[keep].copy()
        upstream["upstream_record"] = (committed["upstream_record"] if "upstream_record" in committed
                                       else "the committed run")
        total = len(upstream)
        have = {(d, str(r["qid"])) for d in dict.fromkeys(upstream["dataset"]) if (work / d / "suite.jsonl").exists()
                for r in read_jsonl(work / d / "suite.jsonl")}
        upstream = upstream[[(d, q) in have for d, q in zip(upstream["dataset"], upstream["qid"])]]
        if upstream.empty:
            raise SystemExit(f"{work}: no suite record for any question of {csv} (run the 'suite' step first)")
        rescored = {"questions": int(len(upstream)), "of": int(total)}
    else:
        upstream = pd.concat([upstream_lists(work, d, hash_seeds) for d in cfg.datasets], ignore_index=True)
        upstream["upstream_record"] = f"this run ({command})"
        rescored = None
    rows = question_rows(suite_inputs(work, upstream, profile), cfg.context_passages)
    datasets = list(dict.fromkeys(rows["dataset"]))
    mst, nx_version = mst_rows(work, [d for d in datasets if (work / d / "suite_mst.jsonl").exists()],
                               upstream_mst=not rescore)
    head = {"command": command, "machine": platform.machine(), "python": platform.python_version(),
            "code": meta.get("code", "this checkout"), "profile": profile, "top_k": cfg.top_k,
            "context_passages": cfg.context_passages, "rescored": rescored, "networkx": nx_version,
            "triple_drops": {d: meta.get("triple_drops", {}).get(d) for d in datasets}}
    out.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(csv, index=False)
    mst.to_csv(out.parent / CSV_MST, index=False)
    (out.parent / CSV_META).write_text(json.dumps(head, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                                       encoding="utf-8")
    text, _ = rebuild(out.parent, out.name)
    out.write_text(text, encoding="utf-8")
    code_same, n = agreement_rate(rows, "code")
    bugs = int((rows["code_final_class"] == BUG).sum())
    print(f"report: {out} (kg2rag_code = upstream's final list on {code_same} of {n}; {bugs} bug-class, "
          f"{int((rows['code_final_class'] == INPUT).sum())} hash-order differences)")


def read_committed(folder: Path, name: str = "peers_kg2rag.md") -> tuple:
    """``(rows, mst, head)`` as the report's three files in ``folder`` hold them: the per-question rows recomputed
    from their input columns (:func:`question_rows`), the spanning-tree rows, the header."""
    csv = (folder / name).with_suffix(".csv")
    for path in (csv, folder / CSV_MST, folder / CSV_META):
        if not path.exists():
            raise SystemExit(f"{path}: missing (run bash benchmarks/peers/kg2rag_crosscheck.sh, or --rescore)")
    head = json.loads((folder / CSV_META).read_text(encoding="utf-8"))
    inputs = typed_inputs(pd.read_csv(csv, dtype=str, keep_default_na=False))
    rows = question_rows(inputs, int(head["context_passages"]))
    mst = pd.read_csv(folder / CSV_MST, dtype={"qid": str})
    return rows, mst, head


def rebuild(folder: Path, name: str = "peers_kg2rag.md") -> tuple:
    """``(report text, per-question rows)`` from the report's committed files alone (no model, no work folder)."""
    rows, mst, head = read_committed(folder, name)
    unclean, unclean_head = read_uncleaned(folder, int(head["context_passages"]))
    return render(rows, mst, head, (folder / name).with_suffix(".csv").name, unclean, unclean_head), rows


def render(rows: pd.DataFrame, mst: pd.DataFrame, head: dict, csv_name: str, unclean=None, unclean_head=None) -> str:
    """The report's text from its per-question rows, spanning-tree rows and header (:func:`write_report`), and the
    run on the uncleaned triples when there is one (:func:`read_uncleaned`)."""
    profile, n_seeds = head["profile"], int(rows["upstream_hash_seeds"].max())
    code_same, n = agreement_rate(rows, "code")
    paths = Counter(rows["code_path"])
    fresh = int(rows["upstream_fresh_pairs"].sum())
    errors = int((rows["upstream_error"] != "").sum())
    record = rows["upstream_record"].iloc[0]
    rescored = head.get("rescored")
    exp_set, exp_list = int(rows["code_expanded_same_set"].sum()), int(rows["code_expanded_same_list"].sum())
    padded = rows["code_padded_recall_from_k"].dropna()
    final_len = rows["code_final"].map(lambda c: len(_split(c)))
    drops = head.get("triple_drops") or {}
    drop_text = "; ".join(f"{d}: {v['head_equals_tail']}, {v['duplicate']} and {v['wrong_arity']} ({v['source']})"
                          for d, v in drops.items() if v) or "not counted (run the suite step)"
    parts = [
        "# KG²RAG: the suite's two readings against the authors' code\n",
        f"Command: `{head['command']}` (machine: {head['machine']}, Python {head['python']}). Upstream: GitHub "
        f"`{UPSTREAM}` at `{UPSTREAM_COMMIT}`, its post-processors run untouched in `benchmarks/peers/.venv-kg2rag` "
        f"(README.md in `benchmarks/peers/`). Suite side: the code at {head['code']}, cache only "
        f"(no LLM call). Upstream's lists: {record}. Per-question rows: `{csv_name}` (spanning trees: `{CSV_MST}`, "
        f"header: `{CSV_META}`; the report is rendered from these three files).\n",
        (f"Re-scored: this code's side on {rescored['questions']} of the {rescored['of']} questions of the committed "
         f"run, against upstream's lists as its CSV keeps them (no peer environment).\n" if rescored else ""),
        f"**Inputs, the same on both sides**: the `{profile}` profile's questions "
        f"({', '.join(f'{d} {c}' for d, c in rows['dataset'].value_counts(sort=False).items())}); "
        f"each question's cosine top-{head['top_k']} chunks with their scores (the suite's all-MiniLM-L6-v2 index); "
        f"the "
        f"triples of every chunk of the graph the suite's KG²RAG reads in the local run (notebook 01's graph and the "
        f"seeds' on-demand extraction), as the suite's loader cleaned them (*Differences the cross-check does not "
        f"measure*); every page title as the code's entity set; the authors' wiring per dataset "
        f"(MuSiQue's for musique_train: chunk ids `idx##title##seq`, facts in the candidate texts; HotpotQA's for "
        f"hotpotqa); the chunk budget `topk` = {head['top_k']}. **The reranker**: bge-reranker-large cannot be "
        f"downloaded here, so upstream's `GraphFilterPostProcessor` gets a `FlagReranker` whose `compute_score` "
        f"returns the suite's score of each (question, text) pair: the cosine of the suite encoder's embeddings, "
        f"read from the table `kg2rag_code` scored (so a text both sides score gets the same number), else computed "
        f"by the same encoder ({fresh} pairs of the untouched runs were not in the table).\n",
        "## Agreement per stage\n",
        f"Each suite side against the authors' code run untouched with `PYTHONHASHSEED=0`. Every stage is compared as "
        f"a set and as a list (the classes below compare the expansion as a set, the later stages as lists); the "
        f"reader's context is the first {head['context_passages']} chunks of the final list.\n",
        to_markdown(stage_summary(rows)), "",
        "## kg2rag_code gives the authors' final list\n",
        f"- {crosscheck_sentence(rows)}",
        f"- Rate against the untouched run (`PYTHONHASHSEED=0`): **{code_same} of {n} ({100 * code_same / n:.1f} %)**; "
        f"against the insertion-order run: {int(rows['code_final_same_insertion'].sum())} of {n}; kg2rag_code's final "
        f"list is one the code gave under one of the {n_seeds} hash seeds on "
        f"{int(rows['code_final_in_seeds'].sum())} of {n}.",
        f"- **What a fixed reading can reach**: a deterministic reading matches a run of the code under an unknown "
        f"hash seed as often as its list's share of the seeds, so at most as often as the code's most frequent "
        f"list. Over the {n_seeds} seeds the most frequent final list's share is "
        f"{100 * rows['upstream_modal_share'].mean():.1f} % (mean over the questions; the largest of {n_seeds} "
        f"observed shares, so an estimate that leans high). Two runs agree on "
        f"{100 * rows['upstream_seed_pair_share'].mean():.1f} % (mean over the pairs of seeds: the sum of the squared "
        f"shares, never above the largest share), so that is no ceiling. kg2rag_code's final list is the "
        f"most frequent one on {int(rows['code_final_modal'].sum())} of {n} questions (one of those tied for it on "
        f"{int((rows['code_final_modal'] & (rows['upstream_modal_lists'] > 1)).sum())} of the "
        f"{int((rows['upstream_modal_lists'] > 1).sum())} questions with a tie) and matches a seed's run on "
        f"{100 * rows['code_final_seed_share'].mean():.1f} % (mean over the seeds).",
        f"- **The expansion, as a set and in order**: kg2rag_code adds the authors' code's chunks on {exp_set} of {n} "
        f"questions as a set, and in the same order on {exp_list} of {n}; the order (ties among the added chunks' "
        f"scores follow the hash order) is what the organisation reads. kg2rag_code's order is the insertion-order "
        f"run's on {int(rows['code_expanded_same_insertion'].sum())} of {n}.",
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
        f"`nx.maximum_spanning_tree` ({head['networkx']}) on the same weighted multigraphs, one a question: Algorithm "
        f"1's seed components with their edge weights (KGIR-RAG's first round), and the paper-following KG²RAG's "
        f"`G_q^m`. Counted over the graphs with at least one edge.\n",
        to_markdown(mst_table(mst)) if len(mst) else "(not compared: the suite step ran with --no-mst)", "",
        "Where the edges differ the total weight is the same: both take edges heaviest first and break ties in the "
        "order they list the edges, the suite in the graph's (triple) order, networkx node by node through each "
        "node's neighbours in insertion order; fed networkx's order, the suite's Kruskal keeps networkx's edges. "
        "Within one passage every triple weighs the same in KG²RAG, so ties are the rule there.\n",
        *uncleaned_section(rows, unclean, unclean_head),
        "## Differences the cross-check does not measure\n",
        f"- **Cleaned triples, an input difference.** The suite's triple loader (`kgir_lib/kg/parse.py`, `validate`) "
        f"drops a triple whose head equals its tail up to case, a repeat of a triple up to case, and a triple "
        f"without three parts, before either side sees the graph: {drop_text}, in that order. Both sides get the "
        f"cleaned triples, so the cross-check "
        + ("cannot see what the dropped ones would change; the authors' code on the uncleaned triples is not run. "
           if unclean is None else "above reads them as cleaned; *The cross-check on the uncleaned triples* reads "
           "the self-loops and repeats too. ")
        + "From "
        "the code: a node enters its graph only through an edge, so a single-node component comes only from a "
        "self-loop, and the branch that makes that self-loop's chunk a candidate (item 4 below) never runs on the "
        "suite's graphs; a repeat that differs in case would be an edge of its own (the code's names are "
        "case-sensitive), and any repeat can name a title the expansion walks to or take one of the three facts "
        "`use_tpt` appends.",
        f"- **kg2rag_code's ranked list is padded.** The suite's Recall@k reads kg2rag_code's final list followed by "
        f"the seeds not in it (`final_ranking`); the authors' code ranks only its final list (the response's source "
        f"nodes). On these questions the two give a different Recall@k for some k on {len(padded)} of {n} "
        f"questions"
        + (f", never for k below {int(padded.min())}" if len(padded) else "")
        + f" (kg2rag_code's final list holds {int(final_len.min())} to {int(final_len.max())} chunks; the suite's "
        f"tables report Recall@2 and Recall@5).",
        f"- **Where the authors' code raises.** Its post-processors split every chunk id at `##` (a title holding `##` "
        f"gives the wrong number of parts), unpack every triple as `h, r, t` (a triple of another length) and divide "
        f"by the seed count (`avg_score`, no seeds); `kg_rag_distractor.py` catches the exception and answers '' "
        f"with no supporting passages. kg2rag_code keys chunks by passage id, reads only the loader's three-part "
        f"triples, and with no seeds every stage is empty, so it answers where the code would answer ''. The "
        f"cross-check's inputs hold none of these cases (the triples without three parts are dropped above; upstream "
        f"raised on {errors} questions).\n",
    ]
    notes = HERE / "kg2rag_differences.md"
    if notes.exists():
        parts.append(notes.read_text(encoding="utf-8"))
    return "\n".join(parts)
