"""rebuild_subgraph reuses the weights of a batch it has weighed before (same numbers, no second encoding); the
module's annotations name types that exist."""
from __future__ import annotations

import typing
from types import SimpleNamespace

import numpy as np
import pandas as pd

from kgir_lib.kg import Triple
from kgir_lib.eval.algorithm1 import compare_readings, rebuild_subgraph, summarise_steps
from kgir_lib.kgir.subgraph import evidence_subgraph

G_Q = [Triple("Compaq", "merged with", "Hewlett-Packard", "p1"), Triple("Hewlett-Packard", "acquired", "Compaq", "p1"),
       Triple("Hewlett-Packard", "based in", "Palo Alto", "p2")]


class CountingEncoder:
    def __init__(self):
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        return np.array([[len(t) % 7 + 1.0, 1.0] for t in texts]) / 10


def test_rebuilds_of_the_same_batch_encode_once_and_agree():
    enc = CountingEncoder()
    ws = SimpleNamespace(cfg=SimpleNamespace(ngram_n=3, ngram_threshold=0.8, match_method="overlap"),
                         dense=SimpleNamespace(encoder=enc), reranker=None, dataset=SimpleNamespace(name="toy"))
    sub = evidence_subgraph("Who merged with Compaq?", [("p1", 0.9), ("p2", 0.5)], G_Q, ["Compaq"],
                            weight_fn=lambda q, ts: [0.5] * len(ts), threshold=0.8, method="overlap")
    a = rebuild_subgraph(ws, sub, threshold=0.9)
    calls = enc.calls
    b = rebuild_subgraph(ws, sub, threshold=0.95)  # the same seeds, so the same component triples
    assert enc.calls == calls
    assert a.weights == b.weights and a.kept == b.kept and a.pruned == b.pruned
    rebuild_subgraph(ws, sub, reading="seed_star")  # another batch: weighed anew
    assert enc.calls > calls


def test_annotations_of_the_table_functions_resolve():
    # the annotations are strings (postponed evaluation); reading them, as get_type_hints, help() tools and
    # documentation builders do, evaluates the names in them in the module's namespace
    assert typing.get_type_hints(summarise_steps) == {"df": pd.DataFrame, "return": pd.Series}
    assert typing.get_type_hints(compare_readings)["return"] is pd.DataFrame
