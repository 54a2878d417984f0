"""What indexing with Microsoft GraphRAG (PyPI ``graphrag`` 3.3.0, standard method) costs on this machine.

Indexes the first N passages of a suite corpus (default: 20 of musique_train, file order, each passage one
input document written as ``title\\ntext``) with GraphRAG's own ``graphrag index --method standard``, run in
its own environment (``benchmarks/peers/.venv-graphrag``, ``bash benchmarks/peers/setup.sh graphrag``),
against servers on 127.0.0.1 started from the main environment:

* the LLM: ``python -m llama_cpp.server`` on the suite's embedded GGUF (default the ``sample`` profile's
  Qwen2.5-Coder-0.5B-Instruct Q4_K_M), 2 threads;
* the embedder: ``embed_server.py`` (all-MiniLM-L6-v2, 384 dimensions);
* between GraphRAG and both, a counting proxy (this file, ``proxy``) that forwards every request one at a
  time, times it, and appends request and response to a JSONL log. Each LLM call is classified by what
  GraphRAG sent (its extraction prompt, its gleaning turn, its description-summary prompt, its community-report
  prompt), so nothing is estimated: the counts are the requests that reached the model.

The proxy changes two things on the way, both because llama_cpp.server differs from the OpenAI API and both
recorded in the report: GraphRAG asks for community reports as OpenAI structured output
(``response_format: {"type": "json_schema", ...}``), which llama_cpp.server rejects; the proxy passes the same
schema as llama.cpp's ``{"type": "json_object", "schema": ...}``, a grammar that constrains the output to it.
And it sets ``repeat_penalty`` 1.0 (llama_cpp.server's default is 1.1; the suite decodes with 1.0).

Usage (main environment; the peer environment must exist):

    .venv/bin/python benchmarks/peers/graphrag_cost.py run [--n 20] [--deadline 00:25]

``run`` writes ``results/benchmarks/graphrag_indexing.md`` and ``.json``; ``report`` rebuilds both from a
finished work folder without an LLM call. Work folder: ``benchmarks/peers/.work/graphrag/`` (git-ignored).
tiktoken: GraphRAG chunks and counts with ``o200k_base``/``cl100k_base``, which tiktoken downloads on first
use; the ``litellm`` package (a GraphRAG dependency) ships both files and points ``TIKTOKEN_CACHE_DIR`` at
them, and the run sets the same variable explicitly, so nothing is downloaded.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "benchmarks" / "peers"
PEER_VENV = PEERS / ".venv-graphrag"
MAIN_PY = Path(os.environ.get("KGIR_PYTHON", ROOT / ".venv" / "bin" / "python"))
DEFAULT_WORK = PEERS / ".work" / "graphrag"
OUT_MD = ROOT / "results" / "benchmarks" / "graphrag_indexing.md"
CORPUS_SIZE_NOTE = "musique_train"

# ---------------------------------------------------------------- classification of GraphRAG's LLM calls
# Markers are short phrases of GraphRAG 3.3.0's built-in prompts (graphrag/prompts/index/*.py); the run
# uses the built-in prompts (settings.yaml names none).
EXTRACT_MARK = "-Goal-\nGiven a text document that is potentially relevant to this activity and a list of entity types"
GLEAN_MARK = "MANY entities and relationships were missed in the last extraction"
LOOP_MARK = "Answer Y if there are still entities or relationships that need to be added"
SUMMARIZE_MARK = "generating a comprehensive summary of the data provided below"
REPORT_MARK = "helps a human analyst to perform general information discovery"
CLAIMS_MARK = "Extract all entities that match the predefined entity specification"
CONNECTIVITY_MARK = "This is an LLM connectivity test"  # GraphRAG's start-up check of each model


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def classify(request: dict) -> str:
    """The kind of one chat-completion request GraphRAG sent."""
    msgs = request.get("messages") or []
    last_user = next((_text(m.get("content")) for m in reversed(msgs) if m.get("role") == "user"), "")
    first = _text(msgs[0].get("content")) if msgs else ""
    if CONNECTIVITY_MARK in first:
        return "connectivity_test"
    if len(msgs) > 1 and GLEAN_MARK in last_user:
        return "gleaning"
    if len(msgs) > 1 and LOOP_MARK in last_user:
        return "gleaning_loop_check"
    if EXTRACT_MARK in first:
        return "extraction"
    if SUMMARIZE_MARK in first:
        return "summarize_descriptions"
    if REPORT_MARK in first or request.get("response_format"):
        return "community_report"
    if CLAIMS_MARK in first:
        return "extract_claims"
    return "other"


# GraphRAG's record format (graph_extractor.py): records split by "##", fields by "<|>", an entity needs
# 4 fields, a relationship 5; anything else is dropped without a word. The same rule, counted.
def parse_extraction(text: str) -> dict:
    ents = rels = bad = 0
    for raw in text.split("##"):
        rec = re.sub(r"^\(|\)$", "", raw.strip())
        if not rec or rec == "<|COMPLETE|>":
            continue
        fields = rec.split("<|>")
        if fields[0] == '"entity"' and len(fields) >= 4:
            ents += 1
        elif fields[0] == '"relationship"' and len(fields) >= 5:
            rels += 1
        else:
            bad += 1
    return {"entities": ents, "relationships": rels, "dropped_records": bad}


REPORT_KEYS = ("title", "summary", "findings", "rating", "rating_explanation")


def parse_report(text: str) -> bool:
    """True if a community-report response is the JSON GraphRAG's CommunityReportResponse needs."""
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return False
    if not isinstance(obj, dict) or any(k not in obj for k in REPORT_KEYS):
        return False
    return isinstance(obj["findings"], list) and all(
        isinstance(f, dict) and "summary" in f and "explanation" in f for f in obj["findings"])


# ---------------------------------------------------------------- the counting proxy
def _loadavg() -> float | None:
    """The 1-minute load average when a request ends: above the server's threads, the CPU was shared."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None



class Proxy:
    """Forwards /v1/chat/completions to the LLM and /v1/embeddings to the embedder, one request at a time."""

    def __init__(self, llm: str, embed: str, log: Path):
        self.llm, self.embed, self.log = llm.rstrip("/"), embed.rstrip("/"), log
        self.lock = threading.Lock()
        self.seq = 0

    def forward(self, path: str, body: bytes, method: str) -> tuple[int, bytes, str]:
        upstream = self.embed if path.startswith("/v1/embeddings") else self.llm
        req_json = None
        if body:
            try:
                req_json = json.loads(body)
            except json.JSONDecodeError:
                req_json = None
        if path.startswith("/v1/chat/completions") and isinstance(req_json, dict):
            rf = req_json.get("response_format")
            if isinstance(rf, dict) and rf.get("type") == "json_schema":
                schema = (rf.get("json_schema") or {}).get("schema")
                req_json["response_format"] = {"type": "json_object", **({"schema": schema} if schema else {})}
                req_json["_proxy_note"] = "json_schema->json_object"
            req_json.setdefault("repeat_penalty", 1.0)
            note = req_json.pop("_proxy_note", None)
            body = json.dumps(req_json).encode()
        else:
            note = None
        with self.lock:  # one request at a time: the seconds below are the model's, not a queue's
            self.seq += 1
            seq = self.seq
            t0 = time.time()
            try:
                r = urllib.request.urlopen(urllib.request.Request(
                    upstream + path, data=body if method == "POST" else None, method=method,
                    headers={"Content-Type": "application/json"}), timeout=3600)
                status, data, ctype = r.status, r.read(), r.headers.get("Content-Type", "application/json")
            except urllib.error.HTTPError as e:
                status, data, ctype = e.code, e.read(), e.headers.get("Content-Type", "application/json")
            except Exception as e:  # noqa: BLE001 - reported to the client and logged
                status, data, ctype = 502, json.dumps({"error": repr(e)}).encode(), "application/json"
            t1 = time.time()
        if path.startswith("/v1/chat/completions") or path.startswith("/v1/embeddings"):
            rec = {"seq": seq, "path": path, "status": status, "t_start": t0, "seconds": t1 - t0,
                   "loadavg_1min": _loadavg()}
            if path.startswith("/v1/embeddings"):
                inp = (req_json or {}).get("input")
                rec["n_inputs"] = len(inp) if isinstance(inp, list) else 1
            else:
                rec["request"] = req_json
                rec["proxy_note"] = note
                try:
                    rec["response"] = json.loads(data)
                except json.JSONDecodeError:
                    rec["response_raw"] = data.decode("utf-8", "replace")[:2000]
            with self.log.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return status, data, ctype

    def serve(self, port: int) -> ThreadingHTTPServer:
        proxy = self

        class H(BaseHTTPRequestHandler):
            def _go(self, method):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                status, data, ctype = proxy.forward(self.path, body, method)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                self._go("POST")

            def do_GET(self):
                self._go("GET")

            def log_message(self, *a):
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", port), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return srv


# ---------------------------------------------------------------- preparing GraphRAG's project folder
def corpus_path(data_dir: Path, dataset: str) -> Path:
    for p in (data_dir / dataset / f"{dataset}_corpus.json", data_dir / f"{dataset}_corpus.json"):
        if p.exists():
            return p
    raise SystemExit(f"graphrag_cost: no {dataset}_corpus.json under {data_dir}")


SETTINGS = """\
# Written by benchmarks/peers/graphrag_cost.py. GraphRAG 3.3.0 defaults except: the two models point at the
# counting proxy on 127.0.0.1; one request at a time (2-core CPU, one llama.cpp server); greedy decoding with a
# completion cap; 384-dimensional vectors (all-MiniLM-L6-v2). Built-in prompts (none named here).
completion_models:
  default_completion_model:
    model_provider: openai
    model: {model}
    api_base: {base}
    api_key: ${{GRAPHRAG_API_KEY}}
    call_args:
      temperature: 0
      max_tokens: {max_tokens}
    retry:
      type: exponential_backoff
embedding_models:
  default_embedding_model:
    model_provider: openai
    model: text-embedding-all-MiniLM-L6-v2
    api_base: {base}
    api_key: ${{GRAPHRAG_API_KEY}}
    retry:
      type: exponential_backoff
concurrent_requests: 1
input:
  type: text
input_storage:
  type: file
  base_dir: input
output_storage:
  type: file
  base_dir: output
reporting:
  type: file
  base_dir: logs
cache:
  type: json
  storage:
    type: file
    base_dir: cache
vector_store:
  type: lancedb
  db_uri: output/lancedb
  vector_size: 384
"""


def prepare(root: Path, data_dir: Path, dataset: str, n: int, model: str, base: str, max_tokens: int) -> list[dict]:
    passages = json.loads(corpus_path(data_dir, dataset).read_text(encoding="utf-8"))[:n]
    (root / "input").mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(passages):
        (root / "input" / f"{i:04d}.txt").write_text(f"{p['title']}\n{p['text']}", encoding="utf-8")
    (root / "settings.yaml").write_text(SETTINGS.format(model=model, base=base, max_tokens=max_tokens),
                                        encoding="utf-8")
    return passages


# ---------------------------------------------------------------- the report
def _percall(recs):
    return {
        "calls": len(recs),
        "prompt_tokens": sum(((r.get("response") or {}).get("usage") or {}).get("prompt_tokens", 0) for r in recs),
        "completion_tokens": sum(((r.get("response") or {}).get("usage") or {}).get("completion_tokens", 0)
                                 for r in recs),
        "llm_seconds": round(sum(r["seconds"] for r in recs), 1),
        "hit_max_tokens": sum(1 for r in recs if _finish(r) == "length"),
        "http_errors": sum(1 for r in recs if r["status"] != 200),
    }


def _finish(r):
    ch = (r.get("response") or {}).get("choices") or [{}]
    return ch[0].get("finish_reason")


def _content(r):
    ch = (r.get("response") or {}).get("choices") or [{}]
    return ((ch[0].get("message") or {}).get("content")) or ""


def read_outputs(root: Path) -> dict:
    """Row counts of GraphRAG's output tables (read in the peer environment, which has pandas 3/pyarrow)."""
    code = ("import json,sys,pandas as pd,pathlib;o=pathlib.Path(sys.argv[1]);r={}\n"
            "for t in ['documents','text_units','entities','relationships','communities','community_reports']:\n"
            "  p=o/(t+'.parquet')\n"
            "  r[t]=len(pd.read_parquet(p)) if p.exists() else None\n"
            "p=o/'community_reports.parquet'\n"
            "if p.exists():\n"
            "  d=pd.read_parquet(p);r['reports_empty']=int((d['full_content'].fillna('').str.strip()=='').sum()) if 'full_content' in d else None\n"
            "print(json.dumps(r))")
    py = PEER_VENV / "bin" / "python"
    try:
        out = subprocess.run([str(py), "-c", code, str(root / "output")], capture_output=True, text=True,
                             timeout=300, check=True).stdout
        return json.loads(out)
    except Exception as e:  # noqa: BLE001
        return {"error": repr(e)}


DERIVE = r"""
import json, sys
import pandas as pd
from graphrag.index.operations.extract_graph.graph_extractor import GraphExtractor, TUPLE_DELIMITER, RECORD_DELIMITER
from graphrag.index.operations.extract_graph.extract_graph import _merge_entities, _merge_relationships
from graphrag.index.operations.cluster_graph import cluster_graph
from graphrag.config.defaults import graphrag_config_defaults as D
texts = json.load(open(sys.argv[1]))
ex = GraphExtractor(model=None, prompt="", max_gleanings=D.extract_graph.max_gleanings)
ents, rels = [], []
for i, t in enumerate(texts):
    e, r = ex._process_result(t, str(i), TUPLE_DELIMITER, RECORD_DELIMITER)
    ents.append(e); rels.append(r)
E, R = _merge_entities(ents), _merge_relationships(rels)
out = {"entity_records": int(sum(len(e) for e in ents)), "relationship_records": int(sum(len(r) for r in rels)),
       "entities": int(len(E)), "relationships": int(len(R)),
       "summarize_calls": int(sum(len(set(d)) > 1 for d in E["description"]) + sum(len(set(d)) > 1 for d in R["description"])) if len(E) else 0}
if len(R):
    c = cluster_graph(R, D.cluster_graph.max_cluster_size, D.cluster_graph.use_lcc, seed=D.cluster_graph.seed)
    out["communities"] = len(c)
    out["communities_by_level"] = {str(k): sum(1 for x in c if x[0] == k) for k in sorted({x[0] for x in c})}
else:
    out["communities"] = 0
print(json.dumps(out))
"""


def derive_downstream(texts: list[str], work: Path) -> dict:
    """What GraphRAG's own code makes of the extraction responses, without an LLM call: its parser and merge
    (entity and relationship rows), its summarize rule (one call per entity or relationship with more than one
    distinct description) and its Leiden clustering (one community report a community)."""
    f = work / "derive_input.json"
    f.write_text(json.dumps(texts), encoding="utf-8")
    try:
        out = subprocess.run([str(PEER_VENV / "bin" / "python"), "-c", DERIVE, str(f)], capture_output=True,
                             text=True, timeout=600, env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
        return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-800:]}
    except Exception as e:  # noqa: BLE001
        return {"error": repr(e)}


def build_report(work: Path, meta: dict) -> dict:
    log = work / "proxy.jsonl"
    recs = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x.strip()] if log.exists() else []
    chat = [r for r in recs if r["path"].startswith("/v1/chat/completions")]
    emb = [r for r in recs if r["path"].startswith("/v1/embeddings")]
    passages = meta["passages"]
    kinds: dict[str, list] = {}
    for r in chat:
        r["kind"] = classify(r.get("request") or {})
        kinds.setdefault(r["kind"], []).append(r)
    # which passage each extraction or gleaning call worked on (its text is in the first user message)
    per_passage = [{"index": i, "title": p["title"], "calls": 0, "llm_seconds": 0.0, "entities": 0,
                    "relationships": 0, "dropped_records": 0} for i, p in enumerate(passages)]
    malformed = {"responses": 0, "responses_without_a_record": 0, "dropped_records": 0, "records_kept": 0,
                 "hit_max_tokens": 0}
    joined = [""] * len(passages)  # GraphRAG parses extraction + gleaning responses joined as one string
    glean_done = [False] * len(passages)
    for r in sorted(kinds.get("extraction", []) + kinds.get("gleaning", []) + kinds.get("gleaning_loop_check", []),
                    key=lambda r: r["seq"]):
        first = _text(((r.get("request") or {}).get("messages") or [{}])[0].get("content"))
        idx = next((i for i, p in enumerate(passages) if p["text"] in first), None)
        if idx is not None:
            per_passage[idx]["calls"] += 1
            per_passage[idx]["llm_seconds"] += r["seconds"]
        if r["kind"] == "gleaning_loop_check":
            continue
        parsed = parse_extraction(_content(r))
        malformed["responses"] += 1
        malformed["hit_max_tokens"] += _finish(r) == "length"
        if parsed["entities"] + parsed["relationships"] == 0:
            malformed["responses_without_a_record"] += 1
        if idx is not None:
            joined[idx] += _content(r)
            glean_done[idx] |= r["kind"] == "gleaning"
    for i, t in enumerate(joined):
        parsed = parse_extraction(t)
        for k in ("entities", "relationships", "dropped_records"):
            per_passage[i][k] = parsed[k]
        malformed["dropped_records"] += parsed["dropped_records"]
        malformed["records_kept"] += parsed["entities"] + parsed["relationships"]
    complete = [i for i in range(len(passages)) if glean_done[i]]
    derived = derive_downstream([joined[i] for i in complete], work) if complete else {}
    derived["passages"] = len(complete)
    reports = kinds.get("community_report", [])
    report_bad = sum(1 for r in reports if not parse_report(_content(r)))
    summaries = kinds.get("summarize_descriptions", [])
    summary_empty = sum(1 for r in summaries if not _content(r).strip())
    passages_done = sum(1 for p in per_passage if p["calls"] > 0)
    return {
        "meta": meta,
        "by_kind": {k: _percall(v) for k, v in sorted(kinds.items())},
        "all_llm": _percall(chat),
        "embedding_requests": {"requests": len(emb), "inputs": sum(r.get("n_inputs", 0) for r in emb),
                               "seconds": round(sum(r["seconds"] for r in emb), 1)},
        "extraction_malformed": malformed,
        "community_reports_unparseable": report_bad,
        "summaries_empty": summary_empty,
        "passages_with_extraction_calls": passages_done,
        "per_passage": [dict(p, llm_seconds=round(p["llm_seconds"], 1)) for p in per_passage],
        "outputs": read_outputs(work / "project"),
        "derived_from_extraction": derived,
        "proxy_notes": sum(1 for r in chat if r.get("proxy_note")),
        "loadavg_at_llm_calls": [r.get("loadavg_1min") for r in chat],
    }


def _fmt(x, nd=1):
    return "–" if x is None else (f"{x:,.{nd}f}" if isinstance(x, float) else f"{x:,}")


def write_markdown(rep: dict, out: Path) -> None:
    m = rep["meta"]
    n = len(m["passages"])
    done = rep["passages_with_extraction_calls"]
    bk = rep["by_kind"]
    tot = rep["all_llm"]
    o = rep["outputs"]
    mal = rep["extraction_malformed"]
    finished = m.get("graphrag_exit") == 0
    L = []
    L.append("# What indexing with GraphRAG costs here (graphrag 3.3.0, standard method)\n")
    L.append(f"Made by `{m['command']}` on {m['date']} (wall clock {m['started']} to {m['ended']} UTC).\n")
    if not finished:
        L.append(f"**The run did not finish** (`graphrag index` exit status {m.get('graphrag_exit')}"
                 f"{', stopped at the deadline ' + m['deadline'] if m.get('stopped_at_deadline') else ''}). "
                 f"Every number below is what was measured up to then: extraction calls reached {done} of {n} "
                 "passages, and the stages after extraction ran only as far as the table shows.\n")
    L.append("## Set-up\n")
    loads = sorted(x for x in rep["loadavg_at_llm_calls"] if x is not None)
    shared = (f"1-minute load average when an LLM call ended: median {loads[len(loads) // 2]:.1f}, range "
              f"{loads[0]:.1f}–{loads[-1]:.1f}") if loads else "load not recorded"
    L.append(f"- Machine: {m['machine']}; no GPU. The LLM server had {m['n_threads']} thread(s) and one request "
             f"at a time; {shared}. " + (m.get("machine_note") or ""))
    L.append(f"- GraphRAG: `graphrag` {m['graphrag_version']} in its own environment (`bash benchmarks/peers/setup.sh "
             "graphrag`), `graphrag index --method standard`, built-in prompts, defaults except the models, "
             "`concurrent_requests: 1`, `vector_size: 384` (settings in the work folder's `project/settings.yaml`). "
             "Defaults that set the cost: `max_gleanings` 1 (one gleaning turn a text unit, no Y/N loop check), "
             "entity types organization/person/geo/event, chunks of 1,200 `o200k_base` tokens (every passage "
             "here is one text unit), summary `max_length` 500, community reports `max_length` 2,000 and "
             "`max_input_length` 8,000, claims off.")
    L.append(f"- LLM: {m['model']} (Q4_K_M GGUF, the suite's `sample` profile model) through "
             f"`python -m llama_cpp.server` {m['llama_cpp_version']}, n_ctx {m['n_ctx']}, {m['n_threads']} threads, "
             f"temperature 0, `max_tokens` {m['max_tokens']} a call (GraphRAG sends none by default), "
             "repeat penalty 1.0.")
    L.append("- Embeddings: all-MiniLM-L6-v2 through `benchmarks/peers/embed_server.py`.")
    L.append(f"- Passages: the first {n} of `{m['dataset']}_corpus.json` in file order, each one input "
             "document `title\\ntext`.")
    L.append("- Counting: every request passed a proxy that logged it, timed it and classified it by GraphRAG's "
             "own prompt text. LLM seconds are the server's round trip, one request at a time. Community "
             "reports: GraphRAG asks for OpenAI structured output (`json_schema`), which llama_cpp.server does "
             f"not accept; the proxy passed the same schema as llama.cpp's grammar-constrained `json_object` "
             f"({rep['proxy_notes']} requests).")
    L.append("- Tokenizer: tiktoken's `o200k_base`/`cl100k_base` files come from the `litellm` wheel (a "
             "GraphRAG dependency ships them; `TIKTOKEN_CACHE_DIR` points there); nothing was downloaded.\n")
    L.append("## LLM calls by kind (measured)\n")
    L.append("| kind | calls | calls a passage | prompt tokens | completion tokens | LLM s | s a call | hit max_tokens | HTTP errors |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    per_text_unit = ("extraction", "gleaning", "gleaning_loop_check")
    for k, v in list(bk.items()) + [("**all LLM calls**", tot)]:
        denom = max(done, 1) if k in per_text_unit else n
        L.append(f"| {k} | {v['calls']:,} | {v['calls'] / denom:.2f} | {v['prompt_tokens']:,} | "
                 f"{v['completion_tokens']:,} | {v['llm_seconds']:,.1f} | "
                 f"{(v['llm_seconds'] / v['calls']) if v['calls'] else 0:.1f} | {v['hit_max_tokens']} | {v['http_errors']} |")
    L.append(f"\nCalls a passage: extraction and gleaning divide by the {done} passages they reached; every other "
             f"row by the {n} passages put in (summaries and reports are made for the whole corpus, so theirs is "
             "an average, not a per-passage step). `connectivity_test` is GraphRAG's start-up check of the model.")
    e = rep["embedding_requests"]
    L.append(f"Embedding requests: {e['requests']} ({e['inputs']} texts, {e['seconds']} s).\n")
    L.append("## Time\n")
    L.append(f"- Wall seconds of `graphrag index`: {m['wall_seconds']:,.0f} s "
             f"({m['wall_seconds'] / 60:.1f} min); LLM seconds: {tot['llm_seconds']:,.0f} s "
             f"({tot['llm_seconds'] / max(m['wall_seconds'], 1e-9) * 100:.0f} % of wall).")
    if m.get("workflow_seconds"):
        L.append("- GraphRAG's own timing of its workflows (`output/stats.json`): " + ", ".join(
            f"{k} {v:,.0f} s" for k, v in m["workflow_seconds"].items()) + ".")
    L.append("")
    L.append("## What the index holds, and what was malformed\n")
    L.append(f"- Output tables: {_fmt(o.get('documents'))} documents, {_fmt(o.get('text_units'))} text units, "
             f"{_fmt(o.get('entities'))} entities, {_fmt(o.get('relationships'))} relationships, "
             f"{_fmt(o.get('communities'))} communities, {_fmt(o.get('community_reports'))} community reports"
             + (f" ({o['reports_empty']} empty)" if o.get("reports_empty") is not None else "") + ".")
    L.append(f"- Extraction and gleaning responses: {mal['responses']}; {mal['responses_without_a_record']} held no "
             f"record GraphRAG can parse; {mal['hit_max_tokens']} stopped at `max_tokens` (the model repeating "
             "itself). GraphRAG joins a passage's extraction and gleaning responses into one string and parses "
             f"that: {mal['records_kept']} records parse as entity or relationship rows (before merging), "
             f"{mal['dropped_records']} are malformed (wrong field count or no `\"entity\"`/`\"relationship\"` "
             "tag) and dropped without a word. A parsed row is not a correct one: the 0.5B model also puts "
             "fields in the wrong slots, which no parser can see.")
    L.append(f"- Community-report responses that are not the JSON GraphRAG's report model needs: "
             f"{rep['community_reports_unparseable']} of {bk.get('community_report', {}).get('calls', 0)}.")
    L.append(f"- Description summaries that came back empty: {rep['summaries_empty']} of "
             f"{bk.get('summarize_descriptions', {}).get('calls', 0)}.")
    if m.get("graphrag_errors") is not None:
        L.append(f"- Lines at level ERROR in GraphRAG's own log (`logs/indexing-engine.log`): {m['graphrag_errors']}.")
    dv = rep.get("derived_from_extraction") or {}
    if dv.get("passages"):
        L.append(f"- What GraphRAG's own code makes of the extraction responses of the {dv['passages']} passages "
                 "whose extraction and gleaning both finished (run afterwards in the peer environment, no LLM "
                 "call; a derived count, not a measured call): its parser and merge give "
                 f"{dv.get('entity_records', '–')} entity and {dv.get('relationship_records', '–')} relationship rows, "
                 f"merged into {dv.get('entities', '–')} (title, type) entity groups and "
                 f"{dv.get('relationships', '–')} (source, target) relationship groups (its finalize step then "
                 "deduplicates, giving the output tables above); "
                 f"its summarize rule (a call for each entity or relationship with more than one distinct "
                 f"description) makes {dv.get('summarize_calls', '–')} description-summary calls; its Leiden "
                 f"clustering (max cluster size 10, seed as configured) makes {dv.get('communities', '–')} "
                 "communities (" + ", ".join(f"level {k}: {v}" for k, v in (dv.get("communities_by_level") or {}).items())
                 + "), one community-report call each. Measured beside derived: summaries "
                 f"{bk.get('summarize_descriptions', {}).get('calls', 0)} / {dv.get('summarize_calls', '–')}, "
                 f"community reports {bk.get('community_report', {}).get('calls', 0)} / {dv.get('communities', '–')}."
                 + (f" (derivation failed: {dv['error'][:200]})" if dv.get("error") else ""))
    L.append("")
    L.append("## Per passage (extraction + gleaning)\n")
    L.append("| # | title | calls | LLM s | entity records | relationship records | dropped records |")
    L.append("|---:|---|---:|---:|---:|---:|---:|")
    for p in rep["per_passage"]:
        L.append(f"| {p['index']} | {p['title']} | {p['calls']} | {p['llm_seconds']:.1f} | {p['entities']} | "
                 f"{p['relationships']} | {p['dropped_records']} |")
    L.append("")
    L.append("## Arithmetic for the whole corpus (not a measurement)\n")
    N = m["corpus_size"]
    ext, gl = bk.get("extraction"), bk.get("gleaning")
    if ext and gl and ext["calls"] and gl["calls"]:
        se, sg = ext["llm_seconds"] / ext["calls"], gl["llm_seconds"] / gl["calls"]
        L.append(f"With `max_gleanings` 1 every text unit costs one extraction and one gleaning call. All {N:,} "
                 f"passages of {m['dataset']} (one text unit each) would take {2 * N:,} such calls; at the mean "
                 f"seconds a call measured here ({se:.0f} s and {sg:.0f} s, {m['model']}, {m['n_threads']} "
                 f"thread(s), `max_tokens` {m['max_tokens']}) that is {N * (se + sg) / 3600:,.0f} hours of LLM time "
                 "for extraction alone. Description summaries and community reports come on top and do not "
                 "scale linearly with passages (they follow how many entities recur across passages and how many "
                 "communities the graph splits into), so they are not extrapolated here.")
    L.append("")
    L.append("")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(L), encoding="utf-8")


# ---------------------------------------------------------------- the run
def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_up(proc: subprocess.Popen, url: str, log: Path, timeout: float = 300) -> None:
    t0 = time.time()
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except Exception:  # noqa: BLE001
            if proc.poll() is not None or time.time() - t0 > timeout:
                raise SystemExit(f"graphrag_cost: server did not come up at {url} (log: {log})")
            time.sleep(1)


def deadline_ts(hhmm: str | None) -> float | None:
    if not hhmm:
        return None
    now = dt.datetime.now(dt.timezone.utc)
    h, mi = map(int, hhmm.split(":"))
    d = now.replace(hour=h, minute=mi, second=0, microsecond=0)
    if d < now - dt.timedelta(hours=12):
        d += dt.timedelta(days=1)
    return d.timestamp()


def run(args) -> None:
    work = Path(args.work)
    project = work / "project"
    if project.exists() and not args.keep:
        subprocess.run(["rm", "-rf", str(project)], check=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    log = work / "proxy.jsonl"
    if log.exists() and not args.keep:
        log.unlink()
    data_dir = Path(args.data_dir or os.environ.get("KGIR_DATA_DIR") or ROOT.parent / "shared" / "data")
    children: list[subprocess.Popen] = []

    def cleanup(*_):
        for p in reversed(children):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in children:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)

    signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(143)))
    try:
        gguf = subprocess.run([str(MAIN_PY), "-c",
                               f"from kgir_lib.llm.embedded import locate; print(locate('{args.model}'))"],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        eport, lport, pport = free_port(), free_port(), free_port()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        elog, llog = work / "logs" / "embed_server.log", work / "logs" / "llama_server.log"
        children.append(subprocess.Popen(
            [str(MAIN_PY), str(PEERS / "embed_server.py"), "--port", str(eport), "--profile", "sample"],
            cwd=ROOT, env=env, stdout=elog.open("w"), stderr=subprocess.STDOUT, start_new_session=True))
        children.append(subprocess.Popen(
            [str(MAIN_PY), "-m", "llama_cpp.server", "--model", gguf, "--model_alias", args.model,
             "--host", "127.0.0.1", "--port", str(lport), "--n_threads", str(args.n_threads),
             "--n_threads_batch", str(args.n_threads), "--n_ctx", str(args.n_ctx), "--verbose", "false"],
            cwd=ROOT, env=env, stdout=llog.open("w"), stderr=subprocess.STDOUT, start_new_session=True))
        wait_up(children[0], f"http://127.0.0.1:{eport}/v1/models", elog)
        wait_up(children[1], f"http://127.0.0.1:{lport}/v1/models", llog)
        proxy = Proxy(f"http://127.0.0.1:{lport}", f"http://127.0.0.1:{eport}", log)
        srv = proxy.serve(pport)
        passages = prepare(project, data_dir, args.dataset, args.n, args.model, f"http://127.0.0.1:{pport}/v1",
                           args.max_tokens)
        corpus_n = len(json.loads(corpus_path(data_dir, args.dataset).read_text(encoding="utf-8")))
        tok_dir = subprocess.run([str(PEER_VENV / "bin" / "python"), "-c",
                                  "import importlib.util,pathlib;s=importlib.util.find_spec('litellm');"
                                  "print(pathlib.Path(s.origin).parent/'litellm_core_utils'/'tokenizers')"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        genv = dict(os.environ, GRAPHRAG_API_KEY=os.environ.get("GRAPHRAG_API_KEY", "not-needed-local-server"),
                    TIKTOKEN_CACHE_DIR=tok_dir, LITELLM_LOCAL_MODEL_COST_MAP="True",
                    HF_HUB_OFFLINE="1", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        started = dt.datetime.now(dt.timezone.utc)
        t0 = time.time()
        glog = work / "logs" / "graphrag_index.log"
        gp = subprocess.Popen([str(PEER_VENV / "bin" / "graphrag"), "index", "--root", str(project),
                               "--method", "standard"], env=genv, stdout=glog.open("w"),
                              stderr=subprocess.STDOUT, start_new_session=True)
        children.append(gp)
        dl = deadline_ts(args.deadline)
        stopped = False
        while gp.poll() is None:
            if dl and time.time() > dl:
                os.killpg(gp.pid, signal.SIGTERM)
                stopped = True
                try:
                    gp.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(gp.pid, signal.SIGKILL)
                    gp.wait()
                break
            time.sleep(2)
        wall = time.time() - t0
        ended = dt.datetime.now(dt.timezone.utc)
        srv.shutdown()
    finally:
        cleanup()
    meta = {
        "command": args.command_line, "date": started.strftime("%Y-%m-%d"),
        "started": started.strftime("%H:%M:%S"), "ended": ended.strftime("%H:%M:%S"),
        "graphrag_exit": gp.returncode, "stopped_at_deadline": stopped, "deadline": args.deadline,
        "wall_seconds": wall, "model": args.model, "n_ctx": args.n_ctx, "n_threads": args.n_threads,
        "max_tokens": args.max_tokens, "dataset": args.dataset, "corpus_size": corpus_n,
        "passages": [{"title": p["title"], "text": p["text"]} for p in passages],
        "machine": f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
                   f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB, "
                   f"{platform.system()} {platform.release()}",
    }
    finish_meta(meta, work)
    (work / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    report(work, Path(args.out))


def finish_meta(meta: dict, work: Path) -> None:
    vers = subprocess.run([str(PEER_VENV / "bin" / "python"), "-c",
                           "import importlib.metadata as m;print(m.version('graphrag'))"],
                          capture_output=True, text=True).stdout.strip()
    meta["graphrag_version"] = vers or "?"
    meta["llama_cpp_version"] = subprocess.run(
        [str(MAIN_PY), "-c", "import llama_cpp;print(llama_cpp.__version__)"], capture_output=True,
        text=True).stdout.strip() or "?"
    stats = work / "project" / "output" / "stats.json"
    if stats.exists():
        s = json.loads(stats.read_text(encoding="utf-8"))
        wf = s.get("workflows") or {}
        meta["workflow_seconds"] = {k: float((v or {}).get("overall", 0)) for k, v in wf.items()}
    elog = work / "project" / "logs" / "indexing-engine.log"
    if elog.exists():
        meta["graphrag_errors"] = sum(1 for x in elog.read_text(encoding="utf-8", errors="replace").splitlines()
                                      if " ERROR " in x or x.startswith("ERROR"))


def report(work: Path, out: Path, machine_note: str | None = None) -> None:
    meta = json.loads((work / "meta.json").read_text(encoding="utf-8"))
    if machine_note is not None:  # what the run cannot see, e.g. another job on the CPU; kept in meta.json
        meta["machine_note"] = machine_note
        (work / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    rep = build_report(work, meta)
    write_markdown(rep, out)
    slim = {k: v for k, v in rep.items() if k != "meta"}
    slim["meta"] = {k: v for k, v in meta.items() if k != "passages"}
    slim["meta"]["passage_titles"] = [p["title"] for p in meta["passages"]]
    out.with_suffix(".json").write_text(json.dumps(slim, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"graphrag_cost: wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} and .json")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="servers + proxy + graphrag index + report")
    r.add_argument("--n", type=int, default=20)
    r.add_argument("--dataset", default="musique_train")
    r.add_argument("--data-dir", default=None)
    r.add_argument("--model", default="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M")
    r.add_argument("--n-ctx", type=int, default=16384)
    r.add_argument("--n-threads", type=int, default=2)
    r.add_argument("--max-tokens", type=int, default=1024)
    r.add_argument("--deadline", default=None, help="HH:MM UTC: stop graphrag then and report what was measured")
    r.add_argument("--keep", action="store_true", help="keep the work folder (GraphRAG's cache answers repeats)")
    r.add_argument("--work", default=str(DEFAULT_WORK))
    r.add_argument("--out", default=str(OUT_MD))
    p = sub.add_parser("report", help="rebuild the report from a finished work folder (no LLM call)")
    p.add_argument("--work", default=str(DEFAULT_WORK))
    p.add_argument("--out", default=str(OUT_MD))
    p.add_argument("--machine-note", default=None, help="a sentence on the machine's state during the run")
    args = ap.parse_args()
    if args.cmd == "run":
        if not (PEER_VENV / "bin" / "graphrag").exists():
            raise SystemExit("graphrag_cost: no peer environment; run: bash benchmarks/peers/setup.sh graphrag")
        bits = ["benchmarks/peers/graphrag_cost.py run"]
        for k, d in (("n", 20), ("max_tokens", 1024), ("n_ctx", 16384), ("n_threads", 2), ("deadline", None)):
            if getattr(args, k) != d:
                bits.append(f"--{k.replace('_', '-')} {getattr(args, k)}")
        args.command_line = ".venv/bin/python " + " ".join(bits)
        run(args)
    else:
        report(Path(args.work), Path(args.out), args.machine_note)


if __name__ == "__main__":
    main()
