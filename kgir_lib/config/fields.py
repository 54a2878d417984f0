"""The one config object (every knob of the suite, its allowed values), and the one run-directory layout.

Profiles are read by :mod:`kgir_lib.config.profiles`, values checked by :mod:`kgir_lib.config.checks`.

Run-directory layout (``<results>/<run name>/``; the run name is the profile's :func:`profile_identity`
unless ``run_name`` sets another, as the runner does for a run with overrides, a scratch run)::

    config/<notebook>.yaml      effective config of each notebook run
    notebooks/<notebook>.ipynb  papermill output notebooks (main job)
    cache/llm.sqlite            the LLM cache (every call, keyed by model + messages + params)
    cache/embeddings/           dense embeddings, keyed by model and corpus content
    kg/<dataset>/               triples table, vocabularies (notebook 01)
    traces/<method>/<dataset>.trace.jsonl   per-question traces
    tables/                     CSV + Markdown tables
    usage/<notebook>.csv        LLM usage per stage

Figures go to ``<figures>/<run name>/``.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import NamedTuple, Optional, Union

PROFILE_DIR = Path(__file__).resolve().parent.parent / "profiles"
PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


class ConfigError(ValueError):
    """A profile or parameter is invalid; the message names the file or field."""


# The text that sets a nullable field to null where ``None`` already means "keep the profile's value": a papermill
# parameter, an ``open_notebook`` or ``load_config`` override (``passage_chars="null"``: the whole passage). The
# runner turns ``-p NAME null`` into it; a field that may not be null refuses it, naming the field.
NULL = "null"


def knob(default=MISSING, help: str = "", *, factory=None):
    """A :class:`Config` field with its ``help`` in the field's metadata (``python -m kgir_lib.config`` lists
    every field with its help, type and default; docs/operations.md renders that list)."""
    if not help.strip():
        raise ValueError("knob: every Config field says what it does (help)")
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class Config:
    """Every knob of the suite. Field names are the papermill parameter names; each field's help is in its
    metadata (:func:`knob`)."""

    profile: str = knob("sample", "the profile's name (kgir_lib/profiles/<name>.yaml) or YAML file; names the run "
                                  "directory")
    description: str = knob("", "what the profile is for, in words")
    # LLM (one interface, several backends: llamacpp | openai | vllm | scripted)
    llm_backend: str = knob("llamacpp", "the LLM backend: llamacpp (in process) | openai (a server) | vllm | "
                                        "scripted (tests)")
    llm_model: str = knob("Qwen2.5-Coder-0.5B-Instruct-Q4_K_M", "the LLM: an embedded GGUF name on llamacpp, the "
                                                                "served model name on openai")
    llm_model_path: Optional[str] = knob(None, "a GGUF file for llamacpp; null: the embedded model of llm_model")
    llm_base_urls: list = knob(help="the openai backend's server URLs (one request stream each)", factory=list)
    llm_api_key_env: str = knob("KGIR_LLM_API_KEY", "the environment variable the API key is read from (secrets "
                                                    "only from the environment)")
    llm_json_mode: str = knob("llamacpp", "how a JSON reply is constrained: llamacpp | vllm | openai | none")
    llm_max_concurrency: int = knob(1, "requests in flight at once (openai backend)")
    llm_timeout_s: float = knob(120.0, "seconds one request may take")
    llm_max_retries: int = knob(3, "new attempts after a failed request")
    llm_retry_window_s: float = knob(30.0, "openai backend: no new attempt starts later than this after the first")
    llm_n_ctx: int = knob(4096, "llamacpp context length in tokens")
    llm_n_threads: int = knob(2, "llamacpp CPU threads")
    llm_tensor_parallel_size: int = knob(1, "GPUs one vLLM server shards the model over (scripts/paper.sh starts it)")
    llm_seed: int = knob(0, "the LLM's sampling seed")
    temperature: float = knob(0.0, "sampling temperature (0: greedy)")
    max_new_tokens: int = knob(192, "budget of any LLM stage without its own field below (e.g. free-form "
                                    "case-study calls)")
    # per-stage generation budgets (max new tokens). Paper values (paper.yaml) are large
    # enough never to cut a well-formed answer; usage tables count truncated completions (finish "length").
    max_tokens_extract: int = knob(256, "budget of KG extraction, one passage's triple list (KGIR-RAG §2.1)")
    max_tokens_ner: int = knob(64, "budget of KGIR-RAG NER(q), eq. 4")
    max_tokens_rewrite: int = knob(64, "budget of KGIR-RAG Rewrite, eq. 8")
    max_tokens_reflect: int = knob(192, "budget of KGIR-RAG Reflection (CoT + verdict), §2.4")
    max_tokens_verdict: int = knob(32, "budget of the reflection's verdict turn (format repair, not in the paper)")
    max_tokens_reader: int = knob(32, "budget of the shared reader and closed-book answers")
    max_tokens_hyde: int = knob(128, "budget of HyDE's hypothetical passage")
    max_tokens_ircot: int = knob(64, "budget of IRCoT's reasoning sentence")
    max_tokens_iter_retgen: int = knob(96, "budget of ITER-RETGEN's generation of rounds 1..T-1")
    max_tokens_hipporag2_filter: int = knob(256, "budget of HippoRAG 2's recognition-memory filter (JSON facts)")
    max_tokens_lightrag_extract: int = knob(1024, "budget of LightRAG's own extraction, gleaning and summaries "
                                                  "(native index)")
    # retrieval
    embed_model: str = knob("all-MiniLM-L6-v2", "the dense encoder (eq. 2)")
    embed_batch_size: int = knob(64, "texts the encoder embeds at once")
    reranker_model: Optional[str] = knob(None, "a cross-encoder reranker for Algorithm 1's edge weights; null: "
                                               "cosine of question and triple text")
    embed_max_length: Optional[int] = knob(None, "encoder input length in tokens; null: the encoder's default "
                                                 "(paper §3.2: BGE-M3 with inputs of up to 8192 tokens)")
    # data
    datasets: list = knob(help="the datasets a run reads", factory=lambda: ["musique", "hotpotqa", "musique_train"])
    n_questions: Optional[int] = knob(8, "questions a dataset (a seeded sample); null: every question")
    allow_fewer_questions: bool = knob(False, "a dataset with fewer questions than asked is an error unless true")
    seed: int = knob(0, "the question sample's seed")
    # KG extraction (notebook 01)
    extract_max_passages: Optional[int] = knob(60, "passages notebook 01 extracts a dataset (the extraction pool); "
                                                   "null: every passage")
    extract_datasets: list = knob(help="the datasets notebook 01 extracts with the LLM (the others import their "
                                       "published OpenIE)", factory=lambda: ["musique", "hotpotqa"])
    # KGIR-RAG (paper §2.2-2.4)
    top_k: int = knob(10, "retrieval depth |D_q| of every method (eq. 2; KG²RAG's seed passages k); also sizes "
                          "notebook 01's extraction pool: the union of the sampled questions' top_k passages "
                          "(kgir_lib.kg.extract.extraction_pool), so Algorithm 1 finds the triples of G_q already "
                          "extracted")
    ngram_n: int = knob(3, "n of the character n-grams of the eq. 5 rules")
    ngram_threshold: float = knob(0.7, "eq. 5 threshold of match_method (results/benchmarks/matching.md)")
    match_method: str = knob("tokens", "eq. 5 rule (MATCH_METHODS): \"tokens\" judged the same entity best on "
                                       "hand-labelled pairs (highest recall at precision >= 90 %)")
    gtmp_reading: str = knob("passages", "Algorithm 1 G_tmp: \"passages\" (connect D_q's entities) | \"seed_star\" "
                                         "(§2.2)")
    max_iterations: int = knob(3, "KGIR-RAG's rounds T (Algorithm 2)")
    max_evidence_triples: Optional[int] = knob(20, "G_Ans triples shown (heaviest first) to Rewrite, Reflection and "
                                                   "the reader; null: every triple (paper). A cap keeps a small "
                                                   "model's prompt short")
    reflection_passages: str = knob("new", "P_t of the reflection (§2.4): \"new\" (passages of D'_t not in D_t; the "
                                           "top of D'_t only when none is new) | \"all\" (the top of D'_t)")
    kgir_answer_source: str = knob("reader", "who writes the final answer: \"reader\" (the shared reader, over the "
                                             "evidence the reflection read; one answer rule for every method) | "
                                             "\"reflection\" (Fig. 5)")
    reflect_prompt: str = knob("kgir_reflect", "the reflection's prompt file: \"kgir_reflect\" (worded for small "
                                               "models) | \"kgir_reflect_paper\" (Fig. 5 as published)")
    # A second LLM for KG extraction and question NER (paper §3.2: Qwen2.5-72B extracts triples and question
    # entities for both reader LLMs). Same backend, key and json mode as the reader.
    kg_llm_model: Optional[str] = knob(None, "a second LLM for KG extraction and question NER (paper §3.2); null: "
                                             "the reader LLM does both")
    kg_llm_base_urls: list = knob(help="the second LLM's server URLs (openai backend)", factory=list)
    # baselines
    kg2rag_m_hops: int = knob(1, "KG²RAG's graph expansion hops m")
    kg2rag_budget: int = knob(10, "KG²RAG's context budget (passages)")
    ircot_max_steps: int = knob(3, "IRCoT's reasoning steps")
    iter_retgen_rounds: int = knob(3, "ITER-RETGEN's rounds T")
    # HippoRAG 2 (baselines/hipporag2.py; upstream defaults: linking_top_k 5, synonymy top 2047 at cosine >= 0.8)
    hipporag2_synonymy: Optional[bool] = knob(None, "HippoRAG 2's synonymy edges; null: on for openai/vllm backends, "
                                                    "off on CPU")
    hipporag2_link_top_k: int = knob(5, "HippoRAG 2: facts linked to the question and phrase seeds kept")
    hipporag2_synonym_threshold: float = knob(0.8, "HippoRAG 2: cosine a synonym must reach")
    hipporag2_synonym_top_k: int = knob(2047, "HippoRAG 2: k of the phrase k-NN search for synonyms")
    lightrag_index: str = knob("suite_graph", "LightRAG's index (baselines/lightrag_index.py): suite_graph | native")
    # ablation / sensitivity / robustness studies (notebook 06)
    ablation_datasets: list = knob(help="notebook 06: the datasets of Table 7 and KG²RAG's ablations",
                                   factory=lambda: ["musique", "hotpotqa"])
    study_datasets: list = knob(help="notebook 06: the datasets of the sweeps and the robustness study",
                                factory=lambda: ["musique_train"])
    eval_methods: Optional[list] = knob(None, "the methods of notebook 05 (registry keys of "
                                              "kgir_lib.registry.METHODS, checked there); null: every method")
    attribution_methods: Optional[list] = knob(None, "the study variants notebook 04 runs for its step attribution "
                                                     "(keys of kgir_lib.registry.STUDY_METHODS: the oracles and two "
                                                     "repairs of ours, never the paper's method); null: every one; "
                                                     "[]: none")
    attribution_datasets: Optional[list] = knob(None, "the datasets the step attribution covers, a filter on "
                                                      "datasets (a run narrowed to other datasets covers none of "
                                                      "them); null: every dataset of the run")
    decomposition_readers: Optional[list] = knob(None, "notebook 04's loss decomposition: the models that re-read "
                                                       "KGIR-RAG's final reader prompts, smallest first (embedded "
                                                       "GGUF names on llamacpp; served model names on openai); "
                                                       "null: the profile's own model only")
    decomposition_datasets: Optional[list] = knob(None, "the datasets the loss decomposition covers, a filter on "
                                                        "datasets like attribution_datasets; null: every dataset "
                                                        "of the run")
    decomposition_orders: bool = knob(False, "notebook 04: also read the loss decomposition with its step (b) split "
                                             "(withheld gold restored apart from never-retrieved gold added) and its "
                                             "fixes in the reverse order (kgir_lib.eval.mechanism.loss_orders): five "
                                             "more prompts a question for every reader")
    study_n_questions: Optional[int] = knob(4, "questions a sweep point (null: n_questions)")
    robustness_seeds: int = knob(3, "seeds a drop fraction (KG²RAG robustness)")
    # reader context
    context_passages: int = knob(5, "passages the shared reader reads beside a method's evidence (and P_t's size)")
    passage_chars: Optional[int] = knob(600, "characters of a passage a prompt shows; null: the whole passage")
    # locations. Precedence: an explicit parameter, else $KGIR_DATA_DIR / $KGIR_RESULTS_DIR /
    # $KGIR_FIGURES_DIR, else the profile's value, else the defaults (the environment wins over a
    # profile, so the test suite's KGIR_RESULTS_DIR is never silently overridden by a profile).
    data_dir: Optional[str] = knob(None, "the data folder; null: $KGIR_DATA_DIR, else ../shared/data beside the "
                                         "project, else data/samples/")
    results_dir: Optional[str] = knob(None, "where run directories go; null: $KGIR_RESULTS_DIR, else results/")
    figures_dir: Optional[str] = knob(None, "where figures go; null: $KGIR_FIGURES_DIR, else figures/")
    run_name: Optional[str] = knob(None, "the run directory's name; null: the profile's (see profile_identity)")

    # ---- derived locations -------------------------------------------------
    @property
    def data_path(self) -> Path:
        return Path(self.data_dir) if self.data_dir else default_data_dir()

    @property
    def run_dir(self) -> Path:
        base = Path(self.results_dir) if self.results_dir else default_results_dir()
        return base / (self.run_name or self.profile)

    @property
    def reference_dir(self) -> Path:
        """The profile's own run directory (``<results>/<profile>/``): the run directory itself, or for a
        scratch run (``run_name`` set) the one whose committed response log it starts from."""
        base = Path(self.results_dir) if self.results_dir else default_results_dir()
        return base / self.profile

    @property
    def fig_dir(self) -> Path:
        base = Path(self.figures_dir) if self.figures_dir else default_figures_dir()
        return base / (self.run_name or self.profile)

    @property
    def attribution_scope(self) -> list:
        """The run's datasets the step attribution covers: ``datasets`` in their order, narrowed to
        ``attribution_datasets`` unless that is null."""
        if self.attribution_datasets is None:
            return list(self.datasets)
        return [d for d in self.datasets if d in self.attribution_datasets]

    @property
    def decomposition_scope(self) -> list:
        """The run's datasets the loss decomposition covers: ``datasets`` in their order, narrowed to
        ``decomposition_datasets`` unless that is null."""
        if self.decomposition_datasets is None:
            return list(self.datasets)
        return [d for d in self.datasets if d in self.decomposition_datasets]

    def path(self, *parts: str) -> Path:
        """A path inside the run directory; parent folders are created."""
        p = self.run_dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def max_tokens(self, stage: str) -> int:
        """The generation budget of ``stage`` (``extract``, ``ner``, ``rewrite``, ``reflect``, ``reader``,
        ``verdict``, ``hyde``, ``ircot``, ``iter_retgen``, ``hipporag2_filter``): field ``max_tokens_<stage>``, else
        ``max_new_tokens``."""
        return int(getattr(self, f"max_tokens_{stage}", self.max_new_tokens))


def default_data_dir() -> Path:
    """``$KGIR_DATA_DIR``, else ``../shared/data`` beside the project root if that folder exists, else the
    project's downloaded samples (:func:`samples_dir`; ``python -m kgir_lib.data_sources fetch`` fills it, and
    the runner does so by itself when it is missing)."""
    env = os.environ.get("KGIR_DATA_DIR")
    if env:
        return Path(env)
    shared = shared_data_dir()
    return shared if shared.is_dir() else samples_dir()


def shared_data_dir() -> Path:
    """``../shared/data`` beside the project root: the samples, where a machine provides them."""
    return PROJECT_ROOT.parent / "shared" / "data"


def samples_dir() -> Path:
    """``data/samples/`` in the project (git-ignored): the samples derived from the upstream releases and
    verified against ``kgir_lib/data_sources/manifest.json``. Not ``data/<name>/``: that is where
    ``scripts/paper.sh`` puts HippoRAG 2's full 1000-question sets."""
    return PROJECT_ROOT / "data" / "samples"


def default_results_dir() -> Path:
    env = os.environ.get("KGIR_RESULTS_DIR")
    return Path(env) if env else PROJECT_ROOT / "results"


def api_cache_dir(cache_dir: Optional[Union[str, Path]] = None) -> Path:
    """The folder where the public API (:class:`kgir_lib.api.KGIRPipeline`) keeps its run folders, one a profile,
    outside the repository: ``cache_dir``, else ``$KGIR_CACHE_DIR``, else ``$XDG_CACHE_HOME/kgir/api``, else
    ``~/.cache/kgir/api`` (beside the embedded models that set-up keeps in ``kgir/models``). The results folder of
    the profiles' committed runs is refused, naming ``cache_dir``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    folder = Path(cache_dir or os.environ.get("KGIR_CACHE_DIR") or
                  (Path(xdg) if xdg else Path.home() / ".cache") / "kgir" / "api").expanduser()
    if folder.resolve() in {default_results_dir().resolve(), (PROJECT_ROOT / "results").resolve()}:
        raise ValueError(f"parameter 'cache_dir': {folder} is the results folder of the profiles' committed runs; "
                         f"give another folder, or use_profile_cache=True to write into the profile's run")
    return folder


def default_figures_dir() -> Path:
    env = os.environ.get("KGIR_FIGURES_DIR")
    return Path(env) if env else PROJECT_ROOT / "figures"


_FIELDS = {f.name: f for f in fields(Config)}
LOCATION_ENV = {"data_dir": "KGIR_DATA_DIR", "results_dir": "KGIR_RESULTS_DIR", "figures_dir": "KGIR_FIGURES_DIR"}


_SECRET_HINT = "secrets come from the environment only (the variable named by 'llm_api_key_env')"


def builtin_profiles() -> list:
    """The names of the profiles shipped in ``kgir_lib/profiles/``."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def _field_kind(name: str) -> tuple:
    """(base type name, nullable) of a Config field, read from its annotation."""
    kind = _FIELDS[name].type
    kind = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    if kind.startswith("Optional[") and kind.endswith("]"):
        return kind[len("Optional["):-1], True
    return kind, False


# The values a text field may take: the one table of allowed choices, checked in one place
# (:func:`kgir_lib.config.checks.check_choice`). The modules that implement a choice import its list from here
# (the config sits below the methods it configures).
LLM_BACKENDS = ("llamacpp", "openai", "vllm", "scripted")
JSON_MODES = ("llamacpp", "vllm", "openai", "none")
MATCH_METHODS = ("dice", "overlap", "containment", "overlap_len", "overlap_best", "dice_best", "tokens")  # eq. 5 rules
GTMP_READINGS = ("passages", "seed_star")  # Algorithm 1's G_tmp (kgir_lib.kgir.subgraph.tmp_graph)
REFLECTION_PASSAGES = ("new", "all")
ANSWER_SOURCES = ("reader", "reflection")
REFLECT_PROMPTS = ("kgir_reflect", "kgir_reflect_paper")
LIGHTRAG_INDEXES = ("suite_graph", "native")  # LightRAG's index (kgir_lib.baselines.lightrag_index)
CHOICES: dict = {"llm_backend": LLM_BACKENDS, "llm_json_mode": JSON_MODES, "match_method": MATCH_METHODS,
                 "gtmp_reading": GTMP_READINGS, "reflection_passages": REFLECTION_PASSAGES,
                 "kgir_answer_source": ANSWER_SOURCES, "reflect_prompt": REFLECT_PROMPTS,
                 "lightrag_index": LIGHTRAG_INDEXES}


class Range(NamedTuple):
    """The values a number field may take: ``lo`` (excluded when ``open_lo``) to ``hi``, both included."""

    lo: float
    hi: float
    open_lo: bool = False

    def holds(self, value: float) -> bool:
        return (value > self.lo if self.open_lo else value >= self.lo) and value <= self.hi

    def __str__(self) -> str:
        def num(v: float) -> str:
            return str(int(v)) if float(v).is_integer() else str(v)

        return f"{'>' if self.open_lo else '>='} {num(self.lo)} and <= {num(self.hi)}"


_TOKENS = Range(1, 131_072)      # a generation budget (max new tokens)
_QUESTIONS = Range(1, 10_000_000)
_SEED = Range(0, 2**32 - 1)
# Every int and float field of Config, or a name prefix ending in "*": the one table of allowed values, checked in
# one place (checks.check_range). A value outside is refused when the profile loads, naming the field,
# instead of failing (or silently doing nothing) in a notebook later. None (for Optional fields) always passes.
RANGES: dict = {
    "llm_max_concurrency": Range(1, 4096), "llm_timeout_s": Range(0, 86_400, open_lo=True),
    "llm_max_retries": Range(0, 1000), "llm_retry_window_s": Range(0, 7 * 86_400),
    "llm_n_ctx": Range(1, 1_048_576), "llm_n_threads": Range(1, 1024), "llm_seed": _SEED,
    "llm_tensor_parallel_size": Range(1, 1024),
    "temperature": Range(0, 2), "max_new_tokens": _TOKENS, "max_tokens_*": _TOKENS,
    "embed_batch_size": Range(1, 65_536), "n_questions": _QUESTIONS, "seed": _SEED,
    "extract_max_passages": Range(1, 100_000_000), "top_k": Range(1, 1_000_000), "ngram_n": Range(1, 32),
    "ngram_threshold": Range(0, 1), "max_iterations": Range(1, 100), "kg2rag_m_hops": Range(0, 100),
    "kg2rag_budget": Range(1, 100_000), "ircot_max_steps": Range(1, 100), "iter_retgen_rounds": Range(1, 100),
    "hipporag2_link_top_k": Range(1, 100_000), "hipporag2_synonym_threshold": Range(-1, 1),
    "hipporag2_synonym_top_k": Range(1, 1_000_000), "study_n_questions": _QUESTIONS,
    "robustness_seeds": Range(1, 1000), "context_passages": Range(1, 1000), "passage_chars": Range(1, 10_000_000),
    "embed_max_length": Range(1, 1_048_576), "max_evidence_triples": Range(1, 1_000_000),
}


def field_range(name: str) -> Optional[Range]:
    """The :data:`RANGES` entry of field ``name`` (an exact name first, then a ``prefix*`` pattern)."""
    if name in RANGES:
        return RANGES[name]
    return next((r for key, r in RANGES.items() if key.endswith("*") and name.startswith(key[:-1])), None)
