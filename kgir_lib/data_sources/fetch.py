"""Getting the data: one HTTP download, the samples fetched, derived and verified, HippoRAG 2's full sets.

**Samples** (:func:`fetch_samples`): each upstream file the manifest names is downloaded once into the upstream
cache (``data/upstream/<github|hf>/<repo>/<commit or revision>/<path>``), verbatim files checked by SHA-256
before they are kept; a set is then built in ``<target>/.partial/<name>/`` (verbatim files copied, derived files
written by :mod:`~kgir_lib.data_sources.derive`), checked against the manifest
(:func:`~kgir_lib.data_sources.checksums.check_set`), stamped, and only then renamed to ``<target>/<name>/``.
Every file is written to ``<file>.part`` and renamed when whole, so a download or a run cut off midway leaves
nothing that a later run takes as complete: a set folder exists only once it has passed every check.

**Offline**: one connection attempt with a short connect timeout, no retry loop; an unreachable host is a
:class:`~kgir_lib.data.DataError` that names the two ways out (``KGIR_DATA_DIR``, or the fetch command on a
machine with internet) within seconds.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Iterable, Optional

from ..config.fields import samples_dir
from ..data import DataError
from .checksums import check_set, file_sha256
from .derive import derive
from .sources import (FETCH_COMMAND, SAMPLE_SETS, STAMP, hf_url, manifest, set_digest, upstream_dir,
                      upstream_of)

CONNECT_S = 5.0   # an unreachable host fails within this (DNS failures at once)
READ_S = 60.0     # a server that stops sending mid-file


class DownloadError(DataError):
    """A file could not be downloaded (HTTP error, connection broken off)."""


class Unreachable(DownloadError):
    """A host could not be reached (no internet, wrong base URL)."""


def client(timeout_s: float = READ_S, connect_s: float = CONNECT_S):
    """The one HTTP client of the downloads: httpx (proxy variables honoured), redirects followed, short connect
    timeout."""
    import httpx

    return httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, connect_s)), follow_redirects=True)


def download(http, url: str, dest: Path, sha256: Optional[str] = None) -> Path:
    """GET ``url`` into ``dest``: streamed into ``dest.part``, renamed to ``dest`` only when the whole body arrived
    (and, with ``sha256``, its checksum matches). :class:`Unreachable` when the host cannot be reached,
    :class:`DownloadError` when the server refuses or the body breaks off, :class:`DataError` for a checksum that
    differs; none leaves a file behind."""
    import httpx

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    try:
        with http.stream("GET", url) as resp:
            if resp.status_code != 200:
                raise DownloadError(f"could not download {url}: HTTP {resp.status_code}")
            with open(part, "wb") as fh:
                for chunk in resp.iter_bytes():
                    fh.write(chunk)
                    h.update(chunk)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        part.unlink(missing_ok=True)
        raise Unreachable(f"could not reach {url} ({type(exc).__name__}: {exc})") from None
    except httpx.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise DownloadError(f"download of {url} broke off ({type(exc).__name__}: {exc}); nothing was kept, "
                            f"run the command again") from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    if sha256 and h.hexdigest() != sha256:
        part.unlink(missing_ok=True)
        raise DataError(f"{url}: SHA-256 {h.hexdigest()} is not the pinned file's {sha256}; nothing was kept")
    os.replace(part, dest)
    return dest


def _write(path: Path, data: bytes) -> None:
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


def _cached(http, spec: dict, upstreams: dict, cache: Path, lines: list) -> Path:
    """The upstream file of ``spec`` in the cache, downloaded if absent (a verbatim file's SHA-256 rechecked)."""
    url, rel = upstream_of(spec, upstreams)
    path = cache / rel
    sha = spec.get("sha256")
    if path.is_file() and (not sha or file_sha256(path) == sha):
        return path
    download(http, url, path, sha)
    lines.append(f"  downloaded {url} ({path.stat().st_size:,} bytes)")
    return path


def _load_upstream(path: Path, url: str) -> object:
    """A cached upstream JSON file; one that is not valid JSON is removed (a cut-off body) and refused."""
    try:
        return json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        path.unlink(missing_ok=True)
        raise DataError(f"{url} is not valid JSON ({exc}); the cached copy was removed, "
                        f"run the command again") from None


def _build(http, name: str, entry: dict, upstreams: dict, folder: Path, cache: Path, lines: list) -> None:
    """Write set ``name`` into ``folder``: verbatim files copied from the cache, derived files written."""
    for fname, spec in entry["files"].items():
        if "source" in spec:
            shutil.copyfile(_cached(http, spec, upstreams, cache, lines), folder / fname)
    if "derived_from" in entry:
        raw = {}
        for role, spec in entry["derived_from"].items():
            path = _cached(http, spec, upstreams, cache, lines)
            raw[role] = _load_upstream(path, upstream_of(spec, upstreams)[0])
        source = upstream_of(entry["derived_from"]["questions"], upstreams)[0]
        files, absent = derive(name, entry, raw["questions"], raw["corpus"], source)
        for fname, data in files.items():
            _write(folder / fname, data)
        corpus_url = upstream_of(entry["derived_from"]["corpus"], upstreams)[0]
        lines.append(f"  {name}: derived {entry['n_questions']} questions, {entry['n_passages']} passages; "
                     + (f"all of them in {corpus_url}" if not absent else
                        f"{absent} of the passages are not in {corpus_url} (the sample's pool is its questions' "
                        f"paragraphs, so it is unaffected)"))


def is_complete(target: Path, name: str) -> bool:
    """Whether ``target/name`` was written by :func:`fetch_samples` for the current manifest (its stamp)."""
    stamp = Path(target) / name / STAMP
    try:
        return json.loads(stamp.read_text())["manifest_sha256"] == set_digest(manifest()["sets"][name])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _stamp(folder: Path, name: str) -> None:
    _write(folder / STAMP, json.dumps({"set": name, "manifest_sha256": set_digest(manifest()["sets"][name])},
                                      indent=1).encode())


def offline_help(exc: Exception) -> str:
    """The error of a failed download: what failed and the two ways out."""
    return (f"could not download the data samples: {exc}. Either set KGIR_DATA_DIR to a folder that holds the "
            f"samples ({', '.join(f'{n}/' for n in SAMPLE_SETS)}), or on a machine with internet run "
            f"`{FETCH_COMMAND}` in the project (it writes data/samples/) and copy that folder into this project's "
            f"data/samples/ (it is checked against the manifest before use) or point KGIR_DATA_DIR at it")


def fetch_samples(names: Iterable[str] = SAMPLE_SETS, target: Optional[Path] = None,
                  cache: Optional[Path] = None) -> list:
    """Download, derive and verify the sample sets ``names`` into ``target`` (default ``data/samples/``); lines
    saying what was done. Raises :class:`DataError`: a host unreachable (naming ``KGIR_DATA_DIR`` and the fetch
    command), a download broken off, or data that does not match the manifest (naming set, field, question)."""
    target, cache = Path(target or samples_dir()), Path(cache or upstream_dir())
    man = manifest()
    names = list(names)
    unknown = [n for n in names if n not in man["sets"]]
    if unknown:
        raise DataError(f"unknown sample set(s) {unknown}: the manifest has {sorted(man['sets'])}")
    lines: list = []
    try:
        _fetch(names, man, target, cache, lines)
    finally:
        shutil.rmtree(target / ".partial", ignore_errors=True)
    return lines


def _fetch(names: list, man: dict, target: Path, cache: Path, lines: list) -> None:
    with client() as http:
        for name in names:
            entry, staging = man["sets"][name], target / ".partial" / name
            shutil.rmtree(staging, ignore_errors=True)  # what a killed run left
            staging.mkdir(parents=True)
            try:
                _build(http, name, entry, man["upstreams"], staging, cache, lines)
                ok, problems = check_set(staging, name, entry)
            except DownloadError as exc:
                shutil.rmtree(staging, ignore_errors=True)
                raise type(exc)(offline_help(exc)) from None
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            if problems:
                shutil.rmtree(staging, ignore_errors=True)
                raise DataError(f"the downloaded {name} does not match the committed manifest (the upstream files "
                                f"in {cache} may have changed; delete them to download again):\n  "
                                + "\n  ".join(p.replace(f"{staging}{os.sep}", "") for p in problems))
            _stamp(staging, name)
            final = target / name
            if final.exists():
                shutil.rmtree(final)
            os.replace(staging, final)
            lines += [f"  {line}" for line in ok]


def ensure_samples(data_dir: Path, names: Iterable[str] = SAMPLE_SETS) -> list:
    """Make sure the project's samples folder holds the sample sets among ``names``, verified; lines saying what was
    done. Nothing happens for a folder the user chose (``KGIR_DATA_DIR``, ``../shared/data``, a ``data_dir``
    parameter). A set already there is checked against the manifest (stamped if it was copied in by hand); one
    that is missing, or from an older manifest, is fetched (:func:`fetch_samples`); one that was changed after
    it was fetched is a :class:`DataError` naming the set, field and question, never used."""
    data_dir = Path(data_dir)
    if data_dir.resolve() != samples_dir().resolve():
        return []
    lines, fetch = [], []
    for name in (n for n in dict.fromkeys(names) if n in SAMPLE_SETS):
        if not (data_dir / name).is_dir():
            fetch.append(name)
            continue
        ok, problems = check_set(data_dir, name)
        if not problems:
            if not is_complete(data_dir, name):
                _stamp(data_dir / name, name)
                lines += [f"  {line}" for line in ok]
        elif is_complete(data_dir, name):
            raise DataError(f"{data_dir / name} was changed after it was fetched; `{FETCH_COMMAND} {name}` restores "
                            f"it:\n  " + "\n  ".join(problems))
        else:
            fetch.append(name)
    if fetch:
        lines.append(f"data: fetching the sample sets {', '.join(fetch)} into {data_dir} (upstream files cached in "
                     f"{upstream_dir()})")
        lines += fetch_samples(fetch, data_dir)
    return lines


def download_hipporag2(names: Iterable[str], target: Path, timeout_s: float = 10.0) -> list:
    """Fetch HippoRAG 2's full 1000-question release (``osunlp/HippoRAG_2``) from the Hugging Face hub, paper
    scale (``scripts/paper.sh``). Files land in ``target/<name>/`` (the layout :func:`kgir_lib.data.load_dataset`
    reads), through :func:`download` (whole files only). The endpoint is ``$KGIR_HF_ENDPOINT``, else
    ``$HF_ENDPOINT``, else the public hub; where it cannot be reached this raises :class:`DataError` within
    seconds. Plain HTTP, so ``HF_HUB_OFFLINE`` set by a model load elsewhere in the process does not interfere."""
    repo, revision = manifest()["upstreams"]["hf"]["repo"], manifest()["upstreams"]["hf"]["revision"]
    got = []
    with client(timeout_s) as http:
        for name in names:
            for fname in (f"{name}.json", f"{name}_corpus.json"):
                url = hf_url(repo, revision, fname)
                try:
                    got.append(download(http, url, Path(target) / name / fname))
                except Unreachable as exc:
                    raise DataError(f"could not reach the Hugging Face hub to download {repo} ({exc}). This machine "
                                    f"may have no internet; use the samples in the data directory instead.") from None
    return got
