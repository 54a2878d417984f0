"""The data arrives by itself, verified: fetched from stand-ins for the two upstream hosts (tests/data_server.py),
derived, checked against the committed manifest; no internet is used.

The stand-in release is built from the shared samples: their questions among distractors, shuffled, HotpotQA's
paragraph-level records re-split into sentences; the derivation must give back files byte-identical to the
samples the committed results were computed from."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SHARED_DATA
from data_server import closed_port, gh_path, hf_path, sentence_level, serve, upstream_tree
from kgir_lib.data import DataError
from kgir_lib.data_sources import (FETCH_COMMAND, SAMPLE_SETS, check_set, download_hipporag2, ensure_samples,
                                   fetch_samples, is_complete, manifest, verify_dir)
from kgir_lib.data_sources.__main__ import build_manifest, main as cli
from kgir_lib.data_sources.derive import paragraph_level
from kgir_lib.data_sources.hub import cache_dir as hub_cache_dir
from kgir_lib.data_sources import fetch as fetch_module

REPO = Path(__file__).resolve().parents[1]
needs_samples = pytest.mark.skipif(not (SHARED_DATA / "musique").is_dir(),
                                   reason=f"no samples at {SHARED_DATA} (python -m kgir_lib.data_sources fetch)")
pytestmark = needs_samples
SAMPLE_FILES = sorted(str(p.relative_to(SHARED_DATA)) for name in SAMPLE_SETS if (SHARED_DATA / name).is_dir()
                      for p in (SHARED_DATA / name).iterdir() if not p.name.startswith("."))


@pytest.fixture(scope="module")
def tree() -> dict:
    return upstream_tree(SHARED_DATA)


def use(server, monkeypatch) -> None:
    """Point this process's downloads at ``server``: its base URLs, and the Hugging Face client at the server's
    own cache and online (read when asked, not when the Hub's client was imported: ``hub.cache_dir``)."""
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HF_HUB_CACHE", str(server.hf_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")


@pytest.fixture
def upstream(tree, monkeypatch):
    """The stand-in hosts, with the suite's base URLs pointed at them."""
    with serve(tree) as server:
        use(server, monkeypatch)
        yield server


def _offline(monkeypatch, hf_cache: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("KGIR_HF_ENDPOINT", url)
    monkeypatch.setenv("KGIR_GITHUB_RAW_URL", url)
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")


def _hub_files(server) -> list:
    """The files of the server's Hugging Face cache: snapshot entries and blobs, partial ones included (not its
    refs, locks and tag, which hold no data)."""
    return sorted(str(p.relative_to(server.hf_cache)) for p in server.hf_cache.rglob("*")
                  if (p.is_file() or p.is_symlink()) and {"snapshots", "blobs"} & set(p.parts))


def _copy_samples(dest: Path) -> Path:
    for name in SAMPLE_SETS:
        shutil.copytree(SHARED_DATA / name, dest / name, ignore=shutil.ignore_patterns(".*"))
    return dest


# ------------------------------------------------------------------ the manifest
def test_the_committed_manifest_is_the_samples_own():
    """Recomputed from the samples, the manifest is the committed one (ids, checksums, paragraph-level ids)."""
    assert build_manifest(SHARED_DATA) == manifest()


def test_the_manifest_holds_no_dataset_text():
    text = (REPO / "kgir_lib" / "data_sources" / "manifest.json").read_text()
    for name in ("musique", "hotpotqa", "musique_train"):
        records = json.loads((SHARED_DATA / name / f"{name}.json").read_text())
        assert not [r["question"] for r in records if r["question"] in text]
        assert not [r["answer"] for r in records if len(r["answer"]) > 12 and f'"{r["answer"]}"' in text]
    entry = manifest()["sets"]["hotpotqa"]
    assert len(entry["ids"]) == 84 and len(entry["paragraph_level"]) == 60
    assert manifest()["upstreams"]["github"]["commit"] == "3d95d255a8db0c1699b853cfb4fbe5056708162d"


def test_the_samples_verify(capsys):
    assert cli(["verify", str(SHARED_DATA)]) == 0
    out = capsys.readouterr().out
    assert out.count("checksums match; every file byte-identical") == 3, out


# ------------------------------------------------------------------ fetch, derive, verify
def test_fetch_gives_the_samples_byte_for_byte_and_a_rerun_downloads_nothing(tmp_path, upstream, monkeypatch):
    target, cache = tmp_path / "samples", tmp_path / "upstream"
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")  # KGIR_HF_ENDPOINT comes first
    lines = fetch_samples(target=target, cache=cache)
    assert sorted(set(upstream.requests)) == sorted(upstream.tree) and len(upstream.requests) == 8
    for rel in SAMPLE_FILES:
        assert (target / rel).read_bytes() == (SHARED_DATA / rel).read_bytes(), rel
    assert all(is_complete(target, n) for n in SAMPLE_SETS)
    assert not (target / ".partial").exists() and not list(tmp_path.rglob("*.part"))
    assert any("all of them in" in line for line in lines)
    assert len(verify_dir(target)) == 3
    # the Hugging Face files went into the Hugging Face cache, in its own layout; the GitHub ones into ours
    assert not (cache / "hf").exists() and len([f for f in _hub_files(upstream) if "/snapshots/" in f]) == 4
    fetch_samples(["musique", "hotpotqa"], target=tmp_path / "again", cache=cache)  # both caches hold them
    assert len(upstream.requests) == 8


def test_the_paragraph_level_records_are_reduced_to_the_samples_form():
    sample = json.loads((SHARED_DATA / "hotpotqa" / "hotpotqa.json").read_text())
    reduced = [r for r in sample if r["type"] == ""]
    assert len(reduced) == 60
    split = [sentence_level(r) for r in reduced]
    assert sum(len(s) > 1 for r in split for _, s in r["context"]) > 100  # the stand-in really splits them
    assert [paragraph_level(r) for r in split] == reduced
    kept = [r for r in sample if r["type"]][0]
    assert paragraph_level(kept) != kept  # the reduction changes a sentence-level record: only marked ones get it


def test_without_the_paragraph_level_marks_the_type_and_gold_order_checks_fail(tmp_path, upstream, monkeypatch):
    man = json.loads(json.dumps(manifest()))
    man["sets"]["hotpotqa"]["paragraph_level"] = []
    monkeypatch.setattr(fetch_module, "manifest", lambda: man)
    with pytest.raises(DataError) as exc:
        fetch_samples(["hotpotqa"], target=tmp_path / "s", cache=tmp_path / "u")
    msg = str(exc.value)
    assert "hotpotqa: field 'type' differs in 60 of 84" in msg and "field 'gold_titles' differs in 60 of 84" in msg
    assert "(record 1 of hotpotqa.json)" in msg  # the derived file, not the staging folder that is gone
    assert not (tmp_path / "s" / "hotpotqa").exists()


def test_a_changed_answer_upstream_is_refused_and_healed_by_the_next_fetch_from_a_good_host(tmp_path, tree,
                                                                                             monkeypatch):
    """The refused release files leave the Hugging Face cache at once; the stand-in keeps its commit, so a copy
    left there would be handed back by the Hub's client on every later fetch."""
    records = json.loads(tree[hf_path("musique.json")])
    qid = manifest()["sets"]["musique"]["ids"][5]
    next(r for r in records if r["id"] == qid)["answer"] = "something else"
    hub = tmp_path / "hf"
    with serve({**tree, hf_path("musique.json"): json.dumps(records).encode()}, hf_cache=hub) as server:
        use(server, monkeypatch)
        with pytest.raises(DataError, match=rf"musique: field 'answers' differs in 1 of 84, first at question "
                                            rf"'{qid}'") as exc:
            fetch_samples(["musique"], target=tmp_path / "s", cache=tmp_path / "u")
        assert "removed from their cache" in str(exc.value) and _hub_files(server) == []
    assert not (tmp_path / "s").exists() and not (tmp_path / "u").exists()  # no folder left behind
    with serve(tree, hf_cache=hub) as server:  # the same commit, the good file
        use(server, monkeypatch)
        fetch_samples(["musique"], target=tmp_path / "s", cache=tmp_path / "u")
        assert hf_path("musique.json") in server.requests
    assert (tmp_path / "s" / "musique" / "musique.json").read_bytes() == (SHARED_DATA / "musique" /
                                                                         "musique.json").read_bytes()


def test_a_question_missing_upstream_is_named(tmp_path, tree, monkeypatch):
    records = json.loads(tree[hf_path("hotpotqa.json")])
    qid = manifest()["sets"]["hotpotqa"]["ids"][0]
    records = [r for r in records if r["_id"] != qid]
    with serve({**tree, hf_path("hotpotqa.json"): json.dumps(records).encode()}) as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        with pytest.raises(DataError, match=rf"hotpotqa: 1 of the 84 sample questions are not in .*'{qid}'"):
            fetch_samples(["hotpotqa"], target=tmp_path / "s", cache=tmp_path / "u")


def test_the_hub_cache_is_the_one_the_environment_names_when_asked(tmp_path, tree, monkeypatch):
    """A user's own Hugging Face cache that already holds the good file (the client's default, fixed when it was
    imported) does not answer for the cache a later HF_HUB_CACHE names: the changed upstream file is read and
    refused."""
    from huggingface_hub import constants

    users = tmp_path / "users-hf-cache"
    with serve(tree, hf_cache=users) as server:
        use(server, monkeypatch)
        fetch_samples(["hotpotqa"], target=tmp_path / "good", cache=tmp_path / "u0")
    assert any(users.rglob("hotpotqa.json"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(users))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as when imported after the encoder switched it on
    records = json.loads(tree[hf_path("hotpotqa.json")])
    qid = manifest()["sets"]["hotpotqa"]["ids"][0]
    changed = json.dumps([r for r in records if r["_id"] != qid]).encode()
    with serve({**tree, hf_path("hotpotqa.json"): changed}) as server:
        use(server, monkeypatch)
        assert hub_cache_dir() == str(server.hf_cache)
        with pytest.raises(DataError, match=rf"hotpotqa: 1 of the 84 sample questions are not in .*'{qid}'"):
            fetch_samples(["hotpotqa"], target=tmp_path / "s", cache=tmp_path / "u")


def test_a_changed_verbatim_file_is_refused_not_cached_and_a_good_host_then_serves_it(tmp_path, tree, monkeypatch):
    path = gh_path("output/hotpotqa_queries.named_entity_output.tsv")
    with serve({**tree, path: tree[path].replace(b"Ed Wood", b"Ed Woods", 1)}) as server:
        use(server, monkeypatch)
        with pytest.raises(DataError, match="hotpotqa_queries.named_entity_output.tsv: SHA-256 .* is not the pinned"):
            fetch_samples(["hotpotqa"], target=tmp_path / "s", cache=tmp_path / "u")
    assert not (tmp_path / "u").exists() and not (tmp_path / "s").exists()  # no file, no empty folder
    cached = tmp_path / "u" / "github" / Path(path.removeprefix("/gh/"))
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"an older, damaged copy")  # in the cache by other means: checked again, not trusted
    with serve(tree) as server:
        use(server, monkeypatch)
        fetch_samples(["hotpotqa"], target=tmp_path / "s", cache=tmp_path / "u")
    assert cached.read_bytes() == tree[path] and is_complete(tmp_path / "s", "hotpotqa")


# ------------------------------------------------------------------ verify: a changed field is named
@pytest.mark.parametrize("name, change, needle", [
    ("musique", lambda rs: rs[7].update(answer="x"), "musique: field 'answers' differs in 1 of 84, first at question"),
    ("musique", lambda rs: rs[3]["question_decomposition"][0].update(paragraph_support_idx=19),
     "musique: field 'decomposition' differs in 1 of 84"),
    ("hotpotqa", lambda rs: rs[2].update(type="comparison"), "hotpotqa: field 'type' differs in 1 of 84"),
    ("musique_train", lambda rs: rs[0]["paragraphs"][0].update(is_supporting=True),
     "musique_train: field 'gold_titles' differs in 1 of 100"),
    ("hotpotqa", lambda rs: rs.reverse(), "hotpotqa: field 'ids'"),
])
def test_verify_names_the_set_the_field_and_the_first_question(tmp_path, name, change, needle):
    data = _copy_samples(tmp_path / "data")
    path = data / name / f"{name}.json"
    records = json.loads(path.read_text())
    change(records)
    path.write_text(json.dumps(records))
    with pytest.raises(DataError, match=needle) as exc:
        verify_dir(data)
    assert "kgir_lib/data_sources/manifest.json" in str(exc.value)
    assert cli(["verify", str(data)]) == 1


def test_verify_names_a_changed_passage_and_a_changed_verbatim_file(tmp_path):
    data = _copy_samples(tmp_path / "data")
    corpus = json.loads((data / "hotpotqa" / "hotpotqa_corpus.json").read_text())
    corpus[11]["text"] += " "
    (data / "hotpotqa" / "hotpotqa_corpus.json").write_text(json.dumps(corpus))
    (data / "musique_train" / "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json").write_bytes(b"{}")
    with pytest.raises(DataError) as exc:
        verify_dir(data)
    msg = str(exc.value)
    assert "hotpotqa: field 'corpus texts' differs in 1 of 840, first at passage 11" in msg
    assert "musique_train: file" in msg and "differs from the upstream file" in msg


def test_a_reformatted_copy_verifies_and_says_so(tmp_path):
    data = _copy_samples(tmp_path / "data")
    path = data / "musique" / "musique.json"
    path.write_text(json.dumps(json.loads(path.read_text())))  # same content, other formatting
    lines = verify_dir(data)
    assert "not byte-identical (formatting only" in lines[0]


# ------------------------------------------------------------------ cut off, killed, offline
def test_a_download_cut_off_midway_leaves_nothing_then_a_rerun_completes(tmp_path, tree, monkeypatch):
    path = gh_path("data/musique_train.json")
    with serve(tree, truncate={path: 100_000}) as server:
        use(server, monkeypatch)
        with pytest.raises(DataError, match="broke off"):
            fetch_samples(["musique_train"], target=tmp_path / "s", cache=tmp_path / "u")
    assert not list(tmp_path.rglob("*"))  # no file and no folder
    with serve(tree) as server:
        use(server, monkeypatch)
        fetch_samples(["musique_train"], target=tmp_path / "s", cache=tmp_path / "u")
    assert is_complete(tmp_path / "s", "musique_train")


def test_a_hugging_face_download_cut_off_once_is_resumed_by_the_hub_client(tmp_path, tree, monkeypatch):
    """The Hub's client asks again for a file whose body broke off (from where it stopped, with ``Range``, when it
    holds part of it) and keeps it only whole."""
    path = hf_path("musique_corpus.json")
    with serve(tree, flaky={path: 300_000}) as server:
        use(server, monkeypatch)
        fetch_samples(["musique"], target=tmp_path / "s", cache=tmp_path / "u")
        assert server.requests.count(path) == 2 and not [f for f in _hub_files(server) if "incomplete" in f]
    assert is_complete(tmp_path / "s", "musique")


def test_a_fetch_killed_mid_download_leaves_no_file_a_rerun_takes_as_complete(tmp_path, tree, monkeypatch):
    """SIGKILL while a file arrives: only ``<file>.part`` is on disk; the next fetch downloads the file again."""
    path = gh_path("data/musique_train_corpus.json")
    cached = tmp_path / "u" / "github" / Path(path.removeprefix("/gh/"))
    code = (f"from pathlib import Path; from kgir_lib.data_sources import fetch_samples; "
            f"fetch_samples(['musique_train'], Path({str(tmp_path / 's')!r}), Path({str(tmp_path / 'u')!r}))")
    with serve(tree, stall={path: 200_000}) as server:
        env = {**os.environ, **server.env(), "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-c", code], env=env)
        part = cached.with_name(cached.name + ".part")
        deadline = time.monotonic() + 20
        while not (part.is_file() and part.stat().st_size > 0) and time.monotonic() < deadline:  # bytes on disk
            time.sleep(0.05)
        proc.kill()
        proc.wait(timeout=10)
    assert part.is_file() and not cached.exists() and not (tmp_path / "s" / "musique_train").exists()
    with serve(tree) as server:
        use(server, monkeypatch)
        fetch_samples(["musique_train"], target=tmp_path / "s", cache=tmp_path / "u")
        assert path in server.requests  # downloaded again, the partial file not taken for it
    assert cached.read_bytes() == tree[path] and is_complete(tmp_path / "s", "musique_train")


def test_a_cut_off_body_without_a_length_is_refused_and_never_cached(tmp_path, tree, monkeypatch):
    """The Hub's client knows the size from its HEAD request, so a body that ends early is refused whatever its
    framing; nothing of it enters the Hugging Face cache."""
    path = hf_path("hotpotqa.json")
    with serve(tree, unframed={path: 50_000}) as server:
        use(server, monkeypatch)
        with pytest.raises(DataError, match=r"download of .*/hotpotqa\.json broke off .*Consistency check failed"):
            fetch_samples(["hotpotqa"], target=tmp_path / "s", cache=tmp_path / "u")
        assert not [f for f in _hub_files(server) if "hotpotqa.json" in f or "incomplete" in f]
    assert not (tmp_path / "s").exists()


def test_a_cut_off_json_in_the_hub_cache_is_refused_and_removed(tmp_path, tree, monkeypatch):
    """A release file that is not valid JSON (a copy cut off by other means) is refused and removed at once."""
    hub = tmp_path / "hf"
    path = hf_path("hotpotqa_corpus.json")
    with serve({**tree, path: tree[path][:40_000]}, hf_cache=hub) as server:  # cut, yet served whole
        use(server, monkeypatch)
        with pytest.raises(DataError, match=r"hotpotqa_corpus\.json is not valid JSON.*removed from their cache"):
            fetch_samples(["hotpotqa"], target=tmp_path / "s", cache=tmp_path / "u")
        assert not [f for f in _hub_files(server) if "/snapshots/" in f]
    with serve(tree, hf_cache=hub) as server:
        use(server, monkeypatch)
        fetch_samples(["hotpotqa"], target=tmp_path / "s", cache=tmp_path / "u")
    assert is_complete(tmp_path / "s", "hotpotqa")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project root without ../shared: the default data folder is its data/samples/."""
    from kgir_lib.config import fields

    monkeypatch.delenv("KGIR_DATA_DIR", raising=False)
    monkeypatch.setattr(fields, "PROJECT_ROOT", tmp_path / "project")
    monkeypatch.setattr(fetch_module, "upstream_dir", lambda: tmp_path / "project" / "data" / "upstream")
    return tmp_path / "project" / "data" / "samples"


def test_leftovers_of_a_killed_fetch_are_not_taken_as_complete(project, upstream):
    (project / ".partial" / "musique").mkdir(parents=True)
    (project / ".partial" / "musique" / "musique.json").write_text("[]")
    (project / "musique").mkdir()
    (project / "musique" / "musique.json").write_text("[")  # a half-written set of some other tool
    lines = ensure_samples(project, ["musique"])
    assert "fetching the sample sets musique" in "\n".join(lines)
    rel = Path("musique", "musique.json")
    assert (project / rel).read_bytes() == (SHARED_DATA / rel).read_bytes()
    assert not (project / ".partial").exists()


def test_samples_copied_in_by_hand_are_checked_and_used_without_a_download(project, upstream):
    _copy_samples(project)
    lines = ensure_samples(project)
    assert upstream.requests == [] and len(lines) == 3
    assert all(is_complete(project, n) for n in SAMPLE_SETS)
    assert ensure_samples(project) == []  # stamped: nothing more to say


def test_a_fetched_set_changed_afterwards_is_refused(project, upstream):
    ensure_samples(project, ["hotpotqa"])
    path = project / "hotpotqa" / "hotpotqa.json"
    path.write_text(path.read_text().replace('"type": ""', '"type": "bridge"', 1))
    with pytest.raises(DataError, match=r"(?s)changed after it was fetched.*hotpotqa: field 'type' differs in 1 of 84"):
        ensure_samples(project, ["hotpotqa"])


def test_a_folder_the_user_chose_is_never_fetched_into(tmp_path, monkeypatch):
    _offline(monkeypatch, tmp_path / "hf")
    assert ensure_samples(tmp_path / "elsewhere") == []
    assert not (tmp_path / "elsewhere").exists()


def test_offline_fetch_fails_fast_naming_both_ways_out_and_leaves_no_folder(project, monkeypatch, tmp_path):
    _offline(monkeypatch, tmp_path / "hf")
    t0 = time.monotonic()
    with pytest.raises(DataError) as exc:
        ensure_samples(project)
    assert time.monotonic() - t0 < 15
    msg = str(exc.value)
    assert "KGIR_DATA_DIR" in msg and f"`{FETCH_COMMAND}`" in msg and "could not reach http://127.0.0.1:" in msg
    assert not (tmp_path / "project").exists()  # neither data/samples/ nor data/upstream/ nor data/


def test_hub_offline_mode_with_a_warm_cache_fetches_nothing_and_succeeds(tmp_path, tree, monkeypatch):
    """``HF_HUB_OFFLINE=1`` (read by the Hub's client when it is imported: a process of its own) with a Hugging
    Face cache that holds the release: no request at all, the samples derived from the cache."""
    hub = tmp_path / "hf"
    with serve(tree, hf_cache=hub) as server:
        use(server, monkeypatch)
        fetch_samples(["musique"], target=tmp_path / "warm", cache=tmp_path / "u")
    with serve(tree, hf_cache=hub) as server:
        env = {**os.environ, **server.env(), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
        out = subprocess.run([sys.executable, "-m", "kgir_lib.data_sources", "fetch", "--target", str(tmp_path / "s"),
                              "--cache", str(tmp_path / "u"), "musique"], env=env, text=True, capture_output=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert server.requests == [] and server.heads == []
    assert is_complete(tmp_path / "s", "musique") and "checksums match" in out.stdout


def test_hub_offline_mode_with_a_cold_cache_says_so_and_asks_no_host(tmp_path, tree, monkeypatch):
    with serve(tree) as server:
        use(server, monkeypatch)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        with pytest.raises(DataError, match=r"HF_HUB_OFFLINE is set and the Hugging Face cache .* does not hold "
                                            r"musique\.json of osunlp/HippoRAG_2 at main.*KGIR_DATA_DIR"):
            fetch_samples(["musique"], target=tmp_path / "s", cache=tmp_path / "u")
        assert server.requests == [] and server.heads == []


def test_a_hugging_face_token_from_the_environment_is_sent(tmp_path, upstream, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_standintoken")
    fetch_samples(["musique"], target=tmp_path / "s", cache=tmp_path / "u")
    assert upstream.tokens and set(upstream.tokens) == {"Bearer hf_standintoken"}


def _fresh_copy(tmp_path: Path) -> Path:
    """The library alone in a folder with no ../shared beside it: a stranger's clone, as far as data goes."""
    root = tmp_path / "clone"
    shutil.copytree(REPO / "kgir_lib", root / "kgir_lib", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _runner(root: Path, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("KGIR_DATA_DIR", "HF_ENDPOINT")}
    full.update(HF_HUB_CACHE=str(root.parent / "hf"), HF_HUB_OFFLINE="0")  # env may give its own
    full.update(PYTHONPATH=str(root), **env)
    return subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--validate-only"], cwd=root, env=full,
                          text=True, capture_output=True, timeout=timeout)


def test_the_runner_in_a_fresh_clone_offline_exits_within_seconds_naming_both_ways_out(tmp_path):
    root = _fresh_copy(tmp_path)
    url = f"http://127.0.0.1:{closed_port()}"
    t0 = time.monotonic()
    out = _runner(root, {"KGIR_HF_ENDPOINT": url, "KGIR_GITHUB_RAW_URL": url})
    assert time.monotonic() - t0 < 15
    assert out.returncode == 2, out.stdout + out.stderr
    assert "KGIR_DATA_DIR" in out.stderr and f"`{FETCH_COMMAND}`" in out.stderr and "Traceback" not in out.stderr
    assert not (root / "data").exists()  # no empty data/samples/ or data/upstream/ left


def test_the_runner_in_a_fresh_clone_fetches_the_samples_then_validates(tmp_path, upstream):
    root = _fresh_copy(tmp_path)
    out = _runner(root, upstream.env())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "data: fetching the sample sets" in out.stdout and "profile and data validated" in out.stdout
    assert f"data directory: {root / 'data' / 'samples'}" in out.stdout
    assert all(is_complete(root / "data" / "samples", n) for n in SAMPLE_SETS)


# ------------------------------------------------------------------ HippoRAG 2's full sets (paper scale)
def test_the_full_sets_download_through_the_same_function(tmp_path, upstream):
    got = download_hipporag2(["musique"], tmp_path / "data", timeout_s=5)
    folder = tmp_path / "data" / "musique"
    assert got == [folder / "musique.json", folder / "musique_corpus.json"]
    assert got[0].read_bytes() == upstream.tree[hf_path("musique.json")]


def test_the_full_sets_fail_fast_offline_with_a_clear_error(tmp_path, monkeypatch):
    _offline(monkeypatch, tmp_path / "hf")
    monkeypatch.delenv("KGIR_HF_ENDPOINT")
    monkeypatch.setenv("HF_ENDPOINT", os.environ["KGIR_GITHUB_RAW_URL"])  # the hub client's variable is honoured
    with pytest.raises(DataError, match="could not reach the Hugging Face hub to download osunlp/HippoRAG_2") as exc:
        download_hipporag2(["musique"], tmp_path / "dl", timeout_s=3)
    assert "Traceback" not in str(exc.value) and not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_check_set_reports_a_missing_set_without_raising(tmp_path):
    ok, problems = check_set(tmp_path, "musique")
    assert ok == [] and problems[0].startswith("musique: unknown dataset 'musique': no musique.json under")
