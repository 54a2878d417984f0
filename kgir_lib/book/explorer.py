"""Every question's chain, as the book's question explorer shows it (``bash scripts/book.sh``).

For each question a run's KGIR-RAG answered, one record of what notebook 07 shows for its one case (§3.5, Fig. 6),
read from the run's trace files with no model call:

- the seeds, and the path in ``G_Ans`` from a seed to the gold bridge (:func:`~kgir_lib.notebook.case.chain_draw.
  bridge_path`);
- each round's rewrite with its form (:func:`~kgir_lib.eval.mechanism.rewrite_form.rewrite_form`,
  :func:`~kgir_lib.eval.mechanism.rewrite_form.rewrite_change`) and the five steps of the chain
  (:func:`~kgir_lib.notebook.case.chain_draw.chain_steps`);
- ``D_1`` and each ``D'_t``, gold and next-hop passages marked;
- what the reflection and the reader read (:meth:`~kgir_lib.notebook.case.records.CaseStudy.reading_frame`), with the
  gold passages retrieved but withheld from the final reader prompt marked
  (:func:`~kgir_lib.eval.mechanism.missing_gold.where_missing`);
- the answer, and every method's answer from the run's traces
  (:func:`~kgir_lib.notebook.case.baselines.baseline_answers`, nothing run);
- the step where the chain broke, as the bridge funnel counts it (:func:`~kgir_lib.eval.mechanism.funnel.funnel_steps`,
  the chain holding up to a step in at least one round, the funnel's round ``any``).

The local run's traces are not committed (they are rebuilt from its response log by ``--regenerate``), so
:func:`write_explorer` stores these records, passage texts cut to :data:`SNIPPET_CHARS`, in one small committed file,
``results/<profile>/explorer.json.gz`` (:data:`EXPLORER_FILE`); the book reads that file alone.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping, Optional, Sequence, cast

from ..config import Config
from ..data import Dataset, load_dataset
from ..eval.mechanism import round_facts as rf
from ..eval.mechanism.funnel import STEP_KEYS, STEPS, funnel_steps
from ..eval.mechanism.missing_gold import where_missing
from ..eval.mechanism.rewrite_form import rewrite_change, rewrite_form
from ..methods.base import MethodOutput, Workspace
from ..notebook.case.baselines import all_traced_answers, baseline_answers
from ..notebook.case.build import case_from_output, find_question
from ..notebook.case.chain_draw import bridge_path, chain_steps
from ..notebook.case.records import CaseStudy, load_kgir_traces

__all__ = ["EXPLORER_FILE", "SNIPPET_CHARS", "NO_BRIDGE", "HELD", "ExplorerError", "broke_at", "explorer_path",
           "question_record", "explorer_records", "write_explorer", "read_explorer"]

EXPLORER_FILE = "explorer.json.gz"
SNIPPET_CHARS = 240      # characters of a passage's text the explorer keeps
NO_BRIDGE = "no gold bridge"
HELD = "chain held"      # the whole chain, answer included, held in a round
FORMAT = 1               # the file's layout; read_explorer refuses another


class ExplorerError(ValueError):
    """An explorer file is missing or unusable; the message names the file and what is wrong."""


def explorer_path(cfg: Config) -> Path:
    """Where a run's explorer file is: ``<run dir>/explorer.json.gz``."""
    return cfg.run_dir / EXPLORER_FILE


def broke_at(record: Mapping, bridges: Sequence) -> str:
    """The step of the bridge funnel where a question's chain broke: the first step (:data:`STEPS`, without
    "reached round") that the chain up to it passes in no round; :data:`HELD` when it passes all five in a round,
    :data:`NO_BRIDGE` for a question without a gold bridge (the funnel leaves those out)."""
    if not bridges:
        return NO_BRIDGE
    rounds = [funnel_steps(record, bridges, t) for t in range(1, len(rf.rounds(record)) + 1)]
    for key, step in zip(STEP_KEYS[1:], STEPS[1:]):
        if not any(s[f"chain_{key}"] for s in rounds):
            return step
    return HELD


def _snippet(text: str) -> str:
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"


def question_record(case: CaseStudy, record: Mapping, bridges: Sequence, traced: Optional[dict] = None) -> dict:
    """Everything the explorer page of one question shows (module docstring), from its case and trace record;
    ``traced``: the question's answers in the run's traces (:func:`~kgir_lib.notebook.case.baselines.
    all_traced_answers`), else read from them."""
    gold = set(case.gold_pids)
    next_hop = {p for b in bridges for p in b.next_pids}
    corpus = case.ws.dataset.corpus
    used: dict = {}

    def ranked(pairs: Sequence) -> list:
        out = []
        for rank, (pid, score) in enumerate(pairs, 1):
            used[pid] = True
            out.append({"rank": rank, "pid": pid, "score": None if score is None else round(float(score), 4),
                        "gold": pid in gold, "next_hop": pid in next_hop})
        return out

    withheld = where_missing(record)
    rounds = []
    raw_rounds = rf.rounds(record)
    for r, raw in zip(case.rounds, raw_rounds):
        t = r.iteration
        bridge, in_gans, path = bridge_path(r, bridges)
        reading = case.reading_frame(t, chars=0)
        reflection = list(dict.fromkeys(list(r.evidence_pids) + list(r.reflection_passages or [])))
        reader = list(r.final.context_pids) if r.final is not None else []
        for pid in reflection + reader:
            used[pid] = True
        verdict = r.reflection
        rounds.append({
            "round": t, "query": r.query, "E_q": list(r.E_q), "seeds": list(r.seeds),
            "bridge": bridge if in_gans else "", "path": [[x.head, x.relation, x.tail] for x in path],
            "G_Ans": len(r.G_Ans),
            "rewrite": r.rewrite or "", "form": rewrite_form(raw, bridges), "change": rewrite_change(raw, bridges),
            "steps": [{"number": s.number, "name": s.name, "holds": s.holds, "text": s.text}
                      for s in chain_steps(case, t, bridges)],
            "D_t": ranked(r.retrieved), "D_rewrite": ranked(r.rewrite_retrieved),
            "reflection_read": reflection, "reader_read": reader, "reader_called": r.final is not None,
            "reading_note": case.reading_note(t), "read_rows": len(reading),
            "verdict": r.verdict(),
            "reflection_says": (verdict.answer or verdict.missing or "") if verdict else "",
        })
    trace = case.output.trace or {}
    answers = baseline_answers(case, run_missing=False, traced=traced).reset_index()
    methods = [{"method": str(row["method"]), "answer": str(row["answer"] or ""), "EM": float(row["EM"]),
                "F1": round(float(row["F1"]), 1)} for _, row in answers.iterrows()]
    for pid in list(gold) + list(withheld):
        used[pid] = True
    return {
        "dataset": case.dataset, "qid": case.qid, "question": case.question, "gold_answers": list(case.gold_answers),
        "gold_pids": list(case.gold_pids), "bridges": [b.name for b in bridges],
        "next_hop_pids": sorted(next_hop),
        "answer": case.answer, "EM": 100 * case.em, "F1": round(100 * case.f1, 1),
        "answered_by": case.answered_by or "", "answer_source": str(trace.get("answer_source") or ""),
        "reflection_answer": str(trace.get("reflection_answer") or ""),
        "broke_at": broke_at(record, bridges), "withheld": dict(withheld), "rounds": rounds, "methods": methods,
        "passages": {pid: {"title": corpus[pid].title, "text": _snippet(corpus[pid].text)}
                     for pid in used if pid in corpus},
    }


def explorer_records(cfg: Config, data_dir: Optional[Path] = None) -> list:
    """:func:`question_record` of every question the run's KGIR-RAG traces answered, dataset by dataset in the
    profile's order, questions in trace order. Raises :class:`ExplorerError` when the run has no KGIR-RAG trace."""
    records = load_kgir_traces(cfg)
    if not records:
        raise ExplorerError(f"no KGIR-RAG trace under {cfg.run_dir / 'traces'}: run the notebooks first (or "
                            f"rebuild the traces from the response log: KGIR_PROFILE={cfg.profile} "
                            f"bash scripts/main.sh --regenerate)")
    datasets: dict[str, Dataset] = {}
    traced: dict[str, dict] = {}
    out = []
    order = {d: i for i, d in enumerate(cfg.datasets)}
    for record in sorted(records, key=lambda r: order.get(r["dataset"], len(order))):
        name = record["dataset"]
        if name not in datasets:
            datasets[name] = load_dataset(name, data_dir)
            traced[name] = all_traced_answers(cfg, name)
        ds = datasets[name]
        question = find_question(ds, rf.qid_of(record))
        # a read-only stand-in for the run's workspace: the case reads the corpus and the configuration only (the
        # trace carries G_Ans; G_q, which would need the graph, is not shown)
        view = cast(Workspace, SimpleNamespace(cfg=cfg, dataset=ds, kg=None))
        case = case_from_output(view, question, MethodOutput.from_json(dict(record)))
        out.append(question_record(case, record, list(question.gold_bridges), traced[name].get(question.qid, {})))
    return out


def write_explorer(cfg: Config, path: Optional[Path] = None, data_dir: Optional[Path] = None) -> Path:
    """Write the run's explorer file (:func:`explorer_records`, with the profile and model) as gzip'd JSON with a
    fixed gzip time stamp, so the same traces give the same bytes."""
    path = Path(path) if path is not None else explorer_path(cfg)
    payload = {"format": FORMAT, "profile": cfg.profile, "model": _model_name(cfg),
               "questions": explorer_records(cfg, data_dir)}
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(text.encode("utf-8"))
    return path


def _model_name(cfg: Config) -> str:
    from ..report import model_note

    return model_note(cfg, short=True)


def read_explorer(path: Path) -> dict:
    """An explorer file back (:func:`write_explorer`); :class:`ExplorerError` names the file and the fault."""
    path = Path(path)
    if not path.exists():
        raise ExplorerError(f"{path}: no explorer file (python -m kgir_lib.book explorer --profile PROFILE writes it "
                            f"from the run's traces)")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data: Any = json.load(f)
    except (OSError, ValueError) as e:
        raise ExplorerError(f"{path}: not a gzip'd JSON explorer file ({e})") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("questions"), list):
        raise ExplorerError(f"{path}: field 'format' must be {FORMAT} and field 'questions' a list")
    return data
