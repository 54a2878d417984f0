"""The FlashRAG cross-check report: ``results/benchmarks/peers_flashrag.md`` (+ ``.csv``, one row a method and
question, and FlashRAG's records as ``peers_flashrag_outputs.jsonl.gz``).

Called by ``flashrag_compare.py report`` (FlashRAG's records from the work folder, its run's cost from the caching
proxy's file) or ``flashrag_compare.py rescore`` (FlashRAG's committed records and run cost); the suite's side is
always the work folder's ``suite_*.jsonl`` of the ``suite`` step (this code, cache only). Measures and tests:
:mod:`kgir_lib.eval.peer_iterative`.

FlashRAG's IRCoT with its earlier thoughts kept through the OpenAI client (``flashrag_pipelines.py --ircot-thoughts
kept``, a shim) is a second FlashRAG IRCoT row: ``flashrag_compare.py report-kept`` writes its records
(:data:`KEPT_OUTPUTS`), its LLM answers (:data:`KEPT_LLM_CACHE`) and its rows (:data:`KEPT_CSV`, method
``ircot_kept``), and the report shows that row only when these files exist.
"""
from __future__ import annotations

import gzip
import json
import platform
import sys
from pathlib import Path
from typing import Optional

import pandas as pd

from kgir_lib.config import load_config
from kgir_lib.data import load_dataset, sample_questions
from kgir_lib.eval.metrics import best_em, best_f1
from kgir_lib.eval.peer_iterative import (FAMILY, IRCOT_KEPT, METHOD_NAMES, agreement, compare_question,
                                          crosscheck_sentence, flashrag_side, merge_rule_table, p_clause, p_value,
                                          paired_tests, reading_sentence, reading_split)
from kgir_lib.methods.reader import parse_answer
from kgir_lib.report import to_markdown

sys.path.insert(0, str(Path(__file__).resolve().parent))  # records, beside this script
from records import read_jsonl, write_gzip, write_jsonl  # noqa: E402

METHODS = ("ircot", "iter_retgen")
OUTPUTS = "peers_flashrag_outputs.jsonl.gz"
READING = "peers_flashrag_reading.jsonl.gz"         # ITER-RETGEN's last round read again over whole passages
SEARCHES = "peers_flashrag_suite_searches.jsonl.gz"   # the suite side's dense searches (a fast re-score replays them)
LLM_CACHE = "peers_flashrag_llm_cache.jsonl.gz"      # FlashRAG's LLM answers by request hash: a rerun or a resumed
                                                     # run anywhere repeats no finished call (crosscheck.sh seeds it)
# the second FlashRAG IRCoT row, earlier thoughts kept (a shim): its records, its own LLM answers (the calls the
# as-run answers did not hold) and its per-question rows; the report shows the row only when they exist
KEPT_OUTPUTS = "peers_flashrag_ircot_kept.jsonl.gz"
KEPT_LLM_CACHE = "peers_flashrag_ircot_kept_llm_cache.jsonl.gz"
KEPT_CSV = "peers_flashrag_ircot_kept.csv"


def write_llm_cache(cache_file: Path, out: Path) -> None:
    """The caching proxy's records without their requests (the key is the request's hash), compressed."""
    keep = ("key", "response", "t_start", "seconds", "loadavg_1min")
    write_gzip(out, "".join(json.dumps({k: r[k] for k in keep if k in r}, ensure_ascii=False) + "\n"
                            for r in read_jsonl(cache_file)))


def llm_cost(cache_file: Path) -> dict:
    """FlashRAG's LLM work from the caching proxy's file: calls, LLM seconds, tokens, mean load average."""
    recs = read_jsonl(cache_file) if cache_file.exists() else []
    usage = [r["response"].get("usage") or {} for r in recs]
    loads = [r["loadavg_1min"] for r in recs if r.get("loadavg_1min") is not None]
    return {"calls": len(recs), "llm_seconds": round(sum(float(r["seconds"]) for r in recs), 1),
            "prompt_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usage),
            "completion_tokens": sum(int(u.get("completion_tokens") or 0) for u in usage),
            "finish_length": sum(r["response"]["choices"][0].get("finish_reason") == "length" for r in recs),
            "mean_loadavg": round(sum(loads) / len(loads), 1) if loads else None}


def wall_legs(work: Path) -> list:
    """Wall seconds of each leg of FlashRAG's run (a killed run resumed is several legs): from the leg's start to its
    last finished chunk (``flashrag_legs.jsonl``, written by ``flashrag_pipelines.py``), plus the legs an earlier
    version of the script timed whole (``flashrag_wall_seconds.txt``, one number a leg)."""
    spans: dict = {}
    path = work / "flashrag_legs.jsonl"
    for r in read_jsonl(path) if path.exists() else []:
        spans[r["leg_start"]] = max(spans.get(r["leg_start"], 0.0), float(r["t"]) - float(r["leg_start"]))
    old = work / "flashrag_wall_seconds.txt"
    return [float(x) for x in old.read_text().split()] + list(spans.values()) if old.exists() else list(spans.values())


def write_outputs(work: Path, out: Path, meta: dict, methods: tuple = METHODS) -> None:
    """FlashRAG's per-question records of ``methods`` (both, or IRCoT alone for the shim's run), compressed, with
    the run's meta as the first line."""
    lines = [json.dumps({"meta": meta}, ensure_ascii=False)]
    for m in methods:
        lines += [json.dumps({"method": m, **r}, ensure_ascii=False) for r in read_jsonl(work / f"flashrag_{m}.jsonl")]
    write_gzip(out, "\n".join(lines) + "\n")


def read_outputs(path: Path) -> tuple:
    """``(meta, {method: [record, ...]})`` of a committed outputs file; a clear error if it is missing."""
    if not path.exists():
        raise SystemExit(f"{path}: no committed FlashRAG records to re-score against (run the whole cross-check: "
                         f"bash benchmarks/peers/flashrag_crosscheck.sh)")
    meta, recs = None, {m: [] for m in METHODS}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            if "meta" in r:
                meta = r["meta"]
            elif r.get("method") in recs:
                recs[r.pop("method")].append(r)
            else:
                raise SystemExit(f"{path}:{n}: a record with no known 'method' ({sorted(recs)})")
    if meta is None:
        raise SystemExit(f"{path}: no meta line (the run's settings and cost)")
    return meta, recs


def read_reading(path: Path) -> tuple:
    """``(meta, {qid: answer})`` of the committed re-read of ITER-RETGEN's last round (``READING``); ``(None, {})``
    when there is none."""
    if not path.exists():
        return None, {}
    recs = read_jsonl(path)
    if not recs or "meta" not in recs[0]:
        raise SystemExit(f"{path}:1: no meta line (the re-read's settings and cost)")
    return recs[0]["meta"], {r["qid"]: r["answer"] for r in recs[1:]}


def question_rows(questions: list, suite: dict, flashrag: dict, reread: Optional[dict] = None) -> pd.DataFrame:
    """One row a method and question both sides answered, in the profile's question order; ``reread`` (qid ->
    answer): ITER-RETGEN's last round read again over whole passages, scored beside."""
    rows = []
    for m in METHODS:
        s_by, f_by = {r["qid"]: r for r in suite[m]}, {r["qid"]: r for r in flashrag[m]}
        for q in questions:
            if q.qid in s_by and q.qid in f_by:
                s, f = s_by[q.qid], f_by[q.qid]
                row = compare_question(s, flashrag_side(m, f), q.answers, q.gold_pids)
                # diagnostics, no LLM call: each side's answer read another way
                if m == "ircot":
                    row["EM_suite_cot_answer"] = 100.0 * best_em(s.get("cot_answer") or "", q.answers)
                    row["F1_suite_cot_answer"] = 100.0 * best_f1(s.get("cot_answer") or "", q.answers)
                row["EM_flashrag_suite_parser"] = 100.0 * best_em(parse_answer(f["pred"] or ""), q.answers)
                if m == "iter_retgen" and reread and q.qid in reread:
                    row["EM_suite_reread"] = 100.0 * best_em(reread[q.qid], q.answers)
                    row["F1_suite_reread"] = 100.0 * best_f1(reread[q.qid], q.answers)
                rows.append({"method": m, "qid": q.qid, **row})
    return pd.DataFrame(rows)


def kept_rows(questions: list, suite_ircot: list, kept: list) -> pd.DataFrame:
    """The shim's per-question rows: FlashRAG's IRCoT with its earlier thoughts kept (``kept``: its records) against
    the suite's IRCoT, made as :func:`question_rows` makes IRCoT's, under the method name ``ircot_kept``."""
    rows = question_rows(questions, {"ircot": suite_ircot, "iter_retgen": []}, {"ircot": kept, "iter_retgen": []})
    return rows.assign(method=IRCOT_KEPT)


def write_kept_csv(questions: list, suite_ircot: list, folder: Path) -> None:
    """:data:`KEPT_CSV` from the committed :data:`KEPT_OUTPUTS` and this code's suite side, when that file exists
    (the shim's row is not run by default: without its records nothing is written)."""
    if not (folder / KEPT_OUTPUTS).exists():
        return
    _, recs = read_outputs(folder / KEPT_OUTPUTS)
    rows = kept_rows(questions, suite_ircot, recs["ircot"])
    if rows.empty:
        raise SystemExit(f"{folder / KEPT_OUTPUTS}: no question has both a suite and a FlashRAG record")
    rows.to_csv(folder / KEPT_CSV, index=False)


def write_kept(work: Path, kept_dir: Path, profile: str, dataset: str, out: Path, command: str,
               llm_log: Optional[Path] = None) -> None:
    """The ``report-kept`` step: the shim's run (``kept_dir``, written by ``flashrag_pipelines.py --ircot-thoughts
    kept``) committed beside the report (:data:`KEPT_OUTPUTS`, :data:`KEPT_LLM_CACHE`, :data:`KEPT_CSV`) against the
    suite side of ``work`` (the ``suite`` step), then the report rendered again from the committed files. The
    as-run files are not touched."""
    meta_path = kept_dir / "flashrag_meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("ircot_thoughts") != "kept":
        raise SystemExit(f"{meta_path}: field 'ircot_thoughts' is {meta.get('ircot_thoughts')!r}, not 'kept' (this "
                         f"folder is not a run of flashrag_pipelines.py --ircot-thoughts kept)")
    cfg = load_config(profile, results_dir=str(work / "results"))
    questions = sample_questions(load_dataset(dataset, cfg.data_path).questions, cfg.n_questions, cfg.seed)
    recs = read_jsonl(kept_dir / "flashrag_ircot.jsonl")
    legs = wall_legs(kept_dir)
    meta.update(command=command, wall_seconds=round(sum(legs), 1), legs=len(legs),
                thoughts=sum(int(r["iterations"]) for r in recs))
    meta.update(llm_cost(llm_log or kept_dir / "llm_cache.jsonl"))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_outputs(kept_dir, out.parent / KEPT_OUTPUTS, meta, methods=("ircot",))
    write_llm_cache(llm_log or kept_dir / "llm_cache.jsonl", out.parent / KEPT_LLM_CACHE)
    write_kept_csv(questions, read_jsonl(work / "suite_ircot.jsonl"), out.parent)
    out.write_text(rebuild(out.parent, out.name), encoding="utf-8")
    print(f"report: FlashRAG's IRCoT with its earlier thoughts kept, {len(recs)} questions -> {out}")


def diagnostics(rows: pd.DataFrame) -> pd.DataFrame:
    """The answers read another way (no LLM call): the suite's IRCoT chain-of-thought answer instead of its shared
    reader's, FlashRAG's answer through the suite's reader parser (first line after the last 'Answer:')."""
    out = []
    for m, g in rows.groupby("method", sort=False):
        name = METHOD_NAMES[m]
        out.append({"method": name, "answer read as": "as each side reads it (the table above)",
                    "EM suite": round(g["EM_suite"].mean(), 1), "EM FlashRAG": round(g["EM_flashrag"].mean(), 1)})
        if "EM_suite_cot_answer" in g and g["EM_suite_cot_answer"].notna().any():
            out.append({"method": name, "answer read as": "suite: its chain of thought's 'So the answer is' "
                        "(no reader call)", "EM suite": round(g["EM_suite_cot_answer"].mean(), 1),
                        "EM FlashRAG": None})
        out.append({"method": name, "answer read as": "FlashRAG: its reply through the suite's reader parser",
                    "EM suite": None, "EM FlashRAG": round(g["EM_flashrag_suite_parser"].mean(), 1)})
    return pd.DataFrame(out)


def reading_section(rows: pd.DataFrame, meta: dict) -> list:
    """The report's lines on ITER-RETGEN's reading: the F1 gap split into context and the rest
    (:func:`kgir_lib.eval.peer_iterative.reading_split`), the split stated as a point estimate with its interval and
    what the remainder holds besides the prompt."""
    table, test = reading_split(rows)
    return ["## ITER-RETGEN's F1 gap: the context, or the reading itself (LLM calls)\n",
            f"The suite's last round (the shared reader) read again by the same model over the same final retrieval, "
            f"now shown as FlashRAG shows it: all {meta['context_passages']} retrieved passages, whole. Only the "
            f"context changes between the suite as run and the re-read. {meta['calls_made']} calls made of "
            f"{meta['calls']} ({_fmt_seconds(meta['llm_seconds'])} of LLM time, {meta['prompt_tokens']:,} prompt "
            f"tokens, {meta['truncated']} replies cut by the token budget); the answers are committed as "
            f"`{READING}`, so the report and a re-score read them with no call (`flashrag_compare.py reading`).\n",
            to_markdown(table), "",
            f"The one test declared for this check (a family of one, so no Holm): the re-read's F1 against the suite's "
            f"as run on the same {test['n']} questions, exact sign-flip, {test['questions differ']} questions differ: "
            f"{test['F1 re-read']} against {test['F1 as run']}, a difference of {test['re-read − as run']} "
            f"(95 % paired bootstrap interval {test['95% CI']}), {p_clause(test['p'])}.\n",
            f"In words: {reading_sentence(rows)} (Items 1, 2 and 4 below; the layout: FlashRAG's `Doc i(Title: t)` "
            f"passages under its instruction, against the shared reader's prompt.)\n"]


def _fmt_seconds(s: float) -> str:
    return f"{s:,.0f} s ({s / 3600:.2f} h)"


SUITE = "peers_flashrag_suite.jsonl.gz"  # the report's header, and per question its gold and the suite's IRCoT
                                          # retrievals: with the CSV and the two files above, all the report reads


def write_report(work: Path, profile: str, dataset: str, out: Path, command: str, llm_log: Optional[Path] = None,
                 wall: Optional[float] = None, rescore: bool = False) -> None:
    """The per-question CSV, FlashRAG's records (a full run) and :data:`SUITE`, then the report rendered from the
    committed files alone (:func:`rebuild`), so a re-render of the committed files gives the same bytes."""
    cfg = load_config(profile, results_dir=str(work / "results"))
    questions = sample_questions(load_dataset(dataset, cfg.data_path).questions, cfg.n_questions, cfg.seed)
    suite = {m: read_jsonl(work / f"suite_{m}.jsonl") for m in METHODS}
    suite_meta = json.loads((work / "suite.meta.json").read_text(encoding="utf-8"))
    outputs = out.parent / OUTPUTS
    if rescore:
        meta, flashrag = read_outputs(outputs)
    else:
        flashrag = {m: read_jsonl(work / f"flashrag_{m}.jsonl") for m in METHODS}
        meta = json.loads((work / "flashrag_meta.json").read_text(encoding="utf-8"))
        legs = wall_legs(work)
        meta["wall_seconds"] = wall if wall is not None else round(sum(legs), 1)
        meta["legs"] = len(legs)
        meta.update(llm_cost(llm_log or work / "llm_cache.jsonl"))
    _, reread = read_reading(out.parent / READING)
    rows = question_rows(questions, suite, flashrag, reread)
    if rows.empty:
        raise SystemExit(f"no question has both a suite and a FlashRAG record in {work}")
    out.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out.with_suffix(".csv"), index=False)
    if not rescore:
        write_outputs(work, outputs, meta)
        write_llm_cache(llm_log or work / "llm_cache.jsonl", out.parent / LLM_CACHE)
    write_kept_csv(questions, suite["ircot"], out.parent)   # the shim's row, when its records are committed
    head = {"command": command, "machine": platform.machine(), "python": platform.python_version(),
            "dataset": dataset, "profile": profile, "questions": len(questions), "rescore": rescore,
            "suite": suite_meta}
    searches = {r["qid"]: r["searches"] for r in suite["ircot"]}
    write_jsonl(out.parent / SUITE, [{"head": head}] + [{"qid": q.qid, "gold": list(q.gold_pids),
                                                         "ircot_searches": searches.get(q.qid)} for q in questions])
    out.write_text(rebuild(out.parent, out.name), encoding="utf-8")
    print(f"report{' (re-scored)' if rescore else ''}: {out}")


def rebuild(folder: Path, name: str = "peers_flashrag.md") -> str:
    """The report's text from its committed files in ``folder`` alone (no model, no work folder, no data): the
    per-question CSV, FlashRAG's records (:data:`OUTPUTS`), the re-read's settings (:data:`READING`) and the
    header with the suite's IRCoT retrievals (:data:`SUITE`)."""
    csv = (folder / name).with_suffix(".csv")
    for path in (csv, folder / SUITE):
        if not path.exists():
            raise SystemExit(f"{path}: missing (run bash benchmarks/peers/flashrag_crosscheck.sh, or --rescore)")
    rows = pd.read_csv(csv, dtype={"qid": str})
    meta, flashrag = read_outputs(folder / OUTPUTS)
    reading_meta, _ = read_reading(folder / READING)
    recs = read_jsonl(folder / SUITE)
    if not recs or "head" not in recs[0]:
        raise SystemExit(f"{folder / SUITE}:1: no head line (the report's command and the suite's settings)")
    head = recs[0]["head"]
    gold = {r["qid"]: r["gold"] for r in recs[1:]}
    suite_ircot = [(r["qid"], r["ircot_searches"]) for r in recs[1:] if r["ircot_searches"] is not None]
    kept = None
    if (folder / KEPT_CSV).exists():   # the second FlashRAG IRCoT row: earlier thoughts kept (a shim)
        if not (folder / KEPT_OUTPUTS).exists():
            raise SystemExit(f"{folder / KEPT_CSV} exists but {folder / KEPT_OUTPUTS} (its records) is missing")
        kept_meta, kept_recs = read_outputs(folder / KEPT_OUTPUTS)
        kept = {"rows": pd.read_csv(folder / KEPT_CSV, dtype={"qid": str}), "meta": kept_meta,
                "records": kept_recs["ircot"]}
    return render(rows, meta, flashrag, reading_meta, head, gold, suite_ircot, csv.name, kept)


def with_kept(rows: pd.DataFrame, kept: Optional[pd.DataFrame]) -> pd.DataFrame:
    """The report's rows with the shim's IRCoT rows (``kept``) placed right after IRCoT's; ``rows`` when none."""
    if kept is None or kept.empty:
        return rows
    ircot = rows["method"] == "ircot"
    return pd.concat([rows[ircot], kept, rows[~ircot]], ignore_index=True)


def kept_run_line(meta: dict, n: int, n_questions: int) -> str:
    """The shim's run in the section *FlashRAG's run*: its thoughts, the LLM calls it made, their cost."""
    part = "" if n >= n_questions else f" (a partial run: its rows are over these {n} questions only)"
    return (f"- The shim's IRCoT (earlier thoughts kept; `{meta['command']}`), on {n} of the {n_questions} "
            f"questions{part}: "
            f"{meta['calls']:,} LLM calls made for its {meta['thoughts']:,} thoughts (the others were answered from "
            f"a cache seeded with the run above's answers: a first thought's prompt is the same in both), "
            f"{_fmt_seconds(meta['llm_seconds'])} of LLM time, {meta['prompt_tokens']:,} prompt and "
            f"{meta['completion_tokens']:,} completion tokens, {meta['finish_length']} replies cut by the token "
            f"budget; wall clock {_fmt_seconds(meta['wall_seconds'])} in {meta['legs']} leg(s) (mean 1-minute load "
            f"average at a call's end: {meta['mean_loadavg']}).\n")


def kept_note(ircot: list, kept: Optional[dict], n_questions: int, max_iter: int) -> str:
    """The end of the report's IRCoT caveat: the second FlashRAG IRCoT row (earlier thoughts kept, a shim) where it
    is, or, not run, what running it costs. ``ircot``: the as-run records."""
    if kept:
        n = len(kept["rows"])
        return (f"The rows *{METHOD_NAMES[IRCOT_KEPT]}* are FlashRAG's IRCoT run again with a shim that puts the "
                f"earlier thoughts in the prompt as FlashRAG's other frameworks do (IRCoT item 2 below), on {n} of the "
                f"{n_questions} questions; everything else is as in the run above.")
    later = sum(int(r["iterations"]) > 1 for r in ircot)
    return (f"A shim keeps the earlier thoughts through the OpenAI client (IRCoT item 2 below; "
            f"`IRCOT_THOUGHTS=kept bash benchmarks/peers/flashrag_crosscheck.sh` runs it as a second FlashRAG IRCoT "
            f"row), and it has not been run: its first thoughts are the run above's (the same prompts, answered from "
            f"its cache), and the {later} questions whose first thought did not end the loop take {later} to "
            f"{later * (max_iter - 1)} new LLM calls.")


def render(rows: pd.DataFrame, meta: dict, flashrag: dict, reading_meta: Optional[dict], head: dict, gold: dict,
           suite_ircot: list, csv_name: str, kept: Optional[dict] = None) -> str:
    """The report's text (:func:`rebuild` reads its inputs from the committed files); ``kept``: the shim's rows,
    meta and records, shown as a second FlashRAG IRCoT row when given."""
    suite_meta, dataset, profile, n_questions = head["suite"], head["dataset"], head["profile"], head["questions"]
    n = {m: int((rows["method"] == m).sum()) for m in METHODS}
    shown = with_kept(rows, kept["rows"] if kept else None)   # the shim's IRCoT rows, when run, after IRCoT's
    tests, agree = paired_tests(shown), agreement(shown)
    ircot = rows[rows["method"] == "ircot"]
    partial = "" if min(n.values()) >= n_questions else (
        f" **Partial run**: FlashRAG answered {n['ircot']} (IRCoT) and {n['iter_retgen']} (ITER-RETGEN) of the "
        f"{n_questions} questions before it was stopped; every measure below is over those questions only. "
        f"The same command resumes it (every finished LLM call is in the proxy's cache).")
    parts = ["# IRCoT and ITER-RETGEN: the suite's reimplementations against FlashRAG's pipelines\n",
             f"Command: `{head['command']}` (machine: {head['machine']}, Python {head['python']}).\n",
             f"Dataset `{dataset}`, the `{profile}` profile's {n_questions} questions, model "
             f"{meta['model']} (both sides), retriever: the suite's dense index (all-MiniLM-L6-v2, whole corpus, "
             f"top-{meta['topk']}). FlashRAG `flashrag-dev` {meta['flashrag']}: `IRCOTPipeline` (max_iter "
             f"{meta['ircot_max_iter']}, {meta['max_tokens_ircot']} tokens a thought) and `IterativePipeline` "
             f"(iter_num {meta['iter_num']}, {meta['max_tokens_iter_retgen']} tokens a generation), its own prompts, "
             f"loops and answer parsing. Suite: the code at {suite_meta['code']}, run cache only from the committed "
             f"response log ({suite_meta['llm_calls_made']} LLM calls made; dense search: "
             f"{suite_meta.get('dense_search', 'the suite encoder and index')}); IRCoT {suite_meta['ircot_max_steps']} "
             f"steps, ITER-RETGEN {suite_meta['iter_retgen_rounds']} rounds, the reader shown "
             f"{suite_meta['context_passages']} passages of at most {suite_meta['passage_chars']} characters. "
             f"Per-question rows: `{csv_name}`; FlashRAG's records: `{OUTPUTS}`; the header and the suite's IRCoT "
             f"retrievals: `{SUITE}` (the report is rendered from these files and `{READING}`).{partial}\n",
             f"**FlashRAG's IRCoT here is a configuration FlashRAG does not support.** It runs on FlashRAG's OpenAI "
             f"client, the path that reaches the llama.cpp server both sides use, and on that path FlashRAG leaves the "
             f"earlier thoughts out of the prompt (`PromptTemplate.get_string` adds `previous_gen` only for the other "
             f"frameworks; IRCoT item 2 below): each thought is written from the question and the passages alone. "
             f"The IRCoT rows measure that configuration, not IRCoT as FlashRAG runs it on its other generators. "
             f"{kept_note(flashrag['ircot'], kept, n_questions, int(meta['ircot_max_iter']))}\n"]
    if head.get("rescore"):
        parts.append(f"**Re-scored.** FlashRAG was not run again: its answers and retrieved lists are read from the "
                     f"committed `{OUTPUTS}`; the suite's side is this code's, cache only.\n")
    parts += ["## FlashRAG's run\n",
              f"- LLM: {meta['calls']:,} calls, {_fmt_seconds(meta['llm_seconds'])} of LLM time, "
              f"{meta['prompt_tokens']:,} prompt and {meta['completion_tokens']:,} completion tokens, "
              f"{meta['finish_length']} replies cut by the token budget; wall clock {_fmt_seconds(meta['wall_seconds'])}"
              f" in {meta['legs']} leg(s) (a killed run resumes from the cache; a leg counts from its start to its "
              f"last finished chunk, so the calls a killed leg finished after that are in the LLM time but not in the "
              f"wall clock), one llama.cpp server on a 2-core CPU that other jobs may share (the legs differ in "
              f"niceness and threads; mean "
              f"1-minute load average at a call's end: {meta['mean_loadavg']}).\n"]
    if kept:
        parts[-1] = parts[-1].rstrip("\n")
        parts.append(kept_run_line(kept["meta"], len(kept["rows"]), n_questions))
    best = (f" IRCoT's Recall@5 is FlashRAG's list as it runs (what its evaluator reads: ascending once a second "
            f"retrieval is merged); FlashRAG's pool taken best first reaches "
            f"{float(ircot['R@5_flashrag_best_first'].mean()):.1f} (the agreement table), against the suite's "
            f"{float(ircot['R@5_suite'].mean()):.1f}." if len(ircot) and "R@5_flashrag_best_first" in ircot else "")
    parts += ["## Paired tests (suite − FlashRAG, same questions)\n",
              f"One declared family a method ({', '.join(FAMILY)}), Holm inside it; EM by the exact McNemar test, F1 "
              f"and Recall@5 by the exact sign-flip test (Monte Carlo with 100,000 assignments above 20 differing "
              f"questions); 95 % paired bootstrap intervals. Both sides are scored by the suite's SQuAD rules.{best}\n",
              to_markdown(tests.assign(**{c: tests[c].map(p_value) for c in ("p", "p (Holm)")})), "",
              "## Agreement, iterations and answers, per question\n",
              "FlashRAG's final list is taken in FlashRAG's order (what its own evaluator reads): for IRCoT, once a "
              "second retrieval is merged, the pool sorted by ascending score.\n",
              to_markdown(agree), "", "## The answers read another way (no LLM call)\n",
              to_markdown(diagnostics(shown)), "", f"In words: {crosscheck_sentence(rows)}\n"]
    if kept:
        parts.append(f"The second FlashRAG IRCoT row in words: {crosscheck_sentence(kept['rows'])}\n")
    sides = {"FlashRAG's IRCoT": [(r["qid"], r["searches"]) for r in flashrag["ircot"]]}
    if kept:
        sides[f"FlashRAG's {METHOD_NAMES[IRCOT_KEPT]}"] = [(r["qid"], r["searches"]) for r in kept["records"]]
    merges = merge_rule_table({**sides, "the suite's IRCoT": suite_ircot}, gold)
    parts += ["## IRCoT's list merging, on the same retrievals (no LLM call)\n",
              f"Each side's recorded IRCoT retrievals merged by each rule, on the questions where that side retrieved "
              f"more than once (elsewhere the three rules give the same list): FlashRAG's among the questions it "
              f"answered, the suite's among all {len(suite_ircot)}.\n", to_markdown(merges), ""]
    if "F1_suite_reread" in rows and rows["F1_suite_reread"].notna().any():
        if reading_meta is None:
            raise SystemExit(f"the rows hold re-read answers but {READING} is missing")
        parts += reading_section(rows, reading_meta)
    notes = Path(__file__).resolve().parent / "flashrag_differences.md"
    if notes.exists():
        parts.append(notes.read_text(encoding="utf-8"))
    return "\n".join(parts)
