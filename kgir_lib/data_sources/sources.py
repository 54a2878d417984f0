"""Where the samples come from: the two upstream releases, their URLs, the committed manifest, the local folders.

- **GitHub** (``OSU-NLP-Group/HippoRAG``, pinned to one commit, also on its ``legacy`` branch): files fetched
  verbatim, each checked by its SHA-256: ``musique_train`` (questions, corpus, the published gpt-3.5-turbo
  OpenIE) and HotpotQA's published query NER (``hotpotqa_queries.named_entity_output.tsv``).
- **Hugging Face** (dataset ``osunlp/HippoRAG_2``, revision ``main``): HippoRAG 2's 1000-question ``musique`` and
  ``hotpotqa`` sets, downloaded through ``huggingface_hub`` into the Hugging Face cache
  (:mod:`kgir_lib.data_sources.hub`); the samples are derived from them (:mod:`kgir_lib.data_sources.derive`).
  The revision is a branch, not a commit: the commit could not be looked up where the manifest was made (no
  internet), so the checksums of every field the suite reads are the guard against a changed upstream.

Base URLs come from the environment, so a test (or a mirror) can stand in for either host:
``KGIR_HF_ENDPOINT`` (else ``HF_ENDPOINT``, else https://huggingface.co) and ``KGIR_GITHUB_RAW_URL`` (else
https://raw.githubusercontent.com).
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from ..config.fields import PROJECT_ROOT

MANIFEST = Path(__file__).resolve().parent / "manifest.json"
SAMPLE_SETS = ("musique", "hotpotqa", "musique_train")
FETCH_COMMAND = "python -m kgir_lib.data_sources fetch"
HF_ENV, GITHUB_ENV = "KGIR_HF_ENDPOINT", "KGIR_GITHUB_RAW_URL"
HF_DEFAULT, GITHUB_DEFAULT = "https://huggingface.co", "https://raw.githubusercontent.com"
STAMP = ".sample.json"  # written into a set's folder last, by fetch, once every check has passed

# The upstream releases and, per set, where each file comes from. ``build_manifest`` adds the ids and checksums
# (python -m kgir_lib.data_sources manifest DIR); fetch and verify read the committed manifest only.
UPSTREAMS = {
    "github": {"repo": "OSU-NLP-Group/HippoRAG", "commit": "3d95d255a8db0c1699b853cfb4fbe5056708162d",
               "note": "the repository's initial commit; the same files are at the head of its legacy branch"},
    "hf": {"repo": "osunlp/HippoRAG_2", "revision": "main",
           "note": "a branch, not a commit: its commit could not be looked up where this manifest was made "
                   "(no internet), so the checksums of every field the suite reads are the guard"},
}
_HF, _GH = "hf", "github"
LAYOUT = {
    "musique": {
        "schema": "musique",
        "derived_from": {"questions": {"source": _HF, "path": "musique.json"},
                         "corpus": {"source": _HF, "path": "musique_corpus.json"}},
        "files": {"musique.json": {"role": "questions", "derived": True},
                  "musique_corpus.json": {"role": "corpus", "derived": True}}},
    "hotpotqa": {
        "schema": "hotpotqa",
        "derived_from": {"questions": {"source": _HF, "path": "hotpotqa.json"},
                         "corpus": {"source": _HF, "path": "hotpotqa_corpus.json"}},
        "files": {"hotpotqa.json": {"role": "questions", "derived": True},
                  "hotpotqa_corpus.json": {"role": "corpus", "derived": True},
                  "hotpotqa_queries.named_entity_output.tsv": {
                      "source": _GH, "path": "output/hotpotqa_queries.named_entity_output.tsv"}}},
    "musique_train": {
        "schema": "musique",
        "files": {"musique_train.json": {"role": "questions", "source": _GH, "path": "data/musique_train.json"},
                  "musique_train_corpus.json": {"role": "corpus", "source": _GH,
                                                "path": "data/musique_train_corpus.json"},
                  "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json": {
                      "source": _GH, "path": "output/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"}}},
}


def hf_endpoint() -> str:
    """``$KGIR_HF_ENDPOINT``, else ``$HF_ENDPOINT`` (the hub client's own variable), else the public hub."""
    return (os.environ.get(HF_ENV) or os.environ.get("HF_ENDPOINT") or HF_DEFAULT).rstrip("/")


def github_raw() -> str:
    """``$KGIR_GITHUB_RAW_URL``, else raw.githubusercontent.com."""
    return (os.environ.get(GITHUB_ENV) or GITHUB_DEFAULT).rstrip("/")


def hf_url(repo: str, revision: str, filename: str) -> str:
    """A file of a Hugging Face dataset repository at ``revision``."""
    return f"{hf_endpoint()}/datasets/{repo}/resolve/{revision}/{filename}"


def github_url(repo: str, commit: str, path: str) -> str:
    """A file of a GitHub repository at ``commit``, from the raw-content host."""
    return f"{github_raw()}/{repo}/{commit}/{path}"


def upstream_dir() -> Path:
    """``data/upstream/`` in the project (git-ignored): the GitHub files as downloaded, so a rerun of fetch does
    not download them again (the Hugging Face files are kept in the Hugging Face cache)."""
    return PROJECT_ROOT / "data" / "upstream"


@lru_cache(maxsize=None)
def _manifest_at(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def manifest(path: Path | None = None) -> dict:
    """The committed manifest (``kgir_lib/data_sources/manifest.json``): per set, its upstream files, ordered
    question ids and the checksums of every field the suite reads. Ids and checksums only, no dataset text."""
    return _manifest_at(str(path or MANIFEST))


def set_digest(entry: dict) -> str:
    """A set's manifest entry as one SHA-256: the stamp of a fetched folder, so a changed manifest refetches."""
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode("utf-8")).hexdigest()


def upstream_of(spec: dict, upstreams: dict) -> tuple:
    """``(url, cache path relative to the upstream folder)`` of one upstream file of the manifest (the path of a
    Hugging Face file is not used: those live in the Hugging Face cache)."""
    up = upstreams[spec["source"]]
    if spec["source"] == "github":
        return (github_url(up["repo"], up["commit"], spec["path"]),
                Path("github", *up["repo"].split("/"), up["commit"], *spec["path"].split("/")))
    return (hf_url(up["repo"], up["revision"], spec["path"]),
            Path("hf", *up["repo"].split("/"), up["revision"], spec["path"]))
