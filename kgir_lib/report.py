"""Tables and figures: saving them, and the published reference numbers (the source papers' tables).

Published numbers live here once, with their source, and are only ever shown in
separate, labelled columns beside ours — never mixed into our own columns.
"""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Optional, Sequence

from .figures import (DPI_KEY, FIGURE_DPI, FIGURE_FIT_1024_PX, FIGURE_FIT_PX, FIGURE_FITS, FONT_KEY,  # noqa: F401
                      MIN_TEXT_PX, PANEL_ORDER, drawn_font_sizes, figure_png, figure_text_px, panel_order)

if TYPE_CHECKING:  # pandas is imported where a table is made: a script that reads a constant here loads none
    import pandas as pd

# What each LLM the suite knows is, for the caveat every notebook prints (matched by substring of llm_model).
PAPER_LLMS = ("Qwen2.5-72B-Instruct", "Llama-3-8B-Instruct")
KNOWN_LLMS = {
    "Qwen2.5-Coder-0.5B-Instruct": "a 0.5 B-parameter code-tuned chat model of the Qwen2.5-Coder family",
    "Qwen2.5-Coder-1.5B-Instruct": "a 1.5 B-parameter code-tuned chat model of the Qwen2.5-Coder family",
    "SmolLM2-135M-Instruct": "a 135 M-parameter chat model of the SmolLM2 family",
    "Qwen2.5-72B-Instruct": "the KGIR-RAG paper's reader for Table 4",
    "Llama-3-8B-Instruct": "the KGIR-RAG paper's reader for Table 5",
}


def describe_llm(cfg) -> str:
    """``cfg.llm_model`` in words: its name, what it is (when known) and how it runs."""
    if cfg.llm_backend == "scripted":
        return f"{cfg.llm_model} (scripted test replies, not a language model)"
    name = cfg.llm_model.replace("Meta-Llama", "Llama").lower()
    what = next((w for key, w in KNOWN_LLMS.items() if key.lower() in name), None)
    how = {"llamacpp": "GGUF via llama.cpp in process, on CPU", "openai": "an OpenAI-compatible server",
           "vllm": "vLLM in process"}.get(cfg.llm_backend, cfg.llm_backend)
    return f"{cfg.llm_model} ({what + ', ' if what else ''}{how})"


def is_paper_llm(cfg) -> bool:
    name = cfg.llm_model.replace("Meta-Llama", "Llama").lower()
    return cfg.llm_backend != "scripted" and any(p.lower() in name for p in PAPER_LLMS)


@lru_cache(maxsize=64)
def _records_in(path: str, mtime_ns: int) -> Optional[int]:
    try:
        records = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return len(records) if isinstance(records, list) else None


def question_counts(cfg, datasets: Optional[Sequence[str]] = None) -> dict:
    """``{dataset: how many questions the profile evaluates}`` for ``datasets`` (default ``cfg.datasets``):
    ``n_questions`` capped by the size of the dataset's question file (``<data>/<name>/<name>.json`` or
    ``<data>/<name>.json``, one question a record, as :func:`kgir_lib.data.load_dataset` reads it), so a dataset
    smaller than the sample (hotpotqa's 84 under ``n_questions: 100``) says its true count. ``None`` for a dataset
    whose file is not there with ``n_questions`` null (every question, count unknown)."""
    out = {}
    for d in (cfg.datasets if datasets is None else datasets):
        found = [p for p in (cfg.data_path / d / f"{d}.json", cfg.data_path / f"{d}.json") if p.is_file()]
        total = _records_in(str(found[0]), found[0].stat().st_mtime_ns) if found else None
        n = cfg.n_questions
        out[d] = total if n is None else n if total is None else min(n, total)
    return out


def questions_phrase(cfg, datasets: Optional[Sequence[str]] = None, each: str = "a dataset") -> str:
    """The question counts in words (:func:`question_counts`): ``"10 questions a dataset"`` (``each``: the words
    after the count) when every dataset has the same count, else each dataset's (``"musique_train 100, hotpotqa 84
    questions"``); ``"every question"`` where a count is unknown and the profile takes every question."""
    counts = question_counts(cfg, datasets)
    if not counts or None in counts.values():
        return "every question"
    if len(set(counts.values())) == 1:
        return f"{next(iter(counts.values()))} questions {each}"
    return ", ".join(f"{d} {k}" for d, k in counts.items()) + " questions"


def model_note(cfg, short: bool = False) -> str:
    """The caveat for whichever LLM ``cfg`` configures: which model made the numbers and what they are worth.

    ``short``: one line to put under a table (the model and that its numbers are not the paper's).
    """
    n = questions_phrase(cfg)
    if cfg.llm_backend == "scripted":
        return (f"LLM: {describe_llm(cfg)}. Every number here is a test artefact and says nothing about any method.")
    if is_paper_llm(cfg):
        if short:
            return f"Numbers by {cfg.llm_model} (a paper reader), profile '{cfg.profile}', {n}."
        return (f"LLM: {describe_llm(cfg)}; profile '{cfg.profile}', {n}. "
                "The reader matches the paper's; the numbers are comparable with it only at the paper's scale "
                "(1000 questions) and with its retrievers (BGE-M3, bge-reranker-large).")
    if short:
        return (f"Numbers by {cfg.llm_model} (profile '{cfg.profile}', {n}): a small model's, "
                "not the paper's numbers.")
    return (f"LLM: {describe_llm(cfg)}; profile '{cfg.profile}', {n}. Its numbers show what this pipeline does "
            f"with a small model on a small sample; they are not a reproduction of the paper's numbers, whose "
            f"readers are {' and '.join(PAPER_LLMS)}.")


# The run the README's headline quotes: the readers' copies notebooks/*.ipynb carry its committed outputs
# (scripts/build_notebooks.py; tests/test_readers_copies.py keeps them equal to results/<profile>/notebooks/).
HEADLINE_PROFILE = "local"


def whose_outputs(cfg) -> str:
    """The line that opens every notebook's first output: whether this is the run the readers' copies carry."""
    if cfg.profile == HEADLINE_PROFILE:
        return (f"Outputs of the '{HEADLINE_PROFILE}' run, the run the README's headline quotes; the readers' copies "
                f"notebooks/*.ipynb carry them (the 'sample' run's are in results/sample/notebooks/).")
    return (f"Outputs of the '{cfg.profile}' run; the readers' copies notebooks/*.ipynb carry the "
            f"'{HEADLINE_PROFILE}' run's, the run the README's headline quotes "
            f"(results/{HEADLINE_PROFILE}/notebooks/).")


def run_header(cfg, notebook: str, with_llm: bool = True) -> str:
    """The first lines a notebook prints: whose outputs these are (:func:`whose_outputs`), profile, models,
    datasets, where the effective config went."""
    lines = [whose_outputs(cfg), f"{notebook} - profile '{cfg.profile}': {cfg.description}".rstrip(": ")]
    models = f"encoder {cfg.embed_model}, reranker {cfg.reranker_model or 'none (cosine edge weights)'}"
    if with_llm:
        where = cfg.llm_model_path or ("embedded GGUF" if cfg.llm_backend == "llamacpp" else
                                       ", ".join(cfg.llm_base_urls) or cfg.llm_backend)
        models = f"LLM {cfg.llm_model} ({cfg.llm_backend}: {where}), " + models
    lines.append(models)
    lines.append(f"datasets {list(cfg.datasets)}, {questions_phrase(cfg, each='each')} (seed {cfg.seed}); "
                 f"top_k {cfg.top_k}; "
                 f"effective config: {shown(cfg.run_dir / 'config' / (notebook + '.yaml'))}")
    return "\n".join(lines)


# HippoRAG 2 paper (arXiv 2502.14802), reader Llama-3.3-70B: EM / F1.
HIPPORAG2_QA = {
    "no retrieval": {"musique": (17.6, 26.1), "hotpotqa": (37.0, 47.3)},
    "BM25": {"musique": (20.3, 28.8), "hotpotqa": (52.0, 63.4)},
    "Contriever": {"musique": (24.0, 31.3), "hotpotqa": (51.3, 62.3)},
    "NV-Embed-v2": {"musique": (34.7, 45.7), "hotpotqa": (62.8, 75.3)},
    "RAPTOR": {"musique": (20.7, 28.9), "hotpotqa": (56.8, 69.5)},
    "GraphRAG": {"musique": (27.3, 38.5), "hotpotqa": (55.2, 68.6)},
    "HippoRAG 2": {"musique": (37.2, 48.6), "hotpotqa": (62.7, 75.5)},
}
# HippoRAG 2 paper: Recall@2 / Recall@5.
HIPPORAG2_RECALL = {
    "BM25": {"musique": (32.4, 43.5), "hotpotqa": (57.3, 74.8)},
    "Contriever": {"musique": (34.8, 46.6), "hotpotqa": (58.4, 75.3)},
    "NV-Embed-v2": {"musique": (52.7, 69.7), "hotpotqa": (84.1, 94.5)},
    "HippoRAG 2": {"musique": (56.1, 74.7), "hotpotqa": (83.5, 96.3)},
}
# KAG paper (DeepSeek-V2).
KAG_QA = {"musique": (36.7, 48.7), "hotpotqa": (62.5, 76.2)}
KAG_RECALL = {"musique": (48.5, 65.7), "hotpotqa": (72.8, 88.8)}
# KGIR-RAG prose: recall gains over KAG (R@2, R@5), and KAG's recall as the KGIR-RAG paper cites it;
# their sum is DERIVED, not a number printed in the paper.
KGIR_RECALL_GAIN_OVER_KAG = {"musique": (0.6, 1.5), "hotpotqa": (1.5, 0.7)}
KAG_RECALL_AS_CITED_BY_KGIR = {"musique": (49.1, 67.2), "hotpotqa": (74.3, 89.5)}
KGIR_RECALL_DERIVED = {d: tuple(round(a + b, 1) for a, b in zip(KAG_RECALL_AS_CITED_BY_KGIR[d],
                                                               KGIR_RECALL_GAIN_OVER_KAG[d]))
                       for d in KGIR_RECALL_GAIN_OVER_KAG}
# KGIR-RAG Table 7 (MuSiQue, Qwen2.5-72B): EM / F1 of the full method minus each variant (what the part removed adds;
# positive when it helps), the one sign every Table 7 number of the suite takes (TABLE7_SIGN).
KGIR_ABLATION_DROPS = {"w/o subgraph": (4.2, 4.8), "w/o reflection": (9.4, 8.9), "w/o rewrite": (11.0, 8.3)}
TABLE7_SIGN = ("Table 7's differences, ours and the paper's alike, are the full method minus the variant: what the "
               "removed part adds, positive when it helps (the paper's reflection: +9.4 EM, +8.9 F1).")
# The datasets those drops belong beside: MuSiQue's dev sample and musique_train (MuSiQue's train split).
KGIR_ABLATION_DATASETS = ("musique", "musique_train")
# KG²RAG (LLaMA3-8B, HotpotQA distractor, response F1).
KG2RAG_F1 = {"KG²RAG": 0.663, "semantic RAG": 0.617}
# Indexing cost on MuSiQue (HippoRAG 2 paper), millions of input / output tokens.
INDEXING_TOKENS_M = {"HippoRAG 2": (9.2, 3.0), "GraphRAG": (115.5, 36.1), "LightRAG": (68.5, 18.3)}
SOURCES = {
    "hipporag2": "HippoRAG 2 paper (arXiv 2502.14802), reader Llama-3.3-70B",
    "kag": "KAG paper, DeepSeek-V2",
    "kgir_derived": "derived: KAG recall as cited by KGIR-RAG + KGIR-RAG's stated gains (not printed in the paper)",
    "kgir_table7": "KGIR-RAG Table 7 (MuSiQue, Qwen2.5-72B), as stated in the paper's prose",
}


# ----------------------------------------------------------------------------- published numbers as column groups
def _published_frame(source: str, numbers: Mapping[str, Mapping[str, tuple]], metrics: Sequence[str],
                     rename: Mapping[str, str], datasets: Sequence[str], scale: float = 1.0) -> pd.DataFrame:
    import pandas as pd

    rows = {}
    for method, by_ds in numbers.items():
        row = {}
        for d in datasets:
            if d in by_ds:
                vals = by_ds[d] if isinstance(by_ds[d], (tuple, list)) else (by_ds[d],)
                for m, v in zip(metrics, vals):
                    if v is not None:
                        row[(source, d, m)] = float(v) * scale
        if row:
            rows[rename.get(method, method)] = row
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns, names=["source", "dataset", "metric"])
    df.index.name = "method"
    return df


# Published rows that are the same method as one of ours (by our display name); other rows keep their names.
PUBLISHED_SAME_METHOD = {"no retrieval": "Naive Gen", "BM25": "BM25", "HippoRAG 2": "HippoRAG 2",
                         "KG²RAG": "KG²RAG", "semantic RAG": "Naive RAG"}


def published_qa(datasets: Sequence[str]) -> list:
    """The published EM/F1 column groups of the source papers (one frame per source)."""
    kg2rag = {m: {"hotpotqa": (None, 100 * v)} for m, v in KG2RAG_F1.items()}
    return [
        _published_frame(f"published: {SOURCES['hipporag2']}", HIPPORAG2_QA, ("EM", "F1"),
                         PUBLISHED_SAME_METHOD, datasets),
        _published_frame(f"published: {SOURCES['kag']}", {"KAG": KAG_QA}, ("EM", "F1"), {}, datasets),
        _published_frame("published: KG²RAG paper (LLaMA3-8B, HotpotQA distractor setting, response F1)", kg2rag,
                         ("EM", "F1"), PUBLISHED_SAME_METHOD, datasets),
    ]


def published_recall(datasets: Sequence[str]) -> list:
    """The published Recall@2/@5 column groups of the source papers, the derived KGIR-RAG numbers labelled so."""
    return [
        _published_frame(f"published: {SOURCES['hipporag2']}", HIPPORAG2_RECALL, ("R@2", "R@5"),
                         PUBLISHED_SAME_METHOD, datasets),
        _published_frame(f"published: {SOURCES['kag']}", {"KAG": KAG_RECALL}, ("R@2", "R@5"), {},
                         datasets),
        _published_frame(SOURCES["kgir_derived"], {"KGIR-RAG": KGIR_RECALL_DERIVED},
                         ("R@2", "R@5"), {}, datasets),
    ]


def with_published(ours: pd.DataFrame, published: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Our column group, then each published group beside it (outer join on the method rows).

    Rows: our methods in their order, then published-only methods (e.g. GraphRAG,
    KAG). A published number sits only in its own labelled column group, never in ours.
    """
    out = ours.copy()
    for pub in published:
        if pub is None or pub.empty:
            continue
        out = out.join(pub, how="outer", sort=False)
    order = list(ours.index) + [m for m in out.index if m not in set(ours.index)]
    return out.loc[order]


def flat_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Column tuples joined with " / " (for Markdown/CSV readers that dislike MultiIndex; no "|": Markdown)."""
    import pandas as pd

    out = df.copy()
    if isinstance(out.columns, pd.MultiIndex):
        out.columns = [" / ".join(str(x) for x in c) for c in out.columns]
    return out


def published_indexing() -> pd.DataFrame:
    """Indexing cost on MuSiQue as published in the HippoRAG 2 paper (millions of tokens), its own table."""
    import pandas as pd

    label = f"published: {SOURCES['hipporag2']} (MuSiQue, 1000-question corpus)"
    df = pd.DataFrame({(label, "input tokens (M)"): {k: v[0] for k, v in INDEXING_TOKENS_M.items()},
                       (label, "output tokens (M)"): {k: v[1] for k, v in INDEXING_TOKENS_M.items()}})
    df.columns = pd.MultiIndex.from_tuples(df.columns, names=["source", "quantity"])
    df.index.name = "system"
    return df


# ----------------------------------------------------------------------------- paths as a reader sees them
LOCATION_LABELS = (("KGIR_RESULTS_DIR", "$KGIR_RESULTS_DIR"), ("KGIR_FIGURES_DIR", "$KGIR_FIGURES_DIR"),
                   ("KGIR_DATA_DIR", "$KGIR_DATA_DIR"))


def shown(path) -> str:
    """``path`` as a stored notebook shows it: relative to the project, else to the ``KGIR_*_DIR`` it is under
    (``$KGIR_RESULTS_DIR/...``), else to the home folder (``~/...``); never the machine's absolute path when one
    of these holds it."""
    from .config import PROJECT_ROOT

    p = Path(path).expanduser().absolute()
    bases = [(Path(PROJECT_ROOT).absolute(), "")]
    bases += [(Path(os.environ[env]).expanduser().absolute(), label) for env, label in LOCATION_LABELS
              if os.environ.get(env)]
    bases.append((Path.home().absolute(), "~"))
    for base, label in bases:
        if p == base or p.is_relative_to(base):
            rel = p.relative_to(base).as_posix()
            return f"{label}/{rel}" if label else rel
    return str(p)


class ShownPath(type(Path())):  # type: ignore[misc]  # this OS's concrete path class (Path itself: Python 3.12+)
    """A path whose repr is :func:`shown` (what a notebook prints when a cell ends with it)."""

    def __repr__(self) -> str:
        return shown(self)


# ----------------------------------------------------------------------------- saving
def is_p_column(name: str) -> bool:
    """A column of p-values: "p" is one of its words ("p", "p (Holm)", "EM p vs round 1")."""
    return "p" in str(name).split()


def to_markdown(df: pd.DataFrame, floatfmt: str = ".1f", exact: Sequence[str] = ()) -> str:
    """A GitHub Markdown table (no extra dependency). Floats print with ``floatfmt``, except in the ``exact``
    columns (set values such as a swept threshold 0.95 or a drop fraction 0.05), which print as given, and in
    p-value columns (:func:`is_p_column`), which print with two significant digits so that a small p does not
    read as 0.0."""
    import pandas as pd

    df = df.reset_index() if not isinstance(df.index, pd.RangeIndex) else df
    cols = [str(c) for c in df.columns]
    unknown = set(exact) - set(cols)
    if unknown:
        raise KeyError(f"to_markdown: exact column(s) {sorted(unknown)} not in the table (columns: {cols})")
    formats = [None if c in set(exact) else (".2g" if is_p_column(c) else floatfmt) for c in cols]

    def fmt(v, spec: Optional[str]):
        if isinstance(v, float):
            return "" if pd.isna(v) else (repr(float(v)) if spec is None else format(v, spec))
        return "" if v is None else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(fmt(v, f) for v, f in zip(row, formats)) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


# Columns that measure this execution rather than its result: a rerun from the cache turns every call into a
# cache hit and the seconds near zero, so a committed table holding them would change with every rerun.
RUNTIME_COLUMN = re.compile(r"cache[ _]hits|wall[ _]seconds|\w this run$", re.IGNORECASE)


def is_runtime(label) -> bool:
    """A column label (a tuple for grouped columns) of wall-clock seconds or cache hits (:data:`RUNTIME_COLUMN`)."""
    parts = label if isinstance(label, tuple) else (label,)
    return any(RUNTIME_COLUMN.search(str(p)) for p in parts)


def split_runtime(df: pd.DataFrame) -> tuple:
    """``(result, runtime)``: ``df`` without its :func:`is_runtime` columns, and those columns alone (None when
    there are none)."""
    runtime = [c for c in df.columns if is_runtime(c)]
    if not runtime:
        return df, None
    return df.drop(columns=runtime), df[runtime]


def save_table(df: pd.DataFrame, cfg, name: str, caption: str = "", exact: Sequence[str] = (),
               folder: str = "tables", markdown: bool = True) -> Path:
    """Write ``<folder>/<name>.csv`` and ``<folder>/<name>.md`` (caption above the table) in the run directory;
    ``exact``: columns of set values the .md prints as given (:func:`to_markdown`). Wall-clock seconds and cache
    hits (:func:`is_runtime`) describe this execution, not the result: they go to the git-ignored
    ``runtime/<folder>/<name>.csv`` instead, so a rerun leaves the committed table as it was. The path returned
    prints as :func:`shown`, relative to the project."""
    df, runtime = split_runtime(df)
    csv = cfg.path(folder, f"{name}.csv")
    df.to_csv(csv)
    if markdown:
        md = cfg.path(folder, f"{name}.md")
        md.write_text((f"{caption}\n\n" if caption else "") + to_markdown(df, exact=exact) + "\n")
    if runtime is not None:
        runtime.to_csv(cfg.path("runtime", folder, f"{name}.csv"))
    return ShownPath(csv)


# ----------------------------------------------------------------------------- figures (kgir_lib.figures)
def save_figure(fig, cfg, name: str) -> Path:
    """Write ``<figures>/<profile>/<name>.png`` (:func:`figure_png`: no timestamp or software version, its smallest
    font and dpi recorded), and only when the image differs from the file already there, so the same figure leaves
    the same bytes on disk. The path returned prints as :func:`shown`."""
    cfg.fig_dir.mkdir(parents=True, exist_ok=True)
    path = cfg.fig_dir / f"{name}.png"
    data = figure_png(fig)
    if not (path.exists() and path.read_bytes() == data):
        tmp = path.with_suffix(".png.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return ShownPath(path)
