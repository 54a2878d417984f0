"""The mechanism of KGIR-RAG read from its traces (paper §2, §3.4-3.5, Fig. 6).

:mod:`~kgir_lib.eval.mechanism.bridges` (gold bridge entities), :mod:`~kgir_lib.eval.mechanism.round_facts`
(facts of one trace), :mod:`~kgir_lib.eval.mechanism.funnel` (seed → bridge in G_Ans → rewrite names it → D'_t
finds the next hop → correct), :mod:`~kgir_lib.eval.mechanism.calibration` (the reflection's stop),
:mod:`~kgir_lib.eval.mechanism.forced_rounds`, :mod:`~kgir_lib.eval.mechanism.rewrite_retrieval`,
:mod:`~kgir_lib.eval.mechanism.loop_tables` (loop facts, usable outputs per stage, notebook 04's loop diagram);
:func:`kgir_lib.eval.mechanism.tables.mechanism_tables` returns them all for a run.
"""
