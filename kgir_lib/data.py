"""Loaders for multi-hop QA sets in HippoRAG's release layout (METHOD.md §5).

A dataset ``<name>`` is two files in the data directory, either flat or in a
sub-folder ``<name>/``: ``<name>.json`` (questions in the dataset's raw schema)
and ``<name>_corpus.json`` (every passage, ``{title, text}``). The retrieval pool
is the whole corpus, never the question's own paragraphs.

Gold passages (for Recall@k, METHOD.md §6): MuSiQue, the paragraphs marked
``is_supporting``; HotpotQA, the corpus passages whose titles appear in
``supporting_facts``. Passage identity is title + text.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

HF_REPO = "osunlp/HippoRAG_2"


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
    for cand in (data_dir / name / f"{name}{suffix}", data_dir / f"{name}{suffix}"):
        if cand.exists():
            return cand
    if not data_dir.exists():
        raise DataError(f"data directory {data_dir} does not exist (set KGIR_DATA_DIR or the 'data_dir' parameter)")
    known = sorted({p.name.removesuffix("_corpus.json") for p in data_dir.rglob("*_corpus.json")})
    raise DataError(f"unknown dataset {name!r}: no {name}{suffix} under {data_dir} (datasets found: {known})")


def _load_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from exc


def _field(record: dict, key: str, path: Path, i: int) -> object:
    if not isinstance(record, dict) or key not in record:
        raise DataError(f"{path}: record {i} has no field {key!r}")
    return record[key]


def load_corpus(path: Path) -> Corpus:
    raw = _load_json(path)
    if not isinstance(raw, list):
        raise DataError(f"{path}: expected a list of {{title, text}} records")
    passages, seen = [], set()
    for i, rec in enumerate(raw):
        title, text = str(_field(rec, "title", path, i)), str(_field(rec, "text", path, i))
        pid = passage_id(title, text)
        if pid not in seen:
            seen.add(pid)
            passages.append(Passage(pid, title, text))
    return Corpus(passages)


def _musique_question(rec: dict, path: Path, i: int, corpus: Corpus, name: str) -> Question:
    paragraphs = _field(rec, "paragraphs", path, i)
    gold = []
    for j, para in enumerate(paragraphs):
        if para.get("is_supporting"):
            title = para.get("title")
            text = para.get("paragraph_text")
            if title is None or text is None:
                raise DataError(f"{path}: record {i} paragraph {j} lacks 'title' or 'paragraph_text'")
            pid = passage_id(title, text)
            if pid not in corpus:
                raise DataError(f"{path}: record {i}: supporting paragraph {title!r} is not in the corpus")
            gold.append(pid)
    answers = [str(_field(rec, "answer", path, i))] + [str(a) for a in rec.get("answer_aliases", [])]
    decomposition = rec.get("question_decomposition")
    return Question(
        qid=str(_field(rec, "id", path, i)),
        question=str(_field(rec, "question", path, i)),
        answers=tuple(answers),
        gold_pids=tuple(gold),
        dataset=name,
        hops=len(decomposition) if decomposition else None,
    )


def _hotpot_question(rec: dict, path: Path, i: int, corpus: Corpus, name: str, by_title: dict) -> Question:
    facts = _field(rec, "supporting_facts", path, i)
    titles = list(dict.fromkeys(f[0] for f in facts))
    context = {c[0]: c[1] for c in _field(rec, "context", path, i)}
    gold = []
    for title in titles:
        # prefer the paragraph of this question's context (titles can repeat across the pool)
        text = "".join(context[title]) if title in context else None
        pid = passage_id(title, text) if text is not None else None
        if pid is None or pid not in corpus:
            candidates = by_title.get(title, [])
            if not candidates:
                raise DataError(f"{path}: record {i}: supporting title {title!r} is not in the corpus")
            pid = candidates[0]
        gold.append(pid)
    return Question(
        qid=str(_field(rec, "_id", path, i)),
        question=str(_field(rec, "question", path, i)),
        answers=(str(_field(rec, "answer", path, i)),),
        gold_pids=tuple(gold),
        dataset=name,
        hops=2,
    )


def load_dataset(name: str, data_dir: Optional[Path] = None) -> Dataset:
    """Load ``<name>.json`` + ``<name>_corpus.json``; the schema (MuSiQue or HotpotQA) is detected per record."""
    from .config import default_data_dir

    data_dir = Path(data_dir) if data_dir else default_data_dir()
    corpus = load_corpus(_find(data_dir, name, "_corpus.json"))
    qpath = _find(data_dir, name, ".json")
    raw = _load_json(qpath)
    if not isinstance(raw, list):
        raise DataError(f"{qpath}: expected a list of questions")
    by_title: dict = {}
    for p in corpus.passages:
        by_title.setdefault(p.title, []).append(p.pid)
    questions = []
    for i, rec in enumerate(raw):
        if isinstance(rec, dict) and "paragraphs" in rec:
            questions.append(_musique_question(rec, qpath, i, corpus, name))
        elif isinstance(rec, dict) and "supporting_facts" in rec:
            questions.append(_hotpot_question(rec, qpath, i, corpus, name, by_title))
        else:
            raise DataError(f"{qpath}: record {i} has neither 'paragraphs' (MuSiQue) nor 'supporting_facts' (HotpotQA)")
    return Dataset(name, questions, corpus)


def sample_questions(questions: Sequence[Question], n: Optional[int], seed: int = 0) -> list:
    """The first ``n`` questions of a seeded shuffle (``random.Random(seed)``), kept in file order.

    ``n=None`` or ``n >= len`` keeps every question. The same ``seed`` and ``n`` always
    give the same questions, and a larger ``n`` extends a smaller one's sample.
    """
    if n is None or n >= len(questions):
        return list(questions)
    if n < 0:
        raise DataError(f"parameter 'n_questions': must be >= 0, got {n}")
    order = list(range(len(questions)))
    random.Random(seed).shuffle(order)
    keep = sorted(order[:n])
    return [questions[i] for i in keep]


def download_hipporag2(names: Iterable[str], target: Path) -> list:
    """Fetch HippoRAG 2's full 1000-question release from the Hugging Face hub into ``target``.

    Needs internet; where the hub cannot be reached this raises :class:`DataError`
    with a plain message instead of a network traceback.
    """
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:  # pragma: no cover - huggingface_hub ships with datasets
        raise DataError("download_hipporag2 needs the huggingface_hub package") from exc
    got = []
    for name in names:
        for fname in (f"{name}.json", f"{name}_corpus.json"):
            try:
                got.append(Path(hf_hub_download(HF_REPO, fname, repo_type="dataset", local_dir=str(target / name))))
            except Exception as exc:  # network errors come in many classes
                raise DataError(
                    f"could not download {fname} from the Hugging Face hub ({HF_REPO}): "
                    f"{type(exc).__name__}. This machine may have no internet; use the samples in "
                    f"the data directory instead."
                ) from None
    return got
