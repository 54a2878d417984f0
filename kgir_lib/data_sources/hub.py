"""The Hugging Face side of the data: HippoRAG 2's release (``osunlp/HippoRAG_2``) through ``huggingface_hub``.

Files come through :func:`huggingface_hub.hf_hub_download` (``repo_type="dataset"``, the manifest's revision), so
everything a Hugging Face user has set is honoured: the Hub's cache (``HF_HOME``, ``HF_HUB_CACHE``; a file it
already holds is not downloaded again), ``HF_HUB_OFFLINE`` (the cache only, no request at all), a token
(``HF_TOKEN`` or a stored login) and the endpoint (``KGIR_HF_ENDPOINT``, else ``HF_ENDPOINT``, else the public hub).
The Hub's client checks each download's size and moves it into its cache only when whole.

Two things are added around it:

- **offline within seconds**: when the cache lacks a file the host is asked once first (:func:`_probe`, one HEAD
  with a short connect timeout), because the Hub's client retries an unreachable host for about half a minute
  before it gives up, and a host that accepts the connection and never answers for minutes; a host that does not
  answer within the read timeout is given up on, and one that answers with an HTTP error is named so, with its
  status and the URL (:class:`~kgir_lib.data_sources.errors.HTTPStatusError`), not as out of reach;
- **checked copies**: a file the Hub's cache hands back is checked against the checksum the Hub gave it (the
  name of its blob: the SHA-256 of an LFS file, the git blob SHA-1 of another, :func:`check_cached`); one altered
  on disk is removed from the cache and refused;
- **no leftovers**: the partial downloads (``*.incomplete``) a killed fetch left in the Hub's cache are removed at
  the next fetch (:func:`clean_incomplete`), unless a download in progress holds their lock;
- **healing**: the release files carry no checksum in the manifest (they are checked field by field once a
  sample is derived from them), so a file the derivation or the check refuses is removed from the Hub's cache
  at once (:func:`forget`); otherwise the client would hand back the same cached file on every later fetch.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Optional

from ..data import DataError
from ..redact import mask_url
from .checksums import file_sha256
from .errors import DownloadError, HTTPStatusError, Unreachable
from .sources import hf_endpoint, hf_url

REPO_TYPE = "dataset"


def cache_dir() -> str:
    """The Hub's cache folder, read from the environment when asked (``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``: the Hub's own rule). The Hub's client
    fixes its default when it is imported, so a variable set later in the process (in a notebook, by a test) would
    otherwise be ignored; every call into the client passes this folder."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    home = os.environ.get("HF_HOME") or os.path.join(xdg, "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


def offline() -> bool:
    """Whether the Hub's offline mode is on (``HF_HUB_OFFLINE`` set to 1, true, yes or on, read when asked):
    files come from its cache only."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def cached(repo: str, revision: str, filename: str) -> Optional[Path]:
    """The file in the Hub's cache at ``revision`` (a branch through its ref), or None."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, filename, cache_dir=cache_dir(), revision=revision, repo_type=REPO_TYPE)
    return Path(found) if isinstance(found, str) else None


def _probe(http, url: str) -> None:
    """One HEAD request: :class:`Unreachable` when the host cannot be reached or does not answer within the
    client's read timeout, :class:`HTTPStatusError` when it answers with an HTTP error (4xx, 5xx)."""
    import httpx

    try:
        resp = http.head(url)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise Unreachable(f"could not reach {mask_url(url)} ({type(exc).__name__}: {exc})") from None
    except httpx.TimeoutException as exc:
        raise Unreachable(f"{mask_url(url)}: the host accepted the connection but sent no answer within "
                          f"{http.timeout.read:g} s ({type(exc).__name__}); it is given up on") from None
    except httpx.HTTPError:
        return  # reachable; the Hub's client says what went wrong
    if resp.status_code >= 400:
        raise HTTPStatusError(f"{mask_url(url)} answered HTTP {resp.status_code} {resp.reason_phrase}".rstrip())


def _git_blob_sha1(path: Path) -> str:
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_cached(path: Path, url: str) -> None:
    """Check a file of the Hub's cache against the checksum the Hub gave it: its blob is named by its ETag, the
    SHA-256 of an LFS file (64 hex digits) or the git blob SHA-1 of another (40). One that differs (altered on disk)
    is removed from the cache (:func:`forget`) and is a :class:`~kgir_lib.data.DataError` naming the file and the
    URL. A cache without symlinks (its snapshot files are the blobs themselves) names no checksum: nothing to check
    against there."""
    blob = Path(path).resolve()
    name = blob.name
    if re.fullmatch(r"[0-9a-f]{64}", name):
        got, kind = file_sha256(blob), "SHA-256"
    elif re.fullmatch(r"[0-9a-f]{40}", name):
        got, kind = _git_blob_sha1(blob), "git blob SHA-1"
    else:
        return
    if got != name:
        forget(path)
        raise DataError(f"{path}: the Hugging Face cache's copy of {mask_url(url)} does not match the checksum the "
                        f"Hub gave it ({kind} {got}, expected {name}): it was changed on disk, so it was removed "
                        f"from the cache; run the command again to download it")


def clean_incomplete(repo: str) -> list:
    """Remove the partial downloads (``blobs/*.incomplete``) of dataset ``repo`` that a killed fetch left in the Hub's
    cache, each only when no download holds its lock (the Hub's client locks ``.locks/<repo>/<etag>.lock`` while it
    writes one); the files removed."""
    from filelock import FileLock, Timeout

    folder = Path(cache_dir()) / f"datasets--{repo.replace('/', '--')}"
    removed = []
    for part in sorted((folder / "blobs").glob("*.incomplete")):
        lock = FileLock(str(Path(cache_dir()) / ".locks" / folder.name / f"{part.name.split('.')[0]}.lock"))
        try:
            lock.acquire(timeout=0)
        except (Timeout, OSError):
            continue  # a download in progress (or a lock we cannot take): left to it
        try:
            part.unlink(missing_ok=True)
            removed.append(part)
        finally:
            lock.release()
    return removed


_SILENT: dict = {}  # endpoint -> the Unreachable error of its probe, in this process: asked no more


def hub_file(http, repo: str, revision: str, filename: str, lines: list, timeout_s: float = 10.0) -> Path:
    """``filename`` of dataset ``repo`` at ``revision``, from the Hub's cache or downloaded into it; the path of
    its entry in the cache, checked (:func:`check_cached`). The host is probed first (:func:`_probe`); one that
    cannot be reached or does not answer is not asked again by this process, and a file the cache holds is then
    taken from it. :class:`Unreachable` (no internet, a silent host, offline mode, each with the file not cached),
    :class:`HTTPStatusError` (the host answered with an HTTP error) and :class:`DownloadError` (the body broke off)
    name the URL and leave nothing in the cache."""
    from httpx2 import HTTPError  # the Hub client's HTTP library (huggingface-hub 2.x)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    url = hf_url(repo, revision, filename)
    clean_incomplete(repo)
    before = cached(repo, revision, filename)
    local = False  # from the cache alone: the host did not answer the probe, or did not earlier in this process
    if not offline():
        try:
            if hf_endpoint() in _SILENT:
                raise _SILENT[hf_endpoint()]
            _probe(http, url)
        except (Unreachable, HTTPStatusError) as exc:
            if isinstance(exc, Unreachable):
                _SILENT[hf_endpoint()] = exc  # one timeout a process, not one a file
            if before is None:
                raise
            local = True
            lines.append(f"  {exc}; {filename} is taken from the Hugging Face cache ({cache_dir()})")
    from huggingface_hub import constants

    # The client fixed its own offline switch when it was imported (the packaged encoder switches the environment's
    # on for its process): it follows the environment as it is now, for this call.
    was, constants.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE, offline()
    try:
        path = Path(hf_hub_download(repo, filename, repo_type=REPO_TYPE, revision=revision, endpoint=hf_endpoint(),
                                    cache_dir=cache_dir(), etag_timeout=timeout_s,
                                    local_files_only=local or offline()))
    except LocalEntryNotFoundError as exc:
        if offline():
            raise Unreachable(f"HF_HUB_OFFLINE is set and the Hugging Face cache ({cache_dir()}) does not hold "
                              f"{filename} of {repo} at {revision}") from None
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, HfHubHTTPError) and cause.response is not None:  # an answer, not a host out of reach
            raise HTTPStatusError(f"{mask_url(url)} answered HTTP {cause.response.status_code} "
                                  f"({_first_line(cause)})") from None
        raise Unreachable(f"could not reach {mask_url(url)} ({exc})") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise HTTPStatusError(f"could not download {mask_url(url)}: HTTP {status} ({_first_line(exc)})") from None
    except OSError as exc:  # the Hub client's size check ("Consistency check failed"), a broken connection
        raise DownloadError(f"download of {mask_url(url)} broke off ({type(exc).__name__}: {_first_line(exc)}); "
                            f"nothing was kept, run the command again") from None
    except HTTPError as exc:  # the client's transport errors once its retries are spent
        raise DownloadError(f"download of {mask_url(url)} broke off ({type(exc).__name__}: {_first_line(exc)}); "
                            f"nothing was kept, run the command again") from None
    finally:
        constants.HF_HUB_OFFLINE = was
    check_cached(path, url)
    if before is None or before != path:
        lines.append(f"  downloaded {mask_url(url)} ({path.stat().st_size:,} bytes) into the Hugging Face cache")
    return path


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def forget(path: Path) -> None:
    """Remove a refused file from the Hub's cache: its snapshot entry and the blob the entry links to (and the
    snapshot folder if nothing else is in it), so the next fetch downloads it again."""
    path = Path(path)
    blob = path.resolve() if path.is_symlink() else None
    path.unlink(missing_ok=True)
    if blob is not None:
        blob.unlink(missing_ok=True)
    try:
        path.parent.rmdir()  # only when empty
    except OSError:
        pass


def copy_out(source: Path, dest: Path) -> Path:
    """Copy a cached file to ``dest`` (through ``dest.part``, renamed when whole)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    shutil.copyfile(source, part)
    part.replace(dest)
    return dest
