"""What the run's graphs cost (:func:`indexing_cost`), and the paper-scale extrapolation: tokens and GPU-hours of
the ``paper`` profile.

Inputs are *measured* tokens (the rehearsal run, ``scripts/rehearsal.sh``: notebook 05's
``05_cost_per_question.csv`` per method, notebook 01's usage for extraction per passage) and an
*assumed* serving throughput (:class:`Throughput`: no GPU exists here, so GPU-hours are never a
measurement). Arithmetic only: tokens scale linearly with questions and passages, and

    wall hours = prompt tokens / prefill tok/s + completion tokens / decode tok/s   (no overlap: an upper bound)
    GPU-hours  = wall hours x GPUs of the server

``python -m kgir_lib.eval.cost OUT_STEM`` (with ``KGIR_RESULTS_DIR`` of the rehearsal run) writes ``OUT_STEM.csv``
and ``OUT_STEM.md``.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import pandas as pd

from ..config import load_config
from ..data import load_dataset
from ..kg.extract import extraction_requests
from ..kg.store import kg_dir, load_kg, openie_file
from ..llm.response_log import SECONDS_DIGITS, logged_seconds
from ..llm.cache import LLMCache, cache_key
from ..methods.base import Workspace
from ..report import INDEXING_TOKENS_M, to_markdown

# Corpus sizes of HippoRAG 2's 1000-question sets (HippoRAG 2 paper, Table 6 / its released corpora)
PAPER_CORPUS_PASSAGES: dict = {"musique": 11_656, "hotpotqa": 9_811}
PAPER_QUESTIONS = 1000
# HippoRAG 2's published indexing cost on MuSiQue (HippoRAG 2 paper, arXiv 2502.14802): millions of tokens
HIPPORAG2_INDEXING_M: dict = dict(INDEXING_TOKENS_M)


@dataclass(frozen=True)
class Throughput:
    """An ASSUMED aggregate throughput of one serving deployment (not a measurement).

    ``prefill_tok_s``: prompt tokens processed per second over all requests in flight;
    ``decode_tok_s``: completion tokens generated per second over all requests in flight;
    ``gpus``: GPUs the deployment occupies (GPU-hours = wall hours x gpus).
    """
    label: str
    prefill_tok_s: float
    decode_tok_s: float
    gpus: int = 8

    def hours(self, prompt_tokens: float, completion_tokens: float) -> float:
        """Wall-clock hours to process the tokens (prefill and decode added, not overlapped)."""
        if self.prefill_tok_s <= 0 or self.decode_tok_s <= 0:
            raise ValueError("throughputs must be > 0")
        return (prompt_tokens / self.prefill_tok_s + completion_tokens / self.decode_tok_s) / 3600.0

    def gpu_hours(self, prompt_tokens: float, completion_tokens: float) -> float:
        """GPU-hours: :meth:`hours` x ``gpus``."""
        return self.hours(prompt_tokens, completion_tokens) * self.gpus


# Assumptions for vLLM serving Qwen2.5-72B-Instruct (BF16, tensor-parallel 8) on 8 x A800-80GB with the paper
# profile's 64 requests in flight. NOT measured here (no GPU): planning numbers from first principles.
#   prefill: 2 x 72e9 FLOP a token; 8 x 312 TFLOP/s BF16 peak at 30-50 % utilisation -> ~5-9k tok/s;
#   decode: memory-bound, ~145 GB of weights + the KV cache of 64 sequences read per step over 8 x 2 TB/s,
#           ~25-40 ms a step -> ~1.5-2.5k tok/s summed over 64 sequences.
# A pessimistic / central / optimistic bracket; replace with a `vllm bench serve` result before relying on it.
ASSUMED_72B_8xA800: tuple = (
    Throughput("assumed low (4k prefill / 0.8k decode tok/s)", 4_000.0, 800.0),
    Throughput("assumed central (7k prefill / 1.5k decode tok/s)", 7_000.0, 1_500.0),
    Throughput("assumed high (12k prefill / 3k decode tok/s)", 12_000.0, 3_000.0),
)


def online_cost(per_question: pd.DataFrame, n_questions: int = PAPER_QUESTIONS, n_datasets: int = 2,
                throughputs: tuple = ASSUMED_72B_8xA800) -> pd.DataFrame:
    """Per method: measured tokens a question scaled to ``n_questions x n_datasets`` questions, and GPU-hours.

    ``per_question``: notebook 05's cost table, columns ``method``, ``prompt tokens / q``, ``completion tokens
    / q`` (and optionally ``LLM calls / q``). Returns one row per method and a ``total (every method)`` row;
    token columns in millions.
    """
    n = n_questions * n_datasets
    rows = []
    for _, r in per_question.iterrows():
        p, c = float(r["prompt tokens / q"]), float(r["completion tokens / q"])
        row = {"method": r["method"], "LLM calls / q": float(r.get("LLM calls / q", float("nan"))),
               "prompt tokens / q": p, "completion tokens / q": c, "questions": n,
               "prompt tokens (M)": p * n / 1e6, "completion tokens (M)": c * n / 1e6}
        rows.append(row)
    out = pd.DataFrame(rows)
    total = {"method": "total (every method)", "LLM calls / q": out["LLM calls / q"].sum(),
             "prompt tokens / q": out["prompt tokens / q"].sum(),
             "completion tokens / q": out["completion tokens / q"].sum(), "questions": n,
             "prompt tokens (M)": out["prompt tokens (M)"].sum(),
             "completion tokens (M)": out["completion tokens (M)"].sum()}
    out = pd.concat([out, pd.DataFrame([total])], ignore_index=True)
    return _with_gpu_hours(out, throughputs)


def extraction_cost(prompt_per_passage: float, completion_per_passage: float,
                    corpora: Mapping[str, int] = PAPER_CORPUS_PASSAGES,
                    throughputs: tuple = ASSUMED_72B_8xA800) -> pd.DataFrame:
    """Extraction (one call a passage, notebook 01's prompt) of every passage of ``corpora``; a total row."""
    rows = [{"corpus": name, "passages": n, "prompt tokens / passage": prompt_per_passage,
             "completion tokens / passage": completion_per_passage,
             "prompt tokens (M)": prompt_per_passage * n / 1e6,
             "completion tokens (M)": completion_per_passage * n / 1e6} for name, n in corpora.items()]
    out = pd.DataFrame(rows)
    total = {"corpus": "total", "passages": int(out["passages"].sum()),
             "prompt tokens / passage": prompt_per_passage, "completion tokens / passage": completion_per_passage,
             "prompt tokens (M)": out["prompt tokens (M)"].sum(),
             "completion tokens (M)": out["completion tokens (M)"].sum()}
    return _with_gpu_hours(pd.concat([out, pd.DataFrame([total])], ignore_index=True), throughputs)


def _with_gpu_hours(df: pd.DataFrame, throughputs: tuple) -> pd.DataFrame:
    df = df.copy()
    for tp in throughputs:
        df[f"GPU-hours, {tp.label}"] = [tp.gpu_hours(p * 1e6, c * 1e6) for p, c in
                                        zip(df["prompt tokens (M)"], df["completion tokens (M)"])]
    return df


def hipporag2_comparison(extraction: pd.DataFrame, corpus: str = "musique") -> pd.DataFrame:
    """Our extrapolated extraction tokens for ``corpus`` beside HippoRAG 2's published indexing cost (MuSiQue)."""
    row = extraction.set_index("corpus").loc[corpus]
    rows = [{"system": f"KGIR-RAG / KG²RAG extraction, one call a passage (extrapolated, {corpus})",
             "input tokens (M)": float(row["prompt tokens (M)"]),
             "output tokens (M)": float(row["completion tokens (M)"]), "source": "this repository, extrapolated"}]
    rows += [{"system": name, "input tokens (M)": i, "output tokens (M)": o,
              "source": "published: HippoRAG 2 paper (MuSiQue; arXiv 2502.14802)"}
             for name, (i, o) in HIPPORAG2_INDEXING_M.items()]
    return pd.DataFrame(rows)


def measured_extraction(cfg, dataset: str, passages: Optional[Sequence[str]] = None,
                        cache: Optional[LLMCache] = None) -> dict:
    """The LLM extraction of ``passages`` (default: every passage of ``dataset``'s stored graph,
    ``<run>/kg/<dataset>``), read back from the run's LLM cache at the profile's budget
    (``cfg.max_tokens("extract")``): passages found, prompt / completion tokens and server seconds (as the response
    log records them), summed. Only calls of the graph's own extraction are counted (not notebook 01's display of
    raw outputs, which may ask with another budget). ``cache``: an open cache to read (default: the run's
    ``cache/llm.sqlite``, opened and closed here)."""
    if passages is None:
        passages = sorted(load_kg(kg_dir(cfg, dataset)).extracted)
    ds = load_dataset(dataset, cfg.data_path)
    reqs = extraction_requests([ds.corpus[p] for p in passages if p in ds.corpus], cfg.max_tokens("extract"))
    own = cache is None
    if cache is None:
        cache = LLMCache(cfg.run_dir / "cache" / "llm.sqlite")
    model_id = f"{cfg.llm_backend}:{cfg.llm_model}"
    out: dict[str, Any] = {"dataset": dataset, "passages": 0, "prompt_tokens": 0, "completion_tokens": 0,
                           "seconds": 0.0}
    try:
        for req in reqs:
            hit = cache.get(cache_key(model_id, req.payload()))
            if hit:
                out["passages"] += 1
                out["prompt_tokens"] += int(hit["prompt_tokens"])
                out["completion_tokens"] += int(hit["completion_tokens"])
                out["seconds"] += logged_seconds(hit.get("seconds"))
    finally:
        if own:
            cache.close()
    return out


def from_run(per_question_csv: Path, extraction: dict) -> tuple:
    """``(online, extraction, comparison)`` tables from notebook 05's per-question cost table and a
    :func:`measured_extraction` result (tokens per passage = tokens / passages found)."""
    per_q = pd.read_csv(per_question_csv)
    n = extraction["passages"]
    if n <= 0:
        raise ValueError(f"no extraction call of {extraction.get('dataset')!r} found in the LLM cache")
    ext = extraction_cost(extraction["prompt_tokens"] / n, extraction["completion_tokens"] / n)
    return online_cost(per_q), ext, hipporag2_comparison(ext)


def extraction_cost_table(cfg, builds: Mapping, wall_seconds: Mapping[str, float],
                          cache: Optional[LLMCache] = None) -> pd.DataFrame:
    """Notebook 01 §6: what extracting each graph's pool cost (KGIR-RAG §3.2 / KG²RAG's offline stage).

    ``builds``: ``{dataset: build}`` as :func:`kgir_lib.kg.extract.build_kg` returns them. For an LLM graph the
    pool's extraction calls are read back from the LLM cache (:func:`measured_extraction`), so the numbers are
    the graph's, the same whether this run made the calls, found them in the cache or found the graph already
    stored. What this execution did (passages it extracted, calls it made, its wall seconds) is kept in columns
    named ``this run`` and ``wall seconds``, which :func:`kgir_lib.report.save_table` writes to the run's
    ``runtime/`` folder, not to the committed table. ``cache``: the LLM's cache (default: the run's).
    """
    rows = []
    for name, b in builds.items():
        row = {"dataset": name, "source": b.source, "passages in pool": len(b.pool)}
        m = measured_extraction(cfg, name, list(b.pool), cache) if b.source == "llm" else None
        row.update({"calls found": m["passages"] if m else 0, "prompt tokens": m["prompt_tokens"] if m else 0,
                    "completion tokens": m["completion_tokens"] if m else 0,
                    "LLM seconds": round(m["seconds"], 1) if m else 0.0,
                    "LLM s / passage": round(m["seconds"] / m["passages"], 2) if m and m["passages"] else None})
        r = b.report
        row.update({"extracted this run": r.n_passages if r else 0, "new LLM calls this run": r.new_calls if r else 0,
                    "wall seconds": round(wall_seconds.get(name, 0.0), 1)})
        rows.append(row)
    return pd.DataFrame(rows).set_index("dataset")


# ----------------------------------------------------------------------------- the cost of this run's graphs
def indexing_cost(ws: Workspace, extract_usage=None, stage_prefix: str = "extract") -> dict:
    """The graph of ``ws`` and what building it cost.

    ``source``: ``openie`` (published OpenIE imported, e.g. musique_train: GPT-3.5,
    cost not measured here) or ``llm``. For an LLM graph the cost is read back from
    the LLM cache: every processed passage's extraction request
    (:func:`kgir_lib.kg.extract.extraction_requests`) is looked up and its stored
    tokens and backend seconds summed, whichever notebook extracted it.
    ``extract_usage`` (a :class:`kgir_lib.llm.Usage`) adds how many extraction calls
    were made while this notebook ran (on demand). ``extract_at_budget`` counts the replies whose completion
    reached the profile's extraction budget (``cfg.max_tokens("extract")``): those were cut, so the passage
    lost its last triples.
    """
    kg = ws.kg
    st = kg.stats()
    row: dict = {"dataset": ws.dataset.name, "passages_in_corpus": len(ws.dataset.corpus),
                 "passages_extracted": st["passages"], "entities": st["entities"], "relations": st["relations"],
                 "triples": st["triples"]}
    imported = openie_file(ws.cfg, ws.dataset.name) is not None
    row["source"] = "openie (published GPT-3.5 OpenIE, imported)" if imported else f"llm ({ws.llm.model_id})"
    row.update({"extract_calls_found": 0, "extract_prompt_tokens": 0, "extract_completion_tokens": 0,
                "extract_seconds": 0.0, "extract_at_budget": 0})
    if not imported and ws.llm.cache is not None and st["passages"]:
        pids = sorted(kg.extracted)
        budget = ws.cfg.max_tokens("extract")
        reqs = extraction_requests([ws.dataset.corpus[p] for p in pids if p in ws.dataset.corpus], max_tokens=budget)
        for req in reqs:
            hit = ws.llm.cache.get(cache_key(ws.llm.model_id, req.payload()))
            if hit:
                row["extract_calls_found"] += 1
                row["extract_prompt_tokens"] += int(hit["prompt_tokens"])
                row["extract_completion_tokens"] += int(hit["completion_tokens"])
                row["extract_seconds"] += logged_seconds(hit.get("seconds"))
                row["extract_at_budget"] += int(int(hit["completion_tokens"]) >= budget)
    row["extract_seconds"] = round(row["extract_seconds"], SECONDS_DIGITS)
    if extract_usage is not None:
        calls = sum(s.calls - s.cache_hits for name, s in extract_usage.stages.items() if name.startswith(stage_prefix))
        row["extract_calls_in_this_run"] = int(calls)
    return row



def extraction_cut_sentence(table: pd.DataFrame, dataset: str, budget: int,
                            pool: Optional[tuple] = None) -> str:
    """How many of ``dataset``'s extraction replies reached the token limit, and what that means, in one sentence,
    from a run's indexing cost table (:func:`indexing_cost`: ``extract_calls_found`` replies, ``extract_at_budget``
    of them at ``budget``, the profile's ``max_tokens_extract``). ``pool``: ``(cut, passages)`` of notebook 01's
    extraction pool (Table 3's ``replies_cut_at_token_limit``), said beside it.

    A reply that reached the limit was cut, and its triples after the cut are lost. When fewer than half were cut,
    the middle reply by length (the median passage's) ended before the limit, so its triples fit; how long a cut
    reply would have run is not recorded, so the limit at which every passage's triples fit is not measured."""
    r = table.set_index("dataset").loc[dataset]
    n, cut = int(r["extract_calls_found"]), int(r["extract_at_budget"])
    if n == 0:
        source = str(r["source"])
        graph = source[source.index("(") + 1:-1] if source.endswith(")") and "(" in source else source
        return f"{dataset}: no extraction reply (its graph: {graph}), so none was cut."
    where = (f" ({pool[0]} of the {pool[1]} replies of notebook 01's pool, Table 3; the others extracted on demand)"
             if pool is not None else "")
    median = ("fewer than half, so the median passage's reply ended before the limit and its triples fit"
              if 2 * cut < n else "half or more, so the median passage's reply was cut too")
    return (f"{dataset}: {cut} of the {n} extraction replies ({100 * cut / n:.1f} %) reached the {budget}-token "
            f"limit (`max_tokens_extract`) and were cut, their triples after the cut lost and uncounted{where}; "
            f"{median}. How far a cut reply would have run is not recorded, so the limit at which every passage's "
            f"triples fit is not measured.")


def main(argv: Optional[list] = None) -> int:
    """``python -m kgir_lib.eval.cost OUT_STEM [--profile rehearsal] [--extract-dataset hotpotqa]`` (the run directory
    is the profile's, so set ``KGIR_RESULTS_DIR`` as for the run)."""
    import argparse


    ap = argparse.ArgumentParser(description="Extrapolate a rehearsal run's measured tokens to paper scale.")
    ap.add_argument("out_stem", type=Path)
    ap.add_argument("--profile", default="rehearsal")
    ap.add_argument("--extract-dataset", default="hotpotqa")
    args = ap.parse_args(argv)
    cfg = load_config(args.profile)
    measured = measured_extraction(cfg, args.extract_dataset)
    online, extraction, comparison = from_run(cfg.run_dir / "tables" / "05_cost_per_question.csv", measured)
    both = pd.concat([online.assign(part="online (1000 q x 2 datasets)"),
                      extraction.rename(columns={"corpus": "method"}).assign(part="extraction (full corpora)")])
    stem = args.out_stem
    stem.parent.mkdir(parents=True, exist_ok=True)
    both.to_csv(stem.with_suffix(".csv"), index=False)
    stem.with_suffix(".md").write_text("\n\n".join([
        f"measured extraction ({args.extract_dataset}, {cfg.run_dir}): {measured}",
        to_markdown(online, ".2f"), to_markdown(extraction, ".2f"), to_markdown(comparison, ".2f")]) + "\n")
    print(f"wrote {stem.with_suffix('.csv')} and {stem.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
