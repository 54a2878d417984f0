"""Loaders for multi-hop QA sets in HippoRAG's release layout (KGIR-RAG §3.1).

A dataset ``<name>`` is two files in the data directory, either flat or in a
sub-folder ``<name>/``: ``<name>.json`` (questions in the dataset's raw schema)
and ``<name>_corpus.json`` (every passage, ``{title, text}``). The retrieval pool
is the whole corpus, never the question's own paragraphs.

Gold passages (for Recall@k, paper §3.3.3): MuSiQue, the paragraphs marked
``is_supporting``; HotpotQA, the corpus passages whose titles appear in
``supporting_facts``. Passage identity is title + text. Gold chains (hops, bridges): :mod:`kgir_lib.gold`.

Where the files come from, and how they are downloaded and verified: :mod:`kgir_lib.data_sources`.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import re
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Sequence

from .filecache import FileMemo
from .gold import GoldError, hotpot_gold, musique_gold

class DataError(ValueError):
    """Bad or missing data; the message names the file and field."""


@dataclass(frozen=True)
class Passage:
    pid: str
    title: str
    text: str

    @property
    def content(self) -> str:
        """What is embedded, indexed and shown to the LLM: title, newline, text."""
        return f"{self.title}\n{self.text}"


@dataclass(frozen=True)
class Question:
    qid: str
    question: str
    answers: tuple  # gold answer first, then aliases
    gold_pids: tuple
    dataset: str
    hops: Optional[int] = None
    gold_hops: tuple = ()     # the gold chain (kgir_lib.gold.GoldHop), and its bridges (kgir_lib.gold.Bridge):
    gold_bridges: tuple = ()  # read by the mechanism tables and the oracle study variants, by no method


@dataclass
class Corpus:
    passages: list
    _by_pid: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_pid = {p.pid: p for p in self.passages}

    def __len__(self) -> int:
        return len(self.passages)

    def __getitem__(self, pid: str) -> Passage:
        return self._by_pid[pid]

    def __contains__(self, pid: str) -> bool:
        return pid in self._by_pid

    @property
    def pids(self) -> list:
        return [p.pid for p in self.passages]


@dataclass
class Dataset:
    name: str
    questions: list
    corpus: Corpus


def passage_id(title: str, text: str) -> str:
    """Stable passage id from its identity (title + text)."""
    return hashlib.sha1(f"{title}\x1f{text}".encode("utf-8")).hexdigest()[:16]


def _find(data_dir: Path, name: str, suffix: str) -> Path:
    """``<data_dir>/<name>/<name><suffix>`` or ``<data_dir>/<name><suffix>``; else a DataError naming what is
    missing."""
    candidates = (data_dir / name / f"{name}{suffix}", data_dir / f"{name}{suffix}")
    for cand in candidates:
        if cand.is_file():
            return cand
    if data_dir.exists() and not data_dir.is_dir():
        raise DataError(f"data directory {data_dir} is a file, not a directory (set KGIR_DATA_DIR or the "
                        f"'data_dir' parameter to the folder holding <name>.json and <name>_corpus.json)")
    if not data_dir.is_dir():
        raise DataError(f"data directory {data_dir} does not exist (set KGIR_DATA_DIR or the 'data_dir' parameter "
                        f"to a folder holding the samples, or download them: python -m kgir_lib.data_sources fetch)")
    known = sorted({p.name.removesuffix("_corpus.json") for p in data_dir.rglob("*_corpus.json")})
    if name not in known:
        raise DataError(f"unknown dataset {name!r}: no {name}{suffix} under {data_dir} (datasets found: {known})")
    raise DataError(f"dataset {name!r}: missing file {name}{suffix} (looked for {candidates[0]} and {candidates[1]})")


def _load_json(path: Path) -> object:
    """A JSON data file; lone UTF-16 surrogates (``\\ud800`` escapes: they cannot be written as UTF-8 and
    crash scoring and saving later) become U+FFFD, counted in ``traces.REPLACED["data"]`` with a warning that
    names the file and the first record and field."""
    try:
        text = path.read_text(encoding="utf-8")
        value = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nested too deep
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc})") from exc
    if not _ESCAPED_SURROGATE.search(text):  # a lone surrogate can only arrive as a \u escape
        return value
    from .traces import REPLACED, scrub_located

    value, found = scrub_located(value)
    if found:
        REPLACED["data"] += len(found)
        first = (f"record {found[0][0]} field {'.'.join(map(str, found[0][1:]))!r}" if len(found[0]) > 1
                 else f"record {found[0][0]}" if found[0] else "the top level")
        warnings.warn(f"{path}: {len(found)} lone UTF-16 surrogate(s) replaced by U+FFFD (first in {first})",
                      stacklevel=3)
    return value


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _field(record: dict, key: str, path: Path, i: int, kind: type | tuple | None = None) -> Any:
    """``record[key]``; a DataError naming the file, record and field if it is missing or of the wrong type."""
    if not isinstance(record, dict):
        raise DataError(f"{path}: record {i} is not a JSON object")
    if key not in record:
        raise DataError(f"{path}: record {i} has no field {key!r}")
    value = record[key]
    if kind is not None and (not isinstance(value, kind) or isinstance(value, bool) and bool not in _kinds(kind)):
        want = " or ".join(_JSON_NAMES.get(k, k.__name__) for k in _kinds(kind))
        raise DataError(f"{path}: record {i} field {key!r} must be {want}, got {_json_name(value)}")
    return value


_JSON_NAMES = {str: "a string", int: "a whole number", float: "a number", list: "a list", dict: "an object"}
_kinds = lambda kind: kind if isinstance(kind, tuple) else (kind,)  # noqa: E731  (a type or a tuple of types)


def _json_name(value: object) -> str:
    return "null" if value is None else {bool: "true/false", dict: "an object", list: "a list",
                                         str: "a string"}.get(type(value), "a number")


def _text(record: dict, key: str, path: Path, i: int, allow_empty: bool = True) -> str:
    """A text field (a JSON string; ``null``, numbers, lists and objects are refused)."""
    value = _field(record, key, path, i, str)
    if not allow_empty and not value.strip():
        raise DataError(f"{path}: record {i} field {key!r} is empty")
    return value


def _ident(record: dict, key: str, path: Path, i: int) -> str:
    """A question id: a non-empty string or a whole number."""
    value = _field(record, key, path, i, (str, int))
    if isinstance(value, str) and not value.strip():
        raise DataError(f"{path}: record {i} field {key!r} is empty")
    return str(value)


def _answer(record: dict, key: str, path: Path, i: int, name: str, qid: str) -> str:
    """A gold answer: a string or a number (kept as its text). Refused, naming the dataset and the question,
    because nothing could score against it: a missing field, null, a list or an object, an empty text, and a
    NaN or infinite number (JSON's ``NaN`` token, which would otherwise become the answer "nan")."""
    where = f" (dataset {name!r}, question {qid!r}): a question without a gold answer cannot be scored"
    try:
        value = _field(record, key, path, i, (str, int, float))
    except DataError as exc:
        raise DataError(f"{exc}{where}") from None
    return _answer_text(value, f"{path}: record {i} field {key!r}", where)


def _answer_text(value: object, what: str, where: str) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(f"{what} is {value!r} (not a number){where}")
    text = str(value)
    if not text.strip():
        raise DataError(f"{what} is empty{where}")
    return text


def load_corpus(path: Path) -> Corpus:
    raw = _load_json(path)
    if not isinstance(raw, list):
        raise DataError(f"{path}: expected a list of {{title, text}} records")
    if not raw:
        raise DataError(f"{path}: the corpus is empty (no passage to retrieve)")
    passages, seen = [], set()
    for i, rec in enumerate(raw):
        title, text = _text(rec, "title", path, i), _text(rec, "text", path, i)
        pid = passage_id(title, text)
        if pid not in seen:
            seen.add(pid)
            passages.append(Passage(pid, title, text))
    return Corpus(passages)


def _musique_question(rec: dict, path: Path, i: int, corpus: Corpus, name: str) -> Question:
    """A MuSiQue record; gold passages are its paragraphs with ``is_supporting`` (paper §3.3.2-3.3.3)."""
    paragraphs = _field(rec, "paragraphs", path, i, list)
    gold = []
    for j, para in enumerate(paragraphs):
        if not isinstance(para, dict):
            raise DataError(f"{path}: record {i} paragraph {j} is not a JSON object")
        if para.get("is_supporting"):
            title = para.get("title")
            text = para.get("paragraph_text")
            if not isinstance(title, str) or not isinstance(text, str):
                raise DataError(f"{path}: record {i} paragraph {j}: 'title' and 'paragraph_text' must be strings")
            pid = passage_id(title, text)
            if pid not in corpus:
                raise DataError(f"{path}: record {i}: supporting paragraph {title!r} is not in the corpus")
            if pid not in gold:
                gold.append(pid)
    qid = _ident(rec, "id", path, i)
    aliases = rec.get("answer_aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, (str, int, float)) and not isinstance(a, bool)
                                                for a in aliases):
        raise DataError(f"{path}: record {i} field 'answer_aliases' must be a list of strings")
    where = f" (dataset {name!r}, question {qid!r}): an alias nothing could match"
    answers = [_answer(rec, "answer", path, i, name, qid)] + [
        _answer_text(a, f"{path}: record {i} field 'answer_aliases' entry {k}", where) for k, a in enumerate(aliases)]
    decomposition = rec.get("question_decomposition")
    chain = _chain(musique_gold, rec, passage_id, path, i)
    return Question(qid, _text(rec, "question", path, i, allow_empty=False),
                    tuple(dict.fromkeys(answers)), tuple(gold), name,
                    len(decomposition) if isinstance(decomposition, list) and decomposition else None, *chain)


def _chain(derive, rec: dict, arg, path: Path, i: int) -> tuple:
    """``(gold_hops, gold_bridges)`` of a record (:mod:`kgir_lib.gold`); a DataError names the file and record."""
    try:
        return derive(rec, arg)
    except GoldError as exc:
        raise DataError(f"{path}: record {i}: {exc}") from None


def _hotpot_question(rec: dict, path: Path, i: int, corpus: Corpus, name: str, by_title: dict) -> Question:
    """A HotpotQA record; gold passages are the paragraphs whose titles are in ``supporting_facts``."""
    facts = _field(rec, "supporting_facts", path, i, list)
    context_raw = _field(rec, "context", path, i, list)
    try:
        if not all(isinstance(x, (list, tuple)) for x in (*facts, *context_raw)):  # not a string, read by letter
            raise TypeError("an entry is not a list")
        titles = list(dict.fromkeys(str(f[0]) for f in facts))
        context = {str(c[0]): c[1] for c in context_raw}
    except (TypeError, IndexError, KeyError) as exc:
        raise DataError(f"{path}: record {i}: 'supporting_facts' and 'context' must be lists of "
                        f"[title, ...] pairs ({exc})") from None
    gold, by = [], {}
    for title in titles:
        # prefer the paragraph of this question's context (titles can repeat across the pool);
        # the corpus text is the context's sentences joined with "" (HippoRAG's convention)
        sentences = context.get(title)
        if isinstance(sentences, list) and not all(isinstance(x, str) for x in sentences):
            raise DataError(f"{path}: record {i}: 'context' paragraph {title!r} must be a list of sentence strings")
        text = "".join(sentences) if isinstance(sentences, list) else sentences
        pid = passage_id(title, text) if isinstance(text, str) else None
        if pid is None or pid not in corpus:
            candidates = by_title.get(title, [])
            if not candidates:
                raise DataError(f"{path}: record {i}: supporting title {title!r} is not in the corpus")
            pid = candidates[0]
        by[title] = pid
        if pid not in gold:
            gold.append(pid)
    qid = _ident(rec, "_id", path, i)
    return Question(qid, _text(rec, "question", path, i, allow_empty=False),
                    (_answer(rec, "answer", path, i, name, qid),), tuple(gold), name, 2,
                    *_chain(hotpot_gold, rec, by, path, i))


def declares_no_gold(data_dir: Path, name: str) -> bool:
    """Whether dataset ``name`` declares that its questions have no gold passages: a file
    ``<name>_meta.json`` beside its questions holding ``{"gold_passages": false}``."""
    for cand in (data_dir / name / f"{name}_meta.json", data_dir / f"{name}_meta.json"):
        if cand.is_file():
            meta = _load_json(cand)
            if not isinstance(meta, dict) or not isinstance(meta.get("gold_passages", True), bool):
                raise DataError(f"{cand}: expected an object such as {{\"gold_passages\": false}}")
            return meta.get("gold_passages", True) is False
    return False


def load_dataset(name: str, data_dir: Optional[Path] = None) -> Dataset:
    """Load ``<name>.json`` + ``<name>_corpus.json``; the schema (MuSiQue or HotpotQA) is detected per record.

    ``data_dir`` defaults to :func:`kgir_lib.config.default_data_dir` (``$KGIR_DATA_DIR``, else ``../shared/data``
    beside the project, else the downloaded samples in ``data/samples/``).
    Every field's type is checked (question, passage text and answer are strings, ids strings or whole numbers); an
    empty question set or corpus is refused, and so is a question without a supporting passage unless the dataset
    declares it has none (:func:`declares_no_gold`). Raises :class:`DataError` naming the dataset, file, record or
    field that is wrong. Read once a process while its files are unchanged (:mod:`kgir_lib.filecache`), copied out.
    """
    from .config import default_data_dir
    from .traces import REPLACED

    if not isinstance(name, str) or not name or "/" in name or "\\" in name:
        raise DataError(f"unknown dataset {name!r}: a dataset is named by a plain file stem such as 'musique'")
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    corpus_path = _find(data_dir, name, "_corpus.json")
    key = _LOADED.key(name, corpus_path, *(d / f"{name}{s}" for s in (".json", "_meta.json")
                                           for d in (data_dir / name, data_dir)))
    if (held := _LOADED.get(key)) is not None:  # a fresh copy: a caller may change its lists
        return Dataset(name, list(held.questions), Corpus(list(held.corpus.passages)))
    replaced = REPLACED["data"]
    corpus = load_corpus(corpus_path)
    qpath = _find(data_dir, name, ".json")
    raw = _load_json(qpath)
    if not isinstance(raw, list):
        raise DataError(f"{qpath}: expected a list of questions")
    if not raw:
        raise DataError(f"{qpath}: the question set is empty")
    no_gold = declares_no_gold(data_dir, name)
    by_title: dict = {}
    for p in corpus.passages:
        by_title.setdefault(p.title, []).append(p.pid)
    questions: list = []
    seen: dict = {}  # question id -> its record
    for i, rec in enumerate(raw):
        if isinstance(rec, dict) and "paragraphs" in rec:
            q = _musique_question(rec, qpath, i, corpus, name)
        elif isinstance(rec, dict) and "supporting_facts" in rec:
            q = _hotpot_question(rec, qpath, i, corpus, name, by_title)
        else:
            raise DataError(f"{qpath}: record {i} has neither 'paragraphs' (MuSiQue) nor 'supporting_facts' (HotpotQA)")
        if q.qid in seen:
            raise DataError(f"{qpath}: record {i} repeats question id {q.qid!r} of record {seen[q.qid]}")
        if not q.gold_pids and not no_gold:
            raise DataError(f"{qpath}: record {i} (question {q.qid!r}) has no supporting passage (gold), so "
                            f"Recall@k cannot be scored; fix the record, or declare a dataset without gold "
                            f"passages in {name}_meta.json: {{\"gold_passages\": false}}")
        seen[q.qid] = i
        questions.append(q)
    if REPLACED["data"] == replaced:  # a file whose text was repaired is read (and warned about) at every load
        _LOADED.put(key, Dataset(name, list(questions), Corpus(list(corpus.passages))))
    return Dataset(name, questions, corpus)


_LOADED = FileMemo()  # load_dataset's datasets, while the files they were read from are unchanged


def sample_questions(questions: Sequence[Question], n: Optional[int], seed: int = 0) -> list:
    """The first ``n`` questions of a seeded shuffle (``random.Random(seed)``), kept in file order.

    ``n=None`` or ``n >= len`` keeps every question. The same ``seed`` and ``n`` always
    give the same questions, and a larger ``n`` extends a smaller one's sample (nested).
    The corpus is not sampled: retrieval always searches the whole pool.
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        raise DataError(f"parameter 'n_questions': expected a whole number or None, got {n!r}")
    if n is not None and n < 0:
        raise DataError(f"parameter 'n_questions': must be >= 0, got {n}")
    if n is None or n >= len(questions):
        return list(questions)
    order = list(range(len(questions)))
    random.Random(seed).shuffle(order)
    keep = sorted(order[:n])
    return [questions[i] for i in keep]


# Prompt tuning (benchmarks/bench_usable.py) uses musique_train questions after the first 30 of the seeded
# shuffle: the sample profile never evaluates them; the local profile (all 100) does, so its reading reports
# musique_train with and without them.
SAMPLE_RESERVED = 30
TUNED_ON = 30  # how many tuning questions the committed prompts were tuned on (results/benchmarks/usable.md)


def tuning_questions(questions: Sequence[Question], n: int = TUNED_ON, seed: int = 0) -> list:
    """The ``n`` questions after the first ``SAMPLE_RESERVED`` of :func:`sample_questions`' shuffle (same RNG),
    in shuffle order: questions to tune prompts on that a sample of at most 30 never evaluates."""
    order = list(range(len(questions)))
    random.Random(seed).shuffle(order)
    return [questions[i] for i in order[SAMPLE_RESERVED:SAMPLE_RESERVED + n]]


def load_example(name: str = "figure6") -> dict:
    """A free-question example shipped as ``kgir_lib/examples/<name>.json``: question, answers, passages, and,
    where the example knows them, its gold ``bridge`` entity, the ``next_hop`` passage titles and the gold
    ``decomposition`` (hops ``{question, answer, support}``, ``support`` a passage title) (else None, [], [])."""
    data = json.loads(resources.files("kgir_lib").joinpath("examples", f"{name}.json").read_text(encoding="utf-8"))
    return {"question": data["question"], "answers": list(data["answers"]),
            "passages": [tuple(p) for p in data["passages"]], "bridge": data.get("bridge"),
            "next_hop": list(data.get("next_hop", [])), "decomposition": list(data.get("decomposition", []))}
