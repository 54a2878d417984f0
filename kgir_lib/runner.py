"""The main job: validate the profile and data, then run every notebook in order with papermill.

``python -m kgir_lib.runner --profile sample`` executes ``notebooks/NN_*.ipynb`` into
``results/<profile>/notebooks/`` (never over the source notebooks), passing
``profile`` and every ``-p NAME VALUE`` as papermill parameters. A ``-p`` name is a
config field (checked as :func:`kgir_lib.config.load_config` checks it) or one of the
notebook-only parameters in :data:`NOTEBOOK_PARAMS` (``resume``, ``methods``,
``n_boot``, ``qid``, ``dataset``); both reach every notebook.

**Where a run writes.** Without ``-p`` parameters, the profile's own run directory
``results/<profile>/`` (the committed reference results of a built-in profile). With
parameters, a scratch directory ``results/<profile>-<hash of the parameters>/``
(:func:`scratch_name`; git-ignored, figures likewise), which starts from the profile's
committed response log; ``--write-reference`` writes the profile's own directory anyway.

Paths are resolved once, here: a relative ``KGIR_DATA_DIR`` / ``KGIR_RESULTS_DIR`` /
``KGIR_FIGURES_DIR``, profile path, or ``-p`` path (``data_dir``, ``results_dir``,
``figures_dir``, ``llm_model_path``) is made absolute against the directory the
runner was started from, so the kernels (which run in ``notebooks/``) use what was
validated.

**The data.** Where the profile reads the project's default samples folder (``data/samples/``: no
``KGIR_DATA_DIR``, no ``../shared/data``, no ``data_dir``) and a sample set is not there yet, the runner
fetches it first (:func:`kgir_lib.data_sources.ensure_samples`: downloaded, derived, verified against the
committed manifest); offline that fails within seconds, naming ``KGIR_DATA_DIR`` and the fetch command.

Before anything runs (``--validate-only`` stops here): the config, every dataset it
names and their question counts (:mod:`kgir_lib.preflight`; exit code 3 when the data
holds fewer questions than asked), and for the ``openai`` backend each server's model
list (exit code 2 for any other refusal). The LLM cache is checked page by page and the
response log(s) imported before the first notebook; the cache is exported to the run's
log after every notebook, finished or failed, and a damaged cache or a failed export
stops the job. A notebook executes into ``notebooks/NN_name.partial.ipynb``
(:func:`~kgir_lib.partial_output.partial_path`, git-ignored), which replaces ``notebooks/NN_name.ipynb``
only once the notebook has finished: a notebook that fails stops the job (exit code 1) naming both
files, the partial copy with its error and the last complete output, left as it was. Everything
computed before it (cache, log, KG, tables) stays on disk, so a rerun resumes. Ctrl-C stops the
job with one line (exit code 130).

At start the runner removes what killed runs left: temporary files of atomic writes in the run
directory, and the kernel connection files and sockets of dead runs in the temporary folders
(:func:`kgir_lib.execution.sweep_stale_kernel_files`).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from .config import PROJECT_ROOT, ConfigError, load_config, profile_identity
from .data import DataError, load_dataset
from .data_sources import ensure_samples
from .preflight import QuestionShortfall, ServerError, check_question_counts, check_servers, shortfalls
from .redact import env_secrets, redact
from .run_params import (DATASET_LISTS, NAME_MAX, NOTEBOOK_PARAMS, PATH_PARAMS, WHERE_PARAMS,  # noqa: F401
                         _normalise, _parse_params, resolve_paths, scratch_name, split_params)
from .traces import remove_stale_temporaries


class ConfigFieldParameters(logging.Filter):
    """Drops papermill's "Passed unknown parameter" warning: every config field (``-p NAME VALUE``, the scratch
    ``run_name``) reaches the config through the notebook's globals (``open_notebook``), so a field that is not in
    the parameters cell is expected, not unknown."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Passed unknown parameter")


def notebooks(only: list | None = None, folder: Path | None = None) -> list:
    """The suite's notebooks ``NN_*.ipynb`` in order, optionally only those whose names start with ``only``."""
    found = sorted(Path(folder or PROJECT_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if only:
        found = [p for p in found if any(p.stem.startswith(o) for o in only)]
    return found


def validate(profile: str, params: dict | None = None) -> list:
    """Load the profile (with ``params`` as overrides) and every dataset it names; summary lines.

    Every name in ``datasets``, ``extract_datasets``, ``ablation_datasets``, ``study_datasets``
    and a ``dataset`` parameter must load, and hold as many questions as the profile asks
    (:func:`kgir_lib.preflight.check_question_counts`). Raises :class:`ConfigError` /
    :class:`DataError` (:class:`~kgir_lib.preflight.QuestionShortfall`) naming what is wrong.
    """
    from .registry import STUDY_METHODS, check_method_keys  # (here: the methods load in half a second)

    config, notebook = split_params(params or {})
    cfg = load_config(profile, **config)
    check_method_keys(cfg.eval_methods)
    check_method_keys(cfg.attribution_methods, "attribution_methods", STUDY_METHODS)
    check_method_keys(notebook.get("methods") or None, "methods")
    lines = [f"profile {cfg.profile}: {cfg.description}", f"data directory: {cfg.data_path}",
             f"results: {cfg.run_dir}"]
    named = {field: list(getattr(cfg, field)) for field in DATASET_LISTS}
    if notebook.get("dataset") is not None:
        named["dataset"] = [notebook["dataset"]]
    loaded: dict = {}
    for field, names in named.items():
        for name in names:
            if name not in loaded:
                try:
                    loaded[name] = load_dataset(name, cfg.data_path)
                except DataError as exc:
                    raise DataError(f"parameter {field!r}: {exc}") from None
    for name, ds in loaded.items():
        lines.append(f"  {name}: {len(ds.questions)} questions, {len(ds.corpus)} passages")
    check_question_counts(cfg, loaded)
    short = shortfalls(cfg, loaded)
    if short:  # allowed by the profile: said, not silent
        lines.append("  fewer questions than asked (allow_fewer_questions): " + ", ".join(
            f"{name} {present} of {asked}" for name, _, asked, present in short))
    return lines


def obtain_samples(profile: str, params: dict) -> list:
    """When the profile reads the project's default samples folder, make sure it holds every sample set (a
    notebook may be rerun on another one), fetched and verified (:func:`kgir_lib.data_sources.ensure_samples`);
    lines saying what was done. Any other data folder is left as it is."""
    return ensure_samples(load_config(profile, **split_params(params)[0]).data_path)


def error(message: str, params: dict) -> None:
    """Print ``error: <message>`` to stderr with secrets removed: the API key of the variable the run names
    (``llm_api_key_env``, else the default ``KGIR_LLM_API_KEY``) and anything that looks like a credential."""
    names = {"KGIR_LLM_API_KEY", str(params.get("llm_api_key_env") or "")}
    print(f"error: {redact(message, env_secrets(*names))}", file=sys.stderr)


INTERRUPTED = "interrupted (Ctrl-C): the job stopped; what it saved stays on disk, so a rerun resumes"


def main(argv=None) -> int:
    """The main job (module docstring); its exit code. Ctrl-C ends it with one line (:data:`INTERRUPTED`) and exit
    code 130, the kernel shut down and the response log exported on the way out, instead of a traceback."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(f"error: {INTERRUPTED}", file=sys.stderr)
        return 130


def _main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Run the notebook suite with papermill.")
    ap.add_argument("--profile", default=None, help="profile name or YAML path (default: $KGIR_PROFILE, else sample)")
    ap.add_argument("--only", nargs="+", help="notebook name prefixes, e.g. 01 02")
    ap.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="papermill parameter (YAML value) for every notebook: a config field, or one of "
                         f"{', '.join(NOTEBOOK_PARAMS)}")
    ap.add_argument("--composition", action="append", default=[], metavar="FILE.py:NAME",
                    help="a composition of one's own (kgir_lib.compose) to register in every notebook, as "
                         "path/to/file.py:NAME or package.module:NAME; name its key in -p eval_methods")
    ap.add_argument("--notebooks-dir", type=Path, default=None, help="where the NN_*.ipynb notebooks are")
    ap.add_argument("--validate-only", action="store_true", help="check the profile and data, run nothing")
    ap.add_argument("--regenerate", action="store_true",
                    help="rebuild every table and figure from the run directory with no new LLM call "
                         "(KGIR_LLM_CACHE_ONLY=1: a request missing from the cache is an error)")
    ap.add_argument("--no-server-check", action="store_true",
                    help="do not check that each openai base URL serves llm_model (GET <url>/models), e.g. to "
                         "validate a profile before its servers are started (--regenerate never checks)")
    ap.add_argument("--write-reference", action="store_true",
                    help="write into the profile's own run directory <results>/<profile>/ even with -p "
                         "parameters (without it, such a run writes a scratch directory <profile>-<hash>)")
    args = ap.parse_args(argv)
    if args.regenerate:
        os.environ["KGIR_LLM_CACHE_ONLY"] = "1"  # inherited by the papermill kernels
    profile = args.profile or os.environ.get("KGIR_PROFILE") or "sample"
    params: dict = {}
    try:
        params = {k: _normalise(k, v) for k, v in _parse_params(args.param).items()}
        profile = resolve_paths(profile, params)
        compositions = register_compositions(args.composition)
        what = {**params, "composition": compositions} if compositions else params
        scratch = None if args.write_reference else scratch_name(profile_identity(profile), what)
        if scratch:
            params["run_name"] = scratch
        for line in obtain_samples(profile, params):
            print(line, flush=True)
        for line in validate(profile, params):
            print(line)
        if not (args.no_server_check or args.regenerate):  # a cache-only run calls no server
            for line in check_servers(load_config(profile, **split_params(params)[0])):
                print(line)
    except (ConfigError, DataError, ServerError) as exc:
        error(str(exc), params)
        return 3 if isinstance(exc, QuestionShortfall) else 2
    if scratch:
        print(f"scratch run (parameters {', '.join(sorted(set(what) - {'run_name'} - set(WHERE_PARAMS)))} "
              f"given): results go to {scratch}/, the profile's own results are not touched "
              f"(--write-reference writes them)")
    if args.validate_only:
        print("profile and data validated")
        return 0
    nbs = notebooks(args.only, args.notebooks_dir)
    if args.only and not nbs:
        print(f"error: no notebook matches --only {' '.join(args.only)}", file=sys.stderr)
        return 2
    if not nbs:
        print("no notebooks found: profile and data validated, nothing to run")
        return 0
    return _run_notebooks(nbs, profile, params, "timings_regenerate.tsv" if args.regenerate else "timings.tsv")


def register_compositions(specs: list, cwd: Path | None = None) -> list:
    """Register the researcher's compositions ``specs`` (``--composition``, :func:`kgir_lib.registry.load_composition`)
    here, for the validation, and hand them to every notebook's kernel through ``$KGIR_COMPOSITIONS`` (a file's
    path made absolute against ``cwd``: the kernels run in ``notebooks/``). Returns the specs as handed on (a
    run with a composition writes a scratch directory named after them too)."""
    from .registry import COMPOSITIONS_ENV, load_composition, register

    cwd = cwd or Path.cwd()
    handed = []
    for spec in specs:
        where, _, name = spec.rpartition(":")
        if where.endswith(".py") and not Path(where).is_absolute():
            spec = f"{(cwd / where).resolve()}:{name}"
        try:
            register(load_composition(spec))
        except ValueError as exc:
            raise ConfigError(f"--composition {spec!r}: {exc}") from None
        handed.append(spec)
    if handed:
        os.environ[COMPOSITIONS_ENV] = ";".join(handed)
    return handed


def sync_log(cfg) -> None:
    """Check the run's LLM cache page by page, then import the committed response log into it (rows not
    cached yet). A damaged cache is an :class:`~kgir_lib.llm.LLMCacheError` saying how to salvage it."""
    from .llm import LLMCache
    from .llm.response_log import cache_path, sync_run_cache

    cache = LLMCache(cache_path(cfg))
    try:
        cache.check_integrity()
        inserted, _, logs = sync_run_cache(cfg, cache)
    finally:
        cache.close()
    if logs:
        print(f"response log: {inserted} response(s) imported from {' and '.join(map(str, logs))} into "
              f"{cache.path}", flush=True)


def export_log(cfg) -> bool:
    """Merge the run's LLM cache into its response log; False (with the reason on stderr) if it failed."""
    from .llm import LLMCacheError
    from .llm.response_log import export_run_cache

    try:
        rows, log = export_run_cache(cfg)
    except (LLMCacheError, OSError) as exc:
        error(f"response log not exported: {exc}", {"llm_api_key_env": cfg.llm_api_key_env})
        return False
    if rows:
        print(f"    response log: {rows} response(s) in {log}", flush=True)
    return True


def _run_notebooks(nbs: list, profile: str, params: dict, timings_file: str = "timings.tsv") -> int:
    import papermill as pm

    from .execution import QuietKernelManager, sweep_stale_kernel_files, tidy_output_notebook
    from .llm import LLMCacheError
    from .partial_output import ENGINE, failure_paths, partial_path

    config, _ = split_params(params)
    cfg = load_config(profile, **config)
    outdir = cfg.run_dir / "notebooks"
    outdir.mkdir(parents=True, exist_ok=True)
    stale = remove_stale_temporaries(cfg.run_dir, cfg.fig_dir)
    if stale:
        print(f"removed {len(stale)} temporary file(s) left by killed writes (e.g. {stale[0]})", flush=True)
    swept = sweep_stale_kernel_files()
    if swept:
        print(f"removed {len(swept)} kernel connection file(s) or socket folder(s) left by killed runs "
              f"(e.g. {swept[0]})", flush=True)
    try:
        sync_log(cfg)
    except LLMCacheError as exc:
        error(str(exc), {"llm_api_key_env": cfg.llm_api_key_env})
        return 2
    nb_params = {"profile": profile, **params}
    logging.getLogger("papermill").addFilter(ConfigFieldParameters())
    timings = []
    for nb in nbs:
        out = outdir / nb.name
        partial = partial_path(out)  # replaces `out` once finished: a failure keeps the last complete output
        t0 = time.perf_counter()
        print(f"==> {nb.name} -> {out.relative_to(PROJECT_ROOT) if out.is_relative_to(PROJECT_ROOT) else out}",
              flush=True)
        try:
            pm.execute_notebook(str(nb), str(partial), parameters=nb_params, cwd=str(nb.parent), progress_bar=False,
                                log_output=False, kernel_name="python3", kernel_manager_class=QuietKernelManager,
                                engine_name=ENGINE)
            tidy_output_notebook(partial, output_path=out)
            os.replace(partial, out)
        except pm.PapermillExecutionError as exc:
            error(f"{nb.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue}\n"
                  + failure_paths(out, partial), {"llm_api_key_env": cfg.llm_api_key_env})
            return 1
        except Exception as exc:  # kernel died, kernel missing, unreadable notebook, ...
            error(f"{nb.name} could not be executed: {type(exc).__name__}: {exc}\n"
                  + failure_paths(out, partial), {"llm_api_key_env": cfg.llm_api_key_env})
            return 1
        finally:
            exported = export_log(cfg)  # after every notebook, finished or not: a crash still leaves the log
        if not exported:  # a cache that cannot be exported is damaged: nothing more is built on it
            return 1
        timings.append((nb.name, time.perf_counter() - t0))
        print(f"    {timings[-1][1]:.0f} s", flush=True)
        with open(cfg.path("runtime", timings_file), "a") as fh:  # appended, never truncated: a log of every run
            fh.write(f"{nb.name}\t{timings[-1][1]:.1f}\n")
    total = sum(t for _, t in timings)
    print(f"done: {len(timings)} notebooks in {total:.0f} s ({total / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
