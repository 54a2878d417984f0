"""Every committed sample table, rebuilt without an LLM call and compared with the committed CSV cell by cell.

``results/sample/tables/*.csv`` are the numbers the README and the docs read. Each table is rebuilt here from what
the repository commits -- the per-question traces (``results/sample/traces/``), the response log
(``results/sample/llm_responses.jsonl.gz``), the shared data and its published OpenIE graph -- by the library
calls its notebook makes, and written as the notebook writes it (``report.save_table``: ``DataFrame.to_csv``).
The two CSV texts must then agree in every cell: same header, same rows, same text in each cell (so floats to the
last digit the CSV holds), except

- the columns ``report.save_table`` keeps out of a committed table (wall time, what this machine took, and cache
  hits, what the LLM cache held: :func:`kgir_lib.report.is_runtime`) are dropped from the rebuild the same way, and
  :func:`test_no_committed_table_holds_wall_time_or_cache_hits` checks none is committed, so every committed
  column is compared;
- cells a rebuild marks :data:`NOT_REBUILT`, which only entries with a stated reason may do (the dense rankings of
  questions outside the sample need the MiniLM encoder, a model load; an edge weight no trace recorded needs it
  too).

Where a notebook asks the LLM or the encoder, the rebuild answers from what the run recorded, never from a model:

- LLM calls (notebook 01's extraction, notebook 03's NER, the graph's extraction cost) come from the committed
  response log, loaded into an LLM cache in a temporary folder, with ``cache_only=True``: a request the log does
  not hold is an error, not a call;
- a dense search of a sampled question is that question's first KGIR-RAG round (``D_q``: the same search, eq. 2,
  with ``top_k``), as its trace records it (:class:`RecordedSearch`);
- an edge weight of Algorithm 1 (the cosine of the question and the triple text) is the weight a trace recorded
  for that question and triple (:class:`RecordedWeights`);
- a method run is its committed trace file, read back where ``run_method`` would write it (:func:`read_back`).

Tables are registered in :data:`REBUILT` (committed name or pattern -> rebuild), so adding or renaming a table or
column is a one-line change, and :func:`test_every_committed_table_is_registered` fails on a committed table the
registry does not know. Nothing is written under ``results/`` (:func:`results_untouched`).
"""
from __future__ import annotations

import csv
import fnmatch
import io
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd
import pytest
import yaml

from kgir_lib import report
from kgir_lib.config import PROJECT_ROOT, default_data_dir, load_config
from kgir_lib.data import load_dataset, sample_questions
from kgir_lib.eval import ablation
from kgir_lib.eval import claims as cl
from kgir_lib.eval import evaluate as ev
from kgir_lib.eval.bootstrap import bootstrap_table
from kgir_lib.eval.cost import extraction_cost_table as extraction_cost
from kgir_lib.eval.cost import indexing_cost
from kgir_lib.eval.mechanism.funnel import MATCH
from kgir_lib.eval.mechanism.tables import mechanism_tables
from kgir_lib.eval.metrics import mean_recall
from kgir_lib.eval.retrieval_eval import recall_by_dataset, recall_curve, recall_table, with_published_recall
from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.kg.extract import build_kg, update_kg
from kgir_lib.kg.stats import table3
from kgir_lib.kg.store import openie_file
from kgir_lib.kgir.entity_matching import SIMILARITIES, triple_text
from kgir_lib.eval.algorithm1 import compare_readings, rebuild_subgraph, subgraph_row, summarise_steps
from kgir_lib.eval.mechanism.loop_tables import STAGES, seed_match_rate, trace_table, usable_table
from kgir_lib.kgir.subgraph import build_subgraphs
from kgir_lib.llm import LLM, LLMCache, Usage
from kgir_lib.llm.response_log import import_log
from kgir_lib.methods.base import Workspace
from kgir_lib.pipeline import open_kg
from kgir_lib.registry import DEFAULT_METHODS, LABELS, STUDY_METHODS, build_method, method_label
from kgir_lib.retrieval import BM25Index
from kgir_lib.traces import read_meta, read_traces, trace_file

RUN = PROJECT_ROOT / "results" / "sample"
TABLES = RUN / "tables"
DATA = default_data_dir()
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"no shared data at {DATA} (set KGIR_DATA_DIR)")

NOT_REBUILT = "<not rebuilt>"  # a cell the rebuild cannot compute without a model; see Pin.not_rebuilt
N_BOOT, REFERENCE, MAX_K = 2000, "KGIR-RAG", 20  # notebooks 05/06's n_boot and reference, notebook 02's max_k


# ---------------------------------------------------------------- what the run recorded, standing in for models
class ReplayOnly:
    """The backend of an LLM that may only answer from its cache (the response log): it is never called."""

    def __init__(self, model_id: str):
        self.model_id = model_id

    def run(self, requests, on_result) -> None:
        raise AssertionError(f"{len(requests)} request(s) are not in the response log")


class RecordedSearch:
    """Dense search (eq. 2) of the sampled questions, as their first KGIR-RAG round retrieved it (``D_q``, the
    top ``top_k`` of the question); a question or a k the traces do not cover is an error."""

    def __init__(self, retrieved: dict):
        self.retrieved = retrieved

    def search(self, queries, k: int) -> list:
        out = []
        for q in queries:
            assert q in self.retrieved, f"no recorded dense search of {q!r}"
            assert k <= len(self.retrieved[q]), f"recorded D_q holds {len(self.retrieved[q])} passages, not {k}"
            out.append(self.retrieved[q][:k])
        return out


class RecordedWeights:
    """Algorithm 1's cosine edge weights as the traces recorded them, in the shape of an encoder: a question
    encodes to its one-hot vector, a triple text to its recorded weight for every question (0 where none is
    recorded), so ``triple vector @ question vector`` is the recorded weight. :meth:`missing` says which weights
    of a subgraph were not recorded (and so are not the run's)."""

    model_name = "recorded edge weights"
    batch_size = 64

    def __init__(self, weights: dict):
        self.weights = weights
        self.index = {q: i for i, q in enumerate(sorted({q for q, _ in weights}))}

    def encode(self, texts, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), len(self.index)))
        for i, text in enumerate(texts):
            if text in self.index:
                out[i, self.index[text]] = 1.0
            else:
                for q, j in self.index.items():
                    out[i, j] = self.weights.get((q, text), 0.0)
        return out

    def embed_queries(self, queries) -> np.ndarray:
        return self.encode(list(queries))

    def missing(self, sub) -> int:
        return sum((sub.question, triple_text(t)) not in self.weights for t in sub.weights)


def recorded_weights(run: Path) -> dict:
    """``{(question, triple text): weight}`` of every cosine-weighted subgraph round in the traces of the run's
    methods. The study variants' traces (notebook 04 §3b) are left out: their encoder calls batch other texts, so a
    weight can differ from the methods' in its sixth decimal, and no table they do not feed reads them."""
    out: dict = {}
    study = {trace_file(run, key, "x").parent.name for key in STUDY_METHODS}
    for path in sorted(run.glob("traces/**/*.trace.jsonl")):
        if path.parent.name in study:
            continue
        for rec in read_traces(path):
            for rnd in (rec.get("trace") or {}).get("rounds") or []:
                sub = rnd.get("subgraph") or {}
                if sub.get("weighting") != "cosine":
                    continue
                for row in sub.get("G_Ans", []) + sub.get("pruned", []):
                    key = (sub["question"], triple_text(Triple(*map(str, row[:4]))))
                    assert out.setdefault(key, float(row[4])) == float(row[4]), f"{path}: two weights for {key}"
    return out


def read_back(ws, method, questions, resume: bool = True, path: Optional[Path] = None) -> list:
    """``run_method`` answered by the committed trace file it would write (its resume branch, without the
    fingerprint: the graph it compares is not committed); the file must hold exactly these questions."""
    path = Path(path) if path is not None else trace_file(ws.cfg.run_dir, ev.method_key(method), ws.dataset.name)
    outputs = ev.load_outputs(path)
    assert [o.qid for o in outputs] == [q.qid for q in questions], f"{path}: not the questions asked"
    return outputs


# ---------------------------------------------------------------- the run's inputs
class Shared:
    """What every rebuild starts from, computed once for the module: the effective configs (one reading
    ``results/sample``, one writing to a temporary folder), the replay LLM, the datasets and their question
    samples, the recorded dense searches and edge weights, notebook 01's graphs, the workspaces, BM25 indexes.

    Nothing here runs code of ``kgir_lib/eval`` or ``kgir_lib/kgir`` beyond reading names: whatever a table is
    computed with is computed again in the test of that table (:class:`Sample`), so that a mutation test
    (``benchmarks/mutation.sh``), which learns which test calls which function, runs every table's test on a
    mutant of any function the table needs."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self._ws: dict = {}
        self._bm25: dict = {}

    def config(self, notebook: str, results_dir: Path):
        """``notebook``'s effective config (``results/sample/config/<notebook>.yaml``) with another results folder."""
        saved = yaml.safe_load((RUN / "config" / f"{notebook}.yaml").read_text(encoding="utf-8"))
        fixed = {k: v for k, v in saved.items() if k not in ("profile", "results_dir", "figures_dir", "data_dir")}
        return load_config(saved["profile"], **fixed, results_dir=str(results_dir), data_dir=str(DATA),
                           figures_dir=str(self.tmp / "figures"))

    @cached_property
    def cfg(self):
        """Reads the committed run (``run_dir`` is ``results/sample``); nothing may be written through it."""
        return self.config("05_eval", RUN.parent)

    @cached_property
    def wcfg(self):
        """The same config over a temporary results folder: graphs built here are stored there."""
        return self.config("05_eval", self.tmp / "results")

    @cached_property
    def llm(self) -> LLM:
        llm = LLM(ReplayOnly(f"{self.cfg.llm_backend}:{self.cfg.llm_model}"), LLMCache(self.tmp / "llm.sqlite"),
                  progress=False, cache_only=True)
        assert import_log(llm.cache, RUN / "llm_responses.jsonl.gz") > 0
        return llm

    @cached_property
    def datasets(self) -> dict:
        return {name: load_dataset(name, DATA) for name in self.cfg.datasets}

    @cached_property
    def questions(self) -> dict:
        return {n: sample_questions(ds.questions, self.cfg.n_questions, self.cfg.seed) for n, ds in self.datasets.items()}

    @cached_property
    def search(self) -> RecordedSearch:
        """Each sampled question's ``D_q``, read from the first round of its KGIR-RAG trace line."""
        return RecordedSearch({rec["trace"]["question"]: [tuple(x) for x in rec["trace"]["rounds"][0]["retrieved"]]
                               for d in self.datasets for rec in read_traces(trace_file(RUN, "kgir", d))})

    def bm25(self, dataset: str) -> BM25Index:
        if dataset not in self._bm25:
            self._bm25[dataset] = BM25Index(self.datasets[dataset].corpus.passages)
        return self._bm25[dataset]

    @cached_property
    def builds(self) -> dict:
        """Notebook 01's ``build_kg`` of each dataset, stored under the temporary folder."""
        out = {}
        for name, ds in self.datasets.items():
            if openie_file(self.wcfg, name) is not None:
                out[name] = build_kg(self.wcfg, ds, None)
            elif name in self.wcfg.extract_datasets:
                out[name] = build_kg(self.wcfg, ds, self.llm, self.search)
        return out

    @cached_property
    def encoder(self) -> RecordedWeights:
        return RecordedWeights(recorded_weights(RUN))

    def workspace(self, name: str) -> Workspace:
        """The dataset's workspace over the temporary folder: notebook 01's graph, passages extracted on demand
        through the response log, recorded weights for the encoder."""
        if name not in self._ws:
            self.builds  # notebook 01 first, as the runner orders them
            kg, ensure = open_kg(self.wcfg, self.datasets[name], self.llm)
            self._ws[name] = Workspace(cfg=self.wcfg, dataset=self.datasets[name], llm=self.llm,
                                       dense=RecordedDense(self.encoder), kg=kg, ensure_kg=ensure)
        return self._ws[name]


class Sample:
    """One test's view of the run: :class:`Shared`'s inputs, and what the library computes from them (method
    outputs read back, scores, mechanism tables, evidence subgraphs), computed in this test and kept for it."""

    def __init__(self, shared: Shared):
        self.shared = shared
        self._mech: dict = {}
        self._outputs: dict = {}

    def __getattr__(self, name: str):
        return getattr(self.shared, name)

    def outputs(self, key: str, dataset: str) -> list:
        """The outputs of method ``key`` on the dataset's sample, read back from its committed trace file."""
        if (key, dataset) not in self._outputs:
            self._outputs[key, dataset] = read_back(SimpleWs(self.cfg, self.datasets[dataset]), build_method(key),
                                                    self.questions[dataset])
        return self._outputs[key, dataset]

    @cached_property
    def suite(self) -> tuple:
        """Notebook 05's ``suite.scores`` and ``suite.runs`` (``run_suite``), from the traces and their metas."""
        frames, runs = [], []
        for d in self.datasets:
            for key in self.cfg.eval_methods or DEFAULT_METHODS:
                df = ev.score(self.outputs(key, d), self.questions[d])
                label = method_label(key, self.cfg)  # run_suite's label: LightRAG's names its index
                for col, value in (("method", label), ("key", key), ("dataset", d)):
                    df.insert(0, col, value)
                frames.append(df)
                meta = read_meta(trace_file(RUN, key, d))
                runs.append({"dataset": d, "key": key, "method": label, "n": len(df),
                             "wall_seconds": float(meta["wall_seconds"]), "resumed": True,
                             **{f"llm_{k}": float(df[k].sum()) for k in ev.USAGE}})
        return pd.concat(frames, ignore_index=True), pd.DataFrame(runs)

    @property
    def scores(self) -> pd.DataFrame:
        return self.suite[0]

    def ours(self) -> str:
        return ev.ours_label(self.cfg, ev.questions_per_dataset(self.scores))

    def mech(self, datasets, table: str) -> pd.DataFrame:
        """Table ``table`` of :func:`mechanism_tables` over ``datasets``: that table alone is computed (the others
        cost the same again, nine times over, and are each computed in their own test)."""
        key = (tuple(datasets), table)
        if key not in self._mech:
            self._mech[key] = mechanism_tables(RUN, list(key[0]), data_dir=DATA,
                                               context_passages=self.cfg.context_passages, tables=[table])[table]
        return self._mech[key]

    @cached_property
    def subgraphs(self) -> dict:
        """Notebook 03's ``build_subgraphs`` per dataset, on each question's recorded ``D_q``."""
        out = {}
        for name, qs in self.questions.items():
            ws = self.workspace(name)
            subs, _ = build_subgraphs(ws, [q.question for q in qs], self.search.search([q.question for q in qs],
                                                                                      self.cfg.top_k))
            assert not any(self.encoder.missing(s) for s in subs), f"{name}: an edge weight no trace recorded"
            out[name] = {"ws": ws, "questions": qs, "subs": subs}
        return out


@dataclass
class SimpleWs:
    """What ``run_method``'s path and a trace read need of a workspace."""

    cfg: object
    dataset: object


class RecordedDense:
    """The dense index of a workspace whose encoder is :class:`RecordedWeights` (no search: ``D_q`` is recorded)."""

    def __init__(self, encoder: RecordedWeights):
        self.encoder = encoder

    def embed_queries(self, queries) -> np.ndarray:
        return self.encoder.embed_queries(queries)


# ---------------------------------------------------------------- notebook 01
def t_table3(s: Sample, name: str) -> pd.DataFrame:
    return table3({f"{n} ({b.source}: {'gpt-3.5-turbo-1106' if b.source == 'openie' else s.llm.model_id})":
                   (b.kg, b.drops) for n, b in s.builds.items()})


def t_extraction_cost(s: Sample, name: str) -> pd.DataFrame:
    """Notebook 01 §6 (its "this run" and wall-time columns are the runtime's, dropped as save_table drops them)."""
    return extraction_cost(s.wcfg, s.builds, {}, s.llm.cache)


# ---------------------------------------------------------------- notebook 02
def dense_name(s: Sample) -> str:
    return f"dense ({s.cfg.embed_model})"


def t_recall_single_step(s: Sample, name: str) -> pd.DataFrame:
    """Every question of each file: BM25 as notebook 02 computes it; the dense row needs the encoder (a model
    load) for the questions outside the sample, so its cells are not rebuilt."""
    tables = {}
    for n, ds in s.datasets.items():
        t = recall_table({"BM25": s.bm25(n)}, ds.questions, (2, 5))
        t = t.reindex([dense_name(s), "BM25"]).astype(object)
        tables[n] = t.fillna({"R@2": NOT_REBUILT, "R@5": NOT_REBUILT})
    return with_published_recall(recall_by_dataset(tables, prefix="ours: "), s.cfg.datasets)


def t_recall_curve(s: Sample, name: str) -> pd.DataFrame:
    """The Recall@k curves; the dense curve's recall needs the encoder (see :func:`t_recall_single_step`)."""
    curves = {}
    for n, ds in s.datasets.items():
        bm25 = recall_curve({"BM25": s.bm25(n)}, ds.questions, range(1, MAX_K + 1))
        dense = bm25.assign(retriever=dense_name(s), recall=NOT_REBUILT)
        curves[n] = pd.concat([dense, bm25], ignore_index=True)
    return pd.concat(curves, names=["dataset"]).reset_index(level=0)


def t_recall_sample(s: Sample, name: str) -> pd.DataFrame:
    return recall_by_dataset({n: recall_table({dense_name(s): s.search, "BM25": s.bm25(n)}, s.questions[n], (2, 5))
                              for n in s.datasets}, with_n=True)


# ---------------------------------------------------------------- notebook 03


def per_question_03(s: Sample) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": n, "qid": q.qid, **subgraph_row(sub, q.gold_pids)}
                         for n, run in s.subgraphs.items() for q, sub in zip(run["questions"], run["subs"])])


def t_subgraph_per_question(s: Sample, name: str) -> pd.DataFrame:
    return per_question_03(s).set_index(["dataset", "qid"])


def t_subgraph_steps(s: Sample, name: str) -> pd.DataFrame:
    per_q = per_question_03(s)
    summary = per_q.groupby("dataset", sort=False).apply(summarise_steps, include_groups=False)
    summary.loc["all"] = summarise_steps(per_q)
    return summary.round(2)


def t_gtmp_readings(s: Sample, name: str) -> pd.DataFrame:
    readings = pd.concat({n: compare_readings(run["ws"], run["subs"], [q.gold_pids for q in run["questions"]])
                          for n, run in s.subgraphs.items()}, names=["dataset", "reading"])
    assert not any(s.encoder.missing(sub) for run in s.subgraphs.values() for sub in run["subs"])
    return readings.round(2)


# The columns of notebook 03's tables that depend on which triples the spanning trees keep, hence on the edge
# weights; how many triples they keep does not (|edges| - |nodes| + |components| whatever the weights).
WEIGHTED = ("gold in G_Ans", "gold survival G_Ans %")


def t_seed_match(s: Sample, name: str) -> pd.DataFrame:
    rows = []
    for method in SIMILARITIES:
        for n, run in s.subgraphs.items():
            subs = [rebuild_subgraph(run["ws"], sub, method=method) for sub in run["subs"]]
            k = max(len(subs), 1)
            gold = sum(len(set(q.gold_pids) & {t.pid for t in sub.kept}) for q, sub in zip(run["questions"], subs))
            rows.append({"dataset": n, "method": method, "questions": len(subs),
                         "seed from LLM entities %": 100 * sum(bool(x.seeds) and not x.used_fallback for x in subs) / k,
                         "of which via whole triples %": 100 * sum(bool(x.matched_by_triple) and not x.used_fallback
                                                                   for x in subs) / k,
                         "seed after fallback %": 100 * sum(bool(x.seeds) for x in subs) / k,
                         "empty G_Ans %": 100 * sum(not x.kept for x in subs) / k,
                         "gold in G_Ans": NOT_REBUILT if any(s.encoder.missing(x) for x in subs) else gold})
    return pd.DataFrame(rows).set_index(["dataset", "method"]).round(2)


def t_subgraph_sensitivity(s: Sample, name: str) -> pd.DataFrame:
    cfg = s.cfg
    thetas = sorted({0.5, 0.7, 0.9, float(cfg.ngram_threshold)})
    points = [(theta, "cosine") for theta in thetas] + [(float(cfg.ngram_threshold), "passage")]
    run_weighting = next((sub.weighting for r in s.subgraphs.values() for sub in r["subs"]), "cosine")
    sens = []
    for theta, weighting in points:
        rs, missing = [], 0
        for n, run in s.subgraphs.items():
            for q, sub in zip(run["questions"], run["subs"]):
                alt = rebuild_subgraph(run["ws"], sub, threshold=theta, weighting=weighting)
                missing += weighting == "cosine" and s.encoder.missing(alt)
                rs.append({"dataset": n, **subgraph_row(alt, q.gold_pids)})
        row = summarise_steps(pd.DataFrame(rs))
        row = row[["mean |G_tmp|", "mean |G_Ans|", "MST removal %", "empty G_Ans %", "gold survival G_Ans %"]]
        sens.append({"threshold": theta, "weighting": weighting,
                     "this run": theta == cfg.ngram_threshold and weighting == run_weighting,
                     "mean seeds": pd.DataFrame(rs)["seeds"].mean(), **round(row, 2).to_dict()})
        if missing:
            sens[-1].update({c: NOT_REBUILT for c in WEIGHTED if c in sens[-1]})
    return pd.DataFrame(sens).set_index(["threshold", "weighting"]).round(2)


# ---------------------------------------------------------------- notebook 04
def kgir_run(s: Sample, d: str) -> tuple:
    outputs = s.outputs("kgir", d)
    return outputs, ev.score(outputs, s.questions[d]), trace_table(outputs)


def t_kgir_metrics(s: Sample, name: str) -> pd.DataFrame:
    rows = {}
    for d, qs in s.questions.items():
        outputs, sc, loop = kgir_run(s, d)
        dense = s.search.search([q.question for q in qs], s.cfg.top_k)
        dense_r = {k: 100 * mean_recall([[p for p, _ in x] for x in dense], [q.gold_pids for q in qs], k)
                   for k in (2, 5)}
        rounds = max(loop["iterations"].sum(), 1)
        rows[d] = {
            "n": len(sc), "EM": sc["EM"].mean(), "F1": sc["F1"].mean(), "R@2": sc["R@2"].mean(),
            "R@5": sc["R@5"].mean(), "dense R@2": dense_r[2], "dense R@5": dense_r[5],
            "rounds / q": loop["iterations"].mean(),
            "by reflection %": 100 * (loop["answered_by"] == "reflection").mean(),
            "forced %": 100 * (loop["answered_by"] == "forced_reader").mean(),
            "LLM calls / q": loop["llm_calls"].mean(), "prompt tokens / q": loop["prompt_tokens"].mean(),
            "completion tokens / q": loop["completion_tokens"].mean(),
            "NER fallback / round %": 100 * loop["ner_fallbacks"].sum() / rounds,
            "seed-match / round %": 100 * seed_match_rate([o.trace for o in outputs]),
            "malformed rewrites %": 100 * loop["rewrite_malformed"].sum() / rounds,
            "malformed reflections %": 100 * loop["reflection_malformed"].sum() / rounds,
        }
    metrics = pd.DataFrame.from_dict(rows, orient="index")
    metrics.index.name = "dataset"
    for k, col in ((0, "published R@2 (derived)"), (1, "published R@5 (derived)")):
        metrics[col] = [report.KGIR_RECALL_DERIVED.get(d, (None, None))[k] for d in metrics.index]
    return metrics.round(2)


def t_kgir_usage(s: Sample, name: str) -> pd.DataFrame:
    rows = []
    for d in s.questions:
        outputs = s.outputs("kgir", d)
        for stage in STAGES:
            tot = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cache_hits": 0, "truncated": 0}
            for o in outputs:
                for key in tot:
                    tot[key] += o.trace.get("llm", {}).get(stage, {}).get(key, 0)
            rows.append({"dataset": d, "stage": stage, **tot, "calls / q": tot["calls"] / max(len(outputs), 1)})
    return pd.DataFrame(rows).set_index(["dataset", "stage"]).round(2)


def t_kgir_usable(s: Sample, name: str) -> pd.DataFrame:
    return pd.concat({d: usable_table(s.outputs("kgir", d)) for d in s.questions}, names=["dataset", "stage"]).round(2)


def t_kgir_per_question(s: Sample, name: str) -> pd.DataFrame:
    frames = []
    for d in s.questions:
        _, sc, loop = kgir_run(s, d)
        frames.append(sc.assign(dataset=d).merge(loop[["qid", "iterations", "answered_by"]], on="qid"))
    cols = ["dataset", "qid", "answer", "gold", "EM", "F1", "R@2", "R@5", "iterations", "answered_by", "calls",
            "prompt_tokens", "completion_tokens"]
    return pd.concat(frames, ignore_index=True)[cols].set_index(["dataset", "qid"]).round(2)


def mech(frame: str, index: list, digits: int, datasets: str = "datasets") -> Callable:
    """A table of :func:`mechanism_tables` as a notebook saves it (``datasets``: the config field it reads)."""
    def build(s: Sample, name: str) -> pd.DataFrame:
        return s.mech(getattr(s.cfg, datasets), frame).set_index(index).round(digits)
    return build


def decomposed(s: Sample) -> tuple:
    """Notebook 04's loss decomposition: every reader of ``decomposition_readers`` answers from the response log
    only (a reader the log lacks is an error, never a model load), over KGIR-RAG's committed traces."""
    from kgir_lib.eval.mechanism.loss_decomposition import loss_decomposition

    cfg = s.shared.config("04_iterative_rewrite", RUN.parent)
    readers = {m: s.llm if m == cfg.llm_model else
               LLM(ReplayOnly(f"{cfg.llm_backend}:{m}"), s.llm.cache, progress=False, cache_only=True)
               for m in cfg.decomposition_readers or [cfg.llm_model]}
    runs = {d: (SimpleWs(cfg, s.datasets[d]), s.questions[d], s.outputs("kgir", d)) for d in cfg.decomposition_scope}
    return loss_decomposition(cfg, readers, runs)


def t_loss_decomposition(s: Sample, name: str) -> pd.DataFrame:
    return decomposed(s)[0].set_index(["dataset", "reader", "condition"]).round(4)


def t_passage_cut(s: Sample, name: str) -> pd.DataFrame:
    return decomposed(s)[1].set_index("dataset")


def t_loss_orders(s: Sample, name: str) -> pd.DataFrame:
    """The split, two-order decomposition: every reader answers from the response log only (as ``decomposed``)."""
    from kgir_lib.eval.mechanism import loss_orders

    cfg = s.shared.config("04_iterative_rewrite", RUN.parent)
    readers = {m: s.llm if m == cfg.llm_model else
               LLM(ReplayOnly(f"{cfg.llm_backend}:{m}"), s.llm.cache, progress=False, cache_only=True)
               for m in cfg.decomposition_readers or [cfg.llm_model]}
    runs = {d: (SimpleWs(cfg, s.datasets[d]), [o.to_json() for o in s.outputs("kgir", d)])
            for d in cfg.decomposition_scope}
    table = loss_orders.loss_orders(cfg, readers, runs)[0]
    return table.set_index(["dataset", "reader", "order", "condition"]).round(4)


def t_first_and_new(s: Sample, name: str) -> pd.DataFrame:
    """The deployable repair against KGIR-RAG and Naive RAG, from the three committed trace files."""
    from kgir_lib.eval.mechanism import repair

    return repair.run_table(RUN, {d: s.datasets[d] for d in report.panel_order(s.questions)}).round(4)


def t_missing_gold_where(s: Sample, name: str) -> pd.DataFrame:
    from kgir_lib.eval.mechanism import missing_gold

    return pd.concat([missing_gold.missing_gold_table([o.to_json() for o in s.outputs("kgir", d)], d,
                                                      s.cfg.context_passages)
                      for d in report.panel_order(s.questions)], ignore_index=True).set_index("dataset")


def t_rewrite_form(s: Sample, name: str) -> pd.DataFrame:
    from kgir_lib.eval.mechanism import rewrite_form
    from kgir_lib.eval.mechanism.bridges import load_bridges

    return pd.concat([rewrite_form.form_table([o.to_json() for o in s.outputs(m, d)],
                                              load_bridges(d, s.cfg.data_path), d, m)
                      for m in ("kgir", "kgir_forced") for d in report.panel_order(s.questions)],
                     ignore_index=True).set_index(["method", "dataset", "round"])


def t_missing_gold_swap(s: Sample, name: str) -> pd.DataFrame:
    from kgir_lib.eval.mechanism import missing_gold

    answers = decomposed(s)[2]
    return pd.concat([missing_gold.swap_by_class(
        [o.to_json() for o in s.outputs("kgir", d)],
        {m: a for m, a in answers[answers["dataset"] == d].groupby("reader", sort=False)}, d)
        for d in report.panel_order(s.questions)], ignore_index=True).set_index(["dataset", "reader", "class"]).round(4)


# ---------------------------------------------------------------- notebook 05
def t_qa(s: Sample, name: str) -> pd.DataFrame:
    assert name == "05_table4_5_qa_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in s.cfg.llm_model)
    qa = report.with_published(ev.summary_table(s.scores, ("EM", "F1"), label=s.ours(), datasets=s.cfg.datasets),
                               report.published_qa(s.cfg.datasets))
    return report.flat_columns(qa)


def t_recall(s: Sample, name: str) -> pd.DataFrame:
    recall = report.with_published(ev.summary_table(s.scores, ("R@2", "R@5"), label=s.ours(),
                                                    datasets=s.cfg.datasets), report.published_recall(s.cfg.datasets))
    return report.flat_columns(recall)


def t_runs(s: Sample, name: str) -> pd.DataFrame:
    """Notebook 05's method runs, one a (dataset, method): the committed columns of ``suite.runs``."""
    return s.suite[1][["dataset", "key", "method", "n"]].set_index(["dataset", "key"])


def t_cost(by_dataset: bool) -> Callable:
    return lambda s, name: ev.cost_table(s.scores, s.suite[1], by_dataset=by_dataset)


def graph_at_05(s: Sample, d: str) -> Workspace:
    """The dataset's stored graph when notebook 05 read its cost: notebook 01's passages and every passage a run
    of notebooks 03-05 extracted on demand (each trace meta's ``kg_on_demand``; notebook 03's ``D_q`` are among
    them), extracted from the response log."""
    ws = s.workspace(d)
    if openie_file(s.wcfg, d) is None:
        pids = [p for path in sorted(RUN.glob(f"traces/*/{d}.trace.meta.json"))
                for p in json.loads(path.read_text()).get("kg_on_demand", [])]
        kg = KnowledgeGraph()
        base = s.builds[d]
        for group in (base.pool, pids):
            update_kg(kg, s.llm, [ws.dataset.corpus[p] for p in dict.fromkeys(group)],
                      max_tokens=s.wcfg.max_tokens("extract"))
        ws = Workspace(cfg=ws.cfg, dataset=ws.dataset, llm=ws.llm, dense=ws.dense, kg=kg)
    return ws


def indexing(s: Sample) -> pd.DataFrame:
    """Notebook 05's ``suite.indexing``; a regeneration makes no extraction call (every reply is in the log)."""
    return pd.DataFrame([indexing_cost(graph_at_05(s, d), extract_usage=Usage())
                         for d in s.cfg.datasets]).set_index("dataset")


def t_indexing(s: Sample, name: str) -> pd.DataFrame:
    return indexing(s)


def t_indexing_lightrag(s: Sample, name: str) -> pd.DataFrame:
    from kgir_lib.baselines.lightrag_index import indexing_table

    return indexing_table(s.cfg, s.cfg.datasets, indexing(s))


def t_indexing_published(s: Sample, name: str) -> pd.DataFrame:
    return report.flat_columns(report.published_indexing())


def t_bootstrap(s: Sample, name: str) -> pd.DataFrame:
    bt = bootstrap_table(s.scores, reference=REFERENCE, metrics=("EM", "F1", "R@2", "R@5"), n_boot=N_BOOT, seed=0)
    return bt.set_index(["dataset", "baseline", "metric"])


def t_claims(s: Sample, name: str) -> pd.DataFrame:
    return cl.claims_table(s.scores, n_boot=N_BOOT, seed=0).set_index(["claim", "dataset", "metric"])


def t_lightrag_keywords(s: Sample, name: str) -> pd.DataFrame:
    from kgir_lib.baselines.lightrag_method import keyword_table

    return keyword_table(RUN, s.cfg.datasets).set_index("dataset")


def t_answer_form(s: Sample, name: str) -> pd.DataFrame:
    return ev.answer_form(s.scores)


# ---------------------------------------------------------------- notebook 06
def study_workspace(s: Sample, d: str) -> Workspace:
    """Notebook 06's ``ws_of(d)`` reading the committed run: its graph (for the robustness study's triple
    counts), runs read back from the traces (:func:`read_back`)."""
    ws = s.workspace(d)
    return Workspace(cfg=s.cfg, dataset=ws.dataset, llm=None, dense=None, kg=ws.kg)


@pytest.fixture
def traces_for_runs(monkeypatch):
    monkeypatch.setattr(ev, "run_method", read_back)


def variants(s: Sample, factory_of: Callable, labels: dict) -> pd.DataFrame:
    return pd.concat([ablation.variant_scores(study_workspace(s, d), s.questions[d], factory_of, list(labels), labels)
                      for d in s.cfg.ablation_datasets], ignore_index=True)


def t_kgir_ablation(s: Sample, name: str) -> pd.DataFrame:
    labels = ablation.kgir_ablation_labels(s.cfg.eval_methods or DEFAULT_METHODS)  # Table 7's rows, repairs run
    per_q = variants(s, lambda v: build_method("kgir" if v == "full" else f"kgir_{v}"), labels)
    table = ablation.ablation_table(ablation.variant_means(per_q), labels=labels,
                                    intervals=ablation.variant_intervals(per_q, n_boot=N_BOOT))
    return table.set_index(["dataset", "variant"])


def t_kg2rag_ablation(s: Sample, name: str) -> pd.DataFrame:
    per_q = variants(s, lambda v: build_method("kg2rag" if v == "full" else f"kg2rag_{v}"),
                     ablation.KG2RAG_VARIANT_LABELS)
    table = ablation.ablation_table(ablation.variant_means(per_q), labels=ablation.KG2RAG_VARIANT_LABELS,
                                    paper_drops=None, intervals=ablation.variant_intervals(per_q, n_boot=N_BOOT))
    return table.set_index(["dataset", "variant"])


def study_questions(s: Sample) -> dict:
    n = s.cfg.study_n_questions if s.cfg.study_n_questions is not None else s.cfg.n_questions
    n = min(n, s.cfg.n_questions)
    return {d: sample_questions(s.datasets[d].questions, n, s.cfg.seed) for d in s.cfg.study_datasets}


def sweep_all(s: Sample, make: Callable, values, param: str) -> pd.DataFrame:
    return ablation.sweep_each({d: (study_workspace(s, d), qs) for d, qs in study_questions(s).items()}, make,
                               values, param)


def t_kg2rag_sweep(knob: str, param: str) -> Callable:
    def build(s: Sample, name: str) -> pd.DataFrame:
        values = ablation.study_grid()["kg2rag"][knob]
        return sweep_all(s, lambda v: build_method("kg2rag", **{knob: v}), values, param).set_index(["dataset", "value"])
    return build


def t_kgir_sensitivity(s: Sample, name: str) -> pd.DataFrame:
    grid = ablation.study_grid()["kgir"]
    sens = pd.concat([sweep_all(s, lambda v, knob=knob: build_method("kgir", **{knob: v}), values, knob)
                      for knob, values in grid.items()], ignore_index=True)
    return sens.set_index(["dataset", "param", "value"])


def t_robustness(s: Sample, name: str) -> pd.DataFrame:
    grid, seeds = ablation.study_grid(), list(range(s.cfg.robustness_seeds))
    runs = pd.concat([ablation.robustness_runs(study_workspace(s, d), qs, lambda: build_method("kg2rag"),
                                               grid["drop_fractions"], seeds, scope="all")
                      for d, qs in study_questions(s).items()], ignore_index=True)
    return ablation.summarise_seeds(runs).set_index(["dataset", "fraction"])


# ---------------------------------------------------------------- notebook 07
def case_choice(s: Sample):
    from kgir_lib.notebook.case.choice import choose_case, gold_chain
    from kgir_lib.notebook.case.records import load_kgir_traces

    return choose_case(load_kgir_traces(s.cfg), None, None, chain=gold_chain(DATA, s.cfg.datasets))


def t_bridge_candidates(s: Sample, name: str) -> pd.DataFrame:
    return case_choice(s).table.head(20).set_index(["dataset", "qid"])


def t_bridge_summary(s: Sample, name: str) -> pd.DataFrame:
    from kgir_lib.notebook.case.bridges import bridge_summary, find_bridge_cases
    from kgir_lib.notebook.case.records import load_kgir_traces

    return bridge_summary(find_bridge_cases(load_kgir_traces(s.cfg)))


def case_question(s: Sample) -> tuple:
    """``(dataset, qid, intervention)`` of notebook 07's case: the question the model's run took furthest, or, when
    that run completes the chain on no question, the question the smallest study variant completes it on."""
    from kgir_lib.notebook.case.choice import find_intervention

    choice = case_choice(s)
    found = None if choice.full or not len(choice.table) else find_intervention(s.cfg.run_dir, s.cfg.datasets,
                                                                               gold_chain_of(s), choice.table)
    return (found.dataset, found.qid, found) if found else (choice.dataset, choice.qid, None)


def case(s: Sample, name: str):
    """Notebook 07's case (``case_from_dataset``: KGIR-RAG run again on the chosen question, every call a cache
    hit), read from the committed KGIR-RAG trace of that question; the table's name must be the chosen case's."""
    from kgir_lib.notebook.case.build import case_from_output

    dataset, qid, _ = case_question(s)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{dataset}_{qid}")
    assert name.endswith(f"_{safe}"), f"{name}: notebook 07 now chooses {dataset} {qid}"
    ws = s.workspace(dataset)
    [q] = [q for q in s.datasets[dataset].questions if q.qid == qid]
    [out] = [o for o in s.outputs("kgir", dataset) if o.qid == q.qid]
    ws.kg_for([p for r in out.trace["rounds"] for key in ("retrieved", "rewrite_retrieved")
               for p, _ in r.get(key) or []])
    return case_from_output(Workspace(cfg=s.cfg, dataset=ws.dataset, llm=None, dense=None, kg=ws.kg), q, out)


def t_case_chain(s: Sample, name: str) -> pd.DataFrame:
    """Notebook 07's chain table: the chosen question's chain, round by round, in the model's own run and, when that
    run completes the chain on no question, in the smallest study variant that does (each read from its committed
    trace of the question)."""
    from kgir_lib.notebook.case.build import case_from_output
    from kgir_lib.notebook.case.choice import case_chain
    from kgir_lib.registry import LABELS

    dataset, qid, found = case_question(s)
    ws = s.workspace(dataset)
    [q] = [q for q in s.datasets[dataset].questions if q.qid == qid]
    runs = {"KGIR-RAG as the model runs it": "kgir"}
    if found:
        runs[f"{LABELS[found.key]} (study variant)"] = found.key
    chains = {}
    for label, key in runs.items():
        [out] = [o for o in s.outputs(key, dataset) if o.qid == qid]
        ws.kg_for([p for r in out.trace["rounds"] for k in ("retrieved", "rewrite_retrieved")
                   for p, _ in r.get(k) or []])
        c = case_from_output(Workspace(cfg=s.cfg, dataset=ws.dataset, llm=None, dense=None, kg=ws.kg), q, out)
        chains[label] = case_chain(c)
    table = pd.concat(chains, names=["run", "i"]).reset_index(level="i", drop=True)
    table.insert(0, "dataset", dataset)
    table.insert(1, "qid", qid)
    return table


def gold_chain_of(s: Sample):
    from kgir_lib.notebook.case.choice import gold_chain

    return gold_chain(DATA, s.cfg.datasets)


def t_case_steps(s: Sample, name: str) -> pd.DataFrame:
    return case(s, name).steps_frame()


def t_case_answers(s: Sample, name: str) -> pd.DataFrame:
    from kgir_lib.notebook.case.baselines import baseline_answers

    return baseline_answers(case(s, name), run_missing=False)


# ---------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Pin:
    """How a committed table is rebuilt: ``build(sample, table name)`` returns the frame its notebook saves.

    ``index``: whether the notebook writes the index (``report.save_table`` does; ``recall_curve`` is written
    with ``index=False``). ``not_rebuilt``: why some cells are :data:`NOT_REBUILT` (empty: none may be)."""

    build: Callable[[Sample, str], pd.DataFrame]
    index: bool = True
    not_rebuilt: str = ""


NEEDS_ENCODER = ("the dense rankings of the questions outside the sample need their embeddings, i.e. the MiniLM "
                 "encoder (a model load); the sample's are recorded as KGIR-RAG's first retrieval")
UNRECORDED_WEIGHTS = ("spanning trees over seeds this run's setting did not match weigh triples no trace recorded "
                      "a weight for (the encoder, a model load); only the columns that depend on which triples the "
                      "trees keep are left out")

# committed table name, or a pattern for names made from the run (model, case) -> its rebuild
REBUILT: dict = {
    "table3_kg_stats": Pin(t_table3),
    "kg_extraction_cost": Pin(t_extraction_cost),
    "recall_single_step": Pin(t_recall_single_step, not_rebuilt=NEEDS_ENCODER),
    "recall_single_step_sample": Pin(t_recall_sample),
    "recall_curve": Pin(t_recall_curve, index=False, not_rebuilt=NEEDS_ENCODER),
    "03_subgraph_per_question": Pin(t_subgraph_per_question),
    "03_subgraph_steps": Pin(t_subgraph_steps),
    "03_gtmp_readings": Pin(t_gtmp_readings),
    "03_seed_match": Pin(t_seed_match, not_rebuilt=UNRECORDED_WEIGHTS),
    "03_subgraph_sensitivity": Pin(t_subgraph_sensitivity, not_rebuilt=UNRECORDED_WEIGHTS),
    "04_kgir_metrics": Pin(t_kgir_metrics),
    "04_kgir_usage_by_stage": Pin(t_kgir_usage),
    "04_kgir_usable_outputs": Pin(t_kgir_usable),
    "04_kgir_per_question": Pin(t_kgir_per_question),
    "04_bridge_funnel": Pin(mech("funnel", ["method", MATCH, "dataset", "round", "step"], 2)),
    "04_forced_rounds": Pin(mech("forced_rounds", ["dataset", "round"], 2)),
    "04_oracle_stop": Pin(mech("oracle_stop", ["dataset"], 2)),
    "04_reflection_calibration": Pin(mech("calibration", ["method", "dataset", "round"], 2)),
    "04_step_attribution": Pin(mech("step_attribution", ["dataset", "key"], 4)),
    "04_loss_decomposition": Pin(t_loss_decomposition),
    "04_passage_cut": Pin(t_passage_cut),
    "04_missing_gold_where": Pin(t_missing_gold_where),
    "04_rewrite_form": Pin(t_rewrite_form),
    "04_missing_gold_swap": Pin(t_missing_gold_swap),
    "04_loss_orders": Pin(t_loss_orders),
    "05_first_and_new": Pin(t_first_and_new),
    "05_table4_5_qa_*": Pin(t_qa),
    "05_answer_form": Pin(t_answer_form),
    "05_table6_recall": Pin(t_recall),
    "05_runs": Pin(t_runs),
    "05_cost_per_question": Pin(t_cost(by_dataset=False)),
    "05_cost_per_question_by_dataset": Pin(t_cost(by_dataset=True)),
    "05_indexing_cost": Pin(t_indexing),
    "05_indexing_cost_published": Pin(t_indexing_published),
    "05_indexing_cost_lightrag": Pin(t_indexing_lightrag),
    "05_bootstrap_ci": Pin(t_bootstrap),
    "05_claims": Pin(t_claims),
    "05_rewrite_retrieval": Pin(mech("rewrite_retrieval", ["method", "dataset", "round"], 3)),
    "05_ranked_list_rules": Pin(mech("ranked_list_rules", ["dataset", "rule", "k"], 3)),
    "05_lightrag_keywords": Pin(t_lightrag_keywords),
    "06_kgir_ablation": Pin(t_kgir_ablation),
    "06_kgir_forced_rounds": Pin(mech("forced_rounds", ["dataset", "round"], 3, "ablation_datasets")),
    "06_kgir_reader_context": Pin(mech("reader_context", ["dataset", "method"], 3, "ablation_datasets")),
    "06_kg2rag_ablation": Pin(t_kg2rag_ablation),
    "06_kg2rag_k": Pin(t_kg2rag_sweep("top_k", "k")),
    "06_kg2rag_m": Pin(t_kg2rag_sweep("m_hops", "m")),
    "06_kg2rag_robustness": Pin(t_robustness),
    "06_kgir_sensitivity": Pin(t_kgir_sensitivity),
    "07_bridge_candidates": Pin(t_bridge_candidates),
    "07_bridge_naming": Pin(mech("bridge_naming", ["dataset", "method"], 3)),
    "07_bridge_summary": Pin(t_bridge_summary),
    "07_case_chain": Pin(t_case_chain),
    "07_case_steps_*": Pin(t_case_steps),
    "07_case_answers_*": Pin(t_case_answers),
}
# committed table name or pattern -> why no rebuild is possible here without an LLM call or a model, and what pins it
NOT_PINNED: dict = {
    "07_free_question_runs": ("the Fig. 6 question is run over its own six passages, whose dense index needs the "
                              "MiniLM encoder (a model load), and no trace of it is kept; the fresh-clone test "
                              "rebuilds it byte-identical with the main job, and test_case_study checks every value "
                              "notebook 07's reading quotes"),
}

COMMITTED = sorted(p.stem for p in TABLES.glob("*.csv"))


def entry(name: str):
    """The registry entry of a committed table name: its own, else the one pattern that matches it."""
    for registry in (REBUILT, NOT_PINNED):
        if name in registry:
            return registry[name]
    found = [v for registry in (REBUILT, NOT_PINNED) for k, v in registry.items() if fnmatch.fnmatchcase(name, k)]
    return found[0] if len(found) == 1 else None


# ---------------------------------------------------------------- comparing
def cells(text: str) -> list:
    return list(csv.reader(io.StringIO(text)))


def differences(name: str, rebuilt: list, committed: list) -> tuple:
    """``(differing cells, cells compared, cells not rebuilt)`` of two CSVs read as rows of text; the header
    and the number of rows must agree."""
    header = committed[0]
    assert rebuilt[0] == header, f"{name}: columns {rebuilt[0]} rebuilt, {header} committed"
    assert len(rebuilt) == len(committed), f"{name}: {len(rebuilt) - 1} rows rebuilt, {len(committed) - 1} committed"
    bad, compared, skipped = [], 0, 0
    for i, (new, old) in enumerate(zip(rebuilt[1:], committed[1:]), 1):
        assert len(new) == len(old) == len(header), f"{name}: row {i} has another number of cells"
        for col, a, b in zip(header, new, old):
            if a == NOT_REBUILT:
                skipped += 1
                continue
            compared += 1
            if a != b:
                bad.append(f"row {i} ({', '.join(old[:2])}) / {col}: rebuilt {a!r}, committed {b!r}")
    return bad, compared, skipped


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Shared:
    return Shared(tmp_path_factory.mktemp("pinned"))


@pytest.fixture
def sample(shared) -> Sample:
    return Sample(shared)


def _listing() -> dict:
    root = PROJECT_ROOT / "results"
    return {p.relative_to(root).as_posix(): (p.stat().st_mtime_ns if p.is_file() else 0) for p in root.rglob("*")}


@pytest.fixture(scope="module", autouse=True)
def results_untouched():
    """No rebuild writes or creates anything under ``results/``: they read the committed run only."""
    before = _listing()
    yield
    after = _listing()
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"the rebuilds wrote under results/: {changed[:10]}"


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_table_equals_its_rebuild(name, sample, traces_for_runs):
    pin = entry(name)
    if not isinstance(pin, Pin):
        pytest.skip(f"{name}: not rebuilt ({NOT_PINNED.get(name, pin)})")
    df = report.split_runtime(pin.build(sample, name))[0]  # what save_table commits
    rebuilt = cells(df.to_csv(index=pin.index))
    committed = cells((TABLES / f"{name}.csv").read_text(encoding="utf-8"))
    bad, compared, skipped = differences(name, rebuilt, committed)
    assert not bad, f"{name}: {len(bad)} of {compared} cells differ from the committed table:\n" + "\n".join(bad[:15])
    assert compared > 0, f"{name}: no cell compared"
    assert not skipped or pin.not_rebuilt, f"{name}: {skipped} cells not rebuilt, and the registry gives no reason"


def test_every_committed_table_is_registered():
    """A committed table the registry does not know fails here, so a new table is pinned the day it is committed;
    an entry that matches no committed table (renamed or removed) fails too."""
    unknown = [n for n in COMMITTED if entry(n) is None]
    assert not unknown, f"committed tables with no rebuild in REBUILT and no reason in NOT_PINNED: {unknown}"
    stale = [k for k in (*REBUILT, *NOT_PINNED) if not any(fnmatch.fnmatchcase(n, k) for n in COMMITTED)]
    assert not stale, f"registry entries that match no committed table: {stale}"
    assert not set(REBUILT) & set(NOT_PINNED)


def test_no_committed_table_holds_wall_time_or_cache_hits():
    """``report.save_table`` moves wall time and cache hits to the git-ignored ``runtime/`` folder, so a committed
    table has none, and every column of every committed table is compared."""
    runtime = {(n, c) for n in COMMITTED for c in cells((TABLES / f"{n}.csv").read_text(encoding="utf-8"))[0]
               if report.is_runtime(c)}
    assert runtime == set()
    assert report.is_runtime("wall seconds") and report.is_runtime("cache hits / q")  # the rule itself


def test_the_rebuilds_use_the_run_s_settings():
    """Every notebook of the sample run saved the same effective config (the rebuilds read one), and the captions
    say the resamples and recall depth the rebuilds use (notebook parameters, not config fields)."""
    saved = {p.name: p.read_text(encoding="utf-8") for p in sorted((RUN / "config").glob("*.yaml"))}
    assert len(saved) == 7 and len(set(saved.values())) == 1, sorted(saved)
    for name in ("05_bootstrap_ci", "05_claims", "06_kgir_ablation", "06_kg2rag_ablation"):
        assert f"({N_BOOT} resamples)" in (TABLES / f"{name}.md").read_text(encoding="utf-8"), name
    assert pd.read_csv(TABLES / "recall_curve.csv")["k"].max() == MAX_K
    assert (TABLES / "05_bootstrap_ci.md").read_text(encoding="utf-8").startswith(f"{REFERENCE} minus each method")


def test_the_comparison_catches_one_changed_digit():
    """The comparison itself: one digit changed in the last place, one NOT_REBUILT cell; every column counts."""
    old = cells("dataset,n,EM,LLM seconds\nhotpotqa,10,16.666666666666668,8.5\n")
    assert differences("t", old, old) == ([], 4, 0)
    assert len(differences("t", cells("dataset,n,EM,LLM seconds\nhotpotqa,10,16.666666666666668,9.1\n"), old)[0]) == 1
    assert len(differences("t", cells("dataset,n,EM,LLM seconds\nhotpotqa,10,16.666666666666664,8.5\n"), old)[0]) == 1
    assert differences("t", cells(f"dataset,n,EM,LLM seconds\nhotpotqa,10,{NOT_REBUILT},8.5\n"), old)[1:] == (3, 1)
