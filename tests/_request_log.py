"""Every LLM request KGIR-RAG and each of its variants send on the tiny workspace, in order, as the cache keys them.

``tests/fixtures/kgir_requests.json`` is the proof that a change of the code changes no request (the committed
response logs answer a request only if it is unchanged). It holds two sections:

- ``<variant>/<script>``: what the paper's method and its Table 7 variants sent before the study variants were
  added (two questions without a gold chain, ``max_iterations`` 2);
- ``every``: the runs ``every/<registry key>/<script>`` and ``settings/<name>``, every message and request stored
  once (:func:`intern`): every KGIR-RAG registry key (the paper's method, its Table 7 ablations, the forced rounds
  and every study variant) on five questions at once (a MuSiQue-style chain, one whose first hop names its title,
  a HotpotQA-style comparison, two with no gold, one of them about nothing in the graph), three rounds, under
  scripts whose replies answer, ask for a second round, come without a verdict line (the verdict turn) or are
  malformed; and the paper's method under settings the profile can change.

``tests/fixtures/kgir_outputs.json`` holds what the same runs returned (answers, ranked lists, usage, a digest of
each trace), the method's counters and what the trace files' fingerprint reads of the method, so a change that keeps
the requests but alters a trace, or the fingerprint of a committed trace file, shows too.

Rewrite the fixtures only for an intended change of a request or a trace:
``KGIR_WRITE_REQUEST_FIXTURE=1 pytest tests/test_study_variants.py -k requests``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Callable, Optional

from kgir_lib.data import Question
from kgir_lib.gold import Bridge, GoldHop, bridge_aliases
from kgir_lib.llm import LLM, ScriptedBackend
from kgir_lib.registry import build_method

FIXTURE = Path(__file__).parent / "fixtures" / "kgir_requests.json"
OUTPUTS = Path(__file__).parent / "fixtures" / "kgir_outputs.json"
EXISTING_VARIANTS = ("full", "no_subgraph", "no_reflection", "no_rewrite", "forced")
KEY_OF = {"full": "kgir", "no_subgraph": "kgir_no_subgraph", "no_reflection": "kgir_no_reflection",
          "no_rewrite": "kgir_no_rewrite", "forced": "kgir_forced"}
EVERY_KEY = ("kgir", "kgir_no_subgraph", "kgir_no_reflection", "kgir_no_rewrite", "kgir_forced",
             "kgir_oracle_seeds", "kgir_oracle_rewrite", "kgir_oracle_next_hop", "kgir_oracle_context",
             "kgir_oracle_seeds_rewrite", "kgir_oracle_seeds_rewrite_next_hop", "kgir_bridge_rewrite",
             "kgir_all_passages")
IDEAL = "Which company merged with Compaq in 2002?"


def _kind(req) -> str:
    return {"kgir_ner": "ner", "kgir_rewrite": "rewrite", "kgir_reflect": "reflect", "kgir_reflect_paper": "reflect",
            "kgir_reflect_verdict": "verdict", "reader": "reader", "kgir_bridge_rewrite": "bridge"}[req.prompt]


def _answer(req) -> str:
    return {"ner": "Entities: Compaq; 1994", "rewrite": "Rewritten question: Which company did Compaq merge with?",
            "reflect": "Reasoning: Compaq merged with Hewlett-Packard.\nAnswer: Hewlett-Packard",
            "verdict": "Answer: HP", "reader": "Answer: HP",
            "bridge": f"Bridge: Compaq\nQuestion: {IDEAL}"}[_kind(req)]


def _missing_then_answer(req) -> str:
    if _kind(req) == "reflect" and "Earlier rewrite 1" not in req.messages[-1][1]:
        return "Reasoning: not enough.\nMissing: the merger partner"
    return _answer(req)


def _malformed(req) -> str:
    return {"ner": "???", "rewrite": "", "reflect": "I think so", "verdict": "Yes.", "reader": "",
            "bridge": "Bridge: Compaq"}[_kind(req)]


def _verdict_turn(req) -> str:
    """Reflections without a verdict line: the verdict turn asks for another round first, then answers."""
    kind = _kind(req)
    if kind == "reflect":
        return "Reasoning: the triples name Compaq."
    if kind == "verdict":
        second = any("Earlier rewrite 1" in text for role, text in req.messages if role == "user")
        return "Answer: HP" if second else "Missing: the merger partner"
    return _answer(req)


TAGS = {"top pc maker of 1994": "fig6", "pc business of ibm": "named", "founded first": "hotpot",
        "company that released the macintosh": "q2"}


def _about(req) -> str:
    """Which of :func:`gold_questions` a request is about, read off its question or its history ("" for none:
    NER of a rewritten query)."""
    user = [text for role, text in req.messages if role == "user"]
    text = (user[-2] if req.prompt == "kgir_reflect_verdict" else user[-1]).lower()
    return next((tag for phrase, tag in TAGS.items() if phrase in text), "")


def _mixed(req) -> str:
    """Each question its own path: the Fig. 6 question answers at once, the IBM one is malformed throughout, the
    comparison answers after verdict turns (the first asks for another round), the last one never answers."""
    tag, kind = _about(req), _kind(req)
    if tag == "named":
        return _malformed(req)
    if tag == "fig6" or kind == "reader":
        return _answer(req)
    if kind == "ner":
        return '{"named_entities": ["PC maker", "Dell", "Apple"]}'
    if kind in ("rewrite", "bridge"):
        q = "When was Apple founded?" if tag == "hotpot" else "Who founded Apple?"
        return f"Bridge: none\nQuestion: {q}" if kind == "bridge" else f"Rewritten question: {q}"
    if tag == "hotpot" and kind == "reflect":
        return "Reasoning: Dell was founded in 1984."
    if kind == "verdict":
        second = "Earlier rewrite 1" in [t for r, t in req.messages if r == "user"][-2]
        return "Answer: Apple" if second else "Missing: the year Apple was founded"
    return "Reasoning: not enough.\nMissing: the founder"


SCRIPTS = {"answer": _answer, "missing_then_answer": _missing_then_answer, "malformed": _malformed}
EVERY_SCRIPTS = {**SCRIPTS, "verdict_turn": _verdict_turn, "mixed": _mixed}
# the paper's method under settings a profile can change (config fields; method parameters under "method")
SETTINGS = {
    "answer_source_reflection": {"kgir_answer_source": "reflection"},
    "evidence_cap_1": {"max_evidence_triples": 1},
    "reflect_prompt_paper": {"reflect_prompt": "kgir_reflect_paper"},
    "seed_star": {"gtmp_reading": "seed_star"},
    "reflection_passages_all": {"reflection_passages": "all"},
    "context_passages_1_top_k_3": {"context_passages": 1, "top_k": 3},
    "match_overlap": {"match_method": "overlap", "ngram_threshold": 0.5},
    "method_knobs": {"method": {"top_k": 2, "ngram_threshold": 0.5, "max_iterations": 2, "edge_weight": "passage",
                                "passages_when_empty": False}},
}


def questions(base: Question) -> list:
    """The tiny dataset's question and a second one, so batching shows in the log."""
    return [base, Question("q2", "Who founded the company that released the Macintosh?", ("Steve Jobs",),
                           (), "tiny", 2)]


def gold_questions(base: Question, pids: dict) -> list:
    """Five questions with every kind of gold the study variants read: the Fig. 6 question with a MuSiQue
    chain (the ideal rewrite and the next hop apply; no sub-question names its title, so the seeds oracle does
    not), one whose first hop names its paragraph's title (IBM), a HotpotQA-style comparison (no sub-questions,
    no bridge), and two with no gold at all (no gold passages: the context oracle runs the loop), the last about
    nothing in the graph (no seed, an empty ``G_Ans``)."""
    fig6 = dataclasses.replace(base, gold_hops=(
        GoldHop("Which company was the top PC maker of 1994?", "Compaq", pids["Compaq"], "Compaq"),
        GoldHop("Which company merged with #1 in 2002?", "Hewlett-Packard", pids["Hewlett-Packard"],
                "Hewlett-Packard")),
        gold_bridges=(Bridge("Compaq", bridge_aliases("Compaq"), (pids["Hewlett-Packard"],)),))
    named = Question("n1", "What kind of company bought the PC business of IBM?", ("Chinese technology company",),
                     (pids["IBM"], pids["Lenovo"]), "tiny", 2,
                     (GoldHop("Who bought the PC business of IBM?", "Lenovo", pids["IBM"], "IBM"),
                      GoldHop("What kind of company is #1?", "Chinese technology company", pids["Lenovo"],
                              "Lenovo")),
                     (Bridge("Lenovo", bridge_aliases("Lenovo"), (pids["Lenovo"],)),))
    hotpot = Question("h1", "Which was founded first, Dell or Apple?", ("Apple",), (pids["Dell"], pids["Apple"]),
                      "tiny", 2, (GoldHop("", "", pids["Dell"], "Dell"), GoldHop("", "", pids["Apple"], "Apple Inc.")),
                      ())
    nowhere = Question("q3", "Who wrote the novel Dune?", ("Frank Herbert",), (), "tiny", 1)
    return [fig6, named, hotpot, questions(base)[1], nowhere]


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def _record(make_ws: Callable, script: Callable, key: str, qs: list, cfg_changes: Optional[dict] = None,
            **kw) -> tuple:
    """One run of registry key ``key`` on a fresh workspace whose LLM has no cache: every request of every
    ``generate`` call (cache hits included) as ``[stage, payload]``, and what the run returned (answers, ranked
    lists, usage, a digest of each trace, the method's counters, and what a trace file's fingerprint reads of the
    method: its class, parameters, name, key and whether it reads the graph)."""
    ws = make_ws(script)
    ws.llm = LLM(ScriptedBackend(script), None, progress=False)  # no cache: each script answers itself
    if cfg_changes:
        ws.cfg = dataclasses.replace(ws.cfg, **cfg_changes)
    log: list = []
    inner = ws.llm.generate

    def generate(requests, stage="default", desc=None, _inner=inner, _log=log):
        _log.extend([stage, r.payload()] for r in requests)
        return _inner(requests, stage=stage, desc=desc)
    ws.llm.generate = generate
    method = build_method(key, **kw)
    outputs = [json.loads(json.dumps(o.to_json(), default=str)) for o in method.run(ws, qs)]
    returned = {"answers": [o["answer"] for o in outputs], "ranked_pids": [o["ranked_pids"] for o in outputs],
                "usage": [o["usage"] for o in outputs], "traces": [_digest(o["trace"]) for o in outputs],
                "stats": dict(sorted(method.stats.items())),
                "method": {"class": type(method).__name__, "params": method.params(), "name": method.name,
                           "key": method.key, "uses_kg": method.uses_kg}}
    return log, returned


def intern(runs: dict) -> dict:
    """``runs`` (``{key: [[stage, payload], ...]}``) with every message and payload stored once: ``messages``
    (digest -> ``{"role", "content"}``), ``payloads`` (digest -> the payload with its messages as digests) and
    ``runs`` (key -> ``[[stage, payload digest], ...]``)."""
    messages, payloads, out = {}, {}, {}
    for key, log in runs.items():
        out[key] = []
        for stage, payload in log:
            ids = []
            for m in payload["messages"]:
                messages[_digest(m)] = m
                ids.append(_digest(m))
            short = {**payload, "messages": ids}
            payloads[_digest(short)] = short
            out[key].append([stage, _digest(short)])
    return {"messages": messages, "payloads": payloads, "runs": out}


def expand(interned: dict) -> dict:
    """:func:`intern` undone: ``{key: [[stage, payload], ...]}``."""
    msgs, pays = interned["messages"], interned["payloads"]
    return {key: [[stage, {**pays[p], "messages": [msgs[m] for m in pays[p]["messages"]]}] for stage, p in log]
            for key, log in interned["runs"].items()}


def record_requests(make_ws, base: Question, variants=EXISTING_VARIANTS) -> dict:
    """``{"<variant>/<script>": [[stage, payload], ...]}``: every request of every ``generate`` call, cache
    hits included, for each variant and script (max_iterations 2, a fresh workspace and an LLM without cache each)."""
    out = {}
    for variant in variants:
        for name, script in SCRIPTS.items():
            out[f"{variant}/{name}"] = _record(make_ws, script, KEY_OF[variant], questions(base), max_iterations=2)[0]
    return out


def record_every(make_ws, base: Question, pids: dict) -> tuple:
    """``(requests, outputs)`` of every KGIR-RAG registry key under every script of :data:`EVERY_SCRIPTS` and of
    the paper's method under each of :data:`SETTINGS`, on :func:`gold_questions` with ``max_iterations`` 3."""
    qs = gold_questions(base, pids)
    requests, outputs = {}, {}
    for key in EVERY_KEY:
        for name, script in EVERY_SCRIPTS.items():
            requests[f"every/{key}/{name}"], outputs[f"every/{key}/{name}"] = _record(
                make_ws, script, key, qs, max_iterations=3)
    for name, changes in SETTINGS.items():
        changes = dict(changes)
        kw = {"max_iterations": 3, **changes.pop("method", {})}
        requests[f"settings/{name}"], outputs[f"settings/{name}"] = _record(
            make_ws, _mixed, "kgir", qs, changes, **kw)
    return requests, outputs


def load_fixture(path: Path = FIXTURE) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def write_fixture(data: dict, path: Path = FIXTURE) -> None:
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
