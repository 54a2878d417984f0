"""The errors of getting the data: a download that failed, a host that cannot be reached."""
from __future__ import annotations

from ..data import DataError


class DownloadError(DataError):
    """A file could not be downloaded (HTTP error, connection broken off)."""


class Unreachable(DownloadError):
    """A host could not be reached (no internet, wrong base URL, the Hub's offline mode with the file not cached)."""


class HTTPStatusError(DownloadError):
    """A host answered with an HTTP error (its status and the URL in the message): it was reached, so this is no
    question of internet access."""
