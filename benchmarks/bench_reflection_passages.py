"""KGIR-RAG with the reflection's passages P_t set to "new" (the profiles' value, §2.4) and to "all" (the top of
D'_t; the study variant ``kgir_all_passages``), on the same questions: accuracy and the gold passages in the reader's
context.

When the reflection answers, the shared reader answers from G_Ans and P_t (``kgir_answer_source: reader``), so
``reflection_passages`` decides what the reader reads as well. On the 1.5B run the full method's reader holds
far fewer gold passages than *w/o reflection*'s (``results/local/tables/06_kgir_reader_context``); this
benchmark asks how much of the gap to *w/o reflection* the setting accounts for. It is a check chosen after
that run, not one of the declared claims: read it as such.

musique_train only: its graph is the published OpenIE, so a scratch run rebuilds exactly the committed run's
graph, and every request the "new" setting makes is answered from the profile's committed response log (the
script checks that its EM and F1 equal the committed run's). The scratch run lives in
``results/<profile>-<8 hex>/`` (not committed); its cache makes a rerun free.

    .venv/bin/python benchmarks/bench_reflection_passages.py --profile local
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from kgir_lib.config import load_config  # noqa: E402
from kgir_lib.data import sample_questions  # noqa: E402
from kgir_lib.eval.mechanism import round_facts as rf  # noqa: E402
from kgir_lib.eval.mechanism.reader_context import gold_in_context  # noqa: E402
from kgir_lib.eval.metrics import best_em, best_f1  # noqa: E402
from kgir_lib.eval.stats import mcnemar_exact, sign_flip_test  # noqa: E402
from kgir_lib.kgir.variants import KGIRRAG  # noqa: E402
from kgir_lib.llm import build_llm  # noqa: E402
from kgir_lib.llm.response_log import export_run_cache  # noqa: E402
from kgir_lib.pipeline import workspace  # noqa: E402
from kgir_lib.registry import build_method  # noqa: E402
from kgir_lib.report import to_markdown  # noqa: E402

SETTINGS = ("new", "all")


def committed_row(profile: str, dataset: str) -> tuple:
    """KGIR-RAG's (EM, F1) on ``dataset`` in the profile's committed Tables 4/5, or ``None``."""
    for path in sorted((ROOT / "results" / profile / "tables").glob("05_table4_5_qa_*.csv")):
        t = pd.read_csv(path, index_col=0)
        cols = [next((c for c in t.columns if c.startswith("ours") and c.endswith(f"/ {dataset} / {m}")), None)
                for m in ("EM", "F1")]
        if "KGIR-RAG" in t.index and all(cols):
            return tuple(float(t.loc["KGIR-RAG", c]) for c in cols)
    return None


def per_question(outs, questions, n_ctx: int) -> pd.DataFrame:
    """EM, F1 and the reader context's gold passages of each output."""
    rows = []
    for o, q in zip(outs, questions):
        rec = o.to_json()
        rows.append({"qid": q.qid, "EM": 100 * best_em(o.answer, q.answers), "F1": 100 * best_f1(o.answer, q.answers),
                     "context passages": len(rf.answer_context(rec, n_ctx)),
                     "gold in context": gold_in_context(rec, n_ctx), "rounds": len(rf.rounds(rec))})
    return pd.DataFrame(rows).set_index("qid")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="local")
    ap.add_argument("--dataset", default="musique_train")
    ap.add_argument("--questions", type=int, default=None, help="the first N of the sample (default: the profile's)")
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "reflection_passages.md"))
    args = ap.parse_args()
    run_name = f"{args.profile}-{hashlib.sha1(b'reflection_passages').hexdigest()[:8]}"
    base = load_config(args.profile, run_name=run_name, datasets=[args.dataset])
    llm = build_llm(base, progress=True)
    ws = workspace(base, args.dataset, llm, progress=False)
    questions = sample_questions(ws.dataset.questions, base.n_questions, base.seed)[: args.questions]
    tables = {}
    try:
        for value, method in zip(SETTINGS, (KGIRRAG(), build_method("kgir_all_passages"))):
            # "new": the profile's rule (the full method); "all": the study variant kgir_all_passages
            cfg = load_config(args.profile, run_name=run_name, datasets=[args.dataset], reflection_passages="new")
            outs = method.run(dataclasses.replace(ws, cfg=cfg).method_view(), questions)
            tables[value] = per_question(outs, questions, cfg.context_passages)
    finally:
        export_run_cache(base, llm.cache)
    new, all_ = tables["new"], tables["all"]
    rows = []
    for value, t in tables.items():
        rows.append({"reflection_passages": value, "n": len(t), "EM": t["EM"].mean(), "F1": t["F1"].mean(),
                     "context passages": t["context passages"].mean(),
                     "questions with gold in context": int((t["gold in context"] > 0).sum()),
                     "rounds": t["rounds"].mean()})
    summary = pd.DataFrame(rows).set_index("reflection_passages")
    em = mcnemar_exact(all_["EM"], new["EM"])
    tests = pd.DataFrame([
        {"all minus new": "EM", "diff": all_["EM"].mean() - new["EM"].mean(), "test": "McNemar",
         "discordant": f"{em.b}/{em.c}", "p": em.p},
        {"all minus new": "F1", "diff": all_["F1"].mean() - new["F1"].mean(), "test": "sign-flip",
         "discordant": int((all_["F1"] != new["F1"]).sum()), "p": sign_flip_test(all_["F1"] - new["F1"])},
        {"all minus new": "gold passages in context", "diff": (all_["gold in context"] - new["gold in context"]).mean(),
         "test": "sign-flip", "discordant": int((all_["gold in context"] != new["gold in context"]).sum()),
         "p": sign_flip_test(all_["gold in context"] - new["gold in context"])}]).set_index("all minus new")
    check = ""
    ref = committed_row(args.profile, args.dataset)
    if ref is not None and len(questions) == base.n_questions:
        same = abs(new["EM"].mean() - ref[0]) < 1e-9 and abs(new["F1"].mean() - ref[1]) < 1e-9
        check = (f"The `new` row {'equals' if same else 'DIFFERS FROM'} the committed run's KGIR-RAG "
                 f"(EM {ref[0]:.2f}, F1 {ref[1]:.2f}, `results/{args.profile}/tables/05_table4_5_qa_*`).\n\n")
    text = (f"# KGIR-RAG: the reflection's passages \"new\" against \"all\"\n\n"
            f"`{' '.join(['.venv/bin/python', 'benchmarks/bench_reflection_passages.py', '--profile', args.profile])}`"
            f" — profile `{args.profile}` (reader {base.llm_model}), {args.dataset}, {len(questions)} questions (the "
            f"profile's seeded sample), the full method with `reflection_passages` set to each value; everything else "
            f"as the profile. A check chosen after the run that raised the question, not a declared claim.\n\n"
            + check + to_markdown(summary, ".2f") + "\n\n" + to_markdown(tests, ".2f") + "\n")
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
