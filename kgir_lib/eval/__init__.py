"""Evaluation (paper §3.3-3.5): running and scoring the methods, the tables, and what the traces say.

- :mod:`~kgir_lib.eval.metrics` (EM, F1, Recall@k), :mod:`~kgir_lib.eval.bootstrap` (paired bootstrap),
  :mod:`~kgir_lib.eval.stats` (exact paired tests, Holm), :mod:`~kgir_lib.eval.claims` (the paper's claims);
- :mod:`~kgir_lib.eval.evaluate`: every method run resumably, scored, Tables 4-6 and cost (notebook 05);
- :mod:`~kgir_lib.eval.ablation`: Table 7, KG²RAG's ablations, sweeps and robustness (notebook 06);
- :mod:`~kgir_lib.eval.retrieval_eval` (notebook 02), :mod:`~kgir_lib.eval.matching_eval` (the eq. 5 rules on
  labelled pairs), :mod:`~kgir_lib.eval.cost` (paper-scale cost);
- :mod:`kgir_lib.eval.mechanism`: the mechanism read from KGIR-RAG traces (bridge funnel, calibration, forced rounds).
"""
