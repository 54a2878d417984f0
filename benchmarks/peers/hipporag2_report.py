"""The HippoRAG 2 cross-check report: ``results/benchmarks/peers_hipporag2.md`` (+ a per-question CSV).

Called by ``hipporag2_compare.py report`` in the main environment; reads the work folder written by
``hipporag2_compare.py suite`` and ``hipporag2_upstream.py``. Measures: :mod:`kgir_lib.eval.peer_agreement`.

``hipporag2_compare.py rescore`` (:func:`write_rescored_report`) re-scores a new suite side (the ``suite``
step, cache only, of this code) against upstream's per-question scores as the committed CSV keeps them, for
when upstream cannot run (its peer environment, index and LLM cache are not at hand): upstream's answers,
recall, kept-fact counts and fallbacks are read from the CSV; the measures that need upstream's ranked
passages or facts, and both seeded runs, are carried from the committed run and labelled so.
"""
from __future__ import annotations

import gzip
import json
import platform
import sys
from pathlib import Path

import pandas as pd

from kgir_lib.config import load_config
from kgir_lib.data import load_dataset, sample_questions
from kgir_lib.report import to_markdown
from kgir_lib.eval.peer_agreement import (UPSTREAM_SCORES, Side, compare_question, fact_key, graph_agreement,
                                          pids_of_docs, rescore_question, seeded_agreement, side_by_side, summary,
                                          top_overlap)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # records, beside this script
from records import read_jsonl  # noqa: E402

# Measures of the committed run that a re-score cannot recompute (they need upstream's ranked passages, facts or
# its environment), carried into the re-scored CSV under their names, with the committed run named in
# ``upstream_record``.
CARRIED = ("injected_top5", "injected_top5_same_order", "seeded_top5", "seeded_top5_same_order",
           "seeded_missing_facts", "links_now_same", "upstream_finish", "upstream_answer_parsed",
           "injected_missing_facts")


def _by_qid(path: Path) -> dict:
    return {r["qid"]: r for r in read_jsonl(path)} if path.exists() else {}


def _edges(path: Path) -> tuple:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        dump = json.load(fh)
    edges: dict = {}
    for a, b, w in dump["phrase_edges"]:
        key = (min(a, b), max(a, b))
        edges[key] = edges.get(key, 0.0) + float(w)
    return dump, edges


def question_rows(work: Path, profile: str, dataset: str) -> pd.DataFrame:
    """One agreement row a question (suite vs upstream), in the profile's question order."""
    cfg = load_config(profile, results_dir=str(work / "results"))
    ds = load_dataset(dataset, cfg.data_path)
    questions = sample_questions(ds.questions, cfg.n_questions, cfg.seed)
    suite, upstream = _by_qid(work / "suite.jsonl"), _by_qid(work / "upstream.jsonl")
    links, seeded = _by_qid(work / "suite_links.jsonl"), _by_qid(work / "suite_seeded.jsonl")
    both = [q for q in questions if q.qid in suite and q.qid in upstream]
    if not both:
        raise SystemExit(f"no question has both a suite and an upstream record in {work} "
                         f"(run the 'suite' step and hipporag2_upstream.py first)")
    rows = []
    for q in both:
        s, u = suite[q.qid], upstream[q.qid]
        inj = u.get("injected")
        row = compare_question(
            Side(s["ranked_pids"], s["candidates"], s["kept"], s["answer"], s["fallback"]),
            Side(pids_of_docs(u["docs"], ds.corpus), u.get("candidates", []), u.get("kept", []),
                 u.get("answer"), not u.get("kept")),
            q.answers, q.gold_pids, k=5, injected=pids_of_docs(inj["docs"], ds.corpus) if inj else None)
        up_ranked = pids_of_docs(u["docs"], ds.corpus)
        if q.qid in links:
            row["links_now_same"] = ({fact_key(f) for f in links[q.qid]["candidates"]}
                                     == {fact_key(f) for f in u.get("candidates", [])})
        if q.qid in seeded:
            row.update(seeded_agreement(seeded[q.qid]["ranking"], up_ranked))
            row["seeded_missing_facts"] = len(seeded[q.qid]["missing_facts"])
        rows.append({"qid": q.qid, **row, "upstream_finish": u.get("finish_reason"),
                     "upstream_answer_parsed": "Answer:" in (u.get("reader_raw") or ""),
                     "injected_missing_facts": len(inj["missing_facts"]) if inj else None})
    return pd.DataFrame(rows)


def synonymy_rows(work: Path, dataset: str, profile: str) -> pd.DataFrame:
    """Top-5 overlap with synonymy edges on both sides (retrieval only), if both files exist."""
    s, u = _by_qid(work / "suite_seeded_synonymy.jsonl"), _by_qid(work / "upstream_synonymy.jsonl")
    if not s or not u:
        return pd.DataFrame()
    cfg = load_config(profile, results_dir=str(work / "results"))
    corpus = load_dataset(dataset, cfg.data_path).corpus
    rows = []
    for q in s:
        if q in u:
            up = pids_of_docs(u[q]["docs"], corpus)
            rows.append({"qid": q, "top5_overlap": top_overlap(s[q]["ranking"], up, 5),
                         "same_order": list(s[q]["ranking"][:5]) == up[:5]})
    return pd.DataFrame(rows)


def _suite_source(work: Path) -> str:
    meta = work / "suite.meta.json"
    if not meta.exists():
        return ""
    m = json.loads(meta.read_text(encoding="utf-8"))
    src = f"the trace file `{m['trace']}`" if m.get("trace") else "a cache-only run of this code"
    return (f"Suite side: {src}; the rows marked *this code* and *the suite's graph + PPR* use the code at "
            f"{m.get('code', 'this checkout')} (no LLM call).")


def _suite_code(work: Path) -> str:
    meta = work / "suite.meta.json"
    return json.loads(meta.read_text(encoding="utf-8")).get("code", "this checkout") if meta.exists() else "this checkout"


def _suite_filter(work: Path) -> str:
    rows = read_jsonl(work / "suite.jsonl")
    bad = sum(str(r.get("filter", "")).startswith("malformed") for r in rows)
    return (f"{bad} malformed of {len(rows)}, {sum(int(r.get('unmatched') or 0) for r in rows)} reply items "
            f"that matched no candidate")


def _md(df: pd.DataFrame) -> str:
    return to_markdown(df)


def write_report(work: Path, profile: str, dataset: str, out: Path, command: str) -> None:
    rows = question_rows(work, profile, dataset)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out.with_suffix(".csv"), index=False)
    table = summary(rows)
    parts = [f"# HippoRAG 2: the suite's reimplementation against upstream's code\n",
             f"Command: `{command}` (machine: {platform.machine()}, Python {platform.python_version()}).\n",
             f"Dataset `{dataset}`: {len(rows)} of the `{profile}` profile's questions. Per-question rows: "
             f"`{out.with_suffix('.csv').name}`. {_suite_source(work)}\n",
             "## Agreement, per question\n", _md(table), "", "## Each system, same questions\n",
             _md(side_by_side(rows)), ""]
    g_suite, e_suite = _edges(work / "suite.graph.json.gz")
    g_up, e_up = _edges(work / "upstream.graph.json.gz")
    ga = graph_agreement(e_suite, e_up)
    parts += ["## Graphs\n",
              f"Suite: {g_suite['nodes']:,} nodes, {g_suite['edges']:,} edges, {g_suite['facts']:,} facts. "
              f"Upstream: {g_up['nodes']:,} nodes, {g_up['edges']:,} igraph edges (a fact edge is held once per "
              f"direction), {g_up['info'].get('num_extracted_triples', 0):,} facts. Phrase-phrase edges keyed by "
              f"upstream's phrase folding: {ga['suite_edges']:,} (suite) and {ga['upstream_edges']:,} (upstream), "
              f"{ga['shared']:,} shared, {ga['shared_equal_weight']:,} of them with equal weight; "
              f"{ga['only_suite']:,} only in the suite, {ga['only_upstream']:,} only upstream.\n"]
    answered = rows[rows["answer_upstream"].notna()]
    parts += ["## Upstream's LLM stages\n",
              f"- QA reader: {len(answered)} of {len(rows)} questions answered; "
              f"{int((answered['upstream_finish'] == 'length').sum())} replies cut by the token budget; "
              f"{int((~answered['upstream_answer_parsed'].astype(bool)).sum())} without an `Answer:` line (upstream "
              f"then takes the whole reply as the answer).",
              f"- Recognition filter: upstream kept no fact (dense fallback) for "
              f"{int(rows['fallback_upstream'].sum())} questions, the suite for {int(rows['fallback_suite'].sum())}.",
              f"- The suite's filter replies (as its run recorded them): {_suite_filter(work)}.",
              f"- Suite kept facts not found among upstream's facts (injection): "
              f"{int(rows['injected_missing_facts'].fillna(0).sum())}.\n"]
    syn = synonymy_rows(work, dataset, profile)
    if len(syn):
        counts = ""
        meta, up_syn = work / "suite_seeded_synonymy.meta.json", work / "upstream_synonymy.graph.json.gz"
        if meta.exists() and up_syn.exists():
            with gzip.open(up_syn, "rt", encoding="utf-8") as fh:
                up_edges = json.load(fh)["edges"]
            counts = (f" Synonym edges: {json.loads(meta.read_text())['synonym_edges']:,} pairs in the suite's graph "
                      f"(pairs without a fact edge); upstream's igraph holds {up_edges - g_up['edges']:,} more "
                      f"edges than without synonymy (one per ordered pair not already a fact direction).")
        parts += ["## With synonymy edges (retrieval only)\n",
                  f"Both graphs with synonymy edges (cosine ≥ 0.8 among each phrase's top 2047), both seeded with "
                  f"upstream's kept facts: top-5 overlap {100 * syn['top5_overlap'].mean():.1f} % (mean), same top-5 "
                  f"order on {100 * syn['same_order'].mean():.0f} % of {len(syn)} questions.{counts}\n"]
    notes = Path(__file__).resolve().parent / "hipporag2_differences.md"  # the explained differences (prose)
    if notes.exists():
        parts += [notes.read_text(encoding="utf-8")]
    out.write_text("\n".join(parts), encoding="utf-8")
    print(f"report: {out}")


# ---------------------------------------------------------------------------- re-scoring against the committed run
def _git(*args: str) -> str:
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), *args], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def committed_upstream(csv: Path) -> pd.DataFrame:
    """Upstream's per-question scores and the carried measures of the committed report's CSV, by qid, with
    ``upstream_record`` saying which committed run they come from. A CSV without them is an error naming it."""
    if not csv.exists():
        raise SystemExit(f"{csv}: no committed cross-check to re-score against (run the whole cross-check: "
                         f"bash benchmarks/peers/hipporag2_crosscheck.sh)")
    df = pd.read_csv(csv, dtype={"qid": str})
    missing = [c for c in ("qid", *UPSTREAM_SCORES) if c not in df.columns]
    if missing:
        raise SystemExit(f"{csv}: lacks upstream's per-question columns {missing}; it is not a cross-check report")
    if "upstream_record" not in df.columns:
        rev = _git("log", "-1", "--format=%h", "--", str(csv))
        df["upstream_record"] = f"the cross-check committed at {rev or 'an unknown commit'}"
    keep = ["qid", *UPSTREAM_SCORES, *[c for c in CARRIED if c in df.columns], "upstream_record"]
    return df[keep].set_index("qid")


def rescored_rows(work: Path, profile: str, dataset: str, committed: pd.DataFrame) -> pd.DataFrame:
    """One row a question: this code's suite side (``DIR/suite.jsonl``) against upstream's committed scores
    (:func:`kgir_lib.eval.peer_agreement.rescore_question`), then the carried measures, in the profile's order."""
    cfg = load_config(profile, results_dir=str(work / "results"))
    ds = load_dataset(dataset, cfg.data_path)
    questions = sample_questions(ds.questions, cfg.n_questions, cfg.seed)
    suite, links = _by_qid(work / "suite.jsonl"), _by_qid(work / "suite_links.jsonl")
    both = [q for q in questions if q.qid in suite and q.qid in committed.index]
    if not both:
        raise SystemExit(f"no question has both a suite record in {work} and a committed upstream row "
                         f"(run the 'suite' step first)")
    rows = []
    for q in both:
        s = suite[q.qid]
        row = rescore_question(Side(s["ranked_pids"], s["candidates"], s["kept"], s["answer"], s["fallback"]),
                               committed.loc[q.qid].to_dict(), q.answers, q.gold_pids)
        if q.qid in links:
            row["candidates_are_links"] = ({fact_key(f) for f in links[q.qid]["candidates"]}
                                           == {fact_key(f) for f in s["candidates"]})
        carried = {c: committed.loc[q.qid, c] for c in (*CARRIED, "upstream_record") if c in committed.columns}
        rows.append({"qid": q.qid, **row, **carried})
    return pd.DataFrame(rows)


def carried_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """The agreement measures carried from the committed run (graph + PPR given the same facts, both ways;
    the linking check), as :func:`kgir_lib.eval.peer_agreement.summary` words them ("this code" there is the
    code of that run)."""
    cols = [c for c in CARRIED if c in rows.columns and c.startswith(("injected_top", "seeded_top", "links_now"))]
    if not cols:
        return pd.DataFrame()
    table = summary(rows[cols])
    table["measure"] = table["measure"].str.replace("this code's", "that run's code's", regex=False)
    return table


CARRIED_GRAPHS = "Carried from the committed run: "


def carried_graphs(md: str) -> str:
    """The graph comparison of the committed report ``md``: its carried line (a re-scored report), else the
    ``Suite: ...`` line of its *Graphs* section (a full run); ``""`` when it has neither."""
    section = md.split("## Graphs", 1)[1].split("\n## ", 1)[0] if "## Graphs" in md else ""
    for line in section.splitlines():
        if line.startswith(CARRIED_GRAPHS):
            return line[len(CARRIED_GRAPHS):]
        if line.startswith("Suite: "):
            return line
    return ""


def write_rescored_report(work: Path, profile: str, dataset: str, out: Path, command: str) -> None:
    """The report of :func:`rescored_rows` (module docstring) to ``out`` and its CSV beside it."""
    committed = committed_upstream(out.with_suffix(".csv"))
    graphs = carried_graphs(out.read_text(encoding="utf-8")) if out.exists() else ""
    rows = rescored_rows(work, profile, dataset, committed)
    record = str(rows["upstream_record"].iloc[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    g_suite, _ = _edges(work / "suite.graph.json.gz")
    agree = summary(rows.drop(columns=[c for c in CARRIED if c in rows.columns]))
    if "candidates_are_links" in rows:
        agree = pd.concat([agree, pd.DataFrame([{
            "measure": "the suite's linked candidate facts = this code's query-to-fact linking, % of questions",
            "value": round(100 * float(rows["candidates_are_links"].mean()), 1), "n": len(rows)}])],
            ignore_index=True)
    answered = rows[rows["answer_upstream"].notna()]
    parts = ["# HippoRAG 2: the suite's reimplementation against upstream's code\n",
             f"Command: `{command}` (machine: {platform.machine()}, Python {platform.python_version()}).\n",
             f"Dataset `{dataset}`: {len(rows)} of the `{profile}` profile's questions. Per-question rows: "
             f"`{out.with_suffix('.csv').name}`.\n",
             f"**Re-scored.** The suite's side is the HippoRAG 2 of the code at {_suite_code(work)}, run cache "
             f"only from the committed response log (no LLM call). Upstream was not run again (its peer "
             f"environment, index and LLM cache are not part of the repository): its answers, Recall@2/5, "
             f"kept-fact counts and fallbacks are read question by question from {record}. Upstream's ranked "
             f"passages and facts are not kept there, so the top-5 overlap and the fact agreement cannot be "
             f"recomputed; the measures of graph + PPR given the same facts (both seeding directions) are "
             f"carried from that run below.\n",
             "## Agreement, per question (this code against upstream's recorded scores)\n", _md(agree), "",
             "## Each system, same questions\n", _md(side_by_side(rows)), ""]
    carried = carried_summary(rows)
    if len(carried):
        parts += ["## Graph + PPR given the same facts (carried from the committed run)\n",
                  f"Measured by {record}: upstream's graph + PPR seeded with the suite's kept facts (those of "
                  f"that run's suite side) against the suite's ranking, and the suite's graph + PPR seeded with "
                  f"upstream's kept facts against upstream's ranking; and that code's query-to-fact linking "
                  f"against upstream's candidates. Re-running either direction needs what the repository does "
                  f"not keep: upstream's kept facts (for the suite's side) or upstream's environment and index "
                  f"(for upstream's side).\n", _md(carried), ""]
    parts += ["## Graphs\n",
              f"Suite (this code): {g_suite['nodes']:,} nodes, {g_suite['edges']:,} edges, {g_suite['facts']:,} "
              f"facts. Upstream's graph is not kept in the repository; {record} compared the two edge by "
              f"edge:\n", *([CARRIED_GRAPHS + graphs + "\n"] if graphs else [])]
    stages = ["## Upstream's LLM stages (as recorded)\n"]
    if "upstream_finish" in rows and "upstream_answer_parsed" in rows:
        stages.append(f"- QA reader: {len(answered)} of {len(rows)} questions answered; "
                      f"{int((answered['upstream_finish'] == 'length').sum())} replies cut by the token budget; "
                      f"{int((~answered['upstream_answer_parsed'].astype(bool)).sum())} without an `Answer:` line "
                      f"(upstream then takes the whole reply as the answer).")
    stages += [f"- Recognition filter: upstream kept no fact (dense fallback) for "
               f"{int(rows['fallback_upstream'].sum())} questions, the suite (this code) for "
               f"{int(rows['fallback_suite'].sum())}.",
               f"- The suite's filter replies (this code, cache only): {_suite_filter(work)}.\n"]
    parts += stages
    notes = Path(__file__).resolve().parent / "hipporag2_differences.md"
    if notes.exists():
        parts += [notes.read_text(encoding="utf-8")]
    rows.to_csv(out.with_suffix(".csv"), index=False)
    out.write_text("\n".join(parts), encoding="utf-8")
    print(f"report (re-scored against {record}): {out}")
