"""The Hugging Face side of the data: HippoRAG 2's release (``osunlp/HippoRAG_2``) through ``huggingface_hub``.

Files come through :func:`huggingface_hub.hf_hub_download` (``repo_type="dataset"``, the manifest's revision), so
everything a Hugging Face user has set is honoured: the Hub's cache (``HF_HOME``, ``HF_HUB_CACHE``; a file it
already holds is not downloaded again), ``HF_HUB_OFFLINE`` (the cache only, no request at all), a token
(``HF_TOKEN`` or a stored login) and the endpoint (``KGIR_HF_ENDPOINT``, else ``HF_ENDPOINT``, else the public hub).
The Hub's client checks each download's size and moves it into its cache only when whole.

Two things are added around it:

- **offline within seconds**: when the cache lacks a file the host is asked once first (:func:`_probe`, one HEAD
  with a short connect timeout), because the Hub's client retries an unreachable host for about half a minute
  before it gives up;
- **healing**: the release files carry no checksum in the manifest (they are checked field by field once a
  sample is derived from them), so a file the derivation or the check refuses is removed from the Hub's cache
  at once (:func:`forget`); otherwise the client would hand back the same cached file on every later fetch.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from .errors import DownloadError, Unreachable
from .sources import hf_endpoint, hf_url

REPO_TYPE = "dataset"


def cache_dir() -> str:
    """The Hub's cache folder as the Hub's client reads it (``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``~/.cache/huggingface/hub``)."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def offline() -> bool:
    """Whether the Hub's offline mode is on (``HF_HUB_OFFLINE=1``): files come from its cache only."""
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


def cached(repo: str, revision: str, filename: str) -> Optional[Path]:
    """The file in the Hub's cache at ``revision`` (a branch through its ref), or None."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, filename, revision=revision, repo_type=REPO_TYPE)
    return Path(found) if isinstance(found, str) else None


def _probe(http, url: str) -> None:
    """One HEAD request: :class:`Unreachable` when the host cannot be reached (any HTTP answer will do)."""
    import httpx

    try:
        http.head(url)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise Unreachable(f"could not reach {url} ({type(exc).__name__}: {exc})") from None
    except httpx.HTTPError:
        pass  # reachable; the Hub's client says what went wrong


def hub_file(http, repo: str, revision: str, filename: str, lines: list, timeout_s: float = 10.0) -> Path:
    """``filename`` of dataset ``repo`` at ``revision``, from the Hub's cache or downloaded into it; the path of
    its entry in the cache. :class:`Unreachable` (no internet, offline mode with the file not cached) and
    :class:`DownloadError` (the Hub refused, the body broke off) name the URL and leave nothing in the cache."""
    from httpx2 import HTTPError  # the Hub client's HTTP library (huggingface-hub 2.x)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    url = hf_url(repo, revision, filename)
    before = cached(repo, revision, filename)
    if before is None and not offline():
        _probe(http, url)
    try:
        path = Path(hf_hub_download(repo, filename, repo_type=REPO_TYPE, revision=revision, endpoint=hf_endpoint(),
                                    etag_timeout=timeout_s))
    except LocalEntryNotFoundError as exc:
        if offline():
            raise Unreachable(f"HF_HUB_OFFLINE is set and the Hugging Face cache ({cache_dir()}) does not hold "
                              f"{filename} of {repo} at {revision}") from None
        raise Unreachable(f"could not reach {url} ({exc})") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise DownloadError(f"could not download {url}: HTTP {status} ({_first_line(exc)})") from None
    except OSError as exc:  # the Hub client's size check ("Consistency check failed"), a broken connection
        raise DownloadError(f"download of {url} broke off ({type(exc).__name__}: {_first_line(exc)}); nothing "
                            f"was kept, run the command again") from None
    except HTTPError as exc:  # the client's transport errors once its retries are spent
        raise DownloadError(f"download of {url} broke off ({type(exc).__name__}: {_first_line(exc)}); nothing "
                            f"was kept, run the command again") from None
    if before is None or before != path:
        lines.append(f"  downloaded {url} ({path.stat().st_size:,} bytes) into the Hugging Face cache")
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
