"""The paper's claims, read off a run with exact paired tests and a correction for multiplicity.

KGIR-RAG claims (§3.3, §3.4, Table 7) that its rewrite raises Recall@k, that the evidence subgraph, the
reflection and the rewrite each add accuracy, and that it answers multi-hop questions better than IRCoT,
KG²RAG and HippoRAG 2. Each claim is a comparison of KGIR-RAG with one other method on the same questions.

**Families, declared before any run.** Each paper claim (:data:`PAPER_CLAIMS`) is one family: its tests
are every (dataset, metric) row the run has for it, the pooled ``all`` rows included. The p-values of a
family are adjusted with Holm's step-down procedure (:func:`kgir_lib.eval.stats.holm`), so the chance of any
false "supports" or "contradicts" within a claim stays at ``ALPHA``.

**The verdict comes from the adjusted exact test** (:mod:`kgir_lib.eval.stats`): EM by the exact McNemar test,
F1 and Recall@k by the paired sign-flip permutation test. ``supports`` when the adjusted p is below
``ALPHA`` and KGIR-RAG is ahead; ``contradicts`` when it is below and KGIR-RAG is behind; ``cannot tell``
otherwise. The paired percentile bootstrap interval (:func:`kgir_lib.eval.bootstrap.paired_bootstrap`) stays in
the table as the effect size's interval; it does not decide.

**Minimum detectable effect** (``MDE``): the smallest difference this many questions detect with ``POWER``
(80 %) power at the family's first Holm level (``ALPHA`` / family size, 0.05/6 for a family of two metrics on
two datasets and their pooled rows): for EM from the run's own discordance rate, by the exact McNemar test
(:func:`kgir_lib.eval.stats.mde_mcnemar`), for F1 and recall from the spread of the per-question differences
(:func:`kgir_lib.eval.stats.mde_paired`). The column says both (:func:`mde_label`: "MDE (α = 0.05/6, power
0.8)"). Beside the paper's Table 7 drop it says whether a run this size could have seen the published effect
at all.

The paper's own number for a comparison sits beside ours where the paper states it: Table 7's ablation
drops (MuSiQue, Qwen2.5-72B), as KGIR-RAG minus the variant, on the MuSiQue rows only
(:data:`kgir_lib.report.KGIR_ABLATION_DATASETS`). The paper prints no numbers as text for the recall
claim or for KGIR-RAG against IRCoT, KG²RAG and HippoRAG 2, so those cells stay empty.

Questions the prompts were tuned on can be left out with :func:`drop_questions`: a robustness check
reported beside the main reading, never in its place.

One concern a module, the package handing their names on (``from kgir_lib.eval import claims as cl``):

- :mod:`~kgir_lib.eval.claims.family`: the claims and their families (:data:`PAPER_CLAIMS`), the verdict rule,
  the questions left out for the robustness check;
- :mod:`~kgir_lib.eval.claims.table`: the exact tests, the MDE and :func:`claims_table`;
- :mod:`~kgir_lib.eval.claims.headline`: the table in words and as the README's headline;
- :mod:`~kgir_lib.eval.claims.scoreboard`: notebook 05's first screen.
"""
from .family import (ALPHA, BINARY_METRICS, CANNOT_TELL, COLUMN_NOTES, CONTRADICTS, NOT_RUN, PAPER_CLAIMS,
                     PAPER_COLUMN, POWER, READING_RULE, REFERENCE, SUPPORTS, Claim, drop_questions, tuned_questions,
                     verdict)
from .headline import claims_headline
from .scoreboard import (SAME_CONTEXT_AS_NAIVE_RAG, SCOREBOARD_CLAIM, SCOREBOARD_VERDICT, identical_scores_note,
                         scoreboard, scoreboard_sentence)
from .table import (claims_table, exact_test, mde_column, mde_condition, mde_label, minimum_detectable,
                    table_mde_condition)

__all__ = ["ALPHA", "BINARY_METRICS", "CANNOT_TELL", "COLUMN_NOTES", "CONTRADICTS", "NOT_RUN", "PAPER_CLAIMS",
           "PAPER_COLUMN", "POWER", "READING_RULE", "REFERENCE", "SUPPORTS", "Claim", "drop_questions",
           "tuned_questions", "verdict", "claims_headline", "SCOREBOARD_CLAIM", "SCOREBOARD_VERDICT",
           "scoreboard", "scoreboard_sentence", "identical_scores_note", "SAME_CONTEXT_AS_NAIVE_RAG", "claims_table",
           "exact_test", "mde_column", "mde_condition", "mde_label", "minimum_detectable", "table_mde_condition"]
