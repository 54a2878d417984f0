"""FlashRAG's own IRCoT and ITER-RETGEN (PyPI ``flashrag-dev`` 0.1.2) on the suite's questions (peer environment).

Runs in ``benchmarks/peers/.venv-flashrag`` (``bash benchmarks/peers/setup.sh flashrag``); it cannot import the
suite. Everything FlashRAG decides is FlashRAG's: ``IRCOTPipeline`` and ``IterativePipeline``
(``flashrag/pipeline/active_pipeline.py``) with their own prompt templates, loops, list merging and answer parsing
(``ircot_pred_parse`` for IRCoT; ITER-RETGEN's last generation as it comes), and FlashRAG's ``OpenaiGenerator``.
What the driver supplies:

- **retriever**: :class:`SuiteDenseRetriever`, a FlashRAG ``BaseRetriever`` (so FlashRAG's own ``search`` /
  ``batch_search`` wrappers run) whose ``_search`` / ``_batch_search`` ask ``search_server.py`` (main environment:
  the suite's dense index, all-MiniLM-L6-v2, the whole corpus) for the top ``--topk``;
- **generator**: FlashRAG's ``OpenaiGenerator`` pointed at ``llm_cache_proxy.py`` in front of
  ``python -m llama_cpp.server`` (the local profile's GGUF), temperature 0, one request at a time
  (``generator_batch_size`` 1), ``--max-tokens-*`` a call;
- **configuration**: a plain dict with the keys the used classes read. The wheel of 0.1.2 ships no
  ``basic_config.yaml``, so FlashRAG's ``Config`` cannot be built from the package; the values the driver does
  not set are not read on this path.

Three adaptations, each because 0.1.2 cannot run this path otherwise (``benchmarks/peers/README.md``):

1. IRCoT's template is built by FlashRAG with ``enable_chat=False`` and so returns one string, but for the
   OpenAI framework ``PromptTemplate.truncate_prompt`` asserts a message list (and ``OpenaiGenerator.generate``
   takes message lists). :class:`OneUserMessage` sends that same string as one user message; its text, and
   FlashRAG's choice to leave the previous thoughts out of an OpenAI prompt (``get_string`` appends
   ``previous_gen`` only when the framework is not ``openai``), are untouched.
2. ``IterativePipeline.__init__`` takes no retriever or generator; it calls the module's ``get_retriever`` and
   ``get_generator`` (which would load a faiss index and a model from a hub). The driver hands it the injected
   objects by replacing those two module names for the constructor call only.
3. ``OpenaiGenerator`` asks tiktoken for the model name's encoding, which fails for a non-OpenAI name; the
   model name is registered with ``o200k_base`` (the encoding FlashRAG's templates count with). tiktoken reads
   its files from ``TIKTOKEN_CACHE_DIR`` (set up by ``setup.sh``; no download).

One option, off by default: ``--ircot-thoughts kept`` runs IRCoT only, with :class:`KeptThoughts` as its template,
a shim that puts the earlier thoughts in the prompt as FlashRAG's other frameworks do (``get_string`` appends
``previous_gen`` to the prompt string); the default, ``dropped``, is FlashRAG's OpenAI path as published.

Questions are processed in chunks (``--chunk``, >= 2: ``OpenaiGenerator.generate`` treats a one-prompt list as
a single prompt), each chunk through both pipelines, so a stopped run has both methods on the same questions; a
rerun repeats every request through the proxy's cache. Writes ``--out-dir``/``flashrag_ircot.jsonl`` and
``flashrag_iter_retgen.jsonl``: one compact record a question (retrieved pids with scores, thoughts or
generations, raw and parsed answer).

    benchmarks/peers/.venv-flashrag/bin/python benchmarks/peers/flashrag_pipelines.py --questions Q.jsonl \\
        --search-url http://127.0.0.1:S --llm-base-url http://127.0.0.1:P/v1 --model NAME --out-dir DIR [--n 3]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tiktoken  # noqa: E402
import tiktoken.model  # noqa: E402
from flashrag.dataset import Dataset, Item  # noqa: E402
from flashrag.generator import OpenaiGenerator  # noqa: E402
from flashrag.pipeline import IRCOTPipeline, IterativePipeline  # noqa: E402
from flashrag.pipeline import active_pipeline  # noqa: E402
from flashrag.prompt import PromptTemplate  # noqa: E402
from flashrag.retriever import BaseRetriever  # noqa: E402

FLASHRAG_VERSION = "0.1.2"


class SuiteDenseRetriever(BaseRetriever):
    """FlashRAG's retriever interface over the suite's dense index (``search_server.py``); logs every search."""

    def __init__(self, config: dict, url: str):
        super().__init__(config)
        self.url = url.rstrip("/") + "/search"
        self.log: list = []

    def _post(self, queries: list, num: int) -> list:
        body = json.dumps({"queries": queries, "k": int(num)}).encode("utf-8")
        with urllib.request.urlopen(urllib.request.Request(self.url, data=body, method="POST",
                                                           headers={"Content-Type": "application/json"}),
                                    timeout=600) as r:
            results = json.loads(r.read())["results"]
        for q, docs in zip(queries, results):
            self.log.append({"query": q, "hits": [[d["id"], d["score"]] for d in docs]})
        return [[{k: d[k] for k in ("id", "contents", "title", "text")} for d in docs] for docs in results], \
            [[d["score"] for d in docs] for docs in results]

    def _search(self, query: str, num: int = None, return_score: bool = False):
        docs, scores = self._post([query], num or self.topk)
        return (docs[0], scores[0]) if return_score else docs[0]

    def _batch_search(self, query_list, num: int = None, return_score: bool = False):
        if isinstance(query_list, str):
            query_list = [query_list]
        docs, scores = self._post(list(query_list), num or self.topk)
        return (docs, scores) if return_score else docs


class OneUserMessage(PromptTemplate):
    """FlashRAG's template, with a plain-string prompt (``enable_chat=False``) sent as one user message."""

    def truncate_prompt(self, prompt):
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
        return super().truncate_prompt(prompt)


class KeptThoughts(OneUserMessage):
    """:class:`OneUserMessage` that keeps IRCoT's earlier thoughts, a shim off by default (``--ircot-thoughts kept``).

    FlashRAG's ``PromptTemplate.get_string`` ends with ``input += previous_gen`` (the thoughts so far joined by
    spaces, appended to the prompt string right after its closing ``Thought:``) unless the framework is ``openai``,
    where it drops them. This template appends them the same way, under FlashRAG's own condition (``previous_gen``
    not ``None``, ``""`` or ``" "``), to the one user message, and counts the message again with FlashRAG's
    truncation. Nothing else of the prompt changes: a first thought's prompt is the published one, byte for byte."""

    def get_string(self, question=None, retrieval_result=None, formatted_reference=None, previous_gen=None,
                   messages=None, **params):
        prompt = super().get_string(question=question, retrieval_result=retrieval_result,
                                    formatted_reference=formatted_reference, previous_gen=previous_gen,
                                    messages=messages, **params)
        if messages is None and previous_gen is not None and previous_gen not in ["", " "]:
            prompt[-1]["content"] += previous_gen
            prompt = self.truncate_prompt(prompt)
        return prompt


IRCOT_TEMPLATES = {"dropped": OneUserMessage, "kept": KeptThoughts}   # --ircot-thoughts


def flashrag_config(args, work: Path, max_tokens: int) -> dict:
    """The keys FlashRAG's pipelines, template, retriever base, evaluator and OpenAI generator read."""
    return {"framework": "openai", "generator_model": args.model, "generator_batch_size": 1,
            "generation_params": {"max_tokens": max_tokens, "temperature": 0.0},
            "openai_setting": {"base_url": args.llm_base_url, "api_key": "not-needed"},
            # above any prompt here: 0.1.2's truncation for the OpenAI framework calls an attribute it never sets
            "generator_max_input_len": args.max_input_len,
            "device": "cpu", "dataset_name": args.dataset, "save_dir": str(work / "flashrag_save"),
            "save_retrieval_cache": False, "save_metric_score": False, "save_intermediate_data": False,
            "metrics": [], "retrieval_method": "suite-dense", "retrieval_topk": args.topk, "index_path": None,
            "corpus_path": None, "use_retrieval_cache": False, "retrieval_cache_path": None, "use_reranker": False}


def build(args, work: Path) -> tuple:
    """``(ircot_pipeline, iterative_pipeline, retriever)`` with the injected retriever and generators."""
    tiktoken.model.MODEL_TO_ENCODING.setdefault(args.model, "o200k_base")
    cfg_ircot = flashrag_config(args, work, args.max_tokens_ircot)
    cfg_iter = flashrag_config(args, work, args.max_tokens_iter_retgen)
    retriever = SuiteDenseRetriever(cfg_ircot, args.search_url)
    ircot = IRCOTPipeline(cfg_ircot, retriever=retriever, generator=OpenaiGenerator(cfg_ircot),
                          max_iter=args.ircot_max_iter)
    # adaptation 1 (module docstring); with --ircot-thoughts kept, the shim on top of it
    ircot.prompt_template.__class__ = IRCOT_TEMPLATES[getattr(args, "ircot_thoughts", "dropped")]
    gen_iter = OpenaiGenerator(cfg_iter)
    saved = active_pipeline.get_retriever, active_pipeline.get_generator
    active_pipeline.get_retriever, active_pipeline.get_generator = (lambda c: retriever), (lambda c: gen_iter)
    try:   # adaptation 2
        iterative = IterativePipeline(cfg_iter, iter_num=args.iter_num)
    finally:
        active_pipeline.get_retriever, active_pipeline.get_generator = saved
    return ircot, iterative, retriever


def _hits(docs: list, scores: list) -> list:
    return [[d["id"], round(float(s), 6)] for d, s in zip(docs, scores)]


def ircot_record(item, searches: list) -> dict:
    """One question of FlashRAG's IRCoT: its searches, thoughts, final list (FlashRAG's order), answers."""
    out = item.output
    thoughts = [out[f"intermediate_output_iter{i}"]["new_thought"]
                for i in range(1, 100) if f"intermediate_output_iter{i}" in out]
    score = {}
    for s in searches:
        for pid, sc in s["hits"]:
            score[pid] = max(score.get(pid, sc), sc)
    final = [d["id"] for d in out["retrieval_result"]]
    return {"qid": item.id, "question": item.question, "searches": searches, "thoughts": thoughts,
            "iterations": len(thoughts), "stopped_by_answer": any("So the answer is:" in t for t in thoughts),
            "final": [[pid, score[pid]] for pid in final], "raw_pred": out.get("raw_pred", out.get("pred")),
            "pred": out["pred"]}


def iter_record(item, rounds: int) -> dict:
    """One question of FlashRAG's ITER-RETGEN: each round's query, hits and generation; the answer."""
    out = item.output
    recs = []
    for i in range(rounds):
        recs.append({"round": i + 1, "hits": [d["id"] for d in out[f"retrieval_result_iter_{i}"]],
                     "generation": out[f"pred_iter_{i}"]})
    return {"qid": item.id, "question": item.question, "rounds": recs, "iterations": rounds,
            "final": [d["id"] for d in out["retrieval_result"]], "pred": out["pred"]}


def _write(path: Path, rows: list) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)


def chunks(n: int, size: int) -> list:
    """``[(start, stop), ...]`` covering ``range(n)`` in pieces of ``size`` (>= 2), a last piece of one merged
    into the one before (FlashRAG's generator reads a one-prompt list as one prompt)."""
    if size < 2:
        raise ValueError(f"parameter 'chunk' must be at least 2, got {size}")
    bounds = [(i, min(i + size, n)) for i in range(0, n, size)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] == 1:
        bounds[-2:] = [(bounds[-2][0], n)]
    return bounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=Path, required=True, help="JSON lines with qid and question")
    ap.add_argument("--search-url", required=True)
    ap.add_argument("--llm-base-url", required=True, help="OpenAI-compatible base URL (ending in /v1)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--dataset", default="musique_train")
    ap.add_argument("--topk", type=int, default=10)
    ap.add_argument("--ircot-max-iter", type=int, default=3)
    ap.add_argument("--iter-num", type=int, default=3)
    ap.add_argument("--max-tokens-ircot", type=int, default=64)
    ap.add_argument("--max-tokens-iter-retgen", type=int, default=32)
    ap.add_argument("--max-input-len", type=int, default=8192)
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--n", type=int, default=None, help="only the first n questions (a smoke run)")
    ap.add_argument("--ircot-thoughts", choices=sorted(IRCOT_TEMPLATES), default="dropped",
                    help="dropped: FlashRAG's OpenAI path as published (both methods); kept: IRCoT only, with the "
                         "KeptThoughts shim (earlier thoughts in the prompt, as FlashRAG's other frameworks)")
    args = ap.parse_args()
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        raise SystemExit("TIKTOKEN_CACHE_DIR is not set: tiktoken would download its encoding (setup.sh flashrag "
                         "puts the files in benchmarks/peers/.venv-flashrag/tiktoken_cache)")
    questions = [json.loads(x) for x in args.questions.read_text(encoding="utf-8").splitlines() if x.strip()]
    for n, q in enumerate(questions, 1):
        if not isinstance(q.get("qid"), str) or not isinstance(q.get("question"), str):
            raise SystemExit(f"{args.questions}:{n}: a question record needs string fields 'qid' and 'question'")
    questions = questions[: args.n] if args.n else questions
    args.out_dir.mkdir(parents=True, exist_ok=True)
    meta = {"flashrag": FLASHRAG_VERSION, "model": args.model, "topk": args.topk,
            "ircot_max_iter": args.ircot_max_iter, "iter_num": args.iter_num,
            "max_tokens_ircot": args.max_tokens_ircot, "max_tokens_iter_retgen": args.max_tokens_iter_retgen,
            "chunk": args.chunk, "questions": len(questions)}
    kept = args.ircot_thoughts == "kept"
    if kept:   # (the as-run records' meta stays as it was)
        meta.update(ircot_thoughts="kept", methods=["ircot"])
    (args.out_dir / "flashrag_meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    ircot, iterative, retriever = build(args, args.out_dir)
    rows_ircot, rows_iter = [], []
    t0 = time.time()
    legs = args.out_dir / "flashrag_legs.jsonl"   # one line a finished chunk: this leg's start and the time now
    for start, stop in chunks(len(questions), args.chunk):
        part = questions[start:stop]
        items = [Item({"id": q["qid"], "question": q["question"], "golden_answers": []}) for q in part]
        data = Dataset({"dataset_name": args.dataset}, data=items)
        for item in data:   # IRCOTPipeline.run is run_item over the items, then its evaluate (parsing)
            before = len(retriever.log)
            ircot.run_item(item)
            item.update_output("searches", retriever.log[before:])
        ircot.evaluate(data, do_eval=False, pred_process_fun=active_pipeline.ircot_pred_parse)
        rows_ircot += [ircot_record(it, it.output.pop("searches")) for it in data]
        if not kept:   # the shim changes IRCoT's prompt only: ITER-RETGEN is not run again
            data_iter = Dataset({"dataset_name": args.dataset}, data=[
                Item({"id": q["qid"], "question": q["question"], "golden_answers": []}) for q in part])
            iterative.run(data_iter, do_eval=False)
            rows_iter += [iter_record(it, args.iter_num) for it in data_iter]
        _write(args.out_dir / "flashrag_ircot.jsonl", rows_ircot)   # both methods' files on the same questions
        if not kept:
            _write(args.out_dir / "flashrag_iter_retgen.jsonl", rows_iter)
        with legs.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"leg_start": round(t0, 3), "t": round(time.time(), 3), "done": stop,
                                 "of": len(questions)}) + "\n")
        print(f"flashrag: {stop} of {len(questions)} questions ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
