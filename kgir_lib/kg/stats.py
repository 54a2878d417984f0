"""Paper Table 3 (counts of entities, relations, triples per graph) and views for notebook 01."""
from __future__ import annotations

from collections import Counter
from typing import Mapping, Optional, Sequence

import pandas as pd

from ..data import Corpus
from .graph import KnowledgeGraph
from .parse import CUT_REPLY, DROP_REASONS, parse_triples
from .store import total_drops


def table3(graphs: Mapping[str, tuple]) -> pd.DataFrame:
    """One row a graph: passages, entities, relations, triples, triples/passage, drops by reason.

    ``graphs`` maps a name to ``(kg, drops)``; ``drops=None`` uses what the graph
    recorded (:func:`kgir_lib.kg.store.total_drops`). Drop columns are
    ``drop_<reason>``, the parser's reasons first, then any other (e.g. the import's
    ``doc_not_in_corpus``), and ``drops_total``; then ``replies_cut_at_token_limit``
    (:data:`kgir_lib.kg.parse.CUT_REPLY`): extraction replies that hit their token budget, whose
    triples after the cut are lost uncounted (replies, not triples: not in ``drops_total``).
    """
    rows, extra = [], []
    for name, (kg, drops) in graphs.items():
        drops = Counter(drops) if drops is not None else total_drops(kg)
        extra += [r for r in drops if r not in DROP_REASONS and r != CUT_REPLY and r not in extra]
        rows.append((name, kg.stats(), drops))
    reasons = list(DROP_REASONS) + extra
    out = []
    for name, st, drops in rows:
        out.append({"graph": name, **st, **{f"drop_{r}": int(drops.get(r, 0)) for r in reasons},
                    "drops_total": int(sum(v for r, v in drops.items() if r != CUT_REPLY)),
                    "replies_cut_at_token_limit": int(drops.get(CUT_REPLY, 0))})
    cols = ["graph", "passages", "entities", "relations", "triples", "triples_per_passage"]
    df = pd.DataFrame(out, columns=cols + [f"drop_{r}" for r in reasons] + ["drops_total",
                                                                         "replies_cut_at_token_limit"])
    return df.set_index("graph")


def triples_per_passage(kg: KnowledgeGraph) -> pd.Series:
    """Number of triples of every processed passage (0 included), indexed by pid."""
    counts = Counter(t.pid for t in kg.triples)
    return pd.Series({pid: counts.get(pid, 0) for pid in sorted(kg.extracted)}, dtype="int64",
                     name="triples")


def side_by_side(kg: KnowledgeGraph, corpus: Corpus, pids: Sequence[str], max_chars: Optional[int] = 400,
                 raw: Optional[Mapping[str, str]] = None) -> pd.DataFrame:
    """Passages next to their triples (and, if given, the raw LLM output) for reading."""
    rows = []
    for pid in pids:
        p = corpus[pid]
        text = p.text if max_chars is None or len(p.text) <= max_chars else p.text[:max_chars] + "…"
        row = {"pid": pid, "passage": f"{p.title}: {text}",
               "triples": "\n".join(t.text() for t in kg.triples_of([pid])) or "(none)"}
        if raw is not None:
            row["raw LLM output"] = raw.get(pid, "")
        rows.append(row)
    return pd.DataFrame(rows).set_index("pid")


def drops_in_words(drops: Mapping[str, int]) -> str:
    """The parser's drops as words, the parser's reasons first (:data:`kgir_lib.kg.parse.DROP_REASONS`), then any
    other: ``"1 wrong arity, 1 duplicate"``; ``"none"`` when nothing was dropped."""
    order = [r for r in DROP_REASONS if drops.get(r)] + [r for r in drops if r not in DROP_REASONS and drops[r]]
    return ", ".join(f"{drops[r]} {r.replace('_', ' ')}" for r in order) or "none"


# Extraction outputs of the kinds a small model writes (notebook 01 §1): numbered ``##`` lines with a two-part line
# and a repeat, JSON with a head = tail triple and a missing tail, pipes inside prose, and prose alone.
PARSER_EXAMPLES = {
    "numbered lines": "1. Compaq ## founded in ## 1982\n2. Compaq ## PC maker\n3. Compaq ## founded in ## 1982",
    "JSON": '[["Compaq", "merged with", "Hewlett-Packard"], ["HP", "is", "HP"], ["Compaq", "based in", ""]]',
    "pipes + prose": "Here are the facts:\nCompaq | top PC maker in | 1994\nThat is all.",
    "prose only": "I could not find any facts.",
}


def parser_examples(outputs: Mapping[str, str] = PARSER_EXAMPLES) -> pd.DataFrame:
    """What :func:`kgir_lib.kg.parse.parse_triples` keeps and drops of each named extraction output (notebook 01
    §1, KGIR-RAG §2.1; :data:`PARSER_EXAMPLES` by default): one row an output, the output as the model wrote it,
    its kept triples one a line as ``(head, relation, tail)``, its drops in words (:func:`drops_in_words`)."""
    rows = []
    for name, raw in outputs.items():
        kept, drops = parse_triples(raw)
        rows.append({"output": name, "as written": raw,
                     "kept": "\n".join(f"({h}, {r}, {t})" for h, r, t in kept) or "(none)",
                     "drops": drops_in_words(drops)})
    return pd.DataFrame(rows, columns=["output", "as written", "kept", "drops"]).set_index("output")
