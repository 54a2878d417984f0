"""Draw the candidate (question entity, graph entity) pairs of the eq. 5 matching fixture from a run's traces.

Every subgraph round of the KGIR-RAG traces (full method and ablations) gives the NER entities grounded in
the round's question and the entities of its ``G_q``; a pair is a candidate when it passes the loose union of
rules :func:`kgir_lib.eval.matching_eval.loose_candidates` (Dice >= 0.3, overlap >= 0.5, or a shared content
word). Pairs are deduplicated by normalised names (first round kept) and drawn at random per dataset and
stratum of the current rule (overlap coefficient >= 0.8):

    accept-equal   accepted, equal normalised names
    accept-other   accepted, different names
    reject-close   rejected, but Dice >= 0.5 or the token rule accepts (the likeliest misses)
    reject-near    rejected, other pairs with Dice >= 0.3 or overlap >= 0.5
    reject-word    rejected, sharing a content word only

The output has an empty ``label`` column, to be filled in by hand (``same`` / ``different``, rule in
``tests/fixtures/README.md``); the population of each stratum is printed for the fixture's header.

    .venv/bin/python benchmarks/sample_matching_pairs.py --run results/local --out pairs.tsv
"""
from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgir_lib.eval.matching_eval import PAIR_COLUMNS, RIVAL_SEP, loose_candidates, trace_rounds_of_run  # noqa: E402
from kgir_lib.kgir.entity_matching import _dice, _overlap, name_features, ngram_similarity, normalize_name  # noqa: E402

QUOTAS = {"accept-equal": 5, "accept-other": 45, "reject-close": 16, "reject-near": 8, "reject-word": 6}


def stratum(q: str, g: str) -> str:
    fq, fg = name_features(q), name_features(g)
    ov = _overlap(fq.grams, fg.grams)
    if ov >= 0.8:
        return "accept-equal" if normalize_name(q) == normalize_name(g) else "accept-other"
    dice = _dice(fq.grams, fg.grams)
    if dice >= 0.5 or ngram_similarity(q, g, method="tokens") > 0:
        return "reject-close"
    return "reject-near" if dice >= 0.3 or ov >= 0.5 else "reject-word"


def candidates(run: Path) -> list:
    seen, out = set(), []
    for r in trace_rounds_of_run(run):
        ents = r.graph_entities
        for q in r.E_q:
            loose = loose_candidates(q, ents)
            for g in loose:
                key = (r.dataset, normalize_name(q), normalize_name(g))
                if key in seen:
                    continue
                seen.add(key)
                out.append({"qid": r.qid, "dataset": r.dataset, "question": r.question, "question_entity": q,
                            "graph_entity": g, "label": "", "stratum": stratum(q, g),
                            "rivals": RIVAL_SEP.join(x for x in loose if x != g)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="run directory with traces/ and kg/")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cands = candidates(args.run)
    pop = Counter((c["dataset"], c["stratum"]) for c in cands)
    rng = random.Random(args.seed)
    drawn = []
    for (ds, st), _ in sorted(pop.items()):
        group = [c for c in cands if c["dataset"] == ds and c["stratum"] == st]
        drawn += rng.sample(group, min(QUOTAS[st], len(group)))
    lines = ["\t".join(PAIR_COLUMNS)]
    lines += ["\t".join(" ".join(str(c[k]).split()) for k in PAIR_COLUMNS) for c in drawn]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for (ds, st), k in sorted(pop.items()):
        print(f"{ds}\t{st}\tpopulation {k}\tdrawn {min(QUOTAS[st], k)}")


if __name__ == "__main__":
    main()
