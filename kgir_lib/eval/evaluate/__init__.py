"""Running the compared methods, scoring them, and the paper-shaped tables (notebook 05), one concern a module:

- :mod:`~kgir_lib.eval.evaluate.run`: :func:`run_method`, one method on one dataset's questions, resumable;
- :mod:`~kgir_lib.eval.evaluate.scoring`: :func:`score`, per-question EM, F1, Recall@2/5 and LLM usage;
- :mod:`~kgir_lib.eval.evaluate.suite`: :func:`run_suite`, every method on every dataset;
- :mod:`~kgir_lib.eval.evaluate.tables`: :func:`summary_table` (Tables 4-6), :func:`cost_table`.

The package hands their names on (``from kgir_lib.eval import evaluate as ev; ev.run_method(...)``).
"""
from .run import (StoredTimeLLM, load_outputs, method_key, method_label, read_meta, run_fingerprint,
                  run_method, runs_usage, trace_path)
from .scoring import METRICS, SEEDS, USAGE, answer_form, mean_scores, score
from .suite import SuiteResult, run_suite
from .tables import cost_table, ours_label, questions_per_dataset, summary_table

__all__ = ["StoredTimeLLM", "load_outputs", "method_key", "method_label", "read_meta", "run_fingerprint", "run_method",
           "runs_usage", "trace_path", "METRICS", "SEEDS", "USAGE", "answer_form", "mean_scores", "score",
           "SuiteResult", "run_suite", "cost_table", "ours_label", "questions_per_dataset", "summary_table"]
