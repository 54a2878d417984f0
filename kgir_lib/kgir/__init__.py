"""KGIR-RAG, the paper's method (§2.2-2.4, Algorithms 1-2), assembled from its steps.

The paper's method:

- :mod:`~kgir_lib.kgir.seeds`: NER(q) (eq. 4), grounding, a question's seeds;
- :mod:`~kgir_lib.kgir.entity_matching`: the eq. 5 matching rules;
- :mod:`~kgir_lib.kgir.subgraph`: Algorithm 1, the evidence subgraph G_Ans (eqs. 2-7; the
  spanning trees are :mod:`kgir_lib.kg.mst`);
- :mod:`~kgir_lib.kgir.rewrite`: Rewrite (eq. 8, Fig. 4) and Reflection (§2.4, Fig. 5), prompts
  and parsers;
- :mod:`~kgir_lib.kgir.contract`: what each kind of step is handed and returns (one protocol a
  kind), checked as the loop runs;
- :mod:`~kgir_lib.kgir.steps`: the steps, each an object with one public method (retrieve, find
  the seeds, build the subgraph, shape the evidence, rewrite, retrieve q'_t, choose P_t, reflect,
  read);
- :mod:`~kgir_lib.kgir.loop`: the loop of Algorithm 2 over a composition of steps, the paper's
  (``PAPER``) and Table 7's ablations;
- :mod:`~kgir_lib.kgir.state`: a run's settings and counters, one question's state between
  rounds, the final ranked list, the reflection's passages;
- :mod:`~kgir_lib.kgir.rounds`: :class:`~kgir_lib.kgir.rounds.LoopRound`, one round as a typed
  record (the tables read from traces: :mod:`kgir_lib.eval.mechanism.loop_tables`).

Beside it: :mod:`~kgir_lib.kgir.study` (the steps of the study variants: oracles, the bridge
rewrite of ours, the forced rounds) and :mod:`~kgir_lib.kgir.variants` (every composition in one
table, and the methods the registry builds from it: ``KGIRRAG``, ``StudyKGIRRAG``).
"""
