"""The main job: validate the profile and data, then run every notebook in order with papermill.

``python -m kgir_lib.runner --profile sample`` executes ``notebooks/NN_*.ipynb`` into
``results/<profile>/notebooks/`` (never over the source notebooks), passing
``profile`` as the papermill parameter. A notebook that fails stops the job with
its name and the path of its partial output; everything computed before it
(cache, KG, tables) stays on disk, so a rerun resumes from the cache.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .config import PROJECT_ROOT, ConfigError, load_config
from .data import DataError, load_dataset


def notebooks(only: list | None = None) -> list:
    found = sorted((PROJECT_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if only:
        found = [p for p in found if any(p.stem.startswith(o) for o in only)]
    return found


def validate(profile: str) -> list:
    """Load the profile and every dataset it names; returns summary lines (raises on bad input)."""
    cfg = load_config(profile)
    lines = [f"profile {cfg.profile}: {cfg.description}", f"data directory: {cfg.data_path}"]
    for name in cfg.datasets:
        ds = load_dataset(name, cfg.data_path)
        lines.append(f"  {name}: {len(ds.questions)} questions, {len(ds.corpus)} passages")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Run the notebook suite with papermill.")
    ap.add_argument("--profile", default="sample")
    ap.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 01 02")
    ap.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="extra papermill parameter (YAML value)")
    args = ap.parse_args(argv)
    try:
        for line in validate(args.profile):
            print(line)
    except (ConfigError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    nbs = notebooks(args.only)
    if not nbs:
        print("no notebooks under notebooks/ yet: profile and data validated, nothing to run")
        return 0
    import papermill as pm
    import yaml

    cfg = load_config(args.profile)
    outdir = cfg.run_dir / "notebooks"
    outdir.mkdir(parents=True, exist_ok=True)
    params = {"profile": args.profile, **{k: yaml.safe_load(v) for k, v in args.param}}
    timings = []
    for nb in nbs:
        out = outdir / nb.name
        t0 = time.perf_counter()
        print(f"==> {nb.name} -> {out.relative_to(PROJECT_ROOT) if out.is_relative_to(PROJECT_ROOT) else out}",
              flush=True)
        try:
            pm.execute_notebook(str(nb), str(out), parameters=params, cwd=str(nb.parent), progress_bar=False,
                                log_output=False, kernel_name="python3")
        except pm.PapermillExecutionError as exc:
            print(f"error: {nb.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue}\n"
                  f"partial output: {out}", file=sys.stderr)
            return 1
        timings.append((nb.name, time.perf_counter() - t0))
        print(f"    {timings[-1][1]:.0f} s", flush=True)
    total = sum(t for _, t in timings)
    print(f"done: {len(timings)} notebooks in {total:.0f} s ({total / 60:.1f} min)")
    (cfg.run_dir / "timings.tsv").write_text("".join(f"{n}\t{t:.1f}\n" for n, t in timings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
