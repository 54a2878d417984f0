"""Notebook 07's case study of KGIR-RAG (paper §3.5, Fig. 6): one question through every stage.

:mod:`~kgir_lib.notebook.case.records` (:class:`~kgir_lib.notebook.case.records.CaseStudy`, the run's KGIR-RAG
traces), :mod:`~kgir_lib.notebook.case.build` (a trace or a run as a case), :mod:`~kgir_lib.notebook.case.baselines`
(what every other method answered), :mod:`~kgir_lib.notebook.case.bridges` (Fig. 6 candidates),
:mod:`~kgir_lib.notebook.case.choice` (which question tells the story), :mod:`~kgir_lib.notebook.case.display` and
:mod:`~kgir_lib.notebook.case.bridge_viz` (showing it).
"""
