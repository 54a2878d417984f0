"""LightRAG (Guo et al., 2024, arXiv 2410.05779) run as a method of the suite: its own retrieval over its own
index, answered by the shared reader.

**Index**: :mod:`kgir_lib.baselines.lightrag_index` (the graph methods' passage pool; ``cfg.lightrag_index``:
``suite_graph``, LightRAG's custom-KG insertion of the suite's triples, no LLM call, on the CPU profiles;
``native``, LightRAG's own extraction through the suite's LLM, on the paper profiles). Built once per dataset
and cached; its LLM cost is indexing cost, read from its ``index.json`` (notebook 05 §4), never charged to a
question.

**Query** (per question, LightRAG 1.5.7's ``aquery_llm`` with ``only_need_context=True``: retrieval only):

- ``lightrag`` (mode ``hybrid``): 1. **keywords**: LightRAG's keyword prompt (``PROMPTS["keywords_extraction"]``
  with its examples, JSON mode) for every question in ONE batched call (stage ``lightrag_keywords``),
  parsed by LightRAG's own parser. Each reply is counted in the trace: ``ok``, ``repaired`` (JSON only after
  ``json_repair``), ``empty`` (JSON without keywords) or ``malformed`` (no JSON object: skipped, never a
  crash). With no keyword at all LightRAG's rule applies: a question under 50 characters becomes the
  low-level keyword, a longer one gets no context. 2. the keywords go to LightRAG in ``QueryParam`` (so
  LightRAG makes no LLM call of its own); LightRAG searches its entity vectors with the low-level keywords
  and its relationship vectors with the high-level ones (its ``top_k``: ``kg_top_k``, LightRAG's 40), takes the
  chunks of the found entities and relationships, round-robin, by vector similarity to the question
  (``kg_chunk_pick_method`` VECTOR), and keeps ``top_k`` of them (its ``chunk_top_k``).
- ``lightrag_naive`` (mode ``naive``): LightRAG's vector search over its chunks (``top_k`` of them, cosine
  ≥ LightRAG's 0.2): a check against Naive RAG, which searches the whole corpus with the same vectors (the
  pool holds every question's dense top-k, so the two agree unless LightRAG's cosine floor drops a passage).

**Reader** (the shared one, stage ``lightrag_reader`` / ``lightrag_naive_reader``): LightRAG's context as
the reader's context, so the comparison is about context like every other method's: its entity lines
(``{"entity", "type", "description"}``) and relationship lines (``{"entity1", "entity2", "description"}``)
as LightRAG renders them, at most ``cfg.max_evidence_triples`` lines (half entities, half relationships, in
LightRAG's order; ``null``: all it kept), each description cut to ``cfg.passage_chars`` characters; then
its chunks as the suite's passages (the first ``cfg.context_passages``, each cut to ``cfg.passage_chars``).
LightRAG's own answer prompt is not used.

**Final ranked list** (Recall@k): the passages of the chunks LightRAG's context holds, in its order, and
nothing after them (LightRAG ranks no further candidates). The reader's context passages are the first
``cfg.context_passages`` of that list, so the suite's rule (context, then the remaining candidates) gives
exactly this list. Chunks are mapped to passages by their ``file_path`` (the passage id); a chunk that maps
to no pool passage is counted (``unmapped_chunks``) and left out.

LLM calls a question: 1 keyword call (hybrid only) + 1 reader call. :func:`keyword_table` counts the keyword
replies of a finished run by status (the parse-failure rate of the run's LLM).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

if TYPE_CHECKING:  # pandas is imported by the one table below (the method registry loads this module)
    import pandas as pd

from ..data import Question
from ..llm import LLMUsage
from ..methods.base import MethodBase, MethodOutput, Workspace
from ..methods.context import dedup, final_ranking
from ..methods.reader import answer_batch, format_passages
from ..traces import read_traces, trace_file
from .lightrag_bridge import lightrag_request
from .lightrag_index import WARNINGS, _settings, index_pool, open_index

VARIANTS = {"hybrid": "LightRAG (hybrid; shared reader)", "naive": "LightRAG (naive; shared reader)"}
INDEX_LABELS = {"suite_graph": "suite graph"}  # an index that is not LightRAG's own extraction, named in the label
KEYS = {"hybrid": "lightrag", "naive": "lightrag_naive"}
KEYWORD_STATUSES = ("ok", "repaired", "empty", "malformed")
SHORT_QUERY = 50  # LightRAG's kg_query: a query this short becomes its own low-level keyword when none was found


def keyword_prompt(question: str, language: str) -> str:
    """LightRAG's keyword-extraction prompt for ``question``, as its ``extract_keywords_only`` builds it."""
    from lightrag.prompt import PROMPTS

    return PROMPTS["keywords_extraction"].format(query=question, language=language,
                                                 examples="\n".join(PROMPTS["keywords_extraction_examples"]))


def parse_keywords(text: str) -> tuple:
    """``(status, high_level, low_level)`` of a keyword reply, parsed by LightRAG's own parser; ``status`` is
    ``ok`` | ``repaired`` | ``empty`` | ``malformed`` (module docstring)."""
    from lightrag.operate import _parse_keywords_payload

    valid, high, low = _parse_keywords_payload(text or "")
    if not valid:
        return "malformed", [], []
    if not high and not low:
        return "empty", [], []
    try:
        strict = isinstance(json.loads(re.sub(r"^```(?:json)?\s*|\s*```$", "", (text or "").strip())), dict)
    except ValueError:
        strict = False
    return ("ok" if strict else "repaired"), list(high), list(low)


def kg_lines(entities: Sequence[dict], relationships: Sequence[dict], cap: Optional[int],
             chars: Optional[int]) -> list:
    """LightRAG's entity and relationship lines for the reader (module docstring): at most ``cap`` lines,
    ``ceil(cap / 2)`` entities then ``floor(cap / 2)`` relationships; descriptions cut to ``chars``."""
    def cut(text) -> str:
        text = str(text or "")
        return text if not chars or len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " ..."
    n_ent = len(entities) if cap is None else (cap + 1) // 2
    n_rel = len(relationships) if cap is None else cap // 2
    ents = [{"entity": e.get("entity_name", ""), "type": e.get("entity_type", ""),
             "description": cut(e.get("description"))} for e in entities[:n_ent]]
    rels = [{"entity1": r.get("src_id", ""), "entity2": r.get("tgt_id", ""), "description": cut(r.get("description"))}
            for r in relationships[:n_rel]]
    return [json.dumps(x, ensure_ascii=False) for x in ents + rels]


def chunk_ranking(chunks: Sequence[dict], pool) -> tuple:
    """``(ranked pids, unmapped)``: the passages of LightRAG's context chunks in its order (a chunk's
    ``file_path`` is its passage id), each once; ``unmapped``: chunks whose passage is not in ``pool``."""
    paths = [c.get("file_path") for c in chunks]
    return dedup(p for p in paths if p in pool), sum(p not in pool for p in paths)


def reader_context(ws: Workspace, lines: Sequence[str], n_entities: int, pids: Sequence[str]) -> str:
    """The reader's context: LightRAG's knowledge-graph lines under its own headings, then the passages."""
    parts = []
    if lines[:n_entities]:
        parts.append("Knowledge Graph Data (Entity):\n" + "\n".join(lines[:n_entities]))
    if lines[n_entities:]:
        parts.append("Knowledge Graph Data (Relationship):\n" + "\n".join(lines[n_entities:]))
    if pids:
        parts.append(format_passages(ws.passages(pids), ws.cfg.passage_chars))
    return "\n\n".join(parts) if parts else "(none)"


@dataclass
class LightRAGMethod(MethodBase):
    """LightRAG's retrieval (``variant`` = ``hybrid`` | ``naive``) read by the shared reader (module docstring).

    Knobs (:attr:`MethodBase.knobs`): ``top_k``, the chunks LightRAG keeps (its ``chunk_top_k``; the profile's
    ``top_k``, every method's candidate count, also the pool's dense top-k) and ``index`` (``lightrag_index``).
    ``kg_top_k``: the entities / relationships LightRAG retrieves (its ``top_k``; None: LightRAG's 40).
    """

    variant: str = "hybrid"
    top_k: Optional[int] = None
    index: Optional[str] = None
    kg_top_k: Optional[int] = None
    uses_kg = True
    knobs = {"top_k": "top_k", "index": "lightrag_index"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant not in VARIANTS:
            raise ValueError(f"LightRAG: unknown variant {self.variant!r} (known: {sorted(VARIANTS)})")
        self.stats: Counter = Counter()
        self.index_manifest: dict = {}

    def run_meta(self) -> dict:
        """What the trace meta keeps of this run beyond the common fields: the manifest of the index it queried
        (counts and build cost, :class:`~kgir_lib.baselines.lightrag_index.LightRAGIndex`), so the indexing-cost
        table of a run whose traces were read back, or copied without the cache, still has LightRAG's row."""
        return {"lightrag_index": self.index_manifest} if self.index_manifest else {}

    @property
    def name(self) -> str:  # type: ignore[override]  # (a read-only view of the class-level name: VARIANTS)
        return VARIANTS[self.variant]

    def label(self, cfg) -> str:
        """The row label under ``cfg``: :attr:`name`, with the index named when it is not LightRAG's own
        extraction (``lightrag_index: suite_graph``, the CPU profiles: "LightRAG (hybrid; suite graph; shared
        reader)"), so no table passes the suite's graph off as LightRAG's."""
        index = self.index if self.index is not None else cfg.lightrag_index
        if index not in INDEX_LABELS:
            return self.name
        return f"LightRAG ({self.variant}; {INDEX_LABELS[index]}; shared reader)"

    @property
    def key(self) -> str:  # type: ignore[override]  # (a read-only view of the class-level key: KEYS)
        return KEYS[self.variant]

    def _keywords(self, ws: Workspace, index, questions: Sequence[Question]) -> list:
        """ONE batched keyword call; per question ``(info, ChatResult)``."""
        from lightrag.constants import DEFAULT_SUMMARY_LANGUAGE

        language = getattr(index.rag, "_resolved_summary_language", None) or DEFAULT_SUMMARY_LANGUAGE
        budget = ws.cfg.max_tokens("lightrag_keywords")
        reqs = [lightrag_request("lightrag_keywords", keyword_prompt(q.question, language), budget,
                                 response_format={"type": "json_object"}) for q in questions]
        out = []
        for q, res in zip(questions, ws.llm.generate(reqs, stage="lightrag_keywords") if reqs else []):
            status, high, low = parse_keywords(res.text)
            info = {"status": status, "high_level": high, "low_level": low, "raw": res.text}
            if not high and not low:
                info["fallback"] = ("question as low-level keyword" if len(q.question) < SHORT_QUERY
                                    else "no context (no keyword, question of 50 characters or more)")
                low = [q.question] if len(q.question) < SHORT_QUERY else []
                info["low_level"] = low
            self.stats[f"keywords_{status}"] += 1
            out.append((info, res))
        return out

    def _retrieve(self, ws: Workspace, index, question: str, k: int, info: Optional[dict]) -> dict:
        s = _settings()
        param = dict(mode=self.variant, top_k=int(self.kg_top_k or s["top_k"]), chunk_top_k=k,
                     max_entity_tokens=s["max_entity_tokens"], max_relation_tokens=s["max_relation_tokens"],
                     max_total_tokens=s["max_total_tokens"], enable_rerank=False)
        if info is not None:
            if not info["high_level"] and not info["low_level"]:
                self.stats["no_context"] += 1
                return {"status": "skipped", "message": info["fallback"], "data": {}}
            param.update(hl_keywords=info["high_level"], ll_keywords=info["low_level"])
        before = Counter(WARNINGS.counts)
        result = index.query(question, **param)
        result["warnings"] = dict(Counter(WARNINGS.counts) - before)
        return result

    def run(self, ws: Workspace, questions: Sequence[Question]) -> list:
        questions = list(questions)
        k = int(self.setting(ws, "top_k"))
        mode = self.setting(ws, "index")
        index = open_index(ws, mode, index_pool(ws, questions, k))
        self.index_manifest = {k: v for k, v in index.manifest.items() if k != "workspace"}
        pool = set(index.pool)
        keywords = self._keywords(ws, index, questions) if self.variant == "hybrid" else [(None, None)] * len(questions)
        retrieved, contexts, traces = [], [], []
        for q, (info, _) in zip(questions, keywords):
            result = self._retrieve(ws, index, q.question, k, info)
            data = result.get("data") or {}
            ranked, unmapped = chunk_ranking(data.get("chunks", []), pool)
            ents, rels = data.get("entities", []), data.get("relationships", [])
            lines = kg_lines(ents, rels, ws.cfg.max_evidence_triples, ws.cfg.passage_chars) if ents or rels else []
            n_ent = min(len(ents), len(lines) if ws.cfg.max_evidence_triples is None
                        else (ws.cfg.max_evidence_triples + 1) // 2)
            ctx = ranked[: ws.cfg.context_passages]
            retrieved.append((ranked, ctx))
            contexts.append(reader_context(ws, lines, n_ent, ctx))
            traces.append({"index": mode, "index_fingerprint": index.fingerprint, "query_mode": self.variant,
                           "keywords": info, "lightrag_status": result.get("status"),
                           "lightrag_message": result.get("message"), "entities": [e.get("entity_name") for e in ents],
                           "relationships": [[r.get("src_id"), r.get("tgt_id")] for r in rels],
                           "chunk_pids": ranked, "unmapped_chunks": unmapped,
                           "kg_lines": len(lines), "context_pids": ctx, "warnings": result.get("warnings", {})})
        stage = "lightrag_reader" if self.variant == "hybrid" else "lightrag_naive_reader"
        answers = answer_batch(ws.llm, [q.question for q in questions], contexts, stage=stage,
                               max_tokens=ws.cfg.max_tokens("reader"))
        out: list[MethodOutput] = []
        for q, (ranked, ctx), (_, kres), trace, (answer, res) in zip(questions, retrieved, keywords, traces, answers):
            usage = LLMUsage()
            if kres is not None:
                usage.add(kres)
            usage.add(res)
            trace.update(reader_raw=res.text, context_chars=len(contexts[len(out)]))
            out.append(MethodOutput(q.qid, answer, final_ranking(ctx, ranked), usage, trace))
        return out


KEYWORD_COLUMNS = ["dataset", "questions", *KEYWORD_STATUSES, "unusable %", "question as keyword", "no context"]


def keyword_counts(dataset: str, records: Sequence[Mapping]) -> dict:
    """One row of :func:`keyword_table`: the keyword replies of ``records`` (trace-file lines of ``lightrag``)
    by status, the share that gave no keyword (``empty`` + ``malformed``), and how LightRAG's rule for no
    keyword resolved them (the question as low-level keyword, or no context)."""
    infos = [((r.get("trace") or {}).get("keywords") or {}) for r in records]
    status = Counter(i.get("status") for i in infos if i)
    fallback: Counter = Counter(i.get("fallback") for i in infos if i.get("fallback"))
    unusable = status["empty"] + status["malformed"]
    return {"dataset": dataset, "questions": len(records), **{s: status[s] for s in KEYWORD_STATUSES},
            "unusable %": 100.0 * unusable / len(records) if records else float("nan"),
            "question as keyword": fallback["question as low-level keyword"],
            "no context": sum(n for f, n in fallback.items() if f.startswith("no context"))}


def keyword_table(run_dir: Path, datasets: Sequence[str], method_key: str = "lightrag") -> pd.DataFrame:
    """The keyword replies of LightRAG's hybrid mode in the run at ``run_dir``, per dataset with a trace file
    (:func:`keyword_counts`); datasets the method did not run are left out."""
    paths = {ds: trace_file(Path(run_dir), method_key, ds) for ds in datasets}
    rows = [keyword_counts(ds, read_traces(path)) for ds, path in paths.items() if path.is_file()]
    import pandas as pd

    return pd.DataFrame(rows, columns=KEYWORD_COLUMNS)
