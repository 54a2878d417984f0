"""Usable-output rates per KGIR-RAG stage with the embedded model, and the seed-match rate.

Runs KGIR-RAG (full) on musique_train TUNING questions -- those after the first 30 of the sample
profile's seeded shuffle, so never a question the sample run evaluates -- over musique_train's real
GPT-3.5 OpenIE graph, and extracts triples from a few of their passages. Reports, per stage
(extraction, NER, rewrite, reflection, reader), how many outputs were parsed as intended (not a
fallback) and how many hit the token budget; and the seed-match rate (share of subgraph rounds with a
seed). Writes ``results/benchmarks/usable.md``.

    .venv/bin/python benchmarks/bench_usable.py --questions 12 --passages 6

The LLM cache lives in ``--work`` (default ``kgir_bench`` in the system's temporary directory), so a rerun
costs no LLM call.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgir_lib.config import load_config  # noqa: E402
from kgir_lib.data import SAMPLE_RESERVED, tuning_questions  # noqa: E402
from kgir_lib.kg.extract import extract_triples  # noqa: E402
from kgir_lib.kgir.variants import KGIRRAG  # noqa: E402
from kgir_lib.eval.mechanism.loop_tables import seed_match_rate, usable_table  # noqa: E402
from kgir_lib.llm import build_llm  # noqa: E402
from kgir_lib.pipeline import workspace  # noqa: E402
from kgir_lib.report import to_markdown  # noqa: E402


def seed_table(ws, qs):
    """Round-1 seed matching under several eq.-5 rules, on the cached NER replies."""
    import pandas as pd

    from kgir_lib.kgir.subgraph import build_subgraphs, evidence_subgraph, question_weight_fn

    subs, _ = build_subgraphs(ws, [q.question for q in qs])
    rules = {"dice 0.5 (old)": dict(method="dice", threshold=0.5, match_triples=False),
             "overlap 0.8": dict(method="overlap", threshold=0.8, match_triples=False),
             "overlap 0.8 + whole triples (default)": dict(method="overlap", threshold=0.8, match_triples=True),
             "containment 0.8 + whole triples": dict(method="containment", threshold=0.8, match_triples=True)}
    rows = []
    for label, kw in rules.items():
        n_llm = n_any = n_gold = 0
        for q, s in zip(qs, subs):
            alt = evidence_subgraph(s.question, s.retrieved, s.G_q, s.llm_entities,
                                    weight_fn=question_weight_fn(ws, s.retrieved, s.weighting),
                                    n=ws.cfg.ngram_n, threshold=kw["threshold"], reading=ws.cfg.gtmp_reading,
                                    method=kw["method"], match_triples=kw["match_triples"])
            n_llm += bool(alt.seeds) and not alt.used_fallback
            n_any += bool(alt.seeds)
            n_gold += bool(set(q.gold_pids) & {t.pid for t in alt.kept})
        rows.append({"rule": label, "seed from LLM entities %": 100 * n_llm / len(qs),
                     "seed after fallback %": 100 * n_any / len(qs), "gold behind G_Ans %": 100 * n_gold / len(qs)})
    return pd.DataFrame(rows).set_index("rule")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="sample")
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--passages", type=int, default=6)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "kgir_bench"))
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "usable.md"))
    args = ap.parse_args()
    cfg = load_config(args.profile, results_dir=args.work, datasets=["musique_train"])
    llm = build_llm(cfg, progress=False)
    ws = workspace(cfg, "musique_train", llm, progress=False)
    qs = tuning_questions(ws.dataset.questions, args.questions, cfg.seed)
    t0 = time.perf_counter()
    outs = KGIRRAG(max_iterations=args.iterations).run(ws, qs)
    t_kgir = time.perf_counter() - t0
    kgir_use = llm.usage.total()
    table = usable_table(outs)
    pids = [p for q in qs for p in q.gold_pids][: args.passages]
    rep = extract_triples(llm, ws.passages(pids), stage="extract_bench", max_tokens=cfg.max_tokens("extract"))
    n_ok = sum(bool(ts) for ts in rep.triples.values())
    trunc = llm.usage.stage("extract_bench").truncated
    table.loc["extraction"] = [len(pids), n_ok, 100.0 * n_ok / max(len(pids), 1), trunc]
    rate = seed_match_rate([o.trace for o in outs])
    seeds = seed_table(ws, qs)
    lines = [f"# Usable outputs per stage ({cfg.llm_model}, profile {cfg.profile})", "",
             f"Command: `.venv/bin/python benchmarks/bench_usable.py --questions {args.questions} "
             f"--passages {args.passages} --iterations {args.iterations}`", "",
             f"{len(qs)} musique_train tuning questions (outside the sample's first {SAMPLE_RESERVED} of the "
             f"seeded shuffle), KGIR-RAG full, {args.iterations} rounds at most, GPT-3.5 OpenIE graph; "
             f"extraction on {len(pids)} of their gold passages. Budgets: "
             + ", ".join(f"{s} {cfg.max_tokens(s)}"
                         for s in ("extract", "ner", "rewrite", "reflect", "verdict", "reader"))
             + f". KGIR-RAG wall time {t_kgir:.0f} s in this invocation, with {kgir_use.cache_hits} of "
             f"{kgir_use.calls} LLM calls answered from the cache in `--work` (a cached rerun times the cache, "
             f"not the model).", "",
             to_markdown(table.reset_index()), "",
             f"Seed-match rate (subgraph rounds with >= 1 seed): {100 * rate:.1f} %", "",
             "## Seed matching on round 1 (same NER replies, GPT-3.5 graph; no LLM call)", "",
             "Questions with a seed from the LLM's entities (no fallback), with any seed after the fallback, "
             "and with a gold passage behind a G_Ans edge, per matching rule:", "",
             to_markdown(seeds.reset_index()), ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    for o in outs:
        for r in o.trace["rounds"]:
            print("--", r["query"][:90], "| NER", repr(r.get("ner_raw", ""))[:80])
            print("   rewrite", repr(r.get("rewrite", {}).get("raw", ""))[:120])
            print("   reflect", repr((r.get("reflection") or {}).get("raw", ""))[:200])
            if (r.get("reflection") or {}).get("verdict_raw") is not None:
                print("   verdict turn", repr(r["reflection"]["verdict_raw"])[:120])
        print("   answer", o.answer, "| gold", o.trace["gold_answers"][:2], "|", o.trace["answered_by"])


if __name__ == "__main__":
    main()
