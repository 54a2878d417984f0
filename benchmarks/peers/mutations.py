"""One-line mutations of the code behind the peers' reports, each run against the fast test that should catch it.

    .venv/bin/python benchmarks/peers/mutations.py [--out results/benchmarks/mutation_peers.md]

Each mutation (:data:`MUTATIONS`) replaces one line of a file by another; the script applies it, runs the named
fast tests (no model, no peer environment) and restores the file, whatever happens. A mutation is *caught* when the
tests fail. The table goes to ``--out`` (markdown). The committed reports are rebuilt whole from their committed
files by ``tests/test_peer_reports.py``, so a mutation that moves any number of ``peers_flashrag.md`` or
``peers_kg2rag.md`` fails there.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORTS = "tests/test_peer_reports.py"

# (what the mutation does, file, the line as it is, the line mutated, the tests that should fail)
MUTATIONS = (
    ("FlashRAG paired tests: one Holm family over both methods", "kgir_lib/eval/peer_iterative.py",
     '        adj = holm([x["p"] for x in lines])',
     '        adj = holm([x["p"] for x in out + lines])[len(out):]',
     f"{REPORTS}::test_flashrag_report_rebuilds_whole_from_its_committed_files"),
    ("FlashRAG sign-flip detail: 'questions differ' counts a > b for a != b", "kgir_lib/eval/peer_iterative.py",
     '                line.update(test="exact sign-flip", detail=f"{int((a != b).sum())} questions differ",',
     '                line.update(test="exact sign-flip", detail=f"{int((a > b).sum())} questions differ",',
     f"{REPORTS}::test_flashrag_report_rebuilds_whole_from_its_committed_files"),
    ("FlashRAG McNemar detail: suite-only and FlashRAG-only counts swapped", "kgir_lib/eval/peer_iterative.py",
     '                line.update(test="exact McNemar", detail=f"suite only {t.b}, FlashRAG only {t.c}", p=t.p)',
     '                line.update(test="exact McNemar", detail=f"suite only {t.c}, FlashRAG only {t.b}", p=t.p)',
     f"{REPORTS}::test_flashrag_report_rebuilds_whole_from_its_committed_files"),
    ("FlashRAG re-read's sign-flip detail: 'questions differ' counts a > b", "kgir_lib/eval/peer_iterative.py",
     '            "questions differ": int((reread != base).sum()), "p": round(sign_flip_test(reread - base), 4)}',
     '            "questions differ": int((reread > base).sum()), "p": round(sign_flip_test(reread - base), 4)}',
     f"{REPORTS}::test_flashrag_report_rebuilds_whole_from_its_committed_files"),
    ("FlashRAG agreement: 'same order' read from the same-set column", "kgir_lib/eval/peer_iterative.py",
     '        add(f"final top-{k} same order, % of questions", both=round(100 * g[f"top{k}_same_order"].mean(), 1))',
     '        add(f"final top-{k} same order, % of questions", both=round(100 * g[f"top{k}_same_set"].mean(), 1))',
     f"{REPORTS}::test_flashrag_report_rebuilds_whole_from_its_committed_files"),
    ("FlashRAG IRCoT merge: a passage keeps its lowest score, not its best", "kgir_lib/eval/peer_iterative.py",
     '            score[pid] = max(score[pid], float(sc)) if pid in score else float(sc)',
     '            score[pid] = min(score[pid], float(sc)) if pid in score else float(sc)',
     f"{REPORTS}::test_flashrag_report_rebuilds_whole_from_its_committed_files"),
    ("FlashRAG sentence: best-first Recall@5 left out", "kgir_lib/eval/peer_iterative.py",
     '        if best.notna().any():',
     '        if False:',
     f"{REPORTS}::test_flashrag_report_rebuilds_whole_from_its_committed_files"),
    ("kg2rag_code expansion: highly related titles by summed, not mean, seed score",
     "kgir_lib/baselines/kg2rag_code_chunks.py",
     '    for title in sorted(count, key=lambda e: total[e] / count[e], reverse=True)[:2]:',
     '    for title in sorted(count, key=lambda e: total[e], reverse=True)[:2]:',
     f"{REPORTS}::test_kg2rag_code_expansion_matches_the_authors_recorded_lists_on_musique_train"),
    ("KG²RAG stage summary: a question with no pair order counts as 0, not left out",
     "kgir_lib/eval/kg2rag_agreement.py",
     '                vals = rows[c].dropna().astype(float)',
     '                vals = rows[c].fillna(0).astype(float)',
     f"{REPORTS}::test_kg2rag_report_rebuilds_whole_from_its_committed_files"),
    ("KG²RAG expansion: order no longer measured beside the set", "kgir_lib/eval/kg2rag_agreement.py",
     '            for k, v in stage_agreement(lst, up or [], True, ctx).items():',
     '            for k, v in stage_agreement(lst, up or [], stage != "expanded", ctx).items():',
     f"{REPORTS}::test_kg2rag_report_rebuilds_whole_from_its_committed_files"),
    ("KG²RAG seeds: kg2rag_code 'most frequent' when among any seed's lists", "kgir_lib/eval/kg2rag_agreement.py",
     '            "code_final_modal": code_final in modal}',
     '            "code_final_modal": code_final in counts}',
     f"{REPORTS}::test_kg2rag_report_rebuilds_whole_from_its_committed_files"),
    ("KG²RAG seeds: the most frequent list's share from the pairs' agreement", "kgir_lib/eval/kg2rag_agreement.py",
     '            "upstream_modal_share": top / n, "upstream_modal_lists": len(modal),',
     '            "upstream_modal_share": sum(pairs) / len(pairs), "upstream_modal_lists": len(modal),',
     f"{REPORTS}::test_kg2rag_report_rebuilds_whole_from_its_committed_files"),
    ("KG²RAG padded ranked list: the seeds first", "kgir_lib/eval/kg2rag_agreement.py",
     '    padded = list(dict.fromkeys([*final, *seeds]))',
     '    padded = list(dict.fromkeys([*seeds, *final]))',
     f"{REPORTS}::test_kg2rag_report_rebuilds_whole_from_its_committed_files"),
)


def apply(path: Path, old: str, new: str) -> str:
    """Replace the one line ``old`` of ``path`` by ``new``; the original text, to restore. A clear error when the
    line is not there exactly once (the list is out of date)."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    hits = [i for i, x in enumerate(lines) if x == old]
    if len(hits) != 1:
        raise SystemExit(f"{path}: the line to mutate is there {len(hits)} times, expected once: {old.strip()!r}")
    lines[hits[0]] = new
    path.write_text("\n".join(lines), encoding="utf-8")
    return text


def run(tests: str) -> tuple:
    """``(failed, seconds)`` of the fast tests ``tests`` (pytest node ids, space-separated)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.time()
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "0",
                          *tests.split()], cwd=ROOT, env=env, capture_output=True, text=True)
    return res.returncode != 0, round(time.time() - t0, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "mutation_peers.md")
    args = ap.parse_args()
    clean, _ = run(" ".join(sorted({m[4] for m in MUTATIONS})))
    if clean:
        raise SystemExit("the tests fail without any mutation: fix them first")
    rows = []
    for what, rel, old, new, tests in MUTATIONS:
        path = ROOT / rel
        original = apply(path, old, new)
        try:
            failed, seconds = run(tests)
        finally:
            path.write_text(original, encoding="utf-8")
        rows.append((what, rel, tests.split("::")[-1], "caught" if failed else "**survived**", seconds))
        print(f"{'caught  ' if failed else 'SURVIVED'} {what}")
    lines = ["## Peers\n",
             f"One-line mutations of the code behind `peers_flashrag.md` and `peers_kg2rag.md`, each run against the "
             f"fast test named (`{REPORTS}`: no model, no peer environment), by `python benchmarks/peers/mutations.py` "
             f"(Python {platform.python_version()}). The tests rebuild each report whole from its committed files and "
             f"kg2rag_code's musique_train expansion against the authors' recorded lists, so a mutation that moves a "
             f"committed number fails. The mutated lines are in `benchmarks/peers/mutations.py`.\n",
             "| mutation | file | test | verdict | seconds |", "|---|---|---|---|---|"]
    lines += [f"| {w} | `{f}` | `{t}` | {v} | {s} |" for w, f, t, v, s in rows]
    caught = sum(r[3] == "caught" for r in rows)
    lines += ["", f"{caught} of {len(rows)} caught.", ""]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"mutations: {caught} of {len(rows)} caught -> {args.out}")


if __name__ == "__main__":
    main()
