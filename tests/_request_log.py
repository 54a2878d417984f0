"""Every LLM request the KGIR-RAG variants make on the tiny workspace, in order, as the cache keys them.

``tests/fixtures/kgir_requests.json`` holds what the loop sent before the study variants (oracles, the bridge
rewrite) were added; ``tests/test_study_variants.py`` checks that the paper's method and its Table 7 variants
still send exactly these requests (the committed response logs answer a request only if it is unchanged).
Rewrite the fixture only for an intended change of a request: ``KGIR_WRITE_REQUEST_FIXTURE=1 pytest
tests/test_study_variants.py -k requests``.
"""
from __future__ import annotations

import json
from pathlib import Path

from kgir_lib.data import Question
from kgir_lib.kgir.loop import KGIRRAG
from kgir_lib.llm import LLM, ScriptedBackend

FIXTURE = Path(__file__).parent / "fixtures" / "kgir_requests.json"
EXISTING_VARIANTS = ("full", "no_subgraph", "no_reflection", "no_rewrite", "forced")


def _kind(req) -> str:
    return {"kgir_ner": "ner", "kgir_rewrite": "rewrite", "kgir_reflect": "reflect",
            "kgir_reflect_verdict": "verdict", "reader": "reader"}[req.prompt]


def _answer(req) -> str:
    return {"ner": "Entities: Compaq; 1994", "rewrite": "Rewritten question: Which company did Compaq merge with?",
            "reflect": "Reasoning: Compaq merged with Hewlett-Packard.\nAnswer: Hewlett-Packard",
            "verdict": "Answer: HP", "reader": "Answer: HP"}[_kind(req)]


def _missing_then_answer(req) -> str:
    if _kind(req) == "reflect" and "Earlier rewrite 1" not in req.messages[-1][1]:
        return "Reasoning: not enough.\nMissing: the merger partner"
    return _answer(req)


def _malformed(req) -> str:
    return {"ner": "???", "rewrite": "", "reflect": "I think so", "verdict": "Yes.", "reader": ""}[_kind(req)]


SCRIPTS = {"answer": _answer, "missing_then_answer": _missing_then_answer, "malformed": _malformed}


def questions(base: Question) -> list:
    """The tiny dataset's question and a second one, so batching shows in the log."""
    return [base, Question("q2", "Who founded the company that released the Macintosh?", ("Steve Jobs",),
                           (), "tiny", 2)]


def record_requests(make_ws, base: Question, variants=EXISTING_VARIANTS) -> dict:
    """``{"<variant>/<script>": [[stage, payload], ...]}``: every request of every ``generate`` call, cache
    hits included, for each variant and script (max_iterations 2, a fresh workspace and an LLM without cache each)."""
    out = {}
    for variant in variants:
        for name, script in SCRIPTS.items():
            ws = make_ws(script)
            ws.llm = LLM(ScriptedBackend(script), None, progress=False)  # no cache: each script answers itself
            log: list = []
            inner = ws.llm.generate

            def generate(requests, stage="default", desc=None, _inner=inner, _log=log):
                _log.extend([stage, r.payload()] for r in requests)
                return _inner(requests, stage=stage, desc=desc)
            ws.llm.generate = generate
            KGIRRAG(variant=variant, max_iterations=2).run(ws, questions(base))
            out[f"{variant}/{name}"] = log
    return out


def load_fixture() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def write_fixture(data: dict) -> None:
    FIXTURE.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
