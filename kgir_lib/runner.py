"""The main job: validate the profile and data, then run every notebook in order with papermill.

``python -m kgir_lib.runner --profile sample`` executes ``notebooks/NN_*.ipynb`` into
``results/<profile>/notebooks/`` (never over the source notebooks), passing
``profile`` as the papermill parameter. A notebook that fails stops the job with
its name and the path of its partial output; everything computed before it
(cache, KG, tables) stays on disk, so a rerun resumes from the cache.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .config import PROJECT_ROOT, ConfigError, load_config
from .data import DataError, load_dataset


def notebooks(only: list | None = None, folder: Path | None = None) -> list:
    """The suite's notebooks ``NN_*.ipynb`` in order, optionally only those whose names start with ``only``."""
    found = sorted(Path(folder or PROJECT_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if only:
        found = [p for p in found if any(p.stem.startswith(o) for o in only)]
    return found


def validate(profile: str, params: dict | None = None) -> list:
    """Load the profile (with ``params`` as overrides) and every dataset it names; summary lines.

    Raises :class:`ConfigError` / :class:`DataError` naming what is wrong.
    """
    cfg = load_config(profile, **(params or {}))
    lines = [f"profile {cfg.profile}: {cfg.description}", f"data directory: {cfg.data_path}",
             f"results: {cfg.run_dir}"]
    for name in cfg.datasets:
        ds = load_dataset(name, cfg.data_path)
        lines.append(f"  {name}: {len(ds.questions)} questions, {len(ds.corpus)} passages")
    return lines


def _parse_params(pairs: list) -> dict:
    import yaml

    params = {}
    for name, value in pairs:
        try:
            params[name] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ConfigError(f"parameter {name!r}: value {value!r} is not valid YAML ({exc})") from None
    return params


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Run the notebook suite with papermill.")
    ap.add_argument("--profile", default=None, help="profile name or YAML path (default: $KGIR_PROFILE, else sample)")
    ap.add_argument("--only", nargs="+", help="notebook name prefixes, e.g. 01 02")
    ap.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="extra papermill parameter (YAML value), validated as a config field")
    ap.add_argument("--notebooks-dir", type=Path, default=None, help="where the NN_*.ipynb notebooks are")
    ap.add_argument("--validate-only", action="store_true", help="check the profile and data, run nothing")
    ap.add_argument("--regenerate", action="store_true",
                    help="rebuild every table and figure from the run directory with no new LLM call "
                         "(KGIR_LLM_CACHE_ONLY=1: a request missing from the cache is an error)")
    args = ap.parse_args(argv)
    if args.regenerate:
        os.environ["KGIR_LLM_CACHE_ONLY"] = "1"  # inherited by the papermill kernels
    profile = args.profile or os.environ.get("KGIR_PROFILE") or "sample"
    try:
        params = _parse_params(args.param)
        for line in validate(profile, params):
            print(line)
    except (ConfigError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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


def _run_notebooks(nbs: list, profile: str, params: dict, timings_file: str = "timings.tsv") -> int:
    import papermill as pm

    cfg = load_config(profile, **params)
    outdir = cfg.run_dir / "notebooks"
    outdir.mkdir(parents=True, exist_ok=True)
    nb_params = {"profile": profile, **params}
    timings = []
    for nb in nbs:
        out = outdir / nb.name
        t0 = time.perf_counter()
        print(f"==> {nb.name} -> {out.relative_to(PROJECT_ROOT) if out.is_relative_to(PROJECT_ROOT) else out}",
              flush=True)
        try:
            pm.execute_notebook(str(nb), str(out), parameters=nb_params, cwd=str(nb.parent), progress_bar=False,
                                log_output=False, kernel_name="python3")
        except pm.PapermillExecutionError as exc:
            print(f"error: {nb.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue}\n"
                  f"partial output: {out}", file=sys.stderr)
            return 1
        except Exception as exc:  # kernel died, kernel missing, unreadable notebook, ...
            print(f"error: {nb.name} could not be executed: {type(exc).__name__}: {exc}\n"
                  f"partial output (if any): {out}", file=sys.stderr)
            return 1
        timings.append((nb.name, time.perf_counter() - t0))
        print(f"    {timings[-1][1]:.0f} s", flush=True)
    total = sum(t for _, t in timings)
    print(f"done: {len(timings)} notebooks in {total:.0f} s ({total / 60:.1f} min)")
    (cfg.run_dir / timings_file).write_text("".join(f"{n}\t{t:.1f}\n" for n, t in timings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
