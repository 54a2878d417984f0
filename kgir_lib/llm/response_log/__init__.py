"""The committed response log, one concern a module:

- :mod:`~kgir_lib.llm.response_log.format`: its format (gzipped JSONL, one checksummed row a call) and the sync of
  a run's cache with it (import, export, merge);
- :mod:`~kgir_lib.llm.response_log.salvage`: a damaged cache's readable rows saved into it;
- :mod:`~kgir_lib.llm.response_log.stats`: how many answers it gained and at what pace;
- :mod:`~kgir_lib.llm.response_log.cli`: ``python -m kgir_lib.llm.response_log salvage | stats``.

The package hands their names on (``from kgir_lib.llm.response_log import import_log``).
"""
from .cli import main
from .format import (FIELDS, IMPORTED_NOTE, LOG_NAME, SECONDS_DIGITS, SQLITE_HEADER, SQLITE_MAX_INT,
                     LogConflictError, cache_path, checksum, export_log, export_run_cache, import_log, import_once,
                     log_path, logged_seconds, logs_to_import, merge_into_log, read_log, sync_run_cache)
from .salvage import salvage, salvage_report
from .stats import log_stats, logged_at, stats_report

__all__ = ["main", "FIELDS", "IMPORTED_NOTE", "LOG_NAME", "SECONDS_DIGITS", "SQLITE_HEADER", "SQLITE_MAX_INT",
           "LogConflictError", "cache_path", "checksum", "export_log", "export_run_cache", "import_log", "import_once",
           "log_path", "logged_seconds", "logs_to_import", "merge_into_log", "read_log", "sync_run_cache", "salvage",
           "salvage_report", "log_stats", "logged_at", "stats_report"]
