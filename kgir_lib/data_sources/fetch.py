"""Getting the data: one HTTP download, the samples fetched, derived and verified, HippoRAG 2's full sets.

**Samples** (:func:`fetch_samples`): each upstream file the manifest names is downloaded once: GitHub's verbatim
files into ``data/upstream/github/<repo>/<commit>/<path>``, each checked by its SHA-256 before it is kept; the
Hugging Face release files through ``huggingface_hub`` into the Hugging Face cache
(:mod:`~kgir_lib.data_sources.hub`). A set is then built in ``<target>/.partial/<name>/`` (verbatim files copied,
derived files written by :mod:`~kgir_lib.data_sources.derive`), checked against the manifest
(:func:`~kgir_lib.data_sources.checksums.check_set`), stamped, and only then renamed to ``<target>/<name>/``.
Every file is written to ``<file>.part`` and renamed when whole, so a download or a run cut off midway leaves
nothing that a later run takes as complete: a set folder exists only once it has passed every check.

**Healing**: an upstream file that is refused is gone from its cache at the moment of refusal, so the next fetch
(from the same host once it is fixed, or from another) downloads it again with no step by hand: a verbatim file
whose SHA-256 differs is never kept, a cached one that no longer matches is downloaded again, and the release files
a refused sample was derived from (their fields differ from the manifest's, a question is missing, the JSON is cut
off) are removed from the Hugging Face cache (:func:`~kgir_lib.data_sources.hub.forget`). A fetch that fails
leaves no folder it made behind (``data/samples/``, ``data/upstream/``' subfolders).

**Offline**: one connection attempt with a short connect timeout, no retry loop; an unreachable host is a
:class:`~kgir_lib.data.DataError` that names the two ways out (``KGIR_DATA_DIR``, or the fetch command on a
machine with internet) within seconds, and so is a host that accepts the connection and sends nothing for
:data:`READ_S` seconds (:data:`FULL_READ_S` for the full sets; ``$KGIR_DOWNLOAD_TIMEOUT_S`` sets both:
:func:`read_timeout`). A host that answers with an HTTP error is named so, with its status and the URL
(:class:`~kgir_lib.data_sources.errors.HTTPStatusError`). With ``HF_HUB_OFFLINE=1`` the Hugging Face files come
from its cache alone.
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
from ..redact import mask_url
from ..tls import ssl_context
from .checksums import check_set, compare, file_sha256
from .derive import derive
from .errors import DownloadError, HTTPStatusError, Unreachable
from .hub import copy_out, forget, hub_file
from .sources import FETCH_COMMAND, SAMPLE_SETS, STAMP, hf_url, manifest, set_digest, upstream_dir, upstream_of

CONNECT_S = 5.0   # an unreachable host fails within this (DNS failures at once)
READ_S = 20.0     # a server that sends nothing for this long (no answer, or stopped mid-file) is given up on
FULL_READ_S = 10.0  # the same for the full sets' Hub requests (download_hipporag2)
TIMEOUT_VARIABLE = "KGIR_DOWNLOAD_TIMEOUT_S"  # when set, the read timeout of every download, in seconds


def read_timeout(default: float) -> float:
    """Seconds a download waits for a host that sends nothing: ``$KGIR_DOWNLOAD_TIMEOUT_S`` when set, else
    ``default`` (:data:`READ_S` for the samples, :data:`FULL_READ_S` for the full sets). :class:`DataError`
    naming the variable and its value when that is not a finite number of seconds above 0."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise DataError(f"{TIMEOUT_VARIABLE}={text!r} is not a number of seconds above 0 (the read timeout of the "
                        f"downloads; unset, it is {READ_S:g} s for the samples and {FULL_READ_S:g} s for the full "
                        f"sets)")
    return value


def client(timeout_s: Optional[float] = None, connect_s: float = CONNECT_S):
    """The one HTTP client of the downloads: httpx (proxy variables honoured), redirects followed, short connect
    timeout; the read timeout ``timeout_s``, else :func:`read_timeout` of :data:`READ_S`; the process's shared TLS
    context (:func:`kgir_lib.tls.ssl_context`)."""
    import httpx

    read = read_timeout(READ_S) if timeout_s is None else timeout_s
    return httpx.Client(timeout=httpx.Timeout(read, connect=min(read, connect_s)), follow_redirects=True,
                        verify=ssl_context())


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
    answered = False
    try:
        with http.stream("GET", url) as resp:
            answered = True
            if resp.status_code != 200:
                raise HTTPStatusError(f"could not download {mask_url(url)}: it answered HTTP {resp.status_code} "
                                      f"{resp.reason_phrase}".rstrip())
            with open(part, "wb") as fh:
                for chunk in resp.iter_bytes():
                    fh.write(chunk)
                    h.update(chunk)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        part.unlink(missing_ok=True)
        raise Unreachable(f"could not reach {mask_url(url)} ({type(exc).__name__}: {exc})") from None
    except httpx.TimeoutException as exc:
        part.unlink(missing_ok=True)
        if not answered:
            raise Unreachable(f"{mask_url(url)}: the host accepted the connection but sent no answer within "
                              f"{http.timeout.read:g} s ({type(exc).__name__}); it is given up on") from None
        raise DownloadError(f"download of {mask_url(url)} broke off: nothing arrived for {http.timeout.read:g} s "
                            f"({type(exc).__name__}); nothing was kept, run the command again") from None
    except httpx.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise DownloadError(f"download of {mask_url(url)} broke off ({type(exc).__name__}: {exc}); nothing was kept, "
                            f"run the command again") from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    if sha256 and h.hexdigest() != sha256:
        part.unlink(missing_ok=True)
        raise DataError(f"{mask_url(url)}: SHA-256 {h.hexdigest()} is not the pinned file's {sha256}; nothing was kept")
    os.replace(part, dest)
    return dest


def _write(path: Path, data: bytes) -> None:
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


def _cached(http, spec: dict, upstreams: dict, cache: Path, lines: list) -> Path:
    """The upstream file of ``spec``: a Hugging Face file from the Hub's cache (downloaded into it if absent), a
    GitHub file from ``cache`` (downloaded if absent or if it no longer matches its pinned SHA-256)."""
    if spec["source"] == "hf":
        up = upstreams["hf"]
        return hub_file(http, up["repo"], up["revision"], spec["path"], lines)
    url, rel = upstream_of(spec, upstreams)
    path = cache / rel
    sha = spec.get("sha256")
    if path.is_file() and (not sha or file_sha256(path) == sha):
        return path
    download(http, url, path, sha)
    lines.append(f"  downloaded {mask_url(url)} ({path.stat().st_size:,} bytes)")
    return path


def _load_upstream(path: Path, url: str) -> object:
    """A cached upstream JSON file; one that is not valid JSON (a cut-off body) is refused."""
    try:
        return json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{mask_url(url)} is not valid JSON ({exc})") from None


def _build(http, name: str, entry: dict, upstreams: dict, folder: Path, cache: Path, lines: list,
           used: list) -> None:
    """Write set ``name`` into ``folder``: verbatim files copied from the cache, derived files written. ``used``
    receives the cached files a derived set is read from, as they are opened (what :func:`_forget` removes
    when the set is refused)."""
    for fname, spec in entry["files"].items():
        if "source" in spec:
            shutil.copyfile(_cached(http, spec, upstreams, cache, lines), folder / fname)
    if "derived_from" in entry:
        raw = {}
        for role, spec in entry["derived_from"].items():
            path = _cached(http, spec, upstreams, cache, lines)
            used.append(path)
            raw[role] = _load_upstream(path, upstream_of(spec, upstreams)[0])
        source = mask_url(upstream_of(entry["derived_from"]["questions"], upstreams)[0])
        files, absent = derive(name, entry, raw["questions"], raw["corpus"], source)
        for fname, data in files.items():
            _write(folder / fname, data)
        corpus_url = mask_url(upstream_of(entry["derived_from"]["corpus"], upstreams)[0])
        lines.append(f"  {name}: derived {entry['n_questions']} questions, {entry['n_passages']} passages; "
                     + (f"all of them in {corpus_url}" if not absent else
                        f"{absent} of the passages are not in {corpus_url} (the sample's pool is its questions' "
                        f"paragraphs, so it is unaffected)"))


def _forget(used: list, cache: Path) -> str:
    """Remove the upstream files a refused set was derived from (they carry no checksum of their own, so one of
    them is what differs); the sentence that says so."""
    if not used:
        return ""
    for path in used:
        if Path(path).is_relative_to(cache):
            Path(path).unlink(missing_ok=True)
        else:
            forget(path)
    return (f" The upstream files it was derived from were removed from their cache ({', '.join(map(str, used))}), "
            f"so the next fetch downloads them again.")


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
    command), a download broken off, or data that does not match the manifest (naming set, field, question);
    a refused upstream file is removed from its cache, and no folder this call made is left behind empty."""
    target, cache = Path(target or samples_dir()), Path(cache or upstream_dir())
    man = manifest()
    names = list(names)
    unknown = [n for n in names if n not in man["sets"]]
    if unknown:
        raise DataError(f"unknown sample set(s) {unknown}: the manifest has {sorted(man['sets'])}")
    lines: list = []
    new = [_first_missing(target), _first_missing(cache)]
    try:
        _fetch(names, man, target, cache, lines)
    except BaseException:
        shutil.rmtree(target / ".partial", ignore_errors=True)
        _prune_empty(cache, keep=cache if new[1] is None else None)
        for top in new:
            if top is not None:
                _prune_empty(top)
        raise
    shutil.rmtree(target / ".partial", ignore_errors=True)
    return lines


def _first_missing(path: Path) -> Optional[Path]:
    """The outermost folder of ``path`` (itself or an ancestor) that does not exist yet: what a fetch creates."""
    path, top = Path(path).absolute(), None
    while not path.exists():
        top, path = path, path.parent
    return top


def _prune_empty(top: Path, keep: Optional[Path] = None) -> None:
    """Remove every empty folder under ``top`` and ``top`` itself if empty (except ``keep``)."""
    if not Path(top).is_dir():
        return
    for folder, _, _ in sorted(os.walk(top), key=lambda t: -len(t[0])):
        if Path(folder) != keep:
            try:
                os.rmdir(folder)  # only when empty
            except OSError:
                pass


def _fetch(names: list, man: dict, target: Path, cache: Path, lines: list) -> None:
    with client() as http:
        for name in names:
            entry, staging = man["sets"][name], target / ".partial" / name
            shutil.rmtree(staging, ignore_errors=True)  # what a killed run left
            staging.mkdir(parents=True)
            used: list = []
            try:
                _build(http, name, entry, man["upstreams"], staging, cache, lines, used)
                ok, problems = check_set(staging, name, entry)
            except HTTPStatusError as exc:  # the host answered: no question of internet access
                shutil.rmtree(staging, ignore_errors=True)
                raise HTTPStatusError(f"could not download the data samples: {exc}") from None
            except DownloadError as exc:
                shutil.rmtree(staging, ignore_errors=True)
                raise type(exc)(offline_help(exc)) from None
            except DataError as exc:  # a derivation refused (a question missing, a file cut off)
                shutil.rmtree(staging, ignore_errors=True)
                raise DataError(f"{exc}.{_forget(used, cache)}") from None
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            if problems:
                shutil.rmtree(staging, ignore_errors=True)
                raise DataError(f"the downloaded {name} does not match the committed manifest: the upstream "
                                f"release may have changed, or the host served other files.{_forget(used, cache)}"
                                f"\n  " + "\n  ".join(p.replace(f"{staging}{os.sep}", "") for p in problems))
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


def check_full_set(name: str, files: dict, upstream: dict) -> None:
    """Check HippoRAG 2's full set ``name`` (``files``: its release file names -> their paths in the Hub's cache)
    against the committed manifest, as a fetched sample is checked: when the manifest derives a sample from these
    very files (musique, hotpotqa), the sample is derived from them and every field the suite reads must match its
    checksums (:func:`~kgir_lib.data_sources.checksums.compare`). A set that differs, or lacks a sample question, is
    a :class:`DataError` naming the set, field and question, and its files are removed from the Hub's cache. (Every
    file is also checked against the Hub's own checksum: :func:`~kgir_lib.data_sources.hub.check_cached`.)"""
    entry = manifest()["sets"].get(name) or {}
    specs = entry.get("derived_from") or {}
    if not specs or any(s.get("source") != "hf" or s["path"] not in files for s in specs.values()):
        return
    urls = {role: hf_url(upstream["repo"], upstream["revision"], s["path"]) for role, s in specs.items()}
    used = [files[s["path"]] for s in specs.values()]
    try:
        raw = {role: _load_upstream(files[s["path"]], urls[role]) for role, s in specs.items()}
        derived, _ = derive(name, entry, raw["questions"], raw["corpus"], mask_url(urls["questions"]))
        by_role = {spec["role"]: json.loads(derived[fname]) for fname, spec in entry["files"].items()
                   if spec.get("derived")}
        problems = compare(name, entry, by_role["questions"], by_role["corpus"], files[specs["questions"]["path"]],
                           files[specs["corpus"]["path"]])
    except DataError as exc:
        for path in used:
            forget(path)
        raise DataError(f"HippoRAG 2's full {name}: {exc}; its files were removed from the Hugging Face cache, so "
                        f"the next run downloads them again") from None
    if problems:
        for path in used:
            forget(path)
        raise DataError(f"HippoRAG 2's full {name} does not hold the sample's questions as the committed manifest "
                        f"does (the upstream release may have changed, or a cached file was altered); its files "
                        f"were removed from the Hugging Face cache:\n  " + "\n  ".join(problems))


def download_hipporag2(names: Iterable[str], target: Path, timeout_s: Optional[float] = None) -> list:
    """Fetch HippoRAG 2's full 1000-question release (``osunlp/HippoRAG_2``) from the Hugging Face hub, paper
    scale (``scripts/paper.sh``). The files come through ``huggingface_hub`` (its cache, offline mode, token and
    endpoint: :mod:`~kgir_lib.data_sources.hub`), are checked (against the Hub's checksum, and the sample's
    questions against the manifest: :func:`check_full_set`) and copied to ``target/<name>/`` (the layout
    :func:`kgir_lib.data.load_dataset` reads), each whole or not at all. Where the hub cannot be reached, or
    accepts the connection and does not answer, this raises :class:`DataError` within ``timeout_s`` seconds (by
    default :func:`read_timeout` of :data:`FULL_READ_S`) or little more; an HTTP error is named with its status
    and URL."""
    timeout_s = read_timeout(FULL_READ_S) if timeout_s is None else timeout_s
    up = manifest()["upstreams"]["hf"]
    got: list = []
    with client(timeout_s) as http:
        for name in names:
            files = {}
            for fname in (f"{name}.json", f"{name}_corpus.json"):
                try:
                    files[fname] = hub_file(http, up["repo"], up["revision"], fname, [], timeout_s)
                except Unreachable as exc:
                    raise DataError(f"could not reach the Hugging Face hub to download {up['repo']} ({exc}). This "
                                    f"machine may have no internet; use the samples in the data directory "
                                    f"instead.") from None
            check_full_set(name, files, up)
            got += [copy_out(path, Path(target) / name / fname) for fname, path in files.items()]
    return got
