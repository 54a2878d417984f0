"""Measuring the eq. 5 matching rules (paper §2.2, Algorithm 1 step 4) on labelled pairs and on traces.

Eq. 5 is to judge "whether the question entity and the triple's entity are the same entity". This module
holds what ``benchmarks/bench_matching.py`` and the tests need to measure that, no LLM call:

- :func:`trace_rounds_of_run`: every subgraph round of a run's KGIR-RAG traces (the full method and its
  ablations) as a :class:`MatchRound` -- the round's question, its NER entities and the graph entities of
  its ``G_q``, re-read from the run's KG and the round's retrieved passages;
- :func:`loose_candidates`: the loose union of rules the labelled fixture was sampled from;
- :func:`read_pairs`, :func:`fixture_table`: the labelled fixture
  (``tests/fixtures/matching_pairs.tsv``) and precision / recall of each rule on it (recall over the pairs
  labelled ``same``), also weighted by the sampling rate of each stratum (:func:`pair_weights`);
  :func:`choose_rule` picks the rule (highest recall at precision >= :data:`MIN_PRECISION`);
  :func:`ratio_sweep` measures the length ratio of ``"overlap_len"``;
- :func:`seed_rates`: per dataset, the share of subgraph rounds with a seed and the kind of each match;
  :func:`reproduced` checks the recomputation against the seeds the traces recorded.
"""
from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..kgir.entity_matching import _dice, _overlap, content_tokens, match_entities, name_features, normalize_name
from ..kgir.seeds import ground_entities, match_question

LABELS = ("same", "different")
PAIR_COLUMNS = ("qid", "dataset", "question", "question_entity", "graph_entity", "label", "stratum", "rivals")
RIVAL_SEP = " || "


@dataclass
class MatchRound:
    """One subgraph round of a KGIR-RAG trace, as eq. 5 sees it."""

    dataset: str
    qid: str
    question: str            # the round's query (the question, or a rewrite of it)
    llm_entities: list       # parsed NER output, before grounding
    G_q: list                # triples of the round's retrieved passages (eq. 3)
    recorded_seeds: tuple = ()  # the seeds the run recorded, and its |G_q| (to check the recomputation)
    recorded_n_G_q: Optional[int] = None

    @property
    def E_q(self) -> list:
        """The NER entities that occur in the question (:func:`ground_entities`), before any fallback."""
        return ground_entities(self.llm_entities, self.question)

    @property
    def graph_entities(self) -> list:
        return sorted({e for t in self.G_q for e in (t.head, t.tail)})


def trace_rounds_of_run(run_dir: Path, method_prefix: str = "kgir") -> list:
    """Every subgraph round of the trace files ``run_dir/traces/<method>/<dataset>.trace.jsonl`` whose method
    folder starts with ``method_prefix`` (the full method and its ablation variants), in file order.
    ``G_q`` is re-read from ``run_dir/kg/<dataset>/`` (the trace keeps only its size)."""
    from ..kg.store import load_kg
    from ..traces import read_traces, trace_dataset

    run_dir = Path(run_dir)
    files = sorted(p for p in (run_dir / "traces").glob("*/*.trace.jsonl") if p.parent.name.startswith(method_prefix))
    if not files:
        raise FileNotFoundError(f"{run_dir / 'traces'}: no '{method_prefix}*/<dataset>.trace.jsonl' trace file")
    kgs: dict = {}
    out = []
    for path in files:
        dataset = trace_dataset(path)
        if dataset not in kgs:
            kgs[dataset] = load_kg(run_dir / "kg" / dataset)
        for rec in read_traces(path):
            trace = rec.get("trace", rec)
            for r in trace.get("rounds", []):
                sub = r.get("subgraph")
                if sub is None:
                    continue
                pids = [str(p) for p, _ in sub.get("retrieved", r.get("retrieved", []))]
                out.append(MatchRound(dataset, str(trace.get("qid", rec.get("qid", ""))),
                                      sub.get("question", r.get("query", "")), list(sub.get("llm_entities", [])),
                                      kgs[dataset].triples_of(pids), tuple(sub.get("seeds", [])),
                                      sub.get("n_G_q")))
    return out


def reproduced(rounds: Sequence[MatchRound], method: str, threshold: float, n: int = 3) -> int:
    """How many rounds give, recomputed under the rule the run used, exactly the recorded seeds and |G_q|."""
    return sum(list(r.recorded_seeds) == match_question(r.question, r.llm_entities, r.G_q, n, threshold=threshold,
                                                        method=method).seeds
               and r.recorded_n_G_q == len(r.G_q) for r in rounds)


def loose_candidates(question_entity: str, graph_entities: Iterable[str]) -> list:
    """Graph entities that pass any of the loose rules the fixture was sampled from: Dice >= 0.3, overlap
    coefficient >= 0.5 (character trigrams), or a shared content word. Sorted by name."""
    fq = name_features(question_entity)
    words = content_tokens(question_entity)
    out = []
    for e in sorted(set(graph_entities)):
        fe = name_features(e)
        if _dice(fq.grams, fe.grams) >= 0.3 or _overlap(fq.grams, fe.grams) >= 0.5 or words & content_tokens(e):
            out.append(e)
    return out


# ---------------------------------------------------------------------------- the labelled fixture
@dataclass(frozen=True)
class LabelledPair:
    qid: str
    dataset: str
    question: str
    question_entity: str
    graph_entity: str
    label: str            # "same" | "different"
    stratum: str
    rivals: tuple         # the other loose candidates of the question entity in the same round

    @property
    def same(self) -> bool:
        return self.label == "same"


def read_pairs(path: Path) -> list:
    """The labelled pairs of a fixture TSV (header lines start with ``#``); a bad row raises ``ValueError``
    naming the file, line and field."""
    path = Path(path)
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    rows = list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not lines or tuple(rows[0].keys() if rows else ()) != PAIR_COLUMNS:
        raise ValueError(f"{path}: expected the tab-separated columns {PAIR_COLUMNS}")
    out = []
    for i, row in enumerate(rows, 2):
        if row["label"] not in LABELS:
            raise ValueError(f"{path}: data line {i}: field 'label' must be one of {LABELS}, got {row['label']!r}")
        rivals = tuple(x for x in (row["rivals"] or "").split(RIVAL_SEP) if x)
        out.append(LabelledPair(row["qid"], row["dataset"], row["question"], row["question_entity"],
                                row["graph_entity"], row["label"], row["stratum"], rivals))
    return out


def predict(pair: LabelledPair, method: str, threshold: float, n: int = 3) -> bool:
    """Whether the rule matches the pair's question entity to its graph entity, among its round's rivals
    (which matter to the best-only rules only)."""
    found = match_entities([pair.question_entity], (pair.graph_entity, *pair.rivals), n, threshold, method=method)
    return any(e == pair.graph_entity for e, _ in found[pair.question_entity])


# ---------------------------------------------------------------------------- seed-match rates on traces
def match_kind(question_entity: str, graph_entity: str) -> str:
    """``"equal"`` (same normalised name), ``"contains"`` (the graph entity's name contains the question
    entity's as whole words), ``"contained"`` (the reverse) or ``"other"``."""
    q, g = normalize_name(question_entity), normalize_name(graph_entity)
    if q == g:
        return "equal"
    if f" {q} " in f" {g} ":
        return "contains"
    return "contained" if f" {g} " in f" {q} " else "other"


def seed_rates(rounds: Sequence[MatchRound], method: str, threshold: float, n: int = 3) -> list:
    """Per dataset, what eq. 5 does over the rounds under one rule (recomputed, no LLM call):

    ``seeded by name %``: rounds whose grounded NER entities match a graph entity by name;
    ``seeded by name or triple %``: adding whole-triple matching
    (:func:`~kgir_lib.kgir.entity_matching.triple_matches`);
    ``fallback %``: rounds that fall back to graph entities written in the question; ``seeded %``: rounds
    with a seed after all of it (what the loop uses); and of the name matches of NER entities, the share
    whose graph entity has an ``equal`` name, ``contains`` the question entity, or neither
    (:func:`match_kind`), and the matches per matched entity.
    """
    rows = []
    for ds in sorted({r.dataset for r in rounds}):
        rs = [r for r in rounds if r.dataset == ds]
        by_name = by_any = fallback = seeded = matched_ents = 0
        kinds = {"equal": 0, "contains": 0, "contained": 0, "other": 0}
        for r in rs:
            m = match_question(r.question, r.llm_entities, r.G_q, n, threshold=threshold, method=method)
            E_q = r.E_q
            names = match_entities(E_q, r.graph_entities, n, threshold, method=method) if E_q else {}
            by_name += any(names.values())
            by_any += (not m.used_fallback and bool(m.seeds))
            fallback += m.used_fallback
            seeded += bool(m.seeds)
            for q, found in names.items():
                matched_ents += bool(found)
                for g, _ in found:
                    kinds[match_kind(q, g)] += 1
        total = sum(kinds.values())
        rows.append({"dataset": ds, "method": method, "threshold": threshold, "rounds": len(rs),
                     "seeded by name %": 100.0 * by_name / len(rs),
                     "seeded by name or triple %": 100.0 * by_any / len(rs),
                     "fallback %": 100.0 * fallback / len(rs), "seeded %": 100.0 * seeded / len(rs),
                     "name matches": total, "equal %": 100.0 * kinds["equal"] / total if total else float("nan"),
                     "contains %": 100.0 * kinds["contains"] / total if total else float("nan"),
                     "other %": 100.0 * (kinds["contained"] + kinds["other"]) / total if total else float("nan"),
                     "matches / matched entity": total / matched_ents if matched_ents else float("nan")})
    return rows



# ---------------------------------------------------------------------------- rule × threshold on the fixture
MIN_PRECISION = 90.0  # the choice: the highest recall among the rules with at least this precision (%)
THRESHOLDS = (0.3, 0.5, 0.7, 0.8, 0.9, 1.0)  # the thresholds every rule is measured at
RATIOS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the length ratios ρ of "overlap_len" measured


def _scores_of(preds: Sequence[bool], pairs: Sequence[LabelledPair]) -> dict:
    tp = sum(h and p.same for h, p in zip(preds, pairs))
    fp = sum(h and not p.same for h, p in zip(preds, pairs))
    fn = sum((not h) and p.same for h, p in zip(preds, pairs))
    prec = 100.0 * tp / (tp + fp) if tp + fp else float("nan")
    rec = 100.0 * tp / (tp + fn) if tp + fn else float("nan")
    return {"tp": tp, "fp": fp, "fn": fn, "precision %": prec, "recall %": rec,
            "F1 %": 2 * prec * rec / (prec + rec) if tp else 0.0}


def read_population(path: Path) -> dict:
    """``{(dataset, stratum): candidate pairs}`` from the fixture's ``# population`` header lines."""
    out = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("# population\t"):
            _, ds, stratum, n = line.split("\t")
            out[(ds, stratum)] = int(n)
    return out


def pair_weights(pairs: Sequence[LabelledPair], population: dict) -> list:
    """Inverse sampling rate of each pair (stratum population / pairs drawn from it), so that weighted counts
    estimate the rule on every candidate pair of the run rather than on the stratified sample."""
    drawn = Counter((p.dataset, p.stratum) for p in pairs)
    missing = sorted({k for k in drawn if k not in population})
    if missing:
        raise ValueError(f"no '# population' header line for the strata {missing}")
    return [population[(p.dataset, p.stratum)] / drawn[(p.dataset, p.stratum)] for p in pairs]


def _weighted(preds: Sequence[bool], pairs: Sequence[LabelledPair], weights: Sequence[float]) -> tuple:
    tp = sum(w for h, p, w in zip(preds, pairs, weights) if h and p.same)
    fp = sum(w for h, p, w in zip(preds, pairs, weights) if h and not p.same)
    fn = sum(w for h, p, w in zip(preds, pairs, weights) if not h and p.same)
    prec = 100.0 * tp / (tp + fp) if tp + fp else float("nan")
    rec = 100.0 * tp / (tp + fn) if tp + fn else float("nan")
    return prec, rec, (2 * prec * rec / (prec + rec) if tp else 0.0)


def fixture_table(pairs: Sequence[LabelledPair], methods: Sequence[str], thresholds: Sequence[float],
                  weights: Optional[Sequence[float]] = None) -> list:
    """One row per rule × threshold: counts, precision, recall and F1 (%) over all pairs, then precision
    and recall per dataset (columns ``P % <dataset>``, ``R % <dataset>``), then -- given ``weights``
    (:func:`pair_weights`) -- the weighted estimates ``wP %``, ``wR %``, ``wF1 %``."""
    datasets = sorted({p.dataset for p in pairs})
    rows = []
    for method in methods:
        for th in thresholds:
            preds = [predict(p, method, th) for p in pairs]
            row = {"method": method, "threshold": th, **_scores_of(preds, pairs)}
            for ds in datasets:
                sub = [(h, p) for h, p in zip(preds, pairs) if p.dataset == ds]
                s = _scores_of([h for h, _ in sub], [p for _, p in sub])
                row[f"P % {ds}"], row[f"R % {ds}"] = s["precision %"], s["recall %"]
            if weights is not None:
                row["wP %"], row["wR %"], row["wF1 %"] = _weighted(preds, pairs, weights)
            rows.append(row)
    return rows


def choose_rule(rows: Sequence[dict], min_precision: float = MIN_PRECISION) -> dict:
    """The row with the highest recall among those with precision >= ``min_precision`` (ties: higher
    precision, then the earlier row); without any such row, the row with the highest F1."""
    ok = [r for r in rows if r["precision %"] == r["precision %"] and r["precision %"] >= min_precision]
    if ok:
        return max(ok, key=lambda r: (r["recall %"], r["precision %"], -rows.index(r)))
    return max(rows, key=lambda r: (r["F1 %"], -rows.index(r)))


def length_ratio(a: str, b: str) -> float:
    """Length of the shorter normalised name over the longer one's (0 if either is empty)."""
    la, lb = len(normalize_name(a)), len(normalize_name(b))
    return min(la, lb) / max(la, lb) if la and lb else 0.0


def ratio_sweep(pairs: Sequence[LabelledPair], thresholds: Sequence[float], ratios: Sequence[float]) -> list:
    """Precision / recall / F1 of "overlap coefficient >= θ and :func:`length_ratio` >= ρ" for every θ × ρ
    (the ``"overlap_len"`` rule with ρ set free), over all pairs."""
    rows = []
    for th in thresholds:
        for rho in ratios:
            preds = [_overlap(name_features(p.question_entity).grams, name_features(p.graph_entity).grams) >= th
                     and length_ratio(p.question_entity, p.graph_entity) >= rho for p in pairs]
            rows.append({"threshold": th, "ratio": rho, **_scores_of(preds, pairs)})
    return rows
