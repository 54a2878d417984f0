"""Entity matching for KGIR-RAG eq. 5 on real pairs: Dice vs overlap coefficient vs token containment.

Two measurements, no LLM call:

A. HotpotQA: GPT-3.5's named entities of each question (HippoRAG's NER file) against the titles of the
   question's 10 paragraphs (2 gold, 8 distractors chosen by similarity, so name look-alikes are common).
   A matched title is correct when it is a gold (supporting) title. Precision = correct / matched titles;
   recall = gold titles matched / gold titles (a bridge entity the question does not name can never be
   matched, so recall is capped below 100 for every method); questions with a gold seed.
B. musique_train: each passage's GPT-3.5 NER entities against the entities of the GPT-3.5 OpenIE triples
   of all 20 paragraphs of its question. A match inside the passage itself is counted correct, a match
   only in another paragraph under a different name as spurious (a proxy: another paragraph can name the
   same entity). Own-passage recall is measured on NER entities that do NOT occur verbatim as a triple
   entity of their passage (the name variants the matcher exists for).

    .venv/bin/python benchmarks/bench_matching.py     # writes results/benchmarks/matching.md
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from kgir_lib.config import default_data_dir  # noqa: E402
from kgir_lib.report import to_markdown  # noqa: E402
from kgir_lib.subgraph import match_entities, normalize_name  # noqa: E402

METHODS = ("dice", "overlap", "containment")
THRESHOLDS = (0.3, 0.5, 0.7, 0.8, 0.9, 1.0)


def hotpot_items(data: Path) -> list:
    """(question entities, titles, gold titles) of every hotpotqa question found in the NER file."""
    ner = {}
    with open(data / "hotpotqa" / "hotpotqa_queries.named_entity_output.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            try:
                ner[row["query"].strip()] = json.loads(row["triples"]).get("named_entities", [])
            except (ValueError, AttributeError):
                continue
    items = []
    for q in json.load(open(data / "hotpotqa" / "hotpotqa.json", encoding="utf-8")):
        ents = ner.get(q["question"].strip())
        if ents is None:
            continue
        titles = [c[0] for c in q["context"]]
        items.append(([str(e) for e in ents if str(e).strip()], titles, {t for t, _ in q["supporting_facts"]}))
    return items


def measure_hotpot(items: list) -> list:
    rows = []
    for method in METHODS:
        for th in THRESHOLDS:
            matched = correct = gold_hit = gold_all = seeded = 0
            for ents, titles, gold in items:
                m = match_entities(ents, titles, 3, th, method) if ents else {}
                hit = {t for found in m.values() for t, _ in found}
                matched += len(hit)
                correct += len(hit & gold)
                gold_hit += len(hit & gold)
                gold_all += len(gold)
                seeded += bool(hit & gold)
            rows.append({"method": method, "threshold": th, "precision %": 100 * correct / max(matched, 1),
                         "recall %": 100 * gold_hit / max(gold_all, 1),
                         "questions with a gold seed %": 100 * seeded / max(len(items), 1)})
    return rows


def musique_items(data: Path) -> list:
    """(NER entities of a passage, its triple entities, the triple entities of its question's other paragraphs)."""
    oie = json.load(open(data / "musique_train" / "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json",
                         encoding="utf-8"))["docs"]
    ents_of = {}
    for d in oie:
        ents = set()
        for t in d.get("extracted_triples") or []:
            if isinstance(t, list) and len(t) == 3:
                ents.update(str(x) for x in (t[0], t[2]) if str(x).strip())
        ents_of[(d["title"], d["text"] if "text" in d else d["passage"])] = (d.get("extracted_entities") or [], ents)
    items = []
    for q in json.load(open(data / "musique_train" / "musique_train.json", encoding="utf-8")):
        keys = [(p["title"], p["paragraph_text"]) for p in q["paragraphs"]]
        known = [k for k in keys if k in ents_of]
        for k in known:
            ner, own = ents_of[k]
            others = set().union(*(ents_of[o][1] for o in known if o != k)) - own
            items.append(([str(e) for e in ner if str(e).strip()], own, others))
    return items


def measure_musique(items: list) -> list:
    rows = []
    for method in METHODS:
        for th in THRESHOLDS:
            variants = variants_hit = spurious = n_ents = 0
            for ner, own, others in items:
                own_norm = {normalize_name(x) for x in own}
                m_own = match_entities(ner, own, 3, th, method)
                m_oth = match_entities(ner, others, 3, th, method)
                for e in ner:
                    n_ents += 1
                    if normalize_name(e) not in own_norm:
                        variants += 1
                        variants_hit += bool(m_own[e])
                    spurious += sum(normalize_name(x) != normalize_name(e) for x, _ in m_oth[e])
            rows.append({"method": method, "threshold": th,
                         "variant recall %": 100 * variants_hit / max(variants, 1),
                         "spurious matches / entity": spurious / max(n_ents, 1)})
    return rows, variants


def main() -> None:
    data = default_data_dir()
    hp = hotpot_items(data)
    a = pd.DataFrame(measure_hotpot(hp)).set_index(["method", "threshold"])
    mu = musique_items(data)[:3000]
    b_rows, n_var = measure_musique(mu)
    b = pd.DataFrame(b_rows).set_index(["method", "threshold"])
    out = ROOT / "results" / "benchmarks" / "matching.md"
    text = ["# Entity matching (KGIR-RAG eq. 5): Dice vs overlap coefficient vs token containment", "",
            "Command: `.venv/bin/python benchmarks/bench_matching.py` (no LLM call; method in its docstring).", "",
            f"## A. HotpotQA: GPT-3.5 question NER vs the question's 10 paragraph titles ({len(hp)} questions)", "",
            to_markdown(a.reset_index()), "",
            f"## B. musique_train: passage NER vs GPT-3.5 OpenIE triple entities ({len(mu)} passages, "
            f"{n_var} NER entities that are not verbatim a triple entity of their passage)", "",
            to_markdown(b.reset_index(), ".2f"), ""]
    out.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
