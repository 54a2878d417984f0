"""Shared fixtures: a scripted LLM, a deterministic bag-of-words encoder, a tiny workspace."""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

from kgir_lib.config import default_data_dir, load_config
from kgir_lib.data import Corpus, Dataset, Passage, Question, passage_id
from kgir_lib.kg import KnowledgeGraph, Triple
from kgir_lib.llm import LLM, LLMCache, ScriptedBackend
from kgir_lib.methods.base import Workspace
from kgir_lib.retrieval import DenseIndex
from _notebook_checks import (executed, pytest_collection_modifyitems,  # noqa: F401  (table checks after the notebooks,
                              pytest_xdist_make_scheduler)  # and all on one worker)

SHARED_DATA = default_data_dir()  # $KGIR_DATA_DIR, else ../shared/data beside the project, else data/samples


def _missing_data() -> str:
    """A warning when the samples are not where the tests read them (the tests on real data are then skipped)."""
    if (SHARED_DATA / "musique").is_dir():
        return ""
    return (f"data: {SHARED_DATA} is MISSING, so the tests on the real samples were skipped. Get them with "
            f"`python -m kgir_lib.data_sources fetch` (scripts/test.sh does) or set KGIR_DATA_DIR")


def pytest_report_header(config) -> str:
    return _missing_data() or f"data: {SHARED_DATA}"


PEER_SETUP = "bash benchmarks/peers/setup.sh"  # the peer environment some tests need (README, "Tests")


def peer_skips(skipped: list) -> dict:
    """The skipped tests whose reason is a missing peer environment, by the command that makes it (:data:`PEER_SETUP`
    and the peer's name, as the skip reason gives it): ``{command: [node id, ...]}``."""
    found: dict = {}
    for r in skipped:
        m = re.search(re.escape(PEER_SETUP) + r"(?: [a-z0-9]+)?", str(getattr(r, "longrepr", "")))
        if m:
            found.setdefault(m.group(0), set()).add(r.nodeid)
    return {cmd: sorted(ids) for cmd, ids in sorted(found.items())}


def pytest_terminal_summary(terminalreporter) -> None:
    if _missing_data():  # also under -q, which hides the header
        terminalreporter.write_line(_missing_data(), yellow=True)
    for cmd, ids in peer_skips(terminalreporter.stats.get("skipped", [])).items():
        terminalreporter.write_line(f"peer environment absent: {len(ids)} test(s) skipped; `{cmd}` makes it and runs "
                                    f"them: " + ", ".join(ids), yellow=True)


class BagOfWordsEncoder:
    """Deterministic stand-in for a sentence encoder: hashed word counts, L2-normalised."""

    model_name = "bow-test"
    batch_size = 16
    dim = 256

    def encode(self, texts, progress=False):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


@pytest.fixture(autouse=True, scope="session")
def _api_cache_in_a_temporary_folder(tmp_path_factory):
    """The public API's own cache folder (``$KGIR_CACHE_DIR``, default ``~/.cache/kgir/api``) is a temporary one for the
    whole session, also for the runners and kernels the tests start: no test writes into the user's cache."""
    if not os.environ.get("KGIR_CACHE_DIR"):
        os.environ["KGIR_CACHE_DIR"] = str(tmp_path_factory.mktemp("kgir_api_cache"))
    yield


@pytest.fixture(autouse=True)
def _kgir_environment_restored():
    """Every test leaves the ``KGIR_*`` variables as it found them.

    The runner sets some in its own process (``--regenerate`` sets ``KGIR_LLM_CACHE_ONLY=1`` for its kernels);
    a test that calls it in-process must not turn every later subprocess on the same worker into a cache-only run.
    """
    before = {k: v for k, v in os.environ.items() if k.startswith("KGIR_")}
    yield
    for k in [k for k in os.environ if k.startswith("KGIR_") and k not in before]:
        del os.environ[k]
    os.environ.update(before)


@pytest.fixture
def cfg(tmp_path):
    return load_config("ci", results_dir=str(tmp_path / "results"), figures_dir=str(tmp_path / "figures"),
                       llm_backend="scripted")


@pytest.fixture
def make_llm(tmp_path):
    """``make_llm(script)`` -> LLM over a ScriptedBackend with a fresh SQLite cache."""
    def make(script, cache=True):
        return LLM(ScriptedBackend(script), LLMCache(tmp_path / "llm.sqlite") if cache else None, progress=False)
    return make


def make_passage(title: str, text: str) -> Passage:
    return Passage(passage_id(title, text), title, text)


def tiny_passages() -> list:
    """Six passages around the paper's Fig. 6 case (Compaq / Hewlett-Packard), the gold pair first."""
    return [
        make_passage("Compaq", "Compaq was the largest supplier of personal computers in 1994."),
        make_passage("Hewlett-Packard", "In 2002 Hewlett-Packard merged with Compaq."),
        make_passage("IBM", "IBM sold its PC business to Lenovo in 2005."),
        make_passage("Lenovo", "Lenovo is a Chinese technology company."),
        make_passage("Dell", "Dell was founded by Michael Dell in 1984."),
        make_passage("Apple", "Apple released the Macintosh in 1984."),
    ]


@pytest.fixture
def tiny_dataset():
    """The six passages of :func:`tiny_passages` and one question."""
    ps = tiny_passages()
    q = Question("q1", "Which company merged in 2002 with the top PC maker of 1994?", ("Hewlett-Packard", "HP"),
                 (ps[0].pid, ps[1].pid), "tiny", 2)
    return Dataset("tiny", [q], Corpus(ps))


@pytest.fixture
def tiny_kg(tiny_dataset):
    p = {x.title: x.pid for x in tiny_dataset.corpus.passages}
    triples = [
        Triple("Compaq", "was top PC maker of", "1994", p["Compaq"]),
        Triple("Compaq", "is a", "PC supplier", p["Compaq"]),
        Triple("Hewlett-Packard", "merged with", "Compaq", p["Hewlett-Packard"]),
        Triple("Hewlett-Packard", "merged in", "2002", p["Hewlett-Packard"]),
        Triple("IBM", "sold PC business to", "Lenovo", p["IBM"]),
        Triple("Lenovo", "is a", "Chinese technology company", p["Lenovo"]),
        Triple("Dell", "founded by", "Michael Dell", p["Dell"]),
        Triple("Apple", "released", "Macintosh", p["Apple"]),
    ]
    return KnowledgeGraph(triples, [x.pid for x in tiny_dataset.corpus.passages])


@pytest.fixture
def tiny_workspace(cfg, tiny_dataset, tiny_kg, make_llm):
    """``tiny_workspace(script)`` -> Workspace over the tiny dataset with a scripted LLM."""
    def make(script):
        dense = DenseIndex(tiny_dataset.corpus.passages, BagOfWordsEncoder(), progress=False)
        return Workspace(cfg=cfg, dataset=tiny_dataset, llm=make_llm(script), dense=dense, kg=tiny_kg)
    return make
