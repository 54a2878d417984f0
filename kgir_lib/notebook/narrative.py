"""Notebook text that comes from the config, so it cannot drift from what runs.

A notebook's markdown names a setting by its field (`` `cfg.ngram_threshold` ``) and never quotes its value;
the value a run uses is printed by these functions from the run's :class:`kgir_lib.config.Config`
(``tests/test_notebook_drift.py`` checks both). Each function returns Markdown.
"""
from __future__ import annotations

from typing import Sequence

__all__ = ["similarity_text", "matching_rule", "match_name", "NGRAM_METHODS", "gtmp_text", "weighting_text",
           "algorithm1_settings", "reader_context", "settings_table", "AUDIT_HEADING"]

# The one heading under which notebooks 03-07 keep their audit material (per-question tables, column notes, exact
# tests, every variant's rows, links to the saved tables), after the teaching core a lecturer projects; a later
# table goes under it too. benchmarks/notebook_screens.py and tests/test_notebook_screens.py find it by this text.
AUDIT_HEADING = "Audit: every number behind this notebook"

# eq. 5 similarities, in words (kgir_lib.kgir.entity_matching.ngram_similarity); an unknown method is named as is.
SIMILARITY_TEXT = {
    "dice": "the Dice coefficient 2|A∩B| / (|A| + |B|) of the two names' sets of character {n}-grams",
    "overlap": "the overlap coefficient |A∩B| / min(|A|, |B|) of the two names' sets of character {n}-grams "
               "(1.0 whenever one name's {n}-grams all occur in the other's, e.g. a short name inside a longer one)",
    "containment": "token containment |A∩B| / min(|A|, |B|) of the two names' sets of content words",
    "overlap_len": "the overlap coefficient of the two names' sets of character {n}-grams, when the shorter name "
                   "is at least {ratio} of the longer one's length (else 0)",
    "overlap_best": "the overlap coefficient of the two names' sets of character {n}-grams, keeping only each "
                    "question entity's best graph entities",
    "dice_best": "the Dice coefficient of the two names' sets of character {n}-grams, keeping only each question "
                 "entity's best graph entities",
    "tokens": "token matching: the two names' content words (made singular) are the same, or the longer name adds "
              "at most {extra} word to the shorter one's; the similarity is the share of the longer name's words "
              "the shorter one has (1.0 for the same words)",
}
GTMP_TEXT = {
    "passages": "`passages`: G_tmp is every triple of G_q (the description of Algorithm 1: \"connect the entities "
                "of the retrieved passages\"); the components that hold a seed are the B_i, and the trees can "
                "prune cycles and parallel edges anywhere in them",
    "seed_star": "`seed_star`: G_tmp is each seed and its adjacent edges (the §2.2 prose), a union of stars; "
                 "its trees can only drop parallel edges and edges between two seeds",
}
WEIGHTING_TEXT = {
    "reranker": "the cross-encoder score of (question, triple text) from `{reranker}` (Algorithm 1)",
    "cosine": "the cosine of the question's and the triple text's embeddings from `{encoder}`, the encoder of "
              "eq. 2 (no cross-encoder is configured)",
    "passage": "the eq. 2 score of the triple's source passage",
}


def similarity_text(method: str, n: int = 3) -> str:
    """The eq. 5 similarity ``method`` in words."""
    from ..kgir.entity_matching import LENGTH_RATIO, MAX_EXTRA_WORDS

    return SIMILARITY_TEXT.get(method, f"the similarity `{method}`").format(n=n, ratio=LENGTH_RATIO,
                                                                            extra=MAX_EXTRA_WORDS)


# The eq. 5 rules whose similarity compares character n-grams; the others compare words.
NGRAM_METHODS = ("dice", "overlap", "overlap_len", "overlap_best", "dice_best")


def match_name(cfg) -> str:
    """How this run's eq. 5 rule is called in a heading or a printout: "character n-gram" matching only when the
    rule compares n-grams (:data:`NGRAM_METHODS`), else "token" matching; never the other's name."""
    return (f"character {cfg.ngram_n}-gram" if cfg.match_method in NGRAM_METHODS else "token") + \
        f" matching (`match_method` = `{cfg.match_method}`, θ = {cfg.ngram_threshold})"


def matching_rule(cfg) -> str:
    """Eq. 5 as this run applies it: the similarity, its threshold, and what a match makes."""
    return (f"a question entity is matched to every entity of G_q whose similarity to it is at least "
            f"θ = {cfg.ngram_threshold} (`ngram_threshold`); the similarity (`match_method` = "
            f"`{cfg.match_method}`) is {similarity_text(cfg.match_method, cfg.ngram_n)}. Every match is a seed.")


def gtmp_text(reading: str) -> str:
    """A ``gtmp_reading`` value in words."""
    return GTMP_TEXT.get(reading, f"`{reading}`")


def weighting_text(cfg) -> str:
    """How this run weights the edges of the seed components (§2.2)."""
    kind = "reranker" if cfg.reranker_model else "cosine"
    return WEIGHTING_TEXT[kind].format(reranker=cfg.reranker_model, encoder=cfg.embed_model)


def algorithm1_settings(cfg) -> str:
    """Algorithm 1's settings in this run, as a Markdown list (for notebooks 03, 04 and 07)."""
    return "\n".join([
        f"**Algorithm 1 in this run** (profile `{cfg.profile}`, LLM `{cfg.llm_model}`):",
        "",
        f"* step 1, `top_k`: D_q holds the {cfg.top_k} passages most similar to the question "
        f"(eq. 2, `{cfg.embed_model}`);",
        f"* steps 3-4, eq. 5: {matching_rule(cfg)}",
        f"* step 4, `gtmp_reading`: {gtmp_text(cfg.gtmp_reading)};",
        f"* step 6, edge weights: {weighting_text(cfg)}.",
    ])


def reader_context(cfg) -> str:
    """What the shared reader sees in this run."""
    return (f"the reader sees the first {cfg.context_passages} passages of a method's context (`context_passages`), "
            f"each cut to {cfg.passage_chars} characters (`passage_chars`)")


def settings_table(cfg, fields: Sequence[str]) -> str:
    """A Markdown table of ``fields`` and this run's values."""
    rows = [f"| `{f}` | {getattr(cfg, f)!r} |" for f in fields]
    return "\n".join(["| setting | this run |", "|---|---|", *rows])
