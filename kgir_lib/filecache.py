"""What was computed from files, kept for the rest of the process while those files stay as they were.

A dataset is parsed and checked from its JSON files in about 60 ms of CPU, and a process that validates a run, rebuilds
tables and reads the gold chains asks for the same dataset many times. :class:`FileMemo` keeps the result under the
identity of the files it was read from (path, inode, size, modification and change times; a missing file counts as
missing). A file changed less than :attr:`FileMemo.settle_s` ago is never cached: a second change within the same tick
of the file system's clock could leave all of those equal, while a change after caching moves its change time (which
no program can set back) past the cached one.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Hashable, Optional


class FileMemo:
    """A small map from (a label, the identity of some files) to a value computed from those files."""

    def __init__(self, size: int = 8, settle_s: float = 2.0) -> None:
        self.size, self.settle_s = size, settle_s
        self._held: dict = {}

    def key(self, label: Hashable, *paths: Path) -> Optional[tuple]:
        """The key of ``label`` read from ``paths``, or None (not to be cached) when one of them changed less than
        :attr:`settle_s` ago or cannot be examined."""
        now, ident = time.time_ns(), list[tuple]()
        for path in paths:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                ident.append((str(path), None))
                continue
            except OSError:
                return None
            if now - st.st_ctime_ns < self.settle_s * 1e9:
                return None
            ident.append((os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        return (label, *ident)

    def get(self, key: Optional[tuple]) -> Any:
        """The value held under ``key``, else None."""
        return None if key is None else self._held.get(key)

    def put(self, key: Optional[tuple], value: Any) -> None:
        """Hold ``value`` under ``key`` (nothing for a None key); the oldest entry goes beyond :attr:`size`."""
        if key is None:
            return
        self._held.pop(key, None)
        self._held[key] = value
        while len(self._held) > self.size:
            self._held.pop(next(iter(self._held)))
