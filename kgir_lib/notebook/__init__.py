"""What the notebooks show, and nothing they compute: the opening call, tables, text, drawings, the case study.

:mod:`~kgir_lib.notebook.opening` (:func:`~kgir_lib.notebook.opening.open_notebook`, every notebook's first call),
:mod:`~kgir_lib.notebook.display` (:func:`~kgir_lib.notebook.display.show`, the one table helper),
:mod:`~kgir_lib.notebook.narrative` (notebook text printed from the config), :mod:`~kgir_lib.notebook.viz`
(traces as text, Algorithm 2 as a diagram, the figures of notebooks 05-06), :mod:`~kgir_lib.notebook.steps_viz` and
:mod:`~kgir_lib.notebook.steps_draw` (Algorithm 1 step by step, notebook 03), :mod:`~kgir_lib.notebook.graph_draw`
(a small graph legible at projection size) and :mod:`kgir_lib.notebook.case` (notebook 07's case study).
"""
